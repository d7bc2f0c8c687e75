"""random_gamma_p: gamma's one primitive (as JAX's), bound with typed or raw
keys, its batching over keys and parameters, its JVP and its argument checks;
the expected values are JAX 0.10.2's."""

from __future__ import annotations

import numpy as np
import pytest

import lamina
from lamina import random


def test_gamma_traces_to_one_primitive() -> None:
    text = str(lamina.make_jaxpr(lambda k, a: random.gamma(k, a, (3,)))(random.key(0), 2.0))
    assert "random_gamma[impl=threefry2x32 log_space=False]" in text
    assert "while" not in text


def test_bind_with_typed_and_raw_keys_gives_jax_bits() -> None:
    a = np.full((4,), 2.0, np.float32)
    want = np.float32([1.5897877, 1.7599413, 1.1290071, 3.974334])
    np.testing.assert_allclose(random.random_gamma_p.bind(random.key(0), a, log_space=False),
                               want, rtol=1e-6)
    np.testing.assert_allclose(random.random_gamma_p.bind(random.PRNGKey(0), a,
                                                          log_space=False), want, rtol=1e-6)
    rbg = random.random_gamma_p.bind(random.key(0, impl="rbg"), a, log_space=False)
    np.testing.assert_allclose(rbg, [2.0929787, 1.0070164, 1.1323421, 3.08524], rtol=1e-6)


def test_vmap_over_keys_and_parameters_and_gradient() -> None:
    keys = random.split(random.key(0), 3)
    out = lamina.vmap(lambda k, a: random.gamma(k, a, (2,)))(keys, np.float32([1, 2, 3]))
    np.testing.assert_allclose(out, [[0.6031933, 0.14317222], [3.9326215, 0.281124],
                                     [3.189435, 3.4613314]], rtol=1e-6)
    grad = lamina.grad(lambda a: random.gamma(random.key(0), a, (3,)).sum())(2.0)
    np.testing.assert_allclose(grad, 2.7869484, rtol=1e-5)


def test_bad_keys_are_refused() -> None:
    with pytest.raises(TypeError, match="random_gamma: keys must be threefry2x32 key data"):
        random.random_gamma_p.bind(np.zeros((3,), np.uint32), np.float32(1.0), log_space=False)
    with pytest.raises(TypeError, match="random_gamma: a must be floating"):
        random.random_gamma_p.bind(random.PRNGKey(0), np.int32(1), log_space=False)
