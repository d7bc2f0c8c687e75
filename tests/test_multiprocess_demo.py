"""The demo's ``--processes 2`` mode trains to the single-process result."""

from __future__ import annotations

import os
import re
import subprocess
import sys

import pytest

pytestmark = pytest.mark.multiprocess

FINAL = re.compile(r"final accuracy ([0-9.]+)% \(pmap loss ([0-9.]+), jit loss ([0-9.]+), "
                   r"shard_map loss ([0-9.]+)\)")


def _final(output: str) -> tuple[str, str, str, str]:
    found = FINAL.findall(output)
    assert found, output[-4000:]
    return found[-1]


def test_two_processes_match_one() -> None:
    args = [sys.executable, "-m", "lamina.demo", "--quick", "--epochs", "1"]
    env = {**os.environ, "LAMINA_NUM_CPU_DEVICES": "8", "TF_CPP_MIN_LOG_LEVEL": "1"}
    # both runs at once: the wall time is the longer one's
    two = subprocess.Popen(args + ["--processes", "2"], env=env, stdout=subprocess.PIPE,
                           stderr=subprocess.STDOUT, text=True)
    one = subprocess.Popen(args, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                           text=True)
    try:
        out_two = two.communicate(timeout=240)[0]
        out_one = one.communicate(timeout=240)[0]
    finally:
        two.kill()
        one.kill()
    assert two.returncode == 0, out_two[-4000:]
    assert one.returncode == 0, out_one[-4000:]
    assert "[p0] lamina " in out_two and "8 cpu devices in 2 processes" in out_two
    assert out_two.count("final accuracy") == 1  # process 1 computes the same, quietly
    assert _final(out_two) == _final(out_one)
