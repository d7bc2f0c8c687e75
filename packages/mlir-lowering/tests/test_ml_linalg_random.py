"""dot_general, conv_general_dilated, threefry2x32 and rng_bit_generator."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from lamina_tracing_core.lax import contractions as la
from lamina_tracing_core.lax import prng
from ml_build import aval, local_prim
from ml_runner import lower_one, lower_run, run

from lamina_mlir_lowering.lax_rules.random import ROLL_BELOW, rng_bit_generator_lowering

F32 = np.float32
RNG = np.random.default_rng(3)


def _dot(lhs: np.ndarray, rhs: np.ndarray, dims: Any, preferred: Any = None,
         precision: Any = None) -> np.ndarray:
    out, = lower_run(la.dot_general_p, lhs, rhs, dimension_numbers=dims, precision=precision,
                     preferred_element_type=preferred, out_sharding=None)
    return out


def test_dot_general_matmul_batch_and_precision() -> None:
    a = RNG.normal(size=(3, 4)).astype(F32)
    b = RNG.normal(size=(4, 5)).astype(F32)
    np.testing.assert_allclose(_dot(a, b, (((1,), (0,)), ((), ()))), a @ b, rtol=1e-5)
    hp = _dot(a, b, (((1,), (0,)), ((), ())), precision=(la.Precision.HIGHEST,
                                                         la.Precision.HIGHEST))
    np.testing.assert_allclose(hp, a @ b, rtol=1e-5)
    x = RNG.normal(size=(2, 3, 4)).astype(F32)
    y = RNG.normal(size=(2, 5, 4)).astype(F32)
    out = _dot(x, y, (((2,), (2,)), ((0,), (0,))))
    np.testing.assert_allclose(out, np.einsum("bik,bjk->bij", x, y), rtol=1e-5)


def test_dot_general_integer_and_preferred_type() -> None:
    a = RNG.integers(-5, 5, (3, 4)).astype(np.int8)
    b = RNG.integers(-5, 5, (4, 2)).astype(np.int8)
    out = _dot(a, b, (((1,), (0,)), ((), ())), preferred=np.dtype(np.int32))
    assert out.dtype == np.int32
    np.testing.assert_array_equal(out, a.astype(np.int32) @ b.astype(np.int32))


def _conv_ref(lhs: np.ndarray, rhs: np.ndarray, stride: int, pad: int) -> np.ndarray:
    # NCHW x OIHW -> NCHW, direct loops (small sizes).
    n, c, h, w = lhs.shape
    o, _, kh, kw = rhs.shape
    x = np.pad(lhs, ((0, 0), (0, 0), (pad, pad), (pad, pad)))
    oh = (h + 2 * pad - kh) // stride + 1
    ow = (w + 2 * pad - kw) // stride + 1
    out = np.zeros((n, o, oh, ow), np.float64)
    for i in range(oh):
        for j in range(ow):
            patch = x[:, :, i * stride:i * stride + kh, j * stride:j * stride + kw]
            out[:, :, i, j] = np.einsum("nchw,ochw->no", patch, rhs)
    return out


@pytest.mark.parametrize("stride,pad", [(1, 0), (2, 1)])
def test_conv_general_dilated(stride: int, pad: int) -> None:
    lhs = RNG.normal(size=(2, 3, 6, 5)).astype(F32)
    rhs = RNG.normal(size=(4, 3, 3, 2)).astype(F32)
    dn = la.ConvDimensionNumbers(lhs_spec=(0, 1, 2, 3), rhs_spec=(0, 1, 2, 3),
                                 out_spec=(0, 1, 2, 3))
    out, = lower_run(la.conv_general_dilated_p, lhs, rhs, window_strides=(stride, stride),
                     padding=((pad, pad), (pad, pad)), lhs_dilation=(1, 1), rhs_dilation=(1, 1),
                     dimension_numbers=dn, feature_group_count=1, batch_group_count=1,
                     precision=None, preferred_element_type=None, out_sharding=None)
    np.testing.assert_allclose(out, _conv_ref(lhs, rhs, stride, pad), rtol=1e-4, atol=1e-5)


# Known-answer vectors of Threefry-2x32 with 20 rounds (Random123's kat_vectors).
KAT = [
    ((0x00000000, 0x00000000), (0x00000000, 0x00000000), (0x6B200159, 0x99BA4EFE)),
    ((0xFFFFFFFF, 0xFFFFFFFF), (0xFFFFFFFF, 0xFFFFFFFF), (0x1CB996FC, 0xBB002BE7)),
    ((0x13198A2E, 0x03707344), (0x243F6A88, 0x85A308D3), (0xC4923A9C, 0x483DF7A0)),
]


def test_threefry2x32_known_answers() -> None:
    u32 = np.uint32
    k1 = np.array([k[0][0] for k in KAT], u32)
    k2 = np.array([k[0][1] for k in KAT], u32)
    x1 = np.array([k[1][0] for k in KAT], u32)
    x2 = np.array([k[1][1] for k in KAT], u32)
    y1, y2 = lower_run(prng.threefry2x32_p, k1, k2, x1, x2)
    np.testing.assert_array_equal(y1, [k[2][0] for k in KAT])
    np.testing.assert_array_equal(y2, [k[2][1] for k in KAT])


def test_threefry2x32_broadcasts_scalar_keys() -> None:
    u32 = np.uint32
    k1, k2 = np.array(0x13198A2E, u32), np.array(0x03707344, u32)
    x1 = np.array([0x243F6A88, 0], u32)
    x2 = np.array([0x85A308D3, 0], u32)
    y1, y2 = lower_run(prng.threefry2x32_p, k1, k2, x1, x2)
    assert (y1[0], y2[0]) == (0xC4923A9C, 0x483DF7A0)


def test_threefry2x32_rounds_are_a_loop_for_small_hashes_on_cpu() -> None:
    u32 = np.zeros((3,), np.uint32)
    cpu = str(lower_one(prng.threefry2x32_p, u32, u32, u32, u32).module)
    assert cpu.count("stablehlo.while") == 1
    big = np.zeros((ROLL_BELOW,), np.uint32)
    unrolled = lower_one(prng.threefry2x32_p, big, big, big, big)
    assert "stablehlo.while" not in str(unrolled.module)
    y1, y2 = run(unrolled, big, big, big, big)
    assert (y1[0], y2[0]) == tuple(lower_run(prng.threefry2x32_p, *[u32] * 4)[i][0]
                                   for i in range(2))
    gpu = str(lower_one(prng.threefry2x32_p, u32, u32, u32, u32, platforms=("cuda",)).module)
    assert "stablehlo.while" not in gpu
    assert gpu.count("stablehlo.shift_left") == 20


@pytest.mark.parametrize("dtype", [np.uint32, np.uint8, np.uint64])
def test_rng_bit_generator(dtype: Any) -> None:
    prim = local_prim("rng_bit_generator", rng_bit_generator_lowering, multiple_results=True)
    key = np.array([1, 2, 3, 4], np.uint32)
    kwargs = dict(shape=(3, 5), dtype=np.dtype(dtype), algorithm=1, out_sharding=None)
    out_avals = [aval((4,), np.uint32), aval((3, 5), dtype)]
    new_key, bits = lower_run(prim, key, out_avals=out_avals, **kwargs)
    again_key, again_bits = lower_run(prim, key, out_avals=out_avals, **kwargs)
    assert bits.shape == (3, 5) and bits.dtype == np.dtype(dtype)
    np.testing.assert_array_equal(bits, again_bits)     # deterministic in the key
    assert not np.array_equal(new_key, key)
    assert len(np.unique(bits)) > 5
    text = lower_one(prim, key, out_avals=out_avals, **kwargs).as_text()
    assert "rng_bit_generator" in text and "THREE_FRY" in text
