"""Trace-time errors name their culprits end to end: the function (with its
source location), the transformation, and the argument by its path, through
nested transformations. Error classes and wording follow JAX 0.10.

Note: as in JAX, ``int(tracer)`` raises ``ConcretizationTypeError`` (the
conversion needs a concrete value); ``TracerIntegerConversionError`` is
raised by ``__index__`` (using a tracer as a Python index).
"""

from __future__ import annotations

import numpy as np
import pytest

import lamina as lx
import lamina.numpy as jnp
from lamina import lax
from lamina.errors import (
    ConcretizationTypeError,
    TracerArrayConversionError,
    TracerBoolConversionError,
    TracerIntegerConversionError,
    UnexpectedTracerError,
)

THIS_FILE = __file__.rsplit("/", 1)[-1]


def to_int(x):
    return int(x['a'])


def test_int_of_a_tracer_names_the_argument_and_the_function():
    with pytest.raises(ConcretizationTypeError) as info:
        lx.jit(to_int)({'a': 1.})
    message = str(info.value)
    assert "x['a']" in message
    assert "to_int" in message and THIS_FILE in message
    assert "`int`" in message and "jit" in message


def test_indexing_with_a_tracer_is_tracer_integer_conversion_error():
    with pytest.raises(TracerIntegerConversionError) as info:
        lx.jit(lambda x: [1, 2, 3][x['a']])({'a': 1})
    message = str(info.value)
    assert "__index__" in message and "x['a']" in message and "<lambda>" in message
    assert isinstance(info.value, TypeError)


def positive(x, y):
    if y['b'] > 0:
        return x
    return -x


@pytest.mark.parametrize("case,build,args,transform", [
    ("jit", lambda: lx.jit(positive), (1., {'b': 2.}), "jit"),
    ("grad_of_jit", lambda: lx.grad(lx.jit(positive), argnums=1), (1., {'b': 2.}), "jit"),
    ("jit_of_grad", lambda: lx.jit(lx.grad(positive, argnums=1)), (1., {'b': 2.}), "jit"),
    ("nested_jit", lambda: lx.jit(lambda a, c: lx.jit(positive)(a, {'b': c * 2})), (1., 2.),
     "jit"),
])
def test_bool_conversion_names_the_argument(case, build, args, transform):
    with pytest.raises(TracerBoolConversionError) as info:
        build()(*args)
    assert isinstance(info.value, ConcretizationTypeError)
    message = str(info.value)
    assert "y['b']" in message
    assert "positive" in message and THIS_FILE in message
    assert f"for {transform}" in message


def test_bool_conversion_under_pmap_names_the_argument(devices8):
    with pytest.raises(TracerBoolConversionError) as info:
        lx.pmap(positive)(np.ones(8, np.float32), {'b': np.ones(8, np.float32)})
    assert "y['b']" in str(info.value) and "pmap" in str(info.value)


def test_bool_conversion_under_vmap_says_the_value_is_batched():
    with pytest.raises(TracerBoolConversionError) as info:
        lx.vmap(positive)(np.ones(2, np.float32), {'b': np.ones(2, np.float32)})
    assert "positive" in str(info.value) and "vmap" in str(info.value)


def test_bool_conversion_inside_a_cond_branch_names_the_operand():
    fun = lx.jit(lambda p: lax.cond(p > 0, lambda q: q if q > 0 else -q, lambda q: q, p))
    with pytest.raises(TracerBoolConversionError) as info:
        fun(1.)
    message = str(info.value)
    assert "argument q" in message and "for cond" in message


def test_array_conversion_names_the_argument():
    with pytest.raises(TracerArrayConversionError) as info:
        lx.jit(lambda x: np.asarray(x['w']) + 1)({'w': np.ones(2, np.float32)})
    assert "x['w']" in str(info.value) and "__array__" in str(info.value)


def test_concrete_python_control_flow_outside_jit_still_works():
    assert float(lx.grad(positive, argnums=0)(3., {'b': 2.})) == 1.0
    assert float(lx.grad(positive, argnums=0)(3., {'b': -2.})) == -1.0


_LEAKED: list = []


def leaky(x):
    _LEAKED.append(x)
    return x * 2


def test_leaked_tracer_is_unexpected_tracer_error_naming_the_function():
    _LEAKED.clear()
    lx.jit(leaky)(1.)
    with pytest.raises(UnexpectedTracerError) as info:
        lx.jit(lambda y: y + _LEAKED[0])(2.)
    message = str(info.value)
    assert "leaky" in message and THIS_FILE in message and "jit" in message
    with pytest.raises(UnexpectedTracerError):
        _LEAKED[0] + 1


def test_leaked_tracer_from_grad_is_unexpected_tracer_error():
    _LEAKED.clear()
    lx.grad(lambda x: jnp.sum(leaky(x)))(np.ones(2, np.float32))
    with pytest.raises(UnexpectedTracerError) as info:
        lx.jit(lambda y: y * _LEAKED[0])(np.ones(2, np.float32))
    assert "leaky" in str(info.value) or "<lambda>" in str(info.value)


def test_unexpected_tracer_error_is_a_type_error_as_in_jax():
    assert issubclass(UnexpectedTracerError, TypeError)


# --- bad input names the argument by its path ---------------------------------------------------
def add_k(x, y):
    return x['k'] + y


def _mesh_sharding(spec):
    from lamina.sharding import Mesh, NamedSharding, PartitionSpec
    mesh = Mesh(np.array(lx.devices()[:8]).reshape(2, 4), ("a", "b"))
    return NamedSharding(mesh, PartitionSpec(*spec))


BAD_INPUT = [
    ("vmap_sizes", lambda: lx.vmap(add_k)({'k': np.ones(3)}, np.ones(4)), ValueError,
     ["x['k']", "argument y"]),
    ("vmap_in_axes_rank", lambda: lx.vmap(add_k, in_axes=({'k': 1}, 0))({'k': np.ones(3)},
                                                                         np.ones(3)),
     ValueError, ["x['k']"]),
    ("grad_of_int", lambda: lx.grad(lambda x: x * 2)(1), TypeError, ["argument x"]),
    ("jit_non_array", lambda: lx.jit(add_k)({'k': 'str'}, 1.), TypeError, ["x['k']", "add_k"]),
    ("jit_sharding_rank",
     lambda: lx.jit(add_k, in_shardings=({'k': _mesh_sharding(('a', 'b'))}, None))(
         {'k': np.ones(8)}, np.ones(8)), ValueError, ["x['k']", "add_k"]),
    ("jit_sharding_divisibility",
     lambda: lx.jit(add_k, in_shardings=({'k': _mesh_sharding(('b',))}, None))(
         {'k': np.ones(6)}, np.ones(6)), ValueError, ["x['k']", "add_k"]),
    ("pmap_sizes", lambda: lx.pmap(add_k)({'k': np.ones(8)}, np.ones(7)), ValueError,
     ["x['k']", "argument y"]),
]


@pytest.mark.parametrize("case,call,error,fragments", BAD_INPUT, ids=[b[0] for b in BAD_INPUT])
def test_bad_input_names_the_argument(devices8, case, call, error, fragments):
    with pytest.raises(error) as info:
        call()
    for fragment in fragments:
        assert fragment in str(info.value)
