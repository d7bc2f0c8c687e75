"""The persistent trace cache (opt-in): traced and lowered jit programs on disk.

The persistent compilation cache (``lamina_interpreters_pxla.persistent_cache``)
skips XLA in a restarted process, but tracing and lowering still run. With
``config.update('persistent_trace_cache', True)``, or per function
``jit(f, cache_trace=True)``, the first top-level call of each signature also
writes an entry to ``<compilation_cache_dir>/traces``. A later process calling
the same function with the same signature rebuilds the program from that
entry and takes the executable from the compilation cache: the function's
Python body never runs, and nothing is lowered.

**An entry holds** (one pickle per signature, ``<name>-<key>.lamina-trace``):
the lowered module as StableHLO bytecode, with every argument and result name
and source location; the other facts of the lowering (kept arguments, effect
tokens, shardings of the module); the argument and result names; the input
and output avals; the donated arguments and which inputs were committed; the
compiler options; the device ids, the mesh (device ids, shape, axis names)
and the platforms; the output tree (pickled with an example of its leaves);
and the manifest below. The executable itself is the compilation cache's
entry for that module.

**It does not hold the jaxpr.** Its equations carry Python objects of the
process that traced them (the functions of ``custom_jvp``/``custom_vjp`` and
callbacks, source frames), so a jaxpr cannot be stored without losing what
makes it one. A hit therefore serves calls only: the first ``.trace``,
``.lower``, ``make_jaxpr``, ``eval_shape`` or transformation (``grad`` of the
function) of that signature in the process traces as in a cold process, once
(the in-memory caches keep the result), and gets the same program.

Soundness is the point, so an entry is used only when everything the trace
read is as it was. **The key** (computed before tracing) covers:

- the function: its qualified name, module, code object (bytecode, constants,
  names, line table, file name; nested code objects too), its closure cells'
  values and its default values, fingerprinted recursively (functions they
  hold by their code and closures, arrays by their bytes, containers and
  plain objects by their contents);
- ``jit``'s own arguments (static and donated argument numbers and names,
  ``keep_unused``, ``inline``, compiler options), the static argument values,
  the argument tree structure, every flat argument's type (shape, dtype, weak
  type) and placement (committed or not, and its sharding by device ids),
  the explicit ``in_shardings``/``out_shardings`` and the current mesh;
- the tracing context (x64, the default device) and every lamina setting
  registered with :func:`register_key_part` (``lamina.config`` registers all
  settings but the caches' own), and the versions of Python, jaxlib and
  lamina's packages.

**The entry's manifest** (checked on load) covers what tracing turned out to
read: the SHA-256 of every source file whose functions ran while the call was
traced and lowered (recorded with ``sys.setprofile``), plus the files of every
equation's source location (inner jitted functions traced earlier in the
process), and the values of the module globals that code outside the standard
library, site-packages and lamina names (``co_names`` found in its globals),
fingerprinted as above when that code is first called (so a counter the
body itself increments is compared by its value before the call). A module
not imported yet when the entry is checked passes: importing it runs its
file, which is compared.

**What it cannot see**, so do not rely on it for these: the contents of
objects it cannot fingerprint that are read as globals (only their type is
compared); globals read by installed libraries (site-packages) and lamina
(their files are compared, their runtime state is not); values reached
through attributes of modules (``mylib.SCALE`` read from another module);
anything read from outside Python (files, environment variables, random
numbers) while tracing; code without a source file (``exec``'d strings,
generated dataclass methods) unless it is the jitted function itself. A function whose closure, defaults or static
arguments hold a value it cannot fingerprint is not cached (``explain_cache_misses``
says which value). Calls under a transformation, inside ``sharded_jit``, or
of programs with effects or host callbacks trace as usual.

``persistent_trace_cache_verify`` traces anyway on every hit and warns
(:class:`PersistentTraceMismatchWarning`) when the stored program differs
from the fresh one; :func:`clear_persistent_caches` deletes both caches'
entries. Entries are pickles: like compiled executables, loading one runs
code, so point the cache only at directories you trust.
"""

from __future__ import annotations

import dataclasses
import hashlib
import os
import pickle
import sys
import warnings
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
from jaxlib.version import __version__ as jaxlib_version
from lamina_interpreters_pxla import persistent_cache
from lamina_interpreters_pxla.__about__ import __version__ as runtime_version
from lamina_interpreters_pxla.array import Array
from lamina_interpreters_pxla.backends import default_device
from lamina_interpreters_pxla.executable import Executable
from lamina_interpreters_pxla.sharding import Mesh
from lamina_linear_util import tree_util as tu
from lamina_mlir_lowering.lowering_result import LoweringResult
from lamina_mlir_lowering.serialization import module_to_text
from lamina_tracing_core.avals import ShapedArray

from lamina_sharded_jit.__about__ import __version__
from lamina_sharded_jit.arguments import canonical_aval
from lamina_sharded_jit.dispatch import MISS
from lamina_sharded_jit.execution import (
    CompiledProgram,
    LoweredProgram,
    compile_program,
    lowered_program_of,
)
from lamina_sharded_jit.explain import explain_miss
from lamina_sharded_jit.fingerprints import (
    NotCacheable,
    feed,
    fingerprint,
    key_parts,
    manifest,
    placement_text,
    recording,
    register_key_part,
    stale,
)
from lamina_sharded_jit.persistent_lowering import clear_persistent_lowerings
from lamina_sharded_jit.params import JitInfo, flat_in_shardings, flat_out_shardings
from lamina_sharded_jit.settings import config
from lamina_sharded_jit.shardings import is_unspecified

__all__ = ["NotCacheable", "PersistentTraceMismatchWarning", "clear_persistent_caches",
           "enabled", "fingerprint", "register_key_part", "stats", "call_key", "TRACE_SUFFIX"]

TRACE_SUFFIX = ".lamina-trace"
_FORMAT = 1

#: what this process's trace cache did (tests and benchmarks read it)
stats = {"hits": 0, "misses": 0, "stores": 0, "uncacheable": 0, "verified": 0,
         "mismatches": 0}


class PersistentTraceMismatchWarning(UserWarning):
    """Verify mode found a stored program that differs from a fresh trace."""


def enabled(per_function: bool | None) -> bool:
    """Whether a function's calls use the trace cache (``jit(f, cache_trace=...)``
    wins over the setting)."""
    return config.persistent_trace_cache if per_function is None else per_function


# --- the key ---------------------------------------------------------------------------------
def _placement(x: Any) -> str:
    if type(x) is Array:
        impl = x._arr
        text = placement_text(impl._sharding)
        if text is None:
            raise NotCacheable(f"an argument has a sharding of type "
                               f"{type(impl._sharding).__name__}")
        return f"{'committed' if impl._committed else 'uncommitted'}:{text}"
    return "host"


def call_key(info: JitInfo, static_key: Any, structure: Any, leaves: Sequence[Any],
             avals: Sequence[ShapedArray], context: Any) -> str:
    """The key of one call signature (see the module docstring)."""
    x64, axes, mesh, extra, *rest = context  # rest: settings, by value
    if axes or any(part is not None for part in extra):
        raise NotCacheable("the call is inside a sharded_jit or named-axis context")
    h = hashlib.sha256(f"lamina-trace-cache-v{_FORMAT}\0{sys.version}\0{jaxlib_version}\0"
                       f"{__version__}\0{runtime_version}\0".encode())
    try:
        feed(h, info.fun, 0, set())
    except NotCacheable as e:
        raise NotCacheable(f"the function's code, closure or defaults: {e}") from None
    try:
        feed(h, static_key, 0, set())
    except NotCacheable as e:
        raise NotCacheable(f"a static argument: {e}") from None
    try:
        feed(h, (info.in_shardings, info.out_shardings, mesh), 0, set())
    except NotCacheable as e:
        raise NotCacheable(f"the shardings: {e}") from None
    h.update(repr((info.fun_name, info.static_argnums, info.static_argnames,
                   info.donate_argnums, info.donate_argnames, info.keep_unused, info.inline,
                   info.compiler_options_kvs, info.api_name)).encode())
    h.update(f"{structure}\0".encode())
    for x, aval in zip(leaves, avals):
        h.update(f"{aval.str_short()}:{aval.weak_type}:{_placement(x)};".encode())
    h.update(f"{x64}:{rest!r}:{default_device().id}:".encode())
    h.update(repr(key_parts()).encode())
    return h.hexdigest()


# --- entries ---------------------------------------------------------------------------------------
def _directory() -> str | None:
    disk = persistent_cache.active_cache()
    return None if disk is None else os.path.join(disk.directory, "traces")


def _aval_record(a: ShapedArray) -> tuple[tuple[int, ...], str, bool]:
    return tuple(a.shape), np.dtype(a.dtype).str, bool(a.weak_type)


def _aval_of(record: tuple[tuple[int, ...], str, bool]) -> ShapedArray:
    shape, dtype, weak = record
    return canonical_aval(ShapedArray(tuple(shape), np.dtype(dtype), weak_type=weak))


def _entry(program: LoweredProgram, out_tree: Any, manifest: dict[str, Any]
           ) -> dict[str, Any]:
    lowering = program.lowering
    mesh = program.mesh
    example = tu.tree_unflatten(out_tree, list(range(out_tree.num_leaves)))
    try:
        tree_blob = pickle.dumps(example)
    except Exception as e:
        raise NotCacheable(f"the output tree cannot be stored ({e})") from None
    return {
        "format": _FORMAT, "manifest": manifest, "module": lowering.as_bytecode(),
        "lowering": {f.name: getattr(lowering, f.name) for f in dataclasses.fields(lowering)
                     if f.name != "module"},
        "fun_name": program.fun_name,
        "arg_names": program.arg_names, "result_names": program.result_names,
        "in_avals": [_aval_record(a) for a in program.in_avals],
        "out_avals": [_aval_record(a) for a in program.out_avals],
        "donated": program.donated_invars, "committed": program.committed,
        "compiler_options_kvs": program.compiler_options_kvs,
        "devices": tuple(d.id for d in program.devices), "platforms": program.platforms,
        "mesh": None if mesh is None else (tuple(d.id for d in mesh._flat_devices),
                                           mesh.devices.shape, mesh.axis_names),
        "out_tree": tree_blob,
    }


def _load(path: str) -> dict[str, Any] | None:
    try:
        return persistent_cache.load_pickled_entry(path, _FORMAT)
    except Exception as e:  # corrupt, truncated, another format, unpicklable
        warnings.warn(f"jit: skipping the persistent trace cache entry {path}: {e}; "
                      "tracing again", persistent_cache.PersistentCacheWarning, stacklevel=5)
        return None


def _restore(entry: dict[str, Any], info: JitInfo, in_tree: Any, leaves: Sequence[Any]
             ) -> tuple[CompiledProgram, Any]:
    """The compiled program of a stored entry for these arguments, and its output tree."""
    by_id = {d.id: d for d in default_device().client.devices()}
    if any(i not in by_id for i in entry["devices"]):
        raise NotCacheable(f"the devices {entry['devices']} do not all exist here")
    devices = tuple(by_id[i] for i in entry["devices"])
    mesh = None
    if entry["mesh"] is not None:
        ids, shape, names = entry["mesh"]
        mesh = Mesh(np.array([by_id[i] for i in ids], dtype=object).reshape(shape), names)
    example = pickle.loads(entry["out_tree"])
    out_tree = tu.tree_structure(example)
    if out_tree.num_leaves != len(entry["out_avals"]):
        raise NotCacheable("the output tree's node types are not registered (yet)")
    in_avals = [_aval_of(a) for a in entry["in_avals"]]
    out_avals = [_aval_of(a) for a in entry["out_avals"]]
    desc = f"{info.api_name}({info.fun_name})"
    explicit = flat_in_shardings(info, in_tree, entry["arg_names"], in_avals,
                                 in_tree.children()[1].num_leaves, desc)
    in_sh = tuple(_placed(x, s) for x, s in zip(leaves, explicit))
    out_sh = flat_out_shardings(info, out_tree, out_avals, entry["result_names"], desc)
    lowering = LoweringResult.from_bytecode(entry["module"], **entry["lowering"])
    program = LoweredProgram(
        lowering, entry["fun_name"], entry["arg_names"], entry["result_names"], in_avals,
        out_avals, devices, mesh, tuple(entry["platforms"]), in_sh, out_sh, entry["donated"],
        entry["committed"], tuple(entry["compiler_options_kvs"]))
    return compile_program(program), out_tree


def _placed(x: Any, explicit: Any) -> Any:
    """What the program sees of an argument's sharding (as ``placed_shardings``)."""
    if type(x) is not Array or not x._arr._committed:
        return explicit
    own = x._arr._sharding
    if is_unspecified(explicit):
        return own
    if own != explicit and not own.is_equivalent_to(explicit, x.ndim):
        raise NotCacheable("an argument is committed elsewhere than its in_shardings entry")
    return explicit


def _differences(a: Executable, fresh_tree: Any, b: Executable, stored_tree: Any
                 ) -> list[str]:
    out = []
    if module_to_text(a.lowering.module, True) != module_to_text(b.lowering.module, True):
        out.append("the lowered module")
    for what in ("arg_names", "result_names", "in_avals", "out_avals", "kept_var_idx",
                 "donated_invars"):
        if list(getattr(a, what)) != list(getattr(b, what)):
            out.append(f"{what} ({getattr(b, what)} stored, {getattr(a, what)} traced)")
    if fresh_tree != stored_tree:
        out.append(f"the output tree ({stored_tree} stored, {fresh_tree} traced)")
    return out


# --- a call through the cache ---------------------------------------------------------------------
#: runs the call on the traced path: (out, fast entry or None, leaves), and the
#: params of its signature (None when the call did not run a program at top level)
TracedCall = Callable[[], tuple[tuple[Any, Any, Sequence[Any]], Any]]


def call(info: JitInfo, key: str, in_tree: Any, leaves: Sequence[Any], traced_call: TracedCall,
         warm_entry: Callable[[CompiledProgram, Any], Any]
         ) -> tuple[Any, Any, Sequence[Any]] | None:
    """One call of a new signature through the cache: the stored program when
    its entry holds (``warm_entry`` turns it into the function's fast entry and
    runs it), else the traced path, storing what it ran. None when the cache
    cannot serve it (the caller takes the traced path)."""
    directory = _directory()
    desc = f"{info.api_name}({info.fun_name})"
    if directory is None:
        explain_miss("persistent trace", desc, ["no compilation_cache_dir is set"])
        return None
    path = persistent_cache.entry_file(directory, info.fun_name, key, TRACE_SUFFIX)
    entry = _load(path)
    if entry is not None:
        why = stale(entry["manifest"])
        if why is None:
            served = _serve(entry, info, in_tree, leaves, desc, traced_call, warm_entry)
            if served is not None:
                return served
        else:
            explain_miss("persistent trace", desc, [why])
    else:
        explain_miss("persistent trace", desc, ["no entry for this signature"])
    stats["misses"] += 1
    return _trace_and_store(path, info, traced_call)


def _serve(entry: dict[str, Any], info: JitInfo, in_tree: Any, leaves: Sequence[Any],
           desc: str, traced_call: TracedCall,
           warm_entry: Callable[[CompiledProgram, Any], Any]
           ) -> tuple[Any, Any, Sequence[Any]] | None:
    try:
        stored, out_tree = _restore(entry, info, in_tree, leaves)
    except NotCacheable as e:
        explain_miss("persistent trace", desc, [str(e)])
        return None
    if config.persistent_trace_cache_verify:
        result, _ = traced_call()
        fresh = result[1]
        if fresh is not None:
            diffs = _differences(fresh.executable, fresh.out_tree, stored.executable, out_tree)
            if diffs:
                stats["mismatches"] += 1
                warnings.warn(f"{desc}: the persistent trace cache entry differs from a fresh "
                              f"trace in {'; '.join(diffs)}", PersistentTraceMismatchWarning,
                              stacklevel=5)
            else:
                stats["verified"] += 1
        return result
    fast = warm_entry(stored, out_tree)
    out = fast.run(leaves)
    if out is MISS:
        return None
    stats["hits"] += 1
    persistent_cache.report(desc, "hit", "no tracing, no lowering", cache="trace")
    return out, fast, leaves


def _trace_and_store(path: str, info: JitInfo, traced_call: TracedCall
                     ) -> tuple[Any, Any, Sequence[Any]]:
    try:
        with recording() as ran:
            result, params = traced_call()
    except NotCacheable as e:
        explain_miss("persistent trace", f"{info.api_name}({info.fun_name})", [str(e)])
        result, params = traced_call()
        return result
    fast = result[1]
    top_code = getattr(info.fun, "__code__", None)
    if fast is None or params is None or (top_code is not None and top_code not in ran):
        # nothing ran at top level, or the trace came from the in-memory cache
        # (what it read was not recorded)
        stats["uncacheable"] += 1
        return result
    try:
        program = lowered_program_of(params.jaxpr, fast.executable)
        if program is None:
            raise NotCacheable("its lowered program is no longer cached")
        if program.lowering.host_callbacks or program.lowering.has_token:
            raise NotCacheable("it calls back into Python (its callbacks live in this process)")
        entry = _entry(program, params.out_tree, manifest(ran, params.jaxpr.jaxpr))
        blob = pickle.dumps(entry)
    except NotCacheable as e:
        stats["uncacheable"] += 1
        explain_miss("persistent trace", f"{info.api_name}({info.fun_name})", [str(e)])
        return result
    except Exception as e:  # a part of the lowering that cannot be pickled
        stats["uncacheable"] += 1
        explain_miss("persistent trace", f"{info.api_name}({info.fun_name})",
                     [f"the program cannot be stored ({e})"])
        return result
    if persistent_cache.store_pickled_entry(path, blob, "trace"):
        stats["stores"] += 1
    return result


def clear_persistent_caches() -> None:
    """Deletes every entry of the persistent compilation, trace and lowering
    caches in the current cache directory (in-memory caches are ``clear_caches``')."""
    disk = persistent_cache.active_cache()
    if disk is None:
        return
    persistent_cache.delete_entries(os.path.join(disk.directory, "traces"), TRACE_SUFFIX)
    clear_persistent_lowerings(disk.directory)
    disk.clear()

