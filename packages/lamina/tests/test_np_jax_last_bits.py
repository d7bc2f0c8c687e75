"""Eager ``jnp`` functions that JAX runs as one jitted program give JAX's bits.

JAX jits ``corrcoef``, ``quantile``/``percentile`` (and their NaN-skipping
forms), ``trapezoid``, ``geomspace`` and ``logspace``; XLA then rewrites and
fuses their arithmetic, and JAX's users see those bits. lamina runs them as one
compiled program when called eagerly, with JAX's order of operations and
dtypes of intermediates (``log10`` multiplies by ``1/log(10)``, as JAX's). The
expected bytes were recorded with JAX 0.10.2 on CPU, float32 and (x64) float64.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import numpy as np
import pytest

import lamina.numpy as jnp
from lamina_tracing_core import dtypes


def _cases(dt: Any) -> dict[str, Callable[[], Any]]:
    m = np.sin(np.arange(36.0) * 1.3).reshape(4, 9).astype(dt)
    v = (1.5 + np.cos(np.arange(17.0) * 0.7)).astype(dt)
    m_nan = m.copy()
    m_nan[1, 3] = m_nan[2, 5] = np.nan
    xs = np.cumsum(0.2 + np.sin(np.arange(17.0)) ** 2).astype(dt)
    return {
        "corrcoef": lambda: jnp.corrcoef(m),
        "percentile": lambda: jnp.percentile(m, np.array([10.0, 33.0, 90.0], dt), axis=1),
        "quantile": lambda: jnp.quantile(m, 0.37, axis=1),
        "nanpercentile": lambda: jnp.nanpercentile(m_nan, 63.0, axis=1),
        "trapezoid": lambda: jnp.trapezoid(m, dx=0.3, axis=1),
        "trapezoid_x": lambda: jnp.trapezoid(v, xs),
        "geomspace": lambda: jnp.geomspace(2.0, 50.0, 9, endpoint=False),
        "logspace": lambda: jnp.logspace(-1.3, 2.7, 9, endpoint=False, base=3.0),
        "log10": lambda: jnp.log10(v),
    }


JAX_FLOAT32 = {
    "corrcoef": "0000803fcbf1163f993569be312a5bbfcbf1163fffff7f3f6df4263fe3f8b2bd993569be6df4263f0000803f1dbc323f312a5bbfe3f8b2bd1dbc323f0000803f",
    "percentile": "91c556bf1aa04bbf453e7dbf102b66bfc8897dbeb31493be7122b6be410714bf4f76783f6fbd703fe0b0563f5d83783f",
    "quantile": "f35de1bc6c9103be6cd8a5be0aed05bf",
    "nanpercentile": "9466a73efa09fe3e27d2373f6a68693e",
    "trapezoid": "fcb29d3eecd9a53ed370e43de1c337be",
    "trapezoid_x": "10e07f41",
    "geomspace": "000000403b09374033de82401c23bb40d8cc054184543f414fcc8841f89dc341f8dc0b42",
    "logspace": "ad7e753e4604c83ea2f6223f3ac6843f025bd83f84463040ca9e8f406b07ea40c6ac3e41",
    "log10": "ccbecb3e89c7b53e8d0d643eb7430abbdacf81beea0c7fbe54ed893bf26f683e6cd4b63e93bbcb3ee8b3b43eaa9c5f3eca960abcdc0384be1f517abeaff82b3cdbc36c3e",
}

JAX_FLOAT64 = {
    "corrcoef": "000000000000f03f92fe716139dee23f4012dc4fb326cdbfa13bb6214665ebbf93fe716139dee23f000000000000f03f2fc63ab28ddee43ff1cfa1771c5fb6bf4112dc4fb326cdbf30c63ab28ddee43ffeffffffffffef3fc6c7feaa8357e63fa23bb6214665ebbff2cfa1771c5fb6bfc5c7feaa8357e63ffeffffffffffef3f",
    "percentile": "aa787e16b2d8eabf2086842c0374e9bf75f426b8c8a7efbf6617a40862c5ecbf8c73fa4038b1cfbf45fd2d1f9662d2bf8c4274134ec4d6bf88736f0be880e2bf1270b7d0c90eef3f152b62fcad17ee3f0536b0031cd6ea3f8dd0e3b46b10ef3f",
    "quantile": "dc2dc239c02b9cbf88e597a32d72c0bfcd39b6870dbbd4bfd7f9de33a1bde0bf",
    "nanpercentile": "be4ba67ed2ecd43fcad3a0633fc1df3f394c19eb44fae63f440dc9540d2dcd3f",
    "trapezoid": "44d033795fb6d33f69dbb18d3dbbd43f950de1a31a8ebc3f65a77af87bf8c6bf",
    "trapezoid_x": "2f1b742c02fc2f40",
    "geomspace": "00000000000000404066645427e106400a274d45c65b10409b62746963641740109087f39ab92040741a7c3e90ea2740053b1fd689193140c8622fb1be733840725d2bfc9e7b4140",
    "logspace": "07490f88d5afce3f2449c9aa8800d93f2079064bd45ee43fe354090bc798f03fab74631a600bfb3fe10e5e5fd0080640d42abf20d9f311401d588728ed401d40dd5fcc9b98d52740",
    "log10": "020cc15ed977d93fbaa1c713f1b8d63faf9d227eb181cc3fcd948fd6784861bfbf605128fb39d0bfb5db243d9de1cfbf32ff258cac3d713f7f8fa431fe0dcd3f920aaa8d8ddad63f2a3aba5d7277d93fa90457027d96d63f2c11f64895f3cb3f534f52f5d85281bf2295ea7e7b80d0bf424491a7234acfbf0ae9eda8167f853fad8b52737b98cd3f",
}


@pytest.fixture
def x64() -> Iterator[None]:
    dtypes.enable_x64(True)
    try:
        yield
    finally:
        dtypes.enable_x64(False)


@pytest.mark.parametrize("name", sorted(JAX_FLOAT32))
def test_float32_bits_are_jax(name: str) -> None:
    out = np.asarray(_cases(np.float32)[name]())
    assert out.dtype == np.float32
    assert out.tobytes().hex() == JAX_FLOAT32[name]


@pytest.mark.parametrize("name", sorted(JAX_FLOAT64))
def test_float64_bits_are_jax(name: str, x64: None) -> None:
    out = np.asarray(_cases(np.float64)[name]())
    assert out.dtype == np.float64
    assert out.tobytes().hex() == JAX_FLOAT64[name]
