"""The demo's ``--processes N`` mode: the same training, as N processes.

``python -m lamina.demo --processes 2`` calls :func:`run_in_processes`, which
starts the demo again as 2 processes of 8/2 CPU devices each through
:mod:`lamina.distributed.launch` (with a hidden worker flag). Each worker calls
:func:`join_run` first thing: it joins the run with
``lamina.distributed.initialize()`` and, on every process but 0, silences
stdout (the processes compute the same thing; process 0 reports it). The
parent returns the final accuracy process 0 printed.
"""

from __future__ import annotations

import io
import os
import re
import sys
from collections.abc import Sequence
from typing import IO

from lamina_interpreters_pxla.backends import process_index

from lamina.distributed import launch
from lamina.distributed.runtime import initialize

#: the hidden flag that marks a demo process started by :func:`run_in_processes`
WORKER_FLAG = "--process-worker"
TOTAL_DEVICES = 8
_ACCURACY = re.compile(r"^\[p0\] final accuracy ([0-9.]+)%", re.M)


#: gloo announces each device's connections on stdout (unaffected by log levels)
_GLOO_NOISE = re.compile(r"is connected to \d+ peer ranks")


class _Tee:
    """Writes the launcher's lines to ``out`` (minus gloo's connection notices)
    and keeps a copy (to read the result back)."""

    def __init__(self, out: IO[str]):
        self.out = out
        self.copy = io.StringIO()

    def write(self, text: str) -> int:
        if _GLOO_NOISE.search(text):
            return len(text)
        self.copy.write(text)
        return self.out.write(text)

    def flush(self) -> None:
        self.out.flush()


def run_in_processes(num_processes: int, demo_args: Sequence[str],
                     timeout: float | None = None) -> float:
    """Runs the demo as ``num_processes`` processes; returns its final accuracy."""
    if num_processes < 1 or TOTAL_DEVICES % num_processes:
        raise SystemExit(f"lamina.demo: --processes must divide {TOTAL_DEVICES} (the demo "
                         f"uses {TOTAL_DEVICES} CPU devices in all), got {num_processes}")
    tee = _Tee(sys.stdout)
    command = [sys.executable, "-m", "lamina.demo", WORKER_FLAG, *demo_args]
    status = launch.launch(command, num_processes, TOTAL_DEVICES // num_processes, timeout,
                           out=tee)
    if status:
        raise SystemExit(status)
    found = _ACCURACY.findall(tee.copy.getvalue())
    if not found:
        raise SystemExit("lamina.demo: process 0 did not report a final accuracy")
    return float(found[-1]) / 100


def join_run() -> None:
    """Joins the multi-process run this demo process was started for."""
    initialize()
    if process_index() != 0:  # it would print the same lines as process 0
        sys.stdout.flush()
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())  # also what C++ (gloo) prints there
        os.close(devnull)
