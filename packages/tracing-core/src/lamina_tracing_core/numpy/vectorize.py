"""Function-mapping helpers built on ``vmap``: ``vectorize`` (with NumPy's
generalized-ufunc ``signature=`` and ``excluded=``), ``apply_along_axis``,
``apply_over_axes`` and ``piecewise``."""

from __future__ import annotations

import functools
import re
from collections.abc import Callable, Collection, Sequence
from typing import Any

from lamina_tracing_core import dtypes, lax
from lamina_tracing_core.api import vmap
from lamina_tracing_core.avals import get_aval
from lamina_tracing_core import control_flow  # cond loads at the first piecewise
from lamina_tracing_core.numpy import _util
from lamina_tracing_core.numpy._util import Array, ArrayLike
from lamina_tracing_core.numpy.creation import asarray
from lamina_tracing_core.numpy.shape_ops import expand_dims, squeeze

CoreDims = tuple[str, ...]

_DIMENSION = r"\w+"
_CORE_DIMS = rf"(?:{_DIMENSION}(?:,{_DIMENSION})*)?"
_ARGUMENT = rf"\({_CORE_DIMS}\)"
_ARGUMENT_LIST = rf"{_ARGUMENT}(?:,{_ARGUMENT})*"
_SIGNATURE = rf"^{_ARGUMENT_LIST}->{_ARGUMENT_LIST}$"


def _parse_signature(signature: str) -> tuple[list[CoreDims], list[CoreDims]]:
    """``"(m,n),(n)->(m)"`` as lists of core-dimension names per input and output."""
    compact = re.sub(r"\s+", "", signature)
    if not re.match(_SIGNATURE, compact):
        raise ValueError(f"lamina.numpy.vectorize: not a valid gufunc signature: "
                         f"{signature!r}")
    ins, outs = compact.split("->")

    def parse(part: str) -> list[CoreDims]:
        return [tuple(re.findall(_DIMENSION, arg)) for arg in re.findall(_ARGUMENT, part)]

    return parse(ins), parse(outs)


def _record_core_sizes(sizes: dict[str, int], shape: tuple[int, ...], core: CoreDims,
                       context: str, what: str) -> None:
    if len(shape) < len(core):
        raise ValueError(f"lamina.numpy.vectorize: {what} with shape {shape} has fewer "
                         f"dimensions than its core dimensions {core} {context}")
    for name, size in zip(core, shape[len(shape) - len(core):]):
        if sizes.setdefault(name, size) != size:
            raise ValueError(f"lamina.numpy.vectorize: inconsistent size for core dimension "
                             f"{name!r}: {size} vs {sizes[name]} {context}")


def _without(func: Callable[..., Any], excluded: Collection[int | str], args: Sequence[Any],
             kwargs: dict[str, Any]) -> tuple[Callable[..., Any], list[Any], dict[str, Any]]:
    """``func`` with the excluded positional/keyword arguments bound."""
    if not excluded:
        return func, list(args), dict(kwargs)
    fixed_pos = [(i, args[i]) for i in sorted(e for e in excluded if isinstance(e, int))
                 if i < len(args)]
    fixed_kw = {k: v for k, v in kwargs.items() if k in excluded}
    free = [a for i, a in enumerate(args) if i not in excluded]
    free_kw = {k: v for k, v in kwargs.items() if k not in excluded}

    def bound(*free_args: Any, **free_kwargs: Any) -> Any:
        full = list(free_args)
        for i, value in fixed_pos:
            full.insert(i, value)
        return func(*full, **free_kwargs, **fixed_kw)

    return bound, free, free_kw


def vectorize(pyfunc: Callable[..., Any], *, excluded: Collection[int | str] = frozenset(),
              signature: str | None = None) -> Callable[..., Any]:
    """``pyfunc`` mapped over the leading (broadcast) dimensions of its
    arguments with ``vmap``. Without ``signature`` it gets scalars; with a
    generalized-ufunc signature such as ``"(n),(n)->()"`` it gets the core
    dimensions. Arguments in ``excluded`` (positions or keyword names) and
    other keyword arguments pass through unchanged."""
    if not callable(pyfunc):
        raise TypeError(f"lamina.numpy.vectorize: pyfunc must be callable, got {pyfunc!r}")
    if any(not isinstance(e, (str, int)) for e in excluded):
        raise TypeError("lamina.numpy.vectorize can only exclude integer or string "
                        f"arguments, got excluded={excluded!r}")
    if any(isinstance(e, int) and e < 0 for e in excluded):
        raise ValueError(f"lamina.numpy.vectorize: excluded={excluded!r} contains negative "
                         "numbers")
    parsed = _parse_signature(signature) if signature is not None else None

    @functools.wraps(pyfunc)
    def wrapped(*args: Any, **kwargs: Any) -> Any:
        context = f"(vectorized function with excluded={excluded!r}, signature={signature!r})"
        func, free, free_kw = _without(pyfunc, excluded, args, kwargs)
        in_core = parsed[0] if parsed is not None else [()] * len(free)
        nones = {i for i, a in enumerate(free) if a is None}
        if nones:
            if any(i < len(in_core) and in_core[i] for i in nones):
                raise ValueError(f"lamina.numpy.vectorize: cannot pass None at positions "
                                 f"{sorted(nones)} {context}")
            func, free, _ = _without(func, nones, free, {})
            in_core = [c for i, c in enumerate(in_core) if i not in nones]
        if len(free) != len(in_core):
            raise TypeError(f"lamina.numpy.vectorize: wrong number of positional arguments: "
                            f"expected {len(in_core)}, got {len(free)} {context}")
        arrays = [asarray(a) for a in free]
        sizes: dict[str, int] = {}
        loop_shapes = []
        for i, (x, core) in enumerate(zip(arrays, in_core)):
            shape = _util.shape_of(x)
            _record_core_sizes(sizes, shape, core, context, f"argument {i}")
            loop_shapes.append(shape[:len(shape) - len(core)])
        loop = _util.broadcast_shapes("vectorize", *loop_shapes)
        body = func if parsed is None else _checked(func, sizes, parsed[1], context)
        if free_kw:
            body = functools.partial(body, **free_kw)
        # Size-1 (or missing) loop dimensions are not mapped: the argument is
        # squeezed there and vmap broadcasts it.
        squeezed = []
        padded = []
        for x, lshape in zip(arrays, loop_shapes):
            ones = tuple(i for i, d in enumerate(lshape) if d == 1)
            squeezed.append(squeeze(x, ones) if ones else x)
            padded.append((1,) * (len(loop) - len(lshape)) + lshape)
        mapped = body
        expand = []
        for back, dims in enumerate(zip(*[p[::-1] for p in padded])):
            in_axes = tuple(None if d == 1 else 0 for d in dims)
            if all(a is None for a in in_axes):
                expand.append(len(loop) - 1 - back)
            else:
                mapped = vmap(mapped, in_axes)
        result = mapped(*squeezed)
        if not expand:
            return result
        if isinstance(result, tuple):
            return tuple(expand_dims(r, tuple(expand)) for r in result)
        return expand_dims(result, tuple(expand))

    return wrapped


def _checked(func: Callable[..., Any], sizes: dict[str, int], out_core: list[CoreDims],
             context: str) -> Callable[..., Any]:
    def checked(*args: Any, **kwargs: Any) -> Any:
        out = func(*args, **kwargs)
        outs = out if isinstance(out, tuple) else (out,)
        if len(out_core) == 1 and isinstance(out, tuple) or len(outs) != len(out_core):
            n = 1 if not isinstance(out, tuple) else len(out)
            raise ValueError(f"lamina.numpy.vectorize: wrong number of output arguments: "
                             f"expected {len(out_core)}, got {n} {context}")
        local = dict(sizes)
        for i, (o, core) in enumerate(zip(outs, out_core)):
            shape = _util.shape_of(asarray(o))
            if len(shape) != len(core):
                raise ValueError(f"lamina.numpy.vectorize: output {i} has shape {shape}, which "
                                 f"does not match its core dimensions {core} {context}")
            _record_core_sizes(local, shape, core, context, f"output {i}")
        return out

    return checked


# --- apply_along_axis, apply_over_axes, piecewise ----------------------------------------------
def apply_along_axis(func1d: Callable[..., Any], axis: int, arr: ArrayLike, *args: Any,
                     **kwargs: Any) -> Array:
    """``func1d`` applied to every 1-D slice of ``arr`` along ``axis``; its
    output dimensions take the place of ``axis``."""
    (x,) = _util.operands("apply_along_axis", arr, names=("arr",))
    nd = _util.ndim_of(x)
    ax = _util.canonicalize_axis("apply_along_axis", axis, nd)

    def one(row: Any) -> Any:
        return func1d(row, *args, **kwargs)

    mapped: Callable[..., Any] = one
    for i in range(1, nd - ax):
        mapped = vmap(mapped, in_axes=i, out_axes=-1)
    for _ in range(ax):
        mapped = vmap(mapped, in_axes=0, out_axes=0)
    return mapped(x)


def apply_over_axes(func: Callable[[Any, int], Any], a: ArrayLike,
                    axes: Sequence[int]) -> Array:
    """``func(a, axis)`` applied for each axis in turn, keeping the rank
    (a result one dimension smaller gets that axis back with size 1)."""
    (x,) = _util.operands("apply_over_axes", a, names=("a",))
    for axis in (axes if isinstance(axes, Sequence) else (axes,)):
        out = asarray(func(x, axis))
        if _util.ndim_of(out) == _util.ndim_of(x):
            x = out
        elif _util.ndim_of(out) == _util.ndim_of(x) - 1:
            x = expand_dims(out, axis)
        else:
            raise ValueError("lamina.numpy.apply_over_axes: function is not returning an "
                             "array of the correct shape")
    return x


def piecewise(x: ArrayLike, condlist: Any, funclist: Sequence[Any], *args: Any,
              **kw: Any) -> Array:
    """``funclist[i](x)`` where ``condlist[i]`` holds (the last true condition
    wins); entries that are not callables are constants, and an extra last
    entry is the value where no condition holds (otherwise 0)."""
    (v,) = _util.operands("piecewise", x, names=("x",))
    conds = asarray(condlist)
    if _util.ndim_of(conds) == _util.ndim_of(v):
        conds = lax.expand_dims(conds, (0,))
    nc = _util.shape_of(conds)[0]
    funcs = list(funclist)
    if len(funcs) == nc + 1:
        funcs = funcs[-1:] + funcs[:-1]
    elif len(funcs) == nc:
        funcs = [0, *funcs]
    else:
        raise ValueError(f"lamina.numpy.piecewise: with {nc} condition(s), either {nc} or "
                         f"{nc + 1} functions are expected, got {len(funcs)}")
    dt = get_aval(v).dtype
    conds_b = _util.broadcast_to("piecewise", lax.convert_element_type(conds, bool),
                                 (nc, *_util.shape_of(v)))
    ints = dtypes.default_int_dtype()
    # The last true condition gives the index (0 when none holds).
    positions = lax.broadcast_in_dim(lax.iota(ints, nc + 1), (nc + 1, *_util.shape_of(v)), (0,))
    hits = lax.concatenate([lax.full((1, *_util.shape_of(v)), True, bool), conds_b], 0)
    index = lax.reduce_max(lax.select(hits, positions, lax.full_like(positions, 0)), (0,))

    def branch(f: Any) -> Callable[..., Any]:
        if callable(f):
            return lambda xs, *a: _util.convert(asarray(f(xs, *a, **kw)), dt)
        return lambda xs, *a: lax.full((), f, dt)

    branches = [branch(f) for f in funcs]
    elementwise = vectorize(lambda i, xs, *a: control_flow.switch(i, branches, xs, *a))
    return elementwise(index, v, *args)
