"""Runs JAX's own example programs, unmodified, on lamina (or on JAX) and
compares the numbers they print.

The examples are JAX's files and are not part of this repository: JAX's PyPI
packages do not ship them, so they are read from a folder holding the
``examples/`` of a JAX source checkout at the tag ``jax-v0.10.2``, given by
``--examples-dir`` or the ``LAMINA_JAX_EXAMPLES`` environment variable. The
MNIST download they start with is replaced by the synthetic stand-in
``tools/ecosystem/jax_examples/datasets.py`` (our code, same functions).

Each example runs in its own process, from a scratch folder laid out as JAX's
repository is (``examples/__init__.py``, the stand-in ``examples/datasets.py``
and a copy of the script, the folder on ``PYTHONPATH``), so both
``from examples import datasets`` and ``import datasets`` (the script's own
folder) find the stand-in. It runs either under the JAX alias
(``python -m lamina.compat script.py``, ``--on lamina``) or on the real JAX
(``--on jax``, in the ``peer`` environment). The run's environment also has:

- ``sitecustomize.py`` (``jax_examples/sitecustomize.py``), which seeds
  NumPy's global random state with 0: ``kernel_lsq.py`` draws its data from it
  unseeded, and both runs must see the same data (on JAX it imports ``jax``
  first: JAX's import draws from that state, lamina's does not);
- where ``matplotlib`` is not installed, a stand-in that accepts the plotting
  calls and draws nothing (``jax_examples/standins/matplotlib``): nothing the
  examples print depends on a plot;
- ``MPLBACKEND=Agg`` (the real matplotlib draws off-screen), and eight host
  devices for the SPMD example.

``differentially_private_sgd.py`` and ``gaussian_process_regression.py`` use
``absl-py`` and ``dp-accounting``, which the ``ecosystem`` and ``peer``
environments install. The numbers each example prints (durations such as
``1.52 sec`` left out, and digits inside names such as ``f32`` or
``np.int64``) are written to ``--json``; ``--compare lamina.json jax.json``
then reports, per example, whether lamina printed JAX's numbers::

    hatch run ecosystem:examples --examples-dir DIR --json lamina.json
    hatch run peer:python tools/ecosystem/run_jax_examples.py --on jax \\
        --examples-dir DIR --json jax.json
    python tools/ecosystem/run_jax_examples.py --compare lamina.json jax.json
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import math
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

#: The examples run, with the arguments that keep each short (JAX's flags).
EXAMPLES: dict[str, list[str]] = {
    "kernel_lsq.py": [],
    "mnist_classifier_fromscratch.py": [],
    "mnist_classifier.py": [],
    "differentially_private_sgd.py": ["--epochs=3", "--batch_size=128"],
    "gaussian_process_regression.py": [],
    "advi.py": [],
    "mnist_vae.py": [],
    "spmd_mnist_classifier_fromscratch.py": [],
}

HERE = Path(__file__).resolve().parent / "jax_examples"
STAND_IN = HERE / "datasets.py"
SITE_CUSTOMIZE = HERE / "sitecustomize.py"
STAND_IN_MODULES = HERE / "standins"
# a number not glued to a name (the 32 of f32, the 64 of np.int64 are not numbers)
_NUMBER = re.compile(r"(?<![\w.])(?:[-+]?(?:\d+\.\d*|\.\d+|\d+)(?:[eE][-+]?\d+)?|nan|inf)"
                     r"(?![A-Za-z_])")
# a duration: a number followed by a unit of time (left out of the comparison)
_DURATION = re.compile(r"[-+]?(?:\d+\.\d*|\.\d+|\d+)(?:[eE][-+]?\d+)?\s*"
                       r"(?:sec|seconds?|s|ms)\b")


def printed_numbers(text: str) -> list[float]:
    """Every number in ``text`` but durations (``1.52 sec``) and digits
    glued to a name (``f32``, ``np.int64``)."""
    numbers: list[float] = []
    for line in text.splitlines():
        numbers.extend(float(m) for m in _NUMBER.findall(_DURATION.sub(" ", line)))
    return numbers


def scratch_folder(root: Path, script: Path) -> Path:
    """Lays out ``root`` as JAX's repository is for ``script`` (the package
    ``examples`` with the synthetic ``datasets`` beside the script) plus the
    start-up seeding; returns the script's copy. ``root`` goes on
    ``PYTHONPATH`` and the script's folder is its ``sys.path[0]``."""
    package = root / "examples"
    package.mkdir(parents=True, exist_ok=True)
    (package / "__init__.py").write_text("")
    shutil.copy(STAND_IN, package / "datasets.py")
    shutil.copy(SITE_CUSTOMIZE, root / "sitecustomize.py")
    shutil.copy(script, package / script.name)
    return package / script.name


def example_environment(root: Path, on: str) -> dict[str, str]:
    """The environment an example runs in (see the module's docstring)."""
    paths = [str(root)]
    if importlib.util.find_spec("matplotlib") is None:
        paths.append(str(STAND_IN_MODULES))
    if os.environ.get("PYTHONPATH"):
        paths.append(os.environ["PYTHONPATH"])
    return dict(os.environ, PYTHONPATH=os.pathsep.join(paths), MPLBACKEND="Agg",
                LAMINA_EXAMPLE_PRELOAD="jax" if on == "jax" else "",
                XLA_FLAGS=os.environ.get("XLA_FLAGS", "--xla_force_host_platform_device_count=8"))


def run_example(script: Path, on: str, args: list[str], timeout: float) -> dict[str, object]:
    """Runs one example in a fresh process; its exit status, printed numbers and output tail."""
    with tempfile.TemporaryDirectory(prefix="jax_example_") as tmp:
        copy = scratch_folder(Path(tmp), script)
        prefix = [sys.executable, "-m", "lamina.compat"] if on == "lamina" else [sys.executable]
        start = time.perf_counter()
        try:
            proc = subprocess.run([*prefix, str(copy), *args], cwd=tmp,
                                  env=example_environment(Path(tmp), on), text=True,
                                  capture_output=True, timeout=timeout)
        except subprocess.TimeoutExpired as e:
            out = (e.stdout or "") if isinstance(e.stdout, str) else ""
            return {"rc": "timeout", "numbers": printed_numbers(out), "tail": out[-2000:],
                    "seconds": timeout}
        return {"rc": proc.returncode, "numbers": printed_numbers(proc.stdout),
                "tail": (proc.stdout + proc.stderr)[-2000:],
                "seconds": round(time.perf_counter() - start, 1)}


def relative_difference(ours: float, theirs: float) -> float:
    """``|ours - theirs| / |theirs|``; equal values (NaN beside NaN, an infinity
    beside the same infinity) differ by 0, a NaN or infinity beside anything
    else by ``inf`` (never NaN, which ``max`` would pass over)."""
    if ours == theirs or (math.isnan(ours) and math.isnan(theirs)):
        return 0.0
    if not (math.isfinite(ours) and math.isfinite(theirs)):
        return math.inf
    return abs(ours - theirs) / max(abs(theirs), 1e-12)


def compare(lamina_file: Path, jax_file: Path, rtol: float) -> int:
    """Prints, per example, whether lamina ran and printed JAX's numbers."""
    ours, theirs = json.loads(lamina_file.read_text()), json.loads(jax_file.read_text())
    bad = 0
    for name in sorted(set(ours) | set(theirs)):
        a, b = ours.get(name), theirs.get(name)
        if a is None or b is None:
            print(f"{name}: only in {'the JAX run' if a is None else 'the lamina run'}")
            bad += 1
            continue
        if a["rc"] != 0 or b["rc"] != 0:
            print(f"{name}: exit status lamina {a['rc']}, JAX {b['rc']}")
            bad += 1
            continue
        x, y = a["numbers"], b["numbers"]
        worst = max((relative_difference(p, q) for p, q in zip(x, y)), default=0.0)
        same = len(x) == len(y) and worst <= rtol
        bad += not same
        print(f"{name}: {len(x)} numbers (JAX {len(y)}), largest relative difference "
              f"{worst:.3g} -> {'same' if same else 'DIFFERENT'}")
    return 1 if bad else 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--examples-dir", type=Path,
                        default=os.environ.get("LAMINA_JAX_EXAMPLES"),
                        help="JAX's examples/ folder (default: $LAMINA_JAX_EXAMPLES)")
    parser.add_argument("--on", choices=("lamina", "jax"), default="lamina")
    parser.add_argument("-k", dest="pattern", help="only the examples whose name contains this")
    parser.add_argument("--timeout", type=float, default=900.0)
    parser.add_argument("--json", type=Path, help="write the results here")
    parser.add_argument("--compare", type=Path, nargs=2, metavar=("LAMINA_JSON", "JAX_JSON"))
    parser.add_argument("--rtol", type=float, default=1e-5)
    args = parser.parse_args(argv)
    if args.compare:
        return compare(*args.compare, rtol=args.rtol)
    if args.examples_dir is None or not Path(args.examples_dir).is_dir():
        print("run_jax_examples: give JAX's examples/ folder (a JAX 0.10.2 source checkout) with "
              "--examples-dir or LAMINA_JAX_EXAMPLES", file=sys.stderr)
        return 2
    results: dict[str, object] = {}
    for name, extra in EXAMPLES.items():
        if args.pattern and args.pattern not in name:
            continue
        script = Path(args.examples_dir) / name
        if not script.is_file():
            print(f"  {name}: not in {args.examples_dir}")
            continue
        result = run_example(script, args.on, extra, args.timeout)
        results[name] = result
        print(f"  {name}: exit {result['rc']}, {len(result['numbers'])} numbers "  # type: ignore[arg-type]
              f"({result['seconds']} s)", flush=True)
        if result["rc"] != 0:
            print("    " + str(result["tail"]).strip().splitlines()[-1])
    if args.json:
        args.json.write_text(json.dumps(results, indent=1))
    return 0 if all(r["rc"] == 0 for r in results.values()) else 1  # type: ignore[index]


if __name__ == "__main__":
    sys.exit(main())
