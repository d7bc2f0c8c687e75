"""``lamina.profiler``: traces of host and device activity, and memory profiles.

Everything here drives jaxlib's profiler (``jaxlib._profiler``, the XLA/TSL
profiler): :func:`start_trace`/:func:`stop_trace` (or the :func:`trace`
context manager) collect a trace and write it, as JAX does, under
``<log_dir>/plugins/profile/<timestamp>/`` as ``<host>.xplane.pb`` (the
XSpace protobuf TensorBoard and XProf read) and ``<host>.trace.json.gz``;
:class:`TraceAnnotation`, :class:`StepTraceAnnotation` and
:func:`annotate_function` name regions of the host timeline;
:func:`start_server` serves on-demand traces to TensorBoard;
:func:`device_memory_profile` is a pprof snapshot of live device buffers.

Only one trace runs at a time (``RuntimeError`` otherwise), and only one
server.
"""

from __future__ import annotations

import functools
import gzip
import http.server
import importlib
import json
import logging
import os
import pathlib
import socketserver
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any, TypeVar

from jaxlib.version import __version__ as jaxlib_version

from lamina_interpreters_pxla.backends import backends, get_backend

from lamina.__about__ import __version__ as lamina_version

__all__ = ["ProfileData", "ProfileEvent", "ProfileOptions", "ProfilePlane",
           "StepTraceAnnotation", "TraceAnnotation", "annotate_function",
           "device_memory_profile", "register_subprocess", "save_device_memory_profile",
           "start_server", "start_trace", "stop_server", "stop_trace", "trace"]

_logger = logging.getLogger(__name__)

# jaxlib's native profiler modules (no type stubs)
_profiler: Any = importlib.import_module("jaxlib._profiler")
_profile_data: Any = importlib.import_module("jaxlib._profile_data")

_F = TypeVar("_F", bound=Callable[..., Any])

#: a collected trace, read back (``ProfileData.from_file(path)``) or in memory
ProfileData: Any = _profile_data.ProfileData
ProfileEvent: Any = _profile_data.ProfileEvent
ProfilePlane: Any = _profile_data.ProfilePlane


class ProfileOptions(_profiler.ProfileOptions):  # type: ignore[misc]  # jaxlib's is Any
    """What a trace collects: ``host_tracer_level`` (default 2),
    ``python_tracer_level`` (default 1: Python calls), ``enable_hlo_proto``
    (default True), ``duration_ms``, ``advanced_configuration``, ..."""


class TraceAnnotation(_profiler.TraceMe):  # type: ignore[misc]
    """``with TraceAnnotation("name", **metadata):`` marks the enclosed code as
    an event ``name`` on the host timeline of a running trace (free when no
    trace runs)."""


class StepTraceAnnotation(TraceAnnotation):
    """``with StepTraceAnnotation("train", step_num=i):`` marks one step of a
    loop; the profiler's step analysis groups the trace by these."""

    def __init__(self, name: str, **kwargs: Any) -> None:
        # `_r=1` is TraceMe's marker for a step event
        super().__init__(name, _r=1, **kwargs)


def annotate_function(func: _F, name: str | None = None, **decorator_kwargs: Any) -> _F:
    """``func`` wrapped so that each call is a :class:`TraceAnnotation` named
    ``name`` (default: the function's qualified name); use with
    ``functools.partial`` to pass ``name`` or metadata to the decorator."""
    label = name or getattr(func, "__qualname__", None) or func.__name__

    @functools.wraps(func)
    def annotated(*args: Any, **kwargs: Any) -> Any:
        with TraceAnnotation(label, **decorator_kwargs):
            return func(*args, **kwargs)

    return annotated  # type: ignore[return-value]


# --- traces -----------------------------------------------------------------------
class _TraceState:
    """The running trace, if any (one per process)."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.session: Any = None
        self.log_dir = ""
        self.perfetto_trace = False
        self.perfetto_link = False


_trace_state = _TraceState()


def start_trace(log_dir: os.PathLike[str] | str, create_perfetto_link: bool = False,
                create_perfetto_trace: bool = False,
                profiler_options: ProfileOptions | None = None) -> None:
    """Starts collecting a trace, to be written to ``log_dir`` by :func:`stop_trace`.

    ``create_perfetto_trace`` also writes ``perfetto_trace.json.gz`` (for
    https://ui.perfetto.dev) next to the trace; ``create_perfetto_link``
    implies it and, at :func:`stop_trace`, serves that file on
    127.0.0.1:9001 and prints a link, blocking until Perfetto fetched it.
    Raises ``RuntimeError`` if a trace is already running.
    """
    if not isinstance(log_dir, (str, os.PathLike)):
        raise TypeError(f"start_trace: log_dir must be a str or path, got {log_dir!r}")
    with _trace_state.lock:
        if _trace_state.session is not None:
            raise RuntimeError("Profile has already been started. "
                               "Only one profile may be run at a time.")  # JAX's words
        _profiler.clear_metadata()
        # the backends' tracers register when the clients are created, so
        # they must exist before the session starts to appear in the trace
        get_backend()
        _set_version_metadata()
        _trace_state.session = _profiler.ProfilerSession(profiler_options or ProfileOptions())
        _trace_state.log_dir = os.fspath(log_dir)
        _trace_state.perfetto_link = create_perfetto_link
        _trace_state.perfetto_trace = create_perfetto_trace or create_perfetto_link


def _set_version_metadata() -> None:
    _profiler.set_metadata("lamina_version", lamina_version)
    _profiler.set_metadata("jaxlib_version", jaxlib_version)
    for client in backends().values():
        _profiler.set_metadata(f"{client.platform}_version", client.platform_version)


def stop_trace() -> None:
    """Stops the running trace and writes it to the ``log_dir`` given to
    :func:`start_trace`; ``RuntimeError`` if no trace is running."""
    with _trace_state.lock:
        session = _trace_state.session
        if session is None:
            raise RuntimeError("No profile started")  # JAX's words
        try:
            session.stop_and_export(_trace_state.log_dir)
            if _trace_state.perfetto_trace:
                perfetto = _write_perfetto_trace(_trace_state.log_dir)
                if _trace_state.perfetto_link:
                    _serve_to_perfetto(perfetto)
        finally:
            _trace_state.session = None
            _profiler.clear_metadata()


@contextmanager
def trace(log_dir: os.PathLike[str] | str, create_perfetto_link: bool = False,
          create_perfetto_trace: bool = False,
          profiler_options: ProfileOptions | None = None) -> Iterator[None]:
    """A trace of the enclosed code (:func:`start_trace` ... :func:`stop_trace`)."""
    start_trace(log_dir, create_perfetto_link, create_perfetto_trace, profiler_options)
    try:
        yield
    finally:
        stop_trace()


def _latest_trace_folder(log_dir: str) -> pathlib.Path:
    folders = list((pathlib.Path(log_dir).absolute() / "plugins" / "profile").iterdir())
    return max(folders, key=os.path.getmtime)


def _write_perfetto_trace(log_dir: str) -> pathlib.Path:
    """``perfetto_trace.json.gz``: the trace's JSON without its ``metadata``
    entry, which Perfetto refuses."""
    folder = _latest_trace_folder(log_dir)
    found = list(folder.glob("*.trace.json.gz"))
    if len(found) != 1:
        raise ValueError(f"stop_trace: expected one *.trace.json.gz in {folder}, "
                         f"found {len(found)}")
    with gzip.open(found[0], "rb") as source:
        events = json.load(source)
    events.pop("metadata", None)
    out = folder / "perfetto_trace.json.gz"
    with gzip.open(out, "wb") as sink:
        sink.write(json.dumps(events).encode("utf-8"))
    _logger.info("wrote %s", out)
    return out


class _PerfettoHandler(http.server.SimpleHTTPRequestHandler):
    """Serves the trace to ui.perfetto.dev (which needs CORS) and records the
    last path fetched."""

    def end_headers(self) -> None:
        self.send_header("Access-Control-Allow-Origin", "*")
        super().end_headers()

    def do_GET(self) -> None:
        self.server.last_request = self.path  # type: ignore[attr-defined]
        super().do_GET()

    def do_POST(self) -> None:
        self.send_error(404, "File not found")


def _serve_to_perfetto(path: pathlib.Path, port: int = 9001) -> None:
    """Serves ``path`` where ui.perfetto.dev looks (127.0.0.1:9001) until it is fetched."""
    handler = functools.partial(_PerfettoHandler, directory=str(path.parent))
    socketserver.TCPServer.allow_reuse_address = True
    with socketserver.TCPServer(("127.0.0.1", port), handler) as server:
        print(f"Open URL in browser: https://ui.perfetto.dev/#!/?url="
              f"http://127.0.0.1:{port}/{path.name}")
        while getattr(server, "last_request", None) != "/" + path.name:
            server.handle_request()


# --- the profiler server ------------------------------------------------------------
_server: Any = None


def start_server(port: int, requires_backend: bool = True) -> Any:
    """Starts the profiler server on ``port``, from which TensorBoard's profile
    plugin (or XProf) captures traces on demand; ``ValueError`` if one runs."""
    global _server
    if _server is not None:
        raise ValueError("Only one profiler server can be active at a time.")  # JAX's
    if isinstance(port, bool) or not isinstance(port, int):
        raise TypeError(f"start_server: port must be an int, got {port!r}")
    if requires_backend:
        get_backend()  # as for start_trace: the device tracers need the clients
    _server = _profiler.start_server(port)
    return _server


def stop_server() -> None:
    """Stops the profiler server; ``ValueError`` if none runs."""
    global _server
    if _server is None:
        raise ValueError("No active profiler server.")  # JAX's words
    _server = None  # dropping jaxlib's server object stops it


def register_subprocess(pid: int, port: int) -> Callable[[], None]:
    """Adds the profiler server of process ``pid`` (on ``port``) to this
    process's traces; returns the function that removes it."""
    unregister: Callable[[], None] = _profiler.register_subprocess(pid, port)
    return unregister


# --- memory ---------------------------------------------------------------------------
def device_memory_profile(backend: str | None = None) -> bytes:
    """A gzipped pprof protobuf of the live device buffers and executables of
    ``backend`` (default: the default backend), with their allocation sites."""
    profile: bytes = gzip.compress(get_backend(backend).heap_profile())
    return profile


def save_device_memory_profile(filename: os.PathLike[str] | str,
                               backend: str | None = None) -> None:
    """Writes :func:`device_memory_profile` to ``filename``."""
    profile = device_memory_profile(backend)
    with open(filename, "wb") as out:
        out.write(profile)
