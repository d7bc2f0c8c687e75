"""Runs equinox's own test files on lamina, through the JAX alias.

equinox's wheel and its sdist (0.13.8) ship no tests, so this script takes
the folder of a checkout's ``tests/`` (the release's tag) with ``--tests``;
without it, it downloads the installed version's sdist into a temporary
folder with pip and uses the tests there, if that sdist has them. Each test
file runs in its own ``pytest -p lamina.compat`` process with a time limit
(the runner of ``run_optax.py``), and the script prints passed/failed/skipped/
errors per file and in total, then the most frequent failure causes. Run it
in the ``ecosystem`` environment::

    hatch run ecosystem:equinox -- --tests /path/to/equinox/tests
    hatch run ecosystem:equinox -- --tests DIR -k test_filter_jit --jobs 2

``--jax`` runs the same files on the real JAX instead (in an environment that
has jax and equinox), for the count to compare with. The exit status is 0
when every test ran passed or skipped, 1 otherwise.
"""

from __future__ import annotations

import argparse
import concurrent.futures
import importlib.metadata
import subprocess
import sys
import tarfile
import tempfile
from pathlib import Path

from run_optax import FileResult, report, run_file


def sdist_tests(workdir: Path) -> Path | None:
    """The ``tests`` folder of the installed equinox's sdist, or None when the
    sdist has none (0.13.8's has none)."""
    version = importlib.metadata.version("equinox")
    # hatch's uv environments have no pip: the interpreter the environment was made from downloads
    python = getattr(sys, "_base_executable", None) or sys.executable
    subprocess.run([python, "-m", "pip", "download", f"equinox=={version}", "--no-deps",
                    "--no-binary", ":all:", "--no-build-isolation", "-q", "-d", str(workdir)],
                   check=True)
    archive = next(workdir.glob("equinox-*.tar.gz"))
    with tarfile.open(archive) as tar:
        tar.extractall(workdir, filter="data")
    tests = workdir / archive.name.removesuffix(".tar.gz") / "tests"
    return tests if tests.is_dir() else None


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tests", type=Path, help="folder of equinox's test files")
    parser.add_argument("-k", dest="pattern", help="only the files whose name contains this")
    parser.add_argument("--timeout", type=float, default=900.0,
                        help="seconds one file may take (default 900)")
    parser.add_argument("--jobs", type=int, default=1, help="files run at the same time")
    parser.add_argument("--causes", type=int, default=10,
                        help="how many of the most frequent failure causes to print")
    parser.add_argument("--jax", action="store_true", help="run on the real jax instead")
    parser.add_argument("--json", type=Path, help="also write the results to this file")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="run_equinox_") as tmp:
        workdir = Path(tmp)
        tests = args.tests or sdist_tests(workdir)
        if tests is None:
            print("run_equinox: the equinox sdist has no tests; give a checkout's tests "
                  "folder with --tests", file=sys.stderr)
            return 2
        files = sorted(p for p in tests.glob("test_*.py")
                       if not args.pattern or args.pattern in p.name)
        if not files:
            print(f"run_equinox: no test files in {tests}", file=sys.stderr)
            return 1
        (workdir / "pytest.ini").write_text("[pytest]\n")
        side = "jax" if args.jax else "lamina"
        print(f"run_equinox: {len(files)} test files from {tests} on {side}, {args.jobs} at a "
              f"time, {args.timeout:.0f} s each at most", flush=True)
        plugin = () if args.jax else ("-p", "lamina.compat")
        with concurrent.futures.ThreadPoolExecutor(args.jobs) as pool:
            futures = [pool.submit(run_file, f, tests, args.timeout, workdir, plugin=plugin)
                       for f in files]
            results: list[FileResult] = []
            for future in concurrent.futures.as_completed(futures):
                r = future.result()
                results.append(r)
                print(f"  {r.path}: {r.passed} passed, {r.failed} failed, {r.skipped} skipped, "
                      f"{r.errors} errors ({r.seconds:.0f} s)", flush=True)
    results.sort(key=lambda r: r.path)
    return report(results, args.causes, args.json)


if __name__ == "__main__":
    sys.exit(main())
