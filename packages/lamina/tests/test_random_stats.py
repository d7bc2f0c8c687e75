"""lamina.random distributions have the right statistics (10k draws each)."""

from __future__ import annotations

import math

import numpy as np

import lamina.numpy as jnp
import lamina.random as random

N = 10_000
KEYS = np.asarray(random.split(random.PRNGKey(2024), 8))


def sample(x):
    return np.asarray(x, np.float64)


def assert_uniform_01(u):
    assert u.min() >= 0.0 and u.max() < 1.0
    # Kolmogorov-Smirnov distance to U(0, 1); 1.63/sqrt(N) is the 1% critical value.
    ordered = np.sort(u)
    grid = np.arange(1, len(u) + 1) / len(u)
    assert np.max(np.abs(ordered - grid)) < 1.63 / math.sqrt(len(u))


def test_uniform_and_normal_moments():
    u = sample(random.uniform(KEYS[0], (N,)))
    assert_uniform_01(u)
    assert abs(u.mean() - 0.5) < 0.01 and abs(u.var() - 1 / 12) < 0.005
    z = sample(random.normal(KEYS[1], (N,)))
    assert abs(z.mean()) < 0.04 and abs(z.var() - 1) < 0.05
    assert abs(np.mean(z ** 3)) < 0.1  # symmetric
    scaled = sample(random.uniform(KEYS[2], (N,), minval=-3.0, maxval=5.0))
    assert scaled.min() >= -3 and scaled.max() < 5 and abs(scaled.mean() - 1) < 0.1


def test_truncated_and_other_continuous():
    t = sample(random.truncated_normal(KEYS[3], -1.0, 2.0, (N,)))
    assert t.min() > -1 and t.max() < 2
    # The mean of N(0,1) truncated to (a, b) is (phi(a) - phi(b)) / (Phi(b) - Phi(a)).
    phi = lambda v: math.exp(-v * v / 2) / math.sqrt(2 * math.pi)  # noqa: E731
    cdf = lambda v: 0.5 * (1 + math.erf(v / math.sqrt(2)))  # noqa: E731
    assert abs(t.mean() - (phi(-1) - phi(2)) / (cdf(2) - cdf(-1))) < 0.03
    e = sample(random.exponential(KEYS[4], (N,)))
    assert e.min() >= 0 and abs(e.mean() - 1) < 0.04
    g = sample(random.gumbel(KEYS[5], (N,)))
    assert abs(g.mean() - 0.5772156649) < 0.04


def test_integers_and_booleans():
    r = np.asarray(random.randint(KEYS[6], (N,), 3, 13))
    assert r.min() == 3 and r.max() == 12
    counts = np.bincount(r - 3, minlength=10)
    chi2 = np.sum((counts - N / 10) ** 2 / (N / 10))
    assert chi2 < 27.9  # chi-square, 9 degrees of freedom, p = 0.001
    b = np.asarray(random.bernoulli(KEYS[7], 0.3, (N,)))
    assert b.dtype == np.bool_ and abs(b.mean() - 0.3) < 0.02
    bits = np.asarray(random.bits(KEYS[0], (N,)))
    # Every bit position is set about half of the time.
    ones = np.array([(bits >> i) & 1 for i in range(32)]).mean(axis=1)
    assert np.all(np.abs(ones - 0.5) < 0.03)
    small = np.asarray(random.randint(KEYS[1], (N,), 0, 256, jnp.uint8))
    assert small.dtype == np.uint8 and small.max() > 250


def test_categorical_choice_permutation():
    logits = np.log(np.array([0.2, 0.5, 0.3], np.float32))
    c = np.asarray(random.categorical(KEYS[2], logits, shape=(N,)))
    freq = np.bincount(c, minlength=3) / N
    np.testing.assert_allclose(freq, [0.2, 0.5, 0.3], atol=0.02)
    p = np.array([0.1, 0.6, 0.3], np.float32)
    draws = np.asarray(random.choice(KEYS[3], 3, (N,), p=p))
    np.testing.assert_allclose(np.bincount(draws, minlength=3) / N, p, atol=0.02)
    perm = np.asarray(random.permutation(KEYS[4], 1000))
    assert sorted(perm.tolist()) == list(range(1000))
    assert not np.array_equal(perm, np.arange(1000))
    sample_ = np.asarray(random.choice(KEYS[5], 50, (50,), replace=False))
    assert sorted(sample_.tolist()) == list(range(50))


def test_split_keys_are_independent():
    keys = random.split(random.PRNGKey(0), 4)
    draws = [sample(random.normal(keys[i], (2000,))) for i in range(4)]
    corr = np.corrcoef(np.stack(draws))
    assert np.all(np.abs(corr[np.triu_indices(4, 1)]) < 0.1)
    assert len({tuple(np.asarray(k).tolist()) for k in keys}) == 4
