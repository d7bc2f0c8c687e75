"""JAX 0.10.2's sampler modes: ``gumbel(mode='low'|'high'|'highest')``,
``bernoulli(mode='high')``, ``categorical(replace=False, mode=...)``,
``choice(mode=...)`` and the ``jax_high_dynamic_range_gumbel`` setting. The
expected values are JAX's, recorded from it (key 3)."""

import lamina as lx
import lamina.numpy as jnp
import numpy as np
import pytest
from lamina import random

GUMBEL = {
    "low": [-0.9566569328308105, 2.7511956691741943, 0.8384301662445068, 3.7017173767089844,
            -0.24590350687503815],
    "high": [2.5647568702697754, -1.0235120058059692, -0.045782435685396194,
             -1.3121182918548584, 1.1200804710388184],
    "highest": [2.5647566318511963, -1.023512363433838, -0.04578254744410515,
                -1.312118411064148, 1.1200802326202393],
}


@pytest.mark.parametrize("mode", sorted(GUMBEL))
def test_gumbel_modes_give_jax_bits(mode):
    key = random.key(3)
    for out in (random.gumbel(key, (5,), mode=mode),
                lx.jit(lambda k: random.gumbel(k, (5,), mode=mode))(key)):
        np.testing.assert_array_equal(np.asarray(out), np.asarray(GUMBEL[mode], np.float32))


def test_the_setting_chooses_the_default_mode():
    key = random.key(3)
    with _updated("jax_high_dynamic_range_gumbel", True):
        np.testing.assert_array_equal(np.asarray(random.gumbel(key, (5,))),
                                      np.asarray(GUMBEL["high"], np.float32))
    np.testing.assert_array_equal(np.asarray(random.gumbel(key, (5,))),
                                  np.asarray(GUMBEL["low"], np.float32))


class _updated:
    def __init__(self, name, value):
        self.name, self.value = name, value

    def __enter__(self):
        self.old = getattr(lx.config, self.name)
        lx.config.update(self.name, self.value)

    def __exit__(self, *exc):
        lx.config.update(self.name, self.old)


def test_other_samplers_modes():
    key = random.key(3)
    assert random.bernoulli(key, jnp.array([0.1, 0.5, 0.9]), mode="high").tolist() == \
        [True, False, True]
    assert int(random.bernoulli(key, 1e-3, (20000,), mode="high").sum()) == 31
    assert random.categorical(key, jnp.log(jnp.arange(1.0, 11.0)), shape=(4,),
                              replace=False).tolist() == [3, 1, 5, 7]
    assert random.categorical(key, jnp.zeros((3, 10)), axis=1, shape=(2, 3),
                              replace=False).tolist() == [[3, 4, 3], [1, 8, 7]]
    assert random.categorical(key, jnp.zeros((3, 10)), mode="high").tolist() == [0, 5, 1]
    assert random.choice(key, 10, (4,), replace=False, p=jnp.arange(1.0, 11.0) / 55,
                         mode="high").tolist() == [9, 6, 8, 7]


def test_bad_modes_are_jax_errors():
    key = random.key(3)
    with pytest.raises(ValueError, match="Must provide valid mode for gumbel got: x"):
        random.gumbel(key, (3,), mode="x")
    with pytest.raises(ValueError, match="got mode='x', expected 'high' or 'low'"):
        random.bernoulli(key, 0.5, mode="x")
    with pytest.raises(ValueError, match=r"Number of samples without replacement \(6\) cannot "
                                         r"exceed number of categories \(5\)\."):
        random.categorical(key, jnp.zeros((5,)), shape=(6,), replace=False)
