"""Eager ``mean`` and ``var`` give JAX's bits: JAX jits them, so XLA's fused
division by the count decides the last bit, and lamina runs them as one
compiled program too (``compiled_when_eager``). The expected bits were
recorded from JAX 0.10.2 (JAX's Gaussian-process example centres its data
with an eager ``jnp.mean``)."""

from __future__ import annotations

import lamina
import lamina.numpy as jnp
import numpy as np

#: JAX 0.10.2, per array: mean, mean(axis=0), var, var(axis=0, ddof=1),
#: std(keepdims=True), as uint32 bits
JAX_BITS = [[1065621903], [1065621903], [1065522725], [1066949078], [1065437547],
            [1041923772], [1041923428, 3192210687, 1056776682], [1063055333],
            [1060766356, 1074472539, 1025905488], [1064161984],
            [1082941878], [1082941878], [1087408112], [1087835184], [1076060276]]

#: seven values whose eager mean, divided op by op, is one bit below JAX's
GP_DATA = [3210063146, 3209098140, 1060028108, 1048773934, 3186988658, 1063652574, 1060895559]


def _bits(x: object) -> list[int]:
    return np.asarray(x, np.float32).ravel().view(np.uint32).tolist()


def test_eager_mean_var_std_have_jax_bits() -> None:
    rs = np.random.RandomState(0)
    xs = [rs.randn(7, 1).astype(np.float32), rs.randn(5, 3).astype(np.float32),
          (rs.rand(33) * 10).astype(np.float32)]
    got = []
    for x in xs:
        got += [_bits(f(x)) for f in (jnp.mean, lambda x: jnp.mean(x, axis=0), jnp.var,
                                      lambda x: jnp.var(x, axis=0, ddof=1),
                                      lambda x: jnp.std(x, keepdims=True))]
    assert got == JAX_BITS


def test_eager_mean_equals_jitted_mean() -> None:
    y = np.array(GP_DATA, np.uint32).view(np.float32).reshape(7, 1)
    assert _bits(jnp.mean(y)) == _bits(lamina.jit(jnp.mean)(y)) == [1039510369]
    # the reductions still check their arguments before compiling
    for bad in (lambda: jnp.mean(y, axis=2), lambda: jnp.var(y, axis=(0, 0))):
        try:
            bad()
        except ValueError as e:
            assert "lamina.numpy" in str(e) and "axis" in str(e)
        else:
            raise AssertionError("a bad axis was accepted")
