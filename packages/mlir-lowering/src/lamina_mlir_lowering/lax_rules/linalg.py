"""Lowering of the decompositions (``lax.linalg``).

On CPU each decomposition is a custom call to one of the LAPACK FFI targets
jaxlib registers (``lapack_spotrf_ffi``, ``lapack_dgetrf_ffi``, ...), with
the operand/result layouts, attributes and aliasing JAX uses: matrices are
column-major inside each batch element, batch dims lead, and
``num_batch_dims`` is passed as a frontend attribute. jaxlib's LAPACK
module is bound to SciPy's LAPACK (``_lapack.initialize()``) before the
first such call is lowered. Where LAPACK reports failure (``info``), the
results are replaced by NaNs, as JAX does.

On ``cuda``/``rocm``, ``cholesky``, ``lu`` (with the pivots-to-permutation
kernel), ``eigh``, ``geqrf`` and ``householder_product`` are custom calls to
jaxlib's cuSOLVER/hipSOLVER FFI targets (``cusolver_potrf_ffi``, ...), as
JAX emits them; these lower from any host (the GPU plugin registers the
targets where the module runs). Elsewhere ``cholesky`` and
``triangular_solve`` use the StableHLO ops; ``qr`` and
``lu_pivots_to_permutation`` are lowered through traced implementations on
every platform (the pivots kernel on GPUs).
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from typing import Any

import numpy as np
from jaxlib.mlir import ir
from jaxlib.mlir.dialects import stablehlo as hlo
from lamina_linear_util.linear_util import wrap_init
from lamina_tracing_core import dtypes, lax
from lamina_tracing_core import partial_eval as pe
from lamina_tracing_core.avals import ShapedArray
from lamina_tracing_core.control_flow import fori_loop
from lamina_tracing_core.jaxpr import ClosedJaxpr
from lamina_tracing_core.lax import linalg as la

from lamina_mlir_lowering.custom_call import ensure_lapack_targets, ffi_call
from lamina_mlir_lowering.hlo_helpers import compare, full_like
from lamina_mlir_lowering.lowering import lower_sub_jaxpr
from lamina_mlir_lowering.rules import LoweringRuleContext, register_lowering
from lamina_mlir_lowering.types import Value

__all__: list[str] = []

_PREFIX = {np.dtype(np.float32): "s", np.dtype(np.float64): "d",
           np.dtype(np.complex64): "c", np.dtype(np.complex128): "z"}


def _target(ctx: LoweringRuleContext, base: str, dtype: np.dtype[Any]) -> str:
    """``lapack_<prefix><base>_ffi`` for ``dtype``, with jaxlib's LAPACK bound
    to SciPy's on first use."""
    prefix = _PREFIX.get(np.dtype(dtype))
    if prefix is None:
        raise ctx.error(f"LAPACK has no {base} for dtype {dtype}")
    ensure_lapack_targets()
    return f"lapack_{prefix}{base}_ffi"


def _layout(aval: ShapedArray, matrix: bool) -> tuple[int, ...]:
    """Column-major matrices inside row-major batches; other arrays row-major."""
    nd = aval.ndim
    if matrix and nd >= 2:
        return (nd - 2, nd - 1, *range(nd - 3, -1, -1))
    return tuple(range(nd - 1, -1, -1))


def _u8(value: str) -> ir.Attribute:
    return ir.IntegerAttr.get(ir.IntegerType.get_unsigned(8), ord(value))


def _ffi_call(ctx: LoweringRuleContext, target: str, operands: Sequence[Value],
              operand_avals: Sequence[tuple[ShapedArray, bool]],
              result_avals: Sequence[tuple[ShapedArray, bool]],
              aliases: dict[int, int], num_batch_dims: int,
              **attrs: Any) -> list[Value]:
    """A LAPACK FFI custom call; ``*_avals`` pair each aval with whether it is
    a matrix (column-major layout); ``aliases`` maps operand to result."""
    return ffi_call(ctx, target, operands, [a for a, _ in result_avals],
                    operand_layouts=[_layout(a, m) for a, m in operand_avals],
                    result_layouts=[_layout(a, m) for a, m in result_avals],
                    operand_output_aliases=aliases,
                    frontend_attributes={"num_batch_dims": str(num_batch_dims)}, **attrs)


def _nan_unless(ctx: LoweringRuleContext, ok: Value, x: Value, aval: ShapedArray,
                batch: int) -> Value:
    """``x`` where ``ok`` (one flag per batch element), NaN elsewhere."""
    types = ctx.module_context.types
    pred = hlo.broadcast_in_dim(types.shaped(aval.shape, np.dtype(bool)), ok,
                                ir.DenseI64ArrayAttr.get(list(range(batch))))
    nan = full_like(np.nan, aval)
    return hlo.select(pred, x, nan)


def _info_ok(info: Value, batch: tuple[int, ...], direction: str) -> Value:
    info_aval = ShapedArray(batch, np.dtype(np.int32))
    return compare(info, full_like(0, info_aval), direction, np.dtype(np.int32))


# --- cholesky -----------------------------------------------------------------------------

def _cholesky_cpu(ctx: LoweringRuleContext, x: Value) -> Sequence[Value]:
    aval, = ctx.avals_in
    batch = tuple(aval.shape[:-2])
    info_aval = ShapedArray(batch, np.dtype(np.int32))
    out, info = _ffi_call(ctx, _target(ctx, "potrf", aval.dtype), [x], [(aval, True)],
                          [(aval, True), (info_aval, False)], {0: 0}, len(batch),
                          uplo=_u8("L"))
    ok = _info_ok(info, batch, "EQ")
    return [_nan_unless(ctx, ok, out, aval, len(batch))]


def _cholesky_generic(ctx: LoweringRuleContext, x: Value) -> Sequence[Value]:
    return [hlo.cholesky(x, lower=ir.BoolAttr.get(True))]


register_lowering(la.cholesky_p, _cholesky_generic)
register_lowering(la.cholesky_p, _cholesky_cpu, platform="cpu")


# --- triangular_solve -------------------------------------------------------------------

def _triangular_solve_cpu(ctx: LoweringRuleContext, a: Value, b: Value, *, left_side: bool,
                          lower: bool, transpose_a: bool, conjugate_a: bool,
                          unit_diagonal: bool) -> Sequence[Value]:
    a_aval, b_aval = ctx.avals_in
    if conjugate_a and not transpose_a:
        a = _conj(a, a_aval.dtype)
        conjugate_a = False
    trans = "C" if (transpose_a and conjugate_a) else "T" if transpose_a else "N"
    batch = len(b_aval.shape) - 2
    out, = _ffi_call(ctx, _target(ctx, "trsm", a_aval.dtype), [a, b],
                     [(a_aval, True), (b_aval, True)], [(b_aval, True)], {1: 0}, batch,
                     side=_u8("L" if left_side else "R"), uplo=_u8("L" if lower else "U"),
                     trans_x=_u8(trans), diag=_u8("U" if unit_diagonal else "N"))
    return [out]


def _conj(x: Value, dtype: np.dtype[Any]) -> Value:
    if dtype.kind != "c":
        return x
    return hlo.complex(hlo.real(x), hlo.negate(hlo.imag(x)))


def _triangular_solve_generic(ctx: LoweringRuleContext, a: Value, b: Value, *,
                              left_side: bool, lower: bool, transpose_a: bool,
                              conjugate_a: bool, unit_diagonal: bool) -> Sequence[Value]:
    if conjugate_a and not transpose_a:
        a = _conj(a, ctx.avals_in[0].dtype)
        conjugate_a = False
    kind = "ADJOINT" if (transpose_a and conjugate_a) else \
        "TRANSPOSE" if transpose_a else "NO_TRANSPOSE"
    return [hlo.triangular_solve(a, b, ir.BoolAttr.get(left_side), ir.BoolAttr.get(lower),
                                 ir.BoolAttr.get(unit_diagonal),
                                 hlo.TransposeAttr.get(kind))]


register_lowering(la.triangular_solve_p, _triangular_solve_generic)
register_lowering(la.triangular_solve_p, _triangular_solve_cpu, platform="cpu")


# --- lu -------------------------------------------------------------------------------------

def _pivots_to_permutation_impl(pivots: Any, size: int) -> Any:
    """The permutation LAPACK's row swaps ``pivots`` apply to ``size`` rows."""
    shape = tuple(pivots.aval.shape) if hasattr(pivots, "aval") else tuple(np.shape(pivots))
    batch, k = shape[:-1], shape[-1]
    nd = len(batch) + 1
    full = (*batch, size)
    iota = lax.broadcasted_iota(dtypes.int32, full, nd - 1)

    def body(i: Any, perm: Any) -> Any:
        j = lax.dynamic_index_in_dim(pivots, i, nd - 1, keepdims=True)
        p_i = lax.dynamic_index_in_dim(perm, i, nd - 1, keepdims=True)
        p_j = lax.take_along_axis(perm, j, nd - 1)
        dims = tuple(range(nd))
        at_i = lax.eq(iota, lax.broadcast_in_dim(i, full, ()))
        at_j = lax.eq(iota, lax.broadcast_in_dim(j, full, dims))
        moved = lax.select(at_j, lax.broadcast_in_dim(p_i, full, dims), perm)
        return lax.select(at_i, lax.broadcast_in_dim(p_j, full, dims), moved)

    return fori_loop(np.int32(0), np.int32(k), body, iota)


@functools.lru_cache(maxsize=128)
def _traced(fn: Any, in_avals: tuple[ShapedArray, ...], params: tuple[Any, ...]) -> ClosedJaxpr:
    def apply(*args: Any) -> list[Any]:
        out = fn(*args, *params)
        return list(out) if isinstance(out, (tuple, list)) else [out]

    jaxpr, _, consts = pe.trace_to_jaxpr_dynamic(wrap_init(apply), list(in_avals))
    return ClosedJaxpr(jaxpr, consts)


def _plain(avals: Sequence[ShapedArray]) -> tuple[ShapedArray, ...]:
    return tuple(ShapedArray(a.shape, a.dtype) for a in avals)


def _pivots_rule(ctx: LoweringRuleContext, pivots: Value, *,
                 permutation_size: int) -> Sequence[Value]:
    jaxpr = _traced(_pivots_to_permutation_impl, _plain(ctx.avals_in), (permutation_size,))
    return lower_sub_jaxpr(ctx, jaxpr, [pivots])


register_lowering(la.lu_pivots_to_permutation_p, _pivots_rule)


def _lu_cpu(ctx: LoweringRuleContext, x: Value) -> Sequence[Value]:
    aval, = ctx.avals_in
    lu_aval, piv_aval, perm_aval = ctx.avals_out
    batch = tuple(aval.shape[:-2])
    info_aval = ShapedArray(batch, np.dtype(np.int32))
    out, ipiv, info = _ffi_call(ctx, _target(ctx, "getrf", aval.dtype), [x], [(aval, True)],
                                [(aval, True), (piv_aval, False), (info_aval, False)],
                                {0: 0}, len(batch))
    one = full_like(1, piv_aval)
    pivots = hlo.subtract(ipiv, one)
    ok = _info_ok(info, batch, "GE")
    lu_out = _nan_unless(ctx, ok, out, lu_aval, len(batch))
    sub = ctx.replace(primitive=la.lu_pivots_to_permutation_p, avals_in=[piv_aval],
                      avals_out=[perm_aval])
    perm, = _pivots_rule(sub, pivots, permutation_size=int(aval.shape[-2]))
    return [lu_out, pivots, perm]


register_lowering(la.lu_p, _lu_cpu, platform="cpu")


# --- eigh -----------------------------------------------------------------------------------

def _eigh_cpu(ctx: LoweringRuleContext, x: Value, *, lower: bool, sort_eigenvalues: bool,
              subset_by_index: Any) -> Sequence[Value]:
    aval, = ctx.avals_in
    v_aval, w_aval = ctx.avals_out
    batch = tuple(aval.shape[:-2])
    info_aval = ShapedArray(batch, np.dtype(np.int32))
    base = "heevd" if aval.dtype in (np.dtype(np.complex64), np.dtype(np.complex128)) \
        else "syevd"
    v, w, info = _ffi_call(ctx, _target(ctx, base, aval.dtype), [x], [(aval, True)],
                           [(v_aval, True), (w_aval, False), (info_aval, False)], {0: 0},
                           len(batch), mode=_u8("V"), uplo=_u8("L" if lower else "U"))
    ok = _info_ok(info, batch, "EQ")
    return [_nan_unless(ctx, ok, v, v_aval, len(batch)),
            _nan_unless(ctx, ok, w, w_aval, len(batch))]


register_lowering(la.eigh_p, _eigh_cpu, platform="cpu")


# --- eig ------------------------------------------------------------------------------------

def _eig_cpu(ctx: LoweringRuleContext, x: Value, *, compute_left_eigenvectors: bool,
             compute_right_eigenvectors: bool, enable_eigvec_derivs: bool) -> Sequence[Value]:
    aval, = ctx.avals_in
    batch = tuple(aval.shape[:-2])
    real = aval.dtype.kind == "f"
    cdtype = ctx.avals_out[0].dtype
    w_part = ShapedArray(tuple(aval.shape[:-1]), aval.dtype)
    vec = ShapedArray(aval.shape, cdtype)
    info_aval = ShapedArray(batch, np.dtype(np.int32))
    results = [(w_part, False)] * (2 if real else 1) + [(vec, True), (vec, True),
                                                         (info_aval, False)]
    outs = _ffi_call(ctx, _target(ctx, "geev", aval.dtype), [x], [(aval, True)], results, {},
                     len(batch), compute_left=_u8("V" if compute_left_eigenvectors else "N"),
                     compute_right=_u8("V" if compute_right_eigenvectors else "N"))
    *w_parts, vl, vr, info = outs
    w = hlo.complex(w_parts[0], w_parts[1]) if real else w_parts[0]
    ok = _info_ok(info, batch, "EQ")
    out = [_nan_unless(ctx, ok, w, ctx.avals_out[0], len(batch))]
    if compute_left_eigenvectors:
        out.append(_nan_unless(ctx, ok, vl, vec, len(batch)))
    if compute_right_eigenvectors:
        out.append(_nan_unless(ctx, ok, vr, vec, len(batch)))
    return out


register_lowering(la.eig_p, _eig_cpu, platform="cpu")


# --- QR -------------------------------------------------------------------------------------

def _geqrf_cpu(ctx: LoweringRuleContext, x: Value) -> Sequence[Value]:
    aval, = ctx.avals_in
    a_aval, tau_aval = ctx.avals_out
    batch = len(aval.shape) - 2
    return _ffi_call(ctx, _target(ctx, "geqrf", aval.dtype), [x], [(aval, True)],
                     [(a_aval, True), (tau_aval, False)], {0: 0}, batch)


def _householder_cpu(ctx: LoweringRuleContext, a: Value, taus: Value) -> Sequence[Value]:
    a_aval, tau_aval = ctx.avals_in
    base = "ungqr" if a_aval.dtype in (np.dtype(np.complex64), np.dtype(np.complex128)) \
        else "orgqr"
    batch = len(a_aval.shape) - 2
    return _ffi_call(ctx, _target(ctx, base, a_aval.dtype), [a, taus],
                     [(a_aval, True), (tau_aval, False)], [(ctx.avals_out[0], True)], {0: 0},
                     batch)


def _qr_impl(x: Any, full_matrices: bool) -> Any:
    return la._qr_impl_traceable(x, full_matrices)


def _qr_rule(ctx: LoweringRuleContext, x: Value, *, pivoting: bool, full_matrices: bool,
             use_magma: Any) -> Sequence[Value]:
    jaxpr = _traced(_qr_impl, _plain(ctx.avals_in), (full_matrices,))
    return lower_sub_jaxpr(ctx, jaxpr, [x])


register_lowering(la.geqrf_p, _geqrf_cpu, platform="cpu")
register_lowering(la.householder_product_p, _householder_cpu, platform="cpu")
register_lowering(la.qr_p, _qr_rule)


# --- SVD ------------------------------------------------------------------------------------

def _svd_cpu(ctx: LoweringRuleContext, x: Value, *, full_matrices: bool, compute_uv: bool,
             subset_by_index: Any, algorithm: Any) -> Sequence[Value]:
    aval, = ctx.avals_in
    batch = tuple(aval.shape[:-2])
    m, n = aval.shape[-2:]
    k = min(m, n)
    mode = "N" if not compute_uv else "A" if full_matrices else "S"
    ku, kv = (k, k) if mode == "S" else (m, n)
    s_aval = ShapedArray((*batch, k), ctx.avals_out[0].dtype)
    u_aval = ShapedArray((*batch, m, ku), aval.dtype)
    vt_aval = ShapedArray((*batch, kv, n), aval.dtype)
    info_aval = ShapedArray(batch, np.dtype(np.int32))
    _, s, u, vt, info = _ffi_call(
        ctx, _target(ctx, "gesdd", aval.dtype), [x], [(aval, True)],
        [(aval, True), (s_aval, False), (u_aval, True), (vt_aval, True), (info_aval, False)],
        {0: 0}, len(batch), mode=_u8(mode))
    ok = _info_ok(info, batch, "EQ")
    s = _nan_unless(ctx, ok, s, s_aval, len(batch))
    if not compute_uv:
        return [s]
    return [s, _nan_unless(ctx, ok, u, u_aval, len(batch)),
            _nan_unless(ctx, ok, vt, vt_aval, len(batch))]


register_lowering(la.svd_p, _svd_cpu, platform="cpu")


# --- cuSOLVER / hipSOLVER -------------------------------------------------------------------

_GPU_PREFIX = {"cuda": ("cusolver", "cu"), "rocm": ("hipsolver", "hip")}


def _bool(value: bool) -> ir.Attribute:
    return ir.BoolAttr.get(bool(value))


def _gpu_cholesky(platform: str) -> Any:
    solver, _ = _GPU_PREFIX[platform]

    def rule(ctx: LoweringRuleContext, x: Value) -> Sequence[Value]:
        aval, = ctx.avals_in
        batch = tuple(aval.shape[:-2])
        info_aval = ShapedArray(batch, np.dtype(np.int32))
        out, info = _ffi_call(ctx, f"{solver}_potrf_ffi", [x], [(aval, True)],
                              [(aval, True), (info_aval, False)], {0: 0}, len(batch),
                              lower=_bool(True))
        return [_nan_unless(ctx, _info_ok(info, batch, "EQ"), out, aval, len(batch))]

    return rule


def _gpu_lu(platform: str) -> Any:
    solver, short = _GPU_PREFIX[platform]

    def rule(ctx: LoweringRuleContext, x: Value) -> Sequence[Value]:
        aval, = ctx.avals_in
        lu_aval, piv_aval, perm_aval = ctx.avals_out
        batch = tuple(aval.shape[:-2])
        info_aval = ShapedArray(batch, np.dtype(np.int32))
        out, ipiv, info = _ffi_call(ctx, f"{solver}_getrf_ffi", [x], [(aval, True)],
                                    [(aval, True), (piv_aval, False), (info_aval, False)],
                                    {0: 0}, len(batch))
        pivots = hlo.subtract(ipiv, full_like(1, piv_aval))
        lu_out = _nan_unless(ctx, _info_ok(info, batch, "GE"), out, lu_aval, len(batch))
        perm, = _ffi_call(ctx, f"{short}_lu_pivots_to_permutation", [pivots],
                          [(piv_aval, False)], [(perm_aval, False)], {}, len(batch))
        return [lu_out, pivots, perm]

    return rule


def _gpu_eigh(platform: str) -> Any:
    solver, _ = _GPU_PREFIX[platform]

    def rule(ctx: LoweringRuleContext, x: Value, *, lower: bool, sort_eigenvalues: bool,
             subset_by_index: Any) -> Sequence[Value]:
        aval, = ctx.avals_in
        v_aval, w_aval = ctx.avals_out
        batch = tuple(aval.shape[:-2])
        info_aval = ShapedArray(batch, np.dtype(np.int32))
        v, w, info = _ffi_call(ctx, f"{solver}_syevd_ffi", [x], [(aval, True)],
                               [(v_aval, True), (w_aval, False), (info_aval, False)], {0: 0},
                               len(batch), algorithm=ir.IntegerAttr.get(
                                   ir.IntegerType.get_unsigned(8), 0), lower=_bool(lower))
        ok = _info_ok(info, batch, "EQ")
        return [_nan_unless(ctx, ok, v, v_aval, len(batch)),
                _nan_unless(ctx, ok, w, w_aval, len(batch))]

    return rule


def _gpu_geqrf(platform: str) -> Any:
    solver, _ = _GPU_PREFIX[platform]

    def rule(ctx: LoweringRuleContext, x: Value) -> Sequence[Value]:
        aval, = ctx.avals_in
        a_aval, tau_aval = ctx.avals_out
        return _ffi_call(ctx, f"{solver}_geqrf_ffi", [x], [(aval, True)],
                         [(a_aval, True), (tau_aval, False)], {0: 0}, len(aval.shape) - 2)

    return rule


def _gpu_householder(platform: str) -> Any:
    solver, _ = _GPU_PREFIX[platform]

    def rule(ctx: LoweringRuleContext, a: Value, taus: Value) -> Sequence[Value]:
        a_aval, tau_aval = ctx.avals_in
        return _ffi_call(ctx, f"{solver}_orgqr_ffi", [a, taus],
                         [(a_aval, True), (tau_aval, False)], [(ctx.avals_out[0], True)],
                         {0: 0}, len(a_aval.shape) - 2)

    return rule


for _platform in ("cuda", "rocm"):
    register_lowering(la.cholesky_p, _gpu_cholesky(_platform), platform=_platform)
    register_lowering(la.lu_p, _gpu_lu(_platform), platform=_platform)
    register_lowering(la.eigh_p, _gpu_eigh(_platform), platform=_platform)
    register_lowering(la.geqrf_p, _gpu_geqrf(_platform), platform=_platform)
    register_lowering(la.householder_product_p, _gpu_householder(_platform),
                      platform=_platform)
