"""The error situations of issue 19 ("errors that name things"), as one table:
each row calls a transformation badly and checks the exception class, that
the message names the function being traced (with its file) and every
argument or output path involved, and, where JAX 0.10.2 has a wording that
code matches on, that the wording is kept.

Rows already pinned elsewhere are not repeated here:

- ``test_e2e_errors.py``: concretization under jit / grad-of-jit /
  jit-of-grad / nested jit / pmap / vmap / cond, ``int``, ``__index__``,
  ``__array__``, leaked tracers, and bad input (vmap and pmap sizes, in_axes
  rank, grad of an int, non-array arguments of jit, sharding rank and
  divisibility);
- ``test_e2e_jax_error_texts.py``: JAX's exact texts (concretization lists of
  arguments, unbound axis names, pmap in_axes mismatches, device_put
  prefixes, vmap's size groups, non-array outputs of jit / eval_shape /
  make_jaxpr / vmap / grad / pmap, the shape error of ``jit`` with operands);
- ``test_e2e_exception_classes.py``: the exception class of every shape
  error outside transformations.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

import lamina as lx
import lamina.numpy as jnp
from lamina import lax
from lamina.errors import (
    ConcretizationTypeError,
    TracerBoolConversionError,
    UnboundAxisNameError,
)

THIS_FILE = __file__.rsplit("/", 1)[-1]


def ones(*shape: int) -> np.ndarray:  # type: ignore[type-arg]
    return np.ones(shape, np.float32)


# --- the functions the rows trace ------------------------------------------------------------------
def add_ab(x, y):  # type: ignore[no-untyped-def]
    return jnp.sum(x["a"] + y)


def add_ab_vec(x, y):  # type: ignore[no-untyped-def]
    return x["a"] + y


def add_derived(x, y):  # type: ignore[no-untyped-def]
    u = jnp.sin(x["a"]) * 2.0  # derived values still name the arguments behind them
    return jnp.sum(u + jnp.cos(y))


def matmul_ab(x, y):  # type: ignore[no-untyped-def]
    return x["a"] @ y


def where_ab(x, y):  # type: ignore[no-untyped-def]
    return jnp.where(x["a"] > 0, x["a"], y)


def reshape_a(x):  # type: ignore[no-untyped-def]
    return jnp.sum(x["a"].reshape(4))


def scan_body(x, y):  # type: ignore[no-untyped-def]
    def step(c, _):  # type: ignore[no-untyped-def]
        return c + jnp.sum(x["a"] + y), None
    return lax.scan(step, jnp.float32(0), None, length=2)[0]


def branchy(x):  # type: ignore[no-untyped-def]
    if x["a"] > 0:
        return x["a"]
    return -x["a"]


def int_of(x):  # type: ignore[no-untyped-def]
    return x["a"] * int(x["a"])


def returns_str(x):  # type: ignore[no-untyped-def]
    return {"ok": x, "bad": "oops"}


@lx.custom_jvp
def smooth(x):  # type: ignore[no-untyped-def]
    return jnp.sin(x)


smooth.defjvp(lambda p, t: (smooth(p[0]), t[0]))


@lx.custom_jvp
def branchy_jvp(x):  # type: ignore[no-untyped-def]
    return branchy({"a": x})


branchy_jvp.defjvp(lambda p, t: (branchy_jvp(p[0]), t[0]))


@lx.custom_vjp
def branchy_vjp(x):  # type: ignore[no-untyped-def]
    return branchy({"a": x})


branchy_vjp.defvjp(lambda x: (branchy_vjp(x), None), lambda r, g: (g,))


def smooth_branch(x):  # type: ignore[no-untyped-def]
    return smooth(x["a"]) if smooth(x["a"]) > 0 else 0.0


X, Y = {"a": ones(3)}, ones(4)
XB, YB = {"a": ones(2, 3)}, ones(2, 4)
XP, YP = {"a": ones(8, 3)}, ones(8, 4)

SHAPE_JAX = "lamina.numpy.add got incompatible shapes for broadcasting: (3,), (4,)."
BOOL_JAX = "Attempted boolean conversion of traced array with shape bool[]."

# (id, call, exception class, fragments the message must contain)
Row = tuple[str, Callable[[], Any], type[BaseException], list[str]]

ROWS: list[Row] = [
    # shape errors in jnp ops: the function being traced and the operands' paths
    ("shape_vmap", lambda: lx.vmap(add_ab_vec)(XB, YB), TypeError,
     [SHAPE_JAX, "(from x['a'])", "(from y)", "add_ab_vec at", "for vmap"]),
    ("shape_jvp", lambda: lx.jvp(add_ab, (X, Y), (X, Y)), TypeError,
     [SHAPE_JAX, "(from x['a'])", "(from y)", "add_ab at", "for jvp"]),
    ("shape_jvp_derived", lambda: lx.jvp(add_derived, (X, Y), (X, Y)), TypeError,
     ["(from x['a'])", "(from y)", "add_derived at", "for jvp"]),
    ("shape_vjp", lambda: lx.vjp(add_ab, X, Y), TypeError,
     ["(from x['a'])", "(from y)", "add_ab at", "for vjp"]),
    ("shape_linearize", lambda: lx.linearize(add_ab, X, Y), TypeError,
     ["(from x['a'])", "(from y)", "add_ab at", "for linearize"]),
    # y is not differentiated: to grad it is a constant, not a traced argument
    ("shape_grad", lambda: lx.grad(add_ab)(X, Y), TypeError,
     [SHAPE_JAX, "(from x['a'])", "add_ab at", "for grad"]),
    ("shape_grad_both", lambda: lx.grad(add_ab, argnums=(0, 1))(X, Y), TypeError,
     ["(from x['a'])", "(from y)", "add_ab at", "for grad"]),
    ("shape_value_and_grad", lambda: lx.value_and_grad(add_ab)(X, Y), TypeError,
     ["(from x['a'])", "add_ab at", "for value_and_grad"]),
    ("shape_jacfwd", lambda: lx.jacfwd(add_ab, argnums=(0, 1))(X, Y), TypeError,
     ["(from x['a'])", "(from y)", "add_ab at", "for jacfwd"]),
    ("shape_pmap", lambda: lx.pmap(add_ab_vec)(XP, YP), TypeError,
     ["(from x['a'])", "(from y)", "add_ab_vec at", "for pmap"]),
    ("shape_jit_of_vmap", lambda: lx.jit(lx.vmap(add_ab_vec))(XB, YB), TypeError,
     ["(from x['a'])", "(from y)", "add_ab_vec at", "for vmap"]),
    ("shape_vmap_of_jit", lambda: lx.vmap(lx.jit(add_ab_vec))(XB, YB), TypeError,
     ["(from x['a'])", "(from y)", "add_ab_vec at", "for jit"]),
    ("shape_jit_of_grad", lambda: lx.jit(lx.grad(add_ab))(X, Y), TypeError,
     ["(from x['a'])", "(from y)", "add_ab at", "for jit"]),
    ("shape_grad_of_jit", lambda: lx.grad(lx.jit(add_ab))(X, Y), TypeError,
     ["(from x['a'])", "(from y)", "add_ab at", "for jit"]),
    ("shape_checkpoint", lambda: lx.jit(lx.checkpoint(add_ab))(X, Y), TypeError,
     ["(from x['a'])", "(from y)", "add_ab at", "for checkpoint"]),
    ("shape_eval_shape", lambda: lx.eval_shape(add_ab, X, Y), TypeError,
     ["(from x['a'])", "(from y)", "add_ab at"]),
    ("shape_scan_body", lambda: lx.jit(scan_body)(X, Y), TypeError,
     ["(from x['a'])", "(from y)", "scan_body at", "for jit"]),
    ("shape_matmul_jit", lambda: lx.jit(matmul_ab)(X, Y), TypeError,
     ["dot_general requires contracting dimensions to have the same shape",
      "(from x['a'])", "(from y)", "matmul_ab at", "for jit"]),
    ("shape_matmul_vmap", lambda: lx.vmap(matmul_ab)(XB, YB), TypeError,
     ["(from x['a'])", "(from y)", "matmul_ab at", "for vmap"]),
    ("shape_where_jit", lambda: lx.jit(where_ab)(X, Y), ValueError,
     ["lamina.numpy.where: incompatible shapes for broadcasting", "(from x['a'])",
      "(from y)", "where_ab at", "for jit"]),
    ("shape_reshape_jit", lambda: lx.jit(reshape_a)(X), TypeError,
     ["cannot reshape array of size 3 into shape (4,)", "(from x['a'])", "reshape_a at"]),
    # concretization: the argument behind the value, JAX's hint of where it was made
    ("bool_vmap_of_jit", lambda: lx.vmap(lx.jit(branchy))({"a": ones(2)}),
     TracerBoolConversionError, [BOOL_JAX, "argument x['a']", "branchy at", "for jit"]),
    ("bool_jit_of_vmap", lambda: lx.jit(lx.vmap(branchy))({"a": ones(2)}),
     TracerBoolConversionError,
     [BOOL_JAX, "argument x['a']", "branchy at", "for vmap", "This BatchTracer was created on "
      "line"]),
    ("bool_grad_of_vmap",
     lambda: lx.grad(lambda x: jnp.sum(lx.vmap(branchy)(x)))({"a": ones(2)}),
     TracerBoolConversionError, ["argument x['a']", "branchy at", "for vmap"]),
    ("bool_vmap_in_pmap", lambda: lx.pmap(lambda x: lx.vmap(branchy)(x))({"a": ones(8, 2)}),
     TracerBoolConversionError, ["argument x['a']", "branchy at", "for vmap"]),
    ("bool_vmap_of_pmap", lambda: lx.vmap(lx.pmap(branchy), in_axes=1)({"a": ones(8, 2)}),
     TracerBoolConversionError, ["argument x['a']", "branchy at", "for vmap"]),
    ("bool_vmap_custom_jvp_output", lambda: lx.vmap(smooth_branch)({"a": ones(2)}),
     TracerBoolConversionError, ["argument x['a']", "smooth_branch at", "for vmap"]),
    ("bool_vmap_custom_jvp_body", lambda: lx.vmap(lambda x: branchy_jvp(x["a"]))({"a": ones(2)}),
     TracerBoolConversionError, ["argument x['a']", "<lambda> at", "for vmap"]),
    ("bool_vmap_custom_vjp_body", lambda: lx.vmap(lambda x: branchy_vjp(x["a"]))({"a": ones(2)}),
     TracerBoolConversionError, ["argument x['a']", "<lambda> at", "for vmap"]),
    ("int_vmap", lambda: lx.vmap(int_of)({"a": ones(2)}), ConcretizationTypeError,
     ["The problem arose with the `int` function.", "argument x['a']", "int_of at",
      "for vmap"]),
    # non-array outputs: the function and the output's path
    ("output_jit_dict", lambda: lx.jit(returns_str)(1.0), TypeError,
     ["function returns_str at", "traced for jit", "at output component ['bad']",
      "is not a valid JAX type"]),
    ("output_vmap_dict", lambda: lx.vmap(returns_str)(ones(2)), TypeError,
     ["function returns_str at", "traced for vmap", "at output component ['bad']"]),
    ("output_pmap_dict", lambda: lx.pmap(returns_str)(ones(8)), TypeError,
     ["function returns_str at", "traced for pmap", "at output component ['bad']"]),
    ("output_jvp", lambda: lx.jvp(returns_str, (1.0,), (1.0,)), TypeError,
     ["function returns_str at", "traced for jvp", "at output component ['bad']"]),
    ("output_vjp", lambda: lx.vjp(returns_str, 1.0), TypeError,
     ["function returns_str at", "traced for vjp", "at output component ['bad']"]),
    ("output_checkpoint", lambda: lx.jit(lx.checkpoint(returns_str))(1.0), TypeError,
     ["function returns_str at", "at output component ['bad']"]),
    # non-array arguments: the argument's path and the function
    ("argument_vmap", lambda: lx.vmap(add_ab_vec)({"a": "no"}, YB), TypeError,
     ["Argument 'no' of type <class 'str'> is not a valid JAX type", "argument x['a']",
      "add_ab_vec at", "for vmap"]),
    ("argument_pmap", lambda: lx.pmap(add_ab_vec)({"a": "no"}, YP), TypeError,
     ["Argument 'no' of type <class 'str'> is not a valid JAX type", "argument x['a']",
      "add_ab_vec at", "for pmap"]),
    ("argument_grad", lambda: lx.grad(add_ab)({"a": "no"}, Y), TypeError,
     ["Argument 'no' of type <class 'str'> is not a valid JAX type", "argument x['a']",
      "add_ab at", "for grad"]),
    ("argument_eval_shape", lambda: lx.eval_shape(add_ab, {"a": "no"}, Y), TypeError,
     ["at path x['a']", "add_ab"]),
    ("donate_non_array", lambda: lx.jit(add_ab, donate_argnums=0)("s", Y), TypeError,
     ["at path x", "jit(add_ab)"]),
    # how the transformation was called: JAX's words, then the function
    ("grad_non_scalar", lambda: lx.grad(add_ab_vec)({"a": ones(3)}, ones(3)), TypeError,
     ["Gradient only defined for scalar-output functions. Output had shape: (3,).",
      "add_ab_vec at", "for grad"]),
    ("grad_argnums_range", lambda: lx.grad(add_ab, argnums=2)(X, Y), TypeError,
     ["differentiating with respect to argnums=2 requires at least 3 positional arguments",
      "add_ab at", "for grad"]),
    ("grad_int_leaf", lambda: lx.grad(add_ab)({"a": np.ones(3, np.int32)}, Y), TypeError,
     ["grad requires real- or complex-valued inputs", "argument x['a']"]),
    ("jvp_trees", lambda: lx.jvp(add_ab, (X, Y), (X,)), TypeError,
     ["primal and tangent arguments to jvp must have the same tree structure", "add_ab at",
      "for jvp"]),
    ("jvp_tangent_shape", lambda: lx.jvp(add_ab, (X, Y), ({"a": ones(4)}, Y)), ValueError,
     ["jvp called with different primal and tangent shapes", "primals[0]['a']"]),
    ("vjp_cotangent_shape", lambda: lx.vjp(returns_str_free, X)[1]({"k": ones(4)}),
     ValueError, ["Shape of cotangent input to vjp pullback function (4,)",
                  "output component ['k']", "returns_str_free at", "for vjp"]),
    ("vmap_in_axes_length", lambda: lx.vmap(add_ab_vec, in_axes=(0, 0, 0))(XB, YB), ValueError,
     ["len(in_axes)=3, len(args)=2", "add_ab_vec at", "for vmap"]),
    ("vmap_in_axes_tree", lambda: lx.vmap(add_ab_vec, in_axes=({"b": 0}, 0))(XB, YB),
     ValueError, ["vmap in_axes[0]", "keys ['b']", "keys ['a']"]),
    ("vmap_in_axes_rank", lambda: lx.vmap(add_ab_vec)({"a": np.float32(1)}, YB), ValueError,
     ["implies that its rank should be at least 1", "argument x['a']", "add_ab_vec at"]),
    ("vmap_nothing_mapped", lambda: lx.vmap(add_ab_vec, in_axes=None)(X, Y), ValueError,
     ["vmap must have at least one non-None value in in_axes", "add_ab_vec at"]),
    ("vmap_out_axes_range",
     lambda: lx.vmap(returns_pair, out_axes={"p": 0, "q": 3})(ones(2, 4)), ValueError,
     ["axis 3 is out of bounds for array of dimension 2", "output component ['q']",
      "returns_pair at", "for vmap"]),
    ("vmap_sizes_nested", lambda: lx.vmap(add_ab_vec)({"a": ones(2, 3)}, ones(3, 3)),
     ValueError, ["one axis had size 2: axis 0 of argument x['a']",
                  "one axis had size 3: axis 0 of argument y"]),
    ("pmap_out_axes_range", lambda: lx.pmap(add_ab_vec, out_axes=3)({"a": ones(8, 4)},
                                                                    ones(8, 4)),
     ValueError, ["pmap of add_ab_vec", "out_axes entry 3"]),
    ("static_argnums_range", lambda: lx.jit(add_ab, static_argnums=3)(X, Y), ValueError,
     ["Jitted function add_ab has static_argnums=(3,)"]),
    ("static_unhashable", lambda: lx.jit(add_ab, static_argnums=0)(X, Y),
     ValueError, ["Non-hashable static arguments are not supported",
                  "Static argument (index 0)", "function add_ab"]),
    ("static_argnames_unknown", lambda: lx.jit(add_ab, static_argnames="z")(X, Y), ValueError,
     ["Jitted function add_ab has invalid argnames {'z'}"]),
    ("donate_argnums_range", lambda: lx.jit(add_ab, donate_argnums=5)(X, Y), ValueError,
     ["Jitted function add_ab has donate_argnums=(5,)"]),
    ("compiled_shape", lambda: COMPILED({"a": ones(4)}, ones(3)), TypeError,
     ["compiled with float32[3] and called with float32[4]", "x['a']"]),
    # JAX's words and path into (args, kwargs); the function is not named yet
    ("compiled_tree", lambda: COMPILED({"b": ones(3)}, ones(3)), TypeError,
     ["Function compiled with input pytree does not match", "at args[0]", "keys ['a']",
      "keys ['b']"]),
    ("unbound_axis_vmap",
     lambda: lx.vmap(lambda x: lax.psum(x["a"], "i"), axis_name="j")({"a": ones(2)}),
     UnboundAxisNameError, ["unbound axis name: i.", "'j'", "<lambda> at", "for vmap"]),
    ("unbound_axis_jit", lambda: lx.jit(psum_i)(ones(2)), UnboundAxisNameError,
     ["unbound axis name: i.", "psum_i at", "for jit"]),
    ("scan_carry", lambda: lx.jit(shrinking_scan)({"a": ones(3)}), TypeError,
     ["carry input and carry output must have equal types", "c['a']",
      "The scan body function is <lambda> at"]),
]


def returns_str_free(x):  # type: ignore[no-untyped-def]
    return {"k": x["a"] * 2.0}


def returns_pair(x):  # type: ignore[no-untyped-def]
    return {"p": x, "q": x * 2.0}


def psum_i(x):  # type: ignore[no-untyped-def]
    return lax.psum(x, "i")


def shrinking_scan(x):  # type: ignore[no-untyped-def]
    return lax.scan(lambda c, _: ({"a": c["a"][:2]}, None), x, None, length=2)


COMPILED = lx.jit(add_ab).lower(X, ones(3)).compile()


@pytest.mark.parametrize("row", ROWS, ids=[r[0] for r in ROWS])
def test_the_error_names_the_function_and_every_path(row: Row, devices8: list) -> None:  # type: ignore[type-arg]
    _, call, error, fragments = row
    with pytest.raises(error) as info:
        call()
    message = str(info.value)
    for fragment in fragments:
        assert fragment in message, (fragment, message)
    if any(f.endswith(" at") for f in fragments):  # "f at <file>:<line>"
        assert THIS_FILE in message, message


def test_the_table_covers_the_situations() -> None:
    assert len(ROWS) >= 47
    assert len({r[0] for r in ROWS}) == len(ROWS)
