"""``stages.Wrapped``, ``stages.CompilerOptions`` and ``Lowered.donate_argnums``,
as in ``jax.stages`` (JAX 0.10.2's answers are the expected values)."""

from __future__ import annotations

import numpy as np
import pytest
from lamina_tracing_core.api import grad

from lamina_sharded_jit import ShapeDtypeStruct, eval_shape, jit
from lamina_sharded_jit.stages import CompilerOptions, Wrapped


def _f(x: object, y: object, z: float = 1.0) -> object:
    return x


def test_jit_is_a_wrapped_function() -> None:
    assert isinstance(jit(_f), Wrapped)
    assert not isinstance(_f, Wrapped)  # a plain function has no trace/lower
    assert not isinstance(lambda x: x, Wrapped)
    options: CompilerOptions = {"xla_cpu_enable_fast_math": False}
    one = np.float32(1)
    assert jit(_f).lower(one, one).compile(options)(one, one) == 1


def test_lowered_donate_argnums_follows_jit_resolution() -> None:
    one = np.float32(1)
    assert jit(_f).lower(one, one).donate_argnums == ()
    assert jit(_f, donate_argnums=1).lower(one, one).donate_argnums == (1,)
    # names become positions through the signature, even when passed by keyword
    assert jit(_f, donate_argnames=("z", "y")).lower(one, one, z=one).donate_argnums == (1, 2)
    assert jit(_f, donate_argnums=(0,), static_argnums=1).lower(one, 2, one).donate_argnums == (0,)
    assert jit(lambda *a: a[0], donate_argnums=(1,)).lower(one, one, one).donate_argnums == (1,)


def test_transforming_a_compiled_function_is_a_clear_type_error() -> None:
    compiled = jit(lambda x: x["a"] * 2).lower({"a": np.float32(1)}).compile()
    for transform in (grad, jit):
        with pytest.raises(TypeError, match=r"Cannot apply JAX transformations to a function "
                           r"lowered and compiled for a particular signature\. Detected "
                           r"argument of Tracer type .* at x\['a'\]"):
            transform(compiled)({"a": np.float32(1)})


class _Duck:
    """An object that only describes an array (shape and dtype)."""

    shape = (2,)
    dtype = np.dtype(np.float32)


def test_duck_typed_and_struct_arguments_trace_but_do_not_run() -> None:
    out = eval_shape(lambda d: d + 1, _Duck())
    assert (out.shape, out.dtype) == ((2,), np.float32)
    assert "add" in str(jit(lambda d: d + 1).trace(_Duck()).jaxpr)
    nested = eval_shape(lambda d: d["a"] * 2, {"a": ShapeDtypeStruct((3,), np.float32)})
    assert nested.shape == (3,)
    with pytest.raises(TypeError, match=r"Argument 'd' of shape float32\[2\] of type .*_Duck.* "
                                        r"is not a valid JAX type \(jit\(<lambda>\)\)"):
        jit(lambda d: d + 1)(_Duck())
    with pytest.raises(TypeError, match=r"Argument 'd\['a'\]' of shape float32\[3\] .* is not "
                                        r"a valid JAX type"):
        jit(lambda d: d["a"] + 1)({"a": ShapeDtypeStruct((3,), np.float32)})


def test_signature_is_the_functions_with_or_without_static_arguments() -> None:
    # JAX 0.10.2: inspect.signature(jit(f, ...), follow_wrapped=False) == signature of f
    import inspect

    def foo(a, b=2, *, c=3):  # type: ignore[no-untyped-def]
        return a

    for jitted in (jit(foo), jit(foo, static_argnums=1)):
        assert str(inspect.signature(jitted, follow_wrapped=False)) == "(a, b=2, *, c=3)"
