"""The persistent compilation cache: compiled programs on disk, shared by processes.

With a cache directory set (``config.update('compilation_cache_dir', path)``,
JAX's ``jax_compilation_cache_dir``, or the environment variable
``LAMINA_COMPILATION_CACHE_DIR``, else ``JAX_COMPILATION_CACHE_DIR``), every
compilation that passes through
:func:`~lamina_interpreters_pxla.compiler.compile_module` (``jit``, ``pmap``,
``sharded_jit``, ``shard_map`` programs, eager ops, resharding programs) is
first looked up on disk, and stored there after compiling, as jaxlib's
serialized executable. A restarted process, or another process sharing the
directory, then loads the executable instead of running XLA.

**The key** (:func:`entry_key`) is a SHA-256 of: the module's bytecode (with
its locations), jaxlib's serialized ``CompileOptions`` (build options, device
assignment, and the XLA debug options, which ``XLA_FLAGS`` sets), the platform
and its version, every device's kind and id, the process index and count when
the program spans processes, and the versions of jaxlib and of lamina's
runtime and lowering. Entries are named ``<module name>-<key>.lamina-xc``.

**The settings** (JAX's names and defaults; the environment variables give the
initial values):

==========================================  ==============================================  =========
setting                                     environment variable                            default
==========================================  ==============================================  =========
compilation_cache_dir                       LAMINA_COMPILATION_CACHE_DIR                    None
enable_compilation_cache                    LAMINA_ENABLE_COMPILATION_CACHE                 True
persistent_cache_min_compile_time_secs      LAMINA_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS   1.0
persistent_cache_min_entry_size_bytes       LAMINA_PERSISTENT_CACHE_MIN_ENTRY_SIZE_BYTES    0
compilation_cache_max_size                  LAMINA_COMPILATION_CACHE_MAX_SIZE               -1
persistent_cache_enable_xla_caches          LAMINA_PERSISTENT_CACHE_ENABLE_XLA_CACHES       xla_gpu_per_fusion_autotune_cache_dir
==========================================  ==============================================  =========

Only compilations that took at least ``min_compile_time_secs`` and whose
serialized executable has at least ``min_entry_size_bytes`` bytes (``-1`` or
``0``: any size) are written. ``compilation_cache_max_size`` (bytes, ``-1``:
no limit) bounds the directory: a write that exceeds it deletes the least
recently used entries (a hit refreshes its entry's modification time).
``persistent_cache_enable_xla_caches`` (``all``, ``none``,
``xla_gpu_kernel_cache_file``, ``xla_gpu_per_fusion_autotune_cache_dir``) puts
XLA's own GPU caches in the same directory; it has no effect on CPU.

**Safety.** Writes go to a temporary file in the directory, then are renamed
over the entry (atomic on POSIX), so concurrent processes never see a torn
entry. Each entry carries its length and a SHA-256 of its payload: a truncated
or corrupt entry, or one jaxlib cannot load, is skipped with a
:class:`PersistentCacheWarning` and the program is compiled (and the entry
rewritten). Modules that call back into this process (host callbacks) are
never cached: their executables refer to objects of the process that
compiled them. Loading an entry runs code from the directory: point the cache
only at directories you trust.

The cache is set up on first use (:func:`is_initialized`);
:func:`reset_cache` forgets it so the next compilation reads the settings again.
"""

from __future__ import annotations

import hashlib
import logging
import os
import pickle
import struct
import threading
import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from jaxlib.version import __version__ as jaxlib_version

from lamina_interpreters_pxla.__about__ import __version__ as runtime_version
from lamina_interpreters_pxla._jaxlib import Device, LoadedExecutable
from lamina_interpreters_pxla.config import ConfigError
from lamina_interpreters_pxla import monitoring
from lamina_linear_util.cache import explain_cache_misses_enabled
from lamina_mlir_lowering.__about__ import __version__ as lowering_version

__all__ = [
    "PersistentCacheConfig", "PersistentCacheWarning", "PersistentCache", "cache_config",
    "active_cache", "is_initialized", "reset_cache", "set_cache_dir", "report", "disk_stats",
    "entry_key", "ENTRY_SUFFIX", "pack_entry", "unpack_entry", "write_atomically",
    "entry_file", "delete_entries", "load_pickled_entry", "store_pickled_entry",
]

logger = logging.getLogger("lamina.cache")


class PersistentCacheWarning(UserWarning):
    """A persistent cache entry was unusable (it is recompiled) or could not be written."""


# --- settings -----------------------------------------------------------------------------
_XLA_CACHE_CHOICES = ("all", "none", "xla_gpu_kernel_cache_file",
                      "xla_gpu_per_fusion_autotune_cache_dir")


def _env(name: str) -> str | None:
    """``LAMINA_<NAME>``, else JAX's ``JAX_<NAME>`` (JAX programs set those)."""
    raw = os.environ.get(f"LAMINA_{name}")
    return raw if raw is not None else os.environ.get(f"JAX_{name}")


def _check_dir(value: Any) -> str | None:
    if value is None or value == "":
        return None
    if not isinstance(value, (str, os.PathLike)):
        raise ConfigError(f"compilation_cache_dir must be a path (str) or None, got {value!r}")
    return os.fspath(value)


def _check_bool(value: Any) -> bool:
    if isinstance(value, str):
        text = value.strip().lower()
        if text in ("1", "true", "yes", "on"):
            return True
        if text in ("0", "false", "no", "off"):
            return False
    if not isinstance(value, bool):
        raise ConfigError(f"enable_compilation_cache must be a bool, got {value!r}")
    return value


def _check_seconds(value: Any) -> float:
    try:
        seconds = float(value)
    except (TypeError, ValueError) as e:
        raise ConfigError("persistent_cache_min_compile_time_secs must be a number of "
                          f"seconds, got {value!r}") from e
    if isinstance(value, bool) or seconds < 0:
        raise ConfigError("persistent_cache_min_compile_time_secs must be >= 0, got "
                          f"{value!r}")
    return seconds


def _check_bytes(name: str) -> Callable[[Any], int]:
    def check(value: Any) -> int:
        try:
            size = int(value)
        except (TypeError, ValueError) as e:
            raise ConfigError(f"{name} must be an int (bytes), got {value!r}") from e
        if isinstance(value, bool) or size < -1:
            raise ConfigError(f"{name} must be -1 or a number of bytes, got {value!r}")
        return size
    return check


def _check_xla_caches(value: Any) -> str:
    text = str(value).strip().lower() if value is not None else "none"
    if text not in _XLA_CACHE_CHOICES:
        raise ConfigError(f"persistent_cache_enable_xla_caches must be one of "
                          f"{list(_XLA_CACHE_CHOICES)}, got {value!r}")
    return text


class PersistentCacheConfig:
    """The persistent cache's settings (one process-wide instance:
    :data:`cache_config`); see the module docstring."""

    _CHECKS: dict[str, Callable[[Any], Any]] = {
        "compilation_cache_dir": _check_dir,
        "enable_compilation_cache": _check_bool,
        "persistent_cache_min_compile_time_secs": _check_seconds,
        "persistent_cache_min_entry_size_bytes":
            _check_bytes("persistent_cache_min_entry_size_bytes"),
        "compilation_cache_max_size": _check_bytes("compilation_cache_max_size"),
        "persistent_cache_enable_xla_caches": _check_xla_caches,
    }
    _DEFAULTS: dict[str, Any] = {
        "compilation_cache_dir": None,
        "enable_compilation_cache": True,
        "persistent_cache_min_compile_time_secs": 1.0,
        "persistent_cache_min_entry_size_bytes": 0,
        "compilation_cache_max_size": -1,
        "persistent_cache_enable_xla_caches": "xla_gpu_per_fusion_autotune_cache_dir",
    }

    def __init__(self) -> None:
        self.values: dict[str, Any] = {}
        for name, default in self._DEFAULTS.items():
            raw = _env(name.upper())
            try:
                self.values[name] = default if raw is None else self._CHECKS[name](raw)
            except ConfigError as e:
                raise ConfigError(f"environment variable LAMINA_{name.upper()}: {e}") from e

    def names(self) -> list[str]:
        return sorted(self._CHECKS)

    def read(self, name: str) -> Any:
        return self.values[name]

    def update(self, name: str, value: Any) -> None:
        """Sets ``name``; a new directory takes effect at the next compilation."""
        if name not in self._CHECKS:
            raise ConfigError(f"unknown persistent cache setting {name!r}; known: "
                              f"{self.names()}")
        self.values[name] = self._CHECKS[name](value)
        if name in ("compilation_cache_dir", "enable_compilation_cache"):
            reset_cache()


cache_config = PersistentCacheConfig()


# --- entries --------------------------------------------------------------------------------
ENTRY_SUFFIX = ".lamina-xc"
_MAGIC = b"LAMINAXC"
_HEADER = struct.Struct("<8sQ32s")  # magic, payload length, sha256(payload)
#: custom-call targets that call into the compiling process (their executables
#: hold pointers into it)
_CALLBACK_MARKERS = (b"python_cpu_callback", b"python_gpu_callback", b"python_callback",
                     b"xla_ffi_python")


def entry_key(module_bytes: bytes, compile_options: Any, devices: Sequence[Device]) -> str:
    """The SHA-256 key of a compilation (see the module docstring)."""
    h = hashlib.sha256(b"lamina-compilation-cache-v1\0")
    h.update(hashlib.sha256(module_bytes).digest())
    h.update(compile_options.SerializeAsString())
    client = devices[0].client
    h.update(f"{client.platform}\0{client.platform_version}\0".encode())
    h.update(repr([(d.platform, d.device_kind, d.id, d.process_index)
                   for d in devices]).encode())
    if len({d.process_index for d in devices}) > 1:
        # a multi-process program's executable is this process's part of it
        h.update(f"process {client.process_index()}".encode())
    h.update(f"jaxlib {jaxlib_version}\0lamina {runtime_version} {lowering_version}".encode())
    return h.hexdigest()


def pack_entry(payload: bytes) -> bytes:
    return _HEADER.pack(_MAGIC, len(payload), hashlib.sha256(payload).digest()) + payload


def unpack_entry(blob: bytes) -> bytes:
    """The payload of an entry; ``ValueError`` saying what is wrong with a bad one."""
    if len(blob) < _HEADER.size:
        raise ValueError(f"truncated ({len(blob)} bytes, shorter than its header)")
    magic, length, digest = _HEADER.unpack_from(blob)
    if magic != _MAGIC:
        raise ValueError("not a lamina compilation cache entry")
    payload = blob[_HEADER.size:]
    if len(payload) != length:
        raise ValueError(f"truncated ({len(payload)} of {length} payload bytes)")
    if hashlib.sha256(payload).digest() != digest:
        raise ValueError("corrupt (its checksum does not match)")
    return payload


def calls_back(module_bytes: bytes) -> bool:
    """True for a module with host callbacks (never cached: see the module docstring)."""
    return any(marker in module_bytes for marker in _CALLBACK_MARKERS)


#: what this process's persistent cache did (tests and benchmarks read it)
disk_stats = {"hits": 0, "misses": 0, "writes": 0, "skipped": 0, "errors": 0}


def report(name: str, outcome: str, detail: str = "", cache: str = "compilation") -> None:
    """Reports a persistent cache event for the program ``name``: ``outcome`` is
    ``hit``, ``miss``, ``write``, ``skip`` or ``error``; ``cache`` is
    ``compilation`` or ``trace``. Logged on the
    ``lamina.cache`` logger, at WARNING when ``explain_cache_misses`` is on
    (beside the other cache explanations), else at DEBUG; compile logging
    calls it too."""
    level = logging.WARNING if explain_cache_misses_enabled() else logging.DEBUG
    if logger.isEnabledFor(level):
        text = f"persistent {cache} cache {outcome} for {name}"
        logger.log(level, "explain: %s%s", text, f": {detail}" if detail else "")


@dataclass
class PersistentCache:
    """One cache directory (see the module docstring)."""

    directory: str

    def path(self, key: str, name: str) -> str:
        return entry_file(self.directory, name, key, ENTRY_SUFFIX, 80)

    def load(self, key: str, name: str, client: Any, device_list: Any,
             compile_options: Any) -> LoadedExecutable | None:
        """The stored executable, or None (absent, or unusable: warned)."""
        path = self.path(key, name)
        try:
            with open(path, "rb") as f:
                blob = f.read()
        except FileNotFoundError:
            disk_stats["misses"] += 1
            report(name, "miss", f"no entry {os.path.basename(path)}")
            return None
        except OSError as e:
            self._unusable(name, path, f"unreadable ({e})")
            return None
        try:
            payload = unpack_entry(blob)
        except ValueError as e:
            self._unusable(name, path, str(e))
            return None
        try:
            loaded: LoadedExecutable = client.deserialize_executable(payload, device_list,
                                                                     compile_options)
        except Exception as e:  # jaxlib raises its runtime error or a ValueError
            self._unusable(name, path, f"jaxlib could not load it ({e})")
            return None
        try:
            os.utime(path)  # least recently used goes first
        except OSError:
            pass
        disk_stats["hits"] += 1
        report(name, "hit", os.path.basename(path))
        return loaded

    def _unusable(self, name: str, path: str, why: str) -> None:
        disk_stats["errors"] += 1
        disk_stats["misses"] += 1
        warnings.warn(f"compile_module: skipping the persistent compilation cache entry "
                      f"{path} for {name}: {why}; compiling it again",
                      PersistentCacheWarning, stacklevel=4)
        report(name, "error", why)

    def store(self, key: str, name: str, loaded: LoadedExecutable,
              compile_seconds: float) -> None:
        """Writes the entry if the settings allow (see the module docstring)."""
        min_time = cache_config.read("persistent_cache_min_compile_time_secs")
        if compile_seconds < min_time:
            disk_stats["skipped"] += 1
            report(name, "skip", f"compiled in {compile_seconds:.3f} s, under "
                   f"persistent_cache_min_compile_time_secs={min_time}")
            return
        try:
            payload = bytes(loaded.serialize())
        except Exception as e:  # some executables cannot be serialized
            disk_stats["skipped"] += 1
            report(name, "skip", f"jaxlib cannot serialize it ({e})")
            return
        min_size = cache_config.read("persistent_cache_min_entry_size_bytes")
        if min_size > 0 and len(payload) < min_size:
            disk_stats["skipped"] += 1
            report(name, "skip", f"{len(payload)} bytes, under "
                   f"persistent_cache_min_entry_size_bytes={min_size}")
            return
        blob = pack_entry(payload)
        max_size = cache_config.read("compilation_cache_max_size")
        if max_size > 0 and len(blob) > max_size:
            disk_stats["skipped"] += 1
            report(name, "skip", f"{len(blob)} bytes, over compilation_cache_max_size")
            return
        try:
            write_atomically(self.path(key, name), blob)
        except OSError as e:
            disk_stats["errors"] += 1
            warnings.warn(f"compile_module: could not write the persistent compilation cache "
                          f"entry for {name} to {self.directory}: {e}",
                          PersistentCacheWarning, stacklevel=4)
            return
        disk_stats["writes"] += 1
        report(name, "write", f"{len(blob)} bytes")
        if max_size > 0:
            self.evict(max_size)

    def entries(self) -> list[tuple[float, int, str]]:
        """(modification time, size, path) of every entry."""
        out = []
        try:
            names = os.listdir(self.directory)
        except OSError:
            return []
        for n in names:
            if not n.endswith(ENTRY_SUFFIX) or n.startswith(".tmp-"):
                continue
            path = os.path.join(self.directory, n)
            try:
                st = os.stat(path)
            except OSError:
                continue  # evicted by another process meanwhile
            out.append((st.st_mtime, st.st_size, path))
        return out

    def evict(self, max_size: int) -> None:
        """Deletes least recently used entries until the directory fits ``max_size``."""
        entries = sorted(self.entries())
        total = sum(size for _, size, _ in entries)
        for _, size, path in entries:
            if total <= max_size:
                break
            try:
                os.unlink(path)
            except OSError:
                pass
            total -= size

    def clear(self) -> None:
        """Deletes every entry."""
        for _, _, path in self.entries():
            try:
                os.unlink(path)
            except OSError:
                pass

    def xla_cache_overrides(self, platform: str) -> tuple[tuple[str, Any], ...]:
        """XLA's own GPU caches in this directory (nothing on other platforms)."""
        if platform not in ("cuda", "rocm", "gpu"):
            return ()
        choice = cache_config.read("persistent_cache_enable_xla_caches")
        out: list[tuple[str, Any]] = []
        for option in ("xla_gpu_kernel_cache_file", "xla_gpu_per_fusion_autotune_cache_dir"):
            if choice in ("all", option):
                out.append((option, os.path.join(self.directory, option)))
        return tuple(out)


def entry_file(directory: str, name: str, key: str, suffix: str, name_chars: int = 60) -> str:
    """``<directory>/<name>-<key><suffix>``, the name cut to ``name_chars``
    characters that are safe in a file name (the others become ``_``)."""
    safe = "".join(c if c.isalnum() or c in "_.-" else "_" for c in name)[:name_chars]
    return os.path.join(directory, f"{safe}-{key}{suffix}")


def delete_entries(directory: str, suffix: str) -> None:
    """Deletes the files ending in ``suffix`` in ``directory`` (if it exists)."""
    for name in os.listdir(directory) if os.path.isdir(directory) else ():
        if name.endswith(suffix):
            try:
                os.unlink(os.path.join(directory, name))
            except OSError:
                pass  # deleted by another process meanwhile


def load_pickled_entry(path: str, fmt: int) -> dict[str, Any] | None:
    """The dict stored at ``path`` by :func:`store_pickled_entry` (the Python
    caches' entries), None if there is no file; an exception saying what is
    wrong with a truncated, corrupt or other-format one (``fmt`` is the
    format the caller reads)."""
    try:
        with open(path, "rb") as f:
            blob = f.read()
    except OSError:
        return None
    entry = pickle.loads(unpack_entry(blob))
    if not isinstance(entry, dict) or entry.get("format") != fmt:
        found = entry.get("format") if isinstance(entry, dict) else type(entry).__name__
        raise ValueError(f"format {found}, not {fmt}")
    return entry


def store_pickled_entry(path: str, pickled: bytes, what: str) -> bool:
    """Writes a pickled entry atomically; whether it was written (else warned
    as an entry of the ``what`` cache that could not be written)."""
    try:
        write_atomically(path, pack_entry(pickled))
    except OSError as e:
        warnings.warn(f"jit: could not write the persistent {what} cache entry {path}: {e}",
                      PersistentCacheWarning, stacklevel=4)
        return False
    return True


def write_atomically(path: str, blob: bytes) -> None:
    """Writes ``blob`` to a temporary file beside ``path``, then renames it over
    ``path``: a reader sees the old file or the whole new one, never a part."""
    import tempfile  # here: a process that only reads the cache does not load it

    directory = os.path.dirname(path)
    os.makedirs(directory, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=directory, prefix=".tmp-")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(blob)
        os.chmod(tmp, 0o644)  # mkstemp's 0600 would hide entries from other users
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise


# --- the process's cache ----------------------------------------------------------------------
_lock = threading.Lock()
_cache: list[PersistentCache | None] = []  # empty: not set up yet


def active_cache() -> PersistentCache | None:
    """The cache compilations use (set up from the settings on first use), or None."""
    if _cache:
        return _cache[0]
    with _lock:
        set_up = not _cache
        if set_up:
            directory = cache_config.read("compilation_cache_dir")
            enabled = cache_config.read("enable_compilation_cache")
            _cache.append(PersistentCache(os.path.abspath(os.path.expanduser(directory)))
                          if directory is not None and enabled else None)
        cache = _cache[0]
    if set_up:  # outside the lock: a listener may compile
        monitoring.record_event("/jax/compilation_cache/tasks_using_cache" if cache is not None
                                else "/jax/compilation_cache/task_disabled_cache")
    return cache


def is_initialized() -> bool:
    """True once a compilation has set up the cache from a directory."""
    return bool(_cache) and _cache[0] is not None


def reset_cache() -> None:
    """Forgets the set-up cache: the next compilation reads the settings again."""
    with _lock:
        _cache.clear()


def set_cache_dir(path: str | os.PathLike[str] | None) -> None:
    """``config.update('compilation_cache_dir', path)``."""
    cache_config.update("compilation_cache_dir", path)

