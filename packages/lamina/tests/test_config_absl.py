"""``config.config_with_absl`` and ``config.parse_flags_with_absl``: JAX's
settings as absl flags (``--jax_enable_x64``), as JAX's examples and test
files use them. The flag-parsing cases run in a child process each: absl's
flags are global to a process."""

import subprocess
import sys
import textwrap

import lamina
import pytest

pytest.importorskip("absl")


def _run(program: str, *args: str) -> str:
    proc = subprocess.run([sys.executable, "-c", textwrap.dedent(program), *args],
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    return proc.stdout.strip()


def test_config_with_absl_reads_the_command_line():
    out = _run("""
        from absl import app, flags
        import lamina
        import lamina.numpy as jnp

        def main(argv):
            f = flags.FLAGS
            print(lamina.config.read("jax_enable_x64"), jnp.zeros(2).dtype, argv[1:],
                  f["jax_debug_nans"].flag_type(), f["jax_numpy_rank_promotion"].default,
                  f["jax_platforms"].flag_type())

        lamina.config.config_with_absl()
        lamina.config.config_with_absl()  # a second call defines nothing twice
        app.run(main)
    """, "--jax_enable_x64", "rest")
    assert out == "True float64 ['rest'] bool allow string"


def test_parse_flags_with_absl_takes_only_jax_flags_before_a_double_dash():
    out = _run("""
        import sys
        import lamina
        lamina.config.parse_flags_with_absl()
        print(lamina.config.read("jax_numpy_rank_promotion"),
              lamina.config.read("jax_enable_x64"), sys.argv[1:])
    """, "--jax_numpy_rank_promotion=raise", "--other=1", "--", "--jax_enable_x64")
    assert out == ("raise False ['--jax_numpy_rank_promotion=raise', '--other=1', '--', "
                   "'--jax_enable_x64']")


def test_without_absl_the_error_says_what_is_needed(monkeypatch):
    monkeypatch.setitem(sys.modules, "absl", None)
    with pytest.raises(ImportError, match=r"lamina.config.config_with_absl needs absl-py"):
        lamina.config.config_with_absl()
