"""Top-level runtime helpers of the public API: ``make_mesh``, ``enable_x64``
and ``default_device`` (JAX's context-manager flags), ``process_indices``,
``copy_to_host_async`` and ``print_environment_info``."""

from __future__ import annotations

import math
import platform
import sys
import warnings
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any, Generic, TypeVar

import numpy as np
from jaxlib.version import __version__ as jaxlib_version
from lamina_interpreters_pxla import backends
from lamina_interpreters_pxla.array import Array, wrap_impl
from lamina_interpreters_pxla.compiler import compile_log
from lamina_interpreters_pxla.cpp_dispatch import clear_cpp_caches
from lamina_interpreters_pxla import execution_guard
from lamina_interpreters_pxla.float_checks import checks as float_checks
from lamina_interpreters_pxla.sharding import Mesh
from lamina_tracing_core.mesh import AxisType
from lamina_linear_util import tree_util as tu
from lamina_linear_util.cache import explain_cache_misses_enabled, set_explain_cache_misses
from lamina_sharded_jit.settings import config as jit_config
from lamina_tracing_core import dtypes, trace_settings
from lamina_tracing_core.core import config as core_config

from lamina.__about__ import __version__

__all__ = ["check_tracer_leaks", "checking_leaks", "copy_to_host_async", "debug_infs", "debug_nans", "default_device", "default_matmul_precision", "default_prng_impl", "enable_checks",
           "enable_x64",
           "explain_cache_misses", "legacy_prng_key", "log_compiles", "host_count", "host_id", "host_ids", "live_arrays",
           "make_mesh", "no_execution", "no_tracing", "numpy_dtype_promotion", "numpy_rank_promotion",
           "print_environment_info", "process_indices", "softmax_custom_jvp", "threefry_partitionable"]

T = TypeVar("T")


_NO_DEFAULT: Any = object()


class ContextFlag(Generic[T]):
    """A setting used as JAX uses its config states: ``flag.value`` reads it and
    ``with flag(new_value):`` sets it for a block (restored on exit). A flag
    with a ``default`` (True for JAX's on/off flags) also takes ``with flag():``."""

    def __init__(self, name: str, read: Callable[[], T], scope: Callable[[T], Any],
                 default: T = _NO_DEFAULT):
        self._name, self._read, self._scope, self._default = name, read, scope, default

    @property
    def value(self) -> T:
        return self._read()

    def __call__(self, new_value: T = _NO_DEFAULT) -> Any:
        if new_value is _NO_DEFAULT:
            if self._default is _NO_DEFAULT:
                raise TypeError(f"{self._name.removeprefix('jax_')}: the block needs the "
                                f"setting's new value as the argument (with flag(value):)")
            new_value = self._default
        return self._scope(new_value)

    def __repr__(self) -> str:
        return f"<lamina setting {self._name}={self.value!r}>"


@contextmanager
def _x64_scope(enabled: bool = True) -> Iterator[None]:
    previous = dtypes.x64_enabled()
    dtypes.enable_x64(bool(enabled))
    try:
        yield
    finally:
        dtypes.enable_x64(previous)


def _x64_call(new_value: bool = True) -> Any:
    return _x64_scope(new_value)


#: ``with lamina.enable_x64(True):`` enables 64-bit types for a block;
#: ``lamina.enable_x64.value`` reads the setting.
enable_x64: ContextFlag[bool] = ContextFlag("jax_enable_x64", dtypes.x64_enabled, _x64_call,
                                            default=True)

#: ``with lamina.default_device(device):`` puts uncommitted data and computations
#: on ``device`` (a platform name picks that platform's first device);
#: ``lamina.default_device.value`` is the device chosen by the innermost block, or None.
default_device: ContextFlag[Any] = ContextFlag(
    "jax_default_device", lambda: backends._default_device_state.device,
    backends.default_device_scope)


def _trace_setting_flag(name: str, default: Any = _NO_DEFAULT) -> ContextFlag[Any]:
    return ContextFlag("jax_" + name, trace_settings.reader(name),
                       lambda value: trace_settings.scoped(name, value), default)


#: ``with lamina.numpy_rank_promotion('raise'):`` refuses implicit rank
#: promotion in ``lamina.numpy`` for a block ('allow', 'warn' or 'raise').
numpy_rank_promotion = _trace_setting_flag("numpy_rank_promotion")
#: ``with lamina.numpy_dtype_promotion('strict'):`` allows only Python scalars
#: to promote for a block ('standard' or 'strict').
numpy_dtype_promotion = _trace_setting_flag("numpy_dtype_promotion")
#: ``with lamina.default_matmul_precision('float32'):`` sets the precision of
#: contractions given none, for a block.
default_matmul_precision = _trace_setting_flag("default_matmul_precision")
#: ``with lamina.legacy_prng_key('error'):`` refuses raw ``uint32`` keys in
#: ``lamina.random`` for a block ('allow', 'warn' or 'error').
legacy_prng_key = _trace_setting_flag("legacy_prng_key")
#: ``with lamina.default_prng_impl('rbg'):`` makes ``random.key`` and
#: ``random.PRNGKey`` use that implementation, and raw keys read as its data,
#: for a block (not ``lamina.random.default_prng_impl()``, which reads it).
default_prng_impl = _trace_setting_flag("default_prng_impl")
#: ``with lamina.threefry_partitionable(False):`` makes Threefry keys split
#: and draw bits by JAX's original, non-partitionable scheme for a block.
threefry_partitionable = _trace_setting_flag("threefry_partitionable", default=True)
#: ``with lamina.softmax_custom_jvp(True):`` differentiates ``nn.softmax`` by
#: its custom JVP rule for a block (off: through its operations, JAX's default).
softmax_custom_jvp = _trace_setting_flag("softmax_custom_jvp", default=True)


@contextmanager
def _explain_scope(enabled: bool = True) -> Iterator[None]:
    previous = set_explain_cache_misses(bool(enabled))
    try:
        yield
    finally:
        set_explain_cache_misses(previous)


#: ``with lamina.explain_cache_misses(True):`` logs why each traced or lowered
#: program missed its cache, for a block.
explain_cache_misses: ContextFlag[bool] = ContextFlag(
    "jax_explain_cache_misses", explain_cache_misses_enabled, _explain_scope, default=True)


def _attribute_scope(owner: Any, name: str) -> Callable[[bool], Any]:
    """A context manager factory setting the bool ``owner.name`` for a block
    (restored after): the scope of a flag that is a plain attribute."""

    @contextmanager
    def scope(enabled: bool = True) -> Iterator[None]:
        previous = getattr(owner, name)
        setattr(owner, name, bool(enabled))
        try:
            yield
        finally:
            setattr(owner, name, previous)

    return scope


_log_compiles_scope = _attribute_scope(compile_log, "enabled")
_leak_check_scope = _attribute_scope(core_config, "check_tracer_leaks")
_enable_checks_scope = _attribute_scope(core_config, "enable_checks")


#: ``with lamina.log_compiles(True):`` logs each compilation (function name,
#: argument signature by path, compile time) on the ``lamina.compiles`` logger.
log_compiles: ContextFlag[bool] = ContextFlag(
    "jax_log_compiles", lambda: compile_log.enabled, _log_compiles_scope, default=True)


#: ``with lamina.check_tracer_leaks(True):`` makes a tracer of a jit,
#: make_jaxpr or vmap trace still reachable once that trace ends an error
#: (``Exception('Leaked trace ...')`` naming what holds it), for a block.
check_tracer_leaks: ContextFlag[bool] = ContextFlag(
    "jax_check_tracer_leaks", lambda: core_config.check_tracer_leaks, _leak_check_scope,
    default=True)


def _float_check_flag(name: str) -> ContextFlag[bool]:
    @contextmanager
    def scope(enabled: bool = True) -> Iterator[None]:
        previous = getattr(float_checks, name)
        set_float_check(name, bool(enabled))
        try:
            yield
        finally:
            set_float_check(name, previous)

    return ContextFlag(f"jax_debug_{name}", lambda: bool(getattr(float_checks, name)), scope,
                       default=True)


def set_float_check(name: str, enabled: bool) -> None:
    """Turns the ``nans`` or ``infs`` check on or off (``config.debug_nans``)."""
    float_checks.set(**{name: enabled})
    clear_cpp_caches()  # jaxlib's C++ dispatch cannot check results


#: ``with lamina.debug_nans(True):`` makes a NaN produced by a computation an
#: error naming the operation, for a block (``config.debug_nans``).
debug_nans = _float_check_flag("nans")
#: ``with lamina.debug_infs(True):`` does the same for infinities.
debug_infs = _float_check_flag("infs")


@contextmanager
def _no_tracing_scope(enabled: bool) -> Iterator[None]:
    previous = jit_config.no_tracing
    jit_config.update("no_tracing", bool(enabled))
    try:
        yield
    finally:
        jit_config.update("no_tracing", previous)


#: ``with lamina.no_tracing(True):`` makes a jit call that would trace (a
#: cache miss) a ``RuntimeError`` naming the function, for a block.
no_tracing: ContextFlag[bool] = ContextFlag(
    "jax_no_tracing", lambda: jit_config.no_tracing, _no_tracing_scope, default=True)


#: ``with lamina.no_execution(True):`` makes running any compiled program (a
#: jitted function, an eager operation) a ``RuntimeError`` naming it, for a
#: block; tracing, lowering and compiling still work.
no_execution: ContextFlag[bool] = ContextFlag(
    "jax_no_execution", execution_guard.execution_disallowed,
    execution_guard.no_execution_scope, default=True)


#: ``with lamina.enable_checks(True):`` type-checks every jaxpr a trace or
#: transformation produces (an ill-typed one is a ``JaxprTypeError``), for a block.
enable_checks: ContextFlag[bool] = ContextFlag(
    "jax_enable_checks", lambda: core_config.enable_checks, _enable_checks_scope, default=True)


def checking_leaks() -> Any:
    """``with lamina.checking_leaks():``: ``check_tracer_leaks(True)`` for a block."""
    return _leak_check_scope(True)


def _renamed(old: str, new: str) -> None:
    warnings.warn(f"jax.{old} has been renamed to jax.{new}. This alias will eventually be "
                  f"removed; please update your code.", stacklevel=3)


def host_id(backend: Any = None) -> int:
    """The old name of ``process_index`` (warns, as JAX does)."""
    _renamed("host_id", "process_index")
    return backends.process_index(backend)


def host_count(backend: Any = None) -> int:
    """The old name of ``process_count`` (warns, as JAX does)."""
    _renamed("host_count", "process_count")
    return backends.process_count(backend)


def host_ids(backend: Any = None) -> list[int]:
    """The old name of ``process_indices`` (warns, as JAX does)."""
    _renamed("host_ids", "process_indices")
    return process_indices(backend)


def make_mesh(axis_shapes: Sequence[int], axis_names: Sequence[str],
              axis_types: tuple[AxisType, ...] | None = None, *,
              devices: Sequence[Any] | None = None) -> Mesh:
    """A ``Mesh`` of shape ``axis_shapes`` over the first ``prod(axis_shapes)``
    devices (all devices by default), in device order. Its axes are
    ``Explicit`` unless ``axis_types`` says otherwise (``Mesh(...)`` itself
    makes ``Auto`` axes)."""
    shape = tuple(int(s) for s in axis_shapes)
    names = tuple(axis_names)
    if len(shape) != len(names):
        raise ValueError(f"make_mesh: {len(shape)} axis sizes {shape} but {len(names)} names "
                         f"{names}")
    if axis_types is None:
        axis_types = (AxisType.Explicit,) * len(names)
    devs = list(backends.devices() if devices is None else devices)
    size = math.prod(shape)
    if len(devs) < size:
        raise ValueError(f"Number of devices {len(devs)} must be >= the product of mesh_shape "
                         f"{shape}")
    grid = np.empty(len(devs[:size]), dtype=object)
    grid[:] = devs[:size]
    return Mesh(grid.reshape(shape), names, axis_types)


def live_arrays(platform: str | None = None) -> list[Array]:
    """Every array alive on ``platform``'s backend (the default backend when
    None), including ones lamina holds itself (cached constants). Each is a
    new ``Array`` over the live buffers: deleting it frees them, but it is not
    the same Python object as the array the program holds. Buffers the
    runtime keeps without a type (no aval: internal ones, such as effect
    tokens) are left out."""
    return [wrap_impl(impl) for impl in backends.get_backend(platform).live_arrays()
            if getattr(impl, "aval", None) is not None]


def process_indices(backend: Any = None) -> list[int]:
    """The sorted indices of the processes that own devices of ``backend``."""
    return sorted({int(d.process_index) for d in backends.devices(backend)})


def copy_to_host_async(x: Any) -> Any:
    """Starts copying every array leaf of ``x`` to host memory without waiting;
    returns ``x``. A later ``np.asarray`` finds the data there."""
    for leaf in tu.tree_leaves(x):
        start = getattr(leaf, "copy_to_host_async", None)
        if start is not None:
            start()
    return x


def print_environment_info(return_string: bool = False) -> str | None:
    """The versions and devices lamina runs with (printed, or returned)."""
    devs = backends.devices()
    lines = [
        f"lamina: {__version__}",
        f"jaxlib: {jaxlib_version}",
        f"numpy:  {np.__version__}",
        f"python: {sys.version}",
        f"device info: {backends.default_backend()}-{len(devs)}, "
        f"{backends.local_device_count()} local devices",
        f"process_count: {backends.process_count()}",
        f"platform: {platform.uname()}",
    ]
    text = "\n".join(lines) + "\n"
    if return_string:
        return text
    print(text)
    return None
