"""Functions that carry their pending transformations: ``WrappedFun``.

Every lamina transformation (jit, pmap, grad, vmap, flattening of pytrees,
argument selection, ...) changes a user function in two places: it rewrites
the arguments before the function sees them and rewrites the results after
the function returns. Composing such changes with ordinary closures would give
a new, opaque Python function every time, and two closures built the same way
from the same user function would never compare equal, so nothing could be
cached.

A ``WrappedFun`` keeps the pieces apart instead. It holds

* ``f``: the user's function, untouched;
* ``transforms``: the stack of transformations still to apply, each a pair
  ``(gen, gen_static_args)``, the most recently added first;
* ``stores``: one write-once :class:`Store` per transformation, where it may
  leave an auxiliary output (the output pytree structure, say) for the caller;
* ``params``: static keyword parameters passed to ``f``;
* ``in_type``: an optional annotation of the input types (opaque here);
* ``debug_info``: an optional :class:`TracingDebugInfo`;
* ``debug_info_depth``: how many transformations the WrappedFun had when its
  debug info was set. The transformations pushed since then carried the
  record unchanged; when its counts turn out stale, they are the ones that
  changed the arguments or results without renaming them, and
  :meth:`WrappedFun.stale_names_suspects` names them.

Nothing is applied until :meth:`WrappedFun.call_wrapped` runs: the arguments
flow down through the transformations, most recent first, to ``f``, and the
results flow back up in the opposite order. Because a WrappedFun is "``f`` plus
a description of what will be done to it", two WrappedFuns compare equal (and
hash alike) exactly when they wrap the same ``f`` with the same
transformations, static arguments, params, input type and debug info. That is
what lets :func:`lamina_linear_util.cache.cache` memoize tracing on them,
keyed weakly on ``f``.

A transformation is usually a generator function::

    def scale_outputs(factor, *args, **kwargs):      # static args first
        results = yield args, kwargs                 # on the way in
        yield [factor * r for r in results]          # on the way out

    wf = transformation(scale_outputs, wrap_init(f), 2.0)

A transformation with an auxiliary output yields ``(results, aux)`` on the way
out instead; :func:`transformation_with_aux` returns the new WrappedFun and a
thunk that reads ``aux`` once the function has run. A plain (non-generator)
function ``gen(inner, [store,] *static_args, *args, **kwargs)`` that calls
``inner`` itself is accepted too; it is faster and suits the internal helpers.

Static arguments of transformations, params and aux outputs must be immutable:
they become part of cache keys and cached values.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Iterable, Mapping
from functools import partial
from typing import Any

from lamina_linear_util._fun_info import fun_name, is_generator_function
from lamina_linear_util.debug_info import TracingDebugInfo
from lamina_linear_util.errors import StoreError, TransformationError

__all__ = [
    "EqualStore",
    "Store",
    "StoreError",
    "Transform",
    "TransformationError",
    "WrappedFun",
    "add_debug_info",
    "annotate",
    "transformation",
    "transformation_with_aux",
    "wrap_init",
]

Transform = tuple[Callable[..., Any], tuple[Any, ...]]
"""One entry of ``WrappedFun.transforms``: ``(gen, gen_static_args)``."""


class _Empty:
    __slots__ = ()

    def __repr__(self) -> str:
        return "<empty>"


_EMPTY = _Empty()


class Store:
    """A write-once cell for a transformation's auxiliary output.

    Reading it before a value was stored, or storing twice, raises
    :class:`StoreError`. ``label`` (the transformation's name) makes those
    errors say which transformation is concerned.
    """

    __slots__ = ("_val", "label")

    def __init__(self, label: str | None = None) -> None:
        self._val: Any = _EMPTY
        self.label = label

    def _what(self) -> str:
        if self.label is None:
            return "a transformation's auxiliary output"
        return f"the auxiliary output of transformation {self.label!r}"

    def store(self, val: Any) -> None:
        """Put ``val`` in the store; raises ``StoreError`` if it is occupied."""
        if self._val is not _EMPTY:
            raise StoreError(
                f"{self._what()} was stored twice: a WrappedFun's stores are filled by "
                f"one call; wrap the function again to call it again")
        self._val = val

    @property
    def val(self) -> Any:
        """The stored value; raises ``StoreError`` if nothing was stored yet."""
        if self._val is _EMPTY:
            raise StoreError(
                f"{self._what()} was read before the transformed function ran (call "
                f"call_wrapped first)")
        return self._val

    def __bool__(self) -> bool:
        return self._val is not _EMPTY

    def reset(self) -> None:
        """Empty the store (for debugging and error recovery only)."""
        self._val = _EMPTY

    def __repr__(self) -> str:
        return f"{type(self).__name__}(label={self.label!r}, val={self._val!r})"


class EqualStore(Store):
    """A store that accepts a second write of an equal value (e.g. when a
    transformed function is legitimately evaluated twice)."""

    __slots__ = ()

    def store(self, val: Any) -> None:
        if self._val is _EMPTY:
            self._val = val
            return
        try:
            same = bool(self._val == val)
        except Exception:
            same = False
        if not same:
            raise StoreError(f"{self._what()} was stored twice with different values: "
                             f"{self._val!r} then {val!r}")


class WrappedFun:
    """A function ``f`` with a stack of transformations applied lazily.

    See the module docstring. Attributes are read-only by convention; build
    new WrappedFuns with :meth:`wrap`, :func:`annotate`, :func:`add_debug_info`
    or :meth:`replace_debug_info`.
    """

    __slots__ = ("f", "f_transformed", "transforms", "stores", "params", "in_type",
                 "debug_info", "debug_info_depth")

    f: Callable[..., Any]
    f_transformed: Callable[..., Any]
    transforms: tuple[Transform, ...]
    stores: tuple[Store | None, ...]
    params: tuple[tuple[str, Any], ...]
    in_type: tuple[Any, ...] | None
    debug_info: TracingDebugInfo | None
    debug_info_depth: int

    def __init__(self, f: Callable[..., Any], f_transformed: Callable[..., Any],
                 transforms: tuple[Transform, ...], stores: tuple[Store | None, ...],
                 params: tuple[tuple[str, Any], ...], in_type: tuple[Any, ...] | None,
                 debug_info: TracingDebugInfo | None, debug_info_depth: int = 0) -> None:
        self.f = f
        self.f_transformed = f_transformed
        self.transforms = transforms
        self.stores = stores
        self.params = params
        self.in_type = in_type
        self.debug_info = debug_info
        self.debug_info_depth = debug_info_depth

    @property
    def __name__(self) -> str:
        return fun_name(self.f)

    def wrap(self, gen: Callable[..., Any], gen_static_args: Iterable[Any],
             out_store: Store | None) -> WrappedFun:
        """Push one more transformation (outermost) with its output store.

        ``gen`` is a generator function (see the module docstring) or a plain
        function ``gen(inner, [out_store,] *gen_static_args, *args, **kwargs)``.
        The input type annotation is dropped: the transformation may change the
        arguments. The debug info is carried over unchanged; a transformation
        that changes the number or order of arguments or results must update
        it with :meth:`replace_debug_info` (see :meth:`stale_names_suspects`).
        """
        static_args = tuple(gen_static_args)
        inner = self.f_transformed
        f_transformed: Callable[..., Any]
        if is_generator_function(gen):
            f_transformed = partial(_run_generator, gen, inner, out_store, static_args)
        elif out_store is None:
            f_transformed = partial(gen, inner, *static_args)
        else:
            f_transformed = partial(gen, inner, out_store, *static_args)
        return WrappedFun(self.f, f_transformed, ((gen, static_args),) + self.transforms,
                          (out_store,) + self.stores, self.params, None, self.debug_info,
                          self.debug_info_depth)

    def call_wrapped(self, *args: Any, **kwargs: Any) -> Any:
        """Call ``f`` through all the transformations; fills the stores."""
        return self.f_transformed(*args, **kwargs)

    def populate_stores(self, stores: Iterable[Store | None]) -> None:
        """Copy the values of ``stores`` (another WrappedFun's, after it ran)
        into this one's stores, as if this one had run."""
        for mine, theirs in zip(self.stores, stores, strict=True):
            if mine is not None and theirs is not None and theirs:
                mine.store(theirs.val)

    def replace_debug_info(self, debug_info: TracingDebugInfo | None) -> WrappedFun:
        """The same WrappedFun (sharing stores) with another debug info; used by
        transformations that update the names (e.g. adding tangent inputs)."""
        _check_debug_info(debug_info, "replace_debug_info")
        return WrappedFun(self.f, self.f_transformed, self.transforms, self.stores,
                          self.params, self.in_type, debug_info, len(self.transforms))

    def stale_names_suspects(self) -> str:
        """Names the transformations that carried ``debug_info`` unchanged since
        it was set (outermost first), and the record's own transformation: when
        the record's counts are stale, one of them changed the arguments or
        results without updating the names. For error messages."""
        carried = self.transforms[:len(self.transforms) - self.debug_info_depth]
        names = [fun_name(gen) for gen, _ in carried]
        src = self.debug_info.func_src_info if self.debug_info is not None else None
        origin = f"the record of {src}" if src else "the record"
        if not names:
            return f"{origin} itself (no transformation carried it since it was set)"
        return (f"one of the transformations {', '.join(names)} (outermost first), which "
                f"carried {origin} unchanged")

    def safe_arg_names(self, expected_count: int) -> tuple[str | None, ...]:
        """``debug_info.safe_arg_names``, blaming :meth:`stale_names_suspects`;
        all ``None`` without debug info."""
        dbg = self.debug_info
        if dbg is None:
            return (None,) * expected_count
        return dbg.safe_arg_names(expected_count, made_by=self.stale_names_suspects)

    def safe_result_paths(self, expected_count: int) -> tuple[str | None, ...]:
        """``debug_info.safe_result_paths``, blaming :meth:`stale_names_suspects`;
        all ``None`` without debug info."""
        dbg = self.debug_info
        if dbg is None:
            return (None,) * expected_count
        return dbg.safe_result_paths(expected_count, made_by=self.stale_names_suspects)

    def _identity(self) -> tuple[Any, ...]:
        return (self.f, self.transforms, self.params, self.in_type, self.debug_info)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, WrappedFun):
            return NotImplemented
        return self is other or self._identity() == other._identity()

    def __hash__(self) -> int:
        return hash(self._identity())

    def __repr__(self) -> str:
        lines = [f"  {i}: {fun_name(gen)} {static_args!r}"
                 for i, (gen, static_args) in enumerate(self.transforms)]
        return "\n".join([f"WrappedFun of {fun_name(self.f)}:", *lines])


def _run_generator(gen: Callable[..., Any], inner: Callable[..., Any], out_store: Store | None,
                   static_args: tuple[Any, ...], *args: Any, **kwargs: Any) -> Any:
    """Run one generator transformation around ``inner``."""
    steps = gen(*static_args, *args, **kwargs)
    try:
        first = next(steps)
    except StopIteration:
        raise TransformationError(
            f"transformation {fun_name(gen)} finished without yielding its (args, kwargs)"
        ) from None
    if not (isinstance(first, tuple) and len(first) == 2 and isinstance(first[1], Mapping)):
        steps.close()
        raise TransformationError(
            f"transformation {fun_name(gen)} must first yield a pair (args, kwargs_dict), got "
            f"{type(first).__name__}: {first!r}")
    new_args, new_kwargs = first
    try:
        ans = inner(*new_args, **new_kwargs)
    except BaseException:
        # Let the generator's `finally`/`with` blocks run now, before the error
        # propagates, rather than whenever the generator is collected.
        steps.close()
        raise
    try:
        out = steps.send(ans)
    except StopIteration:
        raise TransformationError(
            f"transformation {fun_name(gen)} finished without yielding its results") from None
    steps.close()
    if out_store is None:
        return out
    if not (isinstance(out, tuple) and len(out) == 2):
        raise TransformationError(
            f"transformation {fun_name(gen)} has an output store, so it must finally yield a "
            f"pair (results, aux), got {type(out).__name__}: {out!r}")
    results, aux = out
    out_store.store(aux)
    return results


def _check_debug_info(debug_info: object, where: str) -> None:
    if debug_info is not None and not isinstance(debug_info, TracingDebugInfo):
        raise TypeError(f"{where}: debug_info must be a TracingDebugInfo or None, got "
                        f"{type(debug_info).__name__}: {debug_info!r}")


def wrap_init(f: Callable[..., Any], params: Mapping[str, Hashable] | None = None, *,
              debug_info: TracingDebugInfo | None = None) -> WrappedFun:
    """Wrap ``f`` as a WrappedFun with no transformations.

    ``params`` are keyword arguments always passed to ``f`` (they must be
    hashable: they are part of the WrappedFun's identity).
    """
    if not callable(f):
        raise TypeError(f"wrap_init: expected a callable, got {type(f).__name__}: {f!r}")
    _check_debug_info(debug_info, "wrap_init")
    if params:
        param_items = tuple(sorted(params.items()))
        f_transformed: Callable[..., Any] = partial(f, **params)
    else:
        param_items = ()
        f_transformed = f
    return WrappedFun(f, f_transformed, (), (), param_items, None, debug_info)


def transformation(gen: Callable[..., Any], fun: WrappedFun,
                   *gen_static_args: Any) -> WrappedFun:
    """Apply the transformation ``gen`` (with static args) to ``fun``."""
    return fun.wrap(gen, gen_static_args, None)


class _AuxThunk:
    """Reads a transformation's auxiliary output once the function has run."""

    __slots__ = ("_store",)

    def __init__(self, store: Store) -> None:
        self._store = store

    def __call__(self) -> Any:
        return self._store.val

    def __repr__(self) -> str:
        return f"<aux output of {self._store.label}>"


def transformation_with_aux(gen: Callable[..., Any], fun: WrappedFun, *gen_static_args: Any,
                            use_eq_store: bool = False
                            ) -> tuple[WrappedFun, Callable[[], Any]]:
    """Apply the transformation ``gen``, which leaves an auxiliary output.

    Returns the new WrappedFun and a thunk returning the auxiliary output; the
    thunk raises ``StoreError`` if called before the function ran.
    ``use_eq_store`` tolerates a second run storing an equal value.
    """
    label = fun_name(gen)
    out_store = EqualStore(label) if use_eq_store else Store(label)
    return fun.wrap(gen, gen_static_args, out_store), _AuxThunk(out_store)


def annotate(f: WrappedFun, in_type: tuple[Any, ...] | None) -> WrappedFun:
    """Attach an input type annotation (a hashable tuple, one entry per flat
    argument; its meaning belongs to the layers above). ``None`` is a no-op;
    annotating an annotated WrappedFun is an error."""
    if in_type is None:
        return f
    if f.in_type is not None:
        raise ValueError(f"annotate: {f.__name__} already has an input type annotation "
                         f"{f.in_type!r}")
    if not isinstance(in_type, tuple):
        raise TypeError(f"annotate: in_type for {f.__name__} must be a tuple, got "
                        f"{type(in_type).__name__}: {in_type!r}")
    return WrappedFun(f.f, f.f_transformed, f.transforms, f.stores, f.params, in_type,
                      f.debug_info, f.debug_info_depth)


def add_debug_info(f: WrappedFun, debug_info: TracingDebugInfo | None) -> WrappedFun:
    """Attach ``debug_info`` to a WrappedFun that has none (a WrappedFun has at
    most one; use :meth:`WrappedFun.replace_debug_info` to update it)."""
    _check_debug_info(debug_info, "add_debug_info")
    if f.debug_info is not None:
        raise ValueError(f"add_debug_info: {f.__name__} already has debug info "
                         f"{f.debug_info!r}; use replace_debug_info to change it")
    if debug_info is None:
        return f
    return f.replace_debug_info(debug_info)
