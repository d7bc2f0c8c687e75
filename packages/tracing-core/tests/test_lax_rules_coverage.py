"""Every lax primitive has the rules the transformations need: abstract eval
and batching for all, JVP for the differentiable ones, transpose for the
linear ones; names are JAX 0.10's."""

from __future__ import annotations

from numpy_reference import NUMPY_REFERENCE, lax_primitives

from lamina_tracing_core import batching
from lamina_tracing_core.primitives import (
    abstract_eval_rules,
    batching_rules,
    effect_rules,
    jvp_rules,
    transpose_rules,
)

#: No derivative in JAX either (integer-valued or no inputs).
NO_JVP = {"nextafter", "bitcast_convert_type", "pmax", "pmin", "axis_index", "iota"}

#: Linear in (some of) their inputs, so reverse mode needs a transpose rule.
LINEAR = {
    "neg", "add", "sub", "mul", "div", "real", "imag", "complex", "conj", "reduce_precision",
    "convert_element_type", "select_n", "broadcast_in_dim", "reshape", "squeeze", "transpose",
    "rev", "pad", "concatenate", "slice", "copy", "dynamic_slice", "dynamic_update_slice",
    "gather", "scatter", "scatter-add", "scatter-sub", "scatter-mul", "reduce_sum", "cumsum",
    "dot_general", "conv_general_dilated", "psum", "ppermute", "all_gather", "reduce_scatter",
    "all_to_all", "pvary", "psum_invariant", "all_gather_invariant"}

COLLECTIVES = {"psum", "pmax", "pmin", "ppermute", "all_gather", "reduce_scatter",
               "all_to_all", "axis_index", "pvary", "psum_invariant", "all_gather_invariant"}

EXPECTED_NAMES = {
    "neg", "sign", "floor", "ceil", "round", "is_finite", "exp", "exp2", "log", "log1p",
    "expm1", "tanh", "logistic", "sin", "cos", "tan", "asin", "acos", "atan", "sinh", "cosh",
    "asinh", "acosh", "atanh", "sqrt", "rsqrt", "cbrt", "erf", "erfc", "erf_inv", "lgamma",
    "digamma", "polygamma", "square", "real", "imag", "conj", "complex", "abs", "not",
    "population_count", "clz", "add", "sub", "mul", "div", "rem", "pow", "integer_pow",
    "max", "min", "atan2", "nextafter", "and", "or", "xor", "shift_left",
    "shift_right_logical", "shift_right_arithmetic", "eq", "ne", "lt", "le", "gt", "ge",
    "select_n", "clamp", "reduce_precision", "convert_element_type", "bitcast_convert_type",
    "stop_gradient", "iota", "broadcast_in_dim", "reshape", "squeeze", "transpose", "rev",
    "pad", "concatenate", "slice", "copy", "dynamic_slice", "dynamic_update_slice", "gather",
    "scatter", "scatter-add", "scatter-sub", "scatter-mul", "scatter-min", "scatter-max",
    "reduce_sum", "reduce_prod", "reduce_max", "reduce_min", "reduce_and", "reduce_or",
    "reduce_xor", "argmax", "argmin", "cumsum", "cumprod", "cummax", "cummin",
    "cumlogsumexp", "sort", "top_k", "dot_general", "conv_general_dilated", "psum", "pmax",
    "pmin", "ppermute", "all_gather", "reduce_scatter", "all_to_all", "axis_index",
    "pvary", "psum_invariant", "all_gather_invariant", "threefry2x32", "rng_bit_generator"}

# Bits defined by XLA's own generator algorithms: no NumPy twin; the random
# tests check them against JAX's recorded bits instead.
XLA_DEFINED_BITS = {"rng_bit_generator"}


def test_primitive_names() -> None:
    names = {p.name for p in lax_primitives()}
    assert names == EXPECTED_NAMES
    assert len(names) == len(lax_primitives())  # one primitive per name


def test_every_primitive_has_its_rules() -> None:
    missing = []
    for p in lax_primitives():
        if p not in abstract_eval_rules:
            missing.append((p.name, "abstract_eval"))
        # iota has no operands, so no batching rule is ever asked for.
        if p not in batching_rules and p not in batching.fancy_primitive_batchers \
                and p.name != "iota":
            missing.append((p.name, "batching"))
        if p.name not in NO_JVP and p not in jvp_rules:
            missing.append((p.name, "jvp"))
        if p.name in LINEAR and p not in transpose_rules:
            missing.append((p.name, "transpose"))
        if p.name in COLLECTIVES and p not in effect_rules:
            missing.append((p.name, "effects"))
        if p.name not in COLLECTIVES | XLA_DEFINED_BITS and p.name not in NUMPY_REFERENCE:
            missing.append((p.name, "numpy reference impl"))
    assert not missing, missing
