"""Control flow as initial-style higher-order primitives: ``cond``/``switch``
(``cond_p``), ``while_loop``/``fori_loop`` (``while_p``; ``fori_loop`` with
static bounds is a ``scan``), and ``scan`` (``scan_p``). Each primitive holds
closed jaxprs (with their own ``JaxprDebugInfo``) in its params and has
abstract-evaluation, effect, JVP, partial-evaluation, transpose (not
``while``), batching, DCE and eager rules registered beside it."""

import importlib as _importlib
import sys as _sys
import types as _types
import typing as _typing

if _typing.TYPE_CHECKING:
    from lamina_tracing_core.control_flow.cond import cond, cond_p, switch
    from lamina_tracing_core.control_flow.loops import fori_loop, while_loop, while_p
    from lamina_tracing_core.control_flow.scan import lax_map, scan, scan_p

    #: ``lax.map`` (a module attribute: the builtin is not shadowed in this package).
    map = lax_map

#: public name -> (submodule, its name there). The primitives' modules load at
#: first use (PEP 562): tracing-core's eager parts need only ``common``, and a
#: program without control flow (a jitted MLP) starts without them.
_LAZY: dict[str, tuple[str, str | None]] = {
    **{name: ("cond", name) for name in ("cond", "cond_p", "switch")},
    **{name: ("loops", name) for name in ("fori_loop", "while_loop", "while_p")},
    **{name: ("scan", name) for name in ("lax_map", "scan", "scan_p")},
    "map": ("scan", "lax_map"),
    "loops": ("loops", None),  # the module (``cond`` and ``scan`` are the functions)
}

__all__ = ["cond", "cond_p", "fori_loop", "lax_map", "map", "scan", "scan_p", "switch",
           "while_loop", "while_p"]


def __getattr__(name: str) -> _typing.Any:
    entry = _LAZY.get(name)
    if entry is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    module, attribute = entry
    loaded = _importlib.import_module(f"{__name__}.{module}")
    value = loaded if attribute is None else getattr(loaded, attribute)
    globals()[name] = value  # later lookups skip __getattr__
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_LAZY))


class _Package(_types.ModuleType):
    """This package's module type. Importing a submodule sets it as an attribute
    of its package: for the two named as their functions (``cond``, ``scan``)
    the package keeps the function, as it did when it imported them at once."""

    def __setattr__(self, name: str, value: _typing.Any) -> None:
        if name in ("cond", "scan") and isinstance(value, _types.ModuleType):
            value = getattr(value, name)
        super().__setattr__(name, value)


_sys.modules[__name__].__class__ = _Package
