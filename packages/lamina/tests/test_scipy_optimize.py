"""lamina.scipy.optimize.minimize: BFGS and L-BFGS find SciPy's minima."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.optimize as so

import lamina
import lamina.numpy as jnp
from lamina.scipy.optimize import OptimizeResults, minimize


def _rosen(x):
    return jnp.sum(100.0 * (x[1:] - x[:-1] ** 2) ** 2 + (1 - x[:-1]) ** 2)


@pytest.mark.parametrize("method, gtol", [("BFGS", 1e-5),
                                          ("l-bfgs-experimental-do-not-rely-on-this", 1e-3)])
def test_minimize_rosenbrock(method, gtol):
    x0 = np.array([-1.2, 1.0, 0.5, -0.3], np.float32)
    result = minimize(_rosen, x0, method=method, options={"gtol": gtol})
    assert isinstance(result, OptimizeResults)
    assert bool(result.success) and int(result.status) == 0
    want = so.minimize(so.rosen, x0.astype(np.float64), method="BFGS").x
    np.testing.assert_allclose(np.asarray(result.x), want, atol=2e-3)
    assert float(result.fun) < 1e-6 and int(result.nit) > 0 and int(result.nfev) >= int(result.nit)
    assert np.max(np.abs(np.asarray(result.jac))) <= gtol
    assert (result.hess_inv is None) == (method != "BFGS")


def test_minimize_under_jit_with_args_and_errors():
    solve = lamina.jit(lambda target: minimize(lambda v, t: jnp.sum((v - t) ** 2), jnp.zeros(3),
                                               (target,), method="BFGS").x)
    np.testing.assert_allclose(np.asarray(solve(jnp.arange(3.0))), [0.0, 1.0, 2.0], atol=1e-5)
    with pytest.raises(ValueError, match="minimize: method must be 'BFGS'"):
        minimize(_rosen, np.zeros(2, np.float32), method="Nelder-Mead")
    with pytest.raises(ValueError, match="minimize: x0 must be 1-D"):
        minimize(_rosen, np.zeros((2, 2), np.float32), method="BFGS")
    with pytest.raises(TypeError, match="minimize: unknown options \\['bogus'\\]"):
        minimize(_rosen, np.zeros(2, np.float32), method="BFGS", options={"bogus": 1})
