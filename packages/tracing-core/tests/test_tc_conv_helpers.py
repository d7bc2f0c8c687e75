"""Convolution helpers: conv_general_dilated_patches and
conv_general_dilated_local against loops written here, the shape tuples
against JAX 0.10's values, derivatives, vmap and errors."""

from __future__ import annotations

import itertools
from typing import Any

import numpy as np
import pytest
from numpy_reference import assert_close, check_vmap
from tc_testing import check_grads

from lamina_tracing_core import lax as lx

RNG = np.random.RandomState(2)


def im2col(x: np.ndarray[Any, Any], filt: tuple[int, int], strides: tuple[int, int],
           pads: list[tuple[int, int]], rdil: tuple[int, int] = (1, 1)) -> np.ndarray[Any, Any]:
    """NCHW patches by loops: feature index c * prod(filt) + window position."""
    n, c, h, w = x.shape
    p = np.pad(x, [(0, 0), (0, 0)] + pads)
    eff = [(k - 1) * r + 1 for k, r in zip(filt, rdil)]
    oh = (p.shape[2] - eff[0]) // strides[0] + 1
    ow = (p.shape[3] - eff[1]) // strides[1] + 1
    out = np.zeros((n, c * filt[0] * filt[1], oh, ow), x.dtype)
    for i, j in itertools.product(range(oh), range(ow)):
        for ch in range(c):
            for k, (a, b) in enumerate(itertools.product(range(filt[0]), range(filt[1]))):
                out[:, ch * filt[0] * filt[1] + k, i, j] = \
                    p[:, ch, i * strides[0] + a * rdil[0], j * strides[1] + b * rdil[1]]
    return out


def test_patches_match_im2col() -> None:
    x = RNG.standard_normal((2, 3, 5, 6)).astype(np.float32)
    got = lx.conv_general_dilated_patches(x, (2, 3), (1, 2), [(1, 0), (1, 1)])
    assert_close(got, im2col(x, (2, 3), (1, 2), [(1, 0), (1, 1)]))
    got = lx.conv_general_dilated_patches(x, (2, 2), (2, 1), "VALID", rhs_dilation=(1, 2))
    assert_close(got, im2col(x, (2, 2), (2, 1), [(0, 0), (0, 0)], (1, 2)))
    # channels-last layouts: the same patches, transposed
    nhwc = np.transpose(x, (0, 2, 3, 1))
    got = lx.conv_general_dilated_patches(nhwc, (2, 3), (1, 2), [(1, 0), (1, 1)],
                                          dimension_numbers=("NHWC", "HWIO", "NHWC"))
    assert_close(got, np.transpose(im2col(x, (2, 3), (1, 2), [(1, 0), (1, 1)]), (0, 2, 3, 1)))


def test_local_conv_matches_loops() -> None:
    x = RNG.standard_normal((2, 3, 4, 5)).astype(np.float32)
    patches = im2col(x, (2, 2), (1, 1), [(0, 0), (0, 0)])  # (2, 12, 3, 4)
    w = RNG.standard_normal((3, 4, 12, 6)).astype(np.float32)  # HWIO, H/W of the output
    want = np.einsum("nkhw,hwko->nhwo", patches, w)
    got = lx.conv_general_dilated_local(x, w, (1, 1), "VALID", (2, 2),
                                        dimension_numbers=("NCHW", "HWIO", "NHWC"))
    assert_close(got, want, rtol=1e-4, atol=1e-5)
    w_oihw = np.transpose(w, (3, 2, 0, 1))
    got = lx.conv_general_dilated_local(x, w_oihw, (1, 1), "VALID", (2, 2))
    assert_close(got, np.transpose(want, (0, 3, 1, 2)), rtol=1e-4, atol=1e-5)


def test_derivatives_and_vmap() -> None:
    x = RNG.standard_normal((1, 2, 4, 4)).astype(np.float32)
    w = RNG.standard_normal((2, 2, 8, 3)).astype(np.float32)

    def local(x: Any, w: Any) -> Any:
        return lx.conv_general_dilated_local(x, w, (2, 2), "SAME", (2, 2),
                                             dimension_numbers=("NCHW", "HWIO", "NCHW"))

    check_grads(local, [x, w], order=2, atol=2e-2, rtol=2e-2)
    check_vmap(lambda x: lx.conv_general_dilated_patches(x, (2, 2), (1, 1), "SAME"), [x], [1])


def test_shape_tuples_match_jax() -> None:
    assert lx.conv_shape_tuple((2, 3, 5, 6), (4, 3, 2, 3), (1, 2), "SAME") == (2, 4, 5, 3)
    assert lx.conv_shape_tuple((2, 3, 5, 6), (4, 3, 2, 3), (1, 2), [(1, 0), (0, 2)],
                               batch_group_count=2) == (1, 4, 5, 3)
    dn = ("NHWC", "HWIO", "NHWC")
    assert lx.conv_general_shape_tuple((2, 5, 6, 3), (2, 3, 3, 4), (2, 1), "VALID",
                                       dn) == (2, 2, 4, 4)
    assert lx.conv_transpose_shape_tuple((2, 5, 6, 3), (2, 3, 3, 4), (2, 1), "SAME",
                                         dn) == (2, 10, 6, 4)
    assert lx.conv_transpose_shape_tuple((2, 5, 6, 3), (2, 3, 3, 4), (2, 3), "VALID",
                                         dn) == (2, 10, 18, 4)
    assert lx.conv_transpose_shape_tuple((2, 5, 6, 3), (2, 3, 3, 4), (2, 3),
                                         [(1, 0), (2, 2)], dn) == (2, 9, 18, 4)


def test_errors() -> None:
    x = np.zeros((1, 2, 4, 4), np.float32)
    with pytest.raises(TypeError, match="conv_general_dilated_patches: filter_shape"):
        lx.conv_general_dilated_patches(x, (2,), (1, 1), "VALID")
    with pytest.raises(TypeError, match="conv_general_dilated_local: rhs spatial"):
        lx.conv_general_dilated_local(x, np.zeros((5, 8, 2, 2), np.float32), (1, 1), "VALID",
                                      (2, 2))
    with pytest.raises(TypeError, match="conv_general_dilated_local: rhs input-feature"):
        lx.conv_general_dilated_local(x, np.zeros((5, 7, 3, 3), np.float32), (1, 1), "VALID",
                                      (2, 2))
    with pytest.raises(TypeError, match="conv_shape_tuple: expected 2"):
        lx.conv_shape_tuple((1, 2, 4, 4), (3, 2, 2, 2), (1, 1), [(0, 0)])
