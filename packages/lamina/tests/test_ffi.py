"""``lamina.ffi``: FFI calls lowered as JAX lowers them (texts recorded from
JAX 0.10.2), run on real targets (jaxlib's LAPACK kernel, a ctypes kernel
registered here), under jit and vmap, and their errors."""

from __future__ import annotations

import ctypes
import os
from typing import Any

import lamina as lx
import lamina.numpy as jnp
import numpy as np
import pytest
from lamina import ffi
from lamina_interpreters_pxla.layouts import Layout
from lamina_mlir_lowering.custom_call import ensure_lapack_targets
from lamina_mlir_lowering.rule_table import register_lowering
from lamina_tracing_core.primitives import Primitive

_SPD = np.array([[4.0, 2.0], [2.0, 3.0]], np.float32)


def _potrf() -> Any:
    """jaxlib's CPU Cholesky kernel as JAX's own lowering calls it (lower
    triangle, column-major, factored in place)."""
    ensure_lapack_targets()
    return ffi.ffi_call(
        "lapack_spotrf_ffi",
        (lx.ShapeDtypeStruct((2, 2), jnp.float32), lx.ShapeDtypeStruct((), jnp.int32)),
        input_output_aliases={0: 0}, input_layouts=[(1, 0)], output_layouts=[(1, 0), ()],
        vmap_method="broadcast_all")


def _custom_call_lines(text: str) -> list[str]:
    return [line.strip() for line in text.splitlines() if "custom_call" in line]


def test_lowering_text_matches_jax() -> None:
    potrf = _potrf()
    text = lx.jit(lambda x: potrf(x, uplo=np.uint8(76))).lower(_SPD).as_text()
    assert _custom_call_lines(text) == [
        '%0:2 = stablehlo.custom_call @lapack_spotrf_ffi(%arg0) {backend_config = "", '
        "mhlo.backend_config = {uplo = 76 : ui8}, operand_layouts = [dense<[0, 1]> : "
        "tensor<2xindex>], output_operand_aliases = [#stablehlo.output_operand_alias<"
        "output_tuple_indices = [0], operand_index = 0, operand_tuple_indices = []>], "
        "result_layouts = [dense<[0, 1]> : tensor<2xindex>, dense<> : tensor<0xindex>]} : "
        "(tensor<2x2xf32>) -> (tensor<2x2xf32>, tensor<i32>)"]


def test_attribute_kinds_and_side_effects_lower_as_in_jax() -> None:
    g = ffi.ffi_call("my_target", lx.ShapeDtypeStruct((3,), jnp.float32), has_side_effect=True)
    text = lx.jit(lambda x: g(x, a=1, b=2.0, c="s", d=np.float32(3), e=True,
                              arr=np.arange(3, dtype=np.int32), dd={"k": 1})
                  ).lower(jnp.ones(3)).as_text()
    assert _custom_call_lines(text) == [
        '%0 = stablehlo.custom_call @my_target(%arg0) {backend_config = "", has_side_effect = '
        "true, mhlo.backend_config = {a = 1 : i64, arr = dense<[0, 1, 2]> : tensor<3xi32>, "
        'b = 2.000000e+00 : f64, c = "s", d = 3.000000e+00 : f32, dd = {k = 1 : i64}, '
        "e = true}, operand_layouts = [dense<0> : tensor<1xindex>], result_layouts = "
        "[dense<0> : tensor<1xindex>]} : (tensor<3xf32>) -> tensor<3xf32>"]
    # a side effect keeps the call when its result is unused
    unused = lx.jit(lambda x: (g(x), x)[1]).lower(jnp.ones(3)).as_text()
    assert "@my_target" in unused
    pure = ffi.ffi_call("my_target", lx.ShapeDtypeStruct((3,), jnp.float32))
    assert "@my_target" not in lx.jit(lambda x: (pure(x), x)[1]).lower(jnp.ones(3)).as_text()


def test_legacy_api_version_lowering() -> None:
    h = ffi.ffi_call("legacy", lx.ShapeDtypeStruct((3,), jnp.float32),
                     custom_call_api_version=2, legacy_backend_config="opaque")
    assert _custom_call_lines(lx.jit(h).lower(jnp.ones(3)).as_text()) == [
        '%0 = stablehlo.custom_call @legacy(%arg0) {api_version = 2 : i32, backend_config = '
        '"opaque", operand_layouts = [dense<0> : tensor<1xindex>], result_layouts = '
        "[dense<0> : tensor<1xindex>]} : (tensor<3xf32>) -> tensor<3xf32>"]


def test_jaxlib_lapack_target_runs_eagerly_under_jit_and_vmap() -> None:
    potrf = _potrf()
    factor, info = potrf(jnp.asarray(_SPD), uplo=np.uint8(76))
    assert isinstance(factor, lx.Array) and int(info) == 0
    expected = np.linalg.cholesky(_SPD)
    np.testing.assert_allclose(np.tril(np.asarray(factor)), expected, rtol=1e-6)
    jitted, _ = lx.jit(lambda x: potrf(x, uplo=np.uint8(76)))(_SPD)
    np.testing.assert_allclose(np.tril(np.asarray(jitted)), expected, rtol=1e-6)
    batch = np.stack([_SPD, 4 * _SPD, 9 * _SPD])
    many, infos = lx.vmap(lambda x: potrf(x, uplo=np.uint8(76)))(batch)
    assert many.shape == (3, 2, 2) and infos.tolist() == [0, 0, 0]
    np.testing.assert_allclose(np.tril(np.asarray(many)), np.linalg.cholesky(batch), rtol=1e-6)


_LEGACY_KERNEL = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.POINTER(ctypes.c_void_p))


def _affine(out: int, ins: Any) -> None:
    """A legacy custom-call kernel: out = 2 * in + 1 over four float32s."""
    src = ctypes.cast(ins[0], ctypes.POINTER(ctypes.c_float))
    dst = ctypes.cast(out, ctypes.POINTER(ctypes.c_float))
    for i in range(4):
        dst[i] = 2 * src[i] + 1


_affine_pointer = _LEGACY_KERNEL(_affine)  # kept alive: XLA holds the raw pointer


def test_registered_ctypes_target_runs() -> None:
    capsule = ffi.pycapsule(_affine_pointer)
    assert type(capsule).__name__ == "PyCapsule"
    ffi.register_ffi_target("lamina_test_affine", capsule, platform="cpu", api_version=0)
    f = ffi.ffi_call("lamina_test_affine", lx.ShapeDtypeStruct((4,), jnp.float32),
                     custom_call_api_version=1, vmap_method="sequential")
    np.testing.assert_array_equal(np.asarray(f(jnp.arange(4.0))), [1, 3, 5, 7])
    np.testing.assert_array_equal(np.asarray(lx.jit(f)(jnp.arange(4.0))), [1, 3, 5, 7])
    rows = jnp.arange(8.0).reshape(2, 4)
    np.testing.assert_array_equal(np.asarray(lx.vmap(f)(rows)), 2 * np.asarray(rows) + 1)
    jaxpr = str(lx.make_jaxpr(lx.vmap(f))(rows))
    assert "scan" in jaxpr and "ffi_call" in jaxpr


def test_vmap_methods_shape_the_call() -> None:
    def jaxpr_of(method: str | None) -> str:
        g = ffi.ffi_call("t", lx.ShapeDtypeStruct((), jnp.float32), vmap_method=method)
        return str(lx.make_jaxpr(lx.vmap(g, in_axes=(0, None)))(jnp.ones(3), 2.0))

    assert "f32[1] " in jaxpr_of("expand_dims").replace("]\n", "] ")  # unbatched: (1,)
    assert "broadcast_in_dim" in jaxpr_of("broadcast_all")
    assert "unroll" in jaxpr_of("sequential_unrolled")
    with pytest.raises(NotImplementedError, match="vmap_method=None"):
        jaxpr_of(None)


def test_errors() -> None:
    sds = lx.ShapeDtypeStruct((3,), jnp.float32)
    with pytest.raises(ValueError, match="vmap_method must be one of"):
        ffi.ffi_call("t", sds, vmap_method="bad")
    with pytest.raises(ValueError, match="legacy_backend_config needs"):
        ffi.ffi_call("t", sds, legacy_backend_config="x")
    with pytest.raises(ValueError, match="'shape' and 'dtype'.*got 3 at position 0"):
        ffi.ffi_call("t", [3])
    with pytest.raises(ValueError, match=r"input arguments \(1\).*input layouts \(2\)"):
        ffi.ffi_call("t", sds, input_layouts=[None, None])(jnp.ones(3))
    with pytest.raises(ValueError, match=r"'1:0' has input index 1 outside the range \[0, 1\)"):
        ffi.ffi_call("t", sds, input_output_aliases={1: 0})(jnp.ones(3))
    with pytest.raises(ValueError, match="different type f32"):
        ffi.ffi_call("t", lx.ShapeDtypeStruct((4,), jnp.float32),
                     input_output_aliases={0: 0})(jnp.ones(3))
    with pytest.raises(ValueError, match="FFI call to `t` cannot be differentiated"):
        lx.grad(lambda x: ffi.ffi_call("t", lx.ShapeDtypeStruct((), jnp.float32))(x))(1.0)
    with pytest.raises(TypeError, match="non-hashable keyword argument a"):
        ffi.ffi_call("t", sds)(jnp.ones(3), a=[1])
    with pytest.raises(ValueError, match="at least 4"):
        lx.jit(lambda x: ffi.ffi_call("t", sds, custom_call_api_version=2)(x, a=1)
               ).lower(jnp.ones(3))
    with pytest.raises(Exception, match="No FFI handler registered for no_such_target"):
        ffi.ffi_call("no_such_target", sds)(jnp.ones(3))
    with pytest.raises(ValueError, match="register_ffi_type_id is not supported"):
        ffi.register_ffi_type_id("x", None)


def test_result_containers_follow_result_shape_dtypes() -> None:
    potrf = ffi.ffi_call("lapack_spotrf_ffi", [lx.ShapeDtypeStruct((2, 2), jnp.float32),
                                               lx.ShapeDtypeStruct((), jnp.int32)])
    ensure_lapack_targets()
    assert type(potrf(_SPD, uplo=np.uint8(76))) is list
    assert type(_potrf()(_SPD, uplo=np.uint8(76))) is tuple


def test_ffi_lowering_for_a_primitive_of_ones_own() -> None:
    prim = Primitive("lamina_test_ffi_prim")
    prim.def_abstract_eval(lambda x, **_: x)
    register_lowering(prim, ffi.ffi_lowering("my_kernel", operand_layouts=[(0, 1)]))
    text = lx.jit(lambda x: prim.bind(x, scale=np.float32(2))).lower(jnp.ones((2, 3))).as_text()
    (line,) = _custom_call_lines(text)
    assert "@my_kernel" in line and "mhlo.backend_config = {scale = 2.000000e+00 : f32}" in line
    assert "operand_layouts = [dense<[0, 1]>" in line  # given: minor-to-major as is
    assert "result_layouts = [dense<[1, 0]>" in line  # default: row-major


def test_include_dir_has_the_ffi_headers() -> None:
    assert os.path.isfile(os.path.join(ffi.include_dir(), "xla", "ffi", "api", "ffi.h"))


def test_layout_objects_as_layouts() -> None:
    sds = lx.ShapeDtypeStruct((2, 3), jnp.float32)
    by_tuple = ffi.ffi_call("k", sds, input_layouts=[(1, 0)], output_layouts=(1, 0))
    by_layout = ffi.ffi_call("k", sds, input_layouts=[Layout((1, 0))],
                             output_layouts=Layout((1, 0)))
    x = jnp.ones((2, 3))
    texts = [_custom_call_lines(lx.jit(f).lower(x).as_text()) for f in (by_tuple, by_layout)]
    assert texts[0] == texts[1]
    assert "operand_layouts = [dense<[0, 1]> : tensor<2xindex>]" in texts[0][0]
    tiled = ffi.ffi_call("k", sds, input_layouts=[Layout((0, 1), tiling=((8, 128),))])
    with pytest.raises(ValueError, match="tiling"):
        tiled(x)
