"""Helpers shared by the end-to-end tests: reading names back out of lowered
modules, walking jaxprs, and running JAX next to lamina for comparisons.

The comparisons with JAX are the tests marked ``peer``. They run in the
``peer`` environment, which has ``jax==0.10.2`` installed beside lamina
(``hatch run peer:test``); everywhere else they are deselected (pytest.toml's
``-m "not peer"``), since lamina itself never needs jax."""

from __future__ import annotations

import functools
import importlib.util
import os
import re
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from jaxlib.mlir import ir
from lamina_tracing_core.jaxpr import ClosedJaxpr, Jaxpr, subjaxprs_of_params

REPO = Path(__file__).resolve().parents[1]
PACKAGE_NAMES = ("linear-util", "tracing-core", "mlir-lowering", "interpreters-pxla",
                 "sharded-jit", "lamina")
SRC_DIRS = [str(REPO / "packages" / name / "src") for name in PACKAGE_NAMES]


# --- the public function of a lowered module ---------------------------------------------------
@dataclass(frozen=True)
class MainSignature:
    """What XLA sees at the module's entry point, read with jaxlib's MLIR bindings."""

    module_name: str
    arg_infos: tuple[str | None, ...]
    result_infos: tuple[str | None, ...]
    arg_locs: tuple[str, ...]
    arg_types: tuple[str, ...]
    private_functions: tuple[str, ...]


def _string_attr(attrs: Any, key: str) -> str | None:
    d = ir.DictAttr(attrs)
    if key not in d:
        return None
    return ir.StringAttr(d[key]).value


def main_signature(module: ir.Module) -> MainSignature:
    """Reads ``@main``'s ``jax.arg_info``/``jax.result_info`` attributes and its
    argument locations from an MLIR module (``Lowered.compiler_ir('stablehlo')``)."""
    with module.context:
        main = None
        private = []
        for op in module.body.operations:
            if op.operation.name != "func.func":
                continue
            name = ir.StringAttr(op.attributes["sym_name"]).value
            if name == "main":
                main = op
            else:
                private.append(name)
        assert main is not None, "module has no @main"
        attrs = main.attributes
        n_args = len(main.regions[0].blocks[0].arguments)
        arg_attrs = list(ir.ArrayAttr(attrs["arg_attrs"])) if "arg_attrs" in attrs else [None] * n_args
        res_attrs = list(ir.ArrayAttr(attrs["res_attrs"])) if "res_attrs" in attrs else []
        block = main.regions[0].blocks[0]
        sym = module.operation.attributes["sym_name"] if "sym_name" in \
            module.operation.attributes else None
        return MainSignature(
            module_name=ir.StringAttr(sym).value if sym is not None else "",
            arg_infos=tuple(None if a is None else _string_attr(a, "jax.arg_info")
                            for a in arg_attrs),
            result_infos=tuple(_string_attr(a, "jax.result_info") for a in res_attrs),
            arg_locs=tuple(_loc_name(str(a.location)) for a in block.arguments),
            arg_types=tuple(str(a.type) for a in block.arguments),
            private_functions=tuple(private),
        )


def _loc_name(loc: str) -> str:
    """``loc("y['hi']")`` -> ``y['hi']``; other locations are returned as they are."""
    m = re.fullmatch(r'loc\("((?:[^"\\]|\\.)*)"\)', loc)
    return m.group(1).replace('\\"', '"') if m else loc


_ARG_INFO_RE = re.compile(r'jax\.arg_info = "((?:[^"\\]|\\.)*)"')
_RESULT_INFO_RE = re.compile(r'jax\.result_info = "((?:[^"\\]|\\.)*)"')
_ARG_LOC_RE = re.compile(r'%arg\d+: [^,)]*?(?:\{[^{}]*\})? loc\("((?:[^"\\]|\\.)*)"\)')


def main_line(text: str) -> str:
    """The ``func.func public @main(...)`` line of a module's text."""
    lines = [ln for ln in text.splitlines() if "func.func public @main" in ln]
    assert len(lines) == 1, text
    return lines[0]


def text_arg_infos(text: str) -> list[str]:
    """The ``jax.arg_info`` strings of ``@main`` in a module's text, in order."""
    return _ARG_INFO_RE.findall(main_line(text).split("->")[0])


def text_result_infos(text: str) -> list[str]:
    return _RESULT_INFO_RE.findall(main_line(text).split("->", 1)[1])


def text_arg_locs(text: str) -> list[str]:
    """The argument locations of ``@main`` in ``as_text(debug_info=True)``."""
    return _ARG_LOC_RE.findall(main_line(text))


# --- jaxprs ------------------------------------------------------------------------------------
def inner(j: Jaxpr | ClosedJaxpr) -> Jaxpr:
    return j.jaxpr if isinstance(j, ClosedJaxpr) else j


def walk_eqns(j: Jaxpr | ClosedJaxpr) -> Iterator[tuple[Any, Jaxpr]]:
    """Every equation of ``j`` and of its sub-jaxprs, with the jaxpr holding it."""
    jaxpr = inner(j)
    for eqn in jaxpr.eqns:
        yield eqn, jaxpr
        for sub in subjaxprs_of_params(eqn.params):
            yield from walk_eqns(sub)


def sub_jaxprs(j: Jaxpr | ClosedJaxpr, primitive_name: str) -> list[Jaxpr]:
    """The jaxprs held by ``primitive_name`` equations anywhere in ``j``."""
    return [inner(sub) for eqn, _ in walk_eqns(j) if eqn.primitive.name == primitive_name
            for sub in subjaxprs_of_params(eqn.params)]


# --- fresh processes, and JAX beside lamina ----------------------------------------------
def run_python(python: Path | str, script: str, *, pythonpath: list[str] | None = None,
               timeout: float = 120, env_extra: dict[str, str] | None = None
               ) -> subprocess.CompletedProcess[str]:
    """Runs ``script`` in a fresh ``python`` process with 8 CPU devices."""
    env = dict(os.environ)
    env.update(env_extra or {})
    env["XLA_FLAGS"] = "--xla_force_host_platform_device_count=8"
    env["TF_CPP_MIN_LOG_LEVEL"] = "1"
    env.pop("PYTHONPATH", None)
    if pythonpath:
        env["PYTHONPATH"] = os.pathsep.join(pythonpath)
    return subprocess.run([str(python), "-c", textwrap.dedent(script)], capture_output=True,
                          text=True, timeout=timeout, env=env)


def peer_python() -> str:
    """The interpreter a ``peer`` test runs JAX with: this one, in the ``peer``
    environment. Selecting a peer test where jax is not installed is a usage
    error, reported as such rather than skipped."""
    if importlib.util.find_spec("jax") is None:
        pytest.fail("the tests marked 'peer' compare with JAX 0.10.2 and need it installed "
                    "beside lamina: run them with `hatch run peer:test`", pytrace=False)
    return sys.executable


# --- a JAX program, written once, run with either library --------------------------------------
def train_mlp(lx: Any, jnp: Any, steps: int = 25) -> list[float]:
    """Trains a small MLP classifier JAX-style with the library ``lx`` (``jax``
    or ``lamina``) and its numpy ``jnp``; returns the loss after each step.

    The code uses only names JAX has (``random``, ``nn``, ``value_and_grad``,
    ``jit``, ``tree_util.tree_map``), so the same function runs on both.
    """

    def init(key: Any, sizes: tuple[int, ...]) -> list[dict[str, Any]]:
        params = []
        for din, dout in zip(sizes[:-1], sizes[1:]):
            key, wk = lx.random.split(key)
            params.append({'w': lx.random.normal(wk, (din, dout)) * jnp.sqrt(2.0 / din),
                           'b': jnp.zeros((dout,))})
        return params

    def predict(params: list[dict[str, Any]], x: Any) -> Any:
        for layer in params[:-1]:
            x = lx.nn.relu(x @ layer['w'] + layer['b'])
        return x @ params[-1]['w'] + params[-1]['b']

    def loss_fn(params: list[dict[str, Any]], x: Any, y: Any) -> Any:
        logits = predict(params, x)
        return -jnp.mean(jnp.sum(lx.nn.log_softmax(logits) * lx.nn.one_hot(y, 3), axis=-1))

    @lx.jit
    def step(params: list[dict[str, Any]], x: Any, y: Any) -> Any:
        loss, grads = lx.value_and_grad(loss_fn)(params, x, y)
        return lx.tree_util.tree_map(lambda p, g: p - 0.1 * g, params, grads), loss

    @lx.jit
    def make_data(key: Any) -> Any:
        x = lx.random.normal(key, (64, 4))
        y = (x[:, 0] > 0).astype(jnp.int32) + (x[:, 1] > 0.5).astype(jnp.int32)
        return x, y

    data_key, init_key = lx.random.split(lx.random.PRNGKey(0))
    x, y = make_data(data_key)
    params = lx.jit(init, static_argnums=1)(init_key, (4, 16, 3))
    losses = []
    for _ in range(steps):
        params, loss = step(params, x, y)
        losses.append(float(loss))
    return losses


@functools.cache
def lamina_mlp_losses(steps: int = 25) -> tuple[float, ...]:
    """:func:`train_mlp` on lamina, computed once per test session."""
    import lamina
    import lamina.numpy
    return tuple(train_mlp(lamina, lamina.numpy, steps))
