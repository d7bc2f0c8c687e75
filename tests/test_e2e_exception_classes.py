"""Bad input raises the built-in exception class JAX raises (code catches by
class). Each case runs on lamina against the class recorded from JAX 0.10.2;
the ``peer`` test re-derives the table from JAX itself in the peer
environment (``hatch run peer:test``)."""

from __future__ import annotations

import importlib
from collections.abc import Callable
from typing import Any

import pytest

import lamina as lx
import lamina.numpy as jnp

Case = Callable[[Any, Any], Any]  # (numpy module, top-level module) -> result

CASES: dict[str, tuple[Case, type[BaseException]]] = {
    "add": (lambda np, m: np.add(np.ones(3), np.ones(4)), TypeError),
    "mul_operator": (lambda np, m: np.ones(3) * np.ones(4), TypeError),
    "lt_operator": (lambda np, m: np.ones(3) < np.ones(4), TypeError),
    "and_operator": (lambda np, m: np.ones(3, bool) & np.ones(4, bool), TypeError),
    "floordiv_operator": (lambda np, m: np.ones(3) // np.ones(4), TypeError),
    "mod_operator": (lambda np, m: np.ones(3) % np.ones(4), TypeError),
    "power": (lambda np, m: np.power(np.ones(3), np.ones(4)), TypeError),
    "arctan2": (lambda np, m: np.arctan2(np.ones(3), np.ones(4)), TypeError),
    "maximum": (lambda np, m: np.maximum(np.ones(3), np.ones(4)), TypeError),
    "equal": (lambda np, m: np.equal(np.ones(3), np.ones(4)), TypeError),
    "dot": (lambda np, m: np.dot(np.ones(3), np.ones(4)), TypeError),
    "matmul": (lambda np, m: np.matmul(np.ones((2, 3)), np.ones((4, 2))), TypeError),
    "matmul_operator": (lambda np, m: np.ones(3) @ np.ones((4, 2)), TypeError),
    "vdot": (lambda np, m: np.vdot(np.ones(3), np.ones(4)), TypeError),
    "inner": (lambda np, m: np.inner(np.ones(3), np.ones(4)), TypeError),
    "where": (lambda np, m: np.where(np.ones(3) > 0, np.ones(4), 0), ValueError),
    "broadcast_arrays": (lambda np, m: np.broadcast_arrays(np.ones(3), np.ones(4)), ValueError),
    "broadcast_shapes": (lambda np, m: np.broadcast_shapes((3,), (4,)), ValueError),
    "select": (lambda np, m: np.select([np.ones(3) > 0], [np.ones(4)]), ValueError),
    "stack": (lambda np, m: np.stack([np.ones(3), np.ones(4)]), ValueError),
    "reshape": (lambda np, m: np.ones(3).reshape(4), TypeError),
    "jit_add": (lambda np, m: m.jit(lambda a, b: a + b)(np.ones(3), np.ones(4)), TypeError),
    "vmap_add": (lambda np, m: m.vmap(lambda a: a + np.ones(4))(np.ones((2, 3))), TypeError),
}


def _raised(case: Case, np: Any, m: Any) -> type[BaseException] | None:
    try:
        case(np, m)
    except Exception as e:  # noqa: BLE001 - the class is what is compared
        return type(e)
    return None


def _builtin_base(cls: type[BaseException] | None) -> type[BaseException] | None:
    """The built-in class a library's exception class derives from."""
    if cls is None:
        return None
    for base in cls.__mro__:
        if base.__module__ == "builtins":
            return base
    return cls


@pytest.mark.parametrize("name", sorted(CASES))
def test_lamina_raises_jax_exception_class(name: str) -> None:
    case, expected = CASES[name]
    assert _builtin_base(_raised(case, jnp, lx)) is expected


@pytest.mark.peer
@pytest.mark.parametrize("name", sorted(CASES))
def test_table_matches_jax(name: str) -> None:
    jax = importlib.import_module("jax")
    jax_numpy = importlib.import_module("jax.numpy")
    case, expected = CASES[name]
    assert _builtin_base(_raised(case, jax_numpy, jax)) is expected
