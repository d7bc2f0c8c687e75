"""lamina's ``lax``: the primitives (``add_p``, ``dot_general_p``, ...) with their
abstract-evaluation, JVP, transpose and batching rules, and the user-level
functions with JAX's signatures (``lax.add``, ``lax.dot_general``, ...).

Modules by concept: ``elementwise``, ``convert``, ``structural`` (shape
changes), ``indexing`` (dynamic slices, gather/scatter), ``reductions``,
``cumulative``, ``sorting``, ``linalg`` (dot_general, convolutions),
``collectives`` (named-axis communication), ``prng`` (threefry2x32).
``helpers`` holds the rule builders other layers can reuse.
"""

from lamina_tracing_core import ad_util as _ad_util
from lamina_tracing_core.lax import collectives as collectives
from lamina_tracing_core.lax import common as common
from lamina_tracing_core.lax import convert as convert
from lamina_tracing_core.lax import cumulative as cumulative
from lamina_tracing_core.lax import elementwise as elementwise
from lamina_tracing_core.lax import helpers as helpers
from lamina_tracing_core.lax import indexing as indexing
from lamina_tracing_core.lax import linalg as linalg
from lamina_tracing_core.lax import prng as prng
from lamina_tracing_core.lax import reductions as reductions
from lamina_tracing_core.lax import sorting as sorting
from lamina_tracing_core.lax import structural as structural
from lamina_tracing_core.lax.collectives import *  # noqa: F401,F403
from lamina_tracing_core.lax.convert import *  # noqa: F401,F403
from lamina_tracing_core.lax.convert import _convert_element_type  # noqa: F401
from lamina_tracing_core.lax.cumulative import *  # noqa: F401,F403
from lamina_tracing_core.lax.elementwise import *  # noqa: F401,F403
from lamina_tracing_core.lax.indexing import *  # noqa: F401,F403
from lamina_tracing_core.lax.linalg import *  # noqa: F401,F403
from lamina_tracing_core.lax.prng import *  # noqa: F401,F403
from lamina_tracing_core.lax.reductions import *  # noqa: F401,F403
from lamina_tracing_core.lax.sorting import *  # noqa: F401,F403
from lamina_tracing_core.lax.structural import *  # noqa: F401,F403

# Rules whose results are memoized while tracing (``core.abstract_eval_cached``):
# the first-order primitives whose abstract evaluation reads only the avals and
# params and costs more than the memo lookup. (Elementwise rules have fast
# paths cheaper than a lookup and memoize their slow path themselves;
# collectives read the axis environment.)
def _register_cacheable_abstract_evals() -> None:
    from lamina_tracing_core import core as _core
    from lamina_tracing_core.primitives import Primitive as _Primitive
    for module in (structural, reductions, indexing, linalg, cumulative, sorting):
        for value in vars(module).values():
            if isinstance(value, _Primitive) and not value.higher_order:
                _core.cacheable_abstract_evals.add(value)
    _core.cacheable_abstract_evals.update((elementwise.select_n_p, elementwise.clamp_p))


_register_cacheable_abstract_evals()

# Symbolic zeros that must become arrays are staged as broadcasts of a scalar.
if structural._zeros_maker not in _ad_util.zeros_maker:
    _ad_util.zeros_maker.append(structural._zeros_maker)

_reduce_sum = reductions.reduce_sum
_reduce_max = reductions.reduce_max
_reduce_min = reductions.reduce_min
_reduce_prod = reductions.reduce_prod
_const = common.const
dtype = common.dtype_of


def asarray(x: object) -> object:
    """``x`` as a lamina array value: arrays and tracers unchanged, Python
    scalars as weakly typed constants, numpy values as strong constants."""
    common.typeof(x)  # validates x is array-like
    return x
