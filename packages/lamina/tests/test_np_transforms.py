"""lamina.numpy under transformations: grad, vmap, jvp, make_jaxpr (and jit once
lamina.jit exists)."""

from __future__ import annotations

import numpy as np
import pytest
from lamina_tracing_core import api

import lamina.numpy as jnp

X = np.array([0.3, -1.2, 2.0, 0.7], np.float32)
M = np.arange(12, dtype=np.float32).reshape(3, 4) / 7 - 0.5


def check(actual, expected, rtol=1e-5, atol=1e-6):
    np.testing.assert_allclose(np.asarray(actual), np.asarray(expected), rtol=rtol, atol=atol)


def numerical_grad(f, x, eps=1e-3):
    x = np.asarray(x, np.float64)
    g = np.zeros_like(x)
    for i in np.ndindex(x.shape):
        up, down = x.copy(), x.copy()
        up[i] += eps
        down[i] -= eps
        g[i] = (float(f(up.astype(np.float32))) - float(f(down.astype(np.float32)))) / (2 * eps)
    return g


GRAD_CASES = [
    ("sum_sin", lambda x: jnp.sum(jnp.sin(x) * x)),
    ("logaddexp", lambda x: jnp.sum(jnp.logaddexp(x, 0.5))),
    ("hypot", lambda x: jnp.sum(jnp.hypot(x, 1.5))),
    ("mean_var", lambda x: jnp.mean(x) + jnp.var(x)),
    ("std", lambda x: jnp.std(x)),
    ("max", lambda x: jnp.max(x * 2)),
    ("prod", lambda x: jnp.prod(x)),
    ("cumsum", lambda x: jnp.sum(jnp.cumsum(x) ** 2)),
    ("sort", lambda x: jnp.sum(jnp.sort(x) * jnp.arange(4.0))),
    ("take", lambda x: jnp.sum(jnp.take(x, np.array([0, 0, 3])) ** 2)),
    ("where", lambda x: jnp.sum(jnp.where(x > 0, x ** 2, -x))),
    ("clip", lambda x: jnp.sum(jnp.clip(x, -1.0, 1.0) * x)),
    ("dot", lambda x: jnp.dot(x, x)),
    ("einsum", lambda x: jnp.einsum("i,j,ij->", x, x, np.ones((4, 4), np.float32))),
    ("norm", lambda x: jnp.linalg.norm(x)),
    ("roll_pad", lambda x: jnp.sum(jnp.pad(jnp.roll(x, 1), 2, mode="reflect") ** 2)),
    ("median", lambda x: jnp.median(x)),
    ("interp", lambda x: jnp.sum(jnp.interp(x, np.array([-2.0, 0.0, 3.0]),
                                             np.array([1.0, -1.0, 2.0])))),
    ("sinc", lambda x: jnp.sum(jnp.sinc(x))),
    ("linspace", lambda x: jnp.sum(jnp.linspace(x[0], x[2], 5) ** 2)),
    ("tile_repeat", lambda x: jnp.sum(jnp.tile(x, 2) * jnp.repeat(x, 2))),
    ("convolve", lambda x: jnp.sum(jnp.convolve(x, np.array([1.0, -2.0, 0.5])) ** 2)),
    ("diagonal", lambda x: jnp.trace(jnp.outer(x, x) + jnp.diag(x))),
]


@pytest.mark.parametrize("name,f", GRAD_CASES, ids=[n for n, _ in GRAD_CASES])
def test_grad_matches_finite_differences(name, f):
    check(api.grad(f)(X), numerical_grad(f, X), rtol=2e-2, atol=2e-2)


def test_grad_at_special_points_matches_jax():
    check(api.grad(jnp.sinc)(0.0), 0.0)
    check(api.grad(lambda x: jnp.sum(jnp.nan_to_num(x)))(X), np.ones(4))
    check(api.grad(lambda x: jnp.copysign(x, -1.0))(2.0), -1.0)
    check(api.grad(lambda x: jnp.logaddexp(x, x))(1.0), 1.0)
    check(api.grad(lambda x: jnp.logaddexp(x, 0.0))(-np.inf), 0.0)
    check(api.grad(lambda x: jnp.maximum(x, 1.0))(1.0), 0.5)
    check(api.grad(jnp.max)(np.array([1.0, 3.0, 3.0], np.float32)), [0.0, 0.5, 0.5])
    exponents = np.array([2, 3, 0, 1], np.int32)
    check(api.grad(lambda x: jnp.sum(jnp.power(x, exponents)))(np.array([0.0, 1.0, 2.0, 0.0],
                                                                         np.float32)),
          [0.0, 3.0, 0.0, 1.0])


def test_vmap_of_numpy_functions():
    check(api.vmap(jnp.sum)(M), M.sum(1))
    check(api.vmap(lambda r: jnp.dot(r, r))(M), (M * M).sum(1))
    check(api.vmap(jnp.sort)(M[:, ::-1]), np.sort(M[:, ::-1], axis=1))
    check(api.vmap(lambda r: jnp.take(r, np.array([3, 0])))(M), M[:, [3, 0]])
    check(api.vmap(lambda r, s: jnp.roll(r, s))(M, np.array([1, 2, 3], np.int32)),
          np.stack([np.roll(M[i], s) for i, s in enumerate([1, 2, 3])]))
    check(api.vmap(jnp.matmul, in_axes=(0, None))(np.stack([M, M]), M[0]),
          np.stack([M @ M[0]] * 2))
    check(api.vmap(lambda r: jnp.einsum("i,i->", r, r))(M), (M * M).sum(1))
    check(api.vmap(lambda r: jnp.cumsum(r))(M), np.cumsum(M, axis=1))
    check(api.vmap(lambda r: jnp.where(r > 0, r, 0.0))(M), np.where(M > 0, M, 0))
    check(api.vmap(lambda r: jnp.linalg.norm(r, 1))(M), np.abs(M).sum(1))
    check(api.vmap(lambda r: jnp.searchsorted(jnp.sort(r), 0.0))(M),
          [np.searchsorted(np.sort(r), 0.0) for r in M])


def test_jvp_and_weak_types_in_jaxprs():
    primal, tangent = api.jvp(lambda x: jnp.exp(x) * 2.0, (X,), (np.ones(4, np.float32),))
    check(primal, np.exp(X) * 2)
    check(tangent, np.exp(X) * 2, rtol=1e-5)
    jaxpr = api.make_jaxpr(lambda x: jnp.add(x, 1.0))(np.ones(3, np.float16))
    assert "f16[3]" in str(jaxpr) and "f32" not in str(jaxpr)
    jaxpr = api.make_jaxpr(lambda x: jnp.add(x, np.ones(3, np.float32)))(1.0)
    assert "convert_element_type" in str(jaxpr)


def test_under_jit():
    import lamina
    f = lamina.jit(lambda x: jnp.sum(jnp.sort(x) * jnp.linspace(0, 1, 4)))
    check(f(X), np.sum(np.sort(X) * np.linspace(0, 1, 4)))
    g = lamina.jit(lambda m: jnp.einsum("ij,kj->ik", m, m))
    check(g(M), M @ M.T, rtol=1e-4)
    # Host constants become constants of the compiled program.
    h = lamina.jit(lambda t: jnp.array([t, 2.0]) + jnp.asarray(np.arange(2.0)))
    check(h(1.0), [1.0, 3.0])
    # Value-dependent shapes need size= under jit.
    nz = lamina.jit(lambda v: jnp.nonzero(v > 0, size=3, fill_value=-1)[0])
    check(nz(X), [0, 2, 3])
    uq = lamina.jit(lambda v: jnp.unique(v, size=4, fill_value=0))
    check(uq(np.array([3, 1, 3, 2], np.int32)), [1, 2, 3, 0])
    seen = []
    lamina.jit(lambda t: seen.append(isinstance(t, jnp.ndarray)) or t)(X)
    assert seen == [True]
    with pytest.raises(Exception, match="nonzero"):
        lamina.jit(jnp.nonzero)(X)


def _kind(x):
    return str(x.dtype), bool(x.weak_type)


def test_derivatives_keep_weak_types_as_jax():
    """A weakly typed input's gradient is weakly typed (it promotes like the
    input did); values checked against JAX 0.10."""
    import lamina as lx

    assert _kind(lx.grad(lambda x: x * 3)(2.)) == ("float32", True)
    assert _kind(lx.grad(lx.jit(lambda x, i: x * i))(2., 3)) == ("float32", True)
    assert _kind(lx.grad(lambda x: x * 3)(jnp.float32(2.))) == ("float32", False)
    # the weak gradient defers to a float16 operand, as the input would
    assert (lx.grad(lambda x: x * 3)(2.) + np.float16(1)).dtype == np.float16
    assert _kind(lx.jvp(lambda x: x * 3, (2.,), (1.,))[1]) == ("float32", True)
    assert _kind(lx.vjp(lambda x: x * 3, 2.)[1](1.)[0]) == ("float32", True)
    assert _kind(lx.jacfwd(lambda x: x * 3)(2.)) == ("float32", True)
    assert _kind(lx.jacrev(lambda x: x * 3)(2.)) == ("float32", True)
    assert _kind(lx.hessian(lambda x: x ** 3)(2.)) == ("float32", True)
    # a rule's constants follow the operand's weak type (x ** 2's 2 * x)
    assert _kind(lx.grad(lambda x: jnp.sin(x) ** 2)(1.)) == ("float32", True)
    assert _kind(lx.grad(lx.checkpoint(lambda x: x ** 2))(1.)) == ("float32", True)
    assert _kind(lx.grad(lambda x: x ** 2)(jnp.float32(1.))) == ("float32", False)
    # JAX's pow rule converts both operands strongly: a float power is strong
    sqrt_like = lx.grad(lambda x: x ** 0.5)(4.)
    assert _kind(sqrt_like) == ("float32", False) and float(sqrt_like) == 0.25
    loop = lx.grad(lambda x: lx.lax.fori_loop(0, 3, lambda i, c: c * 2., x))(2.)
    assert _kind(loop) == ("float32", True) and float(loop) == 8.0


def test_jacobians_of_mixed_dtypes_as_jax():
    """Each input's basis is in its own dtype, and each Jacobian block takes
    the dtype of its output (jacfwd) or input (jacrev)."""
    import lamina as lx

    a = jnp.array([1., 2.], jnp.float16)
    b = jnp.array([3., 4., 5.], jnp.float32)

    def f(x, y):
        return x.astype(jnp.float32).sum() * y, x * 2

    fwd = lx.jacfwd(f, argnums=(0, 1))(a, b)
    rev = lx.jacrev(f, argnums=(0, 1))(a, b)
    assert [[str(j.dtype) for j in row] for row in fwd] == [["float32", "float32"],
                                                           ["float16", "float16"]]
    assert [[str(j.dtype) for j in row] for row in rev] == [["float16", "float32"],
                                                           ["float16", "float32"]]
    check(fwd[0][0], [[3., 3.], [4., 4.], [5., 5.]])
    check(rev[1][0], [[2., 0.], [0., 2.]])
    check(rev[1][1], np.zeros((2, 3)))


def test_grad_always_returns_arrays_as_jax():
    """A gradient that is still a host value (the seed passed through, a
    custom VJP's output, zeros) comes back as a device array, weak type
    kept; vjp's pullback returns what it computed, as JAX's does."""
    import lamina as lx

    Array = lx.Array
    identity = lx.grad(lambda x: x)(1.)
    assert type(identity) is Array and _kind(identity) == ("float32", True)
    zero = lx.grad(lambda x: 0.)(1.)
    assert type(zero) is Array and float(zero) == 0.0 and _kind(zero) == ("float32", True)

    @lx.custom_vjp
    def f(x):
        return x * 2

    f.defvjp(lambda x: (f(x), None), lambda r, g: (g * 10,))
    custom = lx.grad(f)(1.)
    assert type(custom) is Array and float(custom) == 10.0
    assert lx.vjp(lambda x: x, 1.)[1](1.) == (1.0,)
    scan = lx.grad(lambda x: lx.lax.scan(lambda c, _: (c * x, None), 1., None, length=3)[0])(2.)
    assert _kind(scan) == ("float32", True) and float(scan) == 12.0
