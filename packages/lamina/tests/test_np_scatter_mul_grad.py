"""Derivatives of ``x.at[idx].multiply(v)`` (scatter-mul) with respect to
``x`` and ``v``: JAX's values where JAX computes them (indices inferred
unique for ints and slices, as JAX does), and correct values for repeated
indices, including zero updates, under jit and vmap."""

from __future__ import annotations

import numpy as np

import lamina
import lamina.numpy as jnp
from lamina import lax

X = jnp.array([1., 2., 3., 4., 5.])


def close(actual, expected) -> None:
    actual = np.asarray(actual)
    assert actual.dtype == np.float32, actual.dtype
    np.testing.assert_allclose(actual, np.asarray(expected, np.float32), rtol=1e-6)


def _scatter_mul_params(f, *args):
    eqns = [e for e in lamina.make_jaxpr(f)(*args).eqns if e.primitive is lax.scatter_mul_p]
    assert len(eqns) == 1
    return eqns[0].params


def test_basic_indices_are_unique_as_in_jax() -> None:
    v = jnp.array([2., 3., 4.])
    assert _scatter_mul_params(lambda v: X.at[::2].multiply(v), v)["unique_indices"]
    assert _scatter_mul_params(lambda v: X.at[7].multiply(v), 2.)["unique_indices"]
    m = jnp.ones((2, 3))
    assert _scatter_mul_params(lambda v: m.at[1, ::2].multiply(v), v[:2])["unique_indices"]
    # advanced (array) indices may repeat, as JAX infers
    idx = jnp.array([0, 3])
    assert not _scatter_mul_params(lambda v: X.at[idx].multiply(v), v[:2])["unique_indices"]
    assert not _scatter_mul_params(lambda v: X.at[[0, 3]].multiply(v), v[:2])["unique_indices"]
    assert _scatter_mul_params(lambda v: X.at[idx].multiply(v, unique_indices=True),
                               v[:2])["unique_indices"]


def test_gradients_match_jax_for_basic_indices() -> None:
    # values computed with JAX 0.10.2
    v3 = jnp.array([2., 3., 4.])
    close(lamina.grad(lambda v: (X.at[::2].multiply(v) ** 2).sum())(v3), [4., 54., 200.])
    gx, gv = lamina.grad(lambda x, v: (x.at[::2].multiply(v) ** 2).sum(), (0, 1))(X, v3)
    close(gx, [8., 4., 54., 8., 160.])
    close(gv, [4., 54., 200.])
    close(lamina.grad(lambda v: (X.at[::-2].multiply(v) ** 2).sum())(v3), [100., 54., 8.])
    m = jnp.arange(6.).reshape(2, 3)
    close(lamina.grad(lambda v: (m.at[1, ::2].multiply(v) ** 2).sum())(jnp.array([2., 3.])),
          [36., 150.])
    assert float(lamina.grad(lambda v: (X.at[7].multiply(v) ** 2).sum())(2.)) == 0.0


def test_jvp_vjp_jit_vmap_match_jax() -> None:
    v3 = jnp.array([2., 3., 4.])
    out, tangent = lamina.jvp(lambda x, v: x.at[::2].multiply(v), (X, v3),
                              (jnp.ones(5), jnp.array([1., 10., 100.])))
    close(out, [2., 2., 9., 4., 20.])
    close(tangent, [3., 1., 33., 1., 504.])
    _, pullback = lamina.vjp(lambda x, v: x.at[::2].multiply(v), X, v3)
    ct_x, ct_v = pullback(jnp.array([1., 2., 3., 4., 5.]))
    close(ct_x, [2., 2., 9., 4., 20.])
    close(ct_v, [1., 9., 25.])
    v2 = jnp.array([2., 3.])
    gx, gv = lamina.jit(lamina.grad(lambda x, v: (x.at[1::2].multiply(v) ** 2).sum(),
                                    (0, 1)))(X, v2)
    close(gx, [2., 16., 6., 72., 10.])
    close(gv, [16., 96.])
    per_row = lamina.vmap(lamina.grad(lambda v, x: (x.at[1::2].multiply(v) ** 2).sum()))
    close(per_row(jnp.array([[2., 3.], [4., 5.]]), jnp.stack([X, X + 1])),
          [[16., 96.], [72., 250.]])
    # unique array indices (JAX computes these too)
    close(lamina.grad(lambda v: (X.at[jnp.array([0, 3])].multiply(v) ** 2).sum())(v2),
          [4., 96.])


# x = [1, 2, 3] with idx = [0, 0, 2]: out = [x0 v0 v1, x1, x2 v2], so
# d sum(out)/dv = [x0 v1, x0 v0, x2] and d sum(out)/dx = [v0 v1, 1, v2].
Y = jnp.array([1., 2., 3.])
REPEATED = jnp.array([0, 0, 2])


def _sum_of_scatter_mul(x, v):
    return x.at[REPEATED].multiply(v).sum()


def test_repeated_indices_with_and_without_zero_updates() -> None:
    cases = [([2., 3., 4.], [3., 2., 3.], [6., 1., 4.]),
             ([0., 3., 4.], [3., 0., 3.], [0., 1., 4.]),
             ([2., 0., 4.], [0., 2., 3.], [0., 1., 4.]),
             ([0., 0., 4.], [0., 0., 3.], [0., 1., 4.])]
    grad = lamina.grad(_sum_of_scatter_mul, (0, 1))
    for v, expected_v, expected_x in cases:
        for g in (grad, lamina.jit(grad)):
            gx, gv = g(Y, jnp.array(v))
            close(gv, expected_v)
            close(gx, expected_x)


def test_repeated_indices_jvp_jacobian_hessian_vmap() -> None:
    v = jnp.array([2., 3., 4.])
    out, tangent = lamina.jvp(lambda v: Y.at[REPEATED].multiply(v), (v,),
                              (jnp.array([1., 10., 100.]),))
    close(out, [6., 2., 12.])
    close(tangent, [23., 0., 300.])  # x0 (g0 v1 + g1 v0), 0, x2 g2
    close(lamina.jacrev(lambda v: Y.at[REPEATED].multiply(v))(v),
          [[3., 2., 0.], [0., 0., 0.], [0., 0., 3.]])
    close(lamina.jacfwd(lambda v: Y.at[REPEATED].multiply(v))(v),
          [[3., 2., 0.], [0., 0., 0.], [0., 0., 3.]])
    close(lamina.hessian(lambda v: _sum_of_scatter_mul(Y, v))(v),
          [[0., 1., 0.], [1., 0., 0.], [0., 0., 0.]])
    # batched indices and updates: the second row has idx [1, 2, 2], v [5, 6, 7]
    per_row = lamina.vmap(lambda i, v: lamina.grad(lambda v: Y.at[i].multiply(v).sum())(v))
    close(per_row(jnp.array([[0, 0, 2], [1, 2, 2]]), jnp.array([[2., 3., 4.], [5., 6., 7.]])),
          [[3., 2., 3.], [2., 21., 18.]])
