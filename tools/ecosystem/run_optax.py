"""Runs optax's own test files on lamina, through the JAX alias.

optax's wheel ships its tests beside its modules (``optax/**/*_test.py``).
This script finds them in the installed package (without importing optax,
which imports jax), runs each in its own ``pytest -p lamina.compat`` process
with a time limit, and prints passed/failed/skipped/errors per file and in
total, then the most frequent failure causes (the missing ``jax.<name>`` each
needs first). Run it in the ``ecosystem`` environment::

    hatch run ecosystem:optax                 # every file
    hatch run ecosystem:optax -k alias_test   # files whose path contains a pattern
    hatch run ecosystem:optax --jobs 4 --timeout 3000 --json out.json

The exit status is 0 when every test ran passed or skipped, 1 otherwise.
"""

from __future__ import annotations

import argparse
import collections
import concurrent.futures
import dataclasses
import importlib.util
import json
import os
import re
import subprocess
import sys
import tempfile
import time
import xml.etree.ElementTree as ET
from pathlib import Path


@dataclasses.dataclass
class FileResult:
    """What one test file's pytest process reported."""

    path: str
    passed: int = 0
    failed: int = 0
    skipped: int = 0
    errors: int = 0
    seconds: float = 0.0
    status: str = "ok"  # ok | timeout | crashed (no report written)
    causes: list[str] = dataclasses.field(default_factory=list)

    @property
    def total(self) -> int:
        return self.passed + self.failed + self.skipped + self.errors


def optax_test_files(pattern: str | None = None) -> tuple[Path, list[Path]]:
    """The installed optax's folder and its ``*_test.py`` files, sorted."""
    spec = importlib.util.find_spec("optax")
    if spec is None or not spec.submodule_search_locations:
        raise SystemExit("run_optax: optax is not installed here: use `hatch run ecosystem:optax`")
    root = Path(next(iter(spec.submodule_search_locations)))
    files = sorted(root.rglob("*_test.py"))
    if pattern:
        files = [f for f in files if pattern in str(f.relative_to(root))]
    return root, files


_MISSING_ATTR = re.compile(r"lamina does not implement (jax(?:\.\w+)+)")
_MISSING_MODULE = re.compile(r"No module named '(jax(?:\.\w+)*)'")
_OTHER_ATTR = re.compile(r"(module '[\w.]+' has no attribute '\w+'|'\w+' object has no attribute '\w+')")
_ERROR_LINE = re.compile(r"^E\s+(\w+(?:Error|Exception)\b.*)$", re.MULTILINE)


def failure_cause(text: str) -> str:
    """One line naming why a test failed: the missing jax name when there is one."""
    for regex, label in ((_MISSING_ATTR, "missing {}"), (_MISSING_MODULE, "missing module {}"),
                         (_OTHER_ATTR, "{}")):
        match = regex.search(text)
        if match:
            return label.format(match.group(1))
    match = _ERROR_LINE.search(text)
    if match:
        return match.group(1)[:160]
    lines = [line for line in text.strip().splitlines() if line.strip()]
    return lines[-1][:160] if lines else "no message"


def _read_report(report: Path, result: FileResult) -> None:
    for case in ET.parse(report).getroot().iter("testcase"):
        failure = case.find("failure")
        error = case.find("error")
        if case.find("skipped") is not None:
            result.skipped += 1
        elif failure is not None or error is not None:
            node = failure if failure is not None else error
            assert node is not None
            if failure is not None:
                result.failed += 1
            else:
                result.errors += 1
            text = "\n".join(filter(None, (node.get("message"), node.text)))
            result.causes.append(failure_cause(text))
        else:
            result.passed += 1


def run_file(path: Path, root: Path, timeout: float, workdir: Path,
             plugin: tuple[str, ...] = ("-p", "lamina.compat")) -> FileResult:
    """Runs one test file in a fresh pytest process under the alias (``plugin``
    empty: on whatever ``jax`` the environment has)."""
    relative = str(path.relative_to(root.parent))
    result = FileResult(relative)
    report = workdir / (relative.replace(os.sep, "__") + ".xml")
    config = workdir / "pytest.ini"  # an empty config: no settings of any project apply
    command = [sys.executable, "-m", "pytest", *plugin, "-p", "no:cacheprovider",
               "-c", str(config), "--rootdir", str(root.parent), "-q", "--tb=short",
               f"--junitxml={report}", str(path)]
    start = time.perf_counter()
    try:
        proc = subprocess.run(command, cwd=workdir, capture_output=True, text=True,
                              timeout=timeout)
    except subprocess.TimeoutExpired:
        result.status = "timeout"
        result.causes.append(f"timeout after {timeout:.0f} s")
    else:
        if not report.exists():
            result.status = "crashed"
            result.causes.append(failure_cause(proc.stdout + proc.stderr))
    result.seconds = time.perf_counter() - start
    if report.exists():
        _read_report(report, result)
    if result.status != "ok" and result.total == 0:
        result.errors = 1  # the file produced no result: count it as one error
    return result


def _table(results: list[FileResult]) -> str:
    width = max([len(r.path) for r in results] + [5])
    head = f"{'file':<{width}}  {'passed':>6} {'failed':>6} {'skipped':>7} {'errors':>6} {'s':>6}"
    lines = [head, "-" * len(head)]
    for r in results:
        note = "" if r.status == "ok" else f"  ({r.status})"
        lines.append(f"{r.path:<{width}}  {r.passed:>6} {r.failed:>6} {r.skipped:>7} "
                     f"{r.errors:>6} {r.seconds:>6.0f}{note}")
    total = FileResult("total", sum(r.passed for r in results), sum(r.failed for r in results),
                       sum(r.skipped for r in results), sum(r.errors for r in results),
                       sum(r.seconds for r in results))
    lines.append("-" * len(head))
    lines.append(f"{'total':<{width}}  {total.passed:>6} {total.failed:>6} {total.skipped:>7} "
                 f"{total.errors:>6} {total.seconds:>6.0f}")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("-k", dest="pattern", help="only the files whose path contains this")
    # contrib/_common_test.py (545 tests, most scanning 30,000 optimizer
    # steps) takes half an hour on two busy cores, on JAX as on lamina
    parser.add_argument("--timeout", type=float, default=3000.0,
                        help="seconds one file may take (default 3000)")
    parser.add_argument("--jobs", type=int, default=max(1, (os.cpu_count() or 2) // 2),
                        help="files run at the same time (default: half the CPUs)")
    parser.add_argument("--causes", type=int, default=10,
                        help="how many of the most frequent failure causes to print")
    parser.add_argument("--json", type=Path, help="also write the results to this file")
    args = parser.parse_args(argv)
    root, files = optax_test_files(args.pattern)
    if not files:
        print(f"run_optax: no test files under {root}", file=sys.stderr)
        return 1
    print(f"run_optax: {len(files)} test files from {root}, {args.jobs} at a time, "
          f"{args.timeout:.0f} s each at most", flush=True)
    with tempfile.TemporaryDirectory(prefix="run_optax_") as tmp:
        workdir = Path(tmp)
        (workdir / "pytest.ini").write_text("[pytest]\n")
        with concurrent.futures.ThreadPoolExecutor(args.jobs) as pool:
            futures = {pool.submit(run_file, f, root, args.timeout, workdir): f for f in files}
            for future in concurrent.futures.as_completed(futures):
                r = future.result()
                print(f"  {r.path}: {r.passed} passed, {r.failed} failed, {r.skipped} skipped, "
                      f"{r.errors} errors ({r.seconds:.0f} s)", flush=True)
            results = sorted((fut.result() for fut in futures), key=lambda r: r.path)
    return report(results, args.causes, args.json)


def report(results: list[FileResult], top_causes: int, json_path: Path | None) -> int:
    """Prints the table and the most frequent failure causes, writes the JSON
    file when asked, and returns the exit status (0: nothing failed)."""
    print()
    print(_table(results))
    causes = collections.Counter(c for r in results for c in r.causes)
    if causes:
        print("\nmost frequent failure causes (failed or errored tests per cause):")
        for cause, count in causes.most_common(top_causes):
            print(f"  {count:>5}  {cause}")
    if json_path:
        json_path.write_text(json.dumps([dataclasses.asdict(r) for r in results], indent=1))
    return 0 if all(r.failed == 0 and r.errors == 0 for r in results) else 1


if __name__ == "__main__":
    sys.exit(main())
