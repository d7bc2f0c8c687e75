"""Cached calls in C++: jaxlib's ``pjit`` function object, fed by lamina.

jaxlib offers a C++ callable (``_jax.pjit``) that keeps a cache from call
signatures (the argument tree, and per array its dtype, shape, weak type,
sharding and committed flag) to a *fastpath*: the loaded executable with what
wrapping its results needs. A call whose signature is in the cache runs
without Python; any other call goes to ``cache_miss``, the caller's Python
path (jit's in sharded-jit, pmap's here). The miss answers with the results
and, when the call was a plain one, the fastpath for its signature
(:func:`fastpath`); ``None`` keeps that signature on the Python path.

Lamina's ``Array`` wraps an ``ArrayImpl``, and the C++ path only takes
``ArrayImpl``s. The arguments are therefore parsed with
``tree_util.dispatch_registry``, in which ``Array`` is a dataclass-style node
whose one child is its ``_arr`` (read in C++, no Python call). The results'
tree is one :class:`_Results` node over the ``ArrayImpl``s the C++ path made,
whose unflatten wraps them in ``Array``s and rebuilds the caller's tree: one
Python call per call, whatever the number of results (a node per result
would cost a Python call each).

The C++ function is what ``jit`` and ``pmap`` return, with no Python frame in
front of it, so the state a call depends on besides its arguments is kept in
jaxlib configs that are part of the C++ cache key: whether a staging trace is
this thread's dynamic trace (tracing-core's ``staging_hooks``), the x64
flag (``dtypes.x64_hooks``), the trace settings (``trace_settings.hooks``),
the default device, ``set_mesh``'s context mesh and pmap's layout
(``pmap_chunked_shards``);
layers above add theirs (jit's ``disable_jit``).
A call in any other state than the one a fastpath was made in is a miss, and
the Python path stages the call, or runs it as that state says.
"""

from __future__ import annotations

import functools
import itertools
import sys
import weakref
from collections.abc import Callable, Sequence
from typing import Any, NamedTuple

from lamina_linear_util import tree_util as tu
from lamina_tracing_core import core, dtypes, trace_settings

from lamina_interpreters_pxla import backends
from lamina_interpreters_pxla._jaxlib import _jax
from lamina_interpreters_pxla.array import Array, wrap_results
from lamina_interpreters_pxla.config import config
from lamina_interpreters_pxla.layouts import has_custom_layout
from lamina_interpreters_pxla.sharding import context_mesh_hooks
from lamina_interpreters_pxla.transfer import shard_args

__all__ = ["Fastpath", "clear_cpp_caches", "fastpath", "new_cpp_function"]


class Fastpath(NamedTuple):
    """What jaxlib's C++ ``pjit`` reads (by attribute) to run a signature."""

    xla_executable: Any
    out_pytree_def: Any          # from tu.dispatch_registry, a _Results node over the results
    in_shardings: list[Any]      # one per kept argument
    out_shardings: list[Any]
    out_avals: list[Any]
    out_committed: list[bool]
    kept_var_bitvec: list[bool]  # one per flat dynamic argument
    in_device_local_layouts: list[None]
    const_args: list[Any]


def fastpath(loaded: Any, leaves: Sequence[Any], in_shardings: Sequence[Any],
             kept: Sequence[int], out: Any) -> Fastpath | None:
    """The fastpath for a call that just ran ``loaded`` on the flat dynamic
    arguments ``leaves`` (``in_shardings`` are the program's, one per flat
    argument; ``kept`` the arguments it takes) and returned the pytree
    ``out``; ``None`` if the call needed more than the C++ path does.

    The C++ path passes arguments to the executable as they are, so every
    argument must be a live lamina ``Array`` already placed as the program
    wants it (its sharding equal or equivalent to the program's: same
    devices, same tiling, e.g. a pmap result with another axis name), with
    the default layout; programs spanning other processes
    stay on the Python path. (Callers keep donating calls on their Python
    path too: it records which call consumed the buffers, for later errors.)
    """
    if not leaves or len(leaves) != len(in_shardings):
        return None
    for x, sharding in zip(leaves, in_shardings):
        if type(x) is not Array:
            return None
        impl = x._arr
        if impl.is_deleted() or has_custom_layout(impl):
            return None
        s = impl._sharding
        if s is not sharding and s != sharding and not s.is_equivalent_to(
                sharding, len(impl.aval.shape)):
            return None  # it must move (equivalent ones lay out the same buffers)
    if not all(s.is_fully_addressable for s in in_shardings):
        return None
    outs, out_def = tu.dispatch_registry.flatten(out, _is_array)
    if not all(type(o) is Array for o in outs):
        return None
    out_impls = [o._arr for o in outs]
    kept_set = set(kept)
    return Fastpath(
        xla_executable=loaded,
        out_pytree_def=_results_def(out_def, len(outs)),
        in_shardings=[in_shardings[i] for i in kept],
        out_shardings=[o._sharding for o in out_impls],
        out_avals=[o.aval for o in out_impls],
        out_committed=[bool(o._committed) for o in out_impls],
        kept_var_bitvec=[i in kept_set for i in range(len(leaves))],
        in_device_local_layouts=[None] * len(kept_set),
        const_args=[])


def _is_array(x: Any) -> bool:
    return type(x) is Array


class _Results:
    """The root of a fastpath's output tree: its children are the
    ``ArrayImpl``s the C++ path made, its node data the tree of the results
    (``None`` for a bare array, the common case, which needs no rebuild)."""

    __slots__ = ("tree", "count")

    def __init__(self, tree: Any, count: int):
        self.tree = tree
        self.count = count


def _results_def(out_def: Any, count: int) -> Any:
    bare = out_def.num_nodes == 1 and count == 1
    results = _Results(None if bare else out_def, count)
    return tu.dispatch_registry.flatten(results)[1]


tu.dispatch_registry.register_dataclass_node(Array, ["_arr"], [])
tu.dispatch_registry.register_node(_Results, lambda r: (range(r.count), r.tree), wrap_results)


def _shard_arg_fallback(x: Any, sharding: Any, layout: Any) -> Any:
    """Places an argument the C++ path cannot pass as is (it never should:
    :func:`fastpath` only accepts placed Arrays)."""
    del layout
    if type(x) is Array:
        x = x._arr
    return shard_args([x], [sharding], committed=[False], what="a cached call")[0]


def new_cpp_function(name: str, fun: Callable[..., Any], cache_miss: Callable[..., Any],
                     **attributes: Any) -> Any:
    """jaxlib's C++ jit callable over ``cache_miss`` (see the module
    docstring), wrapping ``fun`` (name, docstring, ``__wrapped__``) and
    carrying ``attributes`` (the caller's stage methods)."""
    _install_jit_states()
    # A cache of its own: it goes with the function (a shared LRU would keep
    # the executables of dead functions whose Python function lives on). The
    # key only has to be unique: the cache holds this one function.
    cpp = _jax.pjit(name, fun, cache_miss, [], [], ("lamina", next(_function_ids)),
                    tu.dispatch_registry, _shard_arg_fallback, _jax.PjitFunctionCache(8))
    functools.update_wrapper(cpp, fun, updated=())
    for attribute, value in attributes.items():
        setattr(cpp, attribute, value)
    _all_cpp_functions.add(cpp)
    return cpp


_function_ids = itertools.count()
_all_cpp_functions: weakref.WeakSet[Any] = weakref.WeakSet()


def clear_cpp_caches() -> None:
    """Forgets every fastpath, so the next call of each signature misses."""
    for cpp in list(_all_cpp_functions):
        cpp._clear_cache()


#: The parts of the C++ cache key that are not in the arguments (see the
#: module docstring); jaxlib folds every ``include_in_jit_key`` config in.
_STAGING: Any = _jax.config.Config("lamina_jit_staging", False, include_in_jit_key=True)
_X64: Any = _jax.config.Config("lamina_jit_x64", dtypes.x64_state.enabled,
                               include_in_jit_key=True)
_PMAP_CHUNKED: Any = _jax.config.Config("lamina_pmap_chunked_shards",
                                        config.pmap_chunked_shards, include_in_jit_key=True)
_TRACE_SETTINGS: Any = _jax.config.Config("lamina_jit_trace_settings", trace_settings.state.key,
                                          include_in_jit_key=True)
core.staging_hooks.append(_STAGING.set_local)
dtypes.x64_hooks.append(_X64.set_global)
trace_settings.hooks.append(_TRACE_SETTINGS.set_global)
_DEFAULT_DEVICE: Any = _jax.config.Config("lamina_jit_default_device", None,
                                          include_in_jit_key=True)
backends.default_device_hooks.append(_DEFAULT_DEVICE.set_local)
_CONTEXT_MESH: Any = _jax.config.Config("lamina_jit_context_mesh", None,
                                        include_in_jit_key=True)
context_mesh_hooks.append(_CONTEXT_MESH.set_local)


def _mirror_runtime_setting(name: str, value: Any) -> None:
    if name == "pmap_chunked_shards":
        _PMAP_CHUNKED.set_global(value)


config.update_hooks.append(_mirror_runtime_setting)

_states_installed = False


def _install_jit_states() -> None:
    """The C++ jit reads three process-wide configuration slots (x64,
    disable_jit, a post-call hook) and refuses to run until they are set.
    JAX sets them when it is imported; lamina sets placeholders only if JAX
    has not, and JAX, imported later, takes the slots back. Lamina's own
    state never lives in these slots but in the key configs above, so
    whoever holds the slots does not change what a lamina call means (except
    that ``jax.disable_jit`` then reaches lamina's functions too)."""
    global _states_installed
    if _states_installed:
        return
    _states_installed = True
    make_config = _jax.config.Config
    if "jax._src.config" not in sys.modules:
        _jax.jax_jit.set_enable_x64_state(make_config("lamina_slot_x64", False))
        _jax.jax_jit.set_disable_jit_state(make_config("lamina_slot_disable_jit", False))
    if "jax._src.api" not in sys.modules:
        _jax.jax_jit.set_post_hook_state(make_config("lamina_slot_post_hook", None))
