""""JAX programs run by swapping the import", checked in fresh processes:

- a plain ``import lamina as lx`` must be enough to run transformations and
  ``lax`` operations eagerly (nothing else imported first);
- jax and lamina coexist in one process and the same training program gives
  the same losses on both (a ``peer`` test: it runs in the environment that
  has jax 0.10.2 beside lamina, ``hatch run peer:test``).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from e2e_helpers import SRC_DIRS, lamina_mlp_losses, peer_python, run_python

FRESH_CASES = [
    pytest.param("numpy", """
        import numpy as np
        import lamina as lx
        import lamina.numpy as jnp
        out = lx.vmap(lambda x: jnp.sin(x) * 2.0)(np.zeros(3, np.float32))
        assert np.asarray(out).tolist() == [0.0, 0.0, 0.0], out
        """, id="jnp_then_vmap"),
    pytest.param("grad", """
        import lamina as lx
        assert float(lx.grad(lambda x: x * 3.0)(1.0)) == 3.0
        """, id="grad_right_after_import"),
    pytest.param("lax", """
        import lamina as lx
        from lamina import lax
        assert abs(float(lax.sin(1.0)) - 0.8414709848) < 1e-6
        """, id="lax_right_after_import"),
]


@pytest.mark.parametrize("name,script", FRESH_CASES)
def test_plain_import_is_enough(name, script):
    proc = run_python(sys.executable, script, timeout=120)
    assert proc.returncode == 0, proc.stderr[-2500:]


def test_pmap_layout_env_var_in_a_fresh_process():
    script = """
        import numpy as np
        import lamina as lx
        if len(lx.devices()) >= 8:
            out = lx.pmap(lambda x: x + 1)(np.zeros((8, 5), np.float32))
            shapes = {s.data.shape for s in out.addressable_shards}
            assert shapes == {(5,)}, shapes
            assert np.asarray(out).sum() == 40.0
        """
    proc = run_python(sys.executable, script, timeout=120,
                      env_extra={"LAMINA_PMAP_CHUNKED_SHARDS": "0"})
    assert proc.returncode == 0, proc.stderr[-2500:]


COEXIST = """
    import json
    import numpy as np
    import jax, jax.numpy as jjnp
    import lamina as lx, lamina.numpy as ljnp
    from e2e_helpers import train_mlp

    def f(x, y):
        return {'s': (x * 2 + y['b']).sum(), 'p': x * y['b']}

    x = np.arange(4, dtype=np.float32)
    y = {'b': np.full(4, 0.5, np.float32)}
    j_out = jax.jit(f)(x, y)
    l_out = lx.jit(f)(x, y)
    jg = jax.jit(jax.grad(lambda a: jjnp.sum(jjnp.sin(a))))(x)
    lg = lx.jit(lx.grad(lambda a: ljnp.sum(ljnp.sin(a))))(x)
    # lamina names its arguments in the module; jax (in the same process) still works after
    names = lx.jit(f).lower(x, y).lowering.arg_names
    again = jax.jit(lambda v: v - 1)(np.ones(3, np.float32))
    print(json.dumps({
        'jax': [float(j_out['s']), np.asarray(j_out['p']).tolist()],
        'lamina': [float(l_out['s']), np.asarray(l_out['p']).tolist()],
        'jax_grad': np.asarray(jg).tolist(), 'lamina_grad': np.asarray(lg).tolist(),
        'names': list(names), 'again': np.asarray(again).tolist(),
        'jax_losses': train_mlp(jax, jjnp, steps=25),
        'lamina_is_not_jax': type(l_out['s']).__module__.split('.')[0],
    }))
    """


@pytest.mark.peer
def test_jax_and_lamina_in_one_process():
    tests_dir = str(Path(__file__).parent)
    proc = run_python(peer_python(), COEXIST, pythonpath=[*SRC_DIRS, tests_dir], timeout=240)
    assert proc.returncode == 0, proc.stderr[-3000:]
    got = json.loads(proc.stdout.strip().splitlines()[-1])
    assert got["jax"] == got["lamina"] == [14.0, [0.0, 0.5, 1.0, 1.5]]
    assert got["jax_grad"] == pytest.approx(got["lamina_grad"], rel=1e-6)
    assert got["names"] == ["x", "y['b']"]
    assert got["again"] == [0.0, 0.0, 0.0]
    assert got["lamina_is_not_jax"].startswith("lamina")
    # the same program (train_mlp), the same PRNG, the same losses; lamina's run is this
    # process's (shared with test_e2e_programs)
    assert list(lamina_mlp_losses(25)) == pytest.approx(got["jax_losses"], rel=1e-4, abs=1e-5)
