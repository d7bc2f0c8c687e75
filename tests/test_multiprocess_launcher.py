"""``python -m lamina.distributed.launch``: environment, output, exit status.

The launched scripts here are plain Python (no jaxlib), so these runs are cheap.
"""

from __future__ import annotations

import io
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from lamina.distributed import launch

pytestmark = pytest.mark.multiprocess

SCRIPT = textwrap.dedent("""
    import os, sys, time
    pid = int(os.environ["LAMINA_PROCESS_ID"])
    print("hello", pid, os.environ["LAMINA_NUM_PROCESSES"], os.environ["LAMINA_NUM_CPU_DEVICES"],
          os.environ["LAMINA_COORDINATOR_ADDRESS"].startswith("127.0.0.1:"), sys.argv[1:])
    print("to stderr", pid, file=sys.stderr)
    if sys.argv[1:] == ["fail"] and pid == 2:
        sys.exit(7)
    if sys.argv[1:] == ["fail"]:
        time.sleep(60)
""")


@pytest.fixture()
def script(tmp_path: Path) -> Path:
    path = tmp_path / "hello.py"
    path.write_text(SCRIPT)
    return path


def test_every_process_gets_its_environment_and_a_prefix(script: Path) -> None:
    buf = io.StringIO()
    result = launch.run([sys.executable, str(script), "x"], 3, 2, timeout=60, out=buf)
    assert result.status == 0 and result.returncodes == [0, 0, 0]
    lines = buf.getvalue().splitlines()
    for pid in range(3):
        assert f"[p{pid}] hello {pid} 3 2 True ['x']" in lines
        assert f"[p{pid}] to stderr {pid}" in lines


def test_a_failing_process_stops_the_others(script: Path) -> None:
    buf = io.StringIO()
    start = time.monotonic()
    result = launch.run([sys.executable, str(script), "fail"], 3, 1, timeout=60, out=buf)
    assert result.status == 7
    assert result.reason.startswith("process 2 failed with exit status 7; stopped process(es)")
    assert result.returncodes[2] == 7 and all(c != 0 for c in result.returncodes)
    assert "[launch] process 2 failed with exit status 7" in buf.getvalue()
    assert time.monotonic() - start < 30


def test_command_line(script: Path) -> None:
    proc = subprocess.run([sys.executable, "-m", "lamina.distributed.launch", "-n", "2",
                           "--local-devices", "3", str(script), "--flag", "-m", "v"],
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert "[p1] hello 1 2 3 True ['--flag', '-m', 'v']" in proc.stdout
    as_module = subprocess.run([sys.executable, "-m", "lamina.distributed.launch", "-n", "2",
                                "-m", "json.tool", "--help"],
                               capture_output=True, text=True, timeout=60)
    assert as_module.returncode == 0, as_module.stderr
    assert "[p0] usage:" in as_module.stdout and "[p1] usage:" in as_module.stdout
    failing = subprocess.run([sys.executable, "-m", "lamina.distributed.launch", "-n", "3",
                              str(script), "fail"], capture_output=True, text=True, timeout=60)
    assert failing.returncode == 7
    missing = subprocess.run([sys.executable, "-m", "lamina.distributed.launch", "-n", "2"],
                             capture_output=True, text=True, timeout=60)
    assert missing.returncode == 2 and "give a script" in missing.stderr


def test_timeout(tmp_path: Path) -> None:
    script = tmp_path / "sleep.py"
    script.write_text("import time\nprint('started', flush=True)\ntime.sleep(60)\n")
    buf = io.StringIO()
    start = time.monotonic()
    result = launch.run([sys.executable, str(script)], 2, 1, timeout=3, out=buf)
    assert result.status == launch.TIMEOUT_STATUS
    assert result.reason == "timed out after 3s; stopped process(es) [0, 1]"
    assert "[launch] timed out after 3s" in buf.getvalue()
    assert time.monotonic() - start < 20


def test_bad_sizes() -> None:
    with pytest.raises(ValueError, match="at least one process"):
        launch.run([sys.executable, "-c", "pass"], 0, 4)
