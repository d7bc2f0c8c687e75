"""Error texts that JAX-written code matches on, with lamina's names kept in
them (the expected wording is JAX 0.10.2's)."""

from __future__ import annotations

import numpy as np
import pytest

import lamina as lx
import lamina.numpy as jnp


def test_concretization_lists_several_arguments_as_jax() -> None:
    with pytest.raises(lx.errors.TracerBoolConversionError,
                       match="depends on the values of the arguments x and y\\."):
        lx.jit(lambda x, y: 1 if x + y > 0 else 0)(1.0, 2.0)
    with pytest.raises(lx.errors.TracerBoolConversionError,
                       match="depends on the values of the arguments x, y, and z\\."):
        lx.jit(lambda x, y, z: 1 if x + y + z > 0 else 0)(1.0, 2.0, 3.0)
    with pytest.raises(lx.errors.TracerBoolConversionError,
                       match="depends on the value of the argument x\\."):
        lx.jit(lambda x: 1 if x > 0 else 0)(1.0)


def test_unbound_axis_name_as_jax() -> None:
    with pytest.raises(NameError, match="unbound axis name: j\\."):
        lx.make_jaxpr(lambda x: lx.lax.psum(x, "j"))(np.float32(1))


def test_pmap_in_axes_mismatches_name_the_position_as_jax(devices8: list) -> None:  # type: ignore[type-arg]
    x = np.ones((8, 2), np.float32)
    with pytest.raises(ValueError, match=r"Mismatch at pmap in_axes\[0\]\[0\]"):
        lx.pmap(lambda a: a, in_axes=((0, 0),))((x,))
    with pytest.raises(ValueError, match=r"different lengths of tuple at key path "
                                         r"pmap in_axes\[0\]"):
        lx.pmap(lambda a, b: a, in_axes=(0,))(x, x)


def test_device_put_prefix_mismatch_as_jax() -> None:
    x = np.ones(2, np.float32)
    devices = lx.devices()
    with pytest.raises(ValueError, match="device_put device specification must be a tree "
                                         "prefix of the corresponding value"):
        lx.device_put({"a": x, "b": x}, [devices[0], devices[0]])


def test_vmap_size_errors_group_sizes_and_name_keywords_as_jax() -> None:
    with pytest.raises(ValueError) as err:
        lx.vmap(lambda a1, a3: a1 + a3)(jnp.ones(3), a3=jnp.ones(4))
    assert str(err.value) == (
        "vmap got inconsistent sizes for array axes to be mapped:\n"
        "  * one axis had size 3: axis 0 of argument a1 of type float32[3];\n"
        "  * one axis had size 4: axis 0 of kwargs['a3'] of type float32[4]")
    with pytest.raises(ValueError) as err:
        lx.vmap(lambda a, b, c, d: a)(jnp.ones(3), jnp.ones(4), {"k": jnp.ones(4)}, jnp.ones(5))
    assert str(err.value) == (
        "vmap got inconsistent sizes for array axes to be mapped:\n"
        "  * most axes (2 of them) had size 4, e.g. axis 0 of argument b of type float32[4];\n"
        "  * one axis had size 3: axis 0 of argument a of type float32[3];\n"
        "  * one axis had size 5: axis 0 of argument d of type float32[5]")


def _returns_a_string(x):  # type: ignore[no-untyped-def]
    return x, "oops"


@pytest.mark.parametrize("transform, traced_for", [
    (lambda f: lx.jit(f)(1.0), "jit"),
    (lambda f: lx.eval_shape(f, 1.0), "jit"),
    (lambda f: lx.make_jaxpr(f)(1.0), "jit"),
    (lambda f: lx.vmap(f)(jnp.ones(2)), "vmap"),
])
def test_a_non_array_output_names_the_function_and_the_output(transform, traced_for) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(TypeError, match=rf"function _returns_a_string at .*test_e2e_jax_error_"
                                        rf"texts.py:\d+ traced for {traced_for} returned a value "
                                        rf"of type <class 'str'> at output component \[1\], which "
                                        rf"is not a valid JAX type"):
        transform(_returns_a_string)


def test_a_non_array_output_of_grad_and_pmap(devices8: list) -> None:  # type: ignore[type-arg]
    with pytest.raises(TypeError, match=r"traced for grad returned a value of type <class 'str'> "
                                        r"as its result, which is not a valid JAX type"):
        lx.grad(lambda x: "oops")(1.0)
    with pytest.raises(TypeError, match=r"function _returns_a_string .* traced for pmap returned "
                                        r"a value of type <class 'str'> at output component \[1\]"):
        lx.pmap(_returns_a_string)(jnp.ones(8))


def test_shape_errors_while_staging_name_operands_and_function() -> None:
    def f(x, y):  # type: ignore[no-untyped-def]
        return x["a"] + y

    with pytest.raises(TypeError, match=r"lamina.numpy.add got incompatible shapes for "
                                        r"broadcasting: \(3,\), \(4,\)\. The operands are "
                                        r"float32\[3\] \(from x\['a'\]\) and float32\[4\] "
                                        r"\(from y\) while tracing f at .*:\d+ for jit\."):
        lx.jit(f)({"a": jnp.ones(3)}, jnp.ones(4))
    with pytest.raises(TypeError, match=r"The operands are float32\[3\] \(from x\) and "
                                        r"float32\[4\] while tracing"):
        lx.make_jaxpr(lambda x: jnp.sin(x) * jnp.ones(4))(jnp.ones(3))


def test_pmap_over_an_empty_axis_is_a_clear_error(devices8: list) -> None:  # type: ignore[type-arg]
    with pytest.raises(ValueError, match=r"pmap of <lambda>: the mapped axis 0 of argument x "
                                         r"has size 0"):
        lx.pmap(lambda x: x)(np.ones((0, 2), np.float32))
