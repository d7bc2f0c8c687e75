"""The persistent lowering cache: lowered modules of traced programs on disk.

With a compilation cache directory set (``compilation_cache_dir``), a
restarted process still traces each jitted function and lowers the jaxpr to
StableHLO before the compilation cache can hand it the executable; lowering
is most of that Python work, and loading MLIR's dialects for it is much of
the rest. So ``jit`` also keeps each lowered module in
``<compilation_cache_dir>/lowered``, keyed by the traced program: a later
process that traces the same jaxpr for the same placement takes the module
from there (StableHLO bytecode, unparsed, straight to the compilation cache)
and neither lowers nor loads the lowering stack. ``persistent_trace`` goes
further and skips the tracing too; this cache needs no opt-in, since its key
is the program itself rather than the Python code that produced it.

**The key** covers everything the lowering reads: the jaxpr (every
equation's primitive, parameters, operands and results with their types,
effects and source locations with their name stacks, nested jaxprs the same
way), its constants by their bytes, its argument and result names; the
module name, target platforms, argument and result shardings, donated
arguments, ``keep_unused``, the mesh and device ids; the settings registered
with :func:`~lamina_sharded_jit.fingerprints.register_key_part` (every
lamina setting that changes a program), x64, and the versions of Python,
jaxlib and lamina's packages. Functions held in parameters (a ``custom_jvp``'s
rule, a ``custom_vjp``'s forward and backward functions) are keyed by their
code only, and callable objects that cannot be fingerprinted (the rules'
thunks) by their class: the lowering does not run them.

**The entry's manifest** (checked on load, as the trace cache's) holds the
SHA-256 of every source file whose functions ran while the module was lowered
(lamina's lowering rules, and the rules a program registered) and of the files
of every equation's source location, and the module globals user code read
during the lowering.

**What it cannot see**: a lowering rule registered for a primitive from a
different, unchanged file than in the run that stored the entry, and state
outside Python that a lowering rule reads. Programs with host callbacks or
ordered effects are not stored (their callbacks live in one process).
``persistent_trace_cache_verify`` lowers anyway on every hit and warns
(:class:`PersistentLoweringMismatchWarning`) when the stored module differs.
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

from jaxlib.version import __version__ as jaxlib_version
from lamina_interpreters_pxla import persistent_cache
from lamina_interpreters_pxla.__about__ import __version__ as runtime_version
from lamina_mlir_lowering.lowering_result import LoweringResult
from lamina_mlir_lowering.serialization import module_to_text
from lamina_tracing_core import dtypes
from lamina_tracing_core.jaxpr import ClosedJaxpr, Jaxpr, JaxprEqn, Literal, Var

from lamina_sharded_jit.__about__ import __version__
from lamina_sharded_jit.explain import explain_miss
from lamina_sharded_jit.fingerprints import (
    NotCacheable,
    feed,
    feed_code,
    key_parts,
    manifest,
    placement_text,
    recording,
    stale,
)
from lamina_sharded_jit.settings import config

__all__ = ["LOWERED_SUFFIX", "PersistentLoweringMismatchWarning", "lower_through_disk",
           "stats"]

LOWERED_SUFFIX = ".lamina-lowered"
_FORMAT = 1

#: what this process's lowering cache did (tests and benchmarks read it)
stats = {"hits": 0, "misses": 0, "stores": 0, "uncacheable": 0, "verified": 0,
         "mismatches": 0}


class PersistentLoweringMismatchWarning(UserWarning):
    """Verify mode found a stored module that differs from a fresh lowering."""


def lower_through_disk(jaxpr: ClosedJaxpr, placement: Sequence[Any], name: str,
                       lower: Callable[[], LoweringResult]) -> LoweringResult:
    """``lower()``'s result, taken from the persistent lowering cache when an
    entry for ``jaxpr`` and ``placement`` (the lowering's other inputs: module
    name, platforms, shardings, donation, devices...) holds, else lowered and
    stored. Without a compilation cache directory it is ``lower()``."""
    disk = persistent_cache.active_cache()
    if disk is None:
        return lower()
    desc = f"jit({name})"
    try:
        key = program_key(jaxpr, placement)
    except NotCacheable as e:
        stats["uncacheable"] += 1
        explain_miss("persistent lowering", desc, [str(e)])
        return lower()
    path = persistent_cache.entry_file(os.path.join(disk.directory, "lowered"), name, key,
                                       LOWERED_SUFFIX)
    stored = _load(path, desc)
    if stored is not None:
        if config.persistent_trace_cache_verify:
            return _verified(stored, lower, desc)
        stats["hits"] += 1
        persistent_cache.report(desc, "hit", "not lowered", cache="lowering")
        return stored
    stats["misses"] += 1
    return _lower_and_store(path, jaxpr, lower, desc)


# --- the key ------------------------------------------------------------------------------------
def program_key(jaxpr: ClosedJaxpr, placement: Sequence[Any]) -> str:
    """The key of one lowering (see the module docstring)."""
    h = hashlib.sha256(f"lamina-lowering-cache-v{_FORMAT}\0{sys.version}\0{jaxlib_version}\0"
                       f"{__version__}\0{runtime_version}\0".encode())
    _feed_jaxpr(h, jaxpr.jaxpr)
    try:
        feed(h, list(jaxpr.consts), 0, set())
    except NotCacheable as e:
        raise NotCacheable(f"a constant of the program: {e}") from None
    for part in placement:
        text = placement_text(part)
        h.update(f"{text if text is not None else repr(part)};".encode())
    h.update(f"{dtypes.x64_enabled()}:{key_parts()!r}".encode())
    return h.hexdigest()


def _feed_jaxpr(h: Any, jaxpr: Jaxpr) -> None:
    numbers: dict[int, int] = {}  # a variable's number: its place of definition

    def atom(x: Any) -> None:
        if isinstance(x, Literal):
            h.update(b"literal:")
            feed(h, x.val, 0, set())
        elif isinstance(x, Var):
            h.update(f"v{numbers.setdefault(id(x), len(numbers))}:".encode())
        else:
            raise NotCacheable(f"an operand of type {type(x).__name__}")
        _feed_aval(h, x.aval)

    h.update(f"jaxpr[{len(jaxpr.constvars)},{len(jaxpr.invars)},{len(jaxpr.eqns)}](".encode())
    for v in [*jaxpr.constvars, *jaxpr.invars]:
        atom(v)
    for eqn in jaxpr.eqns:
        _feed_eqn(h, eqn, atom)
    h.update(b"out:")
    for out in jaxpr.outvars:
        atom(out)
    h.update(f"effects:{sorted(map(repr, jaxpr.effects))!r};".encode())
    dbg = jaxpr.debug_info
    if dbg is not None:
        h.update(repr((dbg.traced_for, dbg.func_src_info, dbg.arg_names,
                       dbg.result_paths)).encode())
    h.update(b")")


def _feed_eqn(h: Any, eqn: JaxprEqn, atom: Callable[[Any], None]) -> None:
    h.update(f"eqn:{eqn.primitive.name}(".encode())
    for x in eqn.invars:
        atom(x)
    h.update(b"params:")
    for k, v in sorted(eqn.params.items()):
        h.update(f"{k}=".encode())
        _feed_param(h, v, 0)
    h.update(b"->")
    for v in eqn.outvars:
        atom(v)
    h.update(f"effects:{sorted(map(repr, eqn.effects))!r};".encode())
    info = eqn.source_info
    frame = info.frame if info is not None else None
    if frame is not None:
        callers = [(code.co_filename, code.co_qualname, code.co_firstlineno, lasti)
                   for code, lasti in frame.callers]
        h.update(repr((frame.file_name, frame.line, frame.function_name, frame.column,
                       frame.lasti, callers)).encode())
    if info is not None:
        h.update(repr(info.name_stack.stack).encode())
    h.update(b")")


def _feed_param(h: Any, v: Any, depth: int) -> None:
    if isinstance(v, ClosedJaxpr):
        _feed_jaxpr(h, v.jaxpr)
        feed(h, list(v.consts), depth, set())
    elif isinstance(v, Jaxpr):
        _feed_jaxpr(h, v)
    elif isinstance(v, (tuple, list)):
        h.update(f"{type(v).__name__}[{len(v)}](".encode())
        for x in v:
            _feed_param(h, x, depth + 1)
        h.update(b")")
    elif callable(v) and hasattr(v, "__code__"):
        feed_code(h, v.__code__)  # the lowering does not run it (see the docstring)
    elif (text := placement_text(v)) is not None:
        h.update(f"{text};".encode())
    else:
        try:
            feed(h, v, depth, set())
        except NotCacheable as e:
            if not callable(v) or isinstance(v, type):
                raise NotCacheable(f"a parameter of the program: {e}") from None
            # a rule object (a custom_jvp's jvp thunk): the lowering does not run it
            t = type(v)
            h.update(f"callable:{t.__module__}.{t.__qualname__};".encode())


def _feed_aval(h: Any, aval: Any) -> None:
    h.update(_aval_text(aval))


_aval_texts: dict[int, tuple[Any, bytes]] = {}  # id -> (the aval, kept alive; its text)


def _aval_text(aval: Any) -> bytes:
    """An aval's every field as text (remembered: a program repeats its avals)."""
    known = _aval_texts.get(id(aval))
    if known is not None and known[0] is aval:
        return known[1]
    dtype = getattr(aval, "dtype", None)
    text = repr((type(aval).__name__, getattr(aval, "shape", None),
                 getattr(dtype, "str", None), str(dtype), getattr(aval, "weak_type", None),
                 repr(getattr(aval, "sharding", None)), getattr(aval, "vma_order", None),
                 getattr(aval, "unreduced_order", None),
                 getattr(aval, "reduced_order", None))).encode()
    if len(_aval_texts) > 4096:
        _aval_texts.clear()
    _aval_texts[id(aval)] = (aval, text)
    return text


# --- entries -------------------------------------------------------------------------------------
def _load(path: str, desc: str) -> LoweringResult | None:
    """The stored lowering, or None (absent, stale, or unreadable: warned)."""
    try:
        entry = persistent_cache.load_pickled_entry(path, _FORMAT)
        if entry is None:
            explain_miss("persistent lowering", desc, ["no entry for this program"])
            return None
        why = stale(entry["manifest"])
        if why is not None:
            explain_miss("persistent lowering", desc, [why])
            return None
        return LoweringResult.from_bytecode(entry["module"], **entry["lowering"])
    except Exception as e:  # corrupt, truncated, another format, unpicklable
        warnings.warn(f"jit: skipping the persistent lowering cache entry {path}: {e}; "
                      "lowering again", persistent_cache.PersistentCacheWarning, stacklevel=6)
        return None


def _lower_and_store(path: str, jaxpr: ClosedJaxpr, lower: Callable[[], LoweringResult],
                     desc: str) -> LoweringResult:
    if sys.getprofile() is not None:
        # a profiler, or the trace cache recording this call: what ran cannot
        # be recorded here (the trace cache's entry covers the latter)
        return lower()
    with recording() as ran:
        lowering = lower()
    try:
        if lowering.host_callbacks or lowering.has_token or lowering.sharding_inspectors:
            raise NotCacheable("it calls back into Python or has ordered effects")
        entry = {"format": _FORMAT, "manifest": manifest(ran, jaxpr.jaxpr),
                 "module": lowering.as_bytecode(),
                 "lowering": {f.name: getattr(lowering, f.name)
                              for f in dataclasses.fields(lowering) if f.name != "module"}}
        blob = pickle.dumps(entry)
    except Exception as e:  # NotCacheable, or a part that cannot be pickled
        stats["uncacheable"] += 1
        explain_miss("persistent lowering", desc, [f"the module cannot be stored ({e})"])
        return lowering
    if persistent_cache.store_pickled_entry(path, blob, "lowering"):
        stats["stores"] += 1
    return lowering


def _verified(stored: LoweringResult, lower: Callable[[], LoweringResult],
              desc: str) -> LoweringResult:
    fresh = lower()
    facts = [f.name for f in dataclasses.fields(fresh)
             if f.name not in ("module", "host_callbacks", "sharding_inspectors")]
    if (module_to_text(fresh.module, True) != module_to_text(stored.module, True)
            or any(getattr(fresh, f) != getattr(stored, f) for f in facts)):
        stats["mismatches"] += 1
        warnings.warn(f"{desc}: the persistent lowering cache entry differs from a fresh "
                      "lowering", PersistentLoweringMismatchWarning, stacklevel=5)
    else:
        stats["verified"] += 1
    return fresh


def clear_persistent_lowerings(directory: str) -> None:
    """Deletes the lowering cache's entries under a compilation cache directory."""
    persistent_cache.delete_entries(os.path.join(directory, "lowered"), LOWERED_SUFFIX)
