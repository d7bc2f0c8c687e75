"""The first debug-info contract of lamina: :class:`TracingDebugInfo`.

A ``TracingDebugInfo`` describes a user function *before* it is traced: what
it is traced for, where it was defined, the names of its flat dynamic arguments
and (once it has run) the paths of its flat results. It rides on
``WrappedFun.debug_info`` through every WrappedFun transformation; the layers
above turn it into their own records (``JaxprDebugInfo`` in tracing-core).

Invariants (checked by :func:`validate_tracing_debug_info`):

* ``traced_for`` is a non-empty ``str`` naming the API (``"jit"``, ``"pmap"``,
  ``"vmap"``, ``"grad"``, ``"make_jaxpr"``, ...).
* ``func_src_info`` is ``None`` (no source exists, e.g. a builtin) or a string
  ``"<name>"`` or ``"<name> at <file>:<line>"`` whose name has no spaces.
* ``arg_names`` is a tuple with one entry per flat dynamic argument: a
  non-empty ``str`` (``"x"``, ``"y['hi']"``, ``"args[0]"``, ``"kwargs['w']"``)
  or ``None`` where no name exists. Never an empty string.
* ``result_paths`` is ``None`` (unknown), a tuple with one entry per flat
  result (same rules as ``arg_names``: ``"result"``, ``"result['a']"``), or a
  zero-argument thunk that returns such a tuple once the function has run.
  :meth:`TracingDebugInfo.resolve_result_paths` calls the thunk.

Dropping a name is allowed only where it truly does not exist and is then
explicit (``None`` for that entry).

A record whose counts do not fit the function it describes was left stale by
a transformation that changed the function's arguments or results without
updating the names. :meth:`TracingDebugInfo.safe_arg_names` and
:meth:`TracingDebugInfo.safe_result_paths` then raise ``DebugInfoError``
naming that transformation when validation is on (:func:`set_validation`;
``LAMINA_VALIDATE_DEBUG_INFO=1`` turns it on at import, tests always do), and
otherwise keep every entry whose name is still certain (see
:func:`fit_names`), never dropping all names because one count is off.
"""

from __future__ import annotations

import dataclasses
import os
import re
from collections.abc import Callable, Sequence
from typing import Any, TypeAlias

from lamina_linear_util.errors import StoreError

__all__ = [
    "DebugInfoError",
    "ResultPaths",
    "ResultPathsThunk",
    "TracingDebugInfo",
    "fit_names",
    "set_validation",
    "validate_tracing_debug_info",
    "validation_enabled",
]

ResultPathsThunk: TypeAlias = Callable[[], tuple[str | None, ...]]
"""A function returning the result paths once the traced function has run."""

ResultPaths: TypeAlias = tuple[str | None, ...] | ResultPathsThunk | None
"""Resolved paths, a thunk that resolves them, or ``None`` (unknown)."""

# "<name>" or "<name> at <file>:<line>"; the name never contains spaces.
_FUNC_SRC_INFO = re.compile(r"^(?P<name>\S+)(?: at (?P<file>.+):(?P<line>\d+))?$")


class DebugInfoError(ValueError):
    """A ``TracingDebugInfo`` breaks one of its invariants."""


# --- validation switch ---------------------------------------------------------------------
class _Validation:
    """Whether stale debug info raises (the process-wide switch; tracing-core's
    ``core.config.validate_debug_info`` reads and writes the same one)."""

    __slots__ = ("on",)

    def __init__(self) -> None:
        self.on = os.environ.get("LAMINA_VALIDATE_DEBUG_INFO", "0").lower() in (
            "1", "true", "yes")


_validation = _Validation()


def set_validation(on: bool) -> None:
    """Turns validation of debug info on or off for the whole process."""
    _validation.on = bool(on)


def validation_enabled() -> bool:
    """True when a count mismatch in debug info raises (see the module docstring)."""
    return _validation.on


MadeBy: TypeAlias = str | Callable[[], str] | None
"""Which transformations may have left a record stale: a description, a
function computing one (called only when a mismatch is reported), or ``None``."""


def _made_by(made_by: MadeBy) -> str:
    text = made_by() if callable(made_by) else made_by
    return text or "a transformation that did not update the names"


def fit_names(names: tuple[str | None, ...], expected_count: int, *, what: str,
              dbg: object, made_by: MadeBy = None) -> tuple[str | None, ...]:
    """``names`` if it has ``expected_count`` entries; otherwise the record is
    stale. With validation on that raises ``DebugInfoError`` naming ``what``
    (``"arg_names"``, ``"result_paths"``), the record ``dbg`` and the
    transformations ``made_by``. Without validation it returns the names that
    are still certain, entry by entry:

    * fewer entries than expected: a transformation added entries. lamina's
      transformations add tangents, residuals and closed-over values after
      the entries they keep, so the known names keep their places and the
      added entries are ``None``;
    * more entries than expected: a transformation removed ``d`` entries,
      keeping the order, so entry ``i`` is one of ``names[i:i + d + 1]``; it
      keeps its name when those candidates all agree, else ``None``.
    """
    n = len(names)
    if n == expected_count:
        return names
    if _validation.on:
        raise DebugInfoError(
            f"stale debug info for {_record_label(dbg)}: {n} {what} {names!r} for "
            f"{expected_count} {'arguments' if what == 'arg_names' else 'results'}; "
            f"the count was changed by {_made_by(made_by)}, which must update the names "
            f"it changes")
    if n < expected_count:
        return names + (None,) * (expected_count - n)
    d = n - expected_count
    return tuple(names[i] if len(set(names[i:i + d + 1])) == 1 else None
                 for i in range(expected_count))


def _record_label(dbg: object) -> str:
    src = getattr(dbg, "func_src_info", None)
    traced_for = getattr(dbg, "traced_for", None)
    label = src if src else "<unknown>"
    return f"{label} (traced for {traced_for})" if traced_for else label


class _Pending:
    """Stands in for any unresolved result-paths thunk in comparisons."""

    __slots__ = ()

    def __repr__(self) -> str:
        return "<pending>"


_PENDING = _Pending()


def _comparable_result_paths(paths: ResultPaths) -> object:
    # Two thunks are different objects even when they describe the same
    # function; what a thunk will return is determined by the function itself,
    # so all unresolved thunks compare equal (and hash alike).
    return _PENDING if callable(paths) else paths


@dataclasses.dataclass(frozen=True, eq=False, repr=False, slots=True)
class TracingDebugInfo:
    """Debug info of a function about to be traced (see the module docstring).

    Equality and hashing use every field, except that all unresolved
    ``result_paths`` thunks are considered equal to each other: the thunk's
    value is a function of the traced function, which is compared anyway.
    """

    traced_for: str
    func_src_info: str | None
    arg_names: tuple[str | None, ...]
    result_paths: ResultPaths = None

    def __post_init__(self) -> None:
        # Accept lists for convenience but store tuples, so the record stays
        # hashable (it is part of cache keys).
        if isinstance(self.arg_names, list):
            object.__setattr__(self, "arg_names", tuple(self.arg_names))
        if isinstance(self.result_paths, list):
            object.__setattr__(self, "result_paths", tuple(self.result_paths))

    # -- identity ---------------------------------------------------------

    def _comparable(self) -> tuple[object, ...]:
        return (self.traced_for, self.func_src_info, self.arg_names,
                _comparable_result_paths(self.result_paths))

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, TracingDebugInfo):
            return NotImplemented
        return self is other or self._comparable() == other._comparable()

    def __hash__(self) -> int:
        return hash(self._comparable())

    def __repr__(self) -> str:
        paths = _comparable_result_paths(self.result_paths)
        return (f"TracingDebugInfo(traced_for={self.traced_for!r}, "
                f"func_src_info={self.func_src_info!r}, arg_names={self.arg_names!r}, "
                f"result_paths={paths!r})")

    # -- derived facts ------------------------------------------------------

    @property
    def func_name(self) -> str:
        """The function's name: ``func_src_info`` before ``" at "``, or ``"<unknown>"``."""
        if not self.func_src_info:
            return "<unknown>"
        return self.func_src_info.split(" at ", 1)[0]

    @property
    def func_filename(self) -> str | None:
        """The source file from ``func_src_info``, if it names one."""
        match = _FUNC_SRC_INFO.match(self.func_src_info or "")
        return match.group("file") if match else None

    @property
    def func_lineno(self) -> int | None:
        """The first line number from ``func_src_info``, if it names one."""
        match = _FUNC_SRC_INFO.match(self.func_src_info or "")
        if match is None or match.group("line") is None:
            return None
        return int(match.group("line"))

    @property
    def has_pending_result_paths(self) -> bool:
        """True while ``result_paths`` is a thunk that has not been resolved."""
        return callable(self.result_paths)

    # -- result paths ---------------------------------------------------------

    def resolve_result_paths(self) -> TracingDebugInfo:
        """Return a copy whose ``result_paths`` thunk has been called and its
        tuple stored. Records without a thunk are returned unchanged.

        Raises whatever the thunk raises (a ``StoreError`` when the function has
        not run yet), and ``DebugInfoError`` when it returns a malformed value.
        """
        paths = self.result_paths
        if not callable(paths):
            return self
        resolved = tuple(paths())
        _check_names(resolved, "result_paths", self)
        return dataclasses.replace(self, result_paths=resolved)

    def safe_arg_names(self, expected_count: int, *, made_by: MadeBy = None
                       ) -> tuple[str | None, ...]:
        """``arg_names``, checked against ``expected_count`` with :func:`fit_names`
        (``made_by`` names the transformations that may have changed the count)."""
        names = self.arg_names
        if len(names) == expected_count:
            return names
        return fit_names(names, expected_count, what="arg_names", dbg=self, made_by=made_by)

    def safe_result_paths(self, expected_count: int, *, made_by: MadeBy = None
                          ) -> tuple[str | None, ...]:
        """The result paths, checked against ``expected_count`` with :func:`fit_names`.

        Unknown paths (``None``, or a thunk whose function has not run yet, so
        that it raises ``StoreError``) are ``None`` entries: no name exists yet.
        """
        paths = self.result_paths
        if callable(paths):
            try:
                paths = tuple(paths())
            except StoreError:
                paths = None
        if paths is None:
            return (None,) * expected_count
        assert isinstance(paths, tuple)
        if len(paths) == expected_count:
            return paths
        return fit_names(paths, expected_count, what="result_paths", dbg=self,
                         made_by=made_by)

    # -- functional updates -------------------------------------------------------

    def replace(self, **changes: Any) -> TracingDebugInfo:
        """A copy with the given fields replaced (``dataclasses.replace``)."""
        return dataclasses.replace(self, **changes)

    def with_arg_names(self, arg_names: Sequence[str | None]) -> TracingDebugInfo:
        """A copy with new ``arg_names``."""
        return dataclasses.replace(self, arg_names=tuple(arg_names))

    def with_result_paths(self, result_paths: ResultPaths | Sequence[str | None]
                          ) -> TracingDebugInfo:
        """A copy with new ``result_paths`` (a sequence, a thunk or ``None``)."""
        if result_paths is not None and not callable(result_paths):
            result_paths = tuple(result_paths)
        # Built directly: every traced function passes here, and
        # dataclasses.replace costs several times more.
        return type(self)(self.traced_for, self.func_src_info, self.arg_names, result_paths)

    def with_unknown_names(self) -> TracingDebugInfo:
        """A copy whose argument names are all ``None`` and result paths unknown."""
        return dataclasses.replace(self, arg_names=(None,) * len(self.arg_names),
                                   result_paths=None)

    def filter_arg_names(self, keep: Sequence[bool]) -> TracingDebugInfo:
        """A copy keeping only the argument names whose ``keep`` entry is true.

        ``keep`` must have one entry per argument (a ``DebugInfoError`` otherwise).
        """
        if len(keep) != len(self.arg_names):
            raise DebugInfoError(
                f"filter_arg_names for {self.func_name}: got {len(keep)} flags for "
                f"{len(self.arg_names)} argument names")
        return self.with_arg_names([n for n, k in zip(self.arg_names, keep) if k])

    def filter_result_paths(self, keep: Sequence[bool]) -> TracingDebugInfo:
        """A copy keeping only the result paths whose ``keep`` entry is true.

        Unknown paths stay unknown; a thunk is resolved first.
        """
        resolved = self.resolve_result_paths()
        paths = resolved.result_paths
        if paths is None:
            return resolved
        assert isinstance(paths, tuple)
        if len(keep) != len(paths):
            raise DebugInfoError(
                f"filter_result_paths for {self.func_name}: got {len(keep)} flags for "
                f"{len(paths)} result paths")
        return resolved.with_result_paths([p for p, k in zip(paths, keep) if k])


def _check_names(names: object, field: str, dbg: object) -> None:
    if not isinstance(names, tuple):
        raise DebugInfoError(
            f"TracingDebugInfo.{field} must be a tuple, got {type(names).__name__}: "
            f"{names!r} (in {dbg!r})")
    for i, name in enumerate(names):
        if name is None:
            continue
        if not isinstance(name, str):
            raise DebugInfoError(
                f"TracingDebugInfo.{field}[{i}] must be a str or None, got "
                f"{type(name).__name__}: {name!r} (in {dbg!r})")
        if not name:
            raise DebugInfoError(
                f"TracingDebugInfo.{field}[{i}] is an empty string; use None where no "
                f"name exists (in {dbg!r})")


def validate_tracing_debug_info(dbg: TracingDebugInfo, *, num_args: int | None = None,
                                num_results: int | None = None) -> None:
    """Check every invariant of ``dbg`` (see the module docstring).

    ``num_args`` / ``num_results``, when given, are the expected numbers of flat
    arguments and results. A pending ``result_paths`` thunk is an error only when
    ``num_results`` is given (its length cannot be checked without running it).

    Raises ``DebugInfoError`` naming the broken invariant.
    """
    if not isinstance(dbg, TracingDebugInfo):
        raise DebugInfoError(f"expected a TracingDebugInfo, got {type(dbg).__name__}: {dbg!r}")
    if not isinstance(dbg.traced_for, str) or not dbg.traced_for:
        raise DebugInfoError(
            f"TracingDebugInfo.traced_for must be a non-empty str, got {dbg.traced_for!r}")
    src = dbg.func_src_info
    if src is not None:
        if not isinstance(src, str):
            raise DebugInfoError(
                f"TracingDebugInfo.func_src_info must be a str or None, got "
                f"{type(src).__name__}: {src!r}")
        if not _FUNC_SRC_INFO.match(src):
            raise DebugInfoError(
                f"TracingDebugInfo.func_src_info must look like 'name' or "
                f"'name at file:line' (no spaces in the name), got {src!r}")
    _check_names(dbg.arg_names, "arg_names", dbg)
    if num_args is not None and len(dbg.arg_names) != num_args:
        raise DebugInfoError(
            f"TracingDebugInfo for {dbg.func_name} has {len(dbg.arg_names)} arg_names "
            f"{dbg.arg_names!r} but the function has {num_args} flat arguments")
    paths = dbg.result_paths
    if paths is None:
        return
    if callable(paths):
        if num_results is not None:
            raise DebugInfoError(
                f"TracingDebugInfo for {dbg.func_name} still has a pending result_paths "
                f"thunk; call resolve_result_paths() before checking {num_results} results")
        return
    _check_names(paths, "result_paths", dbg)
    if num_results is not None and len(paths) != num_results:
        raise DebugInfoError(
            f"TracingDebugInfo for {dbg.func_name} has {len(paths)} result_paths "
            f"{paths!r} but the function has {num_results} flat results")
