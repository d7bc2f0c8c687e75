"""Eager ``linspace`` gives JAX's bits: JAX jits it, so XLA's fused arithmetic
decides the last bits, and lamina runs it as one compiled program too
(``compiled_when_eager``). The expected bits were recorded from JAX 0.10.2."""

from __future__ import annotations

import lamina as lx
import lamina.numpy as jnp
import numpy as np

#: JAX 0.10.2: np.asarray(jnp.linspace(-3, 3, 64)).view(np.uint32)
JAX_LINSPACE_M3_3_64 = [3225419776, 3225020318, 3224620860, 3224221404, 3223821946, 3223422488, 3223023031, 3222623574, 3222224116, 3221824658, 3221425200, 3220826015, 3220027099, 3219228184, 3218429270, 3217630353, 3216831439, 3216032521, 3215233608, 3214434692, 3213635779, 3212836860, 3211239033, 3209641200, 3208043369, 3206445540, 3204847711, 3202051503, 3198855841, 3195260718, 3188869401, 3175287794, 1027804288, 1041385780, 1047777097, 1051372211, 1054567873, 1057364070, 1058961899, 1060559730, 1062157561, 1063755390, 1065353218, 1066152133, 1066951048, 1067749963, 1068548878, 1069347793, 1070146710, 1070945625, 1071744540, 1072543455, 1073342370, 1073941555, 1074341012, 1074740470, 1075139927, 1075539385, 1075938842, 1076338300, 1076737757, 1077137215, 1077536672, 1077936128]

#: JAX 0.10.2: the sum of the uint32 bits of the 9 arrays made by _cases()
JAX_BITS_SUM = 705386105853


def _cases() -> list[np.ndarray]:
    out = []
    for a, b, n in [(-3, 3, 64), (0.1, 7.3, 101), (-1.0, 1.0, 10),
                    (np.float32(2.5), np.float32(-4.25), 33)]:
        out.append(np.asarray(jnp.linspace(a, b, n)).view(np.uint32))
        out.append(np.asarray(jnp.linspace(a, b, n, endpoint=False)).view(np.uint32))
    bounds = jnp.linspace(jnp.array([0.0, 1.0]), jnp.array([5.0, 3.0]), 7, axis=1)
    out.append(np.asarray(bounds).view(np.uint32).ravel())
    return out


def test_eager_linspace_has_jax_bits() -> None:
    cases = _cases()
    assert cases[0].tolist() == JAX_LINSPACE_M3_3_64
    assert int(np.concatenate(cases).astype(np.uint64).sum()) == JAX_BITS_SUM


def test_linspace_under_transformations_matches_and_stays_inline() -> None:
    # Inside a user's jit XLA folds or fuses the arithmetic with its
    # surroundings: JAX 0.10.2's results then differ from its eager ones in 25
    # (constant bounds) and 32 (bounds passed in) of the 64 elements; so do lamina's.
    eager = np.asarray(jnp.linspace(-3, 3, 64))
    folded = np.asarray(lx.jit(lambda: jnp.linspace(-3, 3, 64))())
    passed = np.asarray(lx.jit(lambda a: jnp.linspace(a, 3, 64))(-3))
    assert (folded != eager).sum() == 25 and (passed != eager).sum() == 32
    jaxpr = lx.make_jaxpr(lambda s: jnp.linspace(s, 3.0, 5))(1.0)
    assert "pjit" not in str(jaxpr) and "jit[" not in str(jaxpr)
    assert float(lx.grad(lambda s: jnp.linspace(s, 3.0, 5).sum())(1.0)) == 2.5
    values, step = jnp.linspace(0.0, 1.0, 5, retstep=True)
    assert float(step) == 0.25 and not values.weak_type
    np.testing.assert_array_equal(jnp.linspace(0, 10, 5, dtype=int), [0, 2, 5, 7, 10])


def test_hypot_and_polyval_have_jax_bits() -> None:
    # JAX 0.10.2 jits both; the sums of the uint32 bits of its eager results.
    rng = np.random.RandomState(0)
    x = rng.randn(7, 33).astype(np.float32) * 3
    y = rng.rand(7, 33).astype(np.float32) + 0.1
    assert int(np.asarray(jnp.hypot(x, y)).view(np.uint32).astype(np.uint64).sum()) == (
        247953249532)
    assert int(np.asarray(jnp.polyval(x[0, :5], y[0])).view(np.uint32).astype(np.uint64).sum()
               ) == 36086872519
    scalar = jnp.hypot(3, 4.0)
    assert float(scalar) == 5.0 and scalar.weak_type
    assert int(jnp.polyval(jnp.array([1, 2, 3]), 2)) == 11
