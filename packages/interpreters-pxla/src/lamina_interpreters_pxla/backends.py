"""Backends (PjRt clients) and devices.

Clients are created lazily, on the first call that needs one: importing this
module creates nothing. The CPU client is always available; its device count
comes from ``config.num_cpu_devices`` (``LAMINA_NUM_CPU_DEVICES``) or else
from ``XLA_FLAGS=--xla_force_host_platform_device_count=N``. GPU clients come
from PjRt plugins (``cuda``, ``rocm``) when their shared library is installed;
lamina loads the library itself through ``xla_client`` and never imports the
plugin's Python package (that would import jax).

``config.platforms`` (``LAMINA_PLATFORMS``) restricts and orders the
platforms; the first one is the default backend. A requested platform that
is not available is a :class:`BackendError` naming what is available.
"""

from __future__ import annotations

import os
import sys
import threading
import warnings
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from lamina_interpreters_pxla._jaxlib import (
    ClientClass,
    _jax,
    jaxlib_utils,
    xc,
)
from lamina_interpreters_pxla._jaxlib import Client, Device, DeviceList
from lamina_interpreters_pxla.config import config


class BackendError(RuntimeError):
    """A requested platform or backend is not available."""


@dataclass(frozen=True)
class DistributedSettings:
    """What a multi-process run passes to every client it creates."""

    client: Any  # _jax.DistributedRuntimeClient
    process_id: int
    num_processes: int
    collectives: Any = None  # e.g. _jax.make_gloo_tcp_collectives(...)


@dataclass(frozen=True)
class BackendFactory:
    """Makes the client of one platform; higher ``priority`` is preferred."""

    platform: str
    make: Callable[[DistributedSettings | None], Client]
    priority: int
    #: False when the platform's absence is normal (a plugin not installed).
    always_available: bool = False
    available: Callable[[], bool] = lambda: True


# --- plugin discovery ---------------------------------------------------------
#: platform -> (glob under a ``jax_plugins`` folder of sys.path, shared library file name)
_PLUGIN_LIBRARIES: dict[str, tuple[str, str]] = {
    "cuda": ("xla_cuda*", "xla_cuda_plugin.so"),
    "rocm": ("xla_rocm*", "xla_rocm_plugin.so"),
}


def _plugin_paths_from_env() -> dict[str, str]:
    """``PJRT_NAMES_AND_LIBRARY_PATHS=name:path,name:path`` (jax's variable)."""
    raw = os.environ.get("PJRT_NAMES_AND_LIBRARY_PATHS", "")
    out: dict[str, str] = {}
    for entry in raw.split(","):
        name, sep, path = entry.partition(":")
        if sep and name.strip() and path.strip():
            out[name.strip()] = path.strip()
    return out


def find_plugin_library(platform: str) -> str | None:
    """The path of ``platform``'s PjRt plugin library, or None if not installed."""
    from_env = _plugin_paths_from_env().get(platform)
    if from_env is not None:
        return from_env if os.path.exists(from_env) else None
    pattern, lib_name = _PLUGIN_LIBRARIES.get(platform, ("", ""))
    if not pattern:
        return None
    import glob  # here: a CPU-only process never searches for plugins

    for plugins in _plugin_folders():
        for folder in sorted(glob.glob(os.path.join(plugins, pattern)), reverse=True):
            candidate = os.path.join(folder, lib_name)
            if os.path.exists(candidate):
                return candidate
    return None


def _plugin_folders() -> list[str]:
    """The ``jax_plugins`` folders of the sys.path entries, in order (one
    stat per entry: globbing every entry costs milliseconds at start-up)."""
    folders = (os.path.join(entry or ".", "jax_plugins") for entry in sys.path)
    return [folder for folder in folders if os.path.isdir(folder)]


def _make_plugin_client(platform: str, dist: DistributedSettings | None) -> Client:
    path = find_plugin_library(platform)
    if path is None:
        raise BackendError(f"the {platform} PjRt plugin library is not installed")
    if not xc.pjrt_plugin_loaded(platform):
        xc.load_pjrt_plugin_dynamically(platform, path)
    if not xc.pjrt_plugin_initialized(platform):
        xc.initialize_pjrt_plugin(platform)
    options: dict[str, Any] = dict(xc.generate_pjrt_gpu_plugin_options())
    options["platform_name"] = platform
    if dist is not None:
        options.update(node_id=dist.process_id, num_nodes=dist.num_processes)
    return xc.make_c_api_client(platform, options, None if dist is None else dist.client)


def _make_cpu_client(dist: DistributedSettings | None) -> Client:
    if dist is None:
        return xc.make_cpu_client(num_devices=config.num_cpu_devices)
    return xc.make_cpu_client(
        distributed_client=dist.client, node_id=dist.process_id,
        num_nodes=dist.num_processes, collectives=dist.collectives,
        num_devices=config.num_cpu_devices)


_factories: dict[str, BackendFactory] = {
    "cpu": BackendFactory("cpu", _make_cpu_client, priority=0, always_available=True),
    "cuda": BackendFactory("cuda", lambda d: _make_plugin_client("cuda", d), priority=200,
                           available=lambda: find_plugin_library("cuda") is not None),
    "rocm": BackendFactory("rocm", lambda d: _make_plugin_client("rocm", d), priority=200,
                           available=lambda: find_plugin_library("rocm") is not None),
}

#: user-facing names that mean one of several platforms
_PLATFORM_ALIASES: dict[str, tuple[str, ...]] = {
    "gpu": ("cuda", "rocm"), "host": ("cpu",),
}


def register_backend_factory(platform: str, make: Callable[[DistributedSettings | None], Client],
                             *, priority: int = 100) -> None:
    """Adds a platform (before the first backend is created)."""
    with _lock:
        if _backends:
            raise BackendError("register_backend_factory must run before backends are created")
        _factories[platform] = BackendFactory(platform, make, priority)


# --- state ------------------------------------------------------------------
_lock = threading.RLock()
#: The clients made, by platform, default first; empty until the first one is
#: (JAX's ``xla_bridge._backends``, which libraries read to learn whether it is
#: still early enough to change the CPU device count). Filled in place, once.
_backends: dict[str, Client] = {}
_backend_errors: dict[str, str] = {}
_default_platform: str | None = None
_distributed: DistributedSettings | None = None


def backends_are_initialized() -> bool:
    return bool(_backends)


config._set_frozen_check(backends_are_initialized)


def set_distributed_settings(settings: DistributedSettings | None) -> None:
    """The hook for multi-process runs: clients created later join ``settings``.

    Must be called before the first backend is created.
    """
    global _distributed
    with _lock:
        if _backends:
            raise BackendError(
                "set_distributed_settings must run before the first backend is created")
        _distributed = settings


def distributed_settings() -> DistributedSettings | None:
    return _distributed


def _absl_level() -> int:
    try:
        return int(os.environ.get("TF_CPP_MIN_LOG_LEVEL", "1"))
    except ValueError:
        return 1


def _requested_platforms() -> list[str] | None:
    names = config.platform_list()
    if names is None:
        return None
    out: list[str] = []
    for name in names:
        for p in _PLATFORM_ALIASES.get(name, (name,)):
            if p not in out:
                out.append(p)
    return out


def _initialize() -> dict[str, Client]:
    global _default_platform
    with _lock:
        if _backends:
            return _backends
        # The env var only counts if set before jaxlib's native module loaded
        # (a lower layer may have loaded it); this call works at any time.
        jaxlib_utils.absl_set_min_log_level(_absl_level())
        requested = _requested_platforms()
        made: dict[str, Client] = {}
        if requested is not None:
            _create_requested(requested, made)
            order = [p for p in requested if p in made]
        else:
            _create_available(made)
            order = sorted(made, key=lambda p: -_factories[p].priority)
        _default_platform = order[0]
        _backends.update((p, made[p]) for p in order)
        return _backends


def _create_requested(requested: list[str], made: dict[str, Client]) -> None:
    for platform in requested:
        factory = _factories.get(platform)
        if factory is None:
            raise BackendError(
                f"unknown platform {platform!r} in LAMINA_PLATFORMS / config.platforms "
                f"({config.platforms!r}); known platforms: {sorted(_factories)}")
        try:
            made[platform] = factory.make(_distributed)
        except Exception as e:
            raise BackendError(
                f"platform {platform!r} was requested (LAMINA_PLATFORMS / config.platforms "
                f"= {config.platforms!r}) but could not be initialized: {e}") from e


def _create_available(made: dict[str, Client]) -> None:
    for platform, factory in _factories.items():
        if not factory.always_available and not factory.available():
            continue
        try:
            made[platform] = factory.make(_distributed)
        except Exception as e:
            if factory.always_available:
                raise
            _backend_errors[platform] = str(e)
            warnings.warn(f"lamina: platform {platform!r} is installed but failed to "
                          f"initialize, falling back: {e}", RuntimeWarning, stacklevel=3)


def backends() -> dict[str, Client]:
    """All initialized clients by platform name, default platform first."""
    return _backends if _backends else _initialize()


def default_backend() -> str:
    """The default platform's name (``'cpu'``, ``'cuda'``)."""
    backends()
    assert _default_platform is not None
    return _default_platform


def get_backend(platform: str | Client | None = None) -> Client:
    """The client for ``platform`` (a name, an alias like ``'gpu'``, a client, or
    None for the default)."""
    if isinstance(platform, ClientClass):
        return platform
    clients = backends()
    if platform is None:
        return clients[default_backend()]
    name = platform.lower()
    for p in _PLATFORM_ALIASES.get(name, (name,)):
        if p in clients:
            return clients[p]
    why = f" ({_backend_errors[name]})" if name in _backend_errors else ""
    raise BackendError(
        f"Unknown backend: {platform!r} requested, but no such platform is available{why}. "
        f"Available platforms: {', '.join(clients)}")


# --- devices ----------------------------------------------------------------
def devices(backend: str | Client | None = None) -> list[Device]:
    """All devices of ``backend`` (every process's, in a multi-process run)."""
    return list(get_backend(backend).devices())


def local_devices(process_index: int | None = None,
                  backend: str | Client | None = None,
                  host_id: int | None = None) -> list[Device]:
    """The devices of one process (this one by default); ``host_id`` is
    ``process_index``'s old name."""
    if host_id is not None:
        warnings.warn("The argument to jax.local_devices has been renamed from `host_id` to "
                      "`process_index`. This alias will eventually be removed; please update "
                      "your code.", UserWarning, stacklevel=2)
        if process_index is not None:
            raise ValueError("local_devices: give process_index or its old name host_id, "
                             "not both")
        process_index = host_id
    client = get_backend(backend)
    if process_index is None:
        return list(client.local_devices())
    return [d for d in client.devices() if d.process_index == process_index]


def device_count(backend: str | Client | None = None) -> int:
    return int(get_backend(backend).device_count())


def local_device_count(backend: str | Client | None = None) -> int:
    return int(get_backend(backend).local_device_count())


def process_index(backend: str | Client | None = None) -> int:
    return int(get_backend(backend).process_index())


def process_count(backend: str | Client | None = None) -> int:
    return int(max(d.process_index for d in devices(backend))) + 1


class _DefaultDeviceState(threading.local):
    def __init__(self) -> None:
        self.device: Device | None = None


_default_device_state = _DefaultDeviceState()

#: Called with the device a :func:`default_device_scope` chooses (None when
#: none is chosen) on entering and leaving one: jit's C++ fast path keys its
#: cache on it.
default_device_hooks: list[Callable[[Device | None], None]] = []


def default_device() -> Device:
    """Where uncommitted data goes: the innermost :func:`default_device_scope`,
    else the default backend's first local device."""
    chosen = _default_device_state.device
    if chosen is not None:
        return chosen
    return _first_local_device()


_first_device_cache: list[Device] = []


def _first_local_device() -> Device:
    if not _first_device_cache:
        _first_device_cache.append(get_backend().local_devices()[0])
    return _first_device_cache[0]


@contextmanager
def default_device_scope(device: Device | str | None) -> Iterator[None]:
    """``with default_device_scope(devices()[3]):`` puts uncommitted data there.

    A platform name selects that platform's first local device.
    """
    chosen = get_backend(device).local_devices()[0] if isinstance(device, str) else device
    previous = _default_device_state.device
    _default_device_state.device = chosen
    for hook in default_device_hooks:
        hook(chosen)
    try:
        yield
    finally:
        _default_device_state.device = previous
        for hook in default_device_hooks:
            hook(previous)


def lowering_platform(device: Device) -> str:
    """The platform name the lowering layer uses for ``device``'s programs
    (jaxlib reports GPUs as ``gpu``; lowering distinguishes ``cuda``/``rocm``)."""
    platform = str(device.platform)
    if platform == "gpu":
        version = str(getattr(device.client, "platform_version", "")).lower()
        return "rocm" if "rocm" in version else "cuda"
    return platform


def device_list(devs: Sequence[Device]) -> DeviceList:
    """jaxlib's hashable DeviceList for ``devs`` (in that order)."""
    return _jax.DeviceList(tuple(devs))
