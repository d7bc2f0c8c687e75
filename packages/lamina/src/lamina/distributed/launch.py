"""Starts N lamina processes on 127.0.0.1 for one multi-process run.

Usage: ``python -m lamina.distributed.launch -n 2 --local-devices 4 [--timeout S] script.py [args]``
(or ``... -m package.module [args]``).

Each process gets ``LAMINA_COORDINATOR_ADDRESS`` (a free local port),
``LAMINA_NUM_PROCESSES``, ``LAMINA_PROCESS_ID`` and ``LAMINA_NUM_CPU_DEVICES``
in its environment, so a bare ``lamina.distributed.initialize()`` joins the
run. Output (stdout and stderr) is streamed line by line with a ``[pK]``
prefix. As soon as any process fails, or the ``--timeout`` passes, the others
are stopped: a crashed peer never leaves the rest hanging. The exit status is
0 when every process succeeded, the first failing process's status (1 if it
was killed by a signal) otherwise, and 124 on a timeout.
"""

from __future__ import annotations

import argparse
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import IO, Protocol

TIMEOUT_STATUS = 124


class Sink(Protocol):
    """Where the processes' output goes (``sys.stdout``, a ``StringIO``...)."""

    def write(self, text: str, /) -> int: ...

    def flush(self) -> None: ...


_print_lock = threading.Lock()


def free_port() -> int:
    """A TCP port on 127.0.0.1 that was free a moment ago."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def process_env(process_id: int, num_processes: int, port: int, local_devices: int,
                base: Mapping[str, str] | None = None) -> dict[str, str]:
    """The environment of process ``process_id`` of a run on ``127.0.0.1:port``."""
    env = dict(os.environ if base is None else base)
    env.update(LAMINA_COORDINATOR_ADDRESS=f"127.0.0.1:{port}",
               LAMINA_NUM_PROCESSES=str(num_processes), LAMINA_PROCESS_ID=str(process_id),
               LAMINA_NUM_CPU_DEVICES=str(local_devices), PYTHONUNBUFFERED="1")
    env.setdefault("TF_CPP_MIN_LOG_LEVEL", "1")
    return env


def _say(out: Sink, text: str) -> None:
    with _print_lock:
        out.write(text)
        out.flush()


def _stream(prefix: str, pipe: IO[str], out: Sink) -> None:
    for line in iter(pipe.readline, ""):
        try:
            _say(out, f"{prefix} {line if line.endswith(chr(10)) else line + chr(10)}")
        except (BrokenPipeError, ValueError):
            pass  # the reader went away (``| head``); keep draining the child's pipe
    pipe.close()


@dataclass
class RunResult:
    """How a run ended: the launcher's status and each process's own."""

    status: int
    returncodes: list[int | None]
    reason: str


def launch(command: Sequence[str], num_processes: int, local_devices: int,
           timeout: float | None = None, *, env: Mapping[str, str] | None = None,
           out: Sink | None = None) -> int:
    """Runs ``command`` as ``num_processes`` processes; returns the run's status."""
    return run(command, num_processes, local_devices, timeout, env=env, out=out).status


def run(command: Sequence[str], num_processes: int, local_devices: int,
        timeout: float | None = None, *, env: Mapping[str, str] | None = None,
        out: Sink | None = None) -> RunResult:
    """Like :func:`launch`, returning every process's status and why the run ended."""
    if num_processes < 1 or local_devices < 1:
        raise ValueError(f"launch: need at least one process and one device per process, "
                         f"got {num_processes} processes x {local_devices} devices")
    sink = sys.stdout if out is None else out
    port = free_port()
    procs: list[subprocess.Popen[str]] = []
    threads: list[threading.Thread] = []
    try:
        for pid in range(num_processes):
            proc = subprocess.Popen(
                list(command), env=process_env(pid, num_processes, port, local_devices, env),
                stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                start_new_session=True)
            procs.append(proc)
            assert proc.stdout is not None
            thread = threading.Thread(target=_stream, args=(f"[p{pid}]", proc.stdout, sink),
                                      daemon=True)
            thread.start()
            threads.append(thread)
        result = _wait_all(procs, timeout, sink)
    except BaseException:  # KeyboardInterrupt included: never leave processes behind
        _stop(procs)
        raise
    for t in threads:
        t.join(timeout=5)
    if result.status:
        _say(sink, f"[launch] {result.reason}\n")
    return result


def _stop(procs: Sequence[subprocess.Popen[str]]) -> None:
    """Kills every process still running (with whatever it started)."""
    for p in procs:
        if p.poll() is None:
            try:
                os.killpg(p.pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                p.kill()
    for p in procs:
        p.wait()


def _wait_all(procs: list[subprocess.Popen[str]], timeout: float | None,
              sink: Sink) -> RunResult:
    deadline = None if timeout is None else time.monotonic() + timeout
    while True:
        codes = [p.poll() for p in procs]
        failed = [(pid, code) for pid, code in enumerate(codes) if code not in (None, 0)]
        if failed:
            pid, code = failed[0]
            running = [k for k, c in enumerate(codes) if c is None]
            _stop(procs)
            stopped = f"; stopped process(es) {running}" if running else ""
            return RunResult(code if code > 0 else 1, [p.returncode for p in procs],
                             f"process {pid} failed with exit status {code}{stopped}")
        if all(code == 0 for code in codes):
            return RunResult(0, [0] * len(procs), "every process succeeded")
        if deadline is not None and time.monotonic() > deadline:
            running = [k for k, c in enumerate(codes) if c is None]
            _stop(procs)
            return RunResult(TIMEOUT_STATUS, [p.returncode for p in procs],
                             f"timed out after {timeout:g}s; stopped process(es) {running}")
        time.sleep(0.05)


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m lamina.distributed.launch",
        usage="%(prog)s [-n N] [--local-devices D] [--timeout S] (script.py | -m module) [args]",
        description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("-n", "--num-processes", type=int, default=2)
    parser.add_argument("--local-devices", type=int, default=4,
                        help="CPU devices per process (LAMINA_NUM_CPU_DEVICES)")
    parser.add_argument("--timeout", type=float, default=None,
                        help="stop the run (exit status 124) after this many seconds")
    parser.add_argument("script", nargs="?", help="the Python file every process runs")
    parser.add_argument("args", nargs=argparse.REMAINDER)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = _parser()
    words = list(sys.argv[1:] if argv is None else argv)
    if "-m" in words:  # ``-m module args...``: everything after -m is the module's
        cut = words.index("-m")
        head = parser.parse_args(words[:cut])
        if head.script is None:
            if cut + 1 == len(words):
                parser.error("-m needs a module name")
            command = [sys.executable, "-m", *words[cut + 1:]]
            return launch(command, head.num_processes, head.local_devices, head.timeout)
    ns = parser.parse_args(words)
    if ns.script is None:
        parser.error("give a script, or -m and a module")
    return launch([sys.executable, ns.script, *ns.args], ns.num_processes, ns.local_devices,
                  ns.timeout)

if __name__ == "__main__":
    sys.exit(main())
