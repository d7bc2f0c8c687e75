"""The JAX alias (``lamina.compat``), each case in a fresh process: unmodified
JAX code runs on lamina through ``python -m lamina.compat``, ``pytest -p
lamina.compat`` and ``lamina.compat.install()``.

Checked: the alias refuses a process that has imported another ``jax``; a JAX
script run with ``python -m lamina.compat`` gets ``__main__``, its argv and
lamina's numbers; a JAX test file passes under the pytest plugin (and not
without it); ``jax.<name>`` lamina lacks raises the ``AttributeError`` that
says so; ``jax`` reports JAX's API version while ``lamina`` keeps its own;
``jax.<sub>`` is lamina's module, imported on first use; device-to-host
transfers work while ``jax.core`` is loaded (jaxlib then builds avals with
``jax.core.ShapedArray(shape, dtype, weak_type)``).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

from e2e_helpers import peer_python, run_python


def _run(args: list[str], cwd: Path, timeout: float = 180) -> subprocess.CompletedProcess[str]:
    """``python <args>`` in a fresh process, with the test environments' settings."""
    env = dict(os.environ)
    env["XLA_FLAGS"] = "--xla_force_host_platform_device_count=8"
    env["TF_CPP_MIN_LOG_LEVEL"] = "1"
    env.pop("PYTHONPATH", None)
    return subprocess.run([sys.executable, *args], cwd=cwd, capture_output=True, text=True,
                          timeout=timeout, env=env)


def _last_json(stdout: str) -> object:
    return json.loads(stdout.strip().splitlines()[-1])


JAX_SCRIPT = """
    import json
    import sys

    import numpy as np
    import jax
    import jax.numpy as jnp
    import jax.tree_util
    from jax import lax

    def loss(w, x):
        return jnp.sum(jnp.tanh(x @ w) ** 2)

    w = jnp.arange(6.0, dtype=jnp.float32).reshape(3, 2) / 10
    x = jnp.ones((4, 3), jnp.float32)
    value = jax.jit(loss)(w, x)
    g = jax.jit(jax.grad(loss))(w, x)
    rows = jax.vmap(lambda r: lax.dot(r, w))(x)
    leaves, tree = jax.tree_util.tree_flatten({"b": (1, 2), "a": 3})
    doubled = jax.tree_util.tree_map(lambda v: v * 2, {"a": jnp.float32(1.5)})
    print(json.dumps({
        "name": __name__, "argv": sys.argv[1:], "version": jax.__version__,
        "value": float(value), "grad": np.asarray(g).tolist(),
        "rows": np.asarray(rows).tolist(), "leaves": leaves,
        "unflat": jax.tree_util.tree_unflatten(tree, [10, 20, 30]),
        "doubled": float(doubled["a"]),
    }))
    """


def _expected() -> dict[str, object]:
    """The script's numbers, computed with NumPy in float64."""
    w = np.arange(6.0).reshape(3, 2) / 10
    x = np.ones((4, 3))
    t = np.tanh(x @ w)
    return {"value": float(np.sum(t ** 2)),
            "grad": (x.T @ (2 * t * (1 - t ** 2))).tolist(), "rows": (x @ w).tolist()}


def test_script_runs_unmodified_under_python_m_lamina_compat(tmp_path):
    script = tmp_path / "jax_script.py"
    script.write_text(textwrap.dedent(JAX_SCRIPT))
    proc = _run(["-m", "lamina.compat", str(script), "3", "--flag"], cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr[-3000:]
    out = _last_json(proc.stdout)
    assert isinstance(out, dict)
    expected = _expected()
    assert out["name"] == "__main__"
    assert out["argv"] == ["3", "--flag"]
    assert out["version"] == "0.10.2"
    assert out["value"] == pytest.approx(expected["value"], rel=1e-6)
    np.testing.assert_allclose(out["grad"], expected["grad"], rtol=1e-5)
    np.testing.assert_allclose(out["rows"], expected["rows"], rtol=1e-6)
    assert out["leaves"] == [3, 1, 2]
    assert out["unflat"] == {"a": 10, "b": [20, 30]}  # keys in sorted order; JSON lists
    assert out["doubled"] == 3.0


def test_python_m_lamina_compat_runs_a_module_and_explains_its_usage(tmp_path):
    (tmp_path / "jax_prog.py").write_text(textwrap.dedent("""
        import sys
        import jax.numpy as jnp
        print(__name__, sys.argv[1:], float(jnp.sum(jnp.arange(5.0))))
        """))
    proc = _run(["-m", "lamina.compat", "-m", "jax_prog", "x"], cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert proc.stdout.strip().splitlines()[-1] == "__main__ ['x'] 10.0"
    usage = _run(["-m", "lamina.compat"], cwd=tmp_path)
    assert usage.returncode == 2
    assert "usage: python -m lamina.compat" in usage.stderr


TINY_TESTS = """
    import jax
    import jax.numpy as jnp

    import lamina

    def test_jit_is_lamina_s():
        assert jax.jit is lamina.jit
        assert float(jax.jit(lambda x: x * 3)(jnp.float32(2))) == 6.0

    def test_grad():
        assert float(jax.grad(lambda x: x ** 2)(3.0)) == 6.0
    """


def test_pytest_plugin_runs_a_jax_test_file(tmp_path):
    (tmp_path / "pytest.ini").write_text("[pytest]\n")
    (tmp_path / "conftest.py").write_text("import jax  # a conftest that imports jax first\n")
    (tmp_path / "test_tiny_jax.py").write_text(textwrap.dedent(TINY_TESTS))
    args = ["-m", "pytest", "-q", "-p", "no:cacheprovider", "-c", str(tmp_path / "pytest.ini"),
            "test_tiny_jax.py"]
    proc = _run([*args[:2], "-p", "lamina.compat", *args[2:]], cwd=tmp_path)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-2000:]
    assert "2 passed" in proc.stdout
    without = _run(args, cwd=tmp_path)  # no alias: jax is missing, or is not lamina
    assert without.returncode != 0
    assert "2 passed" not in without.stdout


def test_install_refuses_a_process_that_imported_another_jax():
    proc = run_python(sys.executable, """
        import sys, types
        sys.modules["jax"] = types.ModuleType("jax")  # stands for the real jax, imported first
        import lamina.compat
        meta_path = list(sys.meta_path)
        try:
            lamina.compat.install()
        except RuntimeError as e:
            assert type(e) is lamina.compat.JaxAlreadyImportedError, type(e)
            assert "the real jax is already imported" in str(e), e
            assert "(jax)" in str(e), e
        else:
            raise AssertionError("install() accepted a process with jax imported")
        assert not lamina.compat.installed()
        assert sys.meta_path == meta_path
        """)
    assert proc.returncode == 0, proc.stderr[-3000:]


@pytest.mark.peer
def test_install_refuses_the_real_jax():
    proc = run_python(peer_python(), """
        import jax
        import lamina.compat
        try:
            lamina.compat.install()
        except lamina.compat.JaxAlreadyImportedError as e:
            assert "jax._src" in str(e) or "..." in str(e), e
        else:
            raise AssertionError("install() accepted a process with the real jax")
        import jax.numpy as jnp
        assert jnp.__name__ == "jax.numpy"  # the real jax is left alone
        """)
    assert proc.returncode == 0, proc.stderr[-3000:]


def test_names_versions_and_modules_under_the_alias():
    proc = run_python(sys.executable, """
        import sys
        import lamina.compat
        lamina.compat.install()
        lamina.compat.install()  # idempotent
        assert sys.meta_path.count(lamina.compat._finder) == 1
        import jax
        import lamina
        from lamina.__about__ import __version__ as lamina_version

        # versions: JAX's API version on jax, lamina's own on lamina
        assert jax.__version__ == "0.10.2" and jax.__version_info__ == (0, 10, 2)
        assert lamina.__version__ == lamina_version != "0.10.2"
        assert jax is not lamina and "__version__" in dir(jax) and "jit" in dir(jax)

        # lazy: importing jax imports none of lamina's submodules
        assert "jax.numpy" not in sys.modules and "lamina.numpy" not in sys.modules

        # a name lamina lacks
        try:
            jax.not_a_jax_name
        except AttributeError as e:
            assert str(e) == ("module 'jax' has no attribute 'not_a_jax_name': "
                              "lamina does not implement jax.not_a_jax_name"), str(e)
        else:
            raise AssertionError("jax.not_a_jax_name did not raise")
        assert not hasattr(jax, "also_missing")
        try:
            from jax import also_missing  # noqa: F401
        except ImportError as e:
            assert "also_missing" in str(e)
        else:
            raise AssertionError("from jax import also_missing did not raise")
        # jax.config is JAX's settings object, not a module (as in JAX 0.10.2)
        from jax import config
        config.update("jax_enable_x64", False)
        assert jax.config is config
        for missing in ("jax.not_a_module", "jax.demo", "jax.compat", "jax.numpy.not_a_module",
                        "jax.config"):
            try:
                __import__(missing)
            except ModuleNotFoundError:
                pass
            else:
                raise AssertionError(missing + " was importable")

        # jax.<sub> is lamina's module, imported on first use, its own spec kept
        import jax.numpy as jnp
        from jax import lax
        import jax.tree_util
        from jax.sharding import NamedSharding
        import lamina.sharding
        assert jnp is lamina.numpy and sys.modules["jax.numpy"] is lamina.numpy
        assert lax is lamina.lax and jax.tree_util is lamina.tree_util
        assert NamedSharding is lamina.sharding.NamedSharding
        assert lamina.numpy.__spec__.name == "lamina.numpy"
        assert jax.jit is lamina.jit and jax.core is sys.modules["jax.core"]

        # tracers are jax.core.Tracers
        seen = []
        jax.jit(lambda x: seen.append(isinstance(x, jax.core.Tracer)) or x)(1.0)
        assert seen == [True], seen
        print("ok")
        """)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert proc.stdout.strip().endswith("ok")


def test_device_to_host_transfers_with_jax_core_loaded():
    # jaxlib's C++ builds an array's aval with jax.core.ShapedArray(shape, dtype,
    # weak_type) when a module named jax.core is loaded: lamina.core provides it.
    proc = run_python(sys.executable, """
        import sys
        import numpy as np
        import lamina.compat
        lamina.compat.install()
        import jax, jax.core, jax.numpy as jnp
        from lamina_tracing_core.avals import ShapedArray
        assert "jax.core" in sys.modules and jax.core.ShapedArray is ShapedArray
        x = jnp.arange(4.0, dtype=jnp.float32) * 2
        assert np.asarray(x).tolist() == [0.0, 2.0, 4.0, 6.0]
        y = jax.jit(lambda a: a + 1)(x)
        assert np.asarray(y).tolist() == [1.0, 3.0, 5.0, 7.0]
        assert jax.device_get(y).tolist() == [1.0, 3.0, 5.0, 7.0]
        assert float(x.sum()) == 12.0 and int(jnp.int32(7)) == 7
        w = jnp.asarray(3.0)  # a weakly typed scalar
        assert np.asarray(w).dtype == np.float32 and np.asarray(w) == 3.0
        assert "6." in repr(x)
        print("ok")
        """)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert proc.stdout.strip().endswith("ok")
