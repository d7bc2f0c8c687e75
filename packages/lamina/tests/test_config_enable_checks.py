"""``enable_checks``: with it on, every jaxpr a trace or transformation
produces is type-checked, so an equation whose recorded type disagrees with
its primitive's abstract evaluation is a ``JaxprTypeError`` (as JAX 0.10.2,
whose text differs: "Value for variable 'b' inconsistently typed as f32[2]
for let-binder of type f32[1]")."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import lamina as lx
import lamina.numpy as jnp
import pytest
from lamina.core import ShapedArray
from lamina.errors import JaxprTypeError
from lamina.extend import core as ext_core


@pytest.fixture(autouse=True)
def _restore_setting() -> Iterator[None]:
    yield
    lx.config.update("jax_enable_checks", False)


def _drifting_primitive() -> ext_core.Primitive:
    """A primitive whose abstract evaluation answers a longer shape each call."""
    calls: list[int] = []
    prim = ext_core.Primitive("drifting")

    def abstract_eval(x: Any) -> ShapedArray:
        calls.append(1)
        return ShapedArray((len(calls),), x.dtype)

    prim.def_abstract_eval(abstract_eval)
    return prim


def test_off_by_default_the_jaxpr_is_not_rechecked() -> None:
    prim = _drifting_primitive()
    assert lx.config.jax_enable_checks is False
    assert "f32[1] = drifting" in str(lx.make_jaxpr(prim.bind)(1.0))


def test_on_an_ill_typed_equation_is_an_error() -> None:
    prim = _drifting_primitive()
    with lx.enable_checks():
        assert lx.config.jax_enable_checks is True and lx.enable_checks.value is True
        with pytest.raises(JaxprTypeError, match="drifting"):
            lx.make_jaxpr(prim.bind)(1.0)
    assert lx.config.jax_enable_checks is False


def test_transformations_pass_the_checks() -> None:
    def f(x: Any) -> Any:
        y = lx.lax.scan(lambda c, a: (c * a + jnp.sin(c), c), x, jnp.arange(3.0))[0]
        z = lx.lax.cond(x > 0, lambda v: v * 2, lambda v: -v, y)
        w = lx.lax.fori_loop(0, 3, lambda i, c: c * 1.1, z)
        return lx.nn.softmax(jnp.stack([w, x])).sum() + lx.checkpoint(jnp.cos)(x)

    lx.config.update("jax_enable_checks", True)
    # JAX 0.10.2 with enable_checks: -0.47942486 and -0.9800535
    assert float(lx.jit(lx.grad(f))(0.5)) == pytest.approx(-0.47942486, rel=1e-5)
    assert lx.vmap(lx.grad(f))(jnp.ones(3)).shape == (3,)
    assert float(lx.hessian(f)(0.2)) == pytest.approx(-0.9800535, rel=1e-5)
