"""``jit`` and ``eval_shape``: one code path for plain jit, jit with shardings
and ``sharded_jit``.

``jit(fun, ...)`` computes once what its own arguments determine
(:class:`~lamina_sharded_jit.params.JitInfo`); each call infers only what
depends on the arguments (:func:`~lamina_sharded_jit.params.infer_params`),
and remembers it per call signature in the function's
:class:`~lamina_sharded_jit.call_cache.CallCache`. The call binds
``pjit_p``, so jit nests inside every transformation; at top level it runs
the compiled program directly and records it with the signature, so a later
call with the same signature only checks the arguments, runs the executable
and wraps the outputs. ``jit`` hands out jaxlib's C++ function in front of
all this (``lamina_interpreters_pxla.cpp_dispatch``): once a plain call has
run, its signature is served in C++ without entering Python. Every cache a
call goes through is described in this package's README ("The caches").

``jit(f).trace(*args)``, ``.lower(*args)`` and ``.eval_shape(*args)`` give
the ahead-of-time stages (:mod:`lamina_sharded_jit.stages`) and abstract
evaluation; ``eval_shape(f, *args)`` shares the tracing cache with
``jit(f)(*args)``.
"""

from __future__ import annotations

import functools
import inspect
import weakref

import numpy as np
from collections.abc import Callable, Hashable, Sequence
from typing import Any, cast

from lamina_interpreters_pxla.array import Array
from lamina_interpreters_pxla.caches import clear_caches as clear_runtime_caches
from lamina_interpreters_pxla.cpp_dispatch import Fastpath, fastpath, new_cpp_function
from lamina_interpreters_pxla.float_checks import checks as _float_checks
from lamina_linear_util import api_util
from lamina_linear_util import tree_util as tu
from lamina_tracing_core import api as tc_api
from lamina_tracing_core import core
from lamina_tracing_core.avals import ShapedArray, abstract_only_types
from lamina_tracing_core.core import EvalTrace, Tracer
from lamina_tracing_core.numpy.key_arrays import KeyDType, PRNGKeyArray, register_key_like

from lamina_sharded_jit.arguments import aval_or_none, check_runnable, too_deep_arguments
from lamina_sharded_jit.call_cache import CallCache, CallSignature
from lamina_sharded_jit import persistent_trace
from lamina_sharded_jit.dispatch import MISS, FastEntry, at_top_level, host_or_array
from lamina_sharded_jit.explain import explain_miss
from lamina_sharded_jit.execution import (
    CompiledProgram,
    clear_program_caches,
    has_float0_outputs,
    pjit_call,
)
from lamina_sharded_jit.jaxpr_cache import clear_jaxpr_caches
from lamina_sharded_jit.params import JitInfo, PjitParams, infer_params, make_jit_info, split_static
from lamina_sharded_jit.primitive import pjit_p
from lamina_sharded_jit.settings import jit_disabled
from lamina_sharded_jit.shardings import none_if_unspecified
from lamina_sharded_jit.stages import JitTraced, make_traced
from lamina_sharded_jit.tracing import fresh_tracing, trace_cache, tracing_context

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

    def __new__(cls, shape: Sequence[int], dtype: Any, weak_type: bool = False,
                sharding: Any = None) -> ShapeDtypeStruct:
        # A key dtype makes the shape of key arrays (a user's leaf standing
        # for key data to transformations), as JAX accepts it.
        if cls is ShapeDtypeStruct and isinstance(dtype, KeyDType):
            cls = KeysShapeDtypeStruct
        return super().__new__(cls)

    def __init__(self, shape: Sequence[int], dtype: Any, weak_type: bool = False,
                 sharding: Any = None):
        super().__init__(shape, dtype, weak_type)
        self.sharding = sharding

    def __repr__(self) -> str:
        weak = ", weak_type=True" if self.weak_type else ""
        sharding = f", sharding={self.sharding!r}" if self.sharding is not None else ""
        return f"ShapeDtypeStruct(shape={self.shape}, dtype={self.dtype.name}{weak}{sharding})"

    __hash__ = tc_api.ShapeDtypeStruct.__hash__


abstract_only_types.add(ShapeDtypeStruct)  # an aval without data, like its base


class KeysShapeDtypeStruct(ShapeDtypeStruct):
    """``ShapeDtypeStruct(shape, key_dtype)``: the shape of key arrays. A
    function traced with one sees a key array over a struct of its key data;
    ``eval_shape`` gives one for each key-array result, as JAX does."""

    __slots__ = ()

    @property
    def data(self) -> ShapeDtypeStruct:
        """The struct of the keys' data (``shape + key_shape``, ``uint32``)."""
        return ShapeDtypeStruct(self.shape + self.dtype.key_shape, np.uint32,
                                sharding=self.sharding)


register_key_like(KeysShapeDtypeStruct, lambda s: s.data)


def _struct_of(x: Any) -> Any:
    """A key array over a struct of key data as a struct of keys, anything else as is."""
    if isinstance(x, PRNGKeyArray) and isinstance(x.base, ShapeDtypeStruct):
        return ShapeDtypeStruct(x.shape, x.dtype, sharding=x.base.sharding)
    return x


# --- the jitted function --------------------------------------------------------------------------
class Jitted:
    """The state behind ``jit(fun)``: its facts, its remembered call
    signatures (a :class:`~lamina_sharded_jit.call_cache.CallCache`) and the
    ahead-of-time stages (``.trace``, ``.lower``, ``.eval_shape``).

    What ``jit`` hands out is :func:`_callable_of` this object: jaxlib's C++
    jit function with the stage methods as attributes, whose cache misses
    come back here (:meth:`_cache_miss`); or, when the function has static
    arguments, this object itself, called through :meth:`__call__`.
    """

    def __init__(self, info: JitInfo, cache_trace: bool | None = None):
        # Only the identity attributes are copied from the function: its
        # __dict__ may be another Jitted's (functools.wraps copies it along).
        functools.update_wrapper(self, info.fun, updated=())
        self._info = info
        self._has_static = info.has_static
        #: ``jit(f, cache_trace=...)``: None follows ``config.persistent_trace_cache``
        self._cache_trace = cache_trace
        #: the call signatures seen, with their params and compiled programs
        self._calls = CallCache()
        #: jaxlib's C++ jit function in front of this object, if any; weak,
        #: since that function holds this object (its miss handler): a
        #: reference back would make a cycle, and a dropped function would
        #: then keep its compiled programs until the next full collection
        self._cpp: weakref.ref[Any] | None = None
        _all_jitted.add(self)

    @property
    def __signature__(self) -> inspect.Signature | None:
        """The wrapped function's signature, as jaxlib's jit function reports
        it (``inspect.signature(jitted, follow_wrapped=False)`` reads this);
        None when the function has none."""
        try:
            return inspect.signature(self._info.fun)
        except (TypeError, ValueError):
            return None

    # -- calling -------------------------------------------------------------
    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self._python_call(args, kwargs)[0]

    def _python_call(self, args: tuple[Any, ...], kwargs: dict[str, Any]
                     ) -> tuple[Any, FastEntry | None, Sequence[Any]]:
        """A call on the Python path: its result, the entry of the compiled
        program that ran it (None when the body ran eagerly or was staged)
        and the flat dynamic arguments it ran on.

        At top level a remembered signature runs its program directly (see
        :class:`~lamina_sharded_jit.dispatch.FastEntry`); anything else
        takes :meth:`_call`."""
        if jit_disabled():
            return self._info.fun(*args, **kwargs), None, ()
        structure, leaves = self._structure(args, kwargs)
        if structure is not None and _trace_state.dynamic.trace_type is EvalTrace:
            for sig in self._calls.by_structure.get(structure, ()):
                run = sig.run
                if run is not None:
                    out = run.run(leaves)
                    if out is not MISS:
                        return out, run, leaves
        return self._call(args, kwargs, structure, leaves)

    def _cache_miss(self, *args: Any, **kwargs: Any) -> tuple[Any, Fastpath | None, bool]:
        """The C++ function's miss: the Python path, and the fastpath for the
        call's signature when the call was a plain one (see
        ``lamina_interpreters_pxla.cpp_dispatch``)."""
        try:
            out, entry, leaves = self._python_call(args, kwargs)
        except SystemError as e:
            # jaxlib's C++ function flattened the arguments first: a tree too
            # deep to flatten reaches here as a pending RecursionError
            raise too_deep_arguments(e, self._desc(), self._info.fun, args, kwargs) from None
        if (entry is None or entry.donated_kept or entry.executable.has_effects
                or _float_checks.any):
            # donations, effects (tokens, callback errors) and NaN checks are Python's
            return out, None, False
        kept = range(entry.n) if entry.kept is None else entry.kept
        return out, fastpath(entry.loaded, leaves, entry.shardings, kept, out), False

    def _structure(self, args: tuple[Any, ...], kwargs: dict[str, Any]
                   ) -> tuple[Hashable | None, list[Any]]:
        """The call's argument structure (the call cache's key; None when a
        static argument is unhashable, which :func:`infer_params` reports)
        and its flat dynamic arguments."""
        try:
            if not self._has_static:
                leaves, treedef = _flatten((args, kwargs))
                return treedef, leaves
            _, dyn_args, dyn_kwargs, static_key = split_static(self._info, args, kwargs)
            leaves, treedef = _flatten((dyn_args, dyn_kwargs))
        except SystemError as e:
            raise too_deep_arguments(e, self._desc(), self._info.fun, args, kwargs) from None
        return ((treedef, static_key) if _hashable(static_key) else None), leaves

    def _desc(self) -> str:
        return f"{self._info.api_name}({self._info.fun_name})"

    def _params(self, args: tuple[Any, ...], kwargs: dict[str, Any]) -> PjitParams:
        """:func:`infer_params` for a stage (``trace``, ``eval_shape``), with
        the error naming an argument too deep to flatten."""
        try:
            return infer_params(self._info, args, kwargs)
        except SystemError as e:
            raise too_deep_arguments(e, self._desc(), self._info.fun, args, kwargs) from None

    def _infer(self, args: tuple[Any, ...], kwargs: dict[str, Any],
               structure: Hashable | None, leaves: Sequence[Any]
               ) -> tuple[PjitParams, CallSignature | None]:
        """The call's params: the remembered ones of its signature, or
        :func:`infer_params` (remembered unless the body closes over
        tracers); and the signature's entry (None when not remembered)."""
        avals = _signature_avals(leaves) if structure is not None else None
        if avals is None:  # not a key: infer_params names the bad argument
            return infer_params(self._info, args, kwargs), None
        context = tracing_context()
        sig = self._calls.find(structure, avals, context)
        if sig is not None and sig.params is not None:  # find returns traced ones only
            return sig.params, sig
        p = infer_params(self._info, args, kwargs)
        if p.consts:
            return p, None
        return p, self._calls.add(structure, avals, context, p.without_args())

    def _call(self, args: tuple[Any, ...], kwargs: dict[str, Any],
              structure: Hashable | None, leaves: Sequence[Any]
              ) -> tuple[Any, FastEntry | None, Sequence[Any]]:
        """A call the fast paths did not take: through the persistent trace
        cache when it is on, else :meth:`_call_traced`."""
        if structure is not None and persistent_trace.enabled(self._cache_trace) and \
                at_top_level():
            served = self._call_through_disk(args, kwargs, structure, leaves)
            if served is not None:
                return served
        return self._call_traced(args, kwargs, structure, leaves)

    def _call_through_disk(self, args: tuple[Any, ...], kwargs: dict[str, Any],
                           structure: Hashable, leaves: Sequence[Any]
                           ) -> tuple[Any, FastEntry | None, Sequence[Any]] | None:
        """A signature not traced in this process, through the persistent
        trace cache (:mod:`~lamina_sharded_jit.persistent_trace`); None when
        the cache cannot take the call."""
        avals = _signature_avals(leaves)
        if avals is None or not all(host_or_array(x) for x in leaves):
            return None
        context = tracing_context()
        if self._calls.find(structure, avals, context) is not None:
            return None
        treedef: Any = structure
        static_key: Any = None
        if self._has_static:
            treedef, static_key = cast("tuple[Any, Any]", structure)
        try:
            key = persistent_trace.call_key(self._info, static_key, treedef, leaves, avals,
                                            context)
        except persistent_trace.NotCacheable as e:
            persistent_trace.stats["uncacheable"] += 1
            explain_miss("persistent trace", self._desc(), [str(e)])
            return None

        def traced() -> tuple[tuple[Any, FastEntry | None, Sequence[Any]], PjitParams | None]:
            result = self._call_traced(args, kwargs, structure, leaves)
            sig = self._calls.find(structure, avals, context)
            return result, (sig.params if sig is not None else None)

        def warm(compiled: CompiledProgram, out_tree: Any) -> FastEntry:
            committed: list[bool | None] = [
                bool(x._arr._committed) if type(x) is Array else None for x in leaves]
            entry = FastEntry(avals=avals, shardings=compiled.in_shardings, committed=committed,
                              kept=compiled.kept_var_idx, n_args=len(leaves), compiled=compiled,
                              out_tree=out_tree, donated=compiled.executable.donated_invars,
                              name=self._desc())
            self._calls.add_warm(structure, avals, context, entry)
            return entry

        return persistent_trace.call(self._info, key, treedef, leaves, traced, warm)

    def _call_traced(self, args: tuple[Any, ...], kwargs: dict[str, Any],
                     structure: Hashable | None, leaves: Sequence[Any]
                     ) -> tuple[Any, FastEntry | None, Sequence[Any]]:
        """The full path: infer, then run at top level (recording the
        program with the signature) or bind ``pjit_p`` (returns as
        :meth:`_python_call`)."""
        p, sig = self._infer(args, kwargs, structure, leaves)
        check_runnable(leaves, p.in_avals, p.arg_names,
                       f"{self._info.api_name}({self._info.fun_name})")
        args_flat = (*p.consts, *leaves)
        # Run now unless a transformation must see the call: a staging trace,
        # a tracer argument, or named axes that a vmap around binds.
        entry = None
        if not p.consts and not p.jaxpr.effects and at_top_level() and not any(
                isinstance(x, Tracer) for x in args_flat):
            outs, compiled = pjit_call(args_flat, p.params)
            if sig is not None:
                entry = self._remember(sig, leaves, compiled)
        else:
            outs = pjit_p.bind(*args_flat, **p.params)
        return tu.tree_unflatten(p.out_tree, outs), entry, leaves

    def _remember(self, sig: CallSignature, leaves: Sequence[Any],
                  compiled: CompiledProgram) -> FastEntry | None:
        """Records the program a top-level call of ``sig`` ran (when its
        arguments are of the kinds the cached path takes)."""
        p = sig.params
        assert p is not None  # a signature found by _infer has params
        if not all(host_or_array(x) for x in leaves) or has_float0_outputs(p.jaxpr):
            return None
        committed: list[bool | None] = [
            bool(x._arr._committed) if type(x) is Array else None for x in leaves]
        entry = FastEntry(avals=p.in_avals, shardings=compiled.in_shardings, committed=committed,
                          kept=compiled.kept_var_idx, n_args=len(leaves), compiled=compiled,
                          out_tree=p.out_tree, donated=p.donated_invars,
                          name=f"{self._info.api_name}({self._info.fun_name})")
        self._calls.add_run(sig, entry)
        return entry

    # -- stages -----------------------------------------------------------------
    def trace(self, *args: Any, **kwargs: Any) -> JitTraced:
        """The ``Traced`` stage for these arguments (arrays, tracers or
        ``ShapeDtypeStruct``s), traced as at top level: it never closes over
        tracers of a transformation around the call."""
        with fresh_tracing():
            p = self._params(args, kwargs)
        return make_traced(self._info, p)

    def lower(self, *args: Any, **kwargs: Any) -> Any:
        """``self.trace(*args, **kwargs).lower()``: the module for this host."""
        return self.trace(*args, **kwargs).lower()

    def eval_shape(self, *args: Any, **kwargs: Any) -> Any:
        """The output structure as ``ShapeDtypeStruct``s (with ``.sharding``
        where ``out_shardings`` gives one), without running anything."""
        p = self._params(args, kwargs)
        structs = [ShapeDtypeStruct(a.shape, a.dtype, a.weak_type, none_if_unspecified(s))
                   for a, s in zip(p.jaxpr.out_avals, p.out_shardings)]
        return tu.user_trees.tree_map(_struct_of, tu.tree_unflatten(p.out_tree, structs))

    # -- cache management --------------------------------------------------------
    def clear_cache(self) -> None:
        """Forgets this function's signatures, its C++ fastpaths and its traces."""
        self._calls.clear()
        cpp = self._cpp() if self._cpp is not None else None
        if cpp is not None:
            cpp._clear_cache()
        trace_cache.evict_function(self._info.fun)

    def _cache_size(self) -> int:
        """How many compiled placements the Python path remembers."""
        return self._calls.num_runs()

    # -- Python protocol ------------------------------------------------------------
    def __get__(self, obj: Any, objtype: Any = None) -> Any:
        if obj is None:
            return self
        return functools.partial(self, obj)

    def __repr__(self) -> str:
        return f"<{self._info.api_name}-compiled function {self._info.fun_name}>"


def _hashable(key: Any) -> bool:
    try:
        hash(key)
    except TypeError:
        return False
    return True


def _signature_avals(leaves: Sequence[Any]) -> tuple[ShapedArray, ...] | None:
    """The flat avals that identify a call's signature, or None when an
    argument is deleted or no valid value (the full path then names it)."""
    avals = []
    for x in leaves:
        if type(x) is Array and x._arr.is_deleted():
            return None
        aval = aval_or_none(x)
        if aval is None:
            return None
        avals.append(aval)
    return tuple(avals)


def jit(fun: Callable[..., Any] | None = None, *, in_shardings: Any = None,
        out_shardings: Any = None, static_argnums: int | Sequence[int] | None = None,
        static_argnames: str | Sequence[str] | None = None,
        donate_argnums: int | Sequence[int] | None = None,
        donate_argnames: str | Sequence[str] | None = None, keep_unused: bool = False,
        device: Any = None, backend: str | None = None, inline: bool = False,
        abstracted_axes: Any = None, compiler_options: dict[str, Any] | None = None,
        cache_trace: bool | None = None) -> Any:
    """Compiles ``fun`` with XLA; see JAX's ``jax.jit`` for the semantics.

    ``in_shardings`` is a prefix tree of the positional (dynamic) arguments
    and ``out_shardings`` of the output, with ``NamedSharding``s (or other
    lamina shardings), ``PartitionSpec``s (inside ``with mesh:``) or ``None``
    leaves. ``static_argnums``/``static_argnames`` are compile-time constants
    (hashable); ``donate_argnums``/``donate_argnames`` give their buffers to
    the computation. ``keep_unused`` keeps unused arguments in the compiled
    program; ``inline`` inlines the body when it is nested in another jit.
    ``device``/``backend`` pin the computation to one device.
    ``cache_trace`` puts this function's traces in the persistent trace cache
    (True), keeps them out (False), or follows ``config.persistent_trace_cache``
    (None; see :mod:`~lamina_sharded_jit.persistent_trace`). Without ``fun``,
    returns a decorator.
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
            compiler_options=compiler_options, cache_trace=cache_trace)
    info = make_jit_info(fun, in_shardings=in_shardings, out_shardings=out_shardings,
                         static_argnums=static_argnums, static_argnames=static_argnames,
                         donate_argnums=donate_argnums, donate_argnames=donate_argnames,
                         keep_unused=keep_unused, device=device, backend=backend,
                         inline=inline, compiler_options=compiler_options)
    return _callable_of(Jitted(info, cache_trace))


def clear_caches() -> None:
    """Forgets every trace, lowering and compiled program (``jax.clear_caches``):
    the next call of each jitted or pmapped function traces and compiles again."""
    for jitted in list(_all_jitted):
        jitted._calls.clear()
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
    cpp = new_cpp_function(jitted._info.fun_name, jitted._info.fun, jitted._cache_miss,
                           _jitted=jitted, **stages)
    jitted._cpp = weakref.ref(cpp)
    return cpp


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
    def direct() -> Callable[..., Any]:
        return tc_api.make_jaxpr(fun, static_argnums=static_argnums, axis_env=axis_env,
                                 return_shape=return_shape, abstracted_axes=abstracted_axes)

    if axis_env or abstracted_axes is not None:
        return direct()
    # What tc_api.make_jaxpr checks when it is made; the direct tracer itself
    # is only made for a call under a transformation.
    api_util.ensure_index_tuple(static_argnums, what="static_argnums")
    jitted = _plain_jitted(fun, static_argnums)

    @functools.wraps(fun)
    def make_jaxpr_f(*args: Any, **kwargs: Any) -> Any:
        if core.cur_level() != 0 or not at_top_level():
            return direct()(*args, **kwargs)
        traced = jitted.trace(*args, **kwargs)
        if return_shape:
            shapes = [ShapeDtypeStruct(o.aval.shape, o.aval.dtype, o.aval.weak_type)
                      for o in traced.flat_out_info]
            return traced.jaxpr, tu.user_trees.tree_map(
                _struct_of, tu.tree_unflatten(traced._out_tree, shapes))
        return traced.jaxpr

    make_jaxpr_f.__name__ = f"make_jaxpr({getattr(fun, '__name__', 'fun')})"
    return make_jaxpr_f


def eval_shape(fun: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
    """The shapes and dtypes of ``fun(*args, **kwargs)`` as a pytree of
    ``ShapeDtypeStruct``s, without computing anything. Arguments may be arrays,
    tracers or ``ShapeDtypeStruct``s. The trace is shared with ``jit(fun)``:
    ``eval_shape(f, x)`` followed by ``jit(f)(x)`` traces ``f`` once."""
    return _plain_jitted(fun).eval_shape(*args, **kwargs)



tc_api.set_eager_compiler(lambda fun, static_argnums: jit(fun, static_argnums=static_argnums))
