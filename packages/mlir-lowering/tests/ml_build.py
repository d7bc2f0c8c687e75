"""Building jaxprs by hand for lowering tests (no tracing machinery needed).

    b = JaxprBuilder("f")
    x = b.arg((4,), np.float32, "x")
    y = b.eqn(lax.sin_p, x)
    closed = b.build([y], ["result"])

Output avals come from the primitives' abstract-evaluation rules; each
equation's SourceInfo is the line of the test that created it.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from typing import Any

import numpy as np
from lamina_tracing_core.avals import ShapedArray
from lamina_tracing_core.effects import no_effects
from lamina_tracing_core.jaxpr import (
    ClosedJaxpr,
    DropVar,
    Jaxpr,
    JaxprDebugInfo,
    JaxprEqn,
    Literal,
    Var,
)
from lamina_tracing_core.primitives import Primitive, abstract_eval, abstract_eval_rules
from lamina_tracing_core.source_info import Frame, NameStack, SourceInfo

from lamina_mlir_lowering import LoweringRule, register_lowering


def aval(shape: Sequence[int], dtype: Any) -> ShapedArray:
    return ShapedArray(tuple(shape), np.dtype(dtype))


def lit(value: Any, dtype: Any) -> Literal:
    return Literal(np.asarray(value, dtype), aval((), dtype))


class JaxprBuilder:
    def __init__(self, name: str = "f", traced_for: str = "jit"):
        self.name = name
        self.traced_for = traced_for
        self.invars: list[Var] = []
        self.arg_names: list[str | None] = []
        self.constvars: list[Var] = []
        self.consts: list[Any] = []
        self.eqns: list[JaxprEqn] = []
        self.name_stack = NameStack()

    def arg(self, shape: Sequence[int], dtype: Any, name: str | None = None) -> Var:
        v = Var(aval(shape, dtype))
        self.invars.append(v)
        self.arg_names.append(name)
        return v

    def const(self, value: Any) -> Var:
        arr = np.asarray(value)
        v = Var(aval(arr.shape, arr.dtype))
        self.constvars.append(v)
        self.consts.append(arr)
        return v

    def eqn(self, prim: Primitive, *ins: Var | Literal, out_avals: Sequence[ShapedArray] | None = None,
            drop: Sequence[int] = (), **params: Any) -> Any:
        frame = sys._getframe(1)
        info = SourceInfo(Frame(frame.f_code.co_filename, frame.f_lineno, frame.f_code.co_name),
                          self.name_stack)
        if out_avals is None:
            out_avals = abstract_eval(prim, [a.aval for a in ins], params)
        elif prim in abstract_eval_rules:
            # The real primitive exists: its abstract eval must agree with the test.
            computed = abstract_eval(prim, [a.aval for a in ins], params)
            assert [(a.shape, a.dtype) for a in computed] == [
                (a.shape, a.dtype) for a in out_avals], (prim, computed, out_avals)
        outs = [DropVar(a) if i in drop else Var(a) for i, a in enumerate(out_avals)]
        self.eqns.append(JaxprEqn(list(ins), list(outs), prim, params, no_effects, info))
        if prim.multiple_results:
            return outs
        return outs[0]

    def jaxpr(self, outs: Sequence[Var | Literal], result_paths: Sequence[str | None] | None = None
              ) -> Jaxpr:
        paths = tuple(result_paths) if result_paths is not None else (
            ("result",) if len(outs) == 1 else tuple(f"result[{i}]" for i in range(len(outs))))
        dbg = JaxprDebugInfo(self.traced_for, f"{self.name} at test.py:1",
                             tuple(self.arg_names), paths)
        return Jaxpr(list(self.constvars), list(self.invars), list(outs), list(self.eqns),
                     no_effects, dbg)

    def build(self, outs: Sequence[Var | Literal],
              result_paths: Sequence[str | None] | None = None) -> ClosedJaxpr:
        return ClosedJaxpr(self.jaxpr(outs, result_paths), list(self.consts))


def unary(prim: Primitive, shape: Sequence[int], dtype: Any, **params: Any) -> ClosedJaxpr:
    b = JaxprBuilder(prim.name)
    x = b.arg(shape, dtype, "x")
    return b.build([b.eqn(prim, x, **params)])


def nary(prim: Primitive, shapes_dtypes: Sequence[tuple[Sequence[int], Any]],
         **params: Any) -> ClosedJaxpr:
    b = JaxprBuilder(prim.name)
    args = [b.arg(s, d, f"x{i}") for i, (s, d) in enumerate(shapes_dtypes)]
    out = b.eqn(prim, *args, **params)
    return b.build(out if prim.multiple_results else [out])


def local_prim(name: str, rule: LoweringRule, multiple_results: bool = False) -> Primitive:
    """A test-local primitive called ``name`` lowered by ``rule``: how a layer
    that defines one of JAX's primitives missing from tracing-core (``reduce``,
    ``rng_bit_generator``) registers the rule mlir-lowering has for it."""
    prim = Primitive(name, multiple_results=multiple_results)
    register_lowering(prim, rule)
    return prim
