"""``initialize`` and ``shutdown``: joining and leaving a multi-process run.

The engine is jaxlib's: process 0 runs the coordination service
(``_jax.get_distributed_runtime_service``), every process connects a
``DistributedRuntimeClient`` to it, and the CPU client is created with that
client and gloo TCP collectives (``backends.set_distributed_settings``).

jaxlib *aborts the process* (a C++ fatal log, not an exception) when
``connect()`` fails, so everything that can be checked in Python is checked
first: the arguments, the backend state, and whether the coordinator's port
answers at all (a wrong address is a :class:`DistributedError` naming it).
If the port answers but the other processes never join, jaxlib's abort at
the end of ``initialization_timeout`` is preceded by a message from lamina
saying which address and how many processes it was waiting for. After
connecting, the processes check that they agree on ``num_processes``, and
``pmap`` is switched to mapping over every process's devices
(:mod:`lamina_interpreters_pxla.multihost_pmap`).

A run whose peer failed (a ``sync_global_devices`` barrier timed out) cannot
shut down cleanly: the exit barrier would time out and jaxlib would abort the
process, so :func:`shutdown` then leaves the client and service alone.

Lost processes. The service is started *recoverable*: when a process other
than 0 stops sending heartbeats, jaxlib no longer aborts every other process.
Instead a daemon thread of each process (:class:`_PeerMonitor`) meets the
others in ``get_live_nodes`` rounds; a round that comes back without some
process means that process was lost, which is recorded (``sync_global_devices``
then fails at once), printed, and raised in the main thread as
:class:`ProcessLostError` (asynchronously, at its next Python instruction).
Recoverable tasks do not wait for each other in jaxlib's shutdown, so
:func:`shutdown` meets the others at a barrier of its own first. What cannot
be caught: the death of process 0 (its service goes with it, and jaxlib
aborts the other processes at once), and a main thread blocked in a jaxlib
call (a collective, a barrier) sees the error only once the call returns.

Duplicated ``process_id``. Process 0 checks that the coordinator's port is
free before starting the service (the service's socket would share it with a
second process 0). After connecting, every process claims its id in the
key-value store; the second claim of an id fails, and the process that made
it says the id is taken and by which process, and flags it for the others,
who report it after the settings barrier.
"""

from __future__ import annotations

import atexit
import ctypes
import errno
import os
import socket
import sys
import threading
import time
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from lamina_interpreters_pxla import backends, multihost_pmap, multihost_utils
from lamina_interpreters_pxla._jaxlib import _jax


class DistributedError(RuntimeError):
    """A multi-process run could not be joined, was joined wrongly, or broke."""


class ProcessLostError(DistributedError):
    """A process of the run stopped sending heartbeats (it died or hangs).

    Raised asynchronously in the main thread; the message names the process.
    """

    def __init__(self, *args: object) -> None:
        # raised by class from the monitor thread, so the message is looked up
        super().__init__(*(args or (multihost_utils.peer_failure() or
                                    "a process of the run was lost",)))


@dataclass
class _State:
    coordinator_address: str
    num_processes: int
    process_id: int
    service: Any  # _jax.DistributedRuntimeService on process 0, else None
    client: Any  # _jax.DistributedRuntimeClient
    monitor: _PeerMonitor | None
    shutdown_timeout: int


_lock = threading.Lock()
_state: _State | None = None

#: environment variables read when an argument is not given
ENV_ADDRESS = "LAMINA_COORDINATOR_ADDRESS"
ENV_NUM_PROCESSES = "LAMINA_NUM_PROCESSES"
ENV_PROCESS_ID = "LAMINA_PROCESS_ID"


def is_initialized() -> bool:
    """True between a successful :func:`initialize` and :func:`shutdown`."""
    return _state is not None


def distributed_client() -> Any:
    """This process's ``DistributedRuntimeClient`` (key-value store, barriers),
    or None outside a multi-process run."""
    state = _state
    return None if state is None else state.client


# --- arguments ---------------------------------------------------------------------------
def _from_env(value: Any, variable: str, convert: type = str) -> Any:
    if value is not None:
        return value
    raw = os.environ.get(variable)
    if raw is None or raw.strip() == "":
        return None
    try:
        return convert(raw.strip())
    except ValueError as e:
        raise DistributedError(f"lamina.distributed.initialize: environment variable "
                               f"{variable}={raw!r} is not a valid {convert.__name__}") from e


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _split_address(address: Any, what: str) -> tuple[str, int]:
    """``'host:port'`` (or ``'[v6]:port'``) as (host, port); a clear error otherwise."""
    if not isinstance(address, str) or ":" not in address:
        raise DistributedError(f"lamina.distributed.initialize: {what} must be 'host:port', "
                               f"got {address!r}")
    host, _, port_text = address.rpartition(":")
    host = host[1:-1] if host.startswith("[") and host.endswith("]") else host
    try:
        port = int(port_text)
    except ValueError:
        port = -1
    if not host or not 0 < port < 65536:
        raise DistributedError(f"lamina.distributed.initialize: {what} must be 'host:port' "
                               f"with a port in 1..65535, got {address!r}")
    return host, port


def _check_arguments(address: Any, num_processes: Any, process_id: Any,
                     timeouts: dict[str, Any]) -> None:
    missing = [name for name, value in (("coordinator_address", address),
                                        ("num_processes", num_processes),
                                        ("process_id", process_id)) if value is None]
    if missing:
        raise DistributedError(
            f"lamina.distributed.initialize: missing {', '.join(missing)} (pass them, or set "
            f"{ENV_ADDRESS}, {ENV_NUM_PROCESSES} and {ENV_PROCESS_ID})")
    _split_address(address, "coordinator_address")
    if not _is_int(num_processes) or num_processes < 1:
        raise DistributedError(f"lamina.distributed.initialize: num_processes must be a "
                               f"positive int, got {num_processes!r}")
    if not _is_int(process_id) or not 0 <= process_id < num_processes:
        raise DistributedError(
            f"lamina.distributed.initialize: process_id must be an int in "
            f"[0, {num_processes}) (num_processes={num_processes}), got {process_id!r}")
    for name, value in timeouts.items():
        if not isinstance(value, (int, float)) or isinstance(value, bool) or value <= 0:
            raise DistributedError(f"lamina.distributed.initialize: {name} must be a positive "
                                   f"number of seconds, got {value!r}")


def _check_local_device_ids(local_device_ids: Any) -> tuple[int, ...] | None:
    if local_device_ids is None:
        return None
    ids = (local_device_ids,) if _is_int(local_device_ids) else local_device_ids
    if not isinstance(ids, Sequence) or not all(_is_int(i) and i >= 0 for i in ids) or \
            len(set(ids)) != len(ids):
        raise DistributedError(f"lamina.distributed.initialize: local_device_ids must be a "
                               f"non-negative int or a sequence of distinct ones, got "
                               f"{local_device_ids!r}")
    return tuple(ids)


# --- reaching the coordinator -----------------------------------------------------------------
def _wait_for_coordinator(address: str, deadline: float, process_id: int,
                          timeout: float) -> None:
    """Polls the coordinator's TCP port until it accepts a connection.

    jaxlib's ``connect()`` aborts the process when the coordinator cannot be
    reached, so unreachability is detected here, where it can be an exception.
    A refused connection is retried (process 0 may not have started yet).
    """
    host, port = _split_address(address, "coordinator_address")
    last_error: OSError | None = None
    while True:
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            break
        try:
            with socket.create_connection((host, port), timeout=min(remaining, 2.0)):
                return
        except socket.gaierror as e:
            raise DistributedError(
                f"lamina.distributed.initialize: process {process_id} cannot resolve the "
                f"coordinator address {address}: {e}") from e
        except OSError as e:
            last_error = e
        time.sleep(min(0.1, max(deadline - time.monotonic(), 0)))
    why = f" ({last_error.strerror or last_error})" if last_error is not None else ""
    raise DistributedError(
        f"lamina.distributed.initialize: process {process_id} could not reach the coordinator "
        f"at {address} within initialization_timeout={timeout:g}s{why}. Check the address, "
        f"and that process 0 of the run was started")


def _warn_before_abort(address: str, process_id: int, num_processes: int,
                       seconds: float) -> threading.Timer:
    """Arms a message for the case jaxlib aborts the process in ``connect()``."""
    def say() -> None:
        print(f"lamina.distributed.initialize: process {process_id} reached the coordinator "
              f"at {address} but not all {num_processes} processes joined within the "
              f"initialization timeout; jaxlib ends the process now", file=sys.stderr,
              flush=True)
    timer = threading.Timer(max(seconds - 0.5, seconds * 0.9), say)
    timer.daemon = True
    timer.start()
    return timer


def _check_port_free(bind_address: str) -> None:
    """Process 0's port must be free: gRPC listens with ``SO_REUSEPORT``, so a
    second process 0 would start a second service on the same port silently."""
    host, port = _split_address(bind_address, "coordinator_bind_address")
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    try:
        probe = socket.socket(family, socket.SOCK_STREAM)
    except OSError:
        return  # no such address family here: the service reports what fails
    with probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # ignore TIME_WAIT
        try:
            probe.bind((host, port))
        except OSError as e:
            if e.errno == errno.EADDRINUSE:
                raise DistributedError(
                    f"lamina.distributed.initialize: process 0 cannot start the coordinator "
                    f"service on {bind_address}: the port is already in use. Another process "
                    f"of this run may also have been given process_id=0 (a duplicate "
                    f"process_id: each process needs its own), or another program listens "
                    f"on the port") from e


def _start_service(bind_address: str, num_processes: int, heartbeat: int,
                   shutdown_timeout: int) -> Any:
    _check_port_free(bind_address)
    try:
        return _jax.get_distributed_runtime_service(
            bind_address, num_processes, heartbeat_timeout=heartbeat,
            shutdown_timeout=shutdown_timeout, recoverable=True)
    except Exception as e:
        raise DistributedError(
            f"lamina.distributed.initialize: process 0 could not start the coordinator "
            f"service on {bind_address} (is the port in use?): {e}") from e


def _check_same_run(client: Any, address: str, num_processes: int, process_id: int,
                    timeout: float) -> None:
    """Every process must agree with process 0 on the number of processes.

    Each process publishes its count; process 0 reads everyone's, the others
    read process 0's, so both sides of a disagreement report it. Everyone then
    meets at a barrier before raising, so no process leaves (taking the
    coordinator with it) before the others have read what they need.
    """
    _claim_process_id(client, address, process_id)
    prefix = "lamina/distributed/num_processes/"
    client.key_value_set(f"{prefix}{process_id}", str(num_processes), allow_overwrite=True)
    problem: str | None = None
    for peer in (range(1, num_processes) if process_id == 0 else (0,)):
        try:
            theirs = client.blocking_key_value_get(f"{prefix}{peer}", int(timeout * 1000))
        except Exception as e:
            problem = (f"process {process_id} could not read process {peer}'s settings from "
                       f"the coordinator at {address}: {e}")
            break
        if theirs != str(num_processes):
            problem = (f"inconsistent arguments: process {process_id} was given "
                       f"num_processes={num_processes}, but process {peer} was given "
                       f"num_processes={theirs} (coordinator {address})")
            break
    try:
        client.wait_at_barrier("lamina/distributed/settings_checked", int(timeout * 1000))
    except Exception as e:
        problem = problem or (f"process {process_id}: not every process checked the run's "
                              f"settings at {address}: {e}")
    duplicates = _flagged_duplicates(client)
    if problem is None and duplicates:
        problem = (f"process_id {duplicates[0]} was given to two processes (a duplicate "
                   f"process_id: each process of the run needs its own; coordinator "
                   f"{address})")
    if problem is not None:
        raise DistributedError(f"lamina.distributed.initialize: {problem}")


_MEMBER_PREFIX = "lamina/distributed/member/"
_DUPLICATE_PREFIX = "lamina/distributed/duplicate/"


def _claim_process_id(client: Any, address: str, process_id: int) -> None:
    """Claims ``process_id`` in the key-value store; a second claim fails.

    jaxlib's recoverable service takes a second process with the same id for
    a restart of the first, so duplicates are caught here. The process that
    claims second says so (naming the first) and flags the id for the others.
    """
    me = f"{socket.gethostname()} pid {os.getpid()} ({uuid.uuid4().hex[:8]})"
    key = f"{_MEMBER_PREFIX}{process_id}"
    try:
        client.key_value_set(key, me)
        return
    except Exception as e:  # ALREADY_EXISTS: someone holds the id
        if "ALREADY_EXISTS" not in str(e):
            raise DistributedError(f"lamina.distributed.initialize: process {process_id} "
                                   f"could not register at {address}: {e}") from e
    try:
        holder = client.key_value_try_get(key)
    except Exception:
        holder = "another process"
    client.key_value_set(f"{_DUPLICATE_PREFIX}{process_id}", me, allow_overwrite=True)
    raise DistributedError(
        f"lamina.distributed.initialize: process_id {process_id} is a duplicate: it was "
        f"already taken by {holder} (this process is {me}); each process of the run "
        f"needs its own process_id (coordinator {address})")


def _flagged_duplicates(client: Any) -> list[int]:
    try:
        entries = client.key_value_dir_get(_DUPLICATE_PREFIX)
    except Exception:
        return []
    return sorted(int(key.rsplit("/", 1)[1]) for key, _ in entries)


# --- lost processes ---------------------------------------------------------------------------
class _PeerMonitor:
    """Watches for processes that stop sending heartbeats (see the module docstring).

    Every process runs one; each ``get_live_nodes`` call returns once every
    live process has made one, so the monitors advance in rounds. A round
    without some process means jaxlib's service declared it dead (after
    ``heartbeat_timeout_seconds``).
    """

    def __init__(self, client: Any, process_id: int, num_processes: int,
                 interval: float) -> None:
        self._client = client
        self._process_id = process_id
        self._everyone = list(range(num_processes))
        self._interval = interval
        self._stopping = threading.Event()
        self._main = threading.main_thread().ident
        self._thread = threading.Thread(target=self._run, name="lamina-peer-monitor",
                                        daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        """Stops reporting; a round already waiting finishes on its own."""
        self._stopping.set()

    def _run(self) -> None:
        while not self._stopping.is_set():
            try:
                live = self._client.get_live_nodes(self._everyone)
            except Exception as e:
                if not self._stopping.is_set():
                    self._report(f"the coordination service stopped answering process "
                                 f"{self._process_id}: {e}")
                return
            lost = [p for p in self._everyone if p not in live]
            if self._stopping.is_set():
                return
            if lost:
                self._report(
                    f"process{'es' if len(lost) > 1 else ''} {', '.join(map(str, lost))} of "
                    f"the run stopped sending heartbeats (died or hangs); process "
                    f"{self._process_id} cannot go on with the run")
                return
            self._stopping.wait(self._interval)

    def _report(self, what: str) -> None:
        reason = f"lamina.distributed: {what}"
        multihost_utils.record_peer_failure(reason)
        print(reason, file=sys.stderr, flush=True)
        if self._main is not None:
            ctypes.pythonapi.PyThreadState_SetAsyncExc(ctypes.c_ulong(self._main),
                                                       ctypes.py_object(ProcessLostError))


def _bind_address_for(address: str, bind: str | None) -> str:
    if bind is not None:
        _split_address(bind, "coordinator_bind_address")
        return bind
    return "[::]:" + address.rsplit(":", 1)[1]


# --- the API ------------------------------------------------------------------------------------
def initialize(coordinator_address: str | None = None, num_processes: int | None = None,
               process_id: int | None = None, local_device_ids: Any = None, *,
               initialization_timeout: float = 300, heartbeat_timeout_seconds: int = 100,
               shutdown_timeout_seconds: int = 300,
               coordinator_bind_address: str | None = None) -> None:
    """Joins this process to a multi-process run; call it before any lamina computation.

    Arguments default to ``LAMINA_COORDINATOR_ADDRESS`` (``host:port`` of process
    0), ``LAMINA_NUM_PROCESSES`` and ``LAMINA_PROCESS_ID`` (what
    ``python -m lamina.distributed.launch`` sets). Process 0 also starts the
    coordination service, listening on ``coordinator_bind_address`` (default
    every interface, the address's port).

    Errors (:class:`DistributedError`): a missing or malformed argument, a second
    call, a call after a backend was created, a coordinator that cannot be
    reached within ``initialization_timeout`` seconds (the message names the
    address), a ``num_processes`` that differs from process 0's, and a
    ``process_id`` that another process already has. A process other than 0
    that stops sending heartbeats for ``heartbeat_timeout_seconds`` makes the
    others raise :class:`ProcessLostError` (naming it) in their main thread;
    losing process 0 ends the others (jaxlib aborts them).

    ``local_device_ids`` (an int or a sequence of ints) is validated and, as in
    JAX, has no effect on CPU: CPU processes size themselves from
    ``config.num_cpu_devices`` (``LAMINA_NUM_CPU_DEVICES``, which the launcher
    sets). GPU runs see every local GPU (the backends layer does not yet pass
    a device subset to the plugin).
    """
    global _state
    address = _from_env(coordinator_address, ENV_ADDRESS)
    count = _from_env(num_processes, ENV_NUM_PROCESSES, int)
    pid = _from_env(process_id, ENV_PROCESS_ID, int)
    _check_arguments(address, count, pid, {
        "initialization_timeout": initialization_timeout,
        "heartbeat_timeout_seconds": heartbeat_timeout_seconds,
        "shutdown_timeout_seconds": shutdown_timeout_seconds})
    _check_local_device_ids(local_device_ids)
    with _lock:
        if _state is not None:
            raise DistributedError(
                f"lamina.distributed.initialize should only be called once (this process "
                f"already joined the run at {_state.coordinator_address} as process "
                f"{_state.process_id} of {_state.num_processes}; call shutdown() first)")
        if backends.backends_are_initialized():
            raise DistributedError(
                "lamina.distributed.initialize must be called before any lamina computation "
                "(a backend was already created, e.g. by lamina.devices() or an array)")
        _state = _join(address, count, pid, float(initialization_timeout),
                       int(heartbeat_timeout_seconds), int(shutdown_timeout_seconds),
                       _bind_address_for(address, coordinator_bind_address))
    atexit.register(shutdown)


def _join(address: str, count: int, pid: int, timeout: float, heartbeat: int,
          shutdown_timeout: int, bind_address: str) -> _State:
    deadline = time.monotonic() + timeout
    service = _start_service(bind_address, count, heartbeat, shutdown_timeout) \
        if pid == 0 else None
    connected = None
    try:
        _wait_for_coordinator(address, deadline, pid, timeout)
        remaining = max(1, int(deadline - time.monotonic()))
        client = _jax.get_distributed_runtime_client(
            address, pid, init_timeout=remaining, heartbeat_timeout=heartbeat,
            shutdown_timeout=shutdown_timeout, shutdown_on_destruction=False)
        timer = _warn_before_abort(address, pid, count, remaining)
        try:
            client.connect()
        finally:
            timer.cancel()
        connected = client
        _check_same_run(client, address, count, pid, max(1.0, deadline - time.monotonic()))
        collectives = _jax.make_gloo_tcp_collectives(distributed_client=client)
        backends.set_distributed_settings(backends.DistributedSettings(
            client=client, process_id=pid, num_processes=count, collectives=collectives))
        multihost_pmap.install()  # pmap then maps over every process's devices
    except BaseException:
        if connected is not None:
            _keep_forever(connected, service)  # tearing a joined run down aborts the process
        elif service is not None:
            service.shutdown()
        raise
    monitor = None
    if count > 1:
        monitor = _PeerMonitor(client, pid, count, interval=min(1.0, heartbeat / 4))
        monitor.start()
    return _State(address, count, pid, service, client, monitor, shutdown_timeout)


def _keep_forever(*objects: Any) -> None:
    """Never destroys ``objects``: after a peer failed, destroying this
    process's client or service makes jaxlib abort the process (its error
    poller sees the connection go), so they are left for the OS to reclaim."""
    for obj in objects:
        if obj is not None:
            ctypes.pythonapi.Py_IncRef(ctypes.py_object(obj))


def shutdown() -> None:
    """Leaves the run: waits for every process to leave too, disconnects the
    client, and stops the service on process 0. Safe to call twice.

    After a peer failed (a ``sync_global_devices`` barrier timed out) the
    waiting is skipped: it could only time out (see the module docstring).
    """
    global _state
    with _lock:
        state, _state = _state, None
    if state is None:
        return
    atexit.unregister(shutdown)
    if state.monitor is not None:
        state.monitor.stop()
    if multihost_utils.peer_failure() is None and state.num_processes > 1:
        try:  # recoverable tasks do not wait for each other in client.shutdown()
            state.client.wait_at_barrier("lamina/distributed/shutdown",
                                         state.shutdown_timeout * 1000)
        except Exception as e:
            multihost_utils.record_peer_failure(
                f"lamina.distributed.shutdown: not every process reached the exit barrier: "
                f"{e}")
    if multihost_utils.peer_failure() is not None:
        _keep_forever(state.client, state.service)
        return
    try:
        state.client.shutdown()
    finally:
        if state.service is not None:
            state.service.shutdown()
