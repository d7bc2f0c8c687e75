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

On ``cuda``/``rocm`` also ``svd`` (``gesvdj`` up to 1024x1024, else
``gesvd``), ``eig`` (the hybrid host kernel), ``tridiagonal``,
``tridiagonal_solve`` (cuSPARSE ``gtsv2``), ``ormqr``, and on ``cuda``
``symmetric_product`` (``syrk``) and ``cholesky_update``. On ``tpu`` (and by
default) ``geqrf``/``householder_product`` are XLA's ``Qr`` and
``ProductOfElementaryHouseholderReflectors`` expanders, ``lu`` is
``LuDecomposition``, ``eigh`` is ``Eigh`` and ``svd`` goes through the
polar decomposition (``qdwh``, then ``eigh`` of its Hermitian factor); ``tridiagonal_solve``,
``ormqr``, ``symmetric_product`` and ``cholesky_update`` are traced there.
``hessenberg`` and ``schur`` are CPU-only, as in JAX.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from typing import Any

import numpy as np
from jaxlib.cpu import _lapack  # type: ignore[attr-defined]  # no stubs
from jaxlib.mlir import ir
from jaxlib.mlir.dialects import stablehlo as hlo
from lamina_linear_util.linear_util import wrap_init
from lamina_tracing_core import dtypes, lax
from lamina_tracing_core import partial_eval as pe
from lamina_tracing_core.avals import ShapedArray
from lamina_tracing_core import numpy as jnp
from lamina_tracing_core.api import vmap
from lamina_tracing_core.control_flow import fori_loop, scan
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
              aliases: dict[int, int], num_batch_dims: int | None,
              **attrs: Any) -> list[Value]:
    """A LAPACK FFI custom call; ``*_avals`` pair each aval with whether it is
    a matrix (column-major layout); ``aliases`` maps operand to result;
    ``num_batch_dims`` (a frontend attribute, so XLA may partition the
    batch) is left out where it is None."""
    frontend = None if num_batch_dims is None else {"num_batch_dims": str(num_batch_dims)}
    return ffi_call(ctx, target, operands, [a for a, _ in result_avals],
                    operand_layouts=[_layout(a, m) for a, m in operand_avals],
                    result_layouts=[_layout(a, m) for a, m in result_avals],
                    operand_output_aliases=aliases, frontend_attributes=frontend, **attrs)


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


# --- traced lowerings (the platforms without a library kernel) ---------------------------

def _lower_traced(ctx: LoweringRuleContext, fn: Any, args: Sequence[Value],
                  *params: Any) -> Sequence[Value]:
    """Lowers ``fn(*args, *params)`` traced at the rule's input avals."""
    return lower_sub_jaxpr(ctx, _traced(fn, _plain(ctx.avals_in), params), list(args))


def _i32(value: int) -> ir.Attribute:
    return ir.IntegerAttr.get(ir.IntegerType.get_signless(32), int(value))


def _is_complex(dtype: np.dtype[Any]) -> bool:
    return np.dtype(dtype).kind == "c"


def _nan_all(ctx: LoweringRuleContext, ok: Value, values: Sequence[Value],
             avals: Sequence[ShapedArray], batch: int) -> list[Value]:
    return [_nan_unless(ctx, ok, v, a, batch) for v, a in zip(values, avals)]


# --- hessenberg, schur (CPU) ---------------------------------------------------------------

def _hessenberg_cpu(ctx: LoweringRuleContext, a: Value) -> Sequence[Value]:
    aval, = ctx.avals_in
    h_aval, tau_aval = ctx.avals_out
    batch = tuple(aval.shape[:-2])
    info_aval = ShapedArray(batch, np.dtype(np.int32))
    h, taus, info = _ffi_call(ctx, _target(ctx, "gehrd", aval.dtype), [a], [(aval, True)],
                              [(h_aval, True), (tau_aval, False), (info_aval, False)], {0: 0},
                              len(batch), low=_i32(1), high=_i32(aval.shape[-1]))
    return _nan_all(ctx, _info_ok(info, batch, "EQ"), [h, taus], ctx.avals_out, len(batch))


register_lowering(la.hessenberg_p, _hessenberg_cpu, platform="cpu")


def _schur_cpu(ctx: LoweringRuleContext, x: Value, *, compute_schur_vectors: bool,
               sort_eig_vals: bool, select_callable: Any) -> Sequence[Value]:
    aval, = ctx.avals_in
    batch = tuple(aval.shape[:-2])
    info_aval = ShapedArray(batch, np.dtype(np.int32))
    w_aval = ShapedArray(tuple(aval.shape[:-1]), aval.dtype)
    eigvals = [(w_aval, False)] * (1 if _is_complex(aval.dtype) else 2)
    modes = _lapack.schur.ComputationMode
    mode = modes.kComputeSchurVectors if compute_schur_vectors else \
        modes.kNoComputeSchurVectors
    t, z, *_, info = _ffi_call(
        ctx, _target(ctx, "gees", aval.dtype), [x], [(aval, True)],
        [(aval, True), (aval, True), *eigvals, (info_aval, False), (info_aval, False)],
        {0: 0}, len(batch),
        mode=ir.IntegerAttr.get(ir.IntegerType.get_unsigned(8), int(mode.value)),
        sort=ir.IntegerAttr.get(ir.IntegerType.get_unsigned(8),
                                int(_lapack.schur.Sort.kNoSortEigenvalues.value)))
    outs = [t, z] if compute_schur_vectors else [t]
    return _nan_all(ctx, _info_ok(info, batch, "EQ"), outs, ctx.avals_out, len(batch))


register_lowering(la.schur_p, _schur_cpu, platform="cpu")


# --- tridiagonal ------------------------------------------------------------------------------

def _tridiagonal_rule(platform: str) -> Any:
    def rule(ctx: LoweringRuleContext, a: Value, *, lower: bool) -> Sequence[Value]:
        aval, = ctx.avals_in
        batch = tuple(aval.shape[:-2])
        info_aval = ShapedArray(batch, np.dtype(np.int32))
        arr_aval, d_aval, e_aval, tau_aval = ctx.avals_out
        results = [(arr_aval, True), (d_aval, False), (e_aval, False), (tau_aval, False),
                   (info_aval, False)]
        if platform == "cpu":
            base = "hetrd" if _is_complex(aval.dtype) else "sytrd"
            target = _target(ctx, base, aval.dtype)
            attrs = {"uplo": _u8("L" if lower else "U")}
        else:
            target = f"{_GPU_PREFIX[platform][0]}_sytrd_ffi"
            attrs = {"lower": _bool(lower)}
        *outs, info = _ffi_call(ctx, target, [a], [(aval, True)], results, {0: 0}, len(batch),
                                **attrs)
        return _nan_all(ctx, _info_ok(info, batch, "EQ"), outs, ctx.avals_out, len(batch))

    return rule


# --- tridiagonal_solve ----------------------------------------------------------------------

def _tridiagonal_solve_impl(dl: Any, d: Any, du: Any, b: Any) -> Any:
    """The Thomas algorithm (no pivoting), rows scanned along the leading axis."""
    rows_first = [jnp.moveaxis(v, -1, 0) for v in (dl, d, du)]
    b_rows = jnp.moveaxis(b, -2, 0)
    dl_r, d_r, du_r = rows_first
    if b_rows.shape[0] == 1:
        return b / d[..., None]

    def forward(carry: Any, row: Any) -> Any:
        cp, dp = carry
        lo, mid, up, rhs = row
        denom = mid - lo * cp
        nxt = (up / denom, (rhs - lo[..., None] * dp) / denom[..., None])
        return nxt, nxt

    first = (du_r[0] / d_r[0], b_rows[0] / d_r[0][..., None])
    _, (cps, dps) = scan(forward, first, (dl_r[1:], d_r[1:], du_r[1:], b_rows[1:]))
    cps = jnp.concatenate([first[0][None], cps])
    dps = jnp.concatenate([first[1][None], dps])

    def backward(x_next: Any, row: Any) -> Any:
        cp, dp = row
        x = dp - cp[..., None] * x_next
        return x, x

    _, xs = scan(backward, dps[-1], (cps[:-1], dps[:-1]), reverse=True)
    return jnp.moveaxis(jnp.concatenate([xs, dps[-1][None]]), 0, -2)


def _tridiagonal_solve_generic(ctx: LoweringRuleContext, dl: Value, d: Value, du: Value,
                               b: Value, *, perturb_singular: bool) -> Sequence[Value]:
    if perturb_singular:
        raise ctx.error("tridiagonal_solve(perturb_singular=True) needs the LAPACK or "
                        "cuSPARSE kernels (CPU or GPU)")
    return _lower_traced(ctx, _tridiagonal_solve_impl, [dl, d, du, b])


def _tridiagonal_solve_cpu(ctx: LoweringRuleContext, dl: Value, d: Value, du: Value, b: Value,
                           *, perturb_singular: bool) -> Sequence[Value]:
    *diag_avals, b_aval = ctx.avals_in
    batch = tuple(b_aval.shape[:-2])
    operands = [(a, False) for a in diag_avals] + [(b_aval, True)]
    if perturb_singular:
        return _ffi_call(ctx, "tridiagonal_solve_perturbed_ffi", [dl, d, du, b], operands,
                         [(b_aval, True)], {}, len(batch))
    info_aval = ShapedArray(batch, np.dtype(np.int32))
    *_, out, info = _ffi_call(ctx, _target(ctx, "gtsv", b_aval.dtype), [dl, d, du, b],
                              operands, [*operands, (info_aval, False)],
                              {0: 0, 1: 1, 2: 2, 3: 3}, len(batch))
    return [_nan_unless(ctx, _info_ok(info, batch, "EQ"), out, b_aval, len(batch))]


def _tridiagonal_solve_gpu(platform: str) -> Any:
    _, short = _GPU_PREFIX[platform]

    def rule(ctx: LoweringRuleContext, dl: Value, d: Value, du: Value, b: Value, *,
             perturb_singular: bool) -> Sequence[Value]:
        *diag_avals, b_aval = ctx.avals_in
        operands = [(a, False) for a in diag_avals] + [(b_aval, True)]
        batch = len(b_aval.shape) - 2
        if perturb_singular:
            return _ffi_call(ctx, f"{short}_tridiagonal_solve_perturbed", [dl, d, du, b],
                             operands, [(b_aval, True)], {}, batch)
        if b_aval.shape[-2] <= 2:  # gtsv2 needs at least three rows
            return _tridiagonal_solve_generic(ctx, dl, d, du, b, perturb_singular=False)
        return _ffi_call(ctx, f"{short}sparse_gtsv2_ffi", [dl, d, du, b], operands,
                         [(b_aval, True)], {3: 0}, batch)

    return rule


register_lowering(la.tridiagonal_solve_p, _tridiagonal_solve_generic)
register_lowering(la.tridiagonal_solve_p, _tridiagonal_solve_cpu, platform="cpu")


# --- ormqr, symmetric_product, cholesky_update -------------------------------------------------

def _ormqr_generic(ctx: LoweringRuleContext, a: Value, taus: Value, c: Value, *, left: bool,
                   transpose: bool) -> Sequence[Value]:
    return _lower_traced(ctx, la.ormqr_traceable, [a, taus, c], left, transpose)


def _ormqr_rule(platform: str) -> Any:
    def rule(ctx: LoweringRuleContext, a: Value, taus: Value, c: Value, *, left: bool,
             transpose: bool) -> Sequence[Value]:
        a_aval, tau_aval, c_aval = ctx.avals_in
        if platform == "cpu":
            target = _target(ctx, "unmqr" if _is_complex(a_aval.dtype) else "ormqr",
                             a_aval.dtype)
        else:
            target = f"{_GPU_PREFIX[platform][0]}_ormqr_ffi"
        return _ffi_call(ctx, target, [a, taus, c],
                         [(a_aval, True), (tau_aval, False), (c_aval, True)],
                         [(ctx.avals_out[0], True)], {2: 0}, len(a_aval.shape) - 2,
                         left=_bool(left), transpose=_bool(transpose))

    return rule


register_lowering(la.ormqr_p, _ormqr_generic)


def _symmetric_product_generic(ctx: LoweringRuleContext, a: Value, c: Value, *, alpha: Any,
                               beta: Any) -> Sequence[Value]:
    return _lower_traced(ctx, la.symmetric_product_traceable, [a, c], alpha, beta)


def _symmetric_product_cuda(ctx: LoweringRuleContext, a: Value, c: Value, *, alpha: Any,
                            beta: Any) -> Sequence[Value]:
    a_aval, c_aval = ctx.avals_in
    scalar = ShapedArray((), a_aval.dtype)
    return _ffi_call(ctx, "cusolver_syrk_ffi",
                     [a, c, full_like(alpha, scalar), full_like(beta, scalar)],
                     [(a_aval, False), (c_aval, False), (scalar, False), (scalar, False)],
                     [(ctx.avals_out[0], False)], {1: 0}, None, transpose=_bool(False))


register_lowering(la.symmetric_product_p, _symmetric_product_generic)
register_lowering(la.symmetric_product_p, _symmetric_product_cuda, platform="cuda")


def _cholesky_update_generic(ctx: LoweringRuleContext, r: Value, w: Value) -> Sequence[Value]:
    return _lower_traced(ctx, la.cholesky_update_traceable, [r, w])


def _cholesky_update_cuda(ctx: LoweringRuleContext, r: Value, w: Value) -> Sequence[Value]:
    r_aval, w_aval = ctx.avals_in
    if len(r_aval.shape) > 2:  # the kernel takes one matrix
        return _cholesky_update_generic(ctx, r, w)
    out = _ffi_call(ctx, "cu_cholesky_update_ffi", [r, w], [(r_aval, False), (w_aval, False)],
                    [(r_aval, False), (w_aval, False)], {0: 0, 1: 1}, None)
    return out[:1]


register_lowering(la.cholesky_update_p, _cholesky_update_generic)
register_lowering(la.cholesky_update_p, _cholesky_update_cuda, platform="cuda")


# --- GPU svd (gesvdj / gesvd) and eig (the hybrid host kernel) ------------------------------

def _gpu_svd(platform: str) -> Any:
    solver, _ = _GPU_PREFIX[platform]

    def rule(ctx: LoweringRuleContext, x: Value, *, full_matrices: bool, compute_uv: bool,
             subset_by_index: Any, algorithm: Any) -> Sequence[Value]:
        aval, = ctx.avals_in
        batch = tuple(aval.shape[:-2])
        nb = len(batch)
        m, n = (int(d) for d in aval.shape[-2:])
        k = min(m, n)
        s_aval = ctx.avals_out[0]
        info_aval = ShapedArray(batch, np.dtype(np.int32))
        algo = la.SvdAlgorithm.DEFAULT if algorithm is None else algorithm
        if algo == la.SvdAlgorithm.DEFAULT:
            algo = la.SvdAlgorithm.JACOBI if m <= 1024 and n <= 1024 else la.SvdAlgorithm.QR
        if algo in (la.SvdAlgorithm.JACOBI, la.SvdAlgorithm.POLAR):
            # Jacobi/polar always produce U and V; their batched kernel has no economy mode.
            econ = not full_matrices and m > 32 and n > 32
            u_aval = ShapedArray((*batch, m, k if econ else m), aval.dtype)
            v_aval = ShapedArray((*batch, n, k if econ else n), aval.dtype)
            name = "gesvdj" if algo == la.SvdAlgorithm.JACOBI else "gesvdp"
            _, s, u, v, info = _ffi_call(
                ctx, f"{solver}_{name}_ffi", [x], [(aval, True)],
                [(aval, True), (s_aval, False), (u_aval, True), (v_aval, True),
                 (info_aval, False)], {0: 0}, nb,
                full_matrices=_bool(not econ), compute_uv=_bool(compute_uv))
            vt = _conj(hlo.transpose(v, ir.DenseI64ArrayAttr.get([*range(nb), nb + 1, nb])),
                       aval.dtype) if compute_uv else v
            if compute_uv and not full_matrices and not econ:
                u = _slice_matrix(u, (*batch, m, k))
                vt = _slice_matrix(vt, (*batch, k, n))
        elif algo == la.SvdAlgorithm.QR:
            transposed = m < n
            if compute_uv:
                u_aval, vt_aval = ctx.avals_out[1:]
            else:
                u_aval = vt_aval = ShapedArray((), aval.dtype)
            mats = [(vt_aval, not transposed), (u_aval, not transposed)] if transposed \
                else [(u_aval, True), (vt_aval, True)]
            _, s, first, second, info = _ffi_call(
                ctx, f"{solver}_gesvd_ffi", [x], [(aval, not transposed)],
                [(aval, not transposed), (s_aval, False), *mats, (info_aval, False)], {0: 0},
                nb, full_matrices=_bool(full_matrices), compute_uv=_bool(compute_uv),
                transposed=_bool(transposed))
            u, vt = (second, first) if transposed else (first, second)
        else:
            raise ctx.error(f"svd: algorithm {algo} is not available on {platform}")
        ok = _info_ok(info, batch, "EQ")
        result = [_nan_unless(ctx, ok, s, s_aval, nb)]
        if compute_uv:
            result += [_nan_unless(ctx, ok, u, ctx.avals_out[1], nb),
                       _nan_unless(ctx, ok, vt, ctx.avals_out[2], nb)]
        return result

    return rule


def _slice_matrix(x: Value, shape: tuple[int, ...]) -> Value:
    nd = len(shape)
    return hlo.slice(x, ir.DenseI64ArrayAttr.get([0] * nd), ir.DenseI64ArrayAttr.get(list(shape)),
                     ir.DenseI64ArrayAttr.get([1] * nd))


def _gpu_eig(platform: str) -> Any:
    _, short = _GPU_PREFIX[platform]

    def rule(ctx: LoweringRuleContext, x: Value, *, compute_left_eigenvectors: bool,
             compute_right_eigenvectors: bool, enable_eigvec_derivs: bool) -> Sequence[Value]:
        aval, = ctx.avals_in
        batch = tuple(aval.shape[:-2])
        real = not _is_complex(aval.dtype)
        w_aval = ctx.avals_out[0]
        vec = ShapedArray(aval.shape, w_aval.dtype)
        part = ShapedArray(tuple(aval.shape[:-1]), aval.dtype)
        info_aval = ShapedArray(batch, np.dtype(np.int32))
        parts = [(part, False)] * 2 if real else [(w_aval, False)]
        *w_parts, vl, vr, info = _ffi_call(
            ctx, f"{short}hybrid_eig_{'real' if real else 'comp'}", [x], [(aval, True)],
            [*parts, (vec, True), (vec, True), (info_aval, False)], {}, len(batch),
            magma=ir.StringAttr.get("auto"), left=_bool(compute_left_eigenvectors),
            right=_bool(compute_right_eigenvectors))
        w = hlo.complex(w_parts[0], w_parts[1]) if real else w_parts[0]
        ok = _info_ok(info, batch, "EQ")
        out = [_nan_unless(ctx, ok, w, w_aval, len(batch))]
        if compute_left_eigenvectors:
            out.append(_nan_unless(ctx, ok, vl, vec, len(batch)))
        if compute_right_eigenvectors:
            out.append(_nan_unless(ctx, ok, vr, vec, len(batch)))
        return out

    return rule


register_lowering(la.tridiagonal_p, _tridiagonal_rule("cpu"), platform="cpu")
register_lowering(la.ormqr_p, _ormqr_rule("cpu"), platform="cpu")
for _platform in ("cuda", "rocm"):
    register_lowering(la.tridiagonal_p, _tridiagonal_rule(_platform), platform=_platform)
    register_lowering(la.tridiagonal_solve_p, _tridiagonal_solve_gpu(_platform),
                      platform=_platform)
    register_lowering(la.ormqr_p, _ormqr_rule(_platform), platform=_platform)
    register_lowering(la.svd_p, _gpu_svd(_platform), platform=_platform)
    register_lowering(la.eig_p, _gpu_eig(_platform), platform=_platform)


# --- TPU (and default) custom calls ---------------------------------------------------------

def _plain_custom_call(ctx: LoweringRuleContext, target: str, operands: Sequence[Value],
                       backend_config: str = "", api_version: int = 1) -> list[Value]:
    """A custom call with default layouts, as XLA's TPU expanders take them."""
    types = ctx.module_context.types
    attributes: dict[str, ir.Attribute] = {
        "call_target_name": ir.StringAttr.get(target),
        "backend_config": ir.StringAttr.get(backend_config),
        "api_version": ir.IntegerAttr.get(ir.IntegerType.get_signless(32), api_version),
    }
    op = hlo.CustomCallOp.build_generic(results=[types.tensor(a) for a in ctx.avals_out],
                                        operands=list(operands), attributes=attributes)
    return list(op.results)


def _geqrf_default(ctx: LoweringRuleContext, x: Value) -> Sequence[Value]:
    return _plain_custom_call(ctx, "Qr", [x])


def _householder_default(ctx: LoweringRuleContext, a: Value, taus: Value) -> Sequence[Value]:
    return _plain_custom_call(ctx, "ProductOfElementaryHouseholderReflectors", [a, taus])


def _lu_tpu(ctx: LoweringRuleContext, x: Value) -> Sequence[Value]:
    return _plain_custom_call(ctx, "LuDecomposition", [x], api_version=2)


def _eigh_tpu(ctx: LoweringRuleContext, x: Value, *, lower: bool, sort_eigenvalues: bool,
              subset_by_index: Any) -> Sequence[Value]:
    # backend_config: lower, sort, the Jacobi sweep limit and its tolerance
    config = f"{int(lower)},{int(sort_eigenvalues)},100,1e-6"
    return _plain_custom_call(ctx, "Eigh", [x], backend_config=config)


register_lowering(la.geqrf_p, _geqrf_default)
register_lowering(la.householder_product_p, _householder_default)
register_lowering(la.lu_p, _lu_tpu, platform="tpu")
register_lowering(la.eigh_p, _eigh_tpu, platform="tpu")


def _svd_by_polar_one(x: Any, full_matrices: bool, compute_uv: bool) -> list[Any]:
    """The SVD of one matrix from its polar decomposition ``x = u_p h`` (QDWH)
    and the eigendecomposition ``h = v diag(s) v^H``: ``x = (u_p v) s v^H``."""
    m, n = (int(d) for d in x.shape)
    if m < n:
        outs = _svd_by_polar_one(jnp.conj(x.T), full_matrices, compute_uv)
        return outs if not compute_uv else [outs[0], jnp.conj(outs[2].T), jnp.conj(outs[1].T)]
    u_p, h, _, _ = la.qdwh(x)
    v, w = la.eigh(h)
    s = jnp.abs(w[::-1])
    if not compute_uv:
        return [s]
    v = v[:, ::-1]
    u = jnp.matmul(u_p, v, precision=lax.Precision.HIGHEST)
    if full_matrices and m > n:
        q, _ = la.qr(u, full_matrices=True)
        u = jnp.concatenate([u, q[:, n:]], axis=1)
    return [s, u, jnp.conj(v.T)]


def _svd_by_polar(x: Any, full_matrices: bool, compute_uv: bool) -> list[Any]:
    """``_svd_by_polar_one`` over the leading (batch) axes of ``x``."""
    batch, mat = tuple(x.shape[:-2]), tuple(x.shape[-2:])
    if not batch:
        return _svd_by_polar_one(x, full_matrices, compute_uv)
    flat = jnp.reshape(x, (-1, *mat))
    outs = vmap(lambda a: _svd_by_polar_one(a, full_matrices, compute_uv))(flat)
    return [jnp.reshape(o, (*batch, *o.shape[1:])) for o in outs]


def _svd_tpu(ctx: LoweringRuleContext, x: Value, *, full_matrices: bool, compute_uv: bool,
             subset_by_index: Any, algorithm: Any) -> Sequence[Value]:
    if algorithm not in (None, la.SvdAlgorithm.DEFAULT, la.SvdAlgorithm.POLAR):
        raise ctx.error(f"svd: algorithm {algorithm} is not available on tpu (the polar "
                        f"algorithm is)")
    return _lower_traced(ctx, _svd_by_polar, [x], full_matrices, compute_uv)


register_lowering(la.svd_p, _svd_tpu, platform="tpu")
