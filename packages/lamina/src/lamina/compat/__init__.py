"""The JAX alias: unmodified JAX programs, libraries and test suites on lamina.

:func:`install` makes ``import jax`` and every ``import jax.<sub>`` that lamina
provides return lamina's modules, so code written for JAX runs unchanged:

- in-process: ``lamina.compat.install()`` before anything imports ``jax``;
- a script: ``python -m lamina.compat script.py [args]`` (``__main__``
  semantics, ``sys.argv`` is ``[script.py, args...]``), or
  ``python -m lamina.compat -m module [args]``;
- a test suite: ``pytest -p lamina.compat ...``; the alias is installed when
  pytest registers the plugin, before any conftest or test module is imported.

What the alias maps:

- ``jax`` is a thin module of its own, not lamina: it reports the JAX API
  version lamina implements (``jax.__version__ == "0.10.2"``,
  ``jax.__version_info__ == (0, 10, 2)``, so libraries that branch on the
  version take the modern path) while ``lamina.__version__`` stays lamina's.
  Every other attribute is lamina's (``jax.jit is lamina.jit``); a name lamina
  does not have raises ``AttributeError`` saying that lamina does not
  implement ``jax.<name>``.
- ``jax.<path>`` is the module ``lamina.<path>`` (``jax.numpy`` is
  ``lamina.numpy``, ``jax.core`` is ``lamina.core``), imported on first use; a
  path lamina has no module for is not found (``ModuleNotFoundError``), as for
  any missing module, so ``try: import jax.x`` probes keep working. lamina's
  own modules that JAX does not have (:data:`LAMINA_ONLY`) are not mapped.

The alias refuses to install in a process that has already imported the real
``jax`` (:class:`JaxAlreadyImportedError`): its modules and lamina's would
then be mixed in one program. ``jaxlib`` is not aliased: lamina runs on it.
"""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.machinery
import importlib.util
import sys
import types
from collections.abc import Sequence
from typing import Any

#: the JAX API version lamina implements, reported as ``jax.__version__``.
JAX_API_VERSION = "0.10.2"
JAX_API_VERSION_INFO = (0, 10, 2)

#: lamina's top-level modules that are not JAX's; ``jax.<name>`` does not map to them.
LAMINA_ONLY = frozenset({"__about__", "__main__", "api_extras", "call_primitives", "callbacks",
                         "compat", "demo", "runtime_api", "sharded_jit", "sharding_picture",
                         "transforms"})

#: JAX names that are objects, not modules: ``jax.config`` is the settings
#: object and ``jax.memory`` a namespace, and ``import jax.config`` /
#: ``import jax.memory`` fail in JAX 0.10 (lamina's are modules, which the
#: alias therefore does not offer for import).
NOT_IMPORTABLE = frozenset({"config", "memory"})

#: ``jax.version``: made by the alias (not a lamina module: lamina's own
#: version is ``lamina.__version__``), reporting the JAX API version.
_VERSION_MODULE = "version"

_ALIAS = "jax"
_PREFIX = _ALIAS + "."


class JaxAlreadyImportedError(RuntimeError):
    """The real ``jax`` is already imported, so the alias cannot take its name.

    A ``RuntimeError``, not an ``ImportError``: nothing failed to import, the
    process is in a state the alias cannot work in, and code that guards an
    optional import with ``except ImportError`` must not swallow it.
    """


class _JaxModule(types.ModuleType):
    """The module the alias installs as ``jax``: JAX's version, lamina's names."""

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__"):
            raise AttributeError(f"module {_ALIAS!r} has no attribute {name!r}")
        if name == _VERSION_MODULE:
            return importlib.import_module(f"{_PREFIX}{_VERSION_MODULE}")
        try:
            value = getattr(_lamina(), name)
            if isinstance(value, types.ModuleType) and _lamina_module_exists(name):
                # a submodule reached as an attribute is imported under the alias's
                # name too: jaxlib looks for `jax.core` in sys.modules
                value = importlib.import_module(_PREFIX + name)
        except AttributeError:
            if not _lamina_module_exists(name):
                raise AttributeError(
                    f"module {_ALIAS!r} has no attribute {name!r}: "
                    f"lamina does not implement {_PREFIX}{name}") from None
            value = importlib.import_module(_PREFIX + name)
        self.__dict__[name] = value  # later lookups skip __getattr__
        return value

    def __dir__(self) -> list[str]:
        names = {n for n in dir(_lamina()) if n not in LAMINA_ONLY}
        return sorted(names | {"__version__", "__version_info__", _VERSION_MODULE})


def _lamina() -> types.ModuleType:
    """lamina's public namespace, which the alias's ``jax`` forwards to.

    Read from ``sys.modules``, not imported: Python runs a package's
    ``__init__`` before any of its submodules, so ``lamina`` is always there
    once this module runs, and the ``__init__`` (the top floor, which imports
    this module nowhere) stays above it.
    """
    return sys.modules["lamina"]


def _lamina_module_exists(path: str) -> bool:
    """Whether ``jax.<path>`` has a lamina module to map to."""
    if path.split(".", 1)[0] in LAMINA_ONLY or path in NOT_IMPORTABLE:
        return False
    try:
        return importlib.util.find_spec(f"lamina.{path}") is not None
    except ModuleNotFoundError:  # a parent of the path is not a package
        return False


class _AliasLoader(importlib.abc.Loader):
    """Loads ``jax`` as the thin module and ``jax.<path>`` as ``lamina.<path>``."""

    def __init__(self) -> None:
        #: alias name -> the lamina module's own spec, while the import system
        #: holds the alias's spec on the module (between create and exec).
        self._own_specs: dict[str, importlib.machinery.ModuleSpec | None] = {}

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> types.ModuleType:
        if spec.name == _ALIAS:
            module = _JaxModule(_ALIAS, "JAX's API, implemented by lamina (lamina.compat).")
            module.__version__ = JAX_API_VERSION  # type: ignore[attr-defined]
            module.__version_info__ = JAX_API_VERSION_INFO  # type: ignore[attr-defined]
            return module
        if spec.name == _PREFIX + _VERSION_MODULE:
            version = types.ModuleType(spec.name, "The JAX API version lamina implements.")
            version.__version__ = version._version = JAX_API_VERSION  # type: ignore[attr-defined]
            version.__version_info__ = JAX_API_VERSION_INFO  # type: ignore[attr-defined]
            return version
        target = importlib.import_module("lamina." + spec.name[len(_PREFIX):])
        self._own_specs[spec.name] = target.__spec__
        return target

    def exec_module(self, module: types.ModuleType) -> None:
        # The import system has set the module's __spec__ to the alias's spec;
        # a lamina module keeps its own (reloads and find_spec('lamina.x') read it).
        spec = module.__spec__
        if spec is not None and spec.name in self._own_specs:
            module.__spec__ = self._own_specs.pop(spec.name)


class _AliasFinder(importlib.abc.MetaPathFinder):
    """First on ``sys.meta_path``: it alone answers for ``jax`` and ``jax.*``."""

    def __init__(self) -> None:
        self._loader = _AliasLoader()

    def find_spec(self, fullname: str, path: Sequence[str] | None = None,
                  target: types.ModuleType | None = None
                  ) -> importlib.machinery.ModuleSpec | None:
        if fullname == _ALIAS:
            return importlib.machinery.ModuleSpec(_ALIAS, self._loader, is_package=True)
        if fullname == _PREFIX + _VERSION_MODULE:
            return importlib.machinery.ModuleSpec(fullname, self._loader)
        if not fullname.startswith(_PREFIX) or not _lamina_module_exists(fullname[len(_PREFIX):]):
            return None
        target_name = "lamina." + fullname[len(_PREFIX):]
        target_spec = importlib.util.find_spec(target_name)
        is_package = target_spec is not None and target_spec.submodule_search_locations is not None
        return importlib.machinery.ModuleSpec(fullname, self._loader, is_package=is_package)


_finder: _AliasFinder | None = None


def installed() -> bool:
    """Whether the alias is installed in this process."""
    return _finder is not None and _finder in sys.meta_path


def install() -> None:
    """Makes ``import jax`` (and ``jax.<sub>``) give lamina from now on; idempotent.

    Raises :class:`JaxAlreadyImportedError` if the real ``jax``, or any of its
    submodules, is already imported in this process.
    """
    global _finder
    if installed():
        return
    loaded = sorted(name for name, module in sys.modules.items()
                    if (name == _ALIAS or name.startswith(_PREFIX))
                    and not isinstance(module, _JaxModule) and module is not None)
    if loaded:
        raise JaxAlreadyImportedError(
            f"lamina.compat cannot alias 'jax': the real jax is already imported in this "
            f"process ({', '.join(loaded[:3])}{', ...' if len(loaded) > 3 else ''}). Install "
            f"the alias before anything imports jax (`python -m lamina.compat script.py`, "
            f"`pytest -p lamina.compat`), or run the program on jax alone.")
    _finder = _AliasFinder()
    sys.meta_path.insert(0, _finder)


def pytest_plugin_registered(plugin: object) -> None:
    """pytest hook: ``pytest -p lamina.compat`` installs the alias when pytest
    registers this module as a plugin, before conftests and test modules load."""
    if plugin is sys.modules[__name__]:
        install()
