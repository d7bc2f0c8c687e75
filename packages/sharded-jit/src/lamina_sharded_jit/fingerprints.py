"""Fingerprints for the persistent caches: values, code, and what a run read.

The persistent trace cache (``persistent_trace``) and the persistent lowering
cache (``persistent_lowering``) key their entries by what went into them and
check, when an entry is loaded, that what the stored run read is unchanged.
This module holds what both use:

- :func:`fingerprint` / :func:`feed`: a SHA-256 of a value that is equal
  across processes exactly when the value is (functions by their code,
  closures and defaults; arrays by their bytes; containers and plain objects
  by their contents; devices, meshes and shardings by device ids), or
  :class:`NotCacheable` for a value it cannot see into;
- :func:`register_key_part` / :func:`key_parts`: settings that change what
  tracing and lowering produce, read into every key;
- :func:`recording`, :func:`manifest`, :func:`stale`: the source files (by
  SHA-256) of every function that ran in a block, and the module globals
  user code read there; an entry's manifest is compared when it is loaded.
"""

from __future__ import annotations

import dataclasses
import enum
import functools
import gc
import hashlib
import os
import sys
import types
from collections.abc import Callable, Hashable, Iterator
from contextlib import contextmanager
from typing import Any

import numpy as np
from lamina_interpreters_pxla.array import Array
from lamina_interpreters_pxla._jaxlib import DeviceClass
from lamina_interpreters_pxla.sharding import Mesh, NamedSharding, SingleDeviceSharding
from lamina_tracing_core.jaxpr import ClosedJaxpr, Jaxpr, subjaxprs_of_params

__all__ = ["GlobalsRead", "MAX_DEPTH", "NotCacheable", "feed", "feed_code", "file_hash",
           "fingerprint", "global_fingerprint", "key_parts", "manifest", "placement_text",
           "recording", "register_key_part", "stale"]

MAX_DEPTH = 24


class NotCacheable(Exception):
    """This call cannot use the persistent trace cache (the message says why)."""


# --- fingerprints ---------------------------------------------------------------------------
def fingerprint(value: Any) -> str:
    """A SHA-256 of ``value`` that is equal across processes exactly when the
    value is (see the module docstring); :class:`NotCacheable` for a value it
    cannot see into."""
    h = hashlib.sha256()
    feed(h, value, 0, set())
    return h.hexdigest()


def _name_of(x: Any) -> str:
    return f"{getattr(x, '__module__', None)}.{getattr(x, '__qualname__', None)}"


def feed(h: Any, x: Any, depth: int, seen: set[int]) -> None:
    if depth > MAX_DEPTH:
        raise NotCacheable(f"a value nested more than {MAX_DEPTH} levels deep")
    t = type(x)
    if x is None or t in (bool, int, float, complex, str, bytes):
        h.update(f"{t.__name__}:{x!r};".encode())
        return
    if isinstance(x, (np.ndarray, np.generic)) or t is Array:
        a = np.asarray(x)
        if a.dtype == object:
            raise NotCacheable("an array of Python objects cannot be fingerprinted")
        h.update(f"array:{a.dtype.str}:{a.shape}:{t.__name__};".encode())
        h.update(hashlib.sha256(np.ascontiguousarray(a).tobytes()).digest())
        return
    if isinstance(x, (np.dtype, enum.Enum)):
        h.update(f"{_name_of(t)}:{x!s};".encode())
        return
    if isinstance(x, types.ModuleType):
        h.update(f"module:{x.__name__};".encode())
        return
    if isinstance(x, type):
        h.update(f"type:{_name_of(x)};".encode())
        return
    if isinstance(x, types.CodeType):
        feed_code(h, x)
        return
    placement = placement_text(x)
    if placement is not None:
        h.update(f"{placement};".encode())
        return
    if isinstance(x, (types.BuiltinFunctionType, np.ufunc)):
        h.update(f"builtin:{getattr(x, '__module__', None)}.{x.__name__};".encode())
        return
    if id(x) in seen:  # a cycle: the value is already being fed
        h.update(b"cycle;")
        return
    seen.add(id(x))
    try:
        _feed_composite(h, x, t, depth + 1, seen)
    finally:
        seen.discard(id(x))


def _feed_composite(h: Any, x: Any, t: type, depth: int, seen: set[int]) -> None:
    if isinstance(x, (tuple, list)):
        h.update(f"{_name_of(t)}[{len(x)}](".encode())
        for v in x:
            feed(h, v, depth, seen)
        h.update(b")")
    elif isinstance(x, dict):
        h.update(f"{_name_of(t)}{{{len(x)}}}(".encode())
        for k, v in x.items():
            feed(h, k, depth, seen)
            feed(h, v, depth, seen)
        h.update(b")")
    elif isinstance(x, (set, frozenset)):
        h.update(f"{_name_of(t)}:".encode() + "".join(sorted(fingerprint(v) for v in x)).encode())
    elif isinstance(x, types.FunctionType):
        _feed_function(h, x, depth, seen)
    elif isinstance(x, types.MethodType):
        h.update(b"method:")
        feed(h, x.__self__, depth, seen)
        feed(h, x.__func__, depth, seen)
    elif isinstance(x, functools.partial):
        h.update(b"partial:")
        for part in (x.func, x.args, x.keywords):
            feed(h, part, depth, seen)
    elif hasattr(x, "__wrapped__"):  # jit, custom_jvp, functools.wraps wrappers
        h.update(f"wrapper:{_name_of(t)}:".encode())
        feed(h, x.__wrapped__, depth, seen)
    elif dataclasses.is_dataclass(x):
        h.update(f"dataclass:{_name_of(t)}:".encode())
        for f in dataclasses.fields(x):
            feed(h, f.name, depth, seen)
            feed(h, getattr(x, f.name), depth, seen)
    elif (global_name := _global_name(x, t)) is not None:
        h.update(f"global:{t.__module__}.{global_name};".encode())
    elif t.__module__ not in ("builtins", "_thread") and hasattr(x, "__dict__") \
            and not hasattr(t, "__slots__"):
        h.update(f"object:{_name_of(t)}:".encode())
        feed(h, dict(sorted(vars(x).items())), depth, seen)
    else:
        raise NotCacheable(f"a value of type {_name_of(t)} cannot be fingerprinted")


_OBJECT_REDUCE: Any = object.__reduce__


def _global_name(x: Any, t: type) -> str | None:
    """The name of the module global ``x`` is, when its class says so the way
    pickle reads it (``__reduce__`` returning a string): such an object is
    the same one in every process that imports its module."""
    if t.__reduce__ is _OBJECT_REDUCE:
        return None
    try:
        reduced = x.__reduce__()
    except Exception:  # noqa: BLE001  (a class that refuses pickling)
        return None
    return reduced if isinstance(reduced, str) else None


def _feed_function(h: Any, fn: types.FunctionType, depth: int, seen: set[int]) -> None:
    h.update(f"function:{_name_of(fn)}:".encode())
    feed_code(h, fn.__code__)
    for cell in fn.__closure__ or ():
        try:
            contents = cell.cell_contents
        except ValueError:  # an empty cell (a name assigned later)
            h.update(b"empty-cell;")
            continue
        feed(h, contents, depth, seen)
    feed(h, fn.__defaults__, depth, seen)
    feed(h, fn.__kwdefaults__, depth, seen)


def feed_code(h: Any, code: types.CodeType) -> None:
    h.update(f"code:{code.co_filename}:{code.co_qualname}:{code.co_firstlineno}:"
             f"{code.co_flags}:{code.co_argcount}:{code.co_kwonlyargcount}:".encode())
    for part in (code.co_code, code.co_linetable, code.co_exceptiontable):
        h.update(hashlib.sha256(part).digest())
    h.update(repr((code.co_names, code.co_varnames, code.co_freevars,
                   code.co_cellvars)).encode())
    for const in code.co_consts:
        if isinstance(const, types.CodeType):
            feed_code(h, const)
        else:
            h.update(f"{type(const).__name__}:{const!r};".encode())


# --- settings in every key ------------------------------------------------------------------
_key_parts: list[Callable[[], Hashable]] = []


def register_key_part(part: Callable[[], Hashable]) -> None:
    """Adds a value (a setting that changes what tracing produces) to every key."""
    _key_parts.append(part)


def key_parts() -> list[Hashable]:
    """The registered settings' current values."""
    return [part() for part in _key_parts]



# --- placements ------------------------------------------------------------------------------
def placement_text(x: Any) -> str | None:
    """Devices, meshes and shardings by device ids (their objects differ per
    process); None for other values."""
    if isinstance(x, DeviceClass):
        return f"device:{x.platform}:{x.id}"
    if isinstance(x, Mesh):
        return (f"mesh:{[d.id for d in x._flat_devices]}:{x.devices.shape}:"
                f"{x.axis_names}")
    if isinstance(x, NamedSharding):
        return f"named:{placement_text(x.mesh)}:{tuple(x.spec)!r}:{x.memory_kind}"
    if isinstance(x, SingleDeviceSharding):
        return f"single:{x._device.id}:{x.memory_kind}"
    return None


# --- what tracing read ---------------------------------------------------------------------------
def _stdlib_dirs() -> tuple[str, ...]:
    import sysconfig  # here: a process that records nothing does not load it

    paths = sysconfig.get_paths()
    return tuple(os.path.realpath(paths[k]) + os.sep for k in ("stdlib", "platstdlib"))


def _library_dirs() -> tuple[str, ...]:
    """site-packages and lamina's own packages: their globals are not compared."""
    import importlib.util  # here, as sysconfig: only a process that records needs it
    import sysconfig  # see _stdlib_dirs

    paths = sysconfig.get_paths()
    dirs = {os.path.realpath(paths[k]) for k in ("purelib", "platlib")}
    for name in ("lamina", "lamina_linear_util", "lamina_tracing_core", "lamina_mlir_lowering",
                 "lamina_interpreters_pxla", "lamina_sharded_jit"):
        spec = importlib.util.find_spec(name)
        if spec is not None and spec.submodule_search_locations:
            dirs.update(os.path.realpath(p) for p in spec.submodule_search_locations)
    return tuple(d + os.sep for d in dirs)


_STDLIB: list[tuple[str, ...]] = []  # filled at first use: sysconfig is not cheap to load
_LIBRARIES: list[tuple[str, ...]] = []


def _stdlib() -> tuple[str, ...]:
    if not _STDLIB:
        _STDLIB.append(_stdlib_dirs())
    return _STDLIB[0]


def _is_library(path: str) -> bool:
    if not _LIBRARIES:
        _LIBRARIES.append(_library_dirs())
    return path.startswith(_LIBRARIES[0])


def _generated(path: str) -> bool:
    """Code without a source file: frozen modules, ``exec``'d strings
    (dataclass and namedtuple methods)."""
    return path.startswith("<") and path.endswith(">")


#: module globals one piece of code read: (module, name, fingerprint)
GlobalsRead = list[tuple[str, str, str]]


@contextmanager
def recording() -> Iterator[dict[types.CodeType, GlobalsRead]]:
    """Every code object that runs in the block (this thread) and, for code
    outside the standard library, site-packages and lamina, the globals it
    names, fingerprinted when it is first called (before its body changes them).

    Code a garbage collection runs (``gc.callbacks``, finalizers) is not the
    block's: it runs wherever a collection happens to start, and is skipped."""
    if sys.getprofile() is not None:
        raise NotCacheable("a profiler is active (sys.setprofile)")
    ran: dict[types.CodeType, GlobalsRead] = {}
    collecting = [False]

    def on_event(frame: types.FrameType, event: str, arg: Any) -> None:
        if event == "call" and not collecting[0]:
            code = frame.f_code
            if code not in ran:
                ran[code] = _globals_read(code, frame.f_globals)

    def first(phase: str, info: dict[str, int]) -> None:
        if phase == "start":
            collecting[0] = True

    def last(phase: str, info: dict[str, int]) -> None:
        if phase == "stop":
            collecting[0] = False

    gc.callbacks.insert(0, first)
    gc.callbacks.append(last)
    sys.setprofile(on_event)
    try:
        yield ran
    finally:
        sys.setprofile(None)
        gc.callbacks.remove(first)
        gc.callbacks.remove(last)


def _globals_read(code: types.CodeType, module_globals: dict[str, Any]) -> GlobalsRead:
    path = code.co_filename
    if path.startswith(_stdlib()) or _generated(path) or _is_library(os.path.realpath(path)):
        return []
    module = module_globals.get("__name__")
    if not isinstance(module, str):
        return []
    return [(module, name, global_fingerprint(module_globals[name]))
            for name in code.co_names if name in module_globals]


def _source_codes(jaxpr: Jaxpr, out: set[types.CodeType]) -> None:
    """The code objects of every equation's source location (and its callers)."""
    for eqn in jaxpr.eqns:
        frame = eqn.source_info.frame if eqn.source_info is not None else None
        if frame is not None and frame.code is not None:
            out.add(frame.code)
            out.update(code for code, _ in frame.callers)
        for sub in subjaxprs_of_params(eqn.params):
            _source_codes(sub.jaxpr if isinstance(sub, ClosedJaxpr) else sub, out)


_file_hashes: dict[str, tuple[int, int, str]] = {}


def file_hash(path: str) -> str | None:
    """SHA-256 of a file's contents (remembered per size and modification time)."""
    try:
        st = os.stat(path)
        known = _file_hashes.get(path)
        if known is not None and known[:2] == (st.st_mtime_ns, st.st_size):
            return known[2]
        with open(path, "rb") as f:
            digest = hashlib.sha256(f.read()).hexdigest()
    except OSError:
        return None
    _file_hashes[path] = (st.st_mtime_ns, st.st_size, digest)
    return digest


def global_fingerprint(value: Any) -> str:
    try:
        return fingerprint(value)
    except Exception:  # NotCacheable, or a value whose inspection fails
        return f"opaque:{_name_of(type(value))}"


def manifest(ran: dict[types.CodeType, GlobalsRead], jaxpr: Jaxpr) -> dict[str, Any]:
    codes = set(ran)
    _source_codes(jaxpr, codes)
    files: dict[str, str] = {}
    for code in codes:
        path = code.co_filename
        if path in files or path.startswith(_stdlib()) or _generated(path):
            continue
        digest = file_hash(path)
        if digest is None:
            raise NotCacheable(f"{code.co_qualname} has no source file ({path})")
        files[path] = digest
    read: dict[tuple[str, str], str] = {}
    for reads in ran.values():
        for module, name, digest in reads:
            read.setdefault((module, name), digest)  # the first read's value
    return {"files": files, "globals": sorted((m, n, fp) for (m, n), fp in read.items())}


def stale(manifest: dict[str, Any]) -> str | None:
    """Why the manifest no longer holds, or None."""
    for path, digest in manifest["files"].items():
        if file_hash(path) != digest:
            return f"the source file {path} changed"
    for module, name, digest in manifest["globals"]:
        mod = sys.modules.get(module)
        if mod is None:
            continue  # not imported yet: its globals will come from its (compared) file
        if name not in vars(mod):
            return f"the global {module}.{name} is not defined (yet)"
        if global_fingerprint(vars(mod)[name]) != digest:
            return f"the global {module}.{name} changed"
    return None
