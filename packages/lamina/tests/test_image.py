"""lamina.image.resize and scale_and_translate against JAX 0.10's numbers
(every method, with and without antialiasing), under jit, vmap and grad."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

import lamina
import lamina.numpy as jnp
from lamina import image

X = np.array([0.3, -1.2, 2.5, 0.7, 1.9], np.float32)
IMG = np.arange(12, dtype=np.float32).reshape(3, 4) ** 1.5

# jax.image.resize(X, (n,), method, antialias=...) with JAX 0.10.2
REFERENCE = {
    ('nearest', True, 3): [0.3, 2.5, 1.9],
    ('nearest', True, 8): [0.3, 0.3, -1.2, 2.5, 2.5, 0.7, 1.9, 1.9],
    ('nearest', False, 3): [0.3, 2.5, 1.9],
    ('nearest', False, 8): [0.3, 0.3, -1.2, 2.5, 2.5, 0.7, 1.9, 1.9],
    ('linear', True, 3): [-0.342857, 1.27778, 1.38571],
    ('linear', True, 8): [0.3, -0.35625, -0.96875, 1.34375, 1.9375, 0.8125, 1.375, 1.9],
    ('linear', False, 3): [-0.2, 2.5, 1.5],
    ('linear', False, 8): [0.3, -0.35625, -0.96875, 1.34375, 1.9375, 0.8125, 1.375, 1.9],
    ('cubic', True, 3): [-0.381538, 1.24837, 1.46],
    ('cubic', True, 8): [0.407934, -0.478479, -1.1015, 1.57538, 2.24298, 0.740173, 1.33562, 1.98635],
    ('cubic', False, 3): [-0.241379, 2.5, 1.5069],
    ('cubic', False, 8): [0.407934, -0.478479, -1.1015, 1.57538, 2.24298, 0.740173, 1.33562, 1.98635],
    ('lanczos3', True, 3): [-0.398914, 1.17353, 1.53412],
    ('lanczos3', True, 8): [0.568712, -0.641164, -1.08729, 1.61375, 2.37963, 0.772038, 1.2125, 2.07877],
    ('lanczos3', False, 3): [-0.394671, 2.5, 1.40277],
    ('lanczos3', False, 8): [0.568712, -0.641164, -1.08729, 1.61375, 2.37963, 0.772038, 1.2125, 2.07877],
    ('lanczos5', True, 3): [-0.388499, 1.14098, 1.5825],
    ('lanczos5', True, 8): [0.69323, -0.773605, -1.06123, 1.66655, 2.39649, 0.791034, 1.06448, 2.21048],
    ('lanczos5', False, 3): [-0.51711, 2.5, 1.26293],
    ('lanczos5', False, 8): [0.69323, -0.773605, -1.06123, 1.66655, 2.39649, 0.791034, 1.06448, 2.21048],
    ('area', True, 3): [-0.3, 1.4, 1.42],
    ('area', True, 8): [0.3, -0.3, -1.2, 1.76, 2.14, 0.7, 1.42, 1.9],
    ('area', False, 3): [-0.3, 1.4, 1.42],
    ('area', False, 8): [0.3, -0.3, -1.2, 1.76, 2.14, 0.7, 1.42, 1.9],
    ('cubic-pytorch', True, 3): [-0.381538, 1.24837, 1.46],
    ('cubic-pytorch', True, 8): [0.407934, -0.478479, -1.1015, 1.57538, 2.24298, 0.740173, 1.33562, 1.98635],
    ('cubic-pytorch', False, 3): [-0.377777, 2.5, 1.42222],
    ('cubic-pytorch', False, 8): [0.439252, -0.643488, -1.07303, 1.54214, 2.32321, 0.750153, 1.23888, 2.0114],
}
# jax.image.scale_and_translate(IMG, (2, 5), (0, 1), [0.8, 1.4], [0.3, -0.5], ...)
ST_LINEAR = [[0.214286, 0.928571, 2.17542, 3.67404, 5.19615], [9.59803, 11.7689, 14.1932, 16.7635, 19.1829]]
ST_LANCZOS3 = [[-0.432976, 0.188025, 1.11731, 2.92631, 4.2112], [8.35943, 10.8877, 13.2834, 16.4457, 18.6332]]


@pytest.mark.parametrize("key", sorted(REFERENCE, key=str))
def test_resize_matches_jax(key: Any) -> None:
    method, antialias, n = key
    got = image.resize(X, (n,), method, antialias=antialias)
    np.testing.assert_allclose(np.asarray(got), np.asarray(REFERENCE[key], np.float32),
                               rtol=1e-5, atol=1e-5)


def test_scale_and_translate_matches_jax_and_differentiates() -> None:
    scale, trans = jnp.array([0.8, 1.4]), jnp.array([0.3, -0.5])
    got = lamina.jit(lambda s, t: image.scale_and_translate(IMG, (2, 5), (0, 1), s, t,
                                                            "linear"))(scale, trans)
    np.testing.assert_allclose(np.asarray(got), ST_LINEAR, rtol=1e-5, atol=1e-5)
    got = image.scale_and_translate(IMG, (2, 5), (0, 1), scale, trans, "lanczos3",
                                    antialias=False)
    np.testing.assert_allclose(np.asarray(got), ST_LANCZOS3, rtol=1e-5, atol=1e-5)
    # the scale is differentiable (JAX's gradient)
    f = lambda s: jnp.sum(image.scale_and_translate(IMG, (2, 5), (0, 1), s, trans,  # noqa: E731
                                                    "linear") ** 2)
    np.testing.assert_allclose(np.asarray(lamina.jit(lamina.grad(f))(scale)),
                               [-5106.751, -559.2432], rtol=1e-4)


def test_resize_batched_image_under_jit_and_vmap() -> None:
    imgs = np.stack([IMG, IMG * 2.0])[..., None]  # (2, 3, 4, 1)
    out = lamina.jit(lambda x: image.resize(x, (2, 6, 2, 1), "cubic"))(imgs)
    each = lamina.vmap(lambda x: image.resize(x, (6, 2, 1), "cubic"))(imgs)
    np.testing.assert_allclose(np.asarray(out), np.asarray(each), rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(np.asarray(out[1]), 2 * np.asarray(out[0]), rtol=1e-5,
                               atol=1e-5)
    # integers are resampled as floats; nearest keeps the dtype
    assert image.resize(np.arange(4), (6,), "linear").dtype == np.float32
    assert image.resize(np.arange(4), (6,), "nearest").dtype == np.int32


def test_errors() -> None:
    with pytest.raises(ValueError, match="unknown resize method"):
        image.resize(X, (3,), "bogus")
    with pytest.raises(ValueError, match="one entry per dimension"):
        image.resize(X, (3, 2), "linear")
    with pytest.raises(ValueError, match="nearest-neighbour"):
        image.scale_and_translate(X, (3,), (0,), [1.0], [0.0], "nearest")
    with pytest.raises(ValueError, match="one entry per spatial dimension"):
        image.scale_and_translate(X, (3,), (0,), [1.0, 2.0], [0.0], "linear")
