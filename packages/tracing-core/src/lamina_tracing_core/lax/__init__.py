"""lamina's ``lax``: the primitives (``add_p``, ``dot_general_p``, ...) with their
abstract-evaluation, JVP, transpose and batching rules, and the user-level
functions with JAX's signatures (``lax.add``, ``lax.dot_general``, ...).

Modules by concept: ``elementwise``, ``convert``, ``structural`` (shape
changes), ``indexing`` (dynamic slices, gather/scatter), ``reductions``,
``cumulative``, ``sorting``, ``contractions`` (dot_general, convolutions),
``linalg`` (decompositions: JAX's ``lax.linalg``),
``collectives`` (named-axis communication), ``manual_types`` (unreduced and
reduced values in ``shard_map`` bodies), ``prng`` (threefry2x32).
``windowed_reductions`` (``reduce_window`` and its sum/max/min primitives),
``fft`` (the ``fft`` primitive), ``convolution_helpers`` (patches, local
convolutions, shape tuples).
``helpers`` holds the rule builders other layers can reuse.
"""

import importlib as _importlib
import typing as _typing

from lamina_tracing_core.avals import dtype_of as _dtype_of
from lamina_tracing_core.avals import get_aval
from lamina_tracing_core.lax import collectives as collectives
from lamina_tracing_core.lax import common as common
from lamina_tracing_core.lax import composites as composites
from lamina_tracing_core.lax import convert as convert
from lamina_tracing_core.lax import cumulative as cumulative
from lamina_tracing_core.lax import elementwise as elementwise
from lamina_tracing_core.lax import helpers as helpers
from lamina_tracing_core.lax import contractions as contractions
from lamina_tracing_core.lax import indexing as indexing
from lamina_tracing_core.lax import manual_types as manual_types
from lamina_tracing_core.lax import prng as prng
from lamina_tracing_core.lax import reductions as reductions
from lamina_tracing_core.lax import sorting as sorting
from lamina_tracing_core.lax import special as special
from lamina_tracing_core.lax import structural as structural
from lamina_tracing_core.lax.collectives import *  # noqa: F401,F403
from lamina_tracing_core.lax.composites import *  # noqa: F401,F403
from lamina_tracing_core.lax.convert import *  # noqa: F401,F403
from lamina_tracing_core.lax.convert import _convert_element_type  # noqa: F401
from lamina_tracing_core.lax.cumulative import *  # noqa: F401,F403
from lamina_tracing_core.lax.elementwise import *  # noqa: F401,F403
from lamina_tracing_core.lax.indexing import *  # noqa: F401,F403
from lamina_tracing_core.lax.contractions import *  # noqa: F401,F403
from lamina_tracing_core.lax.prng import *  # noqa: F401,F403
from lamina_tracing_core.lax.reductions import *  # noqa: F401,F403
from lamina_tracing_core.lax.sorting import *  # noqa: F401,F403
from lamina_tracing_core.lax.special import *  # noqa: F401,F403
from lamina_tracing_core.lax.structural import *  # noqa: F401,F403
from lamina_tracing_core.lax import windowed_reductions as windowed_reductions
from lamina_tracing_core.lax import convolution_helpers as convolution_helpers
from lamina_tracing_core.lax.windowed_reductions import *  # noqa: F401,F403
from lamina_tracing_core.lax.convolution_helpers import *  # noqa: F401,F403
# lax.fft is the function (as in JAX); its module is lamina_tracing_core.lax.fft
from lamina_tracing_core.lax.fft import *  # noqa: F401,F403
from lamina_tracing_core import core as _core

if _typing.TYPE_CHECKING:
    from lamina_tracing_core.lax import linalg as linalg

# Rules whose results are memoized while tracing (``core.abstract_eval_cached``):
# the first-order primitives whose abstract evaluation reads only the avals and
# params and costs more than the memo lookup. (Elementwise rules have fast
# paths cheaper than a lookup and memoize their slow path themselves;
# collectives read the axis environment.)
_core.cacheable_abstract_evals.update((
    structural.broadcast_in_dim_p, structural.reshape_p, structural.transpose_p,
    structural.iota_p, structural.squeeze_p, structural.rev_p, structural.pad_p,
    structural.concatenate_p, structural.slice_p, structural.copy_p,
    reductions.reduce_sum_p, reductions.reduce_prod_p, reductions.reduce_max_p,
    reductions.reduce_min_p, reductions.reduce_and_p, reductions.reduce_or_p,
    reductions.reduce_xor_p, reductions.argmax_p, reductions.argmin_p,
    indexing.gather_p, indexing.scatter_p, indexing.scatter_add_p, indexing.scatter_sub_p,
    indexing.scatter_mul_p, indexing.scatter_min_p, indexing.scatter_max_p,
    indexing.dynamic_slice_p, indexing.dynamic_update_slice_p,
    contractions.dot_general_p, contractions.conv_general_dilated_p,
    cumulative.cumsum_p, cumulative.cumprod_p, cumulative.cummax_p, cumulative.cummin_p,
    cumulative.cumlogsumexp_p,
    sorting.sort_p, sorting.top_k_p,
    elementwise.select_n_p, elementwise.clamp_p,
))

_core.cacheable_abstract_evals.update((
    windowed_reductions.reduce_window_sum_p, windowed_reductions.reduce_window_max_p,
    windowed_reductions.reduce_window_min_p, windowed_reductions.select_and_gather_add_p,
    windowed_reductions.select_and_scatter_add_p, fft_p,  # noqa: F405
))

_reduce_sum = reductions.reduce_sum
_reduce_max = reductions.reduce_max
_reduce_min = reductions.reduce_min
_reduce_prod = reductions.reduce_prod
_const = common.const
dtype = _dtype_of


def asarray(x: object) -> object:
    """``x`` as a lamina array value: arrays and tracers unchanged, Python
    scalars as weakly typed constants, numpy values as strong constants."""
    get_aval(x)  # validates x is array-like
    return x


def __getattr__(name: str) -> _typing.Any:
    # ``lax.linalg`` (the decompositions, a large module) loads on first use:
    # most programs never reach it.
    if name != "linalg":
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return _importlib.import_module(f"{__name__}.linalg")


def __dir__() -> list[str]:
    return sorted(set(globals()) | {"linalg"})
