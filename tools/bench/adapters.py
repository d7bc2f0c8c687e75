"""The two implementations behind one set of names.

A workload never imports ``lamina`` or ``jax``; it receives an
:class:`Adapter` whose attributes are the implementation's modules under the
public API names (``api`` is ``lamina`` or ``jax``, ``np_api`` is
``lx.numpy`` or ``jax.numpy``, …), reached as user code reaches them
(``lx.lax``). Nothing is imported before first use, so a workload only fails
on the parts of the API it touches, and the import-time workload can time the
very first import.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass
from typing import Any, Literal

Impl = Literal["lamina", "jax"]
IMPLS: tuple[Impl, Impl] = ("lamina", "jax")


@dataclass(frozen=True)
class ImplModules:
    """The implementation's root module and where its ``debug_info`` lives."""

    root: str
    debug_info: tuple[str, str]


MODULES: dict[Impl, ImplModules] = {
    "lamina": ImplModules(root="lamina", debug_info=("lamina_linear_util.api_util", "debug_info")),
    "jax": ImplModules(root="jax", debug_info=("jax._src.api_util", "debug_info")),
}


def check_impl(name: str) -> Impl:
    """Validate an implementation name given on a command line."""
    for impl in IMPLS:
        if name == impl:
            return impl
    raise ValueError(f"unknown implementation {name!r}; expected one of {IMPLS}")


class Adapter:
    """Lazy access to one implementation's modules under shared names."""

    def __init__(self, impl: Impl) -> None:
        self.impl: Impl = impl
        self.modules = MODULES[impl]

    @staticmethod
    def _load(module: str) -> Any:
        return importlib.import_module(module)

    @property
    def api(self) -> Any:
        """``lamina`` or ``jax``: ``jit``, ``grad``, ``vmap``, ``pmap``, …"""
        return self._load(self.modules.root)

    def _part(self, name: str) -> Any:
        return getattr(self.api, name)

    @property
    def np_api(self) -> Any:
        """``lx.numpy`` / ``jax.numpy``."""
        return self._part("numpy")

    @property
    def lax(self) -> Any:
        return self._part("lax")

    @property
    def tree_util(self) -> Any:
        return self._part("tree_util")

    @property
    def sharding(self) -> Any:
        """Module with ``Mesh``, ``NamedSharding`` and ``PartitionSpec``."""
        return self._part("sharding")

    @property
    def random(self) -> Any:
        return self._part("random")

    @property
    def nn(self) -> Any:
        return self._part("nn")

    @property
    def debug_info(self) -> Any:
        """``debug_info(traced_for, fun, args, kwargs, *, static_argnums, static_argnames)``."""
        module, name = self.modules.debug_info
        return getattr(self._load(module), name)

    def versions(self) -> dict[str, str]:
        """Versions of the implementation and of jaxlib, where importable."""
        found: dict[str, str] = {}
        for module in (self.modules.root, "jaxlib"):
            try:
                found[module] = str(getattr(self._load(module), "__version__", "?"))
            except Exception as exc:  # a broken package must not hide the row
                found[module] = f"unavailable ({type(exc).__name__})"
        return found
