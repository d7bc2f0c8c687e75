"""Every primitive tracing-core defines has a lowering rule, and the
higher-order ones (custom_jvp/vjp calls, checkpoint, add_any) lower."""

from __future__ import annotations

from types import ModuleType

import numpy as np
from lamina_tracing_core import ad_util, checkpoint as checkpoint_module, control_flow, lax
from lamina_tracing_core import custom_derivatives as cd
from lamina_tracing_core.api import grad, make_jaxpr
from lamina_tracing_core.checkpoint import checkpoint
from lamina_tracing_core.primitives import Primitive
from ml_runner import run

import lamina_mlir_lowering as ml

F32 = np.float32
#: Primitives that never reach lowering (JAX has no rule for them either):
#: custom_lin only exists while linearizing, before transposition removes it.
NOT_LOWERED = {"custom_lin"}


#: The modules whose public ``*_p`` names are tracing-core's primitives.
PRIMITIVE_MODULES: tuple[ModuleType, ...] = (lax, control_flow, ad_util, cd, checkpoint_module)


def _all_tracing_core_primitives() -> dict[str, Primitive]:
    found: dict[str, Primitive] = {}
    for module in PRIMITIVE_MODULES:
        for name, value in vars(module).items():
            if name.endswith("_p") and not name.startswith("_"):
                assert isinstance(value, Primitive), f"{module.__name__}.{name}"
                found[value.name] = value
    return found


def test_every_tracing_core_primitive_has_a_rule_on_every_platform() -> None:
    prims = _all_tracing_core_primitives()
    assert len(prims) > 100
    for expected in ("add_any", "cond", "while", "scan", "custom_jvp_call",
                     "custom_vjp_call", "checkpoint", "psum", "sin"):
        assert expected in prims
    for platform in ml.KNOWN_PLATFORMS:
        missing = sorted(name for name, p in prims.items()
                         if name not in NOT_LOWERED and not ml.has_lowering_rule(p, platform))
        assert missing == [], platform


def test_checkpoint_under_grad_lowers_with_barrier() -> None:
    def f(x):
        return lax.reduce_sum(lax.sin(lax.sin(x)), (0,))

    g = make_jaxpr(grad(checkpoint(f)))(np.ones(3, F32))
    res = ml.lower_jaxpr_to_module("jit_g", g)
    x = np.linspace(0, 1, 3).astype(F32)
    np.testing.assert_allclose(run(res, x)[0], np.cos(np.sin(x)) * np.cos(x), rtol=1e-5)


def test_custom_jvp_call_is_inlined() -> None:
    custom_jvp = getattr(cd, "custom_jvp", None)
    assert custom_jvp is not None

    @custom_jvp
    def f(x):
        return lax.sin(x)

    @f.defjvp
    def f_jvp(primals, tangents):
        (x,), (t,) = primals, tangents
        return f(x), lax.mul(np.float32(10.0), t)

    closed = make_jaxpr(f)(np.ones(3, F32))
    assert any(e.primitive.name == "custom_jvp_call" for e in closed.eqns)
    res = ml.lower_jaxpr_to_module("jit_f", closed)
    np.testing.assert_allclose(run(res, np.ones(3, F32))[0], np.sin(np.ones(3)), rtol=1e-6)
    g = make_jaxpr(grad(lambda x: lax.reduce_sum(f(x), (0,))))(np.ones(3, F32))
    np.testing.assert_allclose(run(ml.lower_jaxpr_to_module("jit_g", g), np.ones(3, F32))[0],
                               np.full(3, 10.0))
