"""Kernel density estimation with Gaussian kernels (``scipy.stats.gaussian_kde``)."""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

from lamina_linear_util.tree_util import register_pytree_node_class
from lamina_tracing_core.numpy import _util

import lamina.numpy as jnp
from lamina import random
from lamina.scipy import special

__all__ = ["gaussian_kde"]

Array = Any
_FUN = "lamina.scipy.stats.gaussian_kde"


def _weighted_covariance(data: Array, weights: Array) -> Array:
    """NumPy's ``cov(data, aweights=weights)`` (rows are variables) for
    weights summing to 1: the unbiased weighted estimate."""
    mean = jnp.sum(data * weights, axis=1, keepdims=True)
    centered = data - mean
    correction = 1 - jnp.sum(jnp.square(weights))
    return (centered * weights) @ centered.T / correction


@register_pytree_node_class
class gaussian_kde:  # noqa: N801 - SciPy's name
    """A Gaussian kernel density estimate of ``dataset`` (``(d, n)``: ``n``
    points in ``d`` dimensions; 1-D data is one dimension), optionally
    weighted. The kernel covariance is the data's weighted covariance times
    ``factor ** 2``, the factor from ``bw_method``: ``'scott'`` (the default,
    ``neff ** (-1 / (d + 4))``), ``'silverman'``, a scalar, or a callable of
    the estimate. A pytree, so it passes through ``jit`` and ``vmap``."""

    dataset: Array
    weights: Array
    covariance: Array
    inv_cov: Array
    neff: Array

    def __init__(self, dataset: Any, bw_method: str | float | Callable[..., Any] | None = None,
                 weights: Any = None):
        data = jnp.atleast_2d(jnp.asarray(_util.operand(_FUN, dataset, "dataset")))
        if jnp.iscomplexobj(data):
            raise NotImplementedError(f"{_FUN}: complex data is not supported (as in JAX)")
        if data.size <= 1:
            raise ValueError(f"{_FUN}: argument dataset should have multiple elements, got "
                             f"shape {data.shape}")
        d, n = data.shape
        if weights is None:
            (data,) = _util.promote_dtypes_inexact(_FUN, data)
            w = jnp.full((n,), 1.0 / n, dtype=data.dtype)
        else:
            data, w = _util.promote_dtypes_inexact(_FUN, data, weights)
            w = jnp.atleast_1d(w)
            if w.ndim != 1 or w.shape[0] != n:
                raise ValueError(f"{_FUN}: argument weights should be one-dimensional of "
                                 f"length {n}, got shape {w.shape}")
            w = w / jnp.sum(w)
        self.dataset, self.weights = data, w
        self.neff = 1 / jnp.sum(jnp.square(w))
        method = "scott" if bw_method is None else bw_method
        if method == "scott":
            factor = jnp.power(self.neff, -1.0 / (d + 4))
        elif method == "silverman":
            factor = jnp.power(self.neff * (d + 2) / 4.0, -1.0 / (d + 4))
        elif callable(method):
            factor = method(self)
        elif jnp.isscalar(method) and not isinstance(method, str):
            factor = jnp.asarray(method)
        else:
            raise ValueError(f"{_FUN}: bw_method should be 'scott', 'silverman', a scalar or a "
                             f"callable, got {bw_method!r}")
        data_cov = _weighted_covariance(data, w)
        self.covariance = data_cov * jnp.square(factor)
        self.inv_cov = jnp.linalg.inv(data_cov) / jnp.square(factor)

    # --- the pytree ------------------------------------------------------------------
    def tree_flatten(self) -> tuple[tuple[Array, ...], None]:
        return (self.dataset, self.weights, self.covariance, self.inv_cov, self.neff), None

    @classmethod
    def tree_unflatten(cls, aux: None, children: Any) -> gaussian_kde:
        del aux
        kde = object.__new__(cls)
        kde.dataset, kde.weights, kde.covariance, kde.inv_cov, kde.neff = children
        return kde

    @property
    def d(self) -> int:
        return int(self.dataset.shape[0])

    @property
    def n(self) -> int:
        return int(self.dataset.shape[1])

    # --- densities ---------------------------------------------------------------------
    def _points(self, points: Any, fun: str) -> Array:
        x = jnp.atleast_2d(jnp.asarray(_util.operand(f"{_FUN}.{fun}", points, "points")))
        if x.shape[0] != self.d:
            if x.shape == (1, self.d):
                return x.T
            raise ValueError(f"{_FUN}.{fun}: points have dimension {x.shape[0]}, the data "
                             f"{self.d}")
        return x.astype(self.dataset.dtype)

    def _log_kernel_sums(self, points: Array) -> Array:
        """``log sum_i w_i N(points[:, j]; dataset[:, i], covariance)`` for each j."""
        diff = points[:, None, :] - self.dataset[:, :, None]  # (d, n, m)
        mahalanobis = jnp.einsum("inm,ij,jnm->nm", diff, self.inv_cov, diff)
        _, logdet = jnp.linalg.slogdet(2 * math.pi * self.covariance)
        log_kernel = -0.5 * mahalanobis - 0.5 * logdet
        return special.logsumexp(log_kernel, axis=0, b=self.weights[:, None])

    def evaluate(self, points: Any) -> Array:
        """The density at ``points`` (``(d, m)``)."""
        return jnp.exp(self._log_kernel_sums(self._points(points, "evaluate")))

    __call__ = evaluate

    def pdf(self, x: Any) -> Array:
        return self.evaluate(x)

    def logpdf(self, x: Any) -> Array:
        """The log density, computed in log space (no underflow far out)."""
        return self._log_kernel_sums(self._points(x, "logpdf"))

    # --- integrals ---------------------------------------------------------------------
    def integrate_gaussian(self, mean: Any, cov: Any) -> Array:
        """The integral of the density times the Gaussian ``N(mean, cov)``."""
        m = jnp.atleast_1d(jnp.asarray(mean, dtype=self.dataset.dtype))
        c = jnp.atleast_2d(jnp.asarray(cov, dtype=self.dataset.dtype))
        if m.shape != (self.d,) or c.shape != (self.d, self.d):
            raise ValueError(f"{_FUN}.integrate_gaussian: mean must have shape ({self.d},) and "
                             f"cov ({self.d}, {self.d}), got {m.shape} and {c.shape}")
        total = self.covariance + c
        diff = self.dataset - m[:, None]
        solved = jnp.linalg.solve(total, diff)
        _, logdet = jnp.linalg.slogdet(2 * math.pi * total)
        log_values = -0.5 * jnp.sum(diff * solved, axis=0) - 0.5 * logdet
        return jnp.sum(self.weights * jnp.exp(log_values))

    def integrate_box_1d(self, low: Any, high: Any) -> Array:
        """The probability mass in ``[low, high]`` (1-D data only)."""
        if self.d != 1:
            raise ValueError(f"{_FUN}.integrate_box_1d: the data must be 1-D, it has "
                             f"{self.d} dimensions")
        sigma = jnp.sqrt(self.covariance[0, 0])
        lo = special.ndtr((low - self.dataset[0]) / sigma)
        hi = special.ndtr((high - self.dataset[0]) / sigma)
        return jnp.sum(self.weights * (hi - lo))

    def integrate_kde(self, other: gaussian_kde) -> Array:
        """The integral of the product of two estimates of equal dimension."""
        if other.d != self.d:
            raise ValueError(f"{_FUN}.integrate_kde: other has dimension {other.d}, this "
                             f"estimate {self.d}")
        total = self.covariance + other.covariance
        diff = self.dataset[:, :, None] - other.dataset[:, None, :]  # (d, n, k)
        inv = jnp.linalg.inv(total)
        mahalanobis = jnp.einsum("ink,ij,jnk->nk", diff, inv, diff)
        _, logdet = jnp.linalg.slogdet(2 * math.pi * total)
        values = jnp.exp(-0.5 * mahalanobis - 0.5 * logdet)
        return jnp.sum(self.weights[:, None] * other.weights[None, :] * values)

    # --- sampling ----------------------------------------------------------------------
    def resample(self, key: Any, shape: tuple[int, ...] = ()) -> Array:
        """Draws from the estimate, shape ``(d,) + shape``: data points picked by
        weight, plus kernel noise (JAX's algorithm, so JAX's numbers)."""
        index_key, noise_key = random.split(key)
        index = random.choice(index_key, self.n, shape=shape, p=self.weights)
        noise = random.multivariate_normal(noise_key, jnp.zeros(self.d, self.covariance.dtype),
                                           self.covariance, shape=shape,
                                           dtype=self.dataset.dtype)
        return self.dataset[:, index] + jnp.moveaxis(noise, -1, 0)
