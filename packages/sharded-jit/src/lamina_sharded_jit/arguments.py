"""What jit accepts as an argument, and the errors that name a bad one.

Turning a value into its aval is tracing-core's ``get_aval``; this module
adds what jit needs around it:

- :func:`arg_aval`: the aval of one flat argument of a call, or the error
  that names it by path (``y['k']``) in JAX's wording: a deleted array, a
  value that is no array, a Python int that does not fit, a dtype no array
  can have. It is the one place jit turns an argument into an aval with a
  named error;
- :func:`aval_or_none`: the aval of a valid value, or ``None`` (for checks
  that report the problem themselves);
- :func:`canonical_aval`: avals interned, so that equal avals are the same
  object and the cached-call path compares them by identity;
- :func:`check_arg_types` / :func:`structure_mismatch_message`: the errors
  of calling a compiled stage or an exported function with other arguments
  than it was made for.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from lamina_interpreters_pxla.array import Array, DeletedArrayError, deleted_message
from lamina_interpreters_pxla.stages import ArgInfo
from lamina_linear_util import api_util
from lamina_linear_util import tree_util as tu
from lamina_tracing_core import api as tc_api
from lamina_tracing_core import dtypes
from lamina_tracing_core.avals import InvalidInputError, ShapedArray, get_aval, has_no_value
from lamina_tracing_core.numpy.key_arrays import PRNGKeyArray
from lamina_tracing_core.control_flow.common import structure_differences

__all__ = ["arg_aval", "aval_or_none", "canonical_aval", "check_arg_types",
           "structure_mismatch_message", "too_deep_arguments"]

#: the interned avals; cleared when it grows past _MAX_INTERNED (the entries
#: are small and shared by every function, so a coarse bound suffices)
_interned: dict[ShapedArray, ShapedArray] = {}
_MAX_INTERNED = 65536


def canonical_aval(aval: ShapedArray) -> ShapedArray:
    """The one interned object equal to ``aval``."""
    hit = _interned.get(aval)
    if hit is None:
        if len(_interned) > _MAX_INTERNED:
            _interned.clear()
        _interned[aval] = aval
        return aval
    return hit


def aval_or_none(x: Any) -> ShapedArray | None:
    """``get_aval(x)``, or ``None`` when ``x`` is not a value lamina takes or
    holds no data (a ``ShapeDtypeStruct``)."""
    if has_no_value(x):
        return None
    try:
        return get_aval(x)
    except InvalidInputError:
        return None


def arg_aval(x: Any, name: str | None, fun_desc: str) -> ShapedArray:
    """The interned aval of the flat argument ``x`` (at path ``name``) of a
    call of ``fun_desc`` (``jit(f)``); raises the error naming it when ``x``
    cannot be an argument. ``ShapeDtypeStruct``s stand for their arrays."""
    if type(x) is Array and x._arr.is_deleted():
        raise DeletedArrayError(deleted_message(x._arr, f"{fun_desc}: argument {name}"))
    if isinstance(x, tc_api.ShapeDtypeStruct):
        return canonical_aval(ShapedArray(x.shape, x.dtype, x.weak_type))
    try:  # (not aval_or_none: ShapeDtypeStructs were handled above; this is per argument)
        aval: ShapedArray | None = get_aval(x)
    except InvalidInputError:
        aval = None
    if aval is None and _describes_an_array(x):
        # duck-typed stand-ins (``shape`` and ``dtype`` attributes) trace like
        # ShapeDtypeStructs, as in JAX
        return canonical_aval(ShapedArray(tuple(x.shape), dtypes.canonicalize_dtype(x.dtype),
                                          bool(getattr(x, "weak_type", False))))
    if aval is None:
        # JAX's wording (code matches on it), with lamina's function name
        raise TypeError(
            f"Error interpreting argument to {fun_desc} as an abstract array. The "
            f"problematic value is of type {type(x)} ({_short(x)}) and was passed to the "
            f"function at path {name}.\nThis typically means that a jit-wrapped function "
            "was called with a non-array argument, and this argument was not marked as "
            "static using the static_argnums or static_argnames parameters of jit.")
    if type(x) is int and not dtypes.python_int_fits(x, aval.dtype):
        # JAX's wording (code matches on it), with lamina's function name
        raise OverflowError(
            f"An overflow was encountered while parsing an argument to a jitted "
            f"computation, whose argument path is {name} ({fun_desc}): Python int {x} "
            f"does not fit in {aval.dtype.name}.")
    # ml_dtypes' types (bfloat16, ...) have NumPy kind 'V' but are array dtypes
    if aval.dtype.kind in "OSUVM" and aval.dtype.type.__module__ != "ml_dtypes":
        raise TypeError(f"{fun_desc}: argument {name} has dtype {aval.dtype}, which is not a "
                        "valid lamina array type")
    return canonical_aval(aval)


def too_deep_arguments(error: SystemError, fun_desc: str, fun: Any, args: Sequence[Any],
                       kwargs: dict[str, Any]) -> BaseException:
    """What to raise for a ``SystemError`` met while flattening (or, for
    jaxlib's C++ jit, just after it flattened) the arguments of a call of
    ``fun_desc``: the error naming the argument nested too deeply to flatten
    (``jit(f): argument x is a pytree nested too deeply ...``), or ``error``
    itself when it has another cause."""
    if tu.is_too_deep(error):
        named = api_util.deep_argument_error(fun_desc, fun, args, kwargs)
        if named is not None:
            return named
    return error


def _describes_an_array(x: Any) -> bool:
    shape, dtype = getattr(x, "shape", None), getattr(x, "dtype", None)
    return isinstance(shape, (tuple, list)) and dtype is not None and \
        dtypes.is_valid_array_dtype(dtype)


def check_runnable(flat: Sequence[Any], avals: Sequence[ShapedArray],
                   names: Sequence[str | None], fun_desc: str) -> None:
    """A call that runs needs values: a ``ShapeDtypeStruct`` or a duck-typed
    stand-in (fine for ``trace``/``lower``/``eval_shape``) is a TypeError
    naming it (JAX's wording, with lamina's function name)."""
    for x, aval, name in zip(flat, avals, names):
        if aval_or_none(x) is None:
            raise TypeError(f"Argument '{name}' of shape {aval.str_long()} of type "
                            f"{type(x)} is not a valid JAX type ({fun_desc}).")


def _short(x: Any) -> str:
    text = repr(x)
    return text if len(text) <= 60 else text[:57] + "..."


# --- calling a compiled function with other arguments -------------------------------------
def check_arg_types(infos: Sequence[ArgInfo], flat: Sequence[Any]) -> None:
    """Raises a ``TypeError`` listing every flat argument whose shape or
    dtype differs from the one the program was compiled for, by name (a key
    array, with its ``ArgInfo`` typed ``key<fry>[...]``, by its key type)."""
    mismatches = []
    for i, (info, x) in enumerate(zip(infos, flat)):
        aval = x.key_type() if isinstance(x, PRNGKeyArray) else aval_or_none(x)
        if aval is None or aval.shape != info.aval.shape or aval.dtype != info.aval.dtype:
            name = info.name or f"#{i}"
            got = "an invalid array" if aval is None else \
                f"{aval.dtype.name}[{','.join(map(str, aval.shape))}]"
            mismatches.append(f"Argument '{name}' compiled with {info.aval.dtype.name}"
                              f"[{','.join(map(str, info.aval.shape))}] and called with {got}")
    if mismatches:
        raise TypeError("Argument types differ from the types for which this computation was "
                        "compiled. The mismatches are:\n" + "\n".join(mismatches))


def structure_mismatch_message(expected_tree: Any, given: Any) -> str:
    """Names where a call's argument pytree differs from the compiled one."""
    expected = tu.tree_unflatten(expected_tree, [0] * expected_tree.num_leaves)
    leafy = tu.user_trees.tree_map(lambda _: 0, given)
    diffs = structure_differences(expected, leafy)
    lines = []
    for path, seen, now, why in diffs[:5]:
        where = _path_str(path)
        lines.append(f"    * at {where}, seen {seen} but now given {now}, so {why}")
    if not lines:
        lines.append(f"    * compiled for {expected_tree}, called with {tu.user_trees.tree_structure(given)}")
    return ("Function compiled with input pytree does not match the input pytree it was "
            f"called with. There are {len(diffs) or 1} mismatches, including:\n"
            + "\n".join(lines))


def _path_str(path: Sequence[Any]) -> str:
    """``args[0]['a']`` / ``kwargs['z']`` from a key path into ``(args, kwargs)``."""
    if not path:
        return "the arguments"
    head, rest = path[0], tuple(path[1:])
    root = "args" if getattr(head, "idx", 0) == 0 else "kwargs"
    return root + tu.keystr(rest)
