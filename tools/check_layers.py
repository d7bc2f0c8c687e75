"""Check lamina's layering, declared dependencies and module floors by reading the sources.

Usage: ``python tools/check_layers.py [--root DIR] [--strict]``

Every ``.py`` file under ``packages/*/src`` and ``packages/*/tests`` is parsed
with :mod:`ast` (nothing is imported), and every import in it is checked,
wherever it appears: at module level, inside functions and classes, under
``if TYPE_CHECKING:``, in ``try`` blocks, and calls of ``importlib.import_module``
or ``__import__`` with a literal module name. Relative imports are resolved
against the file's own module name.

Rules between packages, for ``src`` (each breach is an error):

* a package never imports a higher layer (the order is ``LAYER_ORDER``);
* a package imports only the standard library (``sys.stdlib_module_names``),
  itself, and the distributions its ``pyproject.toml`` lists in
  ``[project] dependencies``. A lower lamina package that is not declared is an
  error too, so installing one wheel alone can never end in an ImportError.
* a distribution listed only in one of the package's other extras
  (``[project.optional-dependencies]``, all but ``test``) may be imported only
  where its absence is survivable: inside a ``def`` or ``class`` body (it runs
  when called, not when the package is imported) or in the body of a ``try:``
  with an ``except ImportError`` or ``except ModuleNotFoundError`` handler (a
  tuple naming one of them counts). Anywhere else, importing it is an error:
  installing the package without the extra would fail at import.

Rules inside a package's ``src`` (each breach is an error):

* **No import cycle.** The module graph of the package has no cycle; each
  strongly connected component of two or more modules is one error that lists
  its modules and one cycle through them.
* **Floors.** A package may declare the order of its modules in its
  ``pyproject.toml``::

      [tool.lamina.floors]
      order = [
        ["dtypes", "errors"],           # floor 0, the lowest
        ["lax.common", "lax.convert"],  # modules of a subpackage: dotted names
        ["lax.*"],                      # every module below lax/ not listed elsewhere
        ["lax"],                        # lax/__init__.py itself
      ]

  Names are relative to the import package. ``sub.*`` covers every module at
  any depth below ``sub/`` (``sub/__init__`` itself excluded) that no exact
  name lists; when two globs cover a module the longer prefix wins; ``*``
  alone covers whatever nothing else does. The package's own ``__init__`` is
  implicitly the top floor. A module may import modules on lower floors, and
  modules on its own floor (the cycle rule keeps those acyclic); importing a
  higher floor is an *upward import*. Every module must be on a floor, every
  declared name or glob must cover a module, and no name may be listed twice.
* **Function-local imports carry a reason.** An import inside a ``def`` or
  ``class`` body (not under ``TYPE_CHECKING``) needs a comment on its own line
  or on the line just above that says why it is not at the top. Comments that
  are only tool directives (``noqa``, ``type: ignore``, ``pragma: no cover``)
  are not reasons.

The module graph counts run-time imports only: module level and local
imports, but not those under ``if TYPE_CHECKING:`` (they never run; they obey
the rules between packages). Its edges:

* ``import a.b.c`` and ``from a.b import c`` where ``a.b.c`` is a module are
  edges to ``a.b.c``; ``from a.b import name`` where ``name`` is not a
  submodule (or ``*``) is an edge to ``a.b`` (its ``__init__`` for a package).
  So ``from lamina_tracing_core import lax`` is an edge to ``lax/__init__``.
* Python runs ``a/__init__`` and ``a/b/__init__`` before ``a.b.c``. An
  enclosing ``__init__`` that contains the importing module has already
  started by the time that module runs, so it is **not** an edge: otherwise
  every module importing a sibling would sit in a cycle with the ``__init__``
  that imports it. An enclosing ``__init__`` that does not contain the
  importer is run by the import, so it **is** an edge (reported as the import
  of the module the statement names): ``ad`` importing
  ``lamina_tracing_core.lax.convert`` runs ``lax/__init__``, whatever that
  imports in turn. The package's top ``__init__`` contains every module, so an
  edge to it comes only from naming it (``from lamina_tracing_core import
  name`` where ``name`` is no submodule).

Rules for a package's ``tests`` folder: importing a higher layer is an error;
importing something that is neither the package, a lower layer, a declared
dependency, the test tools (``TEST_ALLOWED``) nor a module of that tests
folder itself is a warning (an error with ``--strict``). Floors, cycles and
local imports are not checked there.

Each violation is printed as one line ``path:line: message`` on stdout (for an
import, ``path:line: <module> imports <name>: <why>``), warnings the same way
with ``warning:`` after the location. On stderr, one line per package counts
its import cycles, upward imports and local imports without a reason, and a
last line sums up. The exit status is 0 when there are no errors, 1 when there
are, and 2 when the workspace itself cannot be read (no packages, a broken
``pyproject.toml`` or floors declaration). The tool uses the standard library
only.
"""

from __future__ import annotations

import argparse
import ast
import io
import re
import sys
import tokenize
import tomllib
from collections import deque
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field, replace
from functools import cached_property
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
    "absl-py": ("absl",),
}

# What a package's tests may import beyond the package's own dependencies.
TEST_ALLOWED: frozenset[str] = frozenset({"pytest", "_pytest", "hypothesis", "numpy"})

# Modules that exist only for type checkers; harmless under TYPE_CHECKING and
# never imported at run time by correct code.
TYPE_CHECKER_ONLY: frozenset[str] = frozenset({"_typeshed"})

_REQUIREMENT_NAME = re.compile(r"^\s*([A-Za-z0-9](?:[A-Za-z0-9._-]*[A-Za-z0-9])?)")

# One entry of a floors declaration: a dotted module name, ``prefix.*`` or ``*``.
_FLOOR_ENTRY = re.compile(r"^(?:\*|[A-Za-z_]\w*(?:\.[A-Za-z_]\w*)*(?:\.\*)?)$")

#: a module's floor order, lowest floor first (``[tool.lamina.floors] order``)
FloorOrder = tuple[tuple[str, ...], ...]


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
    #: requirement strings of every other extra: what ``src`` may import where
    #: its absence is handled (function-local, or guarded by ``except ImportError``)
    extra_dependencies: tuple[str, ...] = ()
    #: the declared module floors, lowest first; None when the package declares none
    floors: FloorOrder | None = None

    @property
    def declared(self) -> frozenset[str]:
        """The normalized distribution names listed in [project] dependencies."""
        return frozenset(requirement_name(req) for req in self.dependencies)

    @property
    def declared_for_tests(self) -> frozenset[str]:
        """The normalized distribution names of the ``test`` extra."""
        return frozenset(requirement_name(req) for req in self.test_dependencies)

    @property
    def declared_as_extras(self) -> frozenset[str]:
        """The normalized distribution names of the extras other than ``test``."""
        return frozenset(requirement_name(req) for req in self.extra_dependencies)


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


def _floor_order(pyproject_path: Path, pyproject: dict[str, object]) -> FloorOrder | None:
    """The ``[tool.lamina.floors] order`` of a pyproject, checked for shape; None when absent."""
    section: object = pyproject
    for key in ("tool", "lamina", "floors"):
        section = section.get(key) if isinstance(section, dict) else None
    if section is None:
        return None
    order = section.get("order") if isinstance(section, dict) else None
    shape = "[tool.lamina.floors] order must be a list of lists of module names"
    if not isinstance(order, list) or not all(isinstance(floor, list) for floor in order):
        raise WorkspaceError(f"{pyproject_path}: {shape}")
    for floor in order:
        for entry in floor:
            if not isinstance(entry, str) or not _FLOOR_ENTRY.match(entry):
                raise WorkspaceError(
                    f"{pyproject_path}: [tool.lamina.floors] entry {entry!r} is not a dotted "
                    f"module name, 'prefix.*' or '*'")
    return tuple(tuple(floor) for floor in order)


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
    extra_dependencies: list[str] = []
    for extra, requirements in (extras.items() if isinstance(extras, dict) else ()):
        if not isinstance(requirements, list) or not all(isinstance(d, str) for d in requirements):
            raise WorkspaceError(f"{pyproject_path}: the {extra} extra must be a list of strings")
        if extra != "test":
            extra_dependencies.extend(requirements)
    folder = project_dir.name
    if folder not in LAYER_ORDER:
        raise WorkspaceError(
            f"{project_dir}: package folder {folder!r} is not in the layer order "
            f"({' < '.join(LAYER_ORDER)}); add it to LAYER_ORDER in tools/check_layers.py"
        )
    import_names = _wheel_import_names(project_dir, pyproject)
    if not import_names:
        raise WorkspaceError(f"{project_dir}: cannot tell its import name (no wheel packages, no src/<name>/)")
    floors = _floor_order(pyproject_path, pyproject)
    if floors is not None and len(import_names) != 1:
        raise WorkspaceError(f"{pyproject_path}: [tool.lamina.floors] needs a package with one "
                             f"import name, not {', '.join(import_names)}")
    return Package(
        folder=folder,
        path=project_dir,
        dist=project["name"],
        import_names=import_names,
        dependencies=tuple(dependencies),
        layer=LAYER_ORDER.index(folder),
        test_dependencies=tuple(test_dependencies),
        extra_dependencies=tuple(extra_dependencies),
        floors=floors,
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
    """One rule breach; ``error`` False means a warning.

    ``imported`` is empty for findings that are not about one import (a module
    on no floor, a declared floor name that covers nothing). ``rule`` names the
    rule: ``layer`` (between packages), ``cycle``, ``upward``, ``local-import``
    or ``floors`` (the declaration itself).
    """

    path: Path
    line: int
    module: str
    imported: str
    why: str
    error: bool = True
    rule: str = "layer"

    @property
    def message(self) -> str:
        """The text after the location: ``module imports name: why`` or ``module: why``."""
        if self.imported:
            return f"{self.module} imports {self.imported}: {self.why}"
        return f"{self.module}: {self.why}"

    def render(self, root: Path) -> str:
        """The one-line report, ``path:line: message``."""
        try:
            shown = self.path.relative_to(root)
        except ValueError:
            shown = self.path
        level = "" if self.error else " warning:"
        return f"{shown}:{self.line}:{level} {self.message}"


#: where an import statement runs: at module level, inside a def or class body,
#: or under ``if TYPE_CHECKING:`` (never at run time)
TOP, LOCAL, TYPING = "top", "local", "typing"


@dataclass(frozen=True)
class ImportStmt:
    """One import as written, made absolute.

    ``target`` is the module the statement names (``import a.b`` -> ``a.b``,
    ``from a import x`` -> ``a``); ``names`` are the names a from-import takes
    from it (empty for ``import`` and for ``importlib.import_module``).
    """

    target: str
    names: tuple[str, ...]
    line: int
    end_line: int
    context: str
    relative: bool = False
    #: inside the body of a ``try:`` that handles ImportError or ModuleNotFoundError
    guarded: bool = False


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


_IMPORT_ERRORS = frozenset({"ImportError", "ModuleNotFoundError"})


def _handles_import_error(node: ast.Try | ast.TryStar) -> bool:
    """Whether one of a ``try``'s handlers names ImportError or ModuleNotFoundError."""
    for handler in node.handlers:
        caught = handler.type
        names = caught.elts if isinstance(caught, ast.Tuple) else [caught] if caught else []
        if any(isinstance(n, ast.Name) and n.id in _IMPORT_ERRORS for n in names):
            return True
    return False


def _is_type_checking(test: ast.expr) -> bool:
    """Whether an ``if`` test is ``TYPE_CHECKING`` or ``<module>.TYPE_CHECKING``."""
    return ((isinstance(test, ast.Name) and test.id == "TYPE_CHECKING")
            or (isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"))


class _ImportScanner(ast.NodeVisitor):
    """Collects every import of a tree with the context it runs in."""

    def __init__(self, module: str, is_package: bool, calls: bool = True) -> None:
        self.module = module
        self.is_package = is_package
        self._calls = calls  # False: no dynamic import can occur, so expressions are skipped
        self.stmts: list[ImportStmt] = []
        self.unresolved: list[tuple[int, str]] = []
        self._local = False
        self._typing = False
        self._guarded = False

    def _context(self) -> str:
        return TYPING if self._typing else LOCAL if self._local else TOP

    def _add(self, node: ast.stmt | ast.expr, target: str, names: tuple[str, ...],
             relative: bool = False) -> None:
        end = node.end_lineno or node.lineno
        self.stmts.append(ImportStmt(target, names, node.lineno, end, self._context(), relative,
                                     self._guarded))

    def generic_visit(self, node: ast.AST) -> None:
        if self._calls:
            super().generic_visit(node)
            return
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.stmt, ast.excepthandler, ast.match_case)):
                self.visit(child)

    def _visit_scope(self, node: ast.AST) -> None:
        outer, self._local = self._local, True
        self.generic_visit(node)
        self._local = outer

    visit_FunctionDef = visit_AsyncFunctionDef = visit_Lambda = visit_ClassDef = _visit_scope

    def visit_If(self, node: ast.If) -> None:
        if not _is_type_checking(node.test):
            self.generic_visit(node)
            return
        outer, self._typing = self._typing, True
        for stmt in node.body:
            self.visit(stmt)
        self._typing = outer
        for stmt in node.orelse:
            self.visit(stmt)

    def visit_Try(self, node: ast.Try | ast.TryStar) -> None:
        outer = self._guarded
        self._guarded = outer or _handles_import_error(node)
        for stmt in node.body:
            self.visit(stmt)
        self._guarded = outer
        for part in (*node.handlers, *node.orelse, *node.finalbody):
            self.visit(part)

    visit_TryStar = visit_Try

    def visit_Import(self, node: ast.Import) -> None:
        for alias in node.names:
            self._add(node, alias.name, ())

    def visit_ImportFrom(self, node: ast.ImportFrom) -> None:
        names = tuple(alias.name for alias in node.names)
        if node.level == 0:
            self._add(node, node.module or "", names)
            return
        absolute = resolve_relative(self.module, self.is_package, node.level, node.module)
        if absolute is None:
            dots = "." * node.level + (node.module or ", ".join(names))
            self.unresolved.append((node.lineno, dots))
        else:
            self._add(node, absolute, names, relative=True)

    def visit_Call(self, node: ast.Call) -> None:
        target = _dynamic_import_target(node)
        if target is not None:
            self._add(node, target, ())
        self.generic_visit(node)


def scan_imports(tree: ast.AST, module: str, is_package: bool, calls: bool = True) -> _ImportScanner:
    """Every import in ``tree`` at any depth, made absolute, with its context; in line order.

    ``calls=False`` skips looking for ``import_module``/``__import__`` calls
    (for a source whose text names neither).
    """
    scanner = _ImportScanner(module, is_package, calls)
    scanner.visit(tree)
    scanner.stmts.sort(key=lambda stmt: stmt.line)
    return scanner


def collect_imports(tree: ast.AST, module: str, is_package: bool) -> FileImports:
    """Every import in ``tree`` at any depth, with relative imports made absolute."""
    scanned = scan_imports(tree, module, is_package)
    refs = [ImportRef(stmt.target, stmt.line, stmt.relative) for stmt in scanned.stmts]
    return FileImports(refs=refs, unresolved=list(scanned.unresolved))


# --- comments: the reason a local import gives --------------------------------

# Tool directives, which say nothing about why an import is where it is.
_DIRECTIVE = re.compile(
    r"noqa(?::\s*[A-Z]+[0-9]*(?:\s*,\s*[A-Z]+[0-9]*)*)?|type:\s*ignore(?:\[[^\]]*\])?"
    r"|pragma:\s*no\s*(?:cover|branch)|(?:pylint|pyright|mypy|ruff|fmt):\s*\S*",
    re.IGNORECASE,
)
_WORD = re.compile(r"[A-Za-z]{2,}")


def is_reason(comment: str) -> bool:
    """Whether a comment says something beyond tool directives."""
    return _WORD.search(_DIRECTIVE.sub(" ", comment.lstrip("#"))) is not None


@dataclass(frozen=True)
class Comments:
    """The comments of one source file, by line."""

    text: dict[int, str]  # line -> the comment on it
    alone: frozenset[int]  # lines that hold nothing but a comment

    @staticmethod
    def of(source: str) -> Comments:
        text: dict[int, str] = {}
        code_lines: set[int] = set()
        skip = {tokenize.COMMENT, tokenize.NL, tokenize.NEWLINE, tokenize.INDENT,
                tokenize.DEDENT, tokenize.ENCODING, tokenize.ENDMARKER}
        try:
            for tok in tokenize.generate_tokens(io.StringIO(source).readline):
                if tok.type == tokenize.COMMENT:
                    text[tok.start[0]] = tok.string
                elif tok.type not in skip:
                    code_lines.update(range(tok.start[0], tok.end[0] + 1))
        except (tokenize.TokenError, SyntaxError):
            pass  # the file was parsed by ast already; keep what was read
        return Comments(text, frozenset(line for line in text if line not in code_lines))

    def reason_for(self, first: int, last: int) -> bool:
        """Whether lines ``first``..``last``, or a comment-only line just above, give a reason."""
        lines = [line for line in range(first, last + 1) if line in self.text]
        if first - 1 in self.alone:
            lines.append(first - 1)
        return any(is_reason(self.text[line]) for line in lines)


# --- the module graph of one package -------------------------------------------

@dataclass(frozen=True)
class Edge:
    """Module ``source`` runs module ``target`` at import time (or when a function runs).

    ``named`` is the module the statement names; it differs from ``target`` when
    the edge is to an enclosing package ``__init__`` the import runs first.
    """

    source: str
    target: str
    line: int
    named: str

    @property
    def implicit(self) -> bool:
        return self.named != self.target


@dataclass(frozen=True)
class ModuleGraph:
    """The modules of one import package (by absolute name) and their run-time edges."""

    package: str
    files: dict[str, Path]
    edges: tuple[Edge, ...]

    def short(self, module: str) -> str:
        """A module's name relative to the package; the package's name for its ``__init__``."""
        return module[len(self.package) + 1:] if module != self.package else self.package


def _is_within(module: str, package: str) -> bool:
    """Whether ``module`` is ``package`` or lies below it."""
    return module == package or module.startswith(package + ".")


def _named_modules(stmt: ImportStmt, files: dict[str, Path]) -> list[str]:
    """The modules a statement names: the submodules a from-import takes, else its target."""
    named: list[str] = []
    for name in [name for name in stmt.names if name != "*"] or [""]:
        candidate = f"{stmt.target}.{name}" if name and f"{stmt.target}.{name}" in files else stmt.target
        if candidate not in named:
            named.append(candidate)
    return named


def edges_of(source: str, stmt: ImportStmt, files: dict[str, Path]) -> list[Edge]:
    """The graph edges one run-time import statement in module ``source`` adds.

    A named module that is no file of the package (a typo, a compiled module)
    is no edge itself, but the enclosing ``__init__`` files it would run are.
    """
    edges: list[Edge] = []
    for named in _named_modules(stmt, files):
        if named in files and named != source:
            edges.append(Edge(source, named, stmt.line, named))
        parts = named.split(".")
        for n in range(len(parts) - 1, 0, -1):
            parent = ".".join(parts[:n])
            # An enclosing __init__ that contains the importer has started already.
            if parent in files and not _is_within(source, parent):
                edges.append(Edge(source, parent, stmt.line, named))
    return edges


def strongly_connected(nodes: Iterable[str], edges: Iterable[Edge]) -> list[list[str]]:
    """The strongly connected components (Tarjan's algorithm, iterative), each sorted."""
    successors: dict[str, list[str]] = {}
    for edge in edges:
        successors.setdefault(edge.source, []).append(edge.target)
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    components: list[list[str]] = []
    for root in sorted(nodes):
        if root in index:
            continue
        work = [(root, iter(successors.get(root, ())))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(successors.get(child, ()))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component: list[str] = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                components.append(sorted(component))
    return components


def shortest_path(start: str, goal: str, edges: Sequence[Edge], within: set[str]) -> list[Edge]:
    """The fewest edges from ``start`` to ``goal`` staying inside ``within`` (empty if none)."""
    came: dict[str, Edge | None] = {start: None}
    queue = deque([start])
    while queue:
        node = queue.popleft()
        if node == goal:
            path: list[Edge] = []
            step = came[node]
            while step is not None:
                path.append(step)
                step = came[step.source]
            return path[::-1]
        for edge in edges:
            if edge.source == node and edge.target in within and edge.target not in came:
                came[edge.target] = edge
                queue.append(edge.target)
    return []


# --- floors ----------------------------------------------------------------------

@dataclass(frozen=True)
class FloorMap:
    """Which floor each module of a package is on, and what the declaration got wrong."""

    floor_of: dict[str, int]  # absolute module name -> floor index (the top __init__: the top)
    unmatched: tuple[tuple[int, str], ...]  # (floor, entry) that cover no module
    duplicates: tuple[tuple[int, int, str], ...]  # (first floor, second floor, entry)
    top: int  # the top floor's index: the package __init__'s floor


def assign_floors(order: FloorOrder, graph: ModuleGraph) -> FloorMap:
    """Put every module of ``graph`` on its declared floor; see the module docstring for the rules."""
    seen: dict[str, int] = {}
    duplicates: list[tuple[int, int, str]] = []
    for floor, entries in enumerate(order):
        for entry in entries:
            if entry in seen:
                duplicates.append((seen[entry], floor, entry))
            else:
                seen[entry] = floor
    globs = {entry[:-1].rstrip("."): floor for entry, floor in seen.items() if entry.endswith("*")}
    exact = {entry: floor for entry, floor in seen.items() if not entry.endswith("*")}
    floor_of: dict[str, int] = {graph.package: len(order)}
    used: set[str] = set()
    for module in graph.files:
        if module == graph.package:
            continue
        relative = graph.short(module)
        if relative in exact:
            floor_of[module] = exact[relative]
            used.add(relative)
            continue
        covering = [prefix for prefix in globs if not prefix or relative.startswith(prefix + ".")]
        if covering:
            prefix = max(covering, key=len)
            floor_of[module] = globs[prefix]
            used.add(f"{prefix}.*" if prefix else "*")
    unmatched = tuple((floor, entry) for entry, floor in seen.items() if entry not in used)
    return FloorMap(floor_of, unmatched, tuple(duplicates), len(order))


def _floor_words(floor: int, floors: FloorMap) -> str:
    return "the top floor (the package __init__)" if floor == floors.top else f"floor {floor}"


@dataclass(frozen=True)
class SourceFile:
    """One parsed file: its module name, its imports and its comments."""

    path: Path
    module: str
    is_package: bool
    imports: tuple[ImportStmt, ...]
    unresolved: tuple[tuple[int, str], ...]
    text: str
    broken: Finding | None = None  # set when the file cannot be parsed

    @cached_property
    def comments(self) -> Comments:
        """The file's comments (tokenized on first use: only files with local imports need them)."""
        return Comments.of(self.text)


def parse_source(path: Path, base: Path) -> SourceFile:
    """Read and parse one file; ``base`` is the folder its module names start from."""
    module = module_name(path, base) or path.stem
    is_package = path.name == "__init__.py"
    try:
        text = path.read_text(encoding="utf-8")
        tree = ast.parse(text, filename=str(path))
    except (SyntaxError, UnicodeDecodeError) as err:
        line = err.lineno if isinstance(err, SyntaxError) and err.lineno else 1
        broken = Finding(path, line, module, "?", f"cannot be parsed ({err.__class__.__name__}: {err})")
        return SourceFile(path, module, is_package, (), (), "", broken)
    calls = any(name in text for name in _DYNAMIC_IMPORTERS)
    scanned = scan_imports(tree, module, is_package, calls)
    return SourceFile(path, module, is_package, tuple(scanned.stmts), tuple(scanned.unresolved), text)


def module_graph(package: str, sources: Sequence[SourceFile]) -> ModuleGraph:
    """The run-time import graph of the modules of ``sources`` inside import package ``package``."""
    mine = [src for src in sources if _is_within(src.module, package)]
    files = {src.module: src.path for src in mine}
    edges: dict[tuple[str, str, int], Edge] = {}
    for src in mine:
        for stmt in src.imports:
            if stmt.context == TYPING:
                continue
            for edge in edges_of(src.module, stmt, files):
                edges.setdefault((edge.source, edge.target, edge.line), edge)
    ordered = sorted(edges.values(), key=lambda e: (e.source, e.line, e.target))
    return ModuleGraph(package, files, tuple(ordered))


def cycle_findings(graph: ModuleGraph) -> list[Finding]:
    """One finding per import cycle (a strongly connected component of two or more modules)."""
    findings = []
    for component in strongly_connected(graph.files, graph.edges):
        if len(component) < 2:
            continue
        members = set(component)
        first = component[0]
        edge = next(e for e in graph.edges if e.source == first and e.target in members)
        back = shortest_path(edge.target, first, graph.edges, members)
        steps = [graph.short(first)] + [
            graph.short(step.target) + (f" (the package of {graph.short(step.named)})" if step.implicit else "")
            for step in (edge, *back)
        ]
        why = (f"import cycle of {len(component)} modules in {graph.package}: "
               f"{', '.join(graph.short(m) for m in component)} (cycle: {' -> '.join(steps)})")
        findings.append(Finding(graph.files[first], edge.line, first, edge.named, why, rule="cycle"))
    return findings


def upward_findings(graph: ModuleGraph, floors: FloorMap, where: str) -> list[Finding]:
    """A finding for every import of a module on a higher floor than its importer.

    One statement gives one finding: for the module it names when that is above
    the importer, else for the highest enclosing ``__init__`` it runs.
    """
    worst: dict[tuple[str, int, str], tuple[Edge, int]] = {}
    for edge in graph.edges:
        low, high = floors.floor_of.get(edge.source), floors.floor_of.get(edge.target)
        if low is None or high is None or high <= low:
            continue
        key = (edge.source, edge.line, edge.named)
        kept = worst.get(key)
        if kept is None or (kept[0].implicit and (not edge.implicit or high > kept[1])):
            worst[key] = (edge, high)
    findings = []
    for edge, high in worst.values():
        low = floors.floor_of[edge.source]
        runs = (f"it first runs {graph.short(edge.target)} (its package __init__), on "
                if edge.implicit else f"{graph.short(edge.target)} is on ")
        why = (f"upward import: {runs}{_floor_words(high, floors)}, above "
               f"{graph.short(edge.source)} on {_floor_words(low, floors)} ({where})")
        findings.append(Finding(graph.files[edge.source], edge.line, edge.source, edge.named, why,
                                rule="upward"))
    return findings


def coverage_findings(graph: ModuleGraph, floors: FloorMap, pyproject: Path, where: str) -> list[Finding]:
    """Modules on no floor, and declared entries that cover no module or are listed twice."""
    findings = [
        Finding(path, 1, module, "", f"on no floor of {where}: list it, or a glob that covers it",
                rule="floors")
        for module, path in sorted(graph.files.items()) if module not in floors.floor_of
    ]
    text = pyproject.read_text(encoding="utf-8").splitlines()
    for floor, entry in floors.unmatched:
        findings.append(Finding(pyproject, _entry_line(text, entry), graph.package, "",
                                f"floor {floor} of {where} lists {entry!r}, which covers no module",
                                rule="floors"))
    for first, second, entry in floors.duplicates:
        findings.append(Finding(pyproject, _entry_line(text, entry, nth=2), graph.package, "",
                                f"{where} lists {entry!r} twice (floors {first} and {second})",
                                rule="floors"))
    return findings


def _entry_line(text: Sequence[str], entry: str, nth: int = 1) -> int:
    """The line of the ``nth`` quoted ``entry`` after the floors header (1 if not found)."""
    header = next((i for i, line in enumerate(text) if line.strip() == "[tool.lamina.floors]"), 0)
    quoted = re.compile(rf"""(["']){re.escape(entry)}\1""")
    seen = 0
    for number, line in enumerate(text[header:], header + 1):
        seen += len(quoted.findall(line))
        if seen >= nth:
            return number
    return 1


def local_import_findings(source: SourceFile) -> list[Finding]:
    """Function-local (def or class body) imports with no reason given in a comment."""
    return [
        Finding(source.path, stmt.line, source.module, stmt.target,
                "function-local import without a reason (say why it is not at the top "
                "in a comment on its line or the line above)", rule="local-import")
        for stmt in source.imports
        if stmt.context == LOCAL and not source.comments.reason_for(stmt.line, stmt.end_line)
    ]


@dataclass(frozen=True)
class Checker:
    """Applies the rules of one workspace to files of one of its packages."""

    workspace: Workspace

    def _classify(self, pkg: Package, top: str, in_tests: bool, local: frozenset[str],
                  survivable: bool = False) -> tuple[str, bool] | None:
        """Return (why, is_error) for a breach by importing top-level ``top``, or None.

        ``survivable``: the import is function-local or guarded by ``except ImportError``,
        so an extra's distribution may be missing there.
        """
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
        extra_imports = {imp for dist in pkg.declared_as_extras for imp in dist_import_names(dist)}
        if top in extra_imports:
            if survivable:
                return None
            return (f"only in an extra of {pkg.folder}/pyproject.toml: import it inside a function "
                    f"or under try/except ImportError, so the package imports without the extra", True)
        return f"not declared in {pkg.folder}/pyproject.toml [project] dependencies", True

    def layer_findings(self, pkg: Package, source: SourceFile, in_tests: bool,
                       local: frozenset[str]) -> list[Finding]:
        """The rules between packages, for one parsed file."""
        if source.broken is not None:
            return [source.broken]
        stmts = source.imports
        unresolved = source.unresolved
        if in_tests:
            # A relative import in a tests folder can only reach that folder's own modules.
            stmts = tuple(stmt for stmt in stmts if not stmt.relative)
            unresolved = ()
        findings = [
            Finding(source.path, line, source.module, dots, "relative import climbs above the top-level package")
            for line, dots in unresolved
        ]
        for stmt in stmts:
            survivable = stmt.context == LOCAL or stmt.guarded
            breach = self._classify(pkg, stmt.target.split(".")[0], in_tests, local, survivable)
            if breach is not None:
                why, is_error = breach
                findings.append(Finding(source.path, stmt.line, source.module, stmt.target, why, is_error))
        return findings

    def check_file(self, pkg: Package, path: Path, base: Path, in_tests: bool,
                   local: frozenset[str]) -> list[Finding]:
        """The rules between packages for one file; ``base`` is the folder its module names start from."""
        return self.layer_findings(pkg, parse_source(path, base), in_tests, local)

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

    def check_inside(self, pkg: Package, sources: Sequence[SourceFile]) -> list[Finding]:
        """Cycles, floors and local imports inside one package's ``src``."""
        findings = [finding for source in sources for finding in local_import_findings(source)]
        where = f"{pkg.folder}/pyproject.toml [tool.lamina.floors]"
        for package in pkg.import_names:
            graph = module_graph(package, sources)
            findings.extend(cycle_findings(graph))
            if pkg.floors is not None:
                floors = assign_floors(pkg.floors, graph)
                findings.extend(upward_findings(graph, floors, where))
                findings.extend(coverage_findings(graph, floors, pkg.path / "pyproject.toml", where))
        return findings

    def check_package(self, pkg: Package) -> list[Finding]:
        """All findings for one package's pyproject, src/ and tests/."""
        src = pkg.path / "src"
        sources = [parse_source(path, src) for path in _python_files(src)]
        inside = [finding for source in sources
                  for finding in self.layer_findings(pkg, source, False, frozenset())]
        inside.extend(self.check_inside(pkg, [s for s in sources if s.broken is None]))
        pyproject = pkg.path / "pyproject.toml"
        inside.sort(key=lambda f: (f.path != pyproject, str(f.path), f.line))
        findings = self.check_declarations(pkg) + inside
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


def package_summary(pkg: Package, findings: Sequence[Finding]) -> str:
    """One stderr line counting a package's import cycles, upward and unexplained local imports."""
    def count(rule: str) -> int:
        return sum(finding.rule == rule and finding.error for finding in findings)
    upward = f"{count('upward')} upward import(s)" if pkg.floors is not None else "no floors declared"
    return (f"check_layers: {pkg.folder}: {count('cycle')} import cycle(s), {upward}, "
            f"{count('local-import')} function-local import(s) without a reason")


def main(argv: Sequence[str] | None = None) -> int:
    """Run the check and print the report; return the exit status."""
    parser = argparse.ArgumentParser(
        prog="check_layers.py",
        description="Check lamina's layer order, declared dependencies and module floors "
                    "(reads sources, imports nothing).",
    )
    parser.add_argument("--root", type=Path, default=default_root(),
                        help="repository root holding packages/ (default: this file's repository)")
    parser.add_argument("--strict", action="store_true", help="treat warnings as errors")
    args = parser.parse_args(argv)
    root: Path = args.root.resolve()
    try:
        workspace = load_workspace(root)
        checker = Checker(workspace)
        by_package = [(pkg, checker.check_package(pkg)) for pkg in workspace.packages]
    except WorkspaceError as err:
        print(f"check_layers: error: {err}", file=sys.stderr)
        return 2
    if args.strict:
        by_package = [(pkg, [replace(f, error=True) for f in found]) for pkg, found in by_package]
    findings = [finding for _, found in by_package for finding in found]
    for finding in findings:
        print(finding.render(root))
    for pkg, found in by_package:
        print(package_summary(pkg, found), file=sys.stderr)
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
