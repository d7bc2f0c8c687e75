"""``threefry_partitionable(False)``: JAX's original, non-partitionable
Threefry scheme for ``split`` and the random bits (so every sampler).
Values recorded from JAX 0.10.2 with ``jax_threefry_partitionable`` False."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import lamina as lx
import numpy as np
import pytest
from lamina import random


@pytest.fixture(autouse=True)
def _original_scheme() -> Iterator[None]:
    lx.config.update("jax_threefry_partitionable", False)
    yield
    lx.config.update("jax_threefry_partitionable", True)


def _data(keys: Any) -> Any:
    return random.key_data(keys).tolist()


def test_split_and_fold_in() -> None:
    k = random.key(42)
    assert lx.config.jax_threefry_partitionable is False
    assert _data(random.split(k)) == [[2465931498, 3679230171], [255383827, 267815257]]
    assert _data(random.split(k, 3)) == [[3134548294, 3733159049], [3746501087, 894150801],
                                         [801545058, 2363201431]]
    assert _data(random.split(k, (2, 3))) == [
        [[2768684296, 515161807], [1303553849, 4184444755], [416959680, 1163211924]],
        [[3055579793, 2323374536], [871308580, 1523113029], [1252189920, 1179259758]]]
    # fold_in is the same under both schemes
    assert _data(random.fold_in(k, 7)) == [2547012911, 1371500959]
    assert random.split(random.PRNGKey(0)).tolist() == [[4146024105, 967050713],
                                                         [2718843009, 1272950319]]


BITS = {
    ("uint8", ()): 143, ("uint8", (3,)): [143, 4, 62],
    ("uint8", (5,)): [45, 179, 215, 3, 244],
    ("uint8", (2, 3)): [[45, 179, 215], [3, 244, 131]],
    ("uint8", (7,)): [45, 179, 215, 3, 244, 131, 208],
    ("uint16", ()): 1167, ("uint16", (3,)): [45869, 983, 33780],
    ("uint16", (5,)): [8426, 37627, 63599, 6563, 55571],
    ("uint16", (2, 3)): [[8426, 37627, 63599], [6563, 55571, 3896]],
    ("uint16", (7,)): [8426, 37627, 39131, 56140, 55571, 3896, 35161],
    ("uint32", ()): 1832780943, ("uint32", (3,)): [2465931498, 430176367, 255383827],
    ("uint32", (5,)): [3134548294, 3733159049, 843694964, 894150801, 801545058],
    ("uint32", (2, 3)): [[3134548294, 3733159049, 3746501087],
                         [894150801, 801545058, 2363201431]],
    ("uint32", (7,)): [2954079971, 2575172198, 1139032965, 1681094280, 3276725750, 1223413151,
                       173471767],
}


@pytest.mark.parametrize("dtype,shape", sorted(BITS, key=str))
def test_bits(dtype: str, shape: tuple[int, ...]) -> None:
    out = random.bits(random.key(42), shape, dtype)
    assert out.dtype == np.dtype(dtype) and out.shape == shape
    assert out.tolist() == BITS[dtype, shape]


def test_bits_empty_shape() -> None:
    assert random.bits(random.key(42), (0, 3), "uint8").shape == (0, 3)


def test_uniform_and_normal() -> None:
    k = random.key(42)
    np.testing.assert_allclose(
        random.uniform(k, (5,)),
        [0.7298188209533691, 0.8691937923431396, 0.19643795490264893, 0.20818567276000977,
         0.1866241693496704], rtol=1e-7)
    np.testing.assert_allclose(random.normal(k, (3,)),
                               [0.18693546950817108, -1.2806504964828491, -1.559313178062439],
                               rtol=1e-6)


def test_64_bit_values() -> None:
    k = random.key(42)
    with lx.enable_x64(True):
        assert random.bits(k, (3,), "uint64").tolist() == [
            13462782411356743825, 16033796027023006562, 16091099645456652183]
        assert random.bits(k, (1,), "uint64").tolist() == [276886910877598708]
        np.testing.assert_allclose(random.uniform(k, (3,), "float64"),
                                   [0.7298188969046309, 0.8691938242843895, 0.8723002596642415],
                                   rtol=1e-15)


def test_rbg_keys_split_by_the_original_scheme() -> None:
    k = random.key(1, impl="rbg")
    assert _data(random.split(k, 3)) == [
        [3568232559, 713140391, 3568232559, 713140391],
        [3620866055, 2761185182, 3620866055, 2761185182],
        [2442350529, 2639019713, 2442350529, 2639019713]]
    assert _data(random.fold_in(k, 5)) == [3243370355, 1313272271, 3243370355, 1313272271]


def test_jit_retraces_when_the_setting_changes() -> None:
    f = lx.jit(lambda k: random.bits(k, (3,)))
    k = random.key(42)
    assert f(k).tolist() == [2465931498, 430176367, 255383827]
    with lx.threefry_partitionable(True):
        assert lx.config.jax_threefry_partitionable is True
        assert _data(random.split(k)) == [[1832780943, 270669613], [64467757, 2916123636]]
        assert f(k).tolist() == [2098992034, 2919706841, 2646866425]
    assert f(k).tolist() == [2465931498, 430176367, 255383827]
