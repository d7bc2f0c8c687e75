"""The windowed reductions and the FFT compiled through XLA: values against
NumPy, derivatives (check_grads), vmap and the lowered ops."""

from __future__ import annotations

import itertools
from typing import Any

import numpy as np
import pytest

import lamina
import lamina.numpy as jnp
from lamina import lax
from lamina.test_util import check_grads

RNG = np.random.RandomState(5)


def distinct(*shape: int) -> np.ndarray[Any, Any]:
    n = int(np.prod(shape))
    return (RNG.permutation(n).astype(np.float32) / n + 0.25).reshape(shape)


def windows(x: np.ndarray[Any, Any], init: float, window: Any, strides: Any, pads: Any,
            base: Any, wdil: Any) -> np.ndarray[Any, Any]:
    """Every window of the dilated, padded ``x`` along a trailing axis."""
    dil = np.full([(d - 1) * b + 1 for d, b in zip(x.shape, base)], init, x.dtype)
    dil[tuple(slice(None, None, b) for b in base)] = x
    p = np.pad(dil, pads, constant_values=init)
    eff = [(w - 1) * r + 1 for w, r in zip(window, wdil)]
    out = [(n - e) // s + 1 for n, e, s in zip(p.shape, eff, strides)]
    return np.stack([p[tuple(slice(o * r, o * r + (n - 1) * s + 1, s)
                             for o, r, n, s in zip(off, wdil, out, strides))]
                     for off in itertools.product(*(range(w) for w in window))], -1)


CASES = [((2, 2), (1, 1), [(0, 0), (0, 0)], (1, 1), (1, 1)),
         ((3, 2), (2, 1), [(1, 1), (0, 1)], (1, 1), (1, 1)),
         ((2, 2), (1, 2), [(1, 0), (0, 2)], (2, 1), (1, 2))]


@pytest.mark.parametrize("window,strides,pads,base,wdil", CASES)
def test_monoid_and_general_values_under_jit(window: Any, strides: Any, pads: Any, base: Any,
                                             wdil: Any) -> None:
    x = distinct(5, 6)
    for comp, init, ref in [(lax.add, 0.0, np.sum), (lax.max, -np.inf, np.max),
                            (lax.min, np.inf, np.min), (lax.mul, 1.0, np.prod)]:
        f = lamina.jit(lambda x, init=init, comp=comp: lax.reduce_window(
            x, init, comp, window, strides, pads, base, wdil))
        want = ref(windows(x, init, window, strides, pads, base, wdil), -1)
        np.testing.assert_allclose(np.asarray(f(x)), want, rtol=1e-5)


@pytest.mark.parametrize("window,strides,pads,base,wdil", CASES)
def test_max_pool_gradients(window: Any, strides: Any, pads: Any, base: Any, wdil: Any) -> None:
    x = distinct(5, 6)

    def pool(x: Any) -> Any:
        return lax.reduce_window(x, -np.inf, lax.max, window, strides, pads, base, wdil)

    if window == CASES[0][0]:  # second order once (it compiles many small programs)
        check_grads(lamina.jit(lambda x: jnp.sum(pool(x[:3, :4]) ** 2)), [x], order=2,
                    modes=("rev",), atol=5e-2, rtol=5e-2)
    else:
        check_grads(lamina.jit(lambda x: jnp.sum(pool(x) ** 2)), [x], order=1,
                    modes=("rev",), atol=5e-2, rtol=5e-2)
    # the gradient of sum(pool) counts how often each element is a window's maximum
    stack = windows(np.arange(x.size, dtype=np.float64).reshape(x.shape), -1, window,
                    strides, pads, base, wdil)
    vals = windows(x, -np.inf, window, strides, pads, base, wdil)
    picked = np.take_along_axis(stack, np.argmax(vals, -1)[..., None], -1).astype(int)
    want = np.bincount(picked.ravel(), minlength=x.size).reshape(x.shape)
    got = lamina.jit(lamina.grad(lambda x: jnp.sum(pool(x))))(x)
    np.testing.assert_allclose(np.asarray(got), want)
    if window == CASES[1][0]:
        batched = lamina.jit(lamina.vmap(lamina.grad(lambda x: jnp.sum(pool(x)))))(
            np.stack([x, x]))
        np.testing.assert_allclose(np.asarray(batched), np.stack([want, want]))


def test_general_body_reverse_mode_compiled() -> None:
    x = distinct(3, 4) + 0.5
    check_grads(lamina.jit(lambda x: lax.reduce_window(x, 1.0, lax.mul, (2, 2), (1, 2),
                                                       "SAME")), [x], order=1,
                modes=("fwd", "rev"), atol=5e-2, rtol=5e-2)


def test_lowered_ops() -> None:
    x = distinct(4, 4)
    text = lamina.jit(lamina.grad(lambda x: jnp.sum(lax.reduce_window(
        x, -np.inf, lax.max, (2, 2), (2, 2), "VALID")))).lower(x).as_text()
    assert "stablehlo.select_and_scatter" in text
    text = lamina.jit(lambda x: lax.reduce_window(x, 1.0, lax.mul, (2, 2), (1, 1),
                                                  "SAME")).lower(x).as_text()
    assert "stablehlo.reduce_window" in text and "stablehlo.multiply" in text
    text = lamina.jit(jnp.fft.rfft2).lower(x).as_text()
    assert "stablehlo.fft" in text and "RFFT" in text
    # the same ops for accelerators, lowered from this host
    pool_grad = lamina.jit(lamina.grad(lambda x: jnp.sum(lax.reduce_window(
        x, -np.inf, lax.max, (2, 2), (1, 1), "SAME")) + jnp.sum(jnp.abs(jnp.fft.fft2(x)))))
    for platform in ("cuda", "tpu"):
        text = pool_grad.trace(x).lower(lowering_platforms=(platform,)).as_text()
        assert "stablehlo.select_and_scatter" in text and "stablehlo.fft" in text


def test_fft_under_jit_and_vmap() -> None:
    x = RNG.standard_normal((3, 8)).astype(np.float32)
    z = (x + 1j * RNG.standard_normal((3, 8))).astype(np.complex64)
    for name, arg in [("fft", z), ("ifft", z), ("rfft", x), ("irfft", z), ("hfft", z),
                      ("ihfft", x), ("fft2", z), ("rfftn", x), ("irfftn", z)]:
        got = lamina.jit(lambda a, name=name: getattr(jnp.fft, name)(a, norm="ortho"))(arg)
        want = getattr(np.fft, name)(arg, norm="ortho")
        np.testing.assert_allclose(np.asarray(got), want, rtol=2e-4, atol=2e-4,
                                   err_msg=name)
    got = lamina.vmap(jnp.fft.fft)(z)
    np.testing.assert_allclose(np.asarray(got), np.fft.fft(z), rtol=2e-4, atol=2e-4)


def test_fft_gradients() -> None:
    x = RNG.standard_normal((2, 6)).astype(np.float32)
    check_grads(lambda x: jnp.real(jnp.fft.fft(x)) + jnp.imag(jnp.fft.fft(x)), [x], order=1,
                atol=5e-2, rtol=5e-2)
    check_grads(lambda x: jnp.fft.irfft(jnp.fft.rfft(x) * 1.5j), [x], order=2, atol=5e-2,
                rtol=5e-2)
    g = lamina.jit(lamina.grad(lambda x: jnp.sum(jnp.abs(jnp.fft.rfft(x)) ** 2)))(x)
    # d/dx sum_k |X_k|^2 = 2 Re(conj(X) @ J) with J = d rfft(x) / dx
    jac = np.fft.rfft(np.eye(6), axis=0)
    want = 2 * np.real(np.conj(np.fft.rfft(x, axis=-1)) @ jac)
    np.testing.assert_allclose(np.asarray(g), want, rtol=1e-3, atol=1e-3)
