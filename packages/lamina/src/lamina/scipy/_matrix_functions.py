"""Matrix functions of ``scipy.linalg``: ``expm`` (scaling and squaring
with Padé approximants, Higham 2005) and its Fréchet derivative, ``sqrtm``
and ``funm`` (on the complex Schur form), the Schur helpers ``schur`` and
``rsf2csf``, ``polar`` (``lax.linalg.qdwh`` or the SVD) and ``solve_sylvester``
(Bartels-Stewart).

``expm`` is differentiated through ``expm_frechet`` (a custom JVP, as in
JAX); the others through the decompositions they are made of, where those
are differentiable."""

from __future__ import annotations

import functools
import operator
from collections.abc import Callable
from functools import partial
from typing import Any

from lamina_tracing_core import dtypes, lax
from lamina_tracing_core import numpy as jnp
from lamina_tracing_core.api import vmap
from lamina_tracing_core.avals import get_aval
from lamina_tracing_core.control_flow import fori_loop, switch
from lamina_tracing_core.custom_derivatives import custom_jvp
from lamina_tracing_core.lax import common as lax_common
from lamina_tracing_core.lax.helpers import operand_origin
from lamina_tracing_core.numpy import _util

__all__ = ["expm", "expm_frechet", "funm", "polar", "rsf2csf", "schur", "solve_sylvester",
           "sqrtm"]

Array = Any


def _square(fun: str, name: str, a: Any, *, batched: bool = False) -> Any:
    a = _util.promote_dtypes_inexact(f"scipy.linalg.{fun}", a)[0]
    shape = _util.shape_of(a)
    if (len(shape) < 2 if batched else len(shape) != 2) or shape[-1] != shape[-2]:
        what = "a (batch of) square matrices" if batched else "a square matrix"
        raise ValueError(f"lamina.scipy.linalg.{fun}: argument {name!r} must be {what}, got "
                         f"shape {shape}{operand_origin(a)}")
    return a


def _H(x: Any) -> Any:
    return jnp.conj(jnp.swapaxes(x, -1, -2))


def _complex_dtype(dtype: Any) -> Any:
    """The complex dtype of ``dtype``'s precision."""
    return dtype if dtypes.is_complex(dtype) else lax_common.complex_dtype(dtype)


def _precise_matmul(a: Any, b: Any) -> Any:
    return jnp.matmul(a, b, precision=lax.Precision.HIGHEST)


# --- expm ------------------------------------------------------------------------------------------
_PADE = {
    3: (120.0, 60.0, 12.0, 1.0),
    5: (30240.0, 15120.0, 3360.0, 420.0, 30.0, 1.0),
    7: (17297280.0, 8648640.0, 1995840.0, 277200.0, 25200.0, 1512.0, 56.0, 1.0),
    9: (17643225600.0, 8821612800.0, 2075673600.0, 302702400.0, 30270240.0, 2162160.0,
        110880.0, 3960.0, 90.0, 1.0),
    13: (64764752532480000.0, 32382376266240000.0, 7771770303897600.0, 1187353796428800.0,
         129060195264000.0, 10559470521600.0, 670442572800.0, 33522128640.0, 1323241920.0,
         40840800.0, 960960.0, 16380.0, 182.0, 1.0),
}
#: (the 1-norm bounds below which each Padé degree is accurate, that degree list)
_SINGLE = ((0.4258730016922831, 1.880152677804762), (3, 5, 7), 3.925724783138660)
_DOUBLE = ((0.01495585217958292, 0.2539398330063230, 0.9504178996162932, 2.097847961257068),
           (3, 5, 7, 9, 13), 5.371920351148152)


def _even_powers(a: Any, e: Any | None, count: int) -> tuple[list[Any], list[Any]]:
    """``[I, a^2, a^4, ...]`` (``count`` of them) and, given a direction
    ``e``, their derivatives along it (``None`` entries otherwise); each
    derivative is linear in ``e``."""
    eye = jnp.eye(_util.shape_of(a)[-1], dtype=get_aval(a).dtype)
    a2 = _precise_matmul(a, a)
    powers, derivs = [eye, a2], [None, None if e is None else
                                 _precise_matmul(a, e) + _precise_matmul(e, a)]
    while len(powers) < count:
        powers.append(_precise_matmul(powers[-1], a2))
        derivs.append(None if e is None else
                      _precise_matmul(powers[-2], derivs[1]) + _precise_matmul(derivs[-1], a2))
    return powers, derivs


def _combine(coeffs: Any, mats: list[Any]) -> Any:
    """``sum(c * m)`` over the non-None ``mats``."""
    terms = [c * m for c, m in zip(coeffs, mats) if m is not None]
    out = terms[0]
    for t in terms[1:]:
        out = out + t
    return out


def _pade(degree: int, a: Any, e: Any | None = None) -> tuple[Any, ...]:
    """``(U, V)``, the odd and even parts of the degree-``degree`` Padé
    numerator at ``a`` (``p = V + U``, ``q = V - U``), and with a direction
    ``e`` also their derivatives ``(Lu, Lv)`` along it (Al-Mohy and Higham's
    Fréchet scheme, linear in ``e``)."""
    b = _PADE[degree]
    if degree == 13:
        (eye, a2, a4, a6), (_, m2, m4, m6) = _even_powers(a, e, 4)
        w1 = _combine((b[13], b[11], b[9]), [a6, a4, a2])
        w2 = _combine((b[7], b[5], b[3], b[1]), [a6, a4, a2, eye])
        z1 = _combine((b[12], b[10], b[8]), [a6, a4, a2])
        z2 = _combine((b[6], b[4], b[2], b[0]), [a6, a4, a2, eye])
        w = _precise_matmul(a6, w1) + w2
        u, v = _precise_matmul(a, w), _precise_matmul(a6, z1) + z2
        if e is None:
            return u, v
        lw1 = _combine((b[13], b[11], b[9]), [m6, m4, m2])
        lw2 = _combine((b[7], b[5], b[3]), [m6, m4, m2])
        lz1 = _combine((b[12], b[10], b[8]), [m6, m4, m2])
        lz2 = _combine((b[6], b[4], b[2]), [m6, m4, m2])
        lw = _precise_matmul(a6, lw1) + _precise_matmul(m6, w1) + lw2
        lu = _precise_matmul(a, lw) + _precise_matmul(e, w)
        lv = _precise_matmul(a6, lz1) + _precise_matmul(m6, z1) + lz2
        return u, v, lu, lv
    powers, derivs = _even_powers(a, e, degree // 2 + 1)
    odd = _combine(b[1::2], powers)
    u, v = _precise_matmul(a, odd), _combine(b[0::2], powers)
    if e is None:
        return u, v
    lu = _precise_matmul(a, _combine(b[3::2], derivs[1:])) + _precise_matmul(e, odd)
    return u, v, lu, _combine(b[2::2], derivs[1:])


def _expm_one(a: Any, upper_triangular: bool, max_squarings: int,
              e: Any | None = None) -> Any:
    """``expm(a)``, or ``(expm(a), L(a, e))`` given a direction ``e``."""
    dtype = get_aval(a).dtype
    bounds, degrees, max_norm = _DOUBLE if dtypes.finfo(dtype).bits == 64 else _SINGLE
    norm = jnp.linalg.norm(a, 1)
    squarings = jnp.maximum(0, jnp.floor(jnp.log2(norm / max_norm)))
    scale = (2.0 ** squarings).astype(dtype)
    index = jnp.digitize(norm, jnp.asarray(bounds, get_aval(norm).dtype))
    if e is None:
        u, v = switch(index, [partial(_pade, d) for d in degrees], a / scale)
    else:
        u, v, lu, lv = switch(index, [partial(_pade, d) for d in degrees], a / scale, e / scale)
    p, q = v + u, v - u
    if upper_triangular:
        def solve_q(rhs: Any) -> Any:
            return lax.linalg.triangular_solve(q, rhs, left_side=True, lower=False)
    else:
        def solve_q(rhs: Any) -> Any:
            return jnp.linalg.solve(q, rhs)
    r = solve_q(p)
    if e is None:
        def square(i: Any, r: Any) -> Any:
            return jnp.where(i < squarings, _precise_matmul(r, r), r)

        r = fori_loop(0, max_squarings, square, r)
        return jnp.where(squarings > max_squarings, jnp.full_like(r, jnp.nan), r)
    frechet = solve_q(lu + lv + _precise_matmul(lu - lv, r))

    def square_both(i: Any, rl: tuple[Any, Any]) -> tuple[Any, Any]:
        r, l_ = rl
        more = i < squarings
        return (jnp.where(more, _precise_matmul(r, r), r),
                jnp.where(more, _precise_matmul(r, l_) + _precise_matmul(l_, r), l_))

    r, frechet = fori_loop(0, max_squarings, square_both, (r, frechet))
    bad = squarings > max_squarings
    return (jnp.where(bad, jnp.full_like(r, jnp.nan), r),
            jnp.where(bad, jnp.full_like(frechet, jnp.nan), frechet))


def _batched(fun: Callable[..., Any], *mats: Any) -> Any:
    """``fun`` on each trailing matrix of ``mats`` (equal shapes)."""
    shape = _util.shape_of(mats[0])
    if len(shape) == 2:
        return fun(*mats)
    flat = [jnp.reshape(m, (-1, *shape[-2:])) for m in mats]
    out = vmap(fun)(*flat)
    if isinstance(out, tuple):
        return tuple(jnp.reshape(o, shape) for o in out)
    return jnp.reshape(out, shape)


@functools.lru_cache(maxsize=None)
def _expm_fun(upper_triangular: bool, max_squarings: int) -> Any:
    """``expm`` for these options, differentiated by its Fréchet derivative."""

    @custom_jvp
    def expm_(a: Any) -> Any:
        return _batched(partial(_expm_one, upper_triangular=upper_triangular,
                                max_squarings=max_squarings), a)

    @expm_.defjvp
    def expm_jvp(primals: Any, tangents: Any) -> Any:
        (a,), (da,) = primals, tangents
        return _frechet(a, da, upper_triangular, max_squarings)

    return expm_


def _frechet(a: Any, e: Any, upper_triangular: bool = False,
             max_squarings: int = 16) -> tuple[Any, Any]:
    """``(expm(a), L(a, e))``, ``L`` linear in ``e``."""
    def one(a_: Any, e_: Any) -> Any:
        return _expm_one(a_, upper_triangular, max_squarings, e_)

    out: tuple[Any, Any] = _batched(one, a, e)
    return out


def expm(A: Any, *, upper_triangular: bool = False, max_squarings: int = 16) -> Array:
    """The matrix exponential of each square trailing matrix of ``A``, by
    scaling and squaring with a Padé approximant of degree 3-7 (single
    precision) or 3-13 (double) chosen by the 1-norm. More than
    ``max_squarings`` squarings needed gives NaNs (as JAX).
    ``upper_triangular`` solves the Padé system by back substitution."""
    a = _square("expm", "A", A, batched=True)
    return _expm_fun(bool(upper_triangular), int(max_squarings))(a)


def expm_frechet(A: Any, E: Any, *, method: str | None = None,
                 compute_expm: bool = True) -> Array | tuple[Array, Array]:
    """``(expm(A), L)`` (``L`` alone without ``compute_expm``): the Fréchet
    derivative ``L`` of the matrix exponential at ``A`` in direction ``E``
    (``expm(A + t E) = expm(A) + t L + O(t^2)``), by differentiating the
    scaling, Padé and squaring steps of ``expm`` along ``E`` (Al-Mohy and
    Higham 2009), linear in ``E``."""
    if method not in (None, "SPS", "blockEnlarge"):
        raise ValueError(f"lamina.scipy.linalg.expm_frechet: argument 'method' must be None, "
                         f"'SPS' or 'blockEnlarge', got {method!r}")
    a = _square("expm_frechet", "A", A, batched=True)
    a, e = _util.promote_dtypes_inexact("scipy.linalg.expm_frechet", a, E)
    if _util.shape_of(e) != _util.shape_of(a):
        raise ValueError(f"lamina.scipy.linalg.expm_frechet: argument 'E' must have the shape "
                         f"of 'A', {_util.shape_of(a)}, got {_util.shape_of(e)}")
    expm_a, frechet = _frechet(a, e)
    return (expm_a, frechet) if compute_expm else frechet


# --- Schur forms -----------------------------------------------------------------------------------
def schur(a: Any, output: str = "real") -> tuple[Array, Array]:
    """``(T, Z)`` with ``a = Z @ T @ Z^H``: ``output='real'`` keeps a real
    ``a`` real (quasi-triangular ``T``), ``'complex'`` gives the triangular
    complex Schur form."""
    if output not in ("real", "complex"):
        raise ValueError(f"lamina.scipy.linalg.schur: argument 'output' must be 'real' or "
                         f"'complex', got {output!r}")
    a = _square("schur", "a", a, batched=True)
    if output == "complex":
        a = a.astype(_complex_dtype(get_aval(a).dtype))
    t, z = lax.linalg.schur(a)
    return t, z


def _unit(n: int, i: Any, dtype: Any) -> Any:
    return (jnp.arange(n) == i).astype(dtype)


def rsf2csf(T: Any, Z: Any, check_finite: bool = True) -> tuple[Array, Array]:
    """The complex Schur form ``(T, Z)`` from a real one: each 2x2 block of
    a complex-conjugate eigenvalue pair is rotated to triangular form by a
    complex Givens rotation, applied to ``Z`` as well."""
    del check_finite
    t = _square("rsf2csf", "T", T)
    n = _util.shape_of(t)[0]
    z = jnp.asarray(Z)
    if _util.shape_of(z) != (n, n):
        raise ValueError(f"lamina.scipy.linalg.rsf2csf: argument 'Z' must have the shape of "
                         f"'T', {(n, n)}, got {_util.shape_of(z)}")
    cdtype = _complex_dtype(get_aval(t).dtype)
    t, z = t.astype(cdtype), z.astype(cdtype)
    eps = dtypes.finfo(cdtype).eps

    def step(k: Any, tz: tuple[Any, Any]) -> tuple[Any, Any]:
        t, z = tz
        m = n - 1 - k
        sub = t[m, m - 1]
        a, b, d = t[m - 1, m - 1], t[m - 1, m], t[m, m]
        split = jnp.abs(sub) > eps * (jnp.abs(a) + jnp.abs(d))
        # mu: an eigenvalue of the block [[a, b], [sub, d]]
        half = (a - d) / 2
        mu = (a + d) / 2 + jnp.sqrt(half * half + b * sub)
        r = jnp.hypot(jnp.abs(mu - d), jnp.abs(sub))
        r = jnp.where(split, r, 1)
        c, s = (mu - d) / r, sub / r
        e_prev, e_m = _unit(n, m - 1, cdtype), _unit(n, m, cdtype)
        g = (jnp.eye(n, dtype=cdtype) + (jnp.conj(c) - 1) * jnp.outer(e_prev, e_prev)
             + s * jnp.outer(e_prev, e_m) - s * jnp.outer(e_m, e_prev)
             + (c - 1) * jnp.outer(e_m, e_m))
        t_new = _precise_matmul(_precise_matmul(g, t), _H(g))
        t_new = t_new * (1 - jnp.outer(e_m, e_prev))
        return (jnp.where(split, t_new, t),
                jnp.where(split, _precise_matmul(z, _H(g)), z))

    t, z = fori_loop(0, max(n - 1, 0), step, (t, z))
    return t, z


def _superdiagonal_mask(n: int, p: Any) -> Any:
    k = jnp.arange(n)
    return (k[None, :] - k[:, None]) == p


def _triangular_sqrt(t: Any) -> Any:
    """The upper-triangular square root of upper-triangular ``t``, one
    superdiagonal at a time (Björck-Hammarling)."""
    n = _util.shape_of(t)[0]
    diag = jnp.sqrt(jnp.diagonal(t))
    r = jnp.diag(diag)
    denom = diag[:, None] + diag[None, :]

    def step(p: Any, r: Any) -> Any:
        value = (t - _precise_matmul(r, r)) / jnp.where(denom == 0, 1, denom)
        return jnp.where(_superdiagonal_mask(n, p), value, r)

    return fori_loop(1, n, step, r)


def _block_bounds(n: int, blocksize: int) -> list[tuple[int, int]]:
    """SciPy's partition of ``range(n)`` into ``max(n // blocksize, 1)``
    nearly equal blocks, the smaller ones first."""
    count = max(n // blocksize, 1)
    small, large_count = divmod(n, count)
    sizes = [small] * (count - large_count) + [small + 1] * large_count
    starts = [sum(sizes[:k]) for k in range(count)]
    return [(b, b + size) for b, size in zip(starts, sizes)]


def _blocked_triangular_sqrt(t: Any, blocksize: int) -> Any:
    """The upper-triangular square root of upper-triangular ``t`` by blocks
    (Deadman, Higham and Ralha): the diagonal blocks' roots point by point,
    then each block above them from a triangular Sylvester equation
    ``R_ii X + X R_jj = T_ij - sum_k R_ik R_kj``, walking each block column
    upwards."""
    bounds = _block_bounds(_util.shape_of(t)[0], blocksize)
    count = len(bounds)
    r: dict[tuple[int, int], Any] = {}
    for i, (lo, hi) in enumerate(bounds):
        r[i, i] = _triangular_sqrt(t[lo:hi, lo:hi])
    for j in range(count):
        cols = slice(*bounds[j])
        for i in range(j - 1, -1, -1):
            rhs = t[slice(*bounds[i]), cols]
            for k in range(i + 1, j):
                rhs = rhs - _precise_matmul(r[i, k], r[k, j])
            r[i, j] = _triangular_sylvester(r[i, i], r[j, j], rhs)
    zero = jnp.zeros((), get_aval(t).dtype)
    return jnp.block([[r[i, j] if (i, j) in r else jnp.broadcast_to(
        zero, (bi[1] - bi[0], bj[1] - bj[0])) for j, bj in enumerate(bounds)]
        for i, bi in enumerate(bounds)])


def sqrtm(A: Any, blocksize: int = 1) -> Array:
    """The principal square root ``X`` (``X @ X = A``) of a square matrix,
    complex, from the triangular square root of the complex Schur form;
    ``blocksize > 1`` computes that root by blocks of about that size, as
    SciPy does (the same root; JAX refuses it), and ``blocksize <= 1`` or
    at least the matrix's size point by point."""
    blocksize = operator.index(blocksize)
    a = _square("sqrtm", "A", A)
    t, z = schur(a, output="complex")
    n = _util.shape_of(t)[0]
    root = (_blocked_triangular_sqrt(t, blocksize) if 1 < blocksize < n
            else _triangular_sqrt(t))
    return _precise_matmul(_precise_matmul(z, root), _H(z))


def funm(A: Any, func: Callable[[Array], Array], disp: bool = True
         ) -> Array | tuple[Array, Array]:
    """``func`` applied to a square matrix through Parlett's recurrence on
    its complex Schur form (``func`` is applied elementwise to the
    eigenvalues); ``disp=False`` also returns SciPy's estimate of the
    relative error (large for close eigenvalues, where the recurrence is
    inaccurate)."""
    a = _square("funm", "A", A)
    n = _util.shape_of(a)[0]
    t, z = schur(a, output="complex")
    diag = jnp.diagonal(t)
    f = jnp.diag(func(diag).astype(get_aval(t).dtype))
    gap = diag[None, :] - diag[:, None]
    safe_gap = jnp.where(gap == 0, 1, gap)

    def step(p: Any, f: Any) -> Any:
        # F commutes with T; on superdiagonal p (still zero in f), that reads
        # F_ij (T_jj - T_ii) = (T f - f T)_ij.
        commutator = _precise_matmul(t, f) - _precise_matmul(f, t)
        return jnp.where(_superdiagonal_mask(n, p), commutator / safe_gap, f)

    f = fori_loop(1, n, step, f)
    out = _precise_matmul(_precise_matmul(z, f), _H(z))
    if disp:
        return out
    tol = dtypes.finfo(get_aval(t).dtype).eps
    upper = jnp.triu(jnp.ones((n, n), bool), 1)
    min_gap = jnp.min(jnp.where(upper, jnp.abs(gap), jnp.inf), initial=jnp.abs(diag[0]))
    min_gap = jnp.where(min_gap == 0, tol, min_gap)
    err = jnp.minimum(1, jnp.maximum(tol, tol / min_gap * jnp.linalg.norm(jnp.triu(t, 1), 1)))
    err = jnp.where(jnp.all(jnp.isfinite(out)), err, jnp.inf)
    return out, err


# --- polar -----------------------------------------------------------------------------------------
def polar(a: Any, side: str = "right", *, method: str = "qdwh", eps: float | None = None,
          max_iterations: int | None = None) -> tuple[Array, Array]:
    """``(u, p)``: the polar decomposition ``a = u @ p`` (``side='right'``)
    or ``a = p @ u`` (``'left'``), ``u`` with orthonormal columns (rows) and
    ``p`` Hermitian positive semi-definite, by the QDWH iteration or by the
    SVD (``method='svd'``)."""
    if side not in ("right", "left"):
        raise ValueError(f"lamina.scipy.linalg.polar: argument 'side' must be 'right' or "
                         f"'left', got {side!r}")
    if method not in ("qdwh", "svd"):
        raise ValueError(f"lamina.scipy.linalg.polar: argument 'method' must be 'qdwh' or "
                         f"'svd', got {method!r}")
    a = _util.promote_dtypes_inexact("scipy.linalg.polar", a)[0]
    if _util.ndim_of(a) != 2:
        raise ValueError(f"lamina.scipy.linalg.polar: argument 'a' must be a matrix, got "
                         f"shape {_util.shape_of(a)}")
    m, n = _util.shape_of(a)
    if method == "svd":
        u_svd, s, vh = jnp.linalg.svd(a, full_matrices=False)
        unitary = _precise_matmul(u_svd, vh)
        s = s.astype(get_aval(a).dtype)
        posdef = (_precise_matmul(_H(vh) * s[None, :], vh) if side == "right"
                  else _precise_matmul(u_svd * s[None, :], _H(u_svd)))
        return unitary, posdef
    def unitary_of(x: Any) -> Any:
        return lax.linalg.qdwh(x, max_iterations=max_iterations, eps=eps)[0]

    unitary = unitary_of(a) if m >= n else _H(unitary_of(_H(a)))
    posdef = _precise_matmul(_H(unitary), a) if side == "right" else \
        _precise_matmul(a, _H(unitary))
    return unitary, (posdef + _H(posdef)) / 2


# --- solve_sylvester -------------------------------------------------------------------------------
def _triangular_sylvester(r: Any, s: Any, f: Any) -> Any:
    """``Y`` with ``r @ Y + Y @ s = f`` for upper-triangular ``r`` and ``s``:
    one triangular solve per column of ``Y``, left to right."""
    m, n = _util.shape_of(f)
    eye = jnp.eye(m, dtype=get_aval(r).dtype)

    def column(k: Any, y: Any) -> Any:
        rhs = f[:, k] - _precise_matmul(y, s[:, k])
        yk = lax.linalg.triangular_solve(r + s[k, k] * eye, rhs, left_side=True, lower=False)
        return y.at[:, k].set(yk)

    return fori_loop(0, n, column, jnp.zeros_like(f))


def solve_sylvester(A: Any, B: Any, C: Any, *, method: str = "schur",
                    tol: float = 1e-8) -> Array:
    """``X`` with ``A @ X + X @ B = C`` (Bartels-Stewart: both matrices
    brought to complex Schur form, then one triangular solve per column);
    real for real input. Where ``A`` and ``-B`` share an eigenvalue the
    system is singular and the result not finite."""
    if method != "schur":
        raise ValueError(f"lamina.scipy.linalg.solve_sylvester: argument 'method' must be "
                         f"'schur', got {method!r}")
    del tol
    a = _square("solve_sylvester", "A", A)
    b = _square("solve_sylvester", "B", B)
    a, b, c = _util.promote_dtypes_inexact("scipy.linalg.solve_sylvester", a, b, C)
    m, n = _util.shape_of(a)[0], _util.shape_of(b)[0]
    if _util.shape_of(c) != (m, n):
        raise ValueError(f"lamina.scipy.linalg.solve_sylvester: argument 'C' must have shape "
                         f"{(m, n)} for 'A' of shape {(m, m)} and 'B' of shape {(n, n)}, got "
                         f"{_util.shape_of(c)}")
    r, u = schur(a, output="complex")
    s, v = schur(b, output="complex")
    f = _precise_matmul(_precise_matmul(_H(u), c.astype(get_aval(r).dtype)), v)
    y = _triangular_sylvester(r, s, f)
    x = _precise_matmul(_precise_matmul(u, y), _H(v))
    return x if dtypes.is_complex(get_aval(c).dtype) else jnp.real(x)

