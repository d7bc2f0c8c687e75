"""Transformations of the public API built from tracing-core's pieces:
``linear_transpose``."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from lamina_linear_util import api_util
from lamina_linear_util import tree_util as tu
from lamina_linear_util.linear_util import wrap_init
from lamina_tracing_core import ad, dtypes, lax
from lamina_tracing_core import partial_eval as pe
from lamina_tracing_core.ad_util import Zero
from lamina_tracing_core.avals import ShapedArray, get_aval
from lamina_sharded_jit.arguments import arg_aval

__all__ = ["linear_transpose"]


def _kind(dtype: Any) -> str:
    if dtypes.is_inexact(dtype):
        return "inexact"
    return "integer" if dtypes.is_integer(dtype) else "other"


def linear_transpose(fun: Callable[..., Any], *primals: Any, reduce_axes: Sequence[Any] = ()
                     ) -> Callable[[Any], tuple[Any, ...]]:
    """The transpose of ``fun``, a function linear in its arguments, for
    arguments shaped like ``primals`` (only their types are used: arrays,
    ``ShapeDtypeStruct``s, ``ShapedArray``s or other objects with ``shape``
    and ``dtype``).

    ``linear_transpose(f, *primals)(ct)`` returns one cotangent per primal (a
    tuple). ``fun`` must map inexact values to inexact values, or integers to
    integers; the cotangent must match ``fun``'s output in structure and type.
    """
    del reduce_axes  # accepted for JAX compatibility; JAX ignores it too
    api_util.check_callable(fun)
    primals_flat, in_tree = tu.tree_flatten(primals)
    dbg = api_util.debug_info("linear_transpose", fun, primals, {})
    flat_fun, out_tree_thunk = api_util.flatten_fun_nokwargs(wrap_init(fun, debug_info=dbg),
                                                             in_tree)
    # only types are used: ShapeDtypeStructs, avals and other duck-typed
    # stand-ins (``shape`` and ``dtype``) are taken like arrays, as in JAX
    names = dbg.safe_arg_names(len(primals_flat))
    in_avals = [arg_aval(x, n, "linear_transpose") for x, n in zip(primals_flat, names)]
    jaxpr, out_avals, consts = pe.trace_to_jaxpr_dynamic(flat_fun, in_avals)
    out_tree = out_tree_thunk()
    in_dtypes = [a.dtype for a in in_avals]
    out_dtypes = [a.dtype for a in out_avals]
    kinds = {_kind(d) for d in in_dtypes + out_dtypes}
    if not (kinds <= {"inexact"} or kinds <= {"integer"}):
        raise TypeError("linear_transpose only supports [float or complex] -> [float or "
                        f"complex], and integer -> integer functions, but got {in_dtypes} -> "
                        f"{out_dtypes}.")

    def transposed(out_cotangent: Any) -> tuple[Any, ...]:
        cts_flat, ct_tree = tu.tree_flatten(out_cotangent)
        if ct_tree != out_tree:
            raise TypeError(f"cotangent tree does not match function output, expected "
                            f"{out_tree} but got {ct_tree}")
        got = [get_aval(ct) for ct in cts_flat]
        if not all(_matches(g, want) for g, want in zip(got, out_avals)):
            raise TypeError(f"cotangent type does not match function output, expected "
                            f"{[a.str_short() for a in out_avals]} but got "
                            f"{[g.str_short() for g in got]}")
        in_cts = ad.backward_pass(jaxpr, consts, [ad.UndefinedPrimal(a) for a in in_avals],
                                  cts_flat)
        return tuple(tu.tree_unflatten(in_tree, [_instantiate(ct) for ct in in_cts]))

    return transposed


def _matches(got: ShapedArray, want: ShapedArray) -> bool:
    return got.shape == want.shape and (got.dtype == want.dtype or got.weak_type)


def _instantiate(ct: Any) -> Any:
    """A zero array where no cotangent reached an input."""
    if isinstance(ct, Zero):
        return lax.full(ct.aval.shape, 0, ct.aval.dtype)
    return ct
