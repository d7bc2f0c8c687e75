"""``lamina.config``: one place to read and change lamina's settings.

Each setting lives in the layer that uses it; this module only routes
``config.update(name, value)`` to that layer. JAX's flag names work too
(``config.update("jax_enable_x64", True)``). Every setting also has an
environment variable giving its initial value:

========================  ================================  ====================
setting                   environment variable              owner
========================  ================================  ====================
enable_x64                LAMINA_ENABLE_X64                 tracing-core dtypes
platforms                 LAMINA_PLATFORMS                  runtime backends
num_cpu_devices           LAMINA_NUM_CPU_DEVICES            runtime backends
explain_cache_misses      LAMINA_EXPLAIN_CACHE_MISSES       linear-util cache
pmap_chunked_shards       LAMINA_PMAP_CHUNKED_SHARDS        runtime pmap
validate_debug_info       LAMINA_VALIDATE_DEBUG_INFO        tracing-core core
check_tracer_leaks        (none; off)                       tracing-core core
enable_checks             LAMINA_ENABLE_CHECKS              tracing-core core
disable_jit               LAMINA_DISABLE_JIT                sharded-jit
use_shardy_partitioner    LAMINA_USE_SHARDY_PARTITIONER     sharded-jit
no_tracing                LAMINA_NO_TRACING                 sharded-jit
no_execution              LAMINA_NO_EXECUTION               runtime execution_
                                                            guard
include_full_tracebacks_  LAMINA_INCLUDE_FULL_TRACEBACKS_   tracing-core
in_locations              IN_LOCATIONS                      source_info
compilation_cache_dir     LAMINA_COMPILATION_CACHE_DIR      runtime persistent_cache
debug_nans, debug_infs    (none; off)                       runtime float_checks
log_compiles              (none; off)                       runtime compiler
persistent_trace_cache    LAMINA_PERSISTENT_TRACE_CACHE     sharded-jit
persistent_trace_cache_   LAMINA_PERSISTENT_TRACE_CACHE_    persistent_trace
verify                    VERIFY
numpy_rank_promotion      LAMINA_NUMPY_RANK_PROMOTION       tracing-core
                                                            trace_settings
numpy_dtype_promotion     LAMINA_NUMPY_DTYPE_PROMOTION      tracing-core
                                                            trace_settings
default_matmul_precision  LAMINA_DEFAULT_MATMUL_PRECISION   tracing-core
                                                            trace_settings
auto_pcast                LAMINA_AUTO_PCAST                 tracing-core
                                                            trace_settings
legacy_prng_key           LAMINA_LEGACY_PRNG_KEY            tracing-core
                                                            trace_settings
default_prng_impl         LAMINA_DEFAULT_PRNG_IMPL          tracing-core
                                                            trace_settings
threefry_partitionable    LAMINA_THREEFRY_PARTITIONABLE     tracing-core
                                                            trace_settings
softmax_custom_jvp        LAMINA_SOFTMAX_CUSTOM_JVP         tracing-core
                                                            trace_settings
high_dynamic_range_gumbel LAMINA_HIGH_DYNAMIC_RANGE_GUMBEL  tracing-core
                                                            trace_settings
transfer_guard,           (none; jaxlib's default, allow)   runtime
transfer_guard_host_to_                                     transfer_guard
device, ..._device_to_
device, ..._device_to_host
array_garbage_collection_ (none; jaxlib's default, allow)   runtime garbage_
guard                                                       collection_guard
thread_guard              (none; off; acts through the      runtime thread_guard
                          lamina.thread_guard context)
========================  ================================  ====================

The persistent compilation cache's other settings (JAX's names, with and
without the ``jax_`` prefix) are listed in
``lamina_interpreters_pxla.persistent_cache``.
"""

from __future__ import annotations

import functools
import itertools
import sys
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from lamina_interpreters_pxla.compiler import compile_log
from lamina_interpreters_pxla.config import config as runtime_config
from lamina_interpreters_pxla.float_checks import checks as float_checks
from lamina_interpreters_pxla.persistent_cache import cache_config
from lamina_interpreters_pxla import (
    execution_guard,
    garbage_collection_guard,
    thread_guard,
    transfer_guard,
)
from lamina_linear_util.cache import explain_cache_misses_enabled, set_explain_cache_misses
from lamina_sharded_jit import config as jit_config
from lamina_sharded_jit import persistent_trace
from lamina_tracing_core import dtypes, source_info, trace_settings
from lamina_tracing_core.core import config as core_config

from lamina.runtime_api import set_float_check


@dataclass(frozen=True)
class _Setting:
    read: Callable[[], Any]
    write: Callable[[Any], None]


def _x64() -> _Setting:
    return _Setting(dtypes.x64_enabled, lambda v: dtypes.enable_x64(bool(v)))


def _runtime(name: str) -> _Setting:
    return _Setting(lambda: getattr(runtime_config, name),
                    lambda v: runtime_config.update(name, v))


def _explain() -> _Setting:
    def write(value: Any) -> None:
        set_explain_cache_misses(bool(value))

    return _Setting(explain_cache_misses_enabled, write)


def _core_flag(name: str) -> _Setting:
    return _Setting(lambda: getattr(core_config, name),
                    lambda v: setattr(core_config, name, bool(v)))


def _trace_setting(name: str) -> _Setting:
    return _Setting(trace_settings.reader(name), lambda v: trace_settings.update(name, v))


def _jit_flag(name: str) -> _Setting:
    return _Setting(lambda: getattr(jit_config, name), lambda v: jit_config.update(name, v))


def _float_check(name: str) -> _Setting:
    return _Setting(lambda: getattr(float_checks, name),
                    lambda value: set_float_check(name, bool(value)))


def _transfer_guard(direction: str) -> _Setting:
    return _Setting(functools.partial(transfer_guard.current_level, direction),
                    functools.partial(transfer_guard.set_global_level, direction))


def _all_transfer_guards() -> str | None:
    """The level every direction has (JAX's set-only ``jax_transfer_guard``
    reads back what was set); None when the directions differ."""
    levels = {transfer_guard.current_level(d) for d in transfer_guard.DIRECTIONS}
    return levels.pop() if len(levels) == 1 else None


def _set_all_transfer_guards(level: Any) -> None:
    transfer_guard.check_level(level)
    for direction in transfer_guard.DIRECTIONS:
        transfer_guard.set_global_level(direction, level)


_SETTINGS: dict[str, _Setting] = {
    "enable_x64": _x64(),
    "platforms": _runtime("platforms"),
    "num_cpu_devices": _runtime("num_cpu_devices"),
    "explain_cache_misses": _explain(),
    "pmap_chunked_shards": _runtime("pmap_chunked_shards"),
    "validate_debug_info": _core_flag("validate_debug_info"),
    "check_tracer_leaks": _core_flag("check_tracer_leaks"),
    "enable_checks": _core_flag("enable_checks"),
    "disable_jit": _jit_flag("disable_jit"),
    "use_shardy_partitioner": _jit_flag("use_shardy_partitioner"),
    "no_tracing": _jit_flag("no_tracing"),
    "no_execution": _Setting(execution_guard.execution_disallowed,
                             execution_guard.set_no_execution),
    "persistent_trace_cache": _jit_flag("persistent_trace_cache"),
    "persistent_trace_cache_verify": _jit_flag("persistent_trace_cache_verify"),
    "include_full_tracebacks_in_locations": _Setting(
        source_info.include_full_tracebacks_in_locations,
        lambda v: source_info.set_include_full_tracebacks_in_locations(bool(v))),
    "debug_nans": _float_check("nans"),
    "debug_infs": _float_check("infs"),
    "log_compiles": _Setting(lambda: compile_log.enabled,
                             lambda v: setattr(compile_log, "enabled", bool(v))),
    **{name: _trace_setting(name) for name in
       ("numpy_rank_promotion", "numpy_dtype_promotion", "default_matmul_precision",
        "auto_pcast", "legacy_prng_key", "default_prng_impl", "threefry_partitionable",
        "softmax_custom_jvp", "high_dynamic_range_gumbel")},
}
_SETTINGS.update({f"transfer_guard_{direction}": _transfer_guard(direction)
                  for direction in transfer_guard.DIRECTIONS})
_SETTINGS["transfer_guard"] = _Setting(_all_transfer_guards, _set_all_transfer_guards)
_SETTINGS["array_garbage_collection_guard"] = _Setting(
    garbage_collection_guard.current_level, garbage_collection_guard.set_global_level)
_SETTINGS["thread_guard"] = _Setting(thread_guard.current, thread_guard.set_global)
_SETTINGS.update({name: _Setting(functools.partial(cache_config.read, name),
                                 functools.partial(cache_config.update, name))
                  for name in cache_config.names()})

#: JAX's flag names for the same settings.
_ALIASES = {
    "jax_enable_x64": "enable_x64", "jax_platforms": "platforms", "jax_platform_name": "platforms",
    "jax_num_cpu_devices": "num_cpu_devices", "jax_explain_cache_misses": "explain_cache_misses",
    "jax_disable_jit": "disable_jit", "jax_use_shardy_partitioner": "use_shardy_partitioner",
    "jax_include_full_tracebacks_in_locations": "include_full_tracebacks_in_locations",
    **{f"jax_{name}": name for name in cache_config.names()},
    "jax_debug_nans": "debug_nans", "jax_debug_infs": "debug_infs",
    "jax_log_compiles": "log_compiles",
    "jax_no_tracing": "no_tracing",
    "jax_no_execution": "no_execution",
    "jax_check_tracer_leaks": "check_tracer_leaks",
    "jax_enable_checks": "enable_checks",
    "jax_numpy_rank_promotion": "numpy_rank_promotion",
    "jax_numpy_dtype_promotion": "numpy_dtype_promotion",
    "jax_default_matmul_precision": "default_matmul_precision",
    "jax_auto_pcast": "auto_pcast",
    "jax_legacy_prng_key": "legacy_prng_key",
    "jax_default_prng_impl": "default_prng_impl",
    "jax_threefry_partitionable": "threefry_partitionable",
    "jax_softmax_custom_jvp": "softmax_custom_jvp",
    "jax_high_dynamic_range_gumbel": "high_dynamic_range_gumbel",
    "jax_transfer_guard": "transfer_guard",
    "jax_array_garbage_collection_guard": "array_garbage_collection_guard",
    "jax_thread_guard": "thread_guard",
    **{f"jax_transfer_guard_{d}": f"transfer_guard_{d}" for d in transfer_guard.DIRECTIONS},
}


#: settings that do not change what tracing produces (the persistent trace
#: cache's key leaves them out)
_NOT_TRACING = frozenset({"explain_cache_misses", "validate_debug_info", "disable_jit",
                          "check_tracer_leaks", "enable_checks", "no_tracing", "no_execution",
                          "log_compiles",
                          "persistent_trace_cache", "persistent_trace_cache_verify",
                          "transfer_guard", "array_garbage_collection_guard", "thread_guard",
                          *(f"transfer_guard_{d}" for d in transfer_guard.DIRECTIONS),
                          *cache_config.names()})


def _tracing_settings() -> tuple[tuple[str, str], ...]:
    return tuple((name, repr(setting.read())) for name, setting in _SETTINGS.items()
                 if name not in _NOT_TRACING)


persistent_trace.register_key_part(_tracing_settings)


def _setting(name: str) -> _Setting:
    key = _ALIASES.get(name, name.removeprefix("lamina_"))
    if key not in _SETTINGS:
        known = sorted(_SETTINGS) + sorted(_ALIASES)
        raise AttributeError(f"lamina.config: unknown setting {name!r}; known: {known}")
    return _SETTINGS[key]


class Config:
    """``config.update(name, value)``, ``config.read(name)`` and ``config.<name>``."""

    def update(self, name: str, value: Any) -> None:
        _setting(name).write(value)

    def read(self, name: str) -> Any:
        return _setting(name).read()

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__"):
            raise AttributeError(name)
        return self.read(name)

    def names(self) -> list[str]:
        return sorted(_SETTINGS)

    def config_with_absl(self) -> None:
        """Defines an absl flag for each of JAX's setting names
        (``--jax_enable_x64``, ...), its default the setting's value now; once
        absl has parsed the command line (``absl.app.run``), the flags given
        there update the settings. JAX's ``config.config_with_absl``. Needs
        ``absl-py``."""
        flags, app = _absl("config_with_absl")
        _define_absl_flags(flags)
        app.call_after_init(lambda: _apply_absl_flags(flags.FLAGS))

    def parse_flags_with_absl(self) -> None:
        """Reads the ``--jax_*`` flags of ``sys.argv`` (before a ``--``) now,
        leaving every other argument to the program: JAX's
        ``config.parse_flags_with_absl``, which test files call at import.
        Needs ``absl-py``."""
        flags, _ = _absl("parse_flags_with_absl")
        _define_absl_flags(flags)
        ours = [a for a in itertools.takewhile(lambda a: a != "--", sys.argv[1:])
                if a.startswith("--jax")]
        flags.FLAGS([sys.argv[0] if sys.argv else "", *ours], known_only=True)
        _apply_absl_flags(flags.FLAGS)


def _absl(caller: str) -> tuple[Any, Any]:
    try:
        # absl-py is the optional `absl` extra: imported only when its flags are wanted
        from absl import app, flags
    except ImportError as e:
        raise ImportError(f"lamina.config.{caller} needs absl-py (pip install absl-py)") from e
    return flags, app


def _define_absl_flags(flags: Any) -> None:
    """One flag per JAX setting name, typed by the setting's current value;
    names already defined (a second call) are left as they are."""
    define = {bool: flags.DEFINE_bool, int: flags.DEFINE_integer, float: flags.DEFINE_float}
    for name, key in _ALIASES.items():
        if name in flags.FLAGS:
            continue
        value = _SETTINGS[key].read()
        kind = type(value)
        definer = define.get(kind, flags.DEFINE_string)
        default = value if kind in define or value is None else str(value)
        definer(name, default, f"lamina's {key} setting (JAX's {name})")


def _apply_absl_flags(values: Any) -> None:
    for name in _ALIASES:
        if name in values and values[name].present:
            config.update(name, values[name].value)


config = Config()
update = config.update
read = config.read
config_with_absl = config.config_with_absl
parse_flags_with_absl = config.parse_flags_with_absl


def __getattr__(name: str) -> Any:
    """``lamina.config.enable_x64`` reads a setting, like ``config.read``."""
    if name.startswith("__"):
        raise AttributeError(name)
    return config.read(name)
