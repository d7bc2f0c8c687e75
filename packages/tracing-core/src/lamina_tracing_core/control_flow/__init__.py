"""Control flow as initial-style higher-order primitives: ``cond``/``switch``
(``cond_p``), ``while_loop``/``fori_loop`` (``while_p``; ``fori_loop`` with
static bounds is a ``scan``), and ``scan`` (``scan_p``). Each primitive holds
closed jaxprs (with their own ``JaxprDebugInfo``) in its params and has
abstract-evaluation, effect, JVP, partial-evaluation, transpose (not
``while``), batching, DCE and eager rules registered beside it."""

from lamina_tracing_core.control_flow.cond import cond, cond_p, switch
from lamina_tracing_core.control_flow.loops import fori_loop, while_loop, while_p
from lamina_tracing_core.control_flow.scan import lax_map, scan, scan_p

#: ``lax.map`` (a module attribute: the builtin is not shadowed in this package).
map = lax_map

__all__ = ["cond", "cond_p", "fori_loop", "lax_map", "map", "scan", "scan_p", "switch",
           "while_loop", "while_p"]
