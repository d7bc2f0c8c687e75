"""Keep ``jax`` out of a process, as if it were not installed.

jaxlib's C++ code imports ``jax.core`` and ``jax._src.sharding_impls`` by
itself on some calls (host transfers, ``execute``) when jax is installed, and
jax then patches jaxlib's classes and process-global jit state. lamina's
figures must not include that, so the lamina worker installs
:class:`JaxImportBlocker` first on ``sys.meta_path``: every import of ``jax``
or ``jax.<sub>`` fails with ``ModuleNotFoundError``, exactly what the import
machinery raises when jax is absent, so jaxlib takes its "jax not installed"
branch. jaxlib does not remember the failure: it tries again on every such
call. A real miss costs a walk over every later finder and ``sys.path`` entry
(about 0.2 ms in the dev venv), so before refusing, the blocker asks the same
finders for a name that does not exist; a blocked import then costs what a
missing jax costs and lamina's timings are not flattered. The blocker counts
the attempts so that a row can show how often jaxlib (or lamina) reached for
jax.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from importlib.machinery import ModuleSpec
from types import ModuleType

BLOCKED_ROOT = "jax"
# A top-level name no environment provides; looking it up costs a real miss.
_ABSENT_PROBE = "jax_absent_probe_of_tools_bench"


class JaxImportBlocker:
    """A meta-path finder that refuses ``jax`` and its submodules.

    Raising from ``find_spec`` (rather than returning ``None``) is what stops
    the later finders from locating the installed package.
    """

    def __init__(self) -> None:
        self.attempts: list[str] = []

    def find_spec(
        self,
        fullname: str,
        path: Sequence[str] | None,
        target: ModuleType | None = None,
    ) -> ModuleSpec | None:
        if fullname == BLOCKED_ROOT or fullname.startswith(BLOCKED_ROOT + "."):
            self.attempts.append(fullname)
            self._pay_for_a_miss(path)
            raise ModuleNotFoundError(
                f"No module named {fullname!r} (blocked by tools.bench)", name=fullname
            )
        return None

    def _pay_for_a_miss(self, path: Sequence[str] | None) -> None:
        """Do the lookup work the import system does for a missing module."""
        for finder in sys.meta_path:
            if finder is self:
                continue
            find_spec = getattr(finder, "find_spec", None)
            if find_spec is not None:
                find_spec(_ABSENT_PROBE, path)


def install_blocker() -> JaxImportBlocker:
    """Put a fresh blocker first on ``sys.meta_path`` and return it.

    Must run before anything imports jax; a jax already in ``sys.modules``
    cannot be unloaded, so that case is an error.
    """
    if BLOCKED_ROOT in sys.modules:
        raise RuntimeError("jax is already imported; the blocker must be installed first")
    blocker = JaxImportBlocker()
    sys.meta_path.insert(0, blocker)
    return blocker


def jax_imported() -> bool:
    """Whether jax (or any part of it) is loaded in this process."""
    return any(
        name == BLOCKED_ROOT or name.startswith(BLOCKED_ROOT + ".") for name in sys.modules
    )
