"""Check lamina's layering and declared-dependency rules by reading the sources.

Usage: ``python tools/check_layers.py [--root DIR] [--strict]``

Every ``.py`` file under ``packages/*/src`` and ``packages/*/tests`` is parsed
with :mod:`ast` (nothing is imported), and every import in it is checked,
wherever it appears: at module level, inside functions and classes, under
``if TYPE_CHECKING:``, in ``try`` blocks, and calls of ``importlib.import_module``
or ``__import__`` with a literal module name. Relative imports are resolved
against the file's own module name.

Rules for ``src`` (each breach is an error):

* a package never imports a higher layer (the order is ``LAYER_ORDER``);
* a package imports only the standard library (``sys.stdlib_module_names``),
  itself, and the distributions its ``pyproject.toml`` lists in
  ``[project] dependencies``. A lower lamina package that is not declared is an
  error too, so installing one wheel alone can never end in an ImportError.

Rules for a package's ``tests`` folder: importing a higher layer is an error;
importing something that is neither the package, a lower layer, a declared
dependency, the test tools (``TEST_ALLOWED``) nor a module of that tests
folder itself is a warning (an error with ``--strict``).

Each violation is printed as one line ``path:line: <module> imports <name>: <why>``
on stdout, warnings the same way with ``warning:`` after the location. The exit
status is 0 when there are no errors, 1 when there are, and 2 when the
workspace itself cannot be read (no packages, a broken ``pyproject.toml``).
The tool uses the standard library only.
"""

from __future__ import annotations

import argparse
import ast
import re
import sys
import tomllib
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path

# The layers, lowest first, by folder name under packages/.
LAYER_ORDER: tuple[str, ...] = (
    "linear-util",
    "tracing-core",
    "mlir-lowering",
    "interpreters-pxla",
    "sharded-jit",
    "lamina",
)

# Distributions whose import name is not their normalized distribution name.
# Anything absent here maps by lower-casing and turning '-' and '.' into '_'
# (typing-extensions -> typing_extensions, lamina-linear-util -> lamina_linear_util).
DIST_TO_IMPORTS: dict[str, tuple[str, ...]] = {
    "jaxlib": ("jaxlib",),
    "numpy": ("numpy",),
    "ml-dtypes": ("ml_dtypes",),
    "typing-extensions": ("typing_extensions",),
    "opt-einsum": ("opt_einsum",),
    "pyyaml": ("yaml",),
    "pillow": ("PIL",),
    "scikit-learn": ("sklearn",),
    "protobuf": ("google",),
}

# What a package's tests may import beyond the package's own dependencies.
TEST_ALLOWED: frozenset[str] = frozenset({"pytest", "_pytest", "hypothesis", "numpy"})

# Modules that exist only for type checkers; harmless under TYPE_CHECKING and
# never imported at run time by correct code.
TYPE_CHECKER_ONLY: frozenset[str] = frozenset({"_typeshed"})

_REQUIREMENT_NAME = re.compile(r"^\s*([A-Za-z0-9](?:[A-Za-z0-9._-]*[A-Za-z0-9])?)")


class WorkspaceError(Exception):
    """The workspace cannot be read: missing packages/ or a broken pyproject.toml."""


def normalize_dist(name: str) -> str:
    """Return the PEP 503 normalized form of a distribution name."""
    return re.sub(r"[-_.]+", "-", name).lower()


def requirement_name(requirement: str) -> str:
    """Return the normalized distribution name a PEP 508 requirement string names."""
    match = _REQUIREMENT_NAME.match(requirement)
    if match is None:
        raise WorkspaceError(f"cannot read the requirement {requirement!r}")
    return normalize_dist(match.group(1))


def dist_import_names(dist: str) -> tuple[str, ...]:
    """Return the top-level import names a (third-party) distribution provides."""
    normalized = normalize_dist(dist)
    return DIST_TO_IMPORTS.get(normalized, (normalized.replace("-", "_"),))


@dataclass(frozen=True)
class Package:
    """One workspace package, as its folder and pyproject.toml describe it."""

    folder: str
    path: Path
    dist: str
    import_names: tuple[str, ...]
    dependencies: tuple[str, ...]  # the requirement strings of [project] dependencies
    layer: int
    #: requirement strings of the ``test`` extra ([project.optional-dependencies]):
    #: what the package's own tests may import besides its dependencies
    test_dependencies: tuple[str, ...] = ()

    @property
    def declared(self) -> frozenset[str]:
        """The normalized distribution names listed in [project] dependencies."""
        return frozenset(requirement_name(req) for req in self.dependencies)

    @property
    def declared_for_tests(self) -> frozenset[str]:
        """The normalized distribution names of the ``test`` extra."""
        return frozenset(requirement_name(req) for req in self.test_dependencies)


@dataclass(frozen=True)
class Workspace:
    """All packages under ``<root>/packages``, lowest layer first."""

    root: Path
    packages: tuple[Package, ...]

    def by_import_name(self) -> dict[str, Package]:
        """Map every top-level import name of a workspace package to the package."""
        return {name: pkg for pkg in self.packages for name in pkg.import_names}

    def by_dist(self) -> dict[str, Package]:
        """Map every normalized distribution name to its workspace package."""
        return {normalize_dist(pkg.dist): pkg for pkg in self.packages}

    def find(self, name: str) -> Package:
        """Return the package named by folder, distribution or import name."""
        wanted = normalize_dist(name)
        for pkg in self.packages:
            names = {pkg.folder, normalize_dist(pkg.dist), *pkg.import_names}
            if name in names or wanted in names:
                return pkg
        known = ", ".join(pkg.folder for pkg in self.packages)
        raise WorkspaceError(f"no package {name!r} in {self.root / 'packages'} (known: {known})")


def _wheel_import_names(project_dir: Path, pyproject: dict[str, object]) -> tuple[str, ...]:
    """Import names from [tool.hatch.build.targets.wheel] packages, else from src/."""
    wheel: object = pyproject
    for key in ("tool", "hatch", "build", "targets", "wheel"):
        wheel = wheel.get(key, {}) if isinstance(wheel, dict) else {}
    listed = wheel.get("packages", []) if isinstance(wheel, dict) else []
    if isinstance(listed, list) and listed:
        return tuple(Path(str(entry)).name for entry in listed)
    src = project_dir / "src"
    found = sorted(
        child.stem if child.is_file() else child.name
        for child in (src.iterdir() if src.is_dir() else ())
        if (child.is_dir() and child.name.isidentifier() and child.name != "__pycache__")
        or (child.is_file() and child.suffix == ".py")
    )
    return tuple(found)


def load_package(project_dir: Path) -> Package:
    """Read one package folder; raise WorkspaceError when it is not a usable project."""
    pyproject_path = project_dir / "pyproject.toml"
    try:
        pyproject = tomllib.loads(pyproject_path.read_text(encoding="utf-8"))
    except (OSError, tomllib.TOMLDecodeError) as err:
        raise WorkspaceError(f"{pyproject_path}: {err}") from err
    project = pyproject.get("project")
    if not isinstance(project, dict) or not isinstance(project.get("name"), str):
        raise WorkspaceError(f"{pyproject_path}: no [project] name")
    dependencies = project.get("dependencies", [])
    if not isinstance(dependencies, list) or not all(isinstance(d, str) for d in dependencies):
        raise WorkspaceError(f"{pyproject_path}: [project] dependencies must be a list of strings")
    extras = project.get("optional-dependencies", {})
    test_dependencies = extras.get("test", []) if isinstance(extras, dict) else []
    if not isinstance(test_dependencies, list) or not all(
            isinstance(d, str) for d in test_dependencies):
        raise WorkspaceError(f"{pyproject_path}: the test extra must be a list of strings")
    folder = project_dir.name
    if folder not in LAYER_ORDER:
        raise WorkspaceError(
            f"{project_dir}: package folder {folder!r} is not in the layer order "
            f"({' < '.join(LAYER_ORDER)}); add it to LAYER_ORDER in tools/check_layers.py"
        )
    import_names = _wheel_import_names(project_dir, pyproject)
    if not import_names:
        raise WorkspaceError(f"{project_dir}: cannot tell its import name (no wheel packages, no src/<name>/)")
    return Package(
        folder=folder,
        path=project_dir,
        dist=project["name"],
        import_names=import_names,
        dependencies=tuple(dependencies),
        layer=LAYER_ORDER.index(folder),
        test_dependencies=tuple(test_dependencies),
    )


def load_workspace(root: Path) -> Workspace:
    """Read every ``<root>/packages/*/pyproject.toml``, lowest layer first."""
    packages_dir = root / "packages"
    if not packages_dir.is_dir():
        raise WorkspaceError(f"{root}: no packages/ folder")
    dirs = sorted(p for p in packages_dir.iterdir() if (p / "pyproject.toml").is_file())
    if not dirs:
        raise WorkspaceError(f"{packages_dir}: no package with a pyproject.toml")
    packages = sorted((load_package(d) for d in dirs), key=lambda pkg: pkg.layer)
    return Workspace(root=root, packages=tuple(packages))


@dataclass(frozen=True)
class ImportRef:
    """One imported module name and where the import statement is."""

    name: str  # absolute dotted name, e.g. "lamina_tracing_core.core"
    line: int
    relative: bool = False  # written as a relative import (``from . import x``)


@dataclass(frozen=True)
class Finding:
    """One rule breach; ``error`` False means a warning."""

    path: Path
    line: int
    module: str
    imported: str
    why: str
    error: bool = True

    def render(self, root: Path) -> str:
        """The one-line report, ``path:line: module imports name: why``."""
        try:
            shown = self.path.relative_to(root)
        except ValueError:
            shown = self.path
        level = "" if self.error else " warning:"
        return f"{shown}:{self.line}:{level} {self.module} imports {self.imported}: {self.why}"


@dataclass
class FileImports:
    """The imports found in one file, plus those that could not be resolved."""

    refs: list[ImportRef] = field(default_factory=list)
    unresolved: list[tuple[int, str]] = field(default_factory=list)


def module_name(path: Path, base: Path) -> str:
    """The dotted module name of ``path`` relative to the folder ``base``."""
    parts = list(path.relative_to(base).with_suffix("").parts)
    if parts and parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def resolve_relative(module: str, is_package: bool, level: int, target: str | None) -> str | None:
    """Resolve ``from <'.' * level><target> import ...`` inside ``module``.

    Returns None when the import climbs above the top-level package.
    """
    package = module.split(".") if is_package else module.split(".")[:-1]
    if level - 1 >= len(package) or not package:
        return None
    base = package[: len(package) - (level - 1)]
    return ".".join(base + ([target] if target else []))


_DYNAMIC_IMPORTERS = frozenset({"import_module", "__import__"})


def _dynamic_import_target(node: ast.Call) -> str | None:
    """The literal absolute module name of ``importlib.import_module('x')`` or ``__import__('x')``."""
    func = node.func
    name = func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else None
    if name not in _DYNAMIC_IMPORTERS or not node.args:
        return None
    first = node.args[0]
    if isinstance(first, ast.Constant) and isinstance(first.value, str) and not first.value.startswith("."):
        return first.value
    return None


def collect_imports(tree: ast.AST, module: str, is_package: bool) -> FileImports:
    """Every import in ``tree`` at any depth, with relative imports made absolute."""
    found = FileImports()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.refs.extend(ImportRef(alias.name, node.lineno) for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level == 0:
                found.refs.append(ImportRef(node.module or "", node.lineno))
                continue
            absolute = resolve_relative(module, is_package, node.level, node.module)
            if absolute is None:
                dots = "." * node.level + (node.module or ", ".join(a.name for a in node.names))
                found.unresolved.append((node.lineno, dots))
            else:
                found.refs.append(ImportRef(absolute, node.lineno, relative=True))
        elif isinstance(node, ast.Call):
            target = _dynamic_import_target(node)
            if target is not None:
                found.refs.append(ImportRef(target, node.lineno))
    found.refs.sort(key=lambda ref: ref.line)
    return found


@dataclass(frozen=True)
class Checker:
    """Applies the rules of one workspace to files of one of its packages."""

    workspace: Workspace

    def _classify(self, pkg: Package, top: str, in_tests: bool, local: frozenset[str]) -> tuple[str, bool] | None:
        """Return (why, is_error) for a breach by importing top-level ``top``, or None."""
        if top in pkg.import_names or top in sys.stdlib_module_names or top in TYPE_CHECKER_ONLY:
            return None
        other = self.workspace.by_import_name().get(top)
        if other is not None:
            if other.layer > pkg.layer:
                return (f"{other.folder} is a higher layer than {pkg.folder} "
                        f"(order: {' < '.join(LAYER_ORDER)})", True)
            if normalize_dist(other.dist) in pkg.declared or in_tests:
                return None
            return (f"{other.dist} is a lower layer but not in {pkg.folder}/pyproject.toml "
                    f"[project] dependencies", True)
        declared_imports = {imp for dist in pkg.declared for imp in dist_import_names(dist)}
        if top in declared_imports:
            return None
        if in_tests:
            test_imports = {imp for dist in pkg.declared_for_tests
                            for imp in dist_import_names(dist)}
            if top in TEST_ALLOWED or top in local or top in test_imports:
                return None
            return (f"not a dependency of {pkg.dist}, nor {', '.join(sorted(TEST_ALLOWED))}, "
                    f"nor a module of its tests folder", False)
        return f"not declared in {pkg.folder}/pyproject.toml [project] dependencies", True

    def check_file(self, pkg: Package, path: Path, base: Path, in_tests: bool,
                   local: frozenset[str]) -> list[Finding]:
        """The findings for one file; ``base`` is the folder its module names start from."""
        module = module_name(path, base) or path.stem
        try:
            tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
        except (SyntaxError, UnicodeDecodeError) as err:
            line = err.lineno if isinstance(err, SyntaxError) and err.lineno else 1
            return [Finding(path, line, module, "?", f"cannot be parsed ({err.__class__.__name__}: {err})")]
        imports = collect_imports(tree, module, path.name == "__init__.py")
        if in_tests:
            # A relative import in a tests folder can only reach that folder's own modules.
            imports.refs = [ref for ref in imports.refs if not ref.relative]
            imports.unresolved.clear()
        findings = [
            Finding(path, line, module, dots, "relative import climbs above the top-level package")
            for line, dots in imports.unresolved
        ]
        for ref in imports.refs:
            breach = self._classify(pkg, ref.name.split(".")[0], in_tests, local)
            if breach is not None:
                why, is_error = breach
                findings.append(Finding(path, ref.line, module, ref.name, why, is_error))
        return findings

    def check_declarations(self, pkg: Package) -> list[Finding]:
        """A package must not declare a dependency on a higher layer."""
        pyproject = pkg.path / "pyproject.toml"
        text = pyproject.read_text(encoding="utf-8").splitlines()
        findings = []
        by_dist = self.workspace.by_dist()
        for requirement in pkg.dependencies:
            other = by_dist.get(requirement_name(requirement))
            if other is not None and other.layer >= pkg.layer:
                line = next((i for i, t in enumerate(text, 1) if requirement in t), 1)
                findings.append(Finding(pyproject, line, pkg.dist, other.dist,
                                        f"declared dependency on {other.folder}, which is not a lower layer"))
        return findings

    def check_package(self, pkg: Package) -> list[Finding]:
        """All findings for one package's pyproject, src/ and tests/."""
        findings = self.check_declarations(pkg)
        src = pkg.path / "src"
        for path in _python_files(src):
            findings.extend(self.check_file(pkg, path, src, in_tests=False, local=frozenset()))
        tests = pkg.path / "tests"
        local = _local_modules(tests)
        for path in _python_files(tests):
            findings.extend(self.check_file(pkg, path, tests, in_tests=True, local=local))
        return findings

    def check(self) -> list[Finding]:
        """All findings for the workspace, in package (layer) order."""
        return [finding for pkg in self.workspace.packages for finding in self.check_package(pkg)]


def _python_files(folder: Path) -> Iterator[Path]:
    """The .py files below ``folder`` in a stable order, skipping caches."""
    if folder.is_dir():
        yield from sorted(p for p in folder.rglob("*.py") if "__pycache__" not in p.parts)


def _local_modules(tests: Path) -> frozenset[str]:
    """Top-level module names a tests folder provides itself (helpers, conftest)."""
    if not tests.is_dir():
        return frozenset()
    names = {p.stem for p in tests.glob("*.py")}
    names |= {p.name for p in tests.iterdir() if p.is_dir() and (p / "__init__.py").is_file()}
    return frozenset(names)


def default_root() -> Path:
    """The repository root: the parent of the folder this file lives in."""
    return Path(__file__).resolve().parent.parent


def main(argv: Sequence[str] | None = None) -> int:
    """Run the check and print the report; return the exit status."""
    parser = argparse.ArgumentParser(
        prog="check_layers.py",
        description="Check lamina's layer order and declared dependencies (reads sources, imports nothing).",
    )
    parser.add_argument("--root", type=Path, default=default_root(),
                        help="repository root holding packages/ (default: this file's repository)")
    parser.add_argument("--strict", action="store_true", help="treat warnings as errors")
    args = parser.parse_args(argv)
    root: Path = args.root.resolve()
    try:
        workspace = load_workspace(root)
        findings = Checker(workspace).check()
    except WorkspaceError as err:
        print(f"check_layers: error: {err}", file=sys.stderr)
        return 2
    if args.strict:
        findings = [Finding(f.path, f.line, f.module, f.imported, f.why, True) for f in findings]
    for finding in findings:
        print(finding.render(root))
    errors = sum(finding.error for finding in findings)
    warnings = len(findings) - errors
    files = sum(
        len(list(_python_files(pkg.path / sub))) for pkg in workspace.packages for sub in ("src", "tests")
    )
    summary = (f"check_layers: {len(workspace.packages)} packages, {files} files: "
               f"{errors} error(s), {warnings} warning(s)")
    print(summary, file=sys.stderr)
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())
