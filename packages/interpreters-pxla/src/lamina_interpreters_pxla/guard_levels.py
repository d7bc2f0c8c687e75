"""One of jaxlib's guard settings, read and set by level name.

jaxlib's ``guard_lib`` keeps each guard (a transfer direction, the array
garbage-collection guard) as a field of a process-wide state and of a
per-thread state, whose values are enum members (None: unset). A
:class:`GuardSetting` names that field and its levels (``'allow'``,
``'log'``, ...) and gives the operations every guard needs: check a level,
read and set the process-wide level, read the level in force on this thread,
and set this thread's level for a ``with`` block.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Mapping
from typing import Any

from lamina_interpreters_pxla._jaxlib import _jax

guard_lib: Any = _jax.guard_lib


class GuardSetting:
    """The guard field ``field`` of jaxlib's states, with ``levels`` mapping
    each level name (in JAX's order) to its enum member."""

    def __init__(self, field: str, levels: Mapping[str, Any]):
        self.field = field
        self.levels = tuple(levels)
        self._enums = dict(levels)
        self._names = {enum: name for name, enum in levels.items()}

    def check_level(self, level: Any) -> str | None:
        """``level`` if it is a level name or None; else ``ValueError`` (JAX's
        wording, which names the accepted values)."""
        if level is None or (isinstance(level, str) and level in self._enums):
            return level
        raise ValueError(f"new enum value must be None or in {list(self.levels)}, "
                         f"got {level} of type {type(level)}.")

    def _to_enum(self, level: Any) -> Any:
        checked = self.check_level(level)
        return None if checked is None else self._enums[checked]

    def _to_name(self, enum: Any) -> str | None:
        return None if enum is None else self._names[enum]

    def global_level(self) -> str | None:
        """The process-wide level (None: jaxlib's default, allow)."""
        return self._to_name(getattr(guard_lib.global_state(), self.field))

    def set_global_level(self, level: str | None) -> None:
        """Sets the process-wide level; None restores the default."""
        setattr(guard_lib.global_state(), self.field, self._to_enum(level))

    def current_level(self) -> str | None:
        """This thread's level: the innermost ``with`` block's, else the process's."""
        local = getattr(guard_lib.thread_local_state(), self.field)
        return self._to_name(local) if local is not None else self.global_level()

    @contextlib.contextmanager
    def scope(self, level: str | None) -> Iterator[None]:
        """Sets this thread's level inside the ``with`` block."""
        enum = self._to_enum(level)
        state = guard_lib.thread_local_state()
        previous = getattr(state, self.field)
        setattr(state, self.field, enum)
        try:
            yield
        finally:
            setattr(state, self.field, previous)
