"""``einsum``: Einstein summation planned as a sequence of pairwise
``dot_general`` contractions.

The plan, for subscripts like ``'bij,bjk->bik'``:

1. Parse the subscripts (explicit ``->`` or NumPy's implicit output, the
   interleaved ``einsum(x, [0, 1], y, [1, 2])`` form, and ``...`` which
   stands for the leading broadcast axes of each operand).
2. Per operand, a repeated index (``'ii'``) becomes a diagonal, and an index
   that no other operand and not the output uses is summed away at once.
3. Operands are contracted two at a time (greedily, the pair with the
   smallest result first, or left to right with ``optimize=False``, or the
   pairs of a given path). In a pair, indices both share and still needed
   later are batch dimensions, shared indices not needed later are
   contracted, the rest are free: exactly one ``dot_general``.
4. The last operand's remaining indices are summed if not in the output and
   transposed into the output order.
"""

from __future__ import annotations

import math
import string
from collections.abc import Callable, Sequence
from typing import Any

from lamina_tracing_core.avals import get_aval
from lamina_tracing_core import dtypes, lax

from lamina_tracing_core.numpy import _util
from lamina_tracing_core.numpy._util import Array
from lamina_tracing_core.mesh import TypeSharding
from lamina_tracing_core.numpy.products import dot_general, diagonal

_LETTERS = string.ascii_letters


class _Term:
    """An operand with one index label per axis."""

    __slots__ = ("value", "labels")

    def __init__(self, value: Any, labels: list[str]):
        self.value = value
        self.labels = labels

    def size(self, sizes: dict[str, int]) -> int:
        return math.prod(sizes[c] for c in self.labels)


# --- parsing ------------------------------------------------------------------------------
def _interleaved(args: Sequence[Any]) -> tuple[str, list[Any]]:
    """``(x, [0, 1], y, [1, 2], [0, 2])`` as ``('ab,bc->ac', [x, y])``."""
    items = list(args)
    out_list = items.pop() if len(items) % 2 else None
    operands = items[0::2]
    sublists = items[1::2]

    def letters(sub: Sequence[Any]) -> str:
        out = []
        for s in sub:
            if s is Ellipsis:
                out.append("...")
            else:
                i = int(s)
                if not 0 <= i < len(_LETTERS):
                    raise ValueError(f"lamina.numpy.einsum: subscript {s} out of range "
                                     f"[0, {len(_LETTERS)})")
                out.append(_LETTERS[i])
        return "".join(out)

    spec = ",".join(letters(s) for s in sublists)
    if out_list is not None:
        spec += "->" + letters(out_list)
    return spec, operands


def _expand_ellipses(fun: str, inputs: list[str], ndims: list[int], output: str | None,
                     ) -> tuple[list[str], str | None]:
    """Replaces ``...`` by fresh labels for each operand's broadcast axes
    (right-aligned across operands, as NumPy broadcasting)."""
    used = set("".join(inputs) + (output or "")) - {"."}
    fresh = [c for c in _LETTERS if c not in used]
    widths = []
    for term, nd in zip(inputs, ndims):
        named = len(term.replace("...", ""))
        if "..." in term:
            if term.count("...") > 1:
                raise ValueError(f"lamina.numpy.{fun}: more than one ellipsis in {term!r}")
            widths.append(nd - named)
        elif named != nd:
            raise ValueError(f"lamina.numpy.{fun}: subscripts {term!r} name {named} axes but the "
                             f"operand has {nd}")
        else:
            widths.append(0)
        if widths[-1] < 0:
            raise ValueError(f"lamina.numpy.{fun}: subscripts {term!r} name more axes than the "
                             f"operand's {nd}")
    width = max(widths, default=0)
    if width > len(fresh):
        raise ValueError(f"lamina.numpy.{fun}: too many broadcast axes")
    ell = "".join(fresh[:width])
    new_inputs = [t.replace("...", ell[width - w:]) for t, w in zip(inputs, widths)]
    if output is not None:
        if output.count("...") > 1:
            raise ValueError(f"lamina.numpy.{fun}: more than one ellipsis in the output")
        # An explicit output without '...' sums the broadcast axes away.
        output = output.replace("...", ell)
    return new_inputs, output


def _parse(fun: str, subscripts: str, ndims: list[int]) -> tuple[list[str], str]:
    spec = subscripts.replace(" ", "")
    if "->" in spec:
        lhs, output = spec.split("->", 1)
        if "->" in output:
            raise ValueError(f"lamina.numpy.{fun}: subscripts may contain at most one '->'")
    else:
        lhs, output = spec, None
    inputs = lhs.split(",")
    if len(inputs) != len(ndims):
        raise ValueError(f"lamina.numpy.{fun}: {len(inputs)} subscript terms but "
                         f"{len(ndims)} operands")
    for term in inputs + ([output] if output is not None else []):
        bad = set(term.replace("...", "")) - set(_LETTERS)
        if bad:
            raise ValueError(f"lamina.numpy.{fun}: invalid subscript characters "
                             f"{sorted(bad)} in {term!r}")
    ell_free = [t.replace("...", "") for t in inputs]
    inputs, explicit = _expand_ellipses(fun, inputs, ndims, output)
    if explicit is None:
        # NumPy's implicit output: broadcast axes first, then the labels used
        # exactly once, in alphabetical order.
        counts: dict[str, int] = {}
        for t in inputs:
            for c in t:
                counts[c] = counts.get(c, 0) + 1
        named = set("".join(ell_free))
        ell = sorted({c for t in inputs for c in t} - named, key=_LETTERS.index)
        explicit = "".join(ell) + "".join(sorted(c for c in named if counts.get(c) == 1))
    if len(set(explicit)) != len(explicit):
        raise ValueError(f"lamina.numpy.{fun}: output subscript {explicit!r} repeats a label")
    missing = set(explicit) - set("".join(inputs))
    if missing:
        raise ValueError(f"lamina.numpy.{fun}: output labels {sorted(missing)} do not appear in "
                         "any input")
    return inputs, explicit


# --- per-operand simplification -------------------------------------------------------------
def _take_diagonals(term: _Term) -> _Term:
    """Repeated labels in one operand: keep only the diagonal (``'ii' -> 'i'``)."""
    labels = list(term.labels)
    value = term.value
    while True:
        repeated = next((c for c in labels if labels.count(c) > 1), None)
        if repeated is None:
            return _Term(value, labels)
        i = labels.index(repeated)
        j = labels.index(repeated, i + 1)
        value = diagonal(value, 0, i, j)
        labels = [c for k, c in enumerate(labels) if k not in (i, j)] + [repeated]


def _sum_labels(term: _Term, drop: set[str]) -> _Term:
    axes = tuple(i for i, c in enumerate(term.labels) if c in drop)
    if not axes:
        return term
    return _Term(lax.reduce_sum(term.value, axes) if not _is_bool(term.value)
                 else lax.reduce_or(term.value, axes),
                 [c for c in term.labels if c not in drop])


def _is_bool(x: Any) -> bool:
    return dtypes.is_boolean(get_aval(x).dtype)


def _broadcast_labels(term: _Term, sizes: dict[str, int]) -> _Term:
    """Size-1 broadcast axes grown to the size other operands give the label."""
    shape = _util.shape_of(term.value)
    target = tuple(sizes[c] for c in term.labels)
    if shape == target:
        return term
    return _Term(_util.broadcast_to("einsum", term.value, target), term.labels)


# --- contraction --------------------------------------------------------------------------------
def _contract_pair(a: _Term, b: _Term, keep: set[str], precision: Any,
                   preferred: Any, out: tuple[str, TypeSharding | None] | None = None,
                   dot: Callable[..., Any] | None = None) -> _Term:
    """One dot_general; ``keep`` holds the labels still needed afterwards;
    ``out`` (the output labels and the einsum's out_sharding) splits its
    result where it is the last one; ``dot``, when given, is called in place
    of lamina's as JAX calls its ``_dot_general``."""
    a = _sum_labels(a, {c for c in a.labels if c not in keep and c not in b.labels})
    b = _sum_labels(b, {c for c in b.labels if c not in keep and c not in a.labels})
    shared = [c for c in a.labels if c in b.labels]
    batch = [c for c in shared if c in keep]
    contract = [c for c in shared if c not in keep]
    contracting = (tuple(a.labels.index(c) for c in contract),
                   tuple(b.labels.index(c) for c in contract))
    batching = (tuple(a.labels.index(c) for c in batch), tuple(b.labels.index(c) for c in batch))
    labels = batch + [c for c in a.labels if c not in shared] + \
        [c for c in b.labels if c not in shared]
    sharding = None if out is None else _label_sharding(labels, *out)
    if dot is None:
        value = dot_general(a.value, b.value, contracting, batching, precision, preferred,
                            sharding)
    else:
        extra = {} if sharding is None else {"out_sharding": sharding}
        value = dot(a.value, b.value, (contracting, batching), precision,
                    preferred_element_type=preferred, **extra)
    return _Term(value, labels)


def _label_sharding(labels: list[str], output: str,
                    sharding: TypeSharding | None) -> TypeSharding | None:
    """``sharding`` (of the output's labels) for a value of ``labels``: the
    transpose and sums that follow bring it to the output's order."""
    if sharding is None:
        return None
    spec = sharding.spec + ((),) * (len(output) - len(sharding.spec))
    return TypeSharding(sharding.mesh,
                        tuple(spec[output.index(c)] if c in output else () for c in labels))


def _needed(terms: list[_Term], skip: set[int], output: str) -> set[str]:
    need = set(output)
    for k, t in enumerate(terms):
        if k not in skip:
            need.update(t.labels)
    return need


def _greedy_pair(terms: list[_Term], output: str, sizes: dict[str, int]) -> tuple[int, int]:
    """The pair whose contraction result is smallest (ties: fewest flops,
    then leftmost), preferring pairs that share a label."""
    best: tuple[Any, ...] | None = None
    best_pair = (0, 1)
    for i in range(len(terms)):
        for j in range(i + 1, len(terms)):
            keep = _needed(terms, {i, j}, output)
            a, b = set(terms[i].labels), set(terms[j].labels)
            result = (a | b) & keep
            result_size = math.prod(sizes[c] for c in result)
            flops = math.prod(sizes[c] for c in a | b)
            key = (not (a & b), result_size, flops, i, j)
            if best is None or key < best:
                best, best_pair = key, (i, j)
    return best_pair


def _path_pairs(optimize: Any, n: int) -> list[tuple[int, ...]] | None:
    """Explicit contraction pairs from an ``einsum_path``-style list, if given."""
    if isinstance(optimize, (list, tuple)) and optimize and optimize[0] == "einsum_path":
        return [tuple(p) for p in optimize[1:]]
    if isinstance(optimize, (list, tuple)):
        return [tuple(p) for p in optimize]
    return None


def _plan(fun: str, inputs: list[str], output: str, shapes: list[tuple[int, ...]],
          optimize: Any) -> tuple[dict[str, int], list[tuple[int, ...]]]:
    """Label sizes (checked for consistency) and the contraction order."""
    sizes: dict[str, int] = {}
    for term, shape in zip(inputs, shapes):
        for c, d in zip(term, shape):
            known = sizes.get(c)
            if known is None or known == 1:
                sizes[c] = d
            elif d not in (1, known):
                raise ValueError(f"lamina.numpy.{fun}: size of label {c!r} is {known} in one "
                                 f"operand and {d} in another")
    explicit = _path_pairs(optimize, len(inputs))
    if explicit is not None:
        return sizes, explicit
    labels = [_Term(None, list(dict.fromkeys(t))) for t in inputs]
    order: list[tuple[int, ...]] = []
    while len(labels) > 1:
        if optimize is False or optimize in ("none", None):
            pair = (0, 1)
        else:
            pair = _greedy_pair(labels, output, sizes)
        i, j = pair
        keep = _needed(labels, {i, j}, output)
        merged = _Term(None, [c for c in dict.fromkeys(labels[i].labels + labels[j].labels)
                              if c in keep])
        labels = [t for k, t in enumerate(labels) if k not in pair] + [merged]
        order.append(pair)
    return sizes, order


def einsum(subscripts: Any, /, *operands: Any, out: None = None, optimize: Any = "auto",
           precision: Any = None, preferred_element_type: Any = None,
           _dot_general: Callable[..., Any] | None = None, out_sharding: Any = None) -> Array:
    """Einstein summation over the operands as written by ``subscripts``
    (``'ij,jk->ik'``; ``...`` for broadcast axes; implicit output as NumPy),
    or in the interleaved form ``einsum(x, [0, 1], y, [1, 2], [0, 2])``.
    ``out_sharding`` splits the result of the last contraction (as JAX's, an
    einsum without one ignores it). ``_dot_general`` (JAX's private hook)
    replaces each contraction's ``lax.dot_general``: it is called as
    ``(lhs, rhs, dimension_numbers, precision, preferred_element_type=...)``,
    with ``out_sharding=`` for a sharded last contraction."""
    _util.check_out("einsum", out)
    if not isinstance(subscripts, str):
        subscripts, ops = _interleaved((subscripts,) + operands)
    else:
        ops = list(operands)
    if not ops:
        raise ValueError("lamina.numpy.einsum: at least one operand is required")
    values = _util.promote_dtypes("einsum", *ops)
    shapes = [_util.shape_of(v) for v in values]
    inputs, output = _parse("einsum", subscripts, [len(s) for s in shapes])
    sizes, order = _plan("einsum", inputs, output, shapes, optimize)
    sharding = _util.out_sharding("einsum", out_sharding, tuple(sizes[c] for c in output),
                                 keep_replicated=True)
    preferred = _util.user_dtype("einsum", preferred_element_type)
    terms = [_broadcast_labels(_take_diagonals(_Term(v, list(t))), sizes)
             for v, t in zip(values, inputs)]
    # Labels only one operand uses, and not the output, are summed right away.
    for k, term in enumerate(terms):
        others = _needed(terms, {k}, output)
        terms[k] = _sum_labels(term, {c for c in term.labels if c not in others})
    for n, pair in enumerate(order):
        if len(pair) != 2 or len(set(pair)) != 2 or max(pair) >= len(terms):
            raise ValueError(f"lamina.numpy.einsum: invalid contraction {pair} in the path")
        i, j = pair
        keep = _needed(terms, {i, j}, output)
        final = (output, sharding) if n == len(order) - 1 else None
        merged = _contract_pair(terms[i], terms[j], keep, precision, preferred, final,
                                _dot_general)
        terms = [t for k, t in enumerate(terms) if k not in pair] + [merged]
    if len(terms) != 1:
        raise ValueError("lamina.numpy.einsum: the contraction path does not reduce the "
                         "operands to one")
    (last,) = terms
    last = _sum_labels(last, {c for c in last.labels if c not in output})
    perm = tuple(last.labels.index(c) for c in output)
    result = last.value
    if perm != tuple(range(len(perm))):
        result = lax.transpose(result, perm)
    if preferred is not None:
        result = _util.convert(result, preferred)
    return result


def einsum_path(subscripts: Any, /, *operands: Any, optimize: Any = "greedy"
                ) -> tuple[list[Any], str]:
    """The contraction order ``einsum`` would use: ``(['einsum_path', (i, j), ...],
    description)``."""
    if not isinstance(subscripts, str):
        subscripts, ops = _interleaved((subscripts,) + operands)
    else:
        ops = list(operands)
    shapes = [_util.shape_of(_util.operand("einsum_path", v)) for v in ops]
    inputs, output = _parse("einsum_path", subscripts, [len(s) for s in shapes])
    _, order = _plan("einsum_path", inputs, output, shapes, optimize)
    text = (f"  Complete contraction:  {','.join(inputs)}->{output}\n"
            f"  Contraction order: {order}")
    return ["einsum_path", *order], text
