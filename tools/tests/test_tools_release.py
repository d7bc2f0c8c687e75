"""Tests for tools/release.py: version rules, bump on a temp workspace, and (slow) build + verify."""

from __future__ import annotations

import datetime as dt
import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import check_layers
import pytest
import release
from release import ReleaseError, Version

TOOLS = Path(__file__).resolve().parent.parent
FIXTURES = Path(__file__).resolve().parent / "fixtures"
SCRIPT = TOOLS / "release.py"
DATE = "2025-03-04"


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    """A temp copy of the clean fixture: linear-util < tracing-core < lamina, all 0.1.0."""
    root = tmp_path / "ws"
    shutil.copytree(FIXTURES / "clean", root)
    return root


def run_cli(root: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, str(SCRIPT), "--root", str(root), *args],
                          capture_output=True, text=True, check=False)


def read(root: Path, rel: str) -> str:
    return (root / "packages" / rel).read_text()


# --- versions and specifiers -----------------------------------------------

@pytest.mark.parametrize(("part", "expected"), [("major", "1.0.0"), ("minor", "0.3.0"), ("patch", "0.2.2")])
def test_tools_version_bump(part: str, expected: str) -> None:
    assert str(Version.parse("0.2.1").bump(part)) == expected


@pytest.mark.parametrize("text", ["0.1", "1.2.3rc1", "v1.2.3", ""])
def test_tools_version_parse_rejects(text: str) -> None:
    with pytest.raises(ReleaseError, match="X.Y.Z"):
        Version.parse(text)


@pytest.mark.parametrize(("version", "expected"), [
    ("0.2.0", ">=0.2,<0.3"), ("0.2.5", ">=0.2,<0.3"), ("1.0.0", ">=1.0,<2"), ("2.3.1", ">=2.3,<3"),
])
def test_tools_compatible_range(version: str, expected: str) -> None:
    assert Version.parse(version).compatible_range() == expected


@pytest.mark.parametrize(("spec", "version", "admits"), [
    (">=0.1,<0.2", "0.1.0", True),
    (">=0.1,<0.2", "0.1.9", True),
    (">=0.1,<0.2", "0.2.0", False),
    (">=0.1, <0.2", "0.0.9", False),
    ("", "5.0.0", True),
    ("==0.1.*", "0.1.4", True),
    ("==0.1.*", "0.2.0", False),
    ("!=0.1.*", "0.2.0", True),
    ("~=1.2", "1.9.0", True),
    ("~=1.2", "2.0.0", False),
    ("~=1.2.3", "1.2.9", True),
    ("~=1.2.3", "1.3.0", False),
    ("==0.1.0", "0.1.0", True),
    (">0.1", "0.1.0", False),
    ("<=0.1", "0.1.0", True),
])
def test_tools_specifier_admits(spec: str, version: str, admits: bool) -> None:
    assert release.specifier_admits(spec, Version.parse(version)) is admits


def test_tools_rewrite_requirement() -> None:
    new = Version.parse("0.2.0")
    assert release.rewrite_requirement("lamina-linear-util>=0.1,<0.2", new) == "lamina-linear-util>=0.2,<0.3"
    assert release.rewrite_requirement("lamina-linear-util>=0.1,<0.3", new) is None
    assert (release.rewrite_requirement("lamina-x[extra] >=0.1,<0.2 ; python_version >= '3.11'", new)
            == "lamina-x[extra]>=0.2,<0.3 ; python_version >= '3.11'")


# --- bump on a temp workspace ----------------------------------------------

def test_tools_bump_minor_updates_version_ranges_and_changelogs(workspace: Path) -> None:
    result = run_cli(workspace, "bump", "linear-util", "minor", "--date", DATE)
    assert result.returncode == 0, result.stderr
    assert "lamina-linear-util: 0.1.0 -> 0.2.0" in result.stdout
    assert read(workspace, "linear-util/src/lamina_linear_util/__about__.py") == '__version__ = "0.2.0"\n'
    for dependent in ("tracing-core", "lamina"):
        text = read(workspace, f"{dependent}/pyproject.toml")
        assert '"lamina-linear-util>=0.2,<0.3",' in text
        assert "lamina-linear-util>=0.1" not in text
        assert ("Requires `lamina-linear-util>=0.2,<0.3` (was `lamina-linear-util>=0.1,<0.2`)."
                in read(workspace, f"{dependent}/CHANGELOG.md"))
    # other requirements and the other packages' versions are untouched
    assert '"lamina-tracing-core>=0.1,<0.2",' in read(workspace, "lamina/pyproject.toml")
    assert '"numpy>=2.0",' in read(workspace, "tracing-core/pyproject.toml")
    assert read(workspace, "tracing-core/src/lamina_tracing_core/__about__.py") == '__version__ = "0.1.0"\n'
    assert read(workspace, "linear-util/CHANGELOG.md") == textwrap.dedent(f"""\
        # Changelog — lamina-linear-util

        ## Unreleased

        ## 0.2.0 — {DATE}

        - First version.
        """)
    assert run_cli(workspace, "status").returncode == 0
    # the check_layers view of the bumped workspace still reads and passes
    assert check_layers.Checker(check_layers.load_workspace(workspace)).check() == []


def test_tools_bump_patch_keeps_admitting_ranges(workspace: Path) -> None:
    before = read(workspace, "tracing-core/pyproject.toml")
    result = run_cli(workspace, "bump", "lamina-linear-util", "patch", "--date", DATE)
    assert result.returncode == 0, result.stderr
    assert read(workspace, "linear-util/src/lamina_linear_util/__about__.py") == '__version__ = "0.1.1"\n'
    assert read(workspace, "tracing-core/pyproject.toml") == before
    assert f"## 0.1.1 — {DATE}" in read(workspace, "linear-util/CHANGELOG.md")
    assert "Requires" not in read(workspace, "tracing-core/CHANGELOG.md")


def test_tools_bump_major_then_minor_default_date(workspace: Path) -> None:
    root = check_layers.load_workspace(workspace)
    release.bump(root, "lamina_tracing_core", "major", dt.date(2025, 1, 2))
    assert '"lamina-tracing-core>=1.0,<2",' in read(workspace, "lamina/pyproject.toml")
    assert run_cli(workspace, "bump", "tracing-core", "minor").returncode == 0
    changelog = read(workspace, "tracing-core/CHANGELOG.md")
    assert f"## 1.1.0 — {dt.date.today().isoformat()}\n\n- No changes recorded." in changelog
    assert changelog.index("## Unreleased") < changelog.index("## 1.1.0") < changelog.index("## 1.0.0 — 2025-01-02")
    assert '"lamina-tracing-core>=1.0,<2",' in read(workspace, "lamina/pyproject.toml")  # 1.1.0 admitted


def test_tools_bump_refuses_existing_heading_and_changes_nothing(workspace: Path) -> None:
    changelog = workspace / "packages/linear-util/CHANGELOG.md"
    changelog.write_text(changelog.read_text() + "\n## 0.2.0 — 2024-01-01\n\n- Old.\n")
    before = {p: p.read_text() for p in workspace.rglob("*") if p.is_file()}
    result = run_cli(workspace, "bump", "linear-util", "minor")
    assert result.returncode == 1
    assert "already has a heading for 0.2.0" in result.stderr
    assert {p: p.read_text() for p in workspace.rglob("*") if p.is_file()} == before


def test_tools_unknown_package_is_a_clear_error(workspace: Path) -> None:
    result = run_cli(workspace, "bump", "nope", "minor")
    assert result.returncode == 1
    assert "no package 'nope'" in result.stderr and "linear-util" in result.stderr


def test_tools_changelog_without_unreleased_section(tmp_path: Path) -> None:
    path = tmp_path / "CHANGELOG.md"
    path.write_text("# Changelog — x\n\n## 0.1.0 — 2024-01-01\n\n- First.\n")
    release.changelog_release(path, Version(0, 2, 0), dt.date(2025, 1, 1))
    text = path.read_text()
    assert text.index("## Unreleased") < text.index("## 0.2.0 — 2025-01-01") < text.index("## 0.1.0")
    release.changelog_note(path, "Note.")
    assert "## Unreleased\n\n- Note.\n\n## 0.2.0" in path.read_text()


def test_tools_status_reports_a_range_that_does_not_admit(workspace: Path) -> None:
    about = workspace / "packages/linear-util/src/lamina_linear_util/__about__.py"
    about.write_text('__version__ = "0.5.0"\n')
    result = run_cli(workspace, "status")
    assert result.returncode == 1
    assert "lamina-tracing-core requires lamina-linear-util>=0.1,<0.2" in result.stderr


# --- build and verify (slow: a venv, pip and the package index) --------------

slow_release = pytest.mark.skipif(os.environ.get("LAMINA_RELEASE_TESTS") != "1",
                                  reason="set LAMINA_RELEASE_TESTS=1 to build and verify wheels")


@pytest.mark.slow
@slow_release
def test_tools_build_and_verify_a_small_package(workspace: Path) -> None:
    try:
        hatch = release.hatch_command()
    except ReleaseError as err:
        pytest.skip(str(err))
    (workspace / "packages/linear-util/tests/test_fixture_lu_version.py").write_text(
        "import lamina_linear_util\n\n\ndef test_version():\n"
        "    assert lamina_linear_util.__version__ == '0.1.0'\n"
        "    assert 'site-packages' in lamina_linear_util.__file__\n"
    )
    (workspace / "packages/tracing-core/tests/test_fixture_tc_import.py").write_text(
        "import importlib.util\n\nimport lamina_tracing_core\n\n\ndef test_layers():\n"
        "    assert lamina_tracing_core.wrap is not None\n"
        "    assert importlib.util.find_spec('lamina') is None  # the higher layer is not installed\n"
    )
    env = {**os.environ, "PATH": f"{Path(hatch[0]).parent}{os.pathsep}{os.environ['PATH']}"}
    built = subprocess.run([sys.executable, str(SCRIPT), "--root", str(workspace), "build", "linear-util"],
                           capture_output=True, text=True, check=False, env=env)
    assert built.returncode == 0, built.stdout + built.stderr
    dist = workspace / "packages/linear-util/dist"
    assert sorted(p.name for p in dist.iterdir()) == [
        "lamina_linear_util-0.1.0-py3-none-any.whl", "lamina_linear_util-0.1.0.tar.gz",
    ]
    verified = subprocess.run([sys.executable, str(SCRIPT), "--root", str(workspace), "verify", "tracing-core"],
                              capture_output=True, text=True, check=False, env=env)
    assert verified.returncode == 0, verified.stdout + verified.stderr
    assert "installed lamina packages: lamina-linear-util 0.1.0, lamina-tracing-core 0.1.0" in verified.stdout
    assert "1 passed" in verified.stdout
    assert "verify lamina-tracing-core 0.1.0: ok" in verified.stdout


# --- verify's helpers, without building anything ----------------------------

def test_tools_lamina_closure_is_transitive_and_ordered(workspace: Path) -> None:
    ws = check_layers.load_workspace(workspace)
    assert [p.folder for p in release.lamina_closure(ws, ws.find("lamina"))] == ["linear-util", "tracing-core"]
    assert release.lamina_closure(ws, ws.find("linear-util")) == []


def test_tools_ensure_built_reuses_a_fresh_wheel(workspace: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    ws = check_layers.load_workspace(workspace)
    pkg = ws.find("linear-util")
    wheel = pkg.path / "dist" / "lamina_linear_util-0.1.0-py3-none-any.whl"
    wheel.parent.mkdir()
    wheel.write_text("not really a wheel")
    built: list[str] = []
    monkeypatch.setattr(release, "build", lambda p: built.append(p.folder) or (wheel, wheel))
    assert release.ensure_built(pkg) == wheel and built == []
    os.utime(wheel, (0, 0))  # now older than the sources
    release.ensure_built(pkg)
    assert built == ["linear-util"]


def test_tools_verify_environment_and_pytest_config(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "hatch.toml").write_text('[envs.hatch-test.env-vars]\nXLA_FLAGS = "--flag=8"\n')
    (tmp_path / "pytest.toml").write_text(
        '[pytest]\ntestpaths = ["tests"]\npythonpath = ["."]\nmarkers = ["slow: slow test"]\n'
    )
    monkeypatch.setenv("PYTHONPATH", str(tmp_path))
    env = release._test_env(tmp_path)
    assert "PYTHONPATH" not in env and env["XLA_FLAGS"] == "--flag=8"
    assert release._pytest_ini(tmp_path) == "[pytest]\nmarkers =\n    slow: slow test\n"
    assert release._pytest_ini(tmp_path / "nowhere") == "[pytest]\n"
