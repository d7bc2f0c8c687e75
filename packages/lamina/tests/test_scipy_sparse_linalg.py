"""cg, bicgstab and gmres (both solve methods): solutions of dense, functional,
preconditioned, complex and pytree systems against numpy's direct solve;
implicit derivatives; jit; argument errors."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

import lamina
import lamina.numpy as jnp
from lamina.scipy.sparse import linalg as sl

_RNG = np.random.default_rng(0)
_N = 8
_A = _RNG.standard_normal((_N, _N)).astype(np.float32)
SPD = _A @ _A.T + _N * np.eye(_N, dtype=np.float32)
GENERAL = _A + _N * np.eye(_N, dtype=np.float32)
B = _RNG.standard_normal(_N).astype(np.float32)


def _close(got: Any, matrix: Any, rhs: Any, atol: float = 3e-5) -> None:
    want = np.linalg.solve(np.asarray(matrix, np.complex128), np.asarray(rhs, np.complex128))
    np.testing.assert_allclose(np.asarray(got), want, atol=atol)


def test_real_systems_under_jit() -> None:
    def solve_all(spd: Any, general: Any, b: Any) -> dict[str, Any]:
        jacobi = jnp.diag(1 / jnp.diag(general))
        return dict(
            cg=sl.cg(spd, b)[0],
            cg_fn=sl.cg(lambda v: spd @ v, b, M=jnp.diag(1 / jnp.diag(spd)))[0],
            bicgstab=sl.bicgstab(general, b)[0],
            gmres=sl.gmres(general, b)[0],
            gmres_restart=sl.gmres(general, b, restart=3, M=jacobi)[0],
            incremental=sl.gmres(general, b, restart=3, solve_method="incremental")[0],
        )

    out = lamina.jit(solve_all)(SPD, GENERAL, B)
    for name, x in out.items():
        _close(x, SPD if name.startswith("cg") else GENERAL, B)


def test_complex_and_pytree_systems() -> None:
    c = (GENERAL + 1j * _RNG.standard_normal((_N, _N))).astype(np.complex64)
    bc = (B + 1j * B[::-1]).astype(np.complex64)

    def operator(t: Any) -> Any:
        w = GENERAL @ jnp.concatenate([t["head"], t["tail"]])
        return {"head": w[:3], "tail": w[3:]}

    def solve_all(c: Any, bc: Any, b: Any) -> tuple[Any, ...]:
        tree = {"head": b[:3], "tail": b[3:]}
        return (sl.bicgstab(c, bc)[0], sl.gmres(c, bc)[0], sl.bicgstab(operator, tree)[0],
                sl.gmres(operator, tree, solve_method="incremental")[0],
                sl.gmres(GENERAL, b, x0=jnp.ones(_N), maxiter=50))

    complex_bicgstab, complex_gmres, tree_bicgstab, tree_gmres, (x, info) = lamina.jit(
        solve_all)(c, bc, B)
    _close(complex_bicgstab, c, bc)
    _close(complex_gmres, c, bc)
    for t in (tree_bicgstab, tree_gmres):
        _close(np.concatenate([t["head"], t["tail"]]), GENERAL, B)
    _close(x, GENERAL, B)
    assert int(info) == 0


def test_derivatives_solve_the_transposed_system() -> None:
    ones = np.ones(_N)
    g = lamina.grad(lambda b: sl.cg(SPD, b)[0].sum())(B)
    _close(g, SPD.T, ones)
    g = lamina.grad(lambda b: sl.gmres(GENERAL, b)[0].sum())(B)
    _close(g, GENERAL.T, ones)
    g = lamina.grad(lambda b: sl.bicgstab(GENERAL, b)[0].sum())(B)
    _close(g, GENERAL.T, ones)


@pytest.mark.parametrize("call, words", [
    (lambda: sl.cg(np.ones(3), B), "cg: the argument A must be a function or a 2-D"),
    (lambda: sl.cg(SPD, B, x0=np.ones(3)), "cg: the arrays of x0 and b must have the same"),
    (lambda: sl.bicgstab(SPD, B, x0={"a": B}), "bicgstab: x0 and b must have the same tree"),
    (lambda: sl.gmres(SPD, B, solve_method="qr"), "gmres: solve_method must be"),
    (lambda: sl.gmres(SPD, B, restart=0), "gmres: the argument restart must be positive"),
])
def test_bad_arguments(call: Any, words: str) -> None:
    with pytest.raises(ValueError, match=words):
        call()
