"""Helpers the API layers (jit, pmap, vmap, grad, make_jaxpr, ...) share.

* Debug info: :func:`debug_info` names each flat dynamic argument of a call
  the way JAX 0.10 does (``x``, ``y['hi']``, ``args[0]``, ``kwargs['w']``,
  ``p.u``), :func:`fun_sourceinfo` / :func:`fun_name` describe the function,
  and the :func:`result_paths` transformation records the output paths
  (``result``, ``result['a']``, ``result[0]``).
* Pytree plumbing as WrappedFun transformations: :func:`flatten_fun`,
  :func:`flatten_fun_nokwargs`, :func:`flatten_fun_nokwargs2`.
* Static arguments: :func:`argnums_partial`, :func:`argnames_partial` (and the
  ``_except`` forms), which fix the static arguments inside the WrappedFun so
  that they become part of its identity.
* Argument specifications: :func:`resolve_argnums_and_argnames`,
  :func:`infer_argnums_and_argnames`, :func:`validate_argnums`,
  :func:`validate_argnames`, and :func:`flatten_axes` for axis-spec prefixes.
* Hashability: :class:`HashableFunction`, :func:`hashable_partial`,
  :class:`Unhashable`, :class:`StrictHashable`.
"""

from __future__ import annotations

import inspect
import operator
import types
import weakref
from collections.abc import Callable, Iterable, Sequence
from typing import Any, cast

from lamina_linear_util._fun_info import fun_name, fun_sourceinfo, is_generator_function
from lamina_linear_util.debug_info import TracingDebugInfo
from lamina_linear_util.errors import NonHashableStaticArgumentError
from lamina_linear_util.linear_util import (
    Store,
    WrappedFun,
    transformation,
    transformation_with_aux,
)
from lamina_linear_util.tree_util import (
    PYTREE_LEAF,
    PyTreeDef,
    debug_keystr,
    first_prefix_mismatch,
    is_too_deep,
    none_leaf_registry,
    registry,
    too_deep_error,
    treedef_children,
)

__all__ = [
    "HashableFunction",
    "HashablePartial",
    "NonHashableStaticArgumentError",
    "StrictHashable",
    "Unhashable",
    "argnames_partial",
    "argnames_partial_except",
    "argnums_partial",
    "argnums_partial_except",
    "as_hashable_function",
    "check_callable",
    "debug_info",
    "deep_argument_error",
    "ensure_index_tuple",
    "ensure_str_tuple",
    "flatten_axes",
    "flatten_fun",
    "flatten_fun_nokwargs",
    "flatten_fun_nokwargs2",
    "fun_name",
    "fun_signature",
    "fun_sourceinfo",
    "hashable_partial",
    "infer_argnums_and_argnames",
    "is_hashable",
    "resolve_argnums",
    "resolve_argnums_and_argnames",
    "result_paths",
    "validate_argnames",
    "validate_argnums",
]

_POSITIONAL_ONLY = inspect.Parameter.POSITIONAL_ONLY
_POSITIONAL_OR_KEYWORD = inspect.Parameter.POSITIONAL_OR_KEYWORD
_VAR_POSITIONAL = inspect.Parameter.VAR_POSITIONAL
_KEYWORD_ONLY = inspect.Parameter.KEYWORD_ONLY
_VAR_KEYWORD = inspect.Parameter.VAR_KEYWORD

_flatten = registry.flatten
_flatten_with_path = registry.flatten_with_path


# ==========================================================================
# Hashability helpers
# ==========================================================================

def is_hashable(value: Any) -> bool:
    """True if ``hash(value)`` succeeds."""
    try:
        hash(value)
    except TypeError:
        return False
    return True


class Unhashable:
    """A box that compares its value by ``==`` but cannot be hashed.

    Static arguments that need not be hashable (``require_static_args_hashable
    =False``) are boxed in it; a WrappedFun holding one cannot key a cache.
    """

    __slots__ = ("val",)

    def __init__(self, val: Any) -> None:
        self.val = val

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Unhashable) and bool(self.val == other.val)

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return f"Unhashable({self.val!r})"


class StrictHashable:
    """A box for a static argument in a cache key: equal only to a box of a
    value of the very same type that compares equal (so ``1``, ``1.0`` and
    ``True`` are different static arguments)."""

    __slots__ = ("val",)

    def __init__(self, val: Any) -> None:
        self.val = val

    def __hash__(self) -> int:
        return hash(self.val)

    def __eq__(self, other: object) -> bool:
        return (isinstance(other, StrictHashable) and type(self.val) is type(other.val)
                and bool(self.val == other.val))

    def __repr__(self) -> str:
        return f"StrictHashable({self.val!r})"


class HashableFunction:
    """A function whose equality and hash come from its code and an explicit
    ``closure`` value rather than its identity.

    Locally defined functions are new objects on every call of the enclosing
    function; wrapping them with the values they close over (``closure``, which
    must determine their behaviour and be hashable) makes equal ones compare
    equal, so they can appear in cache keys.
    """

    __slots__ = ("f", "closure")

    def __init__(self, f: Callable[..., Any], closure: Any) -> None:
        self.f = f
        self.closure = closure

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self.f(*args, **kwargs)

    def __eq__(self, other: object) -> bool:
        return (isinstance(other, HashableFunction) and _code(self.f) == _code(other.f)
                and bool(self.closure == other.closure))

    def __hash__(self) -> int:
        return hash((_code(self.f), self.closure))

    @property
    def __name__(self) -> str:
        return fun_name(self.f)

    def __repr__(self) -> str:
        return f"<hashable {fun_name(self.f)} with closure={self.closure!r}>"


def _code(f: Callable[..., Any]) -> Any:
    # Functions compare by bytecode; other callables (builtins) by identity.
    return getattr(f, "__code__", f)


def as_hashable_function(closure: Any) -> Callable[[Callable[..., Any]], HashableFunction]:
    """Decorator form of :class:`HashableFunction`."""
    return lambda f: HashableFunction(f, closure)


class HashablePartial:
    """``functools.partial`` whose equality and hash use the function's code
    and the bound arguments (which must be hashable)."""

    __slots__ = ("f", "args", "kwargs")

    def __init__(self, f: Callable[..., Any], *args: Any, **kwargs: Any) -> None:
        self.f = f
        self.args = args
        self.kwargs = kwargs

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self.f(*self.args, *args, **self.kwargs, **kwargs)

    def __eq__(self, other: object) -> bool:
        return (isinstance(other, HashablePartial) and _code(self.f) == _code(other.f)
                and self.args == other.args and self.kwargs == other.kwargs)

    def __hash__(self) -> int:
        return hash((_code(self.f), self.args, tuple(sorted(self.kwargs.items()))))

    @property
    def __name__(self) -> str:
        return fun_name(self.f)

    def __repr__(self) -> str:
        return f"<hashable partial {fun_name(self.f)} args={self.args!r} kwargs={self.kwargs!r}>"


def hashable_partial(f: Callable[..., Any], *args: Any, **kwargs: Any) -> HashablePartial:
    """``HashablePartial(f, *args, **kwargs)``."""
    return HashablePartial(f, *args, **kwargs)


def _non_hashable_error(arg: Any, where: str, fun: WrappedFun) -> NonHashableStaticArgumentError:
    return NonHashableStaticArgumentError(
        "Non-hashable static arguments are not supported, as this can lead to unexpected "
        f"cache-misses. Static argument ({where}) of type {type(arg)} for function "
        f"{fun.__name__} is non-hashable.")


# ==========================================================================
# Callables, signatures and debug info
# ==========================================================================

def check_callable(fun: object) -> None:
    """Raise ``TypeError`` unless ``fun`` can be transformed (a callable that
    is neither a ``staticmethod`` object nor a generator function)."""
    if isinstance(fun, staticmethod):
        raise TypeError(f"staticmethod arguments are not supported, got {fun!r}")
    if not callable(fun):
        raise TypeError(f"Expected a callable value, got {fun!r}")
    if is_generator_function(fun):
        raise TypeError(f"Expected a function, got a generator function: {fun!r}")


_signatures: weakref.WeakKeyDictionary[Any, inspect.Signature | None] = (
    weakref.WeakKeyDictionary())


# Signatures of plain functions that only their code determines, by code
# object: a new lambda or closure made by the same source line each call (a
# common way to call jit or make_jaxpr) reuses its first signature.
_code_signatures: weakref.WeakKeyDictionary[types.CodeType, inspect.Signature] = (
    weakref.WeakKeyDictionary())


def _code_only_signature(fun: Any) -> types.CodeType | None:
    """``fun``'s code object when its signature depends on nothing else: a
    plain function without defaults, annotations or attributes (``__wrapped__``
    and ``__signature__`` change what inspect reports)."""
    if (type(fun) is not types.FunctionType or fun.__defaults__ or fun.__kwdefaults__
            or fun.__dict__ or fun.__annotations__):
        return None
    return fun.__code__


def fun_signature(fun: Callable[..., Any]) -> inspect.Signature | None:
    """``inspect.signature(fun)``, or ``None`` where there is none (some
    builtins). Remembered per function while the function lives."""
    try:
        return _signatures[fun]
    except (KeyError, TypeError):
        pass
    code = _code_only_signature(fun)
    sig: inspect.Signature | None = None if code is None else _code_signatures.get(code)
    if sig is None:
        try:
            sig = inspect.signature(fun)
        except (ValueError, TypeError):
            sig = None
        if code is not None and sig is not None:
            _code_signatures[code] = sig
    try:
        _signatures[fun] = sig
    except TypeError:  # not weakly referenceable or not hashable
        pass
    return sig


class _StaticMarker:
    """Put in place of static arguments: a leaf that names leave out."""

    __slots__ = ()

    def __repr__(self) -> str:
        return "<static>"


_STATIC = _StaticMarker()


def _ensure_inbounds(allow_invalid: bool, num_args: int, argnums: Iterable[int]
                     ) -> tuple[int, ...]:
    """Resolve negative indices; indices past the end are dropped when
    ``allow_invalid``, otherwise (and for too negative ones) an error."""
    out = []
    for i in argnums:
        if i >= num_args and allow_invalid:
            continue
        if not -num_args <= i < num_args:
            raise ValueError(
                "Positional argument indices, e.g. for `static_argnums`, must have value "
                "greater than or equal to -len(args) and less than len(args), but got "
                f"value {i} for len(args) == {num_args}.")
        out.append(i % num_args)
    return tuple(out)


def _bound_order(sig: inspect.Signature, bound: inspect.BoundArguments,
                 kwargs: dict[str, Any]) -> list[tuple[str, Any]]:
    """(name, value) of the top-level arguments, positional ones first, then the
    keyword ones sorted by keyword (the order in which the call is flattened)."""
    params = sig.parameters
    var_kw = next((n for n, p in params.items() if p.kind is _VAR_KEYWORD), None)
    ordered: list[tuple[str, Any]] = []
    for name, value in bound.arguments.items():
        kind = params[name].kind
        passed_by_keyword = kind is _POSITIONAL_OR_KEYWORD and name in kwargs
        if kind in (_VAR_KEYWORD, _KEYWORD_ONLY) or passed_by_keyword:
            continue
        ordered.append((name, value))
    for key in sorted(kwargs):
        param = params.get(key)
        if param is not None and param.kind in (_POSITIONAL_OR_KEYWORD, _KEYWORD_ONLY):
            ordered.append((key, kwargs[key]))
        else:  # it went into **var_kw
            ordered.append((f"{var_kw}[{key!r}]", kwargs[key]))
    return ordered


def _all_positional(sig: inspect.Signature, n_args: int) -> bool:
    """``sig`` has exactly ``n_args`` parameters, all positional ones."""
    params = sig.parameters
    return len(params) == n_args and all(
        p.kind is _POSITIONAL_OR_KEYWORD or p.kind is _POSITIONAL_ONLY for p in params.values())


def _arg_names(sig: inspect.Signature | None, args: Sequence[Any], kwargs: dict[str, Any],
               static_argnums: Sequence[int], static_argnames: Sequence[str]
               ) -> tuple[str | None, ...]:
    static_nums = set(_ensure_inbounds(True, len(args), static_argnums))
    static_names = set(static_argnames)
    args_ = [_STATIC if i in static_nums else x for i, x in enumerate(args)]
    kwargs_ = {k: _STATIC if k in static_names else v for k, v in kwargs.items()}
    ordered: list[tuple[str, Any]] | None = None
    if sig is not None and not kwargs_ and _all_positional(sig, len(args_)):
        # Each parameter gets one positional argument: what binding would give.
        ordered = list(zip(sig.parameters, args_))
    elif sig is not None:
        try:
            bound = sig.bind(*args_, **kwargs_)
        except TypeError:
            pass  # the call does not fit the signature: generic names below
        else:
            ordered = _bound_order(sig, bound, kwargs_)
    if ordered is None:
        ordered = [("args", args_)]
        ordered += [(f"kwargs[{k!r}]", kwargs_[k]) for k in sorted(kwargs_)]
    names = [name for name, _ in ordered]
    # One flattening of all arguments: the first key of each path is the
    # argument's position in `ordered`.
    pairs, _ = _flatten_with_path([value for _, value in ordered])
    return tuple(names[path[0].idx] + debug_keystr(path[1:])
                 for path, leaf in pairs if leaf is not _STATIC)


def deep_argument_error(fun_desc: str, fun: Callable[..., Any], args: Sequence[Any],
                        kwargs: dict[str, Any]) -> RecursionError | None:
    """The error for a call of ``fun`` (described as ``fun_desc``, e.g.
    ``jit(f)``) whose arguments could not be flattened because one is nested
    too deeply: it names the first such argument (``x``, ``args[1]``,
    ``kwargs['k']``). ``None`` when every argument flattens (the failure was
    elsewhere). For error paths only: it flattens each argument again."""
    sig = fun_signature(fun)
    ordered: list[tuple[str, Any]] | None = None
    if sig is not None:
        try:
            ordered = _bound_order(sig, sig.bind(*args, **kwargs), kwargs)
        except TypeError:
            ordered = None
    if ordered is None:
        ordered = [(f"args[{i}]", x) for i, x in enumerate(args)]
        ordered += [(f"kwargs[{k!r}]", kwargs[k]) for k in sorted(kwargs)]
    star = next((n for n, p in sig.parameters.items() if p.kind is _VAR_POSITIONAL),
                None) if sig is not None else None
    for name, value in ordered:
        parts = [(f"{name}[{i}]", x) for i, x in enumerate(value)] if name == star else \
            [(name, value)]
        for part_name, part in parts:
            try:
                _flatten(part)
            except (SystemError, RecursionError):
                return too_deep_error(f"{fun_desc}: argument {part_name}")
    return None


def _bare_name(fun: Callable[..., Any]) -> str | None:
    name = fun_name(fun)
    return name if name and not any(c.isspace() for c in name) else None


def debug_info(traced_for: str, fun: Callable[..., Any], args: Sequence[Any],
               kwargs: dict[str, Any], *, static_argnums: Sequence[int] = (),
               static_argnames: Sequence[str] = (), sourceinfo: str | None = None,
               signature: inspect.Signature | None = None) -> TracingDebugInfo:
    """The ``TracingDebugInfo`` for tracing ``fun(*args, **kwargs)``.

    ``args``/``kwargs`` are the call's arguments *including* the static ones,
    which ``static_argnums`` (positions in ``args``) and ``static_argnames``
    (keys of ``kwargs``) designate; they get no names, and the others keep
    their numbering (``args[2]`` stays ``args[2]``).

    There is one name per flat dynamic leaf, in the order of
    ``tree_flatten((args, kwargs))``: positional arguments first, then keyword
    arguments sorted by keyword. Parameters are named as in the signature
    (``x``, ``y['hi']``, ``p.u``), ``*args`` entries ``args[i]``, extra
    keywords ``kwargs['k']`` (after the actual ``*``/``**`` parameter names).
    When the call does not fit the signature (or there is none) the names are
    ``args[i]`` and ``kwargs['k']``. ``func_src_info`` is
    ``fun_sourceinfo(fun)``, or just the name for functions without Python
    source (``"max"``, as JAX). ``result_paths`` is ``None``; the
    :func:`result_paths` transformation fills it in.
    """
    if sourceinfo is None:
        # Without Python source (builtins) the bare name still beats nothing.
        sourceinfo = fun_sourceinfo(fun) or _bare_name(fun)
    if signature is None:
        signature = fun_signature(fun)
    try:
        names = _arg_names(signature, args, kwargs, static_argnums, static_argnames)
    except SystemError as e:
        named = deep_argument_error(f"{traced_for}({fun_name(fun) or 'fun'})", fun, args,
                                    kwargs) if is_too_deep(e) else None
        if named is None:
            raise
        raise named from None
    return TracingDebugInfo(traced_for, sourceinfo, names, None)


def _record_result_paths(inner: Callable[..., Any], store: Store, *args: Any,
                         **kwargs: Any) -> Any:
    ans = inner(*args, **kwargs)
    try:
        pairs, _ = _flatten_with_path(ans)
    except SystemError as e:
        if not is_too_deep(e):
            raise
        raise too_deep_error("the traced function's result") from None
    store.store(tuple("result" + debug_keystr(path) for path, _ in pairs))
    return ans


def result_paths(fun: WrappedFun) -> tuple[WrappedFun, Callable[[], tuple[str, ...]]]:
    """Record the key paths of ``fun``'s (unflattened) output.

    Returns the new WrappedFun and a thunk giving the paths (``("result",)``
    for a single array, ``("result['a']", "result['b'][0]")`` for a dict, ...)
    once it has run. If ``fun`` has debug info, the new WrappedFun's
    ``debug_info.result_paths`` is that thunk. Apply it before
    :func:`flatten_fun` (it must see the pytree output).
    """
    new_fun, thunk = transformation_with_aux(_record_result_paths, fun)
    paths_thunk = cast("Callable[[], tuple[str, ...]]", thunk)
    if fun.debug_info is not None:
        new_fun = new_fun.replace_debug_info(fun.debug_info.with_result_paths(paths_thunk))
    return new_fun, paths_thunk


# ==========================================================================
# Flattening transformations
# ==========================================================================

def _check_flat_count(fun_name_: str, in_tree: PyTreeDef, args_flat: tuple[Any, ...]) -> None:
    if len(args_flat) != in_tree.num_leaves:
        raise TypeError(f"{fun_name_}: expected {in_tree.num_leaves} flat arguments for the "
                        f"input structure {in_tree}, got {len(args_flat)}")


def _flatten_fun(inner: Callable[..., Any], store: Store, in_tree: PyTreeDef,
                 *args_flat: Any) -> list[Any]:
    _check_flat_count("flatten_fun", in_tree, args_flat)
    py_args, py_kwargs = in_tree.unflatten(args_flat)
    ans_flat, out_tree = _flatten(inner(*py_args, **py_kwargs))
    store.store(out_tree)
    return cast("list[Any]", ans_flat)


def flatten_fun(f: WrappedFun, in_tree: PyTreeDef
                ) -> tuple[WrappedFun, Callable[[], PyTreeDef]]:
    """Make ``f`` take flat arguments and return flat results.

    ``in_tree`` is the structure of ``(args_tuple, kwargs_dict)``. The new
    function unflattens its arguments into ``(args, kwargs)``, calls ``f`` and
    returns the list of output leaves; the thunk gives the output structure.
    """
    new_fun, thunk = transformation_with_aux(_flatten_fun, f, in_tree)
    return new_fun, cast("Callable[[], PyTreeDef]", thunk)


def _flatten_fun_nokwargs(inner: Callable[..., Any], store: Store, in_tree: PyTreeDef,
                          *args_flat: Any) -> list[Any]:
    _check_flat_count("flatten_fun_nokwargs", in_tree, args_flat)
    ans_flat, out_tree = _flatten(inner(*in_tree.unflatten(args_flat)))
    store.store(out_tree)
    return cast("list[Any]", ans_flat)


def flatten_fun_nokwargs(f: WrappedFun, in_tree: PyTreeDef
                         ) -> tuple[WrappedFun, Callable[[], PyTreeDef]]:
    """Like :func:`flatten_fun` for a function of positional arguments only:
    ``in_tree`` is the structure of the args tuple."""
    new_fun, thunk = transformation_with_aux(_flatten_fun_nokwargs, f, in_tree)
    return new_fun, cast("Callable[[], PyTreeDef]", thunk)


def _flatten_fun_nokwargs2(inner: Callable[..., Any], store: Store, in_tree: PyTreeDef,
                           *args_flat: Any) -> tuple[list[Any], list[Any]]:
    _check_flat_count("flatten_fun_nokwargs2", in_tree, args_flat)
    pair = inner(*in_tree.unflatten(args_flat))
    if not isinstance(pair, (list, tuple)) or len(pair) != 2:
        raise TypeError("expected function with aux output to return a two-element tuple, "
                        f"but got type {type(pair)} with value {pair!r}")
    ans, aux = pair
    ans_flat, ans_tree = _flatten(ans)
    aux_flat, aux_tree = _flatten(aux)
    store.store((ans_tree, aux_tree))
    return ans_flat, aux_flat


def flatten_fun_nokwargs2(f: WrappedFun, in_tree: PyTreeDef
                          ) -> tuple[WrappedFun, Callable[[], tuple[PyTreeDef, PyTreeDef]]]:
    """For a function returning ``(ans, aux)``: the new function returns
    ``(ans_leaves, aux_leaves)`` and the thunk ``(ans_tree, aux_tree)``.

    Its results are ``ans``'s leaves (``aux`` is a side output), so its
    result paths are the first ``ans`` paths of ``f``'s (``result[0]``, ...)."""
    new_fun, thunk = transformation_with_aux(_flatten_fun_nokwargs2, f, in_tree)
    trees = cast("Callable[[], tuple[PyTreeDef, PyTreeDef]]", thunk)
    dbg = f.debug_info
    if dbg is not None and dbg.result_paths is not None:
        pair_paths = dbg.result_paths

        def ans_paths() -> tuple[str | None, ...]:
            paths = tuple(pair_paths()) if callable(pair_paths) else pair_paths
            assert isinstance(paths, tuple)
            return paths[:trees()[0].num_leaves]

        new_fun = new_fun.replace_debug_info(dbg.with_result_paths(ans_paths))
    return new_fun, trees


# ==========================================================================
# Static arguments
# ==========================================================================

class _Missing:
    __slots__ = ()


_MISSING = _Missing()


def _argnums_partial(inner: Callable[..., Any], dyn_argnums: tuple[int, ...],
                     fixed_args: tuple[Any, ...], *dyn_args: Any, **kwargs: Any) -> Any:
    args: list[Any] = [_MISSING] * (len(fixed_args) + len(dyn_args))
    for i, arg in zip(dyn_argnums, dyn_args, strict=True):
        args[i] = arg
    fixed = iter(fixed_args)
    full = [next(fixed).val if a is _MISSING else a for a in args]
    return inner(*full, **kwargs)


def argnums_partial(f: WrappedFun, dyn_argnums: int | Sequence[int], args: Sequence[Any],
                    require_static_args_hashable: bool = True
                    ) -> tuple[WrappedFun, tuple[Any, ...]]:
    """Fix every argument of ``args`` except those at ``dyn_argnums`` inside ``f``.

    Returns the WrappedFun taking only the dynamic arguments (in the order of
    ``dyn_argnums``) and those arguments. The fixed ones must be hashable
    (``NonHashableStaticArgumentError`` otherwise) and are compared with strict
    type equality; with ``require_static_args_hashable=False`` they are boxed
    in :class:`Unhashable` (the result can then not key a cache).
    """
    dyn = _ensure_inbounds(False, len(args), ensure_index_tuple(dyn_argnums, what="dyn_argnums"))
    if len(set(dyn)) != len(dyn):
        raise ValueError(f"argnums_partial for {f.__name__}: dyn_argnums {dyn} has duplicates")
    dyn_set = set(dyn)
    fixed: list[Any] = []
    for i, arg in enumerate(args):
        if i in dyn_set:
            continue
        if not require_static_args_hashable:
            fixed.append(Unhashable(arg))
        elif is_hashable(arg):
            fixed.append(StrictHashable(arg))
        else:
            raise _non_hashable_error(arg, f"index {i}", f)
    dyn_args = tuple(args[i] for i in dyn)
    return transformation(_argnums_partial, f, dyn, tuple(fixed)), dyn_args


def argnums_partial_except(f: WrappedFun, static_argnums: Sequence[int], args: Sequence[Any],
                           *, allow_invalid: bool) -> tuple[WrappedFun, tuple[Any, ...]]:
    """:func:`argnums_partial` given the static positions instead (indices past
    the end are ignored when ``allow_invalid``)."""
    if not static_argnums:
        return f, tuple(args)
    static = set(_ensure_inbounds(allow_invalid, len(args), static_argnums))
    dyn = tuple(i for i in range(len(args)) if i not in static)
    return argnums_partial(f, dyn, args)


def _argnames_partial(inner: Callable[..., Any], fixed_kwargs: tuple[tuple[str, Any], ...],
                      *args: Any, **dyn_kwargs: Any) -> Any:
    return inner(*args, **dyn_kwargs, **{k: box.val for k, box in fixed_kwargs})


def argnames_partial(f: WrappedFun, dyn_argnames: Iterable[str], kwargs: dict[str, Any],
                     require_static_args_hashable: bool = True
                     ) -> tuple[WrappedFun, dict[str, Any]]:
    """Fix every keyword argument of ``kwargs`` not in ``dyn_argnames`` inside ``f``.

    Returns the WrappedFun and the dynamic keyword arguments. Same hashability
    rules as :func:`argnums_partial`.
    """
    dyn_names = set(dyn_argnames)
    fixed: list[tuple[str, Any]] = []
    for k in sorted(kwargs):
        if k in dyn_names:
            continue
        arg = kwargs[k]
        if not require_static_args_hashable:
            fixed.append((k, Unhashable(arg)))
        elif is_hashable(arg):
            fixed.append((k, StrictHashable(arg)))
        else:
            raise _non_hashable_error(arg, f"name {k}", f)
    dyn_kwargs = {k: v for k, v in kwargs.items() if k in dyn_names}
    if not fixed:
        return f, dyn_kwargs
    return transformation(_argnames_partial, f, tuple(fixed)), dyn_kwargs


def argnames_partial_except(f: WrappedFun, static_argnames: Iterable[str],
                            kwargs: dict[str, Any]) -> tuple[WrappedFun, dict[str, Any]]:
    """:func:`argnames_partial` given the static names instead."""
    static = set(static_argnames)
    return argnames_partial(f, [k for k in kwargs if k not in static], kwargs)


# ==========================================================================
# Axis specifications
# ==========================================================================

def flatten_axes(name: str, treedef: PyTreeDef, axis_tree: Any, *, kws: bool = False,
                 tupled_args: bool = False, path_through_args: bool = False) -> list[Any]:
    """Broadcast the axis specification ``axis_tree`` over ``treedef``.

    ``axis_tree`` is a tree prefix of the value tree whose leaves (``None``
    included: it means "not mapped") apply to every leaf of the matching
    subtree. Returns one entry per leaf of ``treedef``. ``name`` names the
    specification in errors (``"vmap in_axes"``); ``kws`` means ``treedef`` is
    ``(args, kwargs)`` and ``axis_tree`` is ``(args_spec, kwargs_spec)``, and
    errors then talk about the positional part; ``tupled_args`` adds a hint
    that specs of pytree arguments belong in a tuple; ``path_through_args``
    writes the mismatch's path through the ``(args, kwargs)`` pair, as JAX's
    pmap does (``pmap in_axes[0][0]`` for the first argument's first entry).
    """
    axis_leaves, axis_treedef = none_leaf_registry.flatten(axis_tree)
    if axis_treedef.num_nodes == 1:  # one spec for everything
        return [axis_leaves[0]] * treedef.num_leaves
    dummy = treedef.unflatten([PYTREE_LEAF] * treedef.num_leaves)
    try:
        subtrees = axis_treedef.flatten_up_to(dummy)
    except (ValueError, TypeError):
        raise _axis_spec_error(name, treedef, axis_tree, kws, tupled_args,
                               path_through_args) from None
    out: list[Any] = []
    for spec, subtree in zip(axis_leaves, subtrees):
        out.extend([spec] * _flatten(subtree)[1].num_leaves)
    return out


def _axis_spec_error(name: str, treedef: PyTreeDef, axis_tree: Any, kws: bool,
                     tupled_args: bool, path_through_args: bool = False) -> ValueError:
    if kws:
        treedef = treedef_children(treedef)[0]
        axis_tree = axis_tree[0]
    hint = ""
    if tupled_args:
        hint = (f" Note that {name} that are non-trivial pytrees should always be wrapped "
                f"in a tuple representing the argument list.")
        if len(treedef.children()) == 1:
            try:
                flatten_axes(name, treedef, (axis_tree,))
            except ValueError:
                pass
            else:
                hint += (f" In particular, you're passing in a single argument which means "
                         f"that {name} might need to be wrapped in a singleton tuple.")
    dummy = treedef.unflatten([PYTREE_LEAF] * treedef.num_leaves)
    mismatch = first_prefix_mismatch(axis_tree, dummy, is_leaf=lambda x: x is None)
    detail = ""
    if mismatch is not None:
        root = f"{name}[0]" if kws and path_through_args else name
        detail = (f" Mismatch at {mismatch.where(root)}: the specification has "
                  f"{mismatch.prefix_node} but the value has {mismatch.full_node}.")
    return ValueError(
        f"{name} specification must be a tree prefix of the corresponding value, got "
        f"specification {axis_tree!r} for value tree {treedef}.{hint}{detail}")


# ==========================================================================
# argnums / argnames
# ==========================================================================

_API_ADJECTIVES = {
    "jit": "Jitted",
    "pmap": "Pmapped",
    "vmap": "Vmapped",
    "grad": "Differentiated",
    "sharded_jit": "Sharded-jitted",
}


def _describe_fun(fun: Callable[..., Any] | None, api_name: str) -> str:
    adjective = _API_ADJECTIVES.get(api_name, f"{api_name}-transformed")
    if fun is None:
        return f"{adjective} function"
    return f"{adjective} function {fun_name(fun)}"


def ensure_index_tuple(x: Any, *, what: str = "argnums") -> tuple[int, ...]:
    """``x`` (an int or an iterable of ints) as a tuple of ints; a clear
    ``TypeError`` naming ``what`` otherwise."""
    try:
        return (operator.index(x),)
    except TypeError:
        pass
    try:
        items = tuple(x)
    except TypeError:
        raise TypeError(f"{what} must be an int or a sequence of ints, got "
                        f"{type(x).__name__}: {x!r}") from None
    out = []
    for item in items:
        try:
            out.append(operator.index(item))
        except TypeError:
            raise TypeError(f"{what} must be an int or a sequence of ints, got {x!r} whose "
                            f"entry {item!r} is a {type(item).__name__}") from None
    return tuple(out)


def ensure_str_tuple(x: Any, *, what: str = "argnames") -> tuple[str, ...]:
    """``x`` (a str or an iterable of strs) as a tuple of strs; a clear
    ``TypeError`` naming ``what`` otherwise."""
    if isinstance(x, str):
        return (x,)
    try:
        items = tuple(x)
    except TypeError:
        raise TypeError(f"{what} must be a str or a sequence of strs, got "
                        f"{type(x).__name__}: {x!r}") from None
    for item in items:
        if not isinstance(item, str):
            raise TypeError(f"{what} must be a str or a sequence of strs, got {x!r} whose "
                            f"entry {item!r} is a {type(item).__name__}")
    return items


def _check_duplicates(values: Sequence[Any], label: str, desc: str) -> None:
    seen: set[Any] = set()
    dups = set()
    for value in values:
        if value in seen:
            dups.add(value)
        seen.add(value)
    if dups:
        raise ValueError(f"{desc} has {label}={tuple(values)} with duplicate entries "
                         f"{sorted(dups, key=str)}.")


def validate_argnums(sig: inspect.Signature, argnums: Sequence[int], argnums_name: str, *,
                     fun: Callable[..., Any] | None = None, api_name: str = "jit",
                     allow_duplicates: bool = False) -> None:
    """Check ``argnums`` against ``sig``: each must index a positional
    parameter (any index is fine with ``*args``), no duplicates unless allowed.
    Raises ``ValueError`` naming the function."""
    desc = _describe_fun(fun, api_name)
    if not allow_duplicates:
        _check_duplicates(argnums, argnums_name, desc)
    n_positional = 0
    for param in sig.parameters.values():
        if param.kind in (_POSITIONAL_ONLY, _POSITIONAL_OR_KEYWORD):
            n_positional += 1
        elif param.kind is _VAR_POSITIONAL:
            return
    if argnums and (-min(argnums) > n_positional or max(argnums) >= n_positional):
        raise ValueError(f"{desc} has {argnums_name}={tuple(argnums)}, but only accepts "
                         f"{n_positional} positional arguments.")


def validate_argnames(sig: inspect.Signature, argnames: Sequence[str], argnames_name: str, *,
                      fun: Callable[..., Any] | None = None, api_name: str = "jit",
                      allow_duplicates: bool = False) -> None:
    """Check ``argnames`` against ``sig``: each must name a parameter that can
    be passed by keyword (any name is fine with ``**kwargs``, except those of
    positional-only parameters). Raises ``ValueError`` naming the function."""
    desc = _describe_fun(fun, api_name)
    if not allow_duplicates:
        _check_duplicates(argnames, argnames_name, desc)
    has_var_kwargs = False
    valid: set[str] = set()
    positional_only: set[str] = set()
    for name, param in sig.parameters.items():
        if param.kind in (_POSITIONAL_OR_KEYWORD, _KEYWORD_ONLY):
            valid.add(name)
        elif param.kind is _VAR_KEYWORD:
            has_var_kwargs = True
        elif param.kind is _POSITIONAL_ONLY:
            positional_only.add(name)
    if bad := sorted(positional_only & set(argnames)):
        raise ValueError(f"{desc} has invalid argnames {set(bad)} in {argnames_name}. "
                         f"These are positional-only")
    if has_var_kwargs:
        return
    if bad := sorted(set(argnames) - valid):
        raise ValueError(f"{desc} has invalid argnames {set(bad)} in {argnames_name}. "
                         f"Function does not take these args.")


def infer_argnums_and_argnames(sig: inspect.Signature, argnums: Any, argnames: Any
                               ) -> tuple[tuple[int, ...], tuple[str, ...]]:
    """Complete one of ``argnums``/``argnames`` from the other through the
    signature (only positional-or-keyword parameters have both). When both or
    neither are given they are just normalized."""
    if argnums is None and argnames is None:
        return (), ()
    if argnums is not None and argnames is not None:
        return ensure_index_tuple(argnums), ensure_str_tuple(argnames)
    params = list(sig.parameters.items())
    if argnums is None:
        names = ensure_str_tuple(argnames)
        nums = tuple(i for i, (k, p) in enumerate(params)
                     if p.kind is _POSITIONAL_OR_KEYWORD and k in names)
        return nums, names
    nums = ensure_index_tuple(argnums)
    names = tuple(k for i, (k, p) in enumerate(params)
                  if p.kind is _POSITIONAL_OR_KEYWORD and i in nums)
    return nums, names


def resolve_argnums_and_argnames(fun: Callable[..., Any], argnums: Any, argnames: Any, *,
                                 argnums_name: str = "static_argnums",
                                 argnames_name: str = "static_argnames",
                                 api_name: str = "jit", allow_duplicates: bool = False
                                 ) -> tuple[tuple[int, ...], tuple[str, ...]]:
    """Normalize, complete and validate one argnums/argnames pair for ``fun``.

    ``argnums`` is ``None``, an int or ints; ``argnames`` ``None``, a str or
    strs. The missing one is inferred from the signature; both are checked
    (range, duplicates, types, names that are not parameters), each error naming
    the function. Functions without a signature (some builtins) get no checks
    beyond types.
    """
    sig = fun_signature(fun)
    if sig is None:
        nums = () if argnums is None else ensure_index_tuple(argnums, what=argnums_name)
        names = () if argnames is None else ensure_str_tuple(argnames, what=argnames_name)
        return nums, names
    if argnums is not None:
        ensure_index_tuple(argnums, what=argnums_name)
    if argnames is not None:
        ensure_str_tuple(argnames, what=argnames_name)
    nums, names = infer_argnums_and_argnames(sig, argnums, argnames)
    validate_argnums(sig, nums, argnums_name, fun=fun, api_name=api_name,
                     allow_duplicates=allow_duplicates)
    validate_argnames(sig, names, argnames_name, fun=fun, api_name=api_name,
                      allow_duplicates=allow_duplicates)
    return nums, names


def _no_argnums(value: Any) -> bool:
    """``value`` (an argnums or argnames argument) designates no argument."""
    return value is None or (type(value) is tuple and not value)


def resolve_argnums(fun: Callable[..., Any], donate_argnums: Any, donate_argnames: Any,
                    static_argnums: Any, static_argnames: Any, *, api_name: str = "jit"
                    ) -> tuple[tuple[int, ...], tuple[str, ...], tuple[int, ...], tuple[str, ...]]:
    """jit's full resolution: ``(donate_argnums, donate_argnames,
    static_argnums, static_argnames)``, each pair completed and validated, and
    static and donated names checked not to intersect. Duplicates are allowed
    (JAX accepts them)."""
    if all(_no_argnums(a) for a in (donate_argnums, donate_argnames, static_argnums,
                                    static_argnames)):
        return (), (), (), ()  # the common case: nothing to complete or validate
    if fun_signature(fun) is None and donate_argnames is not None:
        raise ValueError(f"Getting the signature of function {fun_name(fun)} failed. Pass "
                         f"donate_argnums instead of donate_argnames.")
    static_nums, static_names = resolve_argnums_and_argnames(
        fun, static_argnums, static_argnames, api_name=api_name, allow_duplicates=True)
    donate_nums, donate_names = resolve_argnums_and_argnames(
        fun, donate_argnums, donate_argnames, argnums_name="donate_argnums",
        argnames_name="donate_argnames", api_name=api_name, allow_duplicates=True)
    if both := set(static_names) & set(donate_names):
        raise ValueError(
            "static_argnames and donate_argnames cannot intersect. Argument names "
            f"{both} appear in both static_argnames and donate_argnames")
    return donate_nums, donate_names, static_nums, static_names
