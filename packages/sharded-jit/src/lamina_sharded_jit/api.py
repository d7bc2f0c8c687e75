"""``jit`` and ``eval_shape``: one code path for plain jit, jit with shardings
and ``sharded_jit``.

``jit(fun, ...)`` computes once what its own arguments determine
(:class:`JitInfo`: the function's name, source and signature, the resolved
static/donated argnums and argnames, the sharding specification trees).
Each call then infers only what depends on the arguments
(:func:`infer_params`): the debug info naming the flat arguments, the
static arguments baked into the function, the flat avals, the sharding and
donation of each flat argument, and the traced jaxpr (from the tracing
cache, :mod:`lamina_sharded_jit.tracing`). The call binds ``pjit_p``, so jit
nests inside every transformation; at top level it runs the compiled program
directly and records a :class:`~lamina_sharded_jit.dispatch.FastEntry`, so
a later call with the same signature only checks the arguments, runs the
executable and wraps the outputs. ``jit`` hands out jaxlib's C++ function in
front of all this (``lamina_interpreters_pxla.cpp_dispatch``): once a plain
call has run, its signature is served in C++ without entering Python.

``jit(f).trace(*args)``, ``.lower(*args)`` and ``.eval_shape(*args)`` give
the ahead-of-time stages (:mod:`lamina_sharded_jit.stages`) and abstract
evaluation; ``eval_shape(f, *args)`` shares the tracing cache with
``jit(f)(*args)``.
"""

from __future__ import annotations

import dataclasses
import functools
import inspect
import weakref
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from lamina_interpreters_pxla.array import Array, DeletedArrayError, deleted_message
from lamina_interpreters_pxla.caches import clear_caches as clear_runtime_caches
from lamina_interpreters_pxla.cpp_dispatch import Fastpath, fastpath, new_cpp_function
from lamina_interpreters_pxla.sharding import ShardingError, single_device_sharding
from lamina_linear_util import api_util
from lamina_linear_util import tree_util as tu
from lamina_linear_util.linear_util import annotate, wrap_init
from lamina_tracing_core import api as tc_api
from lamina_tracing_core import core, dtypes
from lamina_tracing_core.avals import ShapedArray, get_aval
from lamina_tracing_core.core import EvalTrace, Tracer
from lamina_tracing_core.jaxpr import ClosedJaxpr

from lamina_sharded_jit.settings import jit_disabled
from lamina_sharded_jit.dispatch import (
    MISS,
    FastEntry,
    at_top_level,
    canonical_aval,
    host_or_array,
)
from lamina_sharded_jit.execution import CompiledProgram, clear_program_caches, pjit_call
from lamina_sharded_jit.jaxpr_cache import clear_jaxpr_caches
from lamina_sharded_jit.primitive import pjit_p
from lamina_sharded_jit.shardings import (
    UNSPECIFIED,
    canonicalize_leaf,
    is_unspecified,
    resolve_leaf,
)
from lamina_sharded_jit.tracing import fresh_tracing, trace_pjit, tracing_context

__all__ = ["JitInfo", "Jitted", "PjitParams", "ShapeDtypeStruct", "clear_caches", "eval_shape",
           "infer_params", "jit", "make_jaxpr"]

_flatten = tu.registry.flatten
_trace_state = core._state
#: every live Jitted, for clear_caches
_all_jitted: weakref.WeakSet[Jitted] = weakref.WeakSet()


class ShapeDtypeStruct(tc_api.ShapeDtypeStruct):
    """A shape, dtype, weak type and (when known) sharding: what
    ``eval_shape`` returns per output, and an abstract argument to
    ``eval_shape``/``trace``/``lower``."""

    __slots__ = ("sharding",)

    def __init__(self, shape: Sequence[int], dtype: Any, weak_type: bool = False,
                 sharding: Any = None):
        super().__init__(shape, dtype, weak_type)
        self.sharding = sharding

    def __repr__(self) -> str:
        weak = ", weak_type=True" if self.weak_type else ""
        sharding = f", sharding={self.sharding!r}" if self.sharding is not None else ""
        return f"ShapeDtypeStruct(shape={self.shape}, dtype={self.dtype.name}{weak}{sharding})"

    __hash__ = tc_api.ShapeDtypeStruct.__hash__


# --- what jit(...) knows ---------------------------------------------------------------------
@dataclass(frozen=True)
class JitInfo:
    """The facts ``jit(fun, ...)`` determines once, before any call."""

    fun: Callable[..., Any]
    fun_name: str
    fun_sourceinfo: str | None
    fun_signature: inspect.Signature | None
    static_argnums: tuple[int, ...]
    static_argnames: tuple[str, ...]
    donate_argnums: tuple[int, ...]
    donate_argnames: tuple[str, ...]
    in_shardings: Any          # the prefix tree, leaves canonicalized; None if not given
    out_shardings: Any         # likewise
    has_in_shardings: bool
    has_out_shardings: bool
    keep_unused: bool
    inline: bool
    compiler_options_kvs: tuple[tuple[str, Any], ...]
    api_name: str = "jit"

    @property
    def has_static(self) -> bool:
        return bool(self.static_argnums or self.static_argnames)


def _canonical_tree(tree: Any, what: str) -> Any:
    leaves, treedef = tu.none_leaf_registry.flatten(tree)
    return treedef.unflatten([canonicalize_leaf(x, where=f"{what} entry {i}")
                              for i, x in enumerate(leaves)])


def _device_sharding(device: Any, backend: str | None) -> Any:
    from lamina_interpreters_pxla.backends import get_backend
    if device is not None and backend is not None:
        raise ValueError("can't specify both a device and a backend for jit, got "
                         f"device={device!r} and backend={backend!r}")
    if device is None:
        if backend is None:
            return None
        device = get_backend(backend).local_devices()[0]
    return single_device_sharding(device)


def make_jit_info(fun: Callable[..., Any], *, in_shardings: Any, out_shardings: Any,
                  static_argnums: Any, static_argnames: Any, donate_argnums: Any,
                  donate_argnames: Any, keep_unused: bool, device: Any, backend: str | None,
                  inline: bool, compiler_options: dict[str, Any] | None,
                  api_name: str = "jit") -> JitInfo:
    """Resolves ``jit``'s arguments (errors name the function)."""
    api_util.check_callable(fun)
    donate_nums, donate_names, static_nums, static_names = api_util.resolve_argnums(
        fun, donate_argnums, donate_argnames, static_argnums, static_argnames,
        api_name=api_name)
    name = api_util.fun_name(fun)
    has_in = in_shardings is not None and not is_unspecified(in_shardings)
    has_out = out_shardings is not None and not is_unspecified(out_shardings)
    in_tree = _canonical_tree(in_shardings, f"{api_name}({name}) in_shardings") if has_in \
        else None
    out_tree = _canonical_tree(out_shardings, f"{api_name}({name}) out_shardings") if has_out \
        else None
    pinned = _device_sharding(device, backend)
    if pinned is not None:
        if has_in or has_out:
            raise ValueError(f"{api_name}({name}): pass either device/backend or "
                             "in_shardings/out_shardings, not both")
        in_tree, out_tree, has_in, has_out = pinned, pinned, True, True
    kvs = tuple(sorted((compiler_options or {}).items()))
    return JitInfo(fun, name, api_util.fun_sourceinfo(fun), api_util.fun_signature(fun),
                   static_nums, static_names, donate_nums, donate_names, in_tree, out_tree,
                   has_in, has_out, bool(keep_unused), bool(inline), kvs, api_name)


# --- what each call infers -------------------------------------------------------------------------
@dataclass(frozen=True)
class PjitParams:
    """Everything one call of a jitted function needs (see :func:`infer_params`)."""

    params: dict[str, Any]          # pjit_p's params
    consts: tuple[Any, ...]         # tracers the body closes over (leading arguments)
    args_flat: tuple[Any, ...]      # the flat dynamic arguments
    in_tree: Any                    # structure of (dynamic args, dynamic kwargs)
    out_tree: Any
    in_avals: tuple[ShapedArray, ...]
    arg_names: tuple[str | None, ...]
    in_shardings: tuple[Any, ...]   # per flat argument (explicit or UNSPECIFIED)
    donated_invars: tuple[bool, ...]
    static_key: Any

    @property
    def jaxpr(self) -> ClosedJaxpr:
        jaxpr: ClosedJaxpr = self.params["jaxpr"]
        return jaxpr

    @property
    def out_shardings(self) -> tuple[Any, ...]:
        return tuple(self.params["out_shardings"])


def _abstractify(x: Any, name: str | None, fun_desc: str) -> ShapedArray:
    if type(x) is Array:
        impl = x._arr
        if impl.is_deleted():
            raise DeletedArrayError(deleted_message(impl, f"{fun_desc}: argument {name}"))
        return canonical_aval(impl.aval)
    if isinstance(x, Tracer):
        return x.aval
    if isinstance(x, tc_api.ShapeDtypeStruct):
        return canonical_aval(ShapedArray(x.shape, x.dtype, x.weak_type))
    try:
        aval = get_aval(x)
    except TypeError:
        # JAX's wording (code matches on it), with lamina's function name
        raise TypeError(
            f"Error interpreting argument to {fun_desc} as an abstract array. The "
            f"problematic value is of type {type(x)} ({_short(x)}) and was passed to the "
            f"function at path {name}.\nThis typically means that a jit-wrapped function "
            "was called with a non-array argument, and this argument was not marked as "
            "static using the static_argnums or static_argnames parameters of jit."
        ) from None
    if type(x) is int and not dtypes.python_int_fits(x, aval.dtype):
        # JAX's wording (code matches on it), with lamina's function name
        raise OverflowError(
            f"An overflow was encountered while parsing an argument to a jitted "
            f"computation, whose argument path is {name} ({fun_desc}): Python int {x} "
            f"does not fit in {aval.dtype.name}.")
    if aval.dtype.kind in "OSUVM":
        raise TypeError(f"{fun_desc}: argument {name} has dtype {aval.dtype}, which is not a "
                        "valid lamina array type")
    return canonical_aval(aval)


def _quick_aval(x: Any) -> ShapedArray:
    """The aval of a valid argument (raises on anything else)."""
    if type(x) is Array:
        impl = x._arr
        if impl.is_deleted():
            raise DeletedArrayError("deleted")  # the full path raises the named error
        aval: ShapedArray = impl.aval
        return aval
    if isinstance(x, Tracer):
        return x.aval
    return get_aval(x)


def _short(x: Any) -> str:
    text = repr(x)
    return text if len(text) <= 60 else text[:57] + "..."


def _split_static(info: JitInfo, args: tuple[Any, ...], kwargs: dict[str, Any]
                  ) -> tuple[tuple[int, ...], tuple[Any, ...], dict[str, Any], Any]:
    """The static positions present in this call, the dynamic args and
    kwargs, and a hashable key of the static values (types included)."""
    n = len(args)
    nums = tuple(sorted({i % n for i in info.static_argnums if -n <= i < n}))
    if not nums and not info.static_argnames:
        return (), args, kwargs, ()
    static_vals: list[tuple[Any, ...]] = []
    for i in nums:
        static_vals.append((type(args[i]), args[i]))
    dyn_args = tuple(a for i, a in enumerate(args) if i not in nums)
    names = [k for k in info.static_argnames if k in kwargs]
    for k in names:
        static_vals.append((k, type(kwargs[k]), kwargs[k]))
    dyn_kwargs = {k: v for k, v in kwargs.items() if k not in info.static_argnames}
    return nums, dyn_args, dyn_kwargs, tuple(static_vals)


def _flat_shardings(info: JitInfo, in_tree: Any, names: Sequence[str | None],
                    avals: Sequence[ShapedArray], n_kw_leaves: int, desc: str) -> tuple[Any, ...]:
    if not info.has_in_shardings:
        return (UNSPECIFIED,) * len(avals)
    args_tree, _ = in_tree.children()
    if n_kw_leaves and not _is_single_leaf(info.in_shardings):
        raise ValueError(f"{desc} does not support kwargs when in_shardings is specified.")
    try:
        positional = api_util.flatten_axes(f"{info.api_name} in_shardings", args_tree,
                                           info.in_shardings)
    except ValueError:
        raise ValueError(_prefix_error(info, args_tree)) from None
    flat = positional + ([info.in_shardings] * n_kw_leaves if n_kw_leaves else [])
    out = []
    for s, name, aval in zip(flat, names, avals):
        where = f"{desc}: in_shardings entry of argument {name}"
        s = resolve_leaf(s, where=where)
        if not is_unspecified(s):
            _check_fits(s, aval, where)
        out.append(s)
    return tuple(out)


def _is_single_leaf(tree: Any) -> bool:
    return bool(tu.none_leaf_registry.flatten(tree)[1].num_nodes == 1)


def _prefix_error(info: JitInfo, args_tree: Any) -> str:
    spec = info.in_shardings
    n_args = len(args_tree.children())
    detail = ""
    if isinstance(spec, (tuple, list)) and len(spec) != n_args:
        detail = (f" But {info.api_name} in_shardings is the wrong length: got a tuple or "
                  f"list of length {len(spec)} for an args tuple of length {n_args}.")
    return (f"{info.api_name} in_shardings specification must be a tree prefix of the "
            f"positional arguments tuple. In particular, {info.api_name} in_shardings must "
            "either be a Sharding, a PartitionSpec, or a tuple of length equal to the number "
            f"of positional arguments.{detail}")


def _check_fits(s: Any, aval: ShapedArray, where: str) -> None:
    try:
        s._to_xla_hlo_sharding(aval.ndim)
        s.check_compatible_shape(aval.shape)
    except ShardingError as e:
        raise ShardingError(f"{where} of type {aval.str_short()}: {e}") from None


def _donated_flags(info: JitInfo, in_tree: Any, static_nums: tuple[int, ...],
                   n_args: int) -> tuple[bool, ...]:
    args_tree, kwargs_tree = in_tree.children()
    if not info.donate_argnums and not info.donate_argnames:
        return (False,) * int(in_tree.num_leaves)
    donate_pos = {i % n_args for i in info.donate_argnums if -n_args <= i < n_args}
    dyn_positions = [i for i in range(n_args) if i not in static_nums]
    flags: list[bool] = []
    for pos, sub in zip(dyn_positions, args_tree.children()):
        flags += [pos in donate_pos] * sub.num_leaves
    kw_node = kwargs_tree.node_data()
    keys = list(kw_node[1]) if kw_node is not None and kw_node[1] is not None else []
    sig = info.fun_signature
    param_names = list(sig.parameters) if sig is not None else []
    for key, sub in zip(keys, kwargs_tree.children()):
        donated = key in info.donate_argnames or (
            key in param_names and param_names.index(key) in donate_pos)
        flags += [donated] * sub.num_leaves
    return tuple(flags)


def _flat_out_shardings(info: JitInfo, out_tree: Any, out_avals: Sequence[ShapedArray],
                        paths: Sequence[str | None], desc: str) -> tuple[Any, ...]:
    if not info.has_out_shardings:
        return (UNSPECIFIED,) * len(out_avals)
    try:
        flat = api_util.flatten_axes(f"{info.api_name} out_shardings", out_tree,
                                     info.out_shardings)
    except ValueError as e:
        raise ValueError(f"{desc}: out_shardings must be a tree prefix of the function's "
                         f"output {out_tree}: {e}") from None
    out = []
    for s, path, aval in zip(flat, paths, out_avals):
        where = f"{desc}: out_shardings entry of {path or 'a result'}"
        s = resolve_leaf(s, where=where)
        if not is_unspecified(s):
            _check_fits(s, aval, where)
        out.append(s)
    return tuple(out)


def infer_params(info: JitInfo, args: tuple[Any, ...], kwargs: dict[str, Any]) -> PjitParams:
    """What one call of the jitted function needs; traces (through the cache)."""
    desc = f"{info.api_name}({info.fun_name})"
    static_nums, dyn_args, dyn_kwargs, static_key = _split_static(info, args, kwargs)
    dbg = api_util.debug_info(info.api_name, info.fun, args, kwargs,
                              static_argnums=info.static_argnums,
                              static_argnames=info.static_argnames,
                              sourceinfo=info.fun_sourceinfo, signature=info.fun_signature)
    fun = wrap_init(info.fun, debug_info=dbg)
    if static_nums:
        fun, _ = api_util.argnums_partial_except(fun, static_nums, args, allow_invalid=True)
    if info.static_argnames and len(dyn_kwargs) != len(kwargs):
        fun, _ = api_util.argnames_partial_except(fun, info.static_argnames, kwargs)
    fun, _ = api_util.result_paths(fun)
    args_flat, in_tree = _flatten((dyn_args, dyn_kwargs))
    names = dbg.arg_names if len(dbg.arg_names) == len(args_flat) else (None,) * len(args_flat)
    in_avals = tuple(_abstractify(x, n, desc) for x, n in zip(args_flat, names))
    flat_fun, out_tree_thunk = api_util.flatten_fun(fun, in_tree)
    flat_fun = annotate(flat_fun, in_avals)
    n_kw = in_tree.children()[1].num_leaves
    in_sh = _flat_shardings(info, in_tree, names, in_avals, n_kw, desc)
    donated = _donated_flags(info, in_tree, static_nums, len(args))
    traced = trace_pjit(flat_fun, in_sh)
    out_tree = out_tree_thunk()
    jaxpr = traced.jaxpr
    jdbg = jaxpr.jaxpr.debug_info
    n_consts = len(traced.consts)
    paths = jdbg.result_paths if jdbg is not None else (None,) * len(traced.out_avals)
    out_sh = _flat_out_shardings(info, out_tree, traced.out_avals, paths, desc)
    params = dict(
        jaxpr=jaxpr,
        in_shardings=(UNSPECIFIED,) * n_consts + in_sh,
        out_shardings=out_sh,
        donated_invars=(False,) * n_consts + donated,
        name=info.fun_name,
        keep_unused=info.keep_unused,
        inline=info.inline,
        compiler_options_kvs=info.compiler_options_kvs)
    return PjitParams(params, traced.consts, tuple(args_flat), in_tree, out_tree, in_avals,
                      tuple(names), in_sh, donated, static_key)


# --- the jitted function --------------------------------------------------------------------------
class Jitted:
    """The state behind ``jit(fun)``: its facts, its compiled signatures and
    the ahead-of-time stages (``.trace``, ``.lower``, ``.eval_shape``).

    What ``jit`` hands out is :func:`_callable_of` this object: jaxlib's C++
    jit function with the stage methods as attributes, whose cache misses
    come back here (:meth:`_cache_miss`); or, when the function has static
    arguments, this object itself, called through :meth:`__call__`.
    """

    def __init__(self, info: JitInfo):
        # Only the identity attributes are copied from the function: its
        # __dict__ may be another Jitted's (functools.wraps copies it along).
        functools.update_wrapper(self, info.fun, updated=())
        self._info = info
        self._has_static = info.has_static
        #: compiled signatures for the Python path, by argument structure
        self._fast: dict[Any, list[FastEntry]] = {}
        #: inferred params by call signature (for calls that bind pjit_p)
        self._inferred: dict[Any, PjitParams] = {}
        #: jaxlib's C++ jit function in front of this object, if any
        self._cpp: Any = None
        _all_jitted.add(self)

    # -- calling -------------------------------------------------------------
    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self._python_call(args, kwargs)[0]

    def _python_call(self, args: tuple[Any, ...], kwargs: dict[str, Any]
                     ) -> tuple[Any, FastEntry | None, Sequence[Any]]:
        """A call on the Python path: its result, the entry of the compiled
        signature that ran it (None when the body ran eagerly or was staged)
        and the flat dynamic arguments the entry ran on."""
        if jit_disabled():
            return self._info.fun(*args, **kwargs), None, ()
        if _trace_state.dynamic.trace_type is not EvalTrace:  # staging: bind pjit_p
            return self._call(args, kwargs)
        return self._call_cached_entry(args, kwargs)

    def _cache_miss(self, *args: Any, **kwargs: Any) -> tuple[Any, Fastpath | None, bool]:
        """The C++ function's miss: the Python path, and the fastpath for the
        call's signature when the call was a plain one (see
        ``lamina_interpreters_pxla.cpp_dispatch``)."""
        out, entry, leaves = self._python_call(args, kwargs)
        if entry is None or entry.donated_kept:  # donations are recorded in Python
            return out, None, False
        kept = range(entry.n) if entry.kept is None else entry.kept
        return out, fastpath(entry.loaded, leaves, entry.shardings, kept, out), False

    def _call_cached_entry(self, args: tuple[Any, ...], kwargs: dict[str, Any]
                           ) -> tuple[Any, FastEntry | None, Sequence[Any]]:
        """A top-level call on the Python path: a recorded signature if one
        matches, else the full path (returns as :meth:`_python_call`)."""
        if not self._has_static:
            leaves, treedef = _flatten((args, kwargs))
            entries = self._fast.get(treedef)
        else:
            _, dyn_args, dyn_kwargs, static_key = _split_static(self._info, args, kwargs)
            leaves, treedef = _flatten((dyn_args, dyn_kwargs))
            try:
                entries = self._fast.get((treedef, static_key))
            except TypeError:
                entries = None  # an unhashable static argument: the full path explains
        if entries is not None:
            for entry in entries:
                out = entry.run(leaves)
                if out is not MISS:
                    return out, entry, leaves
        return self._call(args, kwargs)

    def _infer(self, args: tuple[Any, ...], kwargs: dict[str, Any]) -> PjitParams:
        """``infer_params``, remembered per call signature: the argument tree,
        the static arguments, the avals and the tracing context."""
        try:
            _, dyn_args, dyn_kwargs, static_key = _split_static(self._info, args, kwargs)
            args_flat, in_tree = _flatten((dyn_args, dyn_kwargs))
            key = (in_tree, static_key, tuple(map(_quick_aval, args_flat)), tracing_context())
            hit = self._inferred.get(key)
        except Exception:  # an odd argument: the full path names it
            return infer_params(self._info, args, kwargs)
        if hit is not None:
            return dataclasses.replace(hit, args_flat=tuple(args_flat))
        p = infer_params(self._info, args, kwargs)
        if not p.consts:
            if len(self._inferred) >= 64:
                self._inferred.pop(next(iter(self._inferred)))
            self._inferred[key] = dataclasses.replace(p, args_flat=())
        return p

    def _call(self, args: tuple[Any, ...], kwargs: dict[str, Any]
              ) -> tuple[Any, FastEntry | None, Sequence[Any]]:
        """The full path: infer, then run at top level (recording the
        signature's entry) or bind ``pjit_p`` (returns as :meth:`_python_call`)."""
        p = self._infer(args, kwargs)
        args_flat = (*p.consts, *p.args_flat)
        # Run now unless a transformation must see the call: a staging trace,
        # a tracer argument, or named axes that a vmap around binds.
        entry = None
        if not p.consts and not p.jaxpr.effects and at_top_level() and not any(
                isinstance(x, Tracer) for x in args_flat):
            outs, compiled = pjit_call(args_flat, p.params)
            entry = self._remember(p, compiled)
        else:
            outs = pjit_p.bind(*args_flat, **p.params)
        return tu.tree_unflatten(p.out_tree, outs), entry, p.args_flat

    def _remember(self, p: PjitParams, compiled: CompiledProgram) -> FastEntry | None:
        if not all(host_or_array(x) for x in p.args_flat):
            return None
        committed: list[bool | None] = [
            bool(x._arr._committed) if type(x) is Array else None for x in p.args_flat]
        key = (p.in_tree, p.static_key) if self._info.has_static else p.in_tree
        entry = FastEntry(avals=p.in_avals, shardings=compiled.in_shardings, committed=committed,
                          kept=compiled.kept_var_idx, n_args=len(p.args_flat), compiled=compiled,
                          out_tree=p.out_tree, donated=p.donated_invars,
                          name=f"{self._info.api_name}({self._info.fun_name})")
        _push(self._fast.setdefault(key, []), entry)
        return entry

    # -- stages -----------------------------------------------------------------
    def trace(self, *args: Any, **kwargs: Any) -> Any:
        """The ``Traced`` stage for these arguments (arrays, tracers or
        ``ShapeDtypeStruct``s), traced as at top level: it never closes over
        tracers of a transformation around the call."""
        from lamina_sharded_jit.stages import make_traced
        with fresh_tracing():
            p = infer_params(self._info, args, kwargs)
        return make_traced(self._info, p)

    def lower(self, *args: Any, **kwargs: Any) -> Any:
        """``self.trace(*args, **kwargs).lower()``: the module for this host."""
        return self.trace(*args, **kwargs).lower()

    def eval_shape(self, *args: Any, **kwargs: Any) -> Any:
        """The output structure as ``ShapeDtypeStruct``s (with ``.sharding``
        where ``out_shardings`` gives one), without running anything."""
        p = infer_params(self._info, args, kwargs)
        structs = [ShapeDtypeStruct(a.shape, a.dtype, a.weak_type,
                                    None if is_unspecified(s) else s)
                   for a, s in zip(p.jaxpr.out_avals, p.out_shardings)]
        return tu.tree_unflatten(p.out_tree, structs)

    # -- cache management --------------------------------------------------------
    def clear_cache(self) -> None:
        """Forgets this function's compiled signatures (and its traces)."""
        from lamina_sharded_jit.tracing import trace_cache
        self._fast.clear()
        self._inferred.clear()
        if self._cpp is not None:
            self._cpp._clear_cache()
        trace_cache.evict_function(self._info.fun)

    def _cache_size(self) -> int:
        return sum(len(v) for v in self._fast.values())

    # -- Python protocol ------------------------------------------------------------
    def __get__(self, obj: Any, objtype: Any = None) -> Any:
        if obj is None:
            return self
        return functools.partial(self, obj)

    def __repr__(self) -> str:
        return f"<{self._info.api_name}-compiled function {self._info.fun_name}>"


def _push(entries: list[FastEntry], entry: FastEntry) -> None:
    entries.insert(0, entry)
    del entries[8:]  # a few signatures per structure; the rest take the full path


def jit(fun: Callable[..., Any] | None = None, *, in_shardings: Any = None,
        out_shardings: Any = None, static_argnums: int | Sequence[int] | None = None,
        static_argnames: str | Sequence[str] | None = None,
        donate_argnums: int | Sequence[int] | None = None,
        donate_argnames: str | Sequence[str] | None = None, keep_unused: bool = False,
        device: Any = None, backend: str | None = None, inline: bool = False,
        abstracted_axes: Any = None, compiler_options: dict[str, Any] | None = None) -> Any:
    """Compiles ``fun`` with XLA; see JAX's ``jax.jit`` for the semantics.

    ``in_shardings`` is a prefix tree of the positional (dynamic) arguments
    and ``out_shardings`` of the output, with ``NamedSharding``s (or other
    lamina shardings), ``PartitionSpec``s (inside ``with mesh:``) or ``None``
    leaves. ``static_argnums``/``static_argnames`` are compile-time constants
    (hashable); ``donate_argnums``/``donate_argnames`` give their buffers to
    the computation. ``keep_unused`` keeps unused arguments in the compiled
    program; ``inline`` inlines the body when it is nested in another jit.
    ``device``/``backend`` pin the computation to one device. Without
    ``fun``, returns a decorator.
    """
    if abstracted_axes is not None:
        raise ValueError("jit: abstracted_axes (dynamic shapes) is not supported by lamina; "
                         "leave it None")
    if fun is None:
        return functools.partial(
            jit, in_shardings=in_shardings, out_shardings=out_shardings,
            static_argnums=static_argnums, static_argnames=static_argnames,
            donate_argnums=donate_argnums, donate_argnames=donate_argnames,
            keep_unused=keep_unused, device=device, backend=backend, inline=inline,
            compiler_options=compiler_options)
    info = make_jit_info(fun, in_shardings=in_shardings, out_shardings=out_shardings,
                         static_argnums=static_argnums, static_argnames=static_argnames,
                         donate_argnums=donate_argnums, donate_argnames=donate_argnames,
                         keep_unused=keep_unused, device=device, backend=backend,
                         inline=inline, compiler_options=compiler_options)
    return _callable_of(Jitted(info))


def clear_caches() -> None:
    """Forgets every trace, lowering and compiled program (``jax.clear_caches``):
    the next call of each jitted or pmapped function traces and compiles again."""
    for jitted in list(_all_jitted):
        jitted._fast.clear()
        jitted._inferred.clear()
    clear_jaxpr_caches()
    clear_program_caches()
    clear_runtime_caches()


#: what the C++ function takes over from its Jitted, as attributes
_STAGE_METHODS = ("trace", "lower", "eval_shape", "clear_cache", "_cache_size")


def _callable_of(jitted: Jitted) -> Any:
    """What ``jit`` returns for ``jitted`` (see :class:`Jitted`).

    Static arguments stay on the Python path: the C++ cache compares them by
    ``==``, which would take ``True`` for ``1``, while lamina keys them on
    their type too.
    """
    if jitted._has_static:
        return jitted
    stages = {name: getattr(jitted, name) for name in _STAGE_METHODS}
    # _jitted: the Python side, for introspection and tests
    jitted._cpp = new_cpp_function(jitted._info.fun_name, jitted._info.fun, jitted._cache_miss,
                                   _jitted=jitted, **stages)
    return jitted._cpp


def _plain_jitted(fun: Callable[..., Any], static_argnums: Any = None) -> Jitted:
    """``jit(fun, static_argnums=...)``'s Python side without its C++
    function: what ``make_jaxpr`` and ``eval_shape`` trace through."""
    return Jitted(make_jit_info(
        fun, in_shardings=None, out_shardings=None, static_argnums=static_argnums,
        static_argnames=None, donate_argnums=None, donate_argnames=None, keep_unused=False,
        device=None, backend=None, inline=False, compiler_options=None))


def make_jaxpr(fun: Callable[..., Any], static_argnums: int | Sequence[int] = (),
               axis_env: Sequence[tuple[Any, int]] | None = None,
               return_shape: bool = False, abstracted_axes: Any = None
               ) -> Callable[..., Any]:
    """tracing-core's ``make_jaxpr`` (same arguments and results), except that
    a call at top level goes through ``jit(fun).trace`` and so shares jit's
    tracing cache, as in JAX: ``jit(f)(x)`` then ``make_jaxpr(f)(x)`` traces
    ``f`` once. Calls under a transformation (which may close over its
    tracers) and calls with ``axis_env`` trace directly."""
    direct = tc_api.make_jaxpr(fun, static_argnums=static_argnums, axis_env=axis_env,
                               return_shape=return_shape, abstracted_axes=abstracted_axes)
    if axis_env:
        return direct
    jitted = _plain_jitted(fun, static_argnums)

    @functools.wraps(fun)
    def make_jaxpr_f(*args: Any, **kwargs: Any) -> Any:
        if core.cur_level() != 0 or not at_top_level():
            return direct(*args, **kwargs)
        traced = jitted.trace(*args, **kwargs)
        if return_shape:
            shapes = [tc_api.ShapeDtypeStruct(o.aval.shape, o.aval.dtype, o.aval.weak_type)
                      for o in traced.flat_out_info]
            return traced.jaxpr, tu.tree_unflatten(traced.out_tree, shapes)
        return traced.jaxpr

    make_jaxpr_f.__name__ = f"make_jaxpr({getattr(fun, '__name__', 'fun')})"
    return make_jaxpr_f


def eval_shape(fun: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
    """The shapes and dtypes of ``fun(*args, **kwargs)`` as a pytree of
    ``ShapeDtypeStruct``s, without computing anything. Arguments may be arrays,
    tracers or ``ShapeDtypeStruct``s. The trace is shared with ``jit(fun)``:
    ``eval_shape(f, x)`` followed by ``jit(f)(x)`` traces ``f`` once."""
    return _plain_jitted(fun).eval_shape(*args, **kwargs)

