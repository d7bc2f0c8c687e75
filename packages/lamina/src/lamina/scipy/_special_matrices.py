"""The structured matrices of ``scipy.linalg`` (JAX's ``jax.scipy.linalg``
has them all): built from an array argument they trace (and batch over
leading axes where JAX's do); built from a size alone they are constants of
the default float dtype (``hadamard``: int)."""

from __future__ import annotations

import math
import operator
from typing import Any

import numpy as np
from lamina_tracing_core import dtypes, lax
from lamina_tracing_core import numpy as jnp
from lamina_tracing_core.avals import get_aval
from lamina_tracing_core.numpy import _util

__all__ = ["circulant", "companion", "convolution_matrix", "dft", "fiedler", "fiedler_companion",
           "hadamard", "hankel", "helmert", "hilbert", "invhilbert", "invpascal", "leslie",
           "pascal"]

Array = Any


def _vector(fun: str, name: str, x: Any, *, batched: bool = False, min_size: int = 0) -> Any:
    x = jnp.asarray(x)
    ndim = _util.ndim_of(x)
    if (ndim < 1) if batched else (ndim != 1):
        raise ValueError(f"lamina.scipy.linalg.{fun}: argument {name!r} must be "
                         f"{'at least ' if batched else ''}one-dimensional, got shape "
                         f"{_util.shape_of(x)}")
    if _util.shape_of(x)[-1] < min_size:
        raise ValueError(f"lamina.scipy.linalg.{fun}: argument {name!r} must have at least "
                         f"{min_size} entries, got shape {_util.shape_of(x)}")
    return x


def _constant(values: Any) -> Array:
    return jnp.asarray(np.asarray(values, dtypes.canonicalize_dtype(np.float64)))


def _size(fun: str, n: Any) -> int:
    size: int = operator.index(n)
    if size < 0:
        raise ValueError(f"lamina.scipy.linalg.{fun}: argument 'n' must be non-negative, got "
                         f"{size}")
    return size


def circulant(c: Any) -> Array:
    """The circulant matrix with first column ``c`` (batched over leading axes)."""
    c = _vector("circulant", "c", c, batched=True)
    n = _util.shape_of(c)[-1]
    index = (np.arange(n)[:, None] - np.arange(n)[None, :]) % n
    return jnp.take(c, jnp.asarray(index.astype(np.int32)), axis=-1)


def companion(a: Any) -> Array:
    """The companion matrix of the polynomial with coefficients ``a``
    (highest degree first)."""
    a = _vector("companion", "a", a, min_size=2)
    n = _util.shape_of(a)[0]
    first = -a[1:] / a[0]
    below = jnp.eye(n - 2, n - 1, dtype=get_aval(first).dtype)
    return jnp.concatenate([first[None, :], below], axis=0)


def convolution_matrix(a: Any, n: int, mode: str = "full") -> Array:
    """The matrix ``M`` with ``M @ v == numpy.convolve(a, v, mode)`` for ``v``
    of length ``n``."""
    a = _vector("convolution_matrix", "a", a, min_size=1)
    n = _size("convolution_matrix", n)
    if n == 0:
        raise ValueError("lamina.scipy.linalg.convolution_matrix: argument 'n' must be positive")
    m = _util.shape_of(a)[0]
    if mode == "full":
        rows, first = m + n - 1, 0
    elif mode == "same":
        rows, first = max(m, n), (min(m, n) - 1) // 2
    elif mode == "valid":
        rows, first = max(m, n) - min(m, n) + 1, min(m, n) - 1
    else:
        raise ValueError(f"lamina.scipy.linalg.convolution_matrix: argument 'mode' must be "
                         f"'full', 'same' or 'valid', got {mode!r}")
    index = np.arange(first, first + rows)[:, None] - np.arange(n)[None, :]
    padded = jnp.concatenate([a, jnp.zeros((1,), get_aval(a).dtype)])
    index = np.where((index >= 0) & (index < m), index, m).astype(np.int32)
    return jnp.take(padded, jnp.asarray(index), axis=0)


def dft(n: int, scale: str | None = None, *, dtype: Any = None) -> Array:
    """The ``n``-point discrete Fourier transform matrix; ``scale`` None,
    ``'sqrtn'`` or ``'n'`` divides it by 1, ``sqrt(n)`` or ``n``."""
    n = _size("dft", n)
    if scale not in (None, "sqrtn", "n"):
        raise ValueError(f"lamina.scipy.linalg.dft: argument 'scale' must be None, 'sqrtn' or "
                         f"'n', got {scale!r}")
    out_dtype = dtypes.canonicalize_dtype(np.complex128 if dtype is None else dtype)
    k = np.arange(n)
    m = np.exp(-2j * np.pi * ((k[:, None] * k[None, :]) % max(n, 1)) / max(n, 1))
    if scale == "sqrtn":
        m = m / math.sqrt(n)
    elif scale == "n":
        m = m / n
    return jnp.asarray(m.astype(out_dtype))


def fiedler(a: Any) -> Array:
    """The symmetric matrix ``|a[i] - a[j]|``."""
    a = _vector("fiedler", "a", a)
    return jnp.abs(a[:, None] - a[None, :])


def fiedler_companion(a: Any) -> Array:
    """Fiedler's pentadiagonal companion matrix of the polynomial ``a``
    (highest degree first)."""
    a = _vector("fiedler_companion", "a", a, min_size=2)
    a = a / a[0]
    n = _util.shape_of(a)[0] - 1
    out = jnp.zeros((n, n), get_aval(a).dtype)
    if n == 1:
        return out.at[0, 0].set(-a[1])
    # Ones and the odd coefficients below the diagonal, the even ones above.
    out = out.at[np.arange(3, n, 2), np.arange(1, n - 2, 2)].set(1)
    out = out.at[np.arange(2, n, 2), np.arange(1, n - 1, 2)].set(-a[3::2])
    out = out.at[np.arange(0, n - 2, 2), np.arange(2, n, 2)].set(1)
    out = out.at[np.arange(0, n - 1, 2), np.arange(1, n, 2)].set(-a[2::2])
    return out.at[0, 0].set(-a[1]).at[1, 0].set(1)


def hadamard(n: int, dtype: Any = int) -> Array:
    """The ``n x n`` Hadamard matrix (Sylvester's construction; ``n`` a
    power of two)."""
    n = _size("hadamard", n)
    if n < 1 or n & (n - 1):
        raise ValueError(f"lamina.scipy.linalg.hadamard: argument 'n' must be a positive power "
                         f"of two, got {n}")
    h = np.ones((1, 1))
    while h.shape[0] < n:
        h = np.block([[h, h], [h, -h]])
    return jnp.asarray(h.astype(dtypes.canonicalize_dtype(dtype)))


def hankel(c: Any, r: Any = None) -> Array:
    """The Hankel matrix with first column ``c`` and last row ``r`` (zeros
    when omitted; ``r[0]`` is ignored)."""
    c = _vector("hankel", "c", jnp.ravel(jnp.asarray(c)))
    r = jnp.zeros_like(c) if r is None else jnp.ravel(jnp.asarray(r))
    m, n = _util.shape_of(c)[0], _util.shape_of(r)[0]
    values = jnp.concatenate(_util.promote_dtypes("scipy.linalg.hankel", c, r[1:]))
    index = (np.arange(m)[:, None] + np.arange(n)[None, :]).astype(np.int32)
    return jnp.take(values, jnp.asarray(index), axis=0)


def helmert(n: int, full: bool = False) -> Array:
    """The (orthogonal) Helmert matrix of order ``n``, without its first row
    unless ``full``."""
    n = _size("helmert", n)
    h = np.tril(np.ones((n, n)), -1) - np.diag(np.arange(n))
    d = np.arange(n) * np.arange(1, n + 1)
    h[0] = 1
    d[0] = n
    h = h / np.sqrt(d)[:, None]
    return _constant(h if full else h[1:])


def hilbert(n: int) -> Array:
    """The Hilbert matrix ``1 / (i + j + 1)``."""
    n = _size("hilbert", n)
    k = np.arange(n)
    return _constant(1.0 / (k[:, None] + k[None, :] + 1))


def invhilbert(n: int) -> Array:
    """The inverse of ``hilbert(n)``, from its closed form."""
    n = _size("invhilbert", n)
    out = np.empty((n, n))
    for i in range(n):
        for j in range(i + 1):
            s = i + j
            v = ((-1) ** s * (s + 1) * math.comb(n + i, n - j - 1) * math.comb(n + j, n - i - 1)
                 * math.comb(s, i) ** 2)
            out[i, j] = out[j, i] = v
    return _constant(out)


def _pascal_lower(n: int) -> np.ndarray[Any, Any]:
    """The lower-triangular binomial coefficients ``C(i, j)``."""
    return np.array([[math.comb(i, j) for j in range(n)] for i in range(n)], np.float64)


def pascal(n: int, kind: str | None = None) -> Array:
    """The Pascal matrix: ``kind`` ``'symmetric'`` (default,
    ``C(i + j, i)``), ``'lower'`` or ``'upper'`` (binomial triangles)."""
    n = _size("pascal", n)
    kind = "symmetric" if kind is None else kind
    lower = _pascal_lower(n)
    if kind == "lower":
        return _constant(lower)
    if kind == "upper":
        return _constant(lower.T)
    if kind == "symmetric":
        return _constant(lower @ lower.T)
    raise ValueError(f"lamina.scipy.linalg.pascal: argument 'kind' must be 'symmetric', "
                     f"'lower' or 'upper', got {kind!r}")


def invpascal(n: int, kind: str | None = None) -> Array:
    """The inverse of ``pascal(n, kind)``."""
    n = _size("invpascal", n)
    kind = "symmetric" if kind is None else kind
    signs = (-1.0) ** (np.arange(n)[:, None] + np.arange(n)[None, :])
    inv_lower = _pascal_lower(n) * signs
    if kind == "lower":
        return _constant(inv_lower)
    if kind == "upper":
        return _constant(inv_lower.T)
    if kind == "symmetric":
        return _constant(inv_lower.T @ inv_lower)
    raise ValueError(f"lamina.scipy.linalg.invpascal: argument 'kind' must be 'symmetric', "
                     f"'lower' or 'upper', got {kind!r}")


def leslie(f: Any, s: Any) -> Array:
    """The Leslie matrix of fecundities ``f`` (first row) and survival rates
    ``s`` (sub-diagonal); ``len(s) == len(f) - 1``."""
    f = _vector("leslie", "f", f, min_size=1)
    s = _vector("leslie", "s", s)
    n = _util.shape_of(f)[0]
    if _util.shape_of(s)[0] != n - 1:
        raise ValueError(f"lamina.scipy.linalg.leslie: argument 's' must have length "
                         f"len(f) - 1 = {n - 1}, got shape {_util.shape_of(s)}")
    f, s = _util.promote_dtypes_inexact("scipy.linalg.leslie", f, s)
    below = jnp.concatenate([jnp.diag(s), jnp.zeros((n - 1, 1), get_aval(s).dtype)], axis=1)
    return lax.concatenate([f[None, :], below], 0)
