"""A numpy reference interpreter for every lax primitive (tests only).

``NUMPY_REFERENCE`` maps primitive names to ``impl(*values, **params)`` written
from the operation's definition (XLA semantics), independent of the lax rules
under test. It is the one reference table of the tests: ``installed()``
registers it in ``primitives.impl_rules`` for the duration of a ``with`` block,
so eager evaluation and ``eval_jaxpr`` run before (and without) the runtime
layer; the previous table is restored after. (``tc_testing.install_numpy_impls``
registers the same impls for good.)
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import ml_dtypes
import numpy as np
from scipy import special as sp

from lamina_tracing_core import ad_util, dtypes
from lamina_tracing_core import lax as lx
from lamina_tracing_core.primitives import Primitive, impl_rules

Impl = Callable[..., Any]


def arr(x: Any) -> np.ndarray[Any, Any]:
    """A value as a numpy array of the dtype lamina gives it (x64-canonical)."""
    if isinstance(x, (bool, int, float, complex)):
        return np.asarray(x, dtypes.dtype_and_weakness(x)[0])
    a = np.asarray(x)
    if a.dtype == dtypes.float0:
        return a
    canon = dtypes.canonicalize_dtype(a.dtype)
    return a if canon == a.dtype else a.astype(canon)


def _compute_dtype(dtype: np.dtype[Any]) -> np.dtype[Any]:
    """float16/bfloat16 are computed in float32 (numpy lacks most ufuncs)."""
    if dtype in (np.dtype(np.float16), np.dtype(ml_dtypes.bfloat16)):
        return np.dtype(np.float32)
    return dtype


def unary(fn: Callable[[Any], Any], out_dtype: Callable[[np.dtype[Any]], Any] | None = None
          ) -> Impl:
    def impl(x: Any, **params: Any) -> Any:
        a = arr(x)
        res = fn(a.astype(_compute_dtype(a.dtype)))
        return np.asarray(res, a.dtype if out_dtype is None else out_dtype(a.dtype))
    return impl


def binary(fn: Callable[[Any, Any], Any], out_dtype: Any = None) -> Impl:
    def impl(x: Any, y: Any, **params: Any) -> Any:
        a, b = arr(x), arr(y)
        cd = _compute_dtype(a.dtype)
        with np.errstate(all="ignore"):
            res = fn(a.astype(cd), b.astype(_compute_dtype(b.dtype)))
        dt = params.get("out_dtype") or (a.dtype if out_dtype is None else out_dtype)
        return np.asarray(res).astype(dt)
    return impl


def _round(x: Any, *, rounding_method: Any) -> Any:
    a = arr(x)
    c = a.astype(_compute_dtype(a.dtype))
    if int(rounding_method) == 0:
        res = np.sign(c) * np.floor(np.abs(c) + 0.5)
    else:
        res = np.round(c)
    return res.astype(a.dtype)


def _int_div(a: Any, b: Any) -> Any:
    if a.dtype.kind == "u":
        return a // b
    if a.dtype.kind == "i":
        q = np.abs(a.astype(np.int64)) // np.abs(b.astype(np.int64))
        return (np.sign(a) * np.sign(b) * q).astype(a.dtype)
    return a / b


def _bits(dtype: np.dtype[Any]) -> int:
    return dtype.itemsize * 8


def _unsigned(dtype: np.dtype[Any]) -> np.dtype[Any]:
    return np.dtype(f"u{dtype.itemsize}")


def _popcount(x: Any) -> Any:
    a = arr(x)
    u = a.view(_unsigned(a.dtype)).astype(np.uint64)
    count = np.zeros(a.shape, np.int64)
    for i in range(_bits(a.dtype)):
        count += ((u >> np.uint64(i)) & np.uint64(1)).astype(np.int64)
    return count.astype(a.dtype)


def _clz(x: Any) -> Any:
    a = arr(x)
    nbits = _bits(a.dtype)
    u = a.view(_unsigned(a.dtype)).astype(np.uint64)
    out = np.full(a.shape, nbits, np.int64)
    for i in range(nbits):
        bit_set = ((u >> np.uint64(i)) & np.uint64(1)) == 1
        out = np.where(bit_set, nbits - 1 - i, out)
    return out.astype(a.dtype)


def _shift_left(x: Any, y: Any) -> Any:
    a, b = np.broadcast_arrays(arr(x), arr(y))
    nbits = _bits(a.dtype)
    ut = _unsigned(a.dtype)
    ok = (b >= 0) & (b < nbits)
    res = (a.view(ut).astype(np.uint64) << np.where(ok, b, 0).astype(np.uint64))
    res = np.where(ok, res & np.uint64((1 << nbits) - 1), 0).astype(ut)
    return res.view(a.dtype)


def _shift_right_logical(x: Any, y: Any) -> Any:
    a, b = np.broadcast_arrays(arr(x), arr(y))
    nbits = _bits(a.dtype)
    ut = _unsigned(a.dtype)
    ok = (b >= 0) & (b < nbits)
    res = a.view(ut).astype(np.uint64) >> np.where(ok, b, 0).astype(np.uint64)
    return np.where(ok, res, 0).astype(ut).view(a.dtype)


def _shift_right_arithmetic(x: Any, y: Any) -> Any:
    a, b = np.broadcast_arrays(arr(x), arr(y))
    nbits = _bits(a.dtype)
    st = np.dtype(f"i{a.dtype.itemsize}")
    signed = a.view(st).astype(np.int64)
    amount = np.clip(b.astype(np.int64), 0, nbits - 1)
    amount = np.where((b < 0) | (b >= nbits), nbits - 1, amount)
    return (signed >> amount).astype(st).view(a.dtype)


def _bitwise(fn_int: Callable[..., Any], fn_bool: Callable[..., Any]) -> Impl:
    def impl(x: Any, y: Any) -> Any:
        a, b = arr(x), arr(y)
        return (fn_bool(a, b) if a.dtype == np.bool_ else fn_int(a, b)).astype(a.dtype)
    return impl


def _not(x: Any) -> Any:
    a = arr(x)
    return np.logical_not(a) if a.dtype == np.bool_ else np.invert(a)


def _pow(x: Any, y: Any) -> Any:
    a, b = arr(x), arr(y)
    cd = _compute_dtype(a.dtype)
    with np.errstate(all="ignore"):
        return np.power(a.astype(cd), b.astype(cd if b.dtype.kind in "fc" else b.dtype)
                        ).astype(a.dtype)


def _integer_pow(x: Any, *, y: int) -> Any:
    a = arr(x)
    cd = _compute_dtype(a.dtype)
    with np.errstate(all="ignore"):
        if a.dtype.kind in "iu":
            res = np.ones_like(a)
            for _ in range(y):
                res = res * a
            return res
        return np.power(a.astype(cd), float(y) if a.dtype.kind == "f" else y).astype(a.dtype)


_KNOWN_FLOATS = {(5, 10): np.float16, (8, 7): ml_dtypes.bfloat16, (8, 23): np.float32,
                 (11, 52): np.float64}


def _reduce_precision(x: Any, *, exponent_bits: int, mantissa_bits: int) -> Any:
    a = arr(x)
    target = _KNOWN_FLOATS.get((exponent_bits, mantissa_bits))
    if target is None:
        raise NotImplementedError("reference reduce_precision handles IEEE/bfloat16 widths")
    with np.errstate(all="ignore"):
        return a.astype(target).astype(a.dtype)


def _select_n(which: Any, *cases: Any) -> Any:
    w = arr(which)
    cs = [arr(c) for c in cases]
    if w.dtype == np.bool_:
        return np.where(w, cs[1], cs[0]).astype(cs[0].dtype)
    return np.choose(w.astype(np.int64), cs).astype(cs[0].dtype)


def _clamp(lo: Any, x: Any, hi: Any) -> Any:
    a = arr(x)
    return np.minimum(np.maximum(a, arr(lo)), arr(hi)).astype(a.dtype)


def _convert(x: Any, *, new_dtype: Any, weak_type: bool, sharding: Any) -> Any:
    a = arr(x)
    new = np.dtype(new_dtype)
    if new == dtypes.float0:
        return np.zeros(a.shape, dtypes.float0)
    if a.dtype.kind == "c" and new.kind != "c":
        a = a.real
    if new == np.bool_:
        return a != 0
    with np.errstate(all="ignore"):
        if a.dtype.kind == "f" and new.kind in "iu":
            a = np.trunc(a.astype(np.float64))
            info = np.iinfo(new)
            a = np.where(np.isnan(a), 0, np.clip(a, info.min, info.max))
        return a.astype(new)


def _bitcast(x: Any, *, new_dtype: Any) -> Any:
    # ascontiguousarray makes 0-d arrays 1-d; keep the operand's shape.
    a = np.ascontiguousarray(arr(x)).reshape(np.shape(arr(x)))
    new = np.dtype(new_dtype)
    if a.dtype.itemsize == new.itemsize:
        return a.view(new)
    if a.dtype.itemsize > new.itemsize:
        return a.view(new).reshape(a.shape + (a.dtype.itemsize // new.itemsize,))
    return a.view(new).reshape(a.shape[:-1])


def _iota(*, dtype: Any, shape: Sequence[int], dimension: int, sharding: Any) -> Any:
    ar = np.arange(shape[dimension]).astype(dtype)
    ar = ar.reshape([shape[dimension] if i == dimension else 1 for i in range(len(shape))])
    return np.broadcast_to(ar, tuple(shape)).copy()


def _broadcast_in_dim(x: Any, *, shape: Sequence[int], broadcast_dimensions: Sequence[int],
                      sharding: Any) -> Any:
    a = arr(x)
    expanded = [1] * len(shape)
    for src, dst in enumerate(broadcast_dimensions):
        expanded[dst] = a.shape[src]
    return np.broadcast_to(a.reshape(expanded), tuple(shape)).copy()


def _reshape(x: Any, *, new_sizes: Sequence[int], dimensions: Any, sharding: Any) -> Any:
    a = arr(x)
    if dimensions is not None:
        a = np.transpose(a, dimensions)
    return np.reshape(a, tuple(new_sizes))


def _pad(x: Any, pv: Any, *, padding_config: Sequence[tuple[int, int, int]]) -> Any:
    a, v = arr(x), arr(pv)
    for axis, (lo, hi, interior) in enumerate(padding_config):
        n = a.shape[axis]
        size = 0 if n == 0 else (n - 1) * (interior + 1) + 1
        shape = list(a.shape)
        shape[axis] = size
        dil = np.full(shape, v, a.dtype)
        idx = [slice(None)] * a.ndim
        idx[axis] = slice(0, size, interior + 1)
        dil[tuple(idx)] = a
        a = dil
        # low/high: positive pads, negative crops.
        shape = list(a.shape)
        if lo >= 0:
            shape[axis] = lo
            a = np.concatenate([np.full(shape, v, a.dtype), a], axis)
        else:
            idx = [slice(None)] * a.ndim
            idx[axis] = slice(-lo, None)
            a = a[tuple(idx)]
        shape = list(a.shape)
        if hi >= 0:
            shape[axis] = hi
            a = np.concatenate([a, np.full(shape, v, a.dtype)], axis)
        else:
            idx = [slice(None)] * a.ndim
            idx[axis] = slice(0, a.shape[axis] + hi)
            a = a[tuple(idx)]
    return a


def _slice(x: Any, *, start_indices: Any, limit_indices: Any, strides: Any) -> Any:
    strides = strides or (1,) * len(start_indices)
    return arr(x)[tuple(slice(s, e, st) for s, e, st in zip(start_indices, limit_indices,
                                                            strides))]


def _clamp_start(start: int, size: int, dim: int) -> int:
    return int(min(max(start, 0), dim - size))


def _dynamic_slice(x: Any, *starts: Any, slice_sizes: Sequence[int]) -> Any:
    a = arr(x)
    idx = tuple(slice(s0, s0 + sz) for s0, sz in
                ((_clamp_start(int(arr(s)), sz, d), sz)
                 for s, sz, d in zip(starts, slice_sizes, a.shape)))
    return a[idx].copy()


def _dynamic_update_slice(x: Any, update: Any, *starts: Any) -> Any:
    a, u = arr(x).copy(), arr(update)
    idx = tuple(slice(s0, s0 + sz) for s0, sz in
                ((_clamp_start(int(arr(s)), sz, d), sz)
                 for s, sz, d in zip(starts, u.shape, a.shape)))
    a[idx] = u
    return a


def _gather(operand: Any, indices: Any, *, dimension_numbers: Any, slice_sizes: Sequence[int],
            mode: Any, fill_value: Any, **_: Any) -> Any:
    op, idx = arr(operand), arr(indices)
    dn = dimension_numbers
    batch_shape = idx.shape[:-1]
    dropped = set(dn.collapsed_slice_dims) | set(dn.operand_batching_dims)
    window_shape = tuple(s for i, s in enumerate(slice_sizes) if i not in dropped)
    fill = mode == lx.GatherScatterMode.FILL_OR_DROP
    out = np.zeros(batch_shape + window_shape, op.dtype)
    for b in np.ndindex(*batch_shape):
        start = [0] * op.ndim
        for k, od in enumerate(dn.start_index_map):
            start[od] = int(idx[b + (k,)])
        for od, ib in zip(dn.operand_batching_dims, dn.start_indices_batching_dims):
            start[od] = b[ib]
        oob = any(start[d] < 0 or start[d] + slice_sizes[d] > op.shape[d]
                  for d in dn.start_index_map)
        if fill and oob:
            out[b] = fill_value
            continue
        start = [_clamp_start(s, sz, d) for s, sz, d in zip(start, slice_sizes, op.shape)]
        window = op[tuple(slice(s, s + sz) for s, sz in zip(start, slice_sizes))]
        out[b] = window.reshape(window_shape)
    rank = len(batch_shape) + len(window_shape)
    batch_pos = [i for i in range(rank) if i not in dn.offset_dims]
    return np.moveaxis(out, list(range(rank)), batch_pos + list(dn.offset_dims))


_COMBINE: dict[str, Callable[[Any, Any], Any]] = {
    "scatter": lambda old, new: new, "scatter-add": np.add, "scatter-sub": np.subtract,
    "scatter-mul": np.multiply, "scatter-min": np.minimum, "scatter-max": np.maximum}


def _scatter(name: str) -> Impl:
    combine = _COMBINE[name]

    def impl(operand: Any, indices: Any, updates: Any, *, dimension_numbers: Any, mode: Any,
             **_: Any) -> Any:
        op, idx, upd = arr(operand).copy(), arr(indices), arr(updates)
        dn = dimension_numbers
        scatter_dims = [i for i in range(upd.ndim) if i not in dn.update_window_dims]
        window_dims = list(dn.update_window_dims)
        full_window = [i for i in range(op.ndim)
                       if i not in dn.inserted_window_dims and i not in dn.operand_batching_dims]
        for b in np.ndindex(*[upd.shape[i] for i in scatter_dims]):
            start = [0] * op.ndim
            for k, od in enumerate(dn.scatter_dims_to_operand_dims):
                start[od] = int(idx[b + (k,)])
            for od, ib in zip(dn.operand_batching_dims, dn.scatter_indices_batching_dims):
                start[od] = b[ib]
            sizes = [1] * op.ndim
            for od, w in zip(full_window, window_dims):
                sizes[od] = upd.shape[w]
            oob = any(start[d] < 0 or start[d] + sizes[d] > op.shape[d] for d in range(op.ndim))
            if oob:
                if mode == lx.GatherScatterMode.CLIP:
                    start = [_clamp_start(s, sz, d) for s, sz, d in zip(start, sizes, op.shape)]
                else:
                    continue
            sel: list[Any] = [slice(None)] * upd.ndim
            for pos, i in enumerate(scatter_dims):
                sel[i] = b[pos]
            window = upd[tuple(sel)].reshape(sizes)
            region = tuple(slice(s, s + sz) for s, sz in zip(start, sizes))
            op[region] = combine(op[region], window)
        return op.astype(arr(operand).dtype)
    return impl


def _reduce(fn: Callable[..., Any]) -> Impl:
    def impl(x: Any, *, axes: Sequence[int], **_: Any) -> Any:
        a = arr(x)
        return np.asarray(fn(a, tuple(axes))).astype(a.dtype)
    return impl


def _logical_reduce(bool_fn: Callable[..., Any], int_fn: Any) -> Impl:
    def impl(x: Any, *, axes: Sequence[int]) -> Any:
        a = arr(x)
        if a.dtype == np.bool_:
            return np.asarray(bool_fn(a, axis=tuple(axes)))
        out = a
        for ax in sorted(axes, reverse=True):
            out = int_fn.reduce(out, axis=ax)
        return np.asarray(out).astype(a.dtype)
    return impl


def _reduce_xor(x: Any, *, axes: Sequence[int]) -> Any:
    a = arr(x)
    work = a.astype(np.uint8) if a.dtype == np.bool_ else a
    out = work
    for ax in sorted(axes, reverse=True):
        out = np.bitwise_xor.reduce(out, axis=ax)
    return np.asarray(out).astype(a.dtype)


def _argminmax(fn: Callable[..., Any]) -> Impl:
    def impl(x: Any, *, axes: Sequence[int], index_dtype: Any) -> Any:
        return np.asarray(fn(arr(x), axis=axes[0])).astype(index_dtype)
    return impl


def _cumulative(fn: Callable[..., Any]) -> Impl:
    def impl(x: Any, *, axis: int, reverse: bool) -> Any:
        a = arr(x)
        c = a.astype(_compute_dtype(a.dtype))
        if reverse:
            c = np.flip(c, axis)
        res = fn(c, axis=axis)
        if reverse:
            res = np.flip(res, axis)
        return res.astype(a.dtype)
    return impl


def _sort(*operands: Any, dimension: int, is_stable: bool, num_keys: int) -> list[Any]:
    ops = [np.moveaxis(arr(o), dimension, -1) for o in operands]
    shape = ops[0].shape
    flat = [o.reshape(-1, shape[-1]) if o.ndim else o.reshape(1, 1) for o in ops]
    outs = [np.empty_like(f) for f in flat]
    for r in range(flat[0].shape[0]):
        keys = [flat[k][r] for k in range(num_keys)]
        keys = [np.where(k == 0, 0, k) if k.dtype.kind == "f" else k for k in keys]
        order = np.lexsort(keys[::-1])
        for o, f in zip(outs, flat):
            o[r] = f[r][order]
    return [np.moveaxis(o.reshape(shape), -1, dimension) for o in outs]


def _top_k(x: Any, *, k: int, axis: int) -> list[Any]:
    a = np.moveaxis(arr(x), axis, -1)
    shape = a.shape
    flat = a.reshape(-1, shape[-1])
    vals = np.empty((flat.shape[0], k), a.dtype)
    inds = np.empty((flat.shape[0], k), np.int32)
    for r in range(flat.shape[0]):
        row = flat[r]
        order = sorted(range(len(row)), key=lambda i: (-float(row[i]), i))[:k]
        vals[r], inds[r] = row[order], order
    out_shape = shape[:-1] + (k,)
    return [np.moveaxis(vals.reshape(out_shape), -1, axis),
            np.moveaxis(inds.reshape(out_shape), -1, axis)]


def _dot_general(lhs: Any, rhs: Any, *, dimension_numbers: Any, precision: Any,
                 preferred_element_type: Any, out_sharding: Any) -> Any:
    (lc, rc), (lb, rb) = dimension_numbers
    a, b = arr(lhs), arr(rhs)
    letters = iter("abcdefghijklmnopqrstuvwxyz")
    ls, rs = [""] * a.ndim, [""] * b.ndim
    for i, j in zip(lb, rb):
        ls[i] = rs[j] = next(letters)
    for i, j in zip(lc, rc):
        ls[i] = rs[j] = next(letters)
    lf = [i for i in range(a.ndim) if i not in lc and i not in lb]
    rf = [j for j in range(b.ndim) if j not in rc and j not in rb]
    for i in lf:
        ls[i] = next(letters)
    for j in rf:
        rs[j] = next(letters)
    out = "".join(ls[i] for i in lb) + "".join(ls[i] for i in lf) + "".join(rs[j] for j in rf)
    wide = np.complex128 if (a.dtype.kind == "c" or b.dtype.kind == "c") else \
        (np.float64 if a.dtype.kind in "fV" or b.dtype.kind in "fV" else np.int64)
    res = np.einsum(f"{''.join(ls)},{''.join(rs)}->{out}", a.astype(wide), b.astype(wide))
    dt = preferred_element_type
    if dt is None:
        dt = _dot_dtype(a.dtype, b.dtype)
    return res.astype(dt)


def _dot_dtype(a: np.dtype[Any], b: np.dtype[Any]) -> np.dtype[Any]:
    from lamina_tracing_core.lax.contractions import _dot_result_dtype
    return _dot_result_dtype("ref", a, b, None)


def _conv(lhs: Any, rhs: Any, *, window_strides: Sequence[int], padding: Any,
          lhs_dilation: Sequence[int], rhs_dilation: Sequence[int], dimension_numbers: Any,
          feature_group_count: int, batch_group_count: int, precision: Any,
          preferred_element_type: Any, out_sharding: Any) -> Any:
    a, w = arr(lhs), arr(rhs)
    out_dtype = preferred_element_type or a.dtype
    lhs_spec, rhs_spec, out_spec = dimension_numbers
    x = np.transpose(a, lhs_spec).astype(np.float64 if a.dtype.kind != "c" else np.complex128)
    k = np.transpose(w, rhs_spec).astype(x.dtype)
    nsp = x.ndim - 2
    # lhs dilation, then padding (negative pads crop).
    for d in range(nsp):
        ax = 2 + d
        x = _pad(x, 0.0, padding_config=[(0, 0, 0)] * ax + [(0, 0, lhs_dilation[d] - 1)]
                 + [(0, 0, 0)] * (x.ndim - ax - 1))
        lo, hi = padding[d]
        x = _pad(x, 0.0, padding_config=[(0, 0, 0)] * ax + [(lo, hi, 0)]
                 + [(0, 0, 0)] * (x.ndim - ax - 1))
        k = _pad(k, 0.0, padding_config=[(0, 0, 0)] * ax + [(0, 0, rhs_dilation[d] - 1)]
                 + [(0, 0, 0)] * (k.ndim - ax - 1))
    n, c = x.shape[:2]
    o = k.shape[0]
    ksp = k.shape[2:]
    out_sp = tuple(max(0, (xs - ks) // s + 1) if xs >= ks else 0
                   for xs, ks, s in zip(x.shape[2:], ksp, window_strides))

    def conv1(xg: Any, kg: Any) -> Any:
        res = np.zeros((xg.shape[0], kg.shape[0]) + out_sp, x.dtype)
        for pos in np.ndindex(*out_sp):
            sl = tuple(slice(p * s, p * s + ks) for p, s, ks in zip(pos, window_strides, ksp))
            patch = xg[(slice(None), slice(None)) + sl]
            res[(slice(None), slice(None)) + pos] = np.tensordot(
                patch, kg, axes=(list(range(1, patch.ndim)), list(range(1, kg.ndim))))
        return res

    if feature_group_count > 1:
        g = feature_group_count
        xs = np.split(x, g, axis=1)
        ks = np.split(k, g, axis=0)
        res = np.concatenate([conv1(xg, kg) for xg, kg in zip(xs, ks)], axis=1)
    elif batch_group_count > 1:
        g = batch_group_count
        xs = np.split(x, g, axis=0)
        ks = np.split(k, g, axis=0)
        res = np.concatenate([conv1(xg, kg) for xg, kg in zip(xs, ks)], axis=1)
    else:
        res = conv1(x, k)
    del n, c, o
    return np.transpose(res, np.argsort(out_spec)).astype(out_dtype)


def _threefry(k1: Any, k2: Any, x1: Any, x2: Any) -> list[Any]:
    k1, k2, x1, x2 = (a.astype(np.uint32) for a in np.broadcast_arrays(
        arr(k1), arr(k2), arr(x1), arr(x2)))
    rotations = ((13, 15, 26, 6), (17, 29, 16, 24))

    def rotl(v: Any, d: int) -> Any:
        return (v << np.uint32(d)) | (v >> np.uint32(32 - d))

    ks = [k1, k2, k1 ^ k2 ^ np.uint32(0x1BD11BDA)]
    with np.errstate(over="ignore"):
        x = [x1 + ks[0], x2 + ks[1]]
        for i in range(5):
            for r in rotations[i % 2]:
                x[0] = x[0] + x[1]
                x[1] = rotl(x[1], r) ^ x[0]
            x = [x[0] + ks[(i + 1) % 3], x[1] + ks[(i + 2) % 3] + np.uint32(i + 1)]
    return [x[0].astype(np.uint32), x[1].astype(np.uint32)]


def _complex_of(d: np.dtype[Any]) -> Any:
    return np.complex128 if d == np.float64 else np.complex64


def _real_of(d: np.dtype[Any]) -> Any:
    return np.float64 if d == np.complex128 else np.float32


def _conj(x: Any, *, input_dtype: Any) -> Any:
    a = arr(x)
    return np.conj(a.astype(_complex_of(a.dtype) if a.dtype.kind != "c" else a.dtype))


def _logaddexp_accumulate(x: Any, axis: int) -> Any:
    return np.logaddexp.accumulate(x, axis=axis)


NUMPY_REFERENCE: dict[str, Impl] = {
    "neg": unary(np.negative), "sign": unary(np.sign), "floor": unary(np.floor),
    "ceil": unary(np.ceil), "round": _round, "is_finite": unary(np.isfinite, lambda d: bool),
    "exp": unary(np.exp), "exp2": unary(np.exp2), "log": unary(np.log),
    "log1p": unary(np.log1p), "expm1": unary(np.expm1), "tanh": unary(np.tanh),
    "logistic": unary(sp.expit), "sin": unary(np.sin), "cos": unary(np.cos),
    "tan": unary(np.tan), "asin": unary(np.arcsin), "acos": unary(np.arccos),
    "atan": unary(np.arctan), "sinh": unary(np.sinh), "cosh": unary(np.cosh),
    "asinh": unary(np.arcsinh), "acosh": unary(np.arccosh), "atanh": unary(np.arctanh),
    "sqrt": unary(np.sqrt), "rsqrt": unary(lambda x: 1 / np.sqrt(x)), "cbrt": unary(np.cbrt),
    "erf": unary(sp.erf), "erfc": unary(sp.erfc), "erf_inv": unary(sp.erfinv),
    "lgamma": unary(sp.gammaln), "digamma": unary(sp.digamma), "square": unary(np.square),
    "real": unary(np.real, _real_of), "imag": unary(np.imag, _real_of), "conj": _conj,
    "abs": unary(np.abs, lambda d: _real_of(d) if d.kind == "c" else d),
    "not": _not, "population_count": _popcount, "clz": _clz,
    "add": binary(np.add), "sub": binary(np.subtract), "mul": binary(np.multiply),
    "div": binary(_int_div), "rem": binary(np.fmod), "max": binary(np.maximum),
    "min": binary(np.minimum), "atan2": binary(np.arctan2), "nextafter": binary(np.nextafter),
    "polygamma": binary(lambda m, x: sp.polygamma(m.astype(int), x)),
    "complex": lambda x, y: (arr(x) + 1j * arr(y)).astype(_complex_of(arr(x).dtype)),
    "and": _bitwise(np.bitwise_and, np.logical_and), "or": _bitwise(np.bitwise_or,
                                                                      np.logical_or),
    "xor": _bitwise(np.bitwise_xor, np.logical_xor),
    "shift_left": _shift_left, "shift_right_logical": _shift_right_logical,
    "shift_right_arithmetic": _shift_right_arithmetic,
    "eq": binary(np.equal, bool), "ne": binary(np.not_equal, bool),
    "lt": binary(np.less, bool), "le": binary(np.less_equal, bool),
    "gt": binary(np.greater, bool), "ge": binary(np.greater_equal, bool),
    "pow": _pow, "integer_pow": _integer_pow, "reduce_precision": _reduce_precision,
    "select_n": _select_n, "clamp": _clamp,
    "convert_element_type": _convert, "bitcast_convert_type": _bitcast,
    "stop_gradient": lambda x: arr(x), "copy": lambda x: arr(x).copy(),
    "iota": _iota, "broadcast_in_dim": _broadcast_in_dim, "reshape": _reshape,
    "squeeze": lambda x, *, dimensions: np.squeeze(arr(x), tuple(dimensions)),
    "transpose": lambda x, *, permutation: np.transpose(arr(x), permutation),
    "rev": lambda x, *, dimensions: np.flip(arr(x), tuple(dimensions)).copy(),
    "pad": _pad,
    "concatenate": lambda *xs, dimension: np.concatenate([arr(x) for x in xs], dimension),
    "slice": _slice, "dynamic_slice": _dynamic_slice,
    "dynamic_update_slice": _dynamic_update_slice, "gather": _gather,
    **{name: _scatter(name) for name in _COMBINE},
    "reduce_sum": _reduce(lambda a, ax: np.sum(a, axis=ax)),
    "reduce_prod": _reduce(lambda a, ax: np.prod(a, axis=ax)),
    "reduce_max": _reduce(lambda a, ax: np.max(a, axis=ax)),
    "reduce_min": _reduce(lambda a, ax: np.min(a, axis=ax)),
    "reduce_and": _logical_reduce(np.all, np.bitwise_and),
    "reduce_or": _logical_reduce(np.any, np.bitwise_or),
    "reduce_xor": _reduce_xor,
    "argmax": _argminmax(np.argmax), "argmin": _argminmax(np.argmin),
    "cumsum": _cumulative(np.cumsum), "cumprod": _cumulative(np.cumprod),
    "cummax": _cumulative(lambda x, axis: np.maximum.accumulate(x, axis=axis)),
    "cummin": _cumulative(lambda x, axis: np.minimum.accumulate(x, axis=axis)),
    "cumlogsumexp": _cumulative(_logaddexp_accumulate),
    "sort": _sort, "top_k": _top_k, "dot_general": _dot_general,
    "conv_general_dilated": _conv, "threefry2x32": _threefry,
    "add_any": binary(np.add),
}


def lax_primitives() -> list[Primitive]:
    """Every primitive the lax package defines."""
    from lamina_tracing_core.lax import (
        collectives, contractions, convert, cumulative, elementwise, indexing, prng, reductions,
        sorting, structural)
    mods = [collectives, contractions, convert, cumulative, elementwise, indexing, prng,
            reductions, sorting, structural]
    seen: dict[int, Primitive] = {}
    for m in mods:
        for v in vars(m).values():
            if isinstance(v, Primitive):
                seen[id(v)] = v
    return list(seen.values())


@contextlib.contextmanager
def installed() -> Iterator[None]:
    """Registers the reference impls (overriding others) for the block."""
    saved = dict(impl_rules)
    prims = lax_primitives() + [ad_util.add_jaxvals_p]
    for prim in prims:
        fn = NUMPY_REFERENCE.get(prim.name)
        if fn is not None:
            impl_rules[prim] = fn
    try:
        yield
    finally:
        impl_rules.clear()
        impl_rules.update(saved)



# --- checks shared by the test_lax_* files --------------------------------------------------
def tree_leaves(x: Any) -> list[Any]:
    from lamina_linear_util import tree_util
    return list(tree_util.tree_leaves(x))


def assert_close(actual: Any, expected: Any, *, rtol: float = 1e-5, atol: float = 1e-6,
                 err_msg: str = "") -> None:
    a_leaves, e_leaves = tree_leaves(actual), tree_leaves(expected)
    assert len(a_leaves) == len(e_leaves), (len(a_leaves), len(e_leaves))
    for a, e in zip(a_leaves, e_leaves):
        a, e = np.asarray(a), np.asarray(e)
        assert a.shape == e.shape, (a.shape, e.shape, err_msg)
        if a.dtype == dtypes.float0 or e.dtype == dtypes.float0:
            continue
        assert a.dtype == e.dtype, (a.dtype, e.dtype, err_msg)
        if a.dtype.kind in "biuO" or a.dtype == np.bool_:
            np.testing.assert_array_equal(a, e, err_msg=err_msg)
        else:
            np.testing.assert_allclose(a.astype(np.complex128), e.astype(np.complex128),
                                       rtol=rtol, atol=atol, err_msg=err_msg)


def check_jaxpr_roundtrip(fun: Callable[..., Any], args: Sequence[Any], **tol: Any) -> Any:
    """Eager result == evaluating ``make_jaxpr(fun)``; the jaxpr type-checks and
    names its inputs/outputs. Returns the eager result."""
    from lamina_tracing_core import api, core
    from lamina_tracing_core.jaxpr import validate_jaxpr_debug_info
    eager = fun(*args)
    closed = api.make_jaxpr(fun)(*args)
    core.check_jaxpr(closed)
    validate_jaxpr_debug_info(closed)
    staged = api.eval_jaxpr(closed, closed.consts, *tree_leaves(list(args)))
    assert_close(staged, tree_leaves(eager), err_msg="eval_jaxpr(make_jaxpr(f)) vs f", **tol)
    return eager


def batched_args(args: Sequence[Any], in_axes: Sequence[int | None], size: int = 3,
                 seed: int = 0) -> list[Any]:
    """Stacks ``size`` variants of each batched argument along its in_axis
    (floats perturbed, integers and booleans repeated)."""
    rng = np.random.RandomState(seed)
    out = []
    for a, ax in zip(args, in_axes):
        a = arr(a)
        if ax is None:
            out.append(a)
            continue
        if a.dtype.kind in "fc" or a.dtype == np.dtype(ml_dtypes.bfloat16):
            variants = [(a + rng.standard_normal(a.shape).astype(a.dtype) * 0.1 * k
                         ).astype(a.dtype) for k in range(size)]
        else:
            variants = [a] * size
        out.append(np.stack(variants, axis=ax))
    return out


def check_vmap(fun: Callable[..., Any], args: Sequence[Any], in_axes: Sequence[int | None],
               size: int = 3, **tol: Any) -> None:
    """``vmap(fun, in_axes)`` equals stacking ``fun`` over the batch."""
    from lamina_tracing_core import api
    bargs = batched_args(args, in_axes, size)
    got = api.vmap(fun, in_axes=tuple(in_axes))(*bargs)
    expected_per = []
    for i in range(size):
        one = [a if ax is None else np.take(a, i, axis=ax) for a, ax in zip(bargs, in_axes)]
        expected_per.append(tree_leaves(fun(*one)))
    expected = [np.stack([np.asarray(e[j]) for e in expected_per]) for j in
                range(len(expected_per[0]))]
    assert_close(tree_leaves(got), expected, err_msg="vmap vs loop", **tol)
