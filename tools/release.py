"""Release one lamina package: bump its version, build it, verify its wheel alone.

Run it with a Python that has hatch (the system ``python``, after
``python -m pip install hatch``), from anywhere:

    python tools/release.py bump linear-util minor    # 0.1.0 -> 0.2.0, ranges, changelogs
    python tools/release.py build linear-util         # wheel + sdist in packages/linear-util/dist
    python tools/release.py verify linear-util        # fresh venv, wheel alone, its tests
    python tools/release.py verify all                # build + verify all six, lowest first
    python tools/release.py status                    # versions and whether every range admits them

A package is named by its folder (``linear-util``), distribution name
(``lamina-linear-util``) or import name (``lamina_linear_util``).

Version policy: versions are ``X.Y.Z``. A dependent's range on a lamina
package is the bumped package's compatible series: ``>=0.2,<0.3`` while the
major version is 0 (a minor bump may break), ``>=1.2,<2`` from 1.0 on. A bump
that the existing range already admits (a patch) leaves the range alone.
"""

from __future__ import annotations

import argparse
import datetime as dt
import importlib.util
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import tomllib
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

# check_layers.py lives next to this file; running `python tools/release.py`
# puts this folder first on sys.path, and the tools tests add it too.
from check_layers import (
    Package,
    Workspace,
    WorkspaceError,
    default_root,
    load_workspace,
    normalize_dist,
    requirement_name,
)

PARTS = ("major", "minor", "patch")
TEST_REQUIREMENTS = ("pytest>=8", "hypothesis>=6.100")
_VERSION_LINE = re.compile(r"""(?m)^(?P<lhs>__version__\s*=\s*)(?P<q>["'])(?P<version>[^"']*)(?P=q)""")
_REQUIREMENT = re.compile(
    r"^(?P<name>[A-Za-z0-9](?:[A-Za-z0-9._-]*[A-Za-z0-9])?)\s*(?P<extras>\[[^\]]*\])?"
    r"\s*(?P<spec>[^;]*?)\s*(?P<marker>;.*)?$"
)
_CLAUSE = re.compile(r"^\s*(?P<op>~=|==|!=|<=|>=|<|>)\s*(?P<version>[0-9]+(?:\.[0-9]+)*)(?P<star>\.\*)?\s*$")
_UNRELEASED = re.compile(r"(?im)^##[ \t]+\[?unreleased\]?[ \t]*$")
_HEADING2 = re.compile(r"(?m)^##\s")


class ReleaseError(Exception):
    """A release step cannot go on; the message says why and what to do."""


@dataclass(frozen=True, order=True)
class Version:
    """A release version ``major.minor.patch``."""

    major: int
    minor: int
    patch: int

    @classmethod
    def parse(cls, text: str) -> Version:
        """Parse ``X.Y.Z``; anything else (pre-releases included) is an error."""
        match = re.fullmatch(r"(\d+)\.(\d+)\.(\d+)", text.strip())
        if match is None:
            raise ReleaseError(f"version {text!r} is not of the form X.Y.Z")
        return cls(*(int(part) for part in match.groups()))

    def bump(self, part: str) -> Version:
        """The next version after raising ``part`` (major, minor or patch)."""
        if part == "major":
            return Version(self.major + 1, 0, 0)
        if part == "minor":
            return Version(self.major, self.minor + 1, 0)
        if part == "patch":
            return Version(self.major, self.minor, self.patch + 1)
        raise ReleaseError(f"bump: part must be one of {', '.join(PARTS)}, not {part!r}")

    def compatible_range(self) -> str:
        """The specifier admitting this version's series, e.g. ``>=0.2,<0.3`` or ``>=1.2,<2``."""
        if self.major == 0:
            return f">=0.{self.minor},<0.{self.minor + 1}"
        return f">={self.major}.{self.minor},<{self.major + 1}"

    def __str__(self) -> str:
        return f"{self.major}.{self.minor}.{self.patch}"


def _as_tuple(text: str, width: int) -> tuple[int, ...]:
    """A dotted version as integers, zero-padded to ``width`` places."""
    parts = [int(p) for p in text.split(".")]
    return tuple(parts + [0] * (width - len(parts)))


def _clause_admits(op: str, bound: str, star: bool, version: Version) -> bool:
    """Whether one specifier clause (``>=0.1``, ``==0.1.*``, ``~=1.2``) admits ``version``."""
    have = (version.major, version.minor, version.patch)
    if star:  # ==X.Y.* / !=X.Y.*: compare the leading places only
        prefix = _as_tuple(bound, 0)
        matches = have[: len(prefix)] == prefix
        return matches if op == "==" else not matches if op == "!=" else False
    width = max(3, bound.count(".") + 1)
    want = _as_tuple(bound, width)
    have_w = have + (0,) * (width - 3)
    if op == "~=":
        places = bound.count(".")  # ~=1.2 -> >=1.2,==1.*
        return have_w >= want and have_w[:places] == want[:places]
    checks = {
        "==": have_w == want, "!=": have_w != want, ">=": have_w >= want,
        "<=": have_w <= want, ">": have_w > want, "<": have_w < want,
    }
    return checks[op]


def specifier_admits(spec: str, version: Version) -> bool:
    """Whether a comma-separated specifier admits ``version`` (an empty one admits all)."""
    for clause in filter(None, (c.strip() for c in spec.split(","))):
        match = _CLAUSE.match(clause)
        if match is None:
            raise ReleaseError(f"cannot read the version clause {clause!r}")
        if not _clause_admits(match["op"], match["version"], bool(match["star"]), version):
            return False
    return True


def rewrite_requirement(requirement: str, version: Version) -> str | None:
    """The requirement with a range admitting ``version``, or None when it already does."""
    match = _REQUIREMENT.match(requirement.strip())
    if match is None:
        raise ReleaseError(f"cannot read the requirement {requirement!r}")
    if specifier_admits(match["spec"], version):
        return None
    extras = match["extras"] or ""
    marker = f" {match['marker']}" if match["marker"] else ""
    return f"{match['name']}{extras}{version.compatible_range()}{marker}"


def _pyproject(pkg: Package) -> dict[str, object]:
    return tomllib.loads((pkg.path / "pyproject.toml").read_text(encoding="utf-8"))


def version_file(pkg: Package) -> Path:
    """The file holding ``__version__``: [tool.hatch.version] path, else ``src/<import>/__about__.py``."""
    data: object = _pyproject(pkg)
    for key in ("tool", "hatch", "version"):
        data = data.get(key, {}) if isinstance(data, dict) else {}
    path = data.get("path") if isinstance(data, dict) else None
    if isinstance(path, str):
        return pkg.path / path
    return pkg.path / "src" / pkg.import_names[0] / "__about__.py"


def read_version(pkg: Package) -> Version:
    """The package's current version, read from its version file."""
    path = version_file(pkg)
    match = _VERSION_LINE.search(path.read_text(encoding="utf-8")) if path.is_file() else None
    if match is None:
        raise ReleaseError(f"{path}: no `__version__ = \"X.Y.Z\"` line")
    return Version.parse(match["version"])


def write_version(pkg: Package, version: Version) -> Path:
    """Replace the ``__version__`` value in the package's version file; return the file."""
    path = version_file(pkg)
    text = path.read_text(encoding="utf-8")
    path.write_text(_VERSION_LINE.sub(lambda m: f"{m['lhs']}{m['q']}{version}{m['q']}", text, count=1),
                    encoding="utf-8")
    return path


def requirements_on(dependent: Package, dist: str) -> list[str]:
    """Every requirement string in ``dependent``'s [project] tables that names ``dist``."""
    project = _pyproject(dependent).get("project", {})
    found: list[str] = []
    if isinstance(project, dict):
        groups: list[object] = [project.get("dependencies", [])]
        optional = project.get("optional-dependencies", {})
        if isinstance(optional, dict):
            groups.extend(optional.values())
        for group in groups:
            if isinstance(group, list):
                found.extend(r for r in group if isinstance(r, str) and requirement_name(r) == normalize_dist(dist))
    return found


def replace_requirement_text(path: Path, old: str, new: str) -> None:
    """Swap the quoted requirement ``old`` for ``new`` in a pyproject.toml, keeping its layout."""
    text = path.read_text(encoding="utf-8")
    pattern = re.compile(r"""(["'])""" + re.escape(old) + r"\1")
    updated, count = pattern.subn(lambda m: f"{m[1]}{new}{m[1]}", text)
    if count == 0:
        raise ReleaseError(f"{path}: cannot find the requirement text {old!r} to update")
    path.write_text(updated, encoding="utf-8")


def has_heading(changelog: str, version: Version) -> bool:
    """Whether a CHANGELOG text already has a ``## <version>`` heading."""
    return re.search(rf"(?m)^##[ \t]+\[?{re.escape(str(version))}\]?([ \t]|$)", changelog) is not None


def changelog_release(path: Path, version: Version, date: dt.date) -> str:
    """Move the "Unreleased" entries of a CHANGELOG under a new ``## version — date`` heading.

    An empty "Unreleased" heading stays on top for the next changes. Returns
    the new heading.
    """
    heading = f"## {version} — {date.isoformat()}"
    text = path.read_text(encoding="utf-8") if path.is_file() else f"# Changelog — {path.parent.name}\n"
    if has_heading(text, version):
        raise ReleaseError(f"{path}: already has a heading for {version}")
    unreleased = _UNRELEASED.search(text)
    if unreleased is None:  # no Unreleased section: the new one goes after the title block
        first = _HEADING2.search(text)
        head, body, rest = (text[: first.start()], "", text[first.start():]) if first else (text, "", "")
    else:
        after = _HEADING2.search(text, unreleased.end())
        end = after.start() if after else len(text)
        head, body, rest = text[: unreleased.start()], text[unreleased.end(): end], text[end:]
    entries = body.strip() or "- No changes recorded."
    head = head.rstrip("\n") + "\n\n"
    rest = ("\n" + rest) if rest else ""
    path.write_text(f"{head}## Unreleased\n\n{heading}\n\n{entries}\n{rest}", encoding="utf-8")
    return heading


def changelog_note(path: Path, entry: str) -> None:
    """Add ``- entry`` at the end of the CHANGELOG's "Unreleased" section, creating it if needed."""
    text = path.read_text(encoding="utf-8") if path.is_file() else f"# Changelog — {path.parent.name}\n"
    unreleased = _UNRELEASED.search(text)
    if unreleased is None:
        first = _HEADING2.search(text)
        at = first.start() if first else len(text)
        text = text[:at].rstrip("\n") + "\n\n## Unreleased\n\n" + ("\n" + text[at:] if text[at:] else "")
        unreleased = _UNRELEASED.search(text)
        assert unreleased is not None
    after = _HEADING2.search(text, unreleased.end())
    end = after.start() if after else len(text)
    body = text[unreleased.end(): end].strip("\n")
    body = f"{body}\n- {entry}" if body else f"- {entry}"
    tail = "\n" + text[end:] if text[end:] else ""
    path.write_text(f"{text[: unreleased.end()]}\n\n{body}\n{tail}", encoding="utf-8")


@dataclass(frozen=True)
class RangeChange:
    """One dependent's requirement on the bumped package, before and after."""

    dependent: Package
    old: str
    new: str


def bump(workspace: Workspace, name: str, part: str, date: dt.date) -> tuple[Version, Version, list[RangeChange]]:
    """Raise a package's version, its dependents' ranges and the changelogs.

    Everything is checked before the first file is written, so a refused bump
    changes nothing.
    """
    if part not in PARTS:
        raise ReleaseError(f"bump: part must be one of {', '.join(PARTS)}, not {part!r}")
    pkg = workspace.find(name)
    old = read_version(pkg)
    new = old.bump(part)
    # keyed by (folder, old text): a requirement listed twice is rewritten once
    changes = list({
        (dependent.folder, req): RangeChange(dependent, req, rewritten)
        for dependent in workspace.packages if dependent is not pkg
        for req in requirements_on(dependent, pkg.dist)
        if (rewritten := rewrite_requirement(req, new)) is not None
    }.values())
    changelog = pkg.path / "CHANGELOG.md"
    if changelog.is_file() and has_heading(changelog.read_text(encoding="utf-8"), new):
        raise ReleaseError(f"{changelog}: already has a heading for {new}")
    write_version(pkg, new)
    changelog_release(changelog, new, date)
    for change in changes:
        replace_requirement_text(change.dependent.path / "pyproject.toml", change.old, change.new)
        changelog_note(change.dependent.path / "CHANGELOG.md",
                       f"Requires `{change.new}` (was `{change.old}`).")
    return old, new, changes


def hatch_command() -> list[str]:
    """How to run hatch: this interpreter's module if it has one, else ``hatch`` on PATH."""
    if importlib.util.find_spec("hatch") is not None:
        return [sys.executable, "-m", "hatch"]
    found = shutil.which("hatch")
    if found is not None:
        return [found]
    raise ReleaseError(
        f"hatch is neither importable by {sys.executable} nor on PATH; "
        "run `python -m pip install hatch` and use that python: `python tools/release.py ...`"
    )


def _wheel_stem(pkg: Package) -> str:
    """The distribution name as wheel and sdist file names spell it."""
    return re.sub(r"[-_.]+", "_", pkg.dist).lower()


def artifacts(pkg: Package, version: Version) -> tuple[Path | None, Path | None]:
    """The wheel and sdist of ``version`` in the package's dist/ folder, where present."""
    dist = pkg.path / "dist"
    wheels = sorted(dist.glob(f"{_wheel_stem(pkg)}-{version}-*.whl"))
    sdist = dist / f"{_wheel_stem(pkg)}-{version}.tar.gz"
    return (wheels[-1] if wheels else None), (sdist if sdist.is_file() else None)


def _run(cmd: Sequence[str | Path], cwd: Path, env: dict[str, str] | None = None,
         capture: bool = False, label: str | None = None) -> subprocess.CompletedProcess[str]:
    """Run a command, echoing it (or ``label``); raise ReleaseError when it fails."""
    print("+ " + (label or " ".join(str(c) for c in cmd)), flush=True)
    result = subprocess.run([str(c) for c in cmd], cwd=cwd, env=env, text=True,
                            stdout=subprocess.PIPE if capture else None,
                            stderr=subprocess.STDOUT if capture else None, check=False)
    if result.returncode != 0:
        detail = f"\n{result.stdout}" if capture and result.stdout else ""
        raise ReleaseError(f"`{' '.join(str(c) for c in cmd)}` failed with exit status {result.returncode}{detail}")
    return result


def build(pkg: Package) -> tuple[Path, Path]:
    """Build the package's wheel and sdist into ``packages/<folder>/dist`` with hatch."""
    version = read_version(pkg)
    _run([*hatch_command(), "build", "--clean"], cwd=pkg.path)
    wheel, sdist = artifacts(pkg, version)
    if wheel is None or sdist is None:
        raise ReleaseError(f"hatch build in {pkg.path} did not leave {_wheel_stem(pkg)}-{version} "
                           f"wheel and sdist in {pkg.path / 'dist'}")
    print(f"built {wheel.relative_to(pkg.path.parent.parent)} and {sdist.name}")
    return wheel, sdist


def _newest_source_mtime(pkg: Package) -> float:
    """The newest modification time among the files that go into the wheel."""
    files = [p for p in (pkg.path / "src").rglob("*") if p.is_file() and "__pycache__" not in p.parts]
    files += [pkg.path / "pyproject.toml", pkg.path / "README.md"]
    return max((p.stat().st_mtime for p in files if p.is_file()), default=0.0)


def ensure_built(pkg: Package) -> Path:
    """The package's wheel for its current version, built first when missing or older than its sources."""
    wheel, _ = artifacts(pkg, read_version(pkg))
    if wheel is None or wheel.stat().st_mtime < _newest_source_mtime(pkg):
        print(f"{pkg.dist}: wheel missing or older than its sources; building it")
        wheel, _ = build(pkg)
    return wheel


def lamina_closure(workspace: Workspace, pkg: Package) -> list[Package]:
    """The workspace packages ``pkg`` depends on, directly or not, lowest first."""
    by_dist = workspace.by_dist()
    seen: dict[str, Package] = {}
    todo = [pkg]
    while todo:
        current = todo.pop()
        for requirement in current.dependencies:
            dep = by_dist.get(requirement_name(requirement))
            if dep is not None and dep.folder not in seen:
                seen[dep.folder] = dep
                todo.append(dep)
    return sorted(seen.values(), key=lambda p: p.layer)


def _test_env(root: Path) -> dict[str, str]:
    """The environment for the verify venv: no PYTHONPATH, plus hatch-test's env-vars."""
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME", "VIRTUAL_ENV")}
    hatch_toml = root / "hatch.toml"
    if hatch_toml.is_file():
        data: object = tomllib.loads(hatch_toml.read_text(encoding="utf-8"))
        for key in ("envs", "hatch-test", "env-vars"):
            data = data.get(key, {}) if isinstance(data, dict) else {}
        if isinstance(data, dict):
            env.update({str(k): str(v) for k, v in data.items()})
    return env


def _pytest_ini(root: Path) -> str:
    """A pytest.ini for the copied tests: the repo's markers, nothing that points at the source tree."""
    markers: list[str] = []
    pytest_toml = root / "pytest.toml"
    if pytest_toml.is_file():
        section = tomllib.loads(pytest_toml.read_text(encoding="utf-8")).get("pytest", {})
        if isinstance(section, dict) and isinstance(section.get("markers"), list):
            markers = [str(m) for m in section["markers"]]
    lines = ["[pytest]", "markers ="] + [f"    {m}" for m in markers]
    return "\n".join(lines if markers else ["[pytest]"]) + "\n"


_INSTALLED = (
    "import importlib.metadata as m, json; "
    "print(json.dumps({d.metadata['Name']: d.version for d in m.distributions()}))"
)
_IMPORT_CHECK = (
    "import importlib, json, sys; mods = [importlib.import_module(n) for n in sys.argv[1:]]; "
    "print(json.dumps([[m.__name__, m.__file__, getattr(m, '__version__', None)] for m in mods]))"
)


def _check_installed(workspace: Workspace, pkg: Package, python: Path, work: Path, env: dict[str, str]) -> None:
    """Exactly the package and its lamina dependencies are installed, each at its workspace version."""
    installed = json.loads(_run([python, "-c", _INSTALLED], cwd=work, env=env, capture=True,
                                label=f"{python} -c <list installed distributions>").stdout)
    lamina = {normalize_dist(name): version for name, version in installed.items()
              if normalize_dist(name) in workspace.by_dist()}
    expected = {normalize_dist(p.dist): str(read_version(p)) for p in [*lamina_closure(workspace, pkg), pkg]}
    if lamina != expected:
        raise ReleaseError(f"{pkg.dist}: the venv holds lamina packages {lamina}, expected exactly {expected} "
                           "(a higher layer pulled in, or a version not from the local wheels)")
    print(f"installed lamina packages: {', '.join(f'{k} {v}' for k, v in sorted(expected.items()))}")


def _check_import(pkg: Package, python: Path, work: Path, env: dict[str, str], root: Path) -> None:
    """The package imports from the venv, not from the source tree, and reports its version."""
    result = _run([python, "-I", "-c", _IMPORT_CHECK, *pkg.import_names], cwd=work, env=env, capture=True,
                  label=f"{python} -I -c <import {', '.join(pkg.import_names)}>")
    version = str(read_version(pkg))
    for name, file, found_version in json.loads(result.stdout):
        location = Path(file).resolve()
        if location.is_relative_to(root.resolve()):
            raise ReleaseError(f"{name} was imported from the source tree ({location}), not the wheel")
        if found_version is not None and found_version != version:
            raise ReleaseError(f"{name}.__version__ is {found_version}, expected {version}")
        print(f"import {name} ok: {location}")


PYTEST_NO_TESTS = 5  # pytest's exit status when it collected nothing


def _run_tests(pkg: Package, python: Path, work: Path, env: dict[str, str]) -> None:
    """Run the copied tests/ with the venv's pytest; a run that collects nothing fails too."""
    cmd = [str(python), "-m", "pytest", "-q", "-p", "no:cacheprovider", "--import-mode=importlib",
           "-c", "pytest.ini", "--rootdir", ".", "tests"]
    print("+ " + " ".join(cmd), flush=True)
    status = subprocess.run(cmd, cwd=work, env=env, check=False).returncode
    if status == PYTEST_NO_TESTS:
        raise ReleaseError(f"{pkg.dist}: pytest collected no tests in {pkg.path / 'tests'}")
    if status != 0:
        raise ReleaseError(f"{pkg.dist}: its tests failed against the installed wheel (pytest exit status {status})")


def verify(workspace: Workspace, pkg: Package, keep: bool = False) -> None:
    """Install the package's wheel alone into a fresh venv and run its own tests there.

    Lamina dependencies come only from their local wheels (built first when
    missing or stale); third-party ones from the package index. The tests run
    from a temporary copy of ``tests/`` with ``--import-mode=importlib``, so the
    source tree is never on ``sys.path``.
    """
    root = workspace.root
    wheel = ensure_built(pkg)
    deps = lamina_closure(workspace, pkg)
    dep_wheels = [ensure_built(dep) for dep in deps]
    tests = pkg.path / "tests"
    if not tests.is_dir():
        raise ReleaseError(f"{pkg.dist}: no tests/ folder to run")
    work = Path(tempfile.mkdtemp(prefix=f"lamina-verify-{pkg.folder}-"))
    try:
        wheelhouse = work / "wheelhouse"
        wheelhouse.mkdir()
        for dep_wheel in dep_wheels:
            shutil.copy2(dep_wheel, wheelhouse)
        env = _test_env(root)
        _run([sys.executable, "-m", "venv", work / "venv"], cwd=work, env=env)
        python = work / "venv" / "bin" / "python"
        _run([python, "-m", "pip", "install", "--quiet", "--find-links", wheelhouse, wheel], cwd=work, env=env)
        _check_installed(workspace, pkg, python, work, env)
        _check_import(pkg, python, work, env, root)
        test_extra = [*TEST_REQUIREMENTS, *pkg.test_dependencies]
        _run([python, "-m", "pip", "install", "--quiet", *test_extra], cwd=work, env=env)
        shutil.copytree(tests, work / "tests", ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
        (work / "pytest.ini").write_text(_pytest_ini(root), encoding="utf-8")
        _run_tests(pkg, python, work, env)
        print(f"verify {pkg.dist} {read_version(pkg)}: ok")
    finally:
        if keep:
            print(f"kept {work}")
        else:
            shutil.rmtree(work, ignore_errors=True)


def verify_all(workspace: Workspace, keep: bool = False) -> list[tuple[Package, str | None]]:
    """Build and verify every package, lowest layer first; return (package, error or None) pairs."""
    results: list[tuple[Package, str | None]] = []
    for pkg in workspace.packages:
        try:
            build(pkg)
            verify(workspace, pkg, keep=keep)
            results.append((pkg, None))
        except ReleaseError as err:
            print(f"verify {pkg.dist}: FAILED: {err}", file=sys.stderr)
            results.append((pkg, str(err).splitlines()[0]))
    return results


def status(workspace: Workspace) -> list[str]:
    """One line per package and lamina requirement; return the problems found."""
    versions = {normalize_dist(p.dist): read_version(p) for p in workspace.packages}
    problems: list[str] = []
    for pkg in workspace.packages:
        print(f"{pkg.folder:<20} {pkg.dist:<28} {versions[normalize_dist(pkg.dist)]}")
        for requirement in pkg.dependencies:
            dist = requirement_name(requirement)
            if dist not in versions:
                continue
            match = _REQUIREMENT.match(requirement.strip())
            admits = match is not None and specifier_admits(match["spec"], versions[dist])
            print(f"    requires {requirement:<36} {'ok' if admits else 'DOES NOT ADMIT ' + str(versions[dist])}")
            if not admits:
                problems.append(f"{pkg.dist} requires {requirement}, but the workspace has {dist} {versions[dist]}")
    return problems


def main(argv: Sequence[str] | None = None) -> int:
    """Parse the command line and run one release step; return the exit status."""
    parser = argparse.ArgumentParser(prog="release.py", description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--root", type=Path, default=default_root(), help="repository root (default: this file's)")
    sub = parser.add_subparsers(dest="command", required=True)
    bump_p = sub.add_parser("bump", help="raise a version, its dependents' ranges and the changelogs")
    bump_p.add_argument("package")
    bump_p.add_argument("part", choices=PARTS)
    bump_p.add_argument("--date", type=dt.date.fromisoformat, default=None,
                        help="release date for the changelog heading (default: today)")
    build_p = sub.add_parser("build", help="build wheel + sdist into packages/<pkg>/dist")
    build_p.add_argument("package")
    verify_p = sub.add_parser("verify", help="install the wheel alone in a fresh venv and run its tests; 'all' for every package")
    verify_p.add_argument("package")
    verify_p.add_argument("--keep", action="store_true", help="keep the temporary venv and test copy")
    sub.add_parser("status", help="show versions and check every lamina range admits them")
    args = parser.parse_args(argv)
    try:
        workspace = load_workspace(args.root.resolve())
        if args.command == "bump":
            old, new, changes = bump(workspace, args.package, args.part, args.date or dt.date.today())
            pkg = workspace.find(args.package)
            print(f"{pkg.dist}: {old} -> {new}")
            print(f"  {version_file(pkg).relative_to(workspace.root)}")
            print(f"  {(pkg.path / 'CHANGELOG.md').relative_to(workspace.root)}: Unreleased entries now under {new}")
            for change in changes:
                print(f"  {change.dependent.folder}/pyproject.toml: {change.old} -> {change.new}")
            print(f"next: python tools/release.py build {pkg.folder} && python tools/release.py verify {pkg.folder}")
        elif args.command == "build":
            build(workspace.find(args.package))
        elif args.command == "verify" and args.package == "all":
            results = verify_all(workspace, keep=args.keep)
            for pkg, error in results:
                print(f"{pkg.dist:<28} {read_version(pkg)}  {'ok' if error is None else 'FAILED: ' + error}")
            return 1 if any(error is not None for _, error in results) else 0
        elif args.command == "verify":
            verify(workspace, workspace.find(args.package), keep=args.keep)
        elif args.command == "status":
            problems = status(workspace)
            for problem in problems:
                print(f"problem: {problem}", file=sys.stderr)
            return 1 if problems else 0
    except (ReleaseError, WorkspaceError) as err:
        print(f"release.py: error: {err}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
