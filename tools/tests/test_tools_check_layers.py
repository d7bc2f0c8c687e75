"""Tests for tools/check_layers.py: fixture trees through the CLI, edge cases on temp trees."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import check_layers
import pytest

TOOLS = Path(__file__).resolve().parent.parent
FIXTURES = Path(__file__).resolve().parent / "fixtures"
SCRIPT = TOOLS / "check_layers.py"


def run_cli(root: Path, *extra: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, str(SCRIPT), "--root", str(root), *extra],
                          capture_output=True, text=True, check=False)


def make_package(root: Path, folder: str, deps: list[str], files: dict[str, str],
                 dist: str | None = None, wheel_package: str | None = None) -> Path:
    """Write packages/<folder> with a pyproject and the given files (paths relative to it)."""
    base = root / "packages" / folder
    base.mkdir(parents=True)
    dist = dist or ("lamina" if folder == "lamina" else f"lamina-{folder}")
    wheel = f'\n[tool.hatch.build.targets.wheel]\npackages = ["src/{wheel_package}"]\n' if wheel_package else ""
    dep_list = ", ".join(f'"{d}"' for d in deps)
    (base / "pyproject.toml").write_text(
        f'[project]\nname = "{dist}"\nversion = "0.1.0"\ndependencies = [{dep_list}]\n{wheel}'
    )
    for rel, text in files.items():
        path = base / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text))
    return base


LU_SRC = {"src/lamina_linear_util/__init__.py": "import functools\n"}
TC_DEPS = ["lamina-linear-util>=0.1,<0.2"]


# --- the three fixture workspaces, through the command line -----------------

def test_tools_clean_fixture_passes() -> None:
    result = run_cli(FIXTURES / "clean")
    assert result.returncode == 0, result.stdout + result.stderr
    assert result.stdout == ""
    assert "3 packages" in result.stderr and "0 error(s)" in result.stderr


def test_tools_upward_fixture_is_rejected() -> None:
    result = run_cli(FIXTURES / "upward")
    assert result.returncode == 1
    lines = result.stdout.splitlines()
    assert len(lines) == 1
    assert lines[0].startswith(
        "packages/linear-util/src/lamina_linear_util/lazy.py:5: "
        "lamina_linear_util.lazy imports lamina_tracing_core: tracing-core is a higher layer"
    )


def test_tools_undeclared_fixture_is_rejected() -> None:
    result = run_cli(FIXTURES / "undeclared")
    assert result.returncode == 1
    assert result.stdout.splitlines() == [
        "packages/tracing-core/src/lamina_tracing_core/backend.py:2: lamina_tracing_core.backend "
        "imports jaxlib: not declared in tracing-core/pyproject.toml [project] dependencies"
    ]


# --- floors, cycles and local imports: one fixture workspace per rule ----------

SRC = "packages/linear-util/src/lamina_linear_util/"
FLOORS = "(linear-util/pyproject.toml [tool.lamina.floors])"
NO_REASON = ("function-local import without a reason (say why it is not at the top "
             "in a comment on its line or the line above)")
LU = "lamina_linear_util"

FLOOR_CASES: dict[str, tuple[list[str], str]] = {
    "cycle_two": ([
        f"{SRC}a.py:1: {LU}.a imports {LU}.b: import cycle of 2 modules in {LU}: a, b (cycle: a -> b -> a)",
    ], "1 import cycle(s), 0 upward import(s), 0 function-local import(s) without a reason"),
    "cycle_three": ([
        f"{SRC}a.py:1: {LU}.a imports {LU}.b: import cycle of 3 modules in {LU}: a, b, c "
        "(cycle: a -> b -> c -> a)",
    ], "1 import cycle(s), no floors declared, 0 function-local import(s) without a reason"),
    "upward": ([
        f"{SRC}base.py:2: {LU}.base imports {LU}.mid: upward import: mid is on floor 1, "
        f"above base on floor 0 {FLOORS}",
        f"{SRC}mid.py:1: {LU}.mid imports {LU}.high: upward import: high is on floor 2, "
        f"above mid on floor 1 {FLOORS}",
    ], "0 import cycle(s), 2 upward import(s), 0 function-local import(s) without a reason"),
    "same_floor": ([], "0 import cycle(s), 0 upward import(s), 0 function-local import(s) without a reason"),
    "uncovered": ([
        f"packages/linear-util/pyproject.toml:9: {LU}: floor 1 of linear-util/pyproject.toml "
        "[tool.lamina.floors] lists 'missing', which covers no module",
        f"packages/linear-util/pyproject.toml:10: {LU}: linear-util/pyproject.toml "
        "[tool.lamina.floors] lists 'a' twice (floors 0 and 2)",
        f"{SRC}b.py:1: {LU}.b: on no floor of linear-util/pyproject.toml [tool.lamina.floors]: "
        "list it, or a glob that covers it",
        f"{SRC}sub/__init__.py:1: {LU}.sub: on no floor of linear-util/pyproject.toml "
        "[tool.lamina.floors]: list it, or a glob that covers it",
    ], "0 import cycle(s), 0 upward import(s), 0 function-local import(s) without a reason"),
    "glob": ([
        f"{SRC}sub/deep/z.py:2: {LU}.sub.deep.z imports {LU}.sub.x: upward import: sub.x is on floor 3, "
        f"above sub.deep.z on floor 2 {FLOORS}",
        f"{SRC}sub/low.py:2: {LU}.sub.low imports {LU}.sub.x: upward import: sub.x is on floor 3, "
        f"above sub.low on floor 1 {FLOORS}",
    ], "0 import cycle(s), 2 upward import(s), 0 function-local import(s) without a reason"),
    "type_checking": ([
        f"{SRC}low.py:9: {LU}.low imports {LU}.other: upward import: other is on floor 1, "
        f"above low on floor 0 {FLOORS}",
    ], "0 import cycle(s), 1 upward import(s), 0 function-local import(s) without a reason"),
    "local_imports": ([
        f"{SRC}mod.py:{line}: {LU}.mod imports json: {NO_REASON}" for line in (17, 22, 27, 39, 44)
    ], "0 import cycle(s), no floors declared, 5 function-local import(s) without a reason"),
    "relative": ([
        f"{SRC}sub/x.py:2: {LU}.sub.x imports {LU}.sub.y: import cycle of 2 modules in {LU}: "
        "sub.x, sub.y (cycle: sub.x -> sub.y -> sub.x)",
        f"{SRC}sub/y.py:5: {LU}.sub.y imports {LU}.sub.x: upward import: sub.x is on floor 2, "
        f"above sub.y on floor 1 {FLOORS}",
    ], "1 import cycle(s), 1 upward import(s), 0 function-local import(s) without a reason"),
    "init": ([
        f"{SRC}early.py:1: {LU}.early imports {LU}.sub.sibling: upward import: it first runs sub "
        f"(its package __init__), on floor 2, above early on floor 0 {FLOORS}",
        f"{SRC}uses_version.py:1: {LU}.uses_version imports {LU}: upward import: {LU} is on "
        f"the top floor (the package __init__), above uses_version on floor 3 {FLOORS}",
    ], "0 import cycle(s), 2 upward import(s), 0 function-local import(s) without a reason"),
}


@pytest.mark.parametrize("case", sorted(FLOOR_CASES))
def test_tools_floor_fixture(case: str) -> None:
    expected, counts = FLOOR_CASES[case]
    result = run_cli(FIXTURES / "floors" / case)
    assert result.stdout.splitlines() == expected
    assert f"check_layers: linear-util: {counts}\n" in result.stderr
    assert result.returncode == (1 if expected else 0), result.stderr


def test_tools_clean_fixture_declares_floors() -> None:
    workspace = check_layers.load_workspace(FIXTURES / "clean")
    assert workspace.packages[0].floors == (("__about__",), ("util.deep",), ("util",), ("wrapped",))
    assert "check_layers: linear-util: 0 import cycle(s), 0 upward import(s)" in run_cli(FIXTURES / "clean").stderr


@pytest.mark.parametrize("order", ['"a"', '[["a"], "b"]', '[["a b"]]', '[["a.*.b"]]', '[[1]]'])
def test_tools_malformed_floors_are_exit_2(tmp_path: Path, order: str) -> None:
    base = make_package(tmp_path, "linear-util", [], {"src/lamina_linear_util/a.py": ""})
    with (base / "pyproject.toml").open("a") as file:
        file.write(f"\n[tool.lamina.floors]\norder = {order}\n")
    result = run_cli(tmp_path)
    assert result.returncode == 2
    assert "[tool.lamina.floors]" in result.stderr


def test_tools_floors_need_one_import_package(tmp_path: Path) -> None:
    base = make_package(tmp_path, "linear-util", [], {"src/one/__init__.py": "", "src/two/__init__.py": ""})
    with (base / "pyproject.toml").open("a") as file:
        file.write('\n[tool.lamina.floors]\norder = [["x"]]\n')
    result = run_cli(tmp_path)
    assert result.returncode == 2
    assert "needs a package with one import name" in result.stderr


def test_tools_cycles_are_found_without_floors_in_every_package(tmp_path: Path) -> None:
    make_package(tmp_path, "linear-util", [], LU_SRC)
    make_package(tmp_path, "tracing-core", TC_DEPS, {
        "src/lamina_tracing_core/__init__.py": "from . import core\n",
        "src/lamina_tracing_core/core.py": "from lamina_tracing_core import NAME\n",
        "tests/test_tc_cycle.py": "import tc_a\n",
        "tests/tc_a.py": "import test_tc_cycle\n",
    })
    found = findings(tmp_path)
    assert [(f.rule, f.path.name, f.line, f.module, f.imported) for f in found] == [
        ("cycle", "__init__.py", 1, "lamina_tracing_core", "lamina_tracing_core.core"),
    ]
    assert found[0].why.endswith("lamina_tracing_core, core (cycle: lamina_tracing_core -> core -> "
                                 "lamina_tracing_core)")


def test_tools_import_of_a_package_runs_its_init_from_outside_only(tmp_path: Path) -> None:
    make_package(tmp_path, "linear-util", [], {
        "src/lamina_linear_util/__init__.py": "",
        "src/lamina_linear_util/user.py": "import lamina_linear_util.sub.leaf\n",
        "src/lamina_linear_util/sub/__init__.py": "from .leaf import f\n",
        "src/lamina_linear_util/sub/leaf.py": "from lamina_linear_util.sub.other import g\nf = g\n",
        "src/lamina_linear_util/sub/other.py": "from lamina_linear_util import sub\ng = 1\n",
    })
    sources = [check_layers.parse_source(p, tmp_path / "packages/linear-util/src")
               for p in sorted((tmp_path / "packages/linear-util/src").rglob("*.py"))]
    graph = check_layers.module_graph("lamina_linear_util", sources)
    assert {(e.source, e.target, e.named) for e in graph.edges} == {
        ("lamina_linear_util.user", "lamina_linear_util.sub.leaf", "lamina_linear_util.sub.leaf"),
        ("lamina_linear_util.user", "lamina_linear_util.sub", "lamina_linear_util.sub.leaf"),
        ("lamina_linear_util.sub", "lamina_linear_util.sub.leaf", "lamina_linear_util.sub.leaf"),
        ("lamina_linear_util.sub.leaf", "lamina_linear_util.sub.other", "lamina_linear_util.sub.other"),
        ("lamina_linear_util.sub.other", "lamina_linear_util.sub", "lamina_linear_util.sub"),
    }
    # other names sub/__init__ itself, which imports leaf, which imports other: a cycle.
    (found,) = findings(tmp_path)
    assert found.rule == "cycle" and "sub, sub.leaf, sub.other" in found.why


@pytest.mark.parametrize(("comment", "reason"), [
    ("# optional dependency: scipy is not required", True),
    ("# noqa: PLC0415 - jaxlib is loaded lazily", True),
    ("# noqa: PLC0415", False),
    ("# type: ignore[import-not-found]", False),
    ("# pragma: no cover", False),
    ("#", False),
])
def test_tools_is_reason(comment: str, reason: bool) -> None:
    assert check_layers.is_reason(comment) is reason


def test_tools_strongly_connected_components() -> None:
    edges = [check_layers.Edge(a, b, 1, b) for a, b in
             [("a", "b"), ("b", "a"), ("b", "c"), ("c", "d"), ("d", "e"), ("e", "c"), ("f", "f")]]
    components = check_layers.strongly_connected("abcdef", edges)
    assert sorted(components) == [["a", "b"], ["c", "d", "e"], ["f"]]


def test_tools_missing_packages_folder_is_exit_2(tmp_path: Path) -> None:
    result = run_cli(tmp_path)
    assert result.returncode == 2
    assert "no packages/ folder" in result.stderr


# --- rules, on small temp workspaces ----------------------------------------

def findings(root: Path) -> list[check_layers.Finding]:
    return check_layers.Checker(check_layers.load_workspace(root)).check()


def test_tools_type_checking_imports_are_checked(tmp_path: Path) -> None:
    make_package(tmp_path, "linear-util", [], {
        "src/lamina_linear_util/__init__.py": """\
            from typing import TYPE_CHECKING
            if TYPE_CHECKING:
                from lamina_tracing_core.avals import ShapedArray
            """,
    })
    make_package(tmp_path, "tracing-core", TC_DEPS, {"src/lamina_tracing_core/__init__.py": ""})
    (found,) = findings(tmp_path)
    assert (found.line, found.module, found.imported) == (3, "lamina_linear_util", "lamina_tracing_core.avals")
    assert found.error


def test_tools_lower_layer_must_be_declared(tmp_path: Path) -> None:
    make_package(tmp_path, "linear-util", [], LU_SRC)
    make_package(tmp_path, "tracing-core", TC_DEPS, {"src/lamina_tracing_core/__init__.py": ""})
    make_package(tmp_path, "mlir-lowering", ["lamina-tracing-core>=0.1,<0.2"], {
        "src/lamina_mlir_lowering/rules.py": "def f():\n    import lamina_linear_util.pytree  # lazy\n",
    })
    (found,) = findings(tmp_path)
    assert found.error and found.line == 2
    assert "lamina-linear-util is a lower layer but not in mlir-lowering/pyproject.toml" in found.why


def test_tools_relative_imports_are_resolved(tmp_path: Path) -> None:
    make_package(tmp_path, "linear-util", [], {
        "src/lamina_linear_util/__init__.py": "from . import a\n",
        "src/lamina_linear_util/a.py": "from .b import c\n",
        "src/lamina_linear_util/sub/__init__.py": "from ..a import x\nfrom ... import escape\n",
    })
    found = findings(tmp_path)
    assert [(f.path.name, f.line, f.imported) for f in found] == [("__init__.py", 2, "...escape")]
    assert "climbs above the top-level package" in found[0].why


@pytest.mark.parametrize(("module", "is_package", "level", "target", "expected"), [
    ("pkg.mod", False, 1, "x", "pkg.x"),
    ("pkg.mod", False, 1, None, "pkg"),
    ("pkg.sub", True, 1, "y", "pkg.sub.y"),
    ("pkg.sub", True, 2, None, "pkg"),
    ("pkg.sub.mod", False, 2, "z", "pkg.z"),
    ("pkg.mod", False, 2, "x", None),
    ("toplevel", False, 1, "x", None),
])
def test_tools_resolve_relative(module: str, is_package: bool, level: int, target: str | None,
                                expected: str | None) -> None:
    assert check_layers.resolve_relative(module, is_package, level, target) == expected


def test_tools_dynamic_imports_are_checked(tmp_path: Path) -> None:
    make_package(tmp_path, "linear-util", [], {
        "src/lamina_linear_util/__init__.py": """\
            import importlib
            mod = importlib.import_module("lamina_tracing_core")
            other = __import__("scipy")
            fine = importlib.import_module("json")
            """,
    })
    make_package(tmp_path, "tracing-core", TC_DEPS, {"src/lamina_tracing_core/__init__.py": ""})
    assert [(f.line, f.imported) for f in findings(tmp_path)] == [(2, "lamina_tracing_core"), (3, "scipy")]


def test_tools_declared_distributions_map_to_import_names(tmp_path: Path) -> None:
    make_package(tmp_path, "linear-util",
                 ["jaxlib>=0.10.2,<0.11", "numpy>=2.0", "typing-extensions>=4.12", "ml_dtypes>=0.5",
                  "Opt.Einsum ; python_version >= '3.11'"], {
        "src/lamina_linear_util/__init__.py": """\
            import jaxlib.xla_client
            import ml_dtypes
            import numpy as np
            import opt_einsum
            from typing_extensions import Self
            from jaxlib.mlir import ir
            import lamina_linear_util.other
            from __future__ import annotations
            """,
    })
    assert findings(tmp_path) == []


@pytest.mark.parametrize(("dist", "names"), [
    ("jaxlib", ("jaxlib",)),
    ("numpy", ("numpy",)),
    ("typing-extensions", ("typing_extensions",)),
    ("typing_extensions", ("typing_extensions",)),
    ("ml_dtypes", ("ml_dtypes",)),
    ("lamina-x-y", ("lamina_x_y",)),
    ("PyYAML", ("yaml",)),
])
def test_tools_dist_import_names(dist: str, names: tuple[str, ...]) -> None:
    assert check_layers.dist_import_names(dist) == names


def test_tools_import_name_comes_from_wheel_setting(tmp_path: Path) -> None:
    make_package(tmp_path, "linear-util", [], {"src/lu_core/__init__.py": "import lu_core.x\n"},
                 wheel_package="lu_core")
    make_package(tmp_path, "tracing-core", TC_DEPS,
                 {"src/lamina_tracing_core/__init__.py": "import lu_core\n"})
    workspace = check_layers.load_workspace(tmp_path)
    assert [p.import_names for p in workspace.packages] == [("lu_core",), ("lamina_tracing_core",)]
    assert findings(tmp_path) == []


def _with_extras(base: Path, extras: str) -> None:
    pyproject = base / "pyproject.toml"
    pyproject.write_text(pyproject.read_text() + f"\n[project.optional-dependencies]\n{extras}\n")


def test_tools_extra_imports_must_survive_its_absence(tmp_path: Path) -> None:
    base = make_package(tmp_path, "linear-util", [], {
        "src/lamina_linear_util/__init__.py": """\
            try:
                import rich.console
            except (ImportError, AttributeError):
                rich = None
            try:
                from rich.table import Table
            except ModuleNotFoundError:
                Table = None
            def draw():
                # optional: present only with the `rich` extra
                from rich.panel import Panel
            import rich
            try:
                import rich.text
            except ValueError:
                pass
            import scipy
            """,
    })
    _with_extras(base, 'rich = ["rich>=13"]\ntest = ["scipy>=1.10"]')
    found = [(f.line, f.imported, f.error) for f in findings(tmp_path)]
    # unguarded top level (12), a handler that does not catch ImportError (14), and the
    # test extra, which stays for tests (17)
    assert found == [(12, "rich", True), (14, "rich.text", True), (17, "scipy", True)]
    result = run_cli(tmp_path)
    assert result.returncode == 1
    assert "imports rich: only in an extra of linear-util/pyproject.toml" in result.stdout


def test_tools_extra_imports_guarded_pass(tmp_path: Path) -> None:
    base = make_package(tmp_path, "linear-util", [], {
        "src/lamina_linear_util/__init__.py": """\
            try:
                import rich
            except ImportError:
                rich = None
            """,
    })
    _with_extras(base, 'rich = ["Rich>=13"]')
    assert findings(tmp_path) == []
    assert run_cli(tmp_path).returncode == 0


def test_tools_tests_folder_rules(tmp_path: Path) -> None:
    make_package(tmp_path, "linear-util", [], LU_SRC)
    make_package(tmp_path, "tracing-core", TC_DEPS, {
        "src/lamina_tracing_core/__init__.py": "",
        "tests/tc_helpers.py": "",
        "tests/test_tc_rules.py": """\
            import numpy, pytest, hypothesis
            import lamina_linear_util, lamina_tracing_core
            import tc_helpers
            from . import tc_helpers as again
            import lamina_mlir_lowering
            import jax
            """,
    })
    make_package(tmp_path, "mlir-lowering", ["lamina-tracing-core>=0.1,<0.2"],
                 {"src/lamina_mlir_lowering/__init__.py": ""})
    found = [(f.line, f.imported, f.error) for f in findings(tmp_path)]
    assert found == [(5, "lamina_mlir_lowering", True), (6, "jax", False)]
    result = run_cli(tmp_path)
    assert result.returncode == 1
    assert "test_tc_rules.py:6: warning: test_tc_rules imports jax" in result.stdout


def test_tools_strict_turns_warnings_into_errors(tmp_path: Path) -> None:
    make_package(tmp_path, "linear-util", [], {**LU_SRC, "tests/test_lu_w.py": "import jax\n"})
    assert run_cli(tmp_path).returncode == 0
    assert run_cli(tmp_path, "--strict").returncode == 1


def test_tools_higher_layer_dependency_declared(tmp_path: Path) -> None:
    make_package(tmp_path, "linear-util", ["lamina-tracing-core>=0.1,<0.2"], LU_SRC)
    make_package(tmp_path, "tracing-core", TC_DEPS, {"src/lamina_tracing_core/__init__.py": ""})
    (found,) = findings(tmp_path)
    assert found.path.name == "pyproject.toml" and found.line == 4
    assert "not a lower layer" in found.why


def test_tools_syntax_error_is_a_violation(tmp_path: Path) -> None:
    make_package(tmp_path, "linear-util", [], {"src/lamina_linear_util/__init__.py": "def (:\n"})
    (found,) = findings(tmp_path)
    assert found.error and "cannot be parsed" in found.why


def test_tools_folder_outside_layer_order_is_exit_2(tmp_path: Path) -> None:
    make_package(tmp_path, "extras", [], {"src/lamina_extras/__init__.py": ""})
    result = run_cli(tmp_path)
    assert result.returncode == 2
    assert "not in the layer order" in result.stderr


def test_tools_real_workspace_is_read_in_layer_order() -> None:
    workspace = check_layers.load_workspace(check_layers.default_root())
    assert tuple(p.folder for p in workspace.packages) == check_layers.LAYER_ORDER
    assert [p.import_names for p in workspace.packages] == [
        ("lamina_linear_util",), ("lamina_tracing_core",), ("lamina_mlir_lowering",),
        ("lamina_interpreters_pxla",), ("lamina_sharded_jit",), ("lamina",),
    ]
