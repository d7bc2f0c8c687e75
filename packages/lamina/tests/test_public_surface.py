"""The public modules and top-level names real JAX code imports, with JAX
0.10.2's behaviour (expected values were taken from JAX 0.10.2)."""

from __future__ import annotations

import typing

import ml_dtypes
import numpy as np
import pytest

import lamina
import lamina.numpy as jnp
import lamina.sharding as shardings
from lamina import custom_derivatives as cd
from lamina import dtypes
from lamina.flatten_util import ravel_pytree
from lamina.test_util import check_grads


# --- lamina.typing ----------------------------------------------------------------------------
def test_typing_aliases() -> None:
    from lamina.typing import ArrayLike, DTypeLike
    members = typing.get_args(ArrayLike)
    assert lamina.Array in members and np.ndarray in members
    assert {bool, int, float, complex, np.bool_, np.number} <= set(members)
    assert {str, np.dtype} <= set(typing.get_args(DTypeLike))
    assert lamina.typing.ArrayLike is ArrayLike


# --- lamina.dtypes ----------------------------------------------------------------------------
def test_dtypes_names_and_values() -> None:
    assert set(dtypes.__all__) >= {"TypePromotionError", "bfloat16", "canonicalize_dtype",
                                   "extended", "finfo", "float0", "iinfo", "issubdtype",
                                   "itemsize_bits", "prng_key", "result_type", "scalar_type_of"}
    assert dtypes.canonicalize_dtype(int) == np.int32
    assert dtypes.canonicalize_dtype("float64") == np.float32
    assert dtypes.canonicalize_dtype(np.complex128) == np.complex64
    assert dtypes.canonicalize_dtype("uint64", allow_extended_dtype=False) == np.uint32
    assert dtypes.result_type(1, 2.0) == np.float32
    assert dtypes.result_type(1, 2.0, return_weak_type_flag=True) == (np.float32, True)
    assert dtypes.result_type(np.int8(1), 1.0) == np.float32
    assert [dtypes.itemsize_bits(t) for t in ("int4", "float32", dtypes.bfloat16, "bool",
                                             ml_dtypes.float8_e4m3fn, ml_dtypes.float4_e2m1fn,
                                             "uint2")] == [4, 32, 16, 8, 8, 4, 2]
    with pytest.raises(ValueError, match="dtype cannot be None"):
        dtypes.itemsize_bits(None)
    assert issubclass(dtypes.TypePromotionError, ValueError)
    assert dtypes.finfo(dtypes.bfloat16).eps == 0.0078125
    # the scalar type, as in JAX: callable, and equal to the dtype
    assert dtypes.bfloat16 is ml_dtypes.bfloat16 and dtypes.bfloat16(2) == 2.0
    assert np.dtype(dtypes.bfloat16) == dtypes.bfloat16
    assert dtypes.iinfo("int8").max == 127
    assert repr(dtypes.float0) == "dtype([('float0', 'V')])"


def test_dtypes_issubdtype_and_extended() -> None:
    assert dtypes.issubdtype(dtypes.prng_key, dtypes.extended)
    assert dtypes.issubdtype(dtypes.prng_key, np.generic)
    assert dtypes.issubdtype(dtypes.extended, dtypes.extended)
    assert not dtypes.issubdtype(np.float32, dtypes.extended)
    assert not dtypes.issubdtype(lamina.random.PRNGKey(0).dtype, dtypes.prng_key)
    assert dtypes.issubdtype(dtypes.bfloat16, np.floating)
    assert not dtypes.issubdtype(dtypes.float0, np.floating)
    assert dtypes.issubdtype("int8", np.integer)


def test_dtypes_scalar_type_of() -> None:
    assert dtypes.scalar_type_of(1) is int
    assert dtypes.scalar_type_of(1.0) is float
    assert dtypes.scalar_type_of(np.float32(1)) is float
    assert dtypes.scalar_type_of(True) is bool
    assert dtypes.scalar_type_of(1j) is complex
    assert dtypes.scalar_type_of(jnp.zeros(3, "uint8")) is int
    assert dtypes.scalar_type_of(np.zeros(2, "complex64")) is complex
    with pytest.raises(TypeError, match="not a valid JAX array type"):
        dtypes.scalar_type_of("a")


# --- lamina.flatten_util ----------------------------------------------------------------------
def test_ravel_pytree_mixed_dtypes() -> None:
    tree = {"a": jnp.arange(3.0), "b": (jnp.ones((2, 2), jnp.int32), 2.5),
            "c": jnp.array([1, 2], jnp.int8)}
    flat, unravel = ravel_pytree(tree)
    assert flat.dtype == np.float32
    assert np.asarray(flat).tolist() == [0.0, 1.0, 2.0, 1.0, 1.0, 1.0, 1.0, 2.5, 1.0, 2.0]
    back = unravel(flat)
    shapes = lamina.tree_util.tree_map(lambda x: (x.dtype.name, x.shape), back)
    assert shapes == {"a": ("float32", (3,)), "b": (("int32", (2, 2)), ("float32", ())),
                      "c": ("int8", (2,))}
    with pytest.raises(TypeError, match="given array of dtype int32, but expected dtype float32"):
        unravel(flat.astype("int32"))
    grad = lamina.grad(lambda v: jnp.sum(unravel(v)["a"] ** 2))(flat)
    assert np.asarray(grad).tolist() == [0.0, 2.0, 4.0] + [0.0] * 7
    jitted = lamina.jit(lambda t: ravel_pytree(t)[0])(tree)
    assert np.asarray(jitted).tolist() == np.asarray(flat).tolist()


def test_ravel_pytree_edge_cases() -> None:
    flat, unravel = ravel_pytree([1.0, 2])
    assert flat.dtype == np.float32 and np.asarray(flat).tolist() == [1.0, 2.0]
    empty, unravel_empty = ravel_pytree([])
    assert empty.dtype == np.float32 and empty.shape == (0,) and unravel_empty(empty) == []
    mixed, _ = ravel_pytree((jnp.ones(2, jnp.bfloat16), jnp.ones(1, jnp.float32)))
    assert mixed.dtype == np.float32
    cplx, unravel_c = ravel_pytree((jnp.ones(2, jnp.complex64), jnp.ones(1, jnp.float32)))
    assert cplx.dtype == np.complex64
    assert [x.dtype for x in unravel_c(cplx)] == [np.complex64, np.float32]


# --- lamina.custom_derivatives ----------------------------------------------------------------
def test_custom_derivatives_names() -> None:
    for name in ("custom_jvp", "custom_vjp", "custom_gradient", "closure_convert",
                 "SymbolicZero", "CustomVJPPrimal", "custom_jvp_call_p", "custom_vjp_call_p",
                 "custom_vjp_primal_tree_values", "zero_from_primal"):
        assert hasattr(cd, name), name
    assert lamina.custom_derivatives is cd
    assert lamina.custom_gradient is cd.custom_gradient
    assert lamina.closure_convert is cd.closure_convert


def test_custom_gradient() -> None:
    @cd.custom_gradient
    def f(x: object) -> object:
        y = jnp.sin(x)
        return y, lambda g: (g * 3.0 * y,)

    assert float(f(1.0)) == pytest.approx(0.8414709568023682)
    assert float(lamina.grad(f)(1.0)) == pytest.approx(2.5244128704071045, rel=1e-7)
    assert float(lamina.jit(lamina.grad(f))(1.0)) == pytest.approx(2.5244128704071045, rel=1e-7)
    np.testing.assert_allclose(np.asarray(lamina.vmap(lamina.grad(f))(jnp.arange(3.0))),
                               [0.0, 2.5244128704071045, 2.7278921604156494], rtol=1e-7)

    @cd.custom_gradient
    def h(x: object, y: object) -> object:
        return x * y, lambda g: (g * y, g * x * 2)

    assert [float(v) for v in lamina.grad(h, argnums=(0, 1))(2.0, 3.0)] == [3.0, 4.0]


def test_closure_convert() -> None:
    def outer(a: object) -> tuple[object, int]:
        def inner(x: object) -> object:
            return jnp.sin(x) * a + 1
        conv, consts = cd.closure_convert(inner, 1.0)
        return conv(0.5, *consts), len(consts)

    value, n = outer(2.0)
    assert float(value) == pytest.approx(1.9588511) and n == 0
    assert float(lamina.grad(lambda a: outer(a)[0])(2.0)) == pytest.approx(0.4794255495071411)
    seen: list[int] = []

    def count(a: object) -> object:
        _, consts = cd.closure_convert(lambda x: x * a, 1.0)
        seen.append(len(consts))
        return a

    lamina.grad(count)(2.0)
    assert seen == [1]  # the traced, differentiable `a` is hoisted
    ints: list[int] = []

    def count_int(a: object) -> object:
        _, consts = cd.closure_convert(lambda x: x * a, 1)
        ints.append(len(consts))
        return a

    lamina.jit(count_int)(3)
    assert ints == [0]  # an integer tracer carries no derivative: it stays closed over


def test_zero_from_primal() -> None:
    zeros = cd.zero_from_primal((1.0, jnp.arange(3)))
    assert float(zeros[0]) == 0.0 and zeros[1].dtype == dtypes.float0
    assert isinstance(cd.zero_from_primal(1.0, symbolic_zeros=True), cd.SymbolicZero)


# --- linear_transpose, jacobian --------------------------------------------------------------
def test_linear_transpose() -> None:
    ft = lamina.linear_transpose(lambda x, y: 0.5 * x - 2 * y, 1.0, 1.0)
    a, b = ft(1.0)
    assert (float(a), float(b)) == (0.5, -2.0)
    g = lambda t: {"a": jnp.sum(t["u"] * 3.0), "b": t["v"][::-1]}  # noqa: E731
    gt = lamina.linear_transpose(g, {"u": jnp.ones(3), "v": jnp.ones(2)})
    (ct,) = gt({"a": jnp.float32(2.0), "b": jnp.array([1.0, 5.0])})
    assert np.asarray(ct["u"]).tolist() == [6.0] * 3 and np.asarray(ct["v"]).tolist() == [5, 1]
    (ints,) = lamina.linear_transpose(lambda x: 2 * x, jnp.arange(3))(jnp.array([1, 2, 3]))
    assert ints.dtype == np.int32 and np.asarray(ints).tolist() == [2, 4, 6]
    x_ct, y_ct = lamina.linear_transpose(lambda x, y: x, 1.0, 2.0)(3.0)
    assert float(x_ct) == 3.0 and float(y_ct) == 0.0
    jitted = lamina.jit(lambda c: lamina.linear_transpose(
        lambda x, y: 0.5 * x - 2 * y, 1.0, 1.0)(c))(2.0)
    assert [float(v) for v in jitted] == [1.0, -4.0]


def test_linear_transpose_errors() -> None:
    with pytest.raises(TypeError, match="integer -> integer functions"):
        lamina.linear_transpose(lambda x: x.astype(jnp.float32), jnp.arange(3))
    ft = lamina.linear_transpose(lambda x: x * 2.0, 1.0)
    with pytest.raises(TypeError, match="cotangent tree does not match"):
        ft((1.0, 2.0))
    gt = lamina.linear_transpose(lambda v: v[::-1], jnp.ones(2))
    with pytest.raises(TypeError, match="cotangent type does not match"):
        gt(jnp.ones(3))


def test_jacobian_is_reverse_mode() -> None:
    jac = lamina.jacobian(lambda x: jnp.sin(x) * x[0])(jnp.array([1.0, 2.0]))
    np.testing.assert_allclose(np.asarray(jac), [[1.3817732334136963, 0.0],
                                                 [0.9092974066734314, -0.416146844625473]],
                               rtol=1e-7)


# --- lamina.test_util --------------------------------------------------------------------------
def test_check_grads_accepts_correct_derivatives() -> None:
    check_grads(lambda x: jnp.sin(x) * x ** 2, (1.3,), 2)
    check_grads(lambda x, y: jnp.sum(jnp.tanh(x) * y), (jnp.arange(3.0), jnp.ones(3)), 3,
                modes=("rev",))
    check_grads(lambda x: {"a": jnp.exp(x)}, (jnp.array([0.1, 0.2]),), 2, modes=("fwd",))
    check_grads(lambda x: x * 3.0, (np.float32(2.0),), 1, atol=1e-2, rtol=1e-2)


@pytest.mark.parametrize("mode, where", [("fwd", "JVP tangent"),
                                         ("rev", "VJP cotangent projection")])
def test_check_grads_catches_a_wrong_rule(mode: str, where: str) -> None:
    @lamina.custom_jvp
    def bad(x: object) -> object:
        return jnp.sin(x)

    bad.defjvp(lambda p, t: (jnp.sin(p[0]), 2.0 * t[0]))
    with pytest.raises(AssertionError, match=where):
        check_grads(bad, (0.7,), 1, modes=(mode,))
    with pytest.raises(ValueError, match="unknown modes"):
        check_grads(bad, (0.7,), 1, modes=("sideways",))


# --- top-level names ------------------------------------------------------------------------
def test_device_shardings_and_mesh() -> None:
    assert isinstance(lamina.devices()[0], lamina.Device)
    assert lamina.P("x", None) == lamina.sharding.PartitionSpec("x", None)
    assert lamina.NamedSharding is lamina.sharding.NamedSharding
    n = lamina.device_count()
    mesh = lamina.make_mesh((2, n // 2), ("x", "y"))
    assert mesh.devices.shape == (2, n // 2) and mesh.axis_names == ("x", "y")
    assert [d.id for d in mesh.devices.flat] == [d.id for d in lamina.devices()]
    small = lamina.make_mesh((1,), ("x",))
    assert small.devices.shape == (1,)
    with pytest.raises(ValueError, match="must be >= the product of mesh_shape"):
        lamina.make_mesh((n + 1,), ("x",))
    x = lamina.device_put(jnp.arange(2.0 * n), lamina.NamedSharding(mesh, lamina.P(("x", "y"))))
    assert len(x.addressable_shards) == n


def test_enable_x64_context_manager() -> None:
    assert lamina.enable_x64.value is False
    with lamina.enable_x64(True):
        assert lamina.enable_x64.value is True
        assert jnp.array(1.0).dtype == np.float64 and jnp.arange(3).dtype == np.int64
        assert lamina.jit(lambda x: x + 1)(np.float64(1)).dtype == np.float64
    assert jnp.array(1.0).dtype == np.float32
    assert lamina.jit(lambda x: x + 1)(np.float64(1)).dtype == np.float32


def test_default_device_context_manager() -> None:
    target = lamina.devices()[-1]
    first = lamina.devices()[0]
    f = lamina.jit(lambda: jnp.zeros(1))
    g = lamina.jit(lambda x: x + 1)
    host = np.ones(2, np.float32)
    # cached eagerly and by jit (C++ and Python paths) before the scope
    assert jnp.ones(2).devices() == f().devices() == g(host).devices() == {first}
    assert lamina.default_device.value is None
    with lamina.default_device(target):
        assert lamina.default_device.value == target
        assert jnp.ones(2).devices() == {target}
        assert (jnp.ones(2) * 3).devices() == {target}
        assert f().devices() == g(host).devices() == {target}
    assert lamina.default_device.value is None
    assert jnp.ones(2).devices() == f().devices() == g(host).devices() == {first}


def test_process_and_host_helpers() -> None:
    assert lamina.process_indices() == [0]
    x = jnp.ones(3)
    out = lamina.copy_to_host_async({"a": x, "b": 1.0})
    assert out["a"] is x and np.asarray(out["a"]).tolist() == [1.0] * 3
    info = lamina.print_environment_info(return_string=True)
    assert info is not None and "jaxlib: 0.10.2" in info and "process_count: 1" in info
    assert lamina.float0 == dtypes.float0


def test_public_modules_are_reachable() -> None:
    import lamina.experimental
    for name in ("typing", "custom_derivatives", "flatten_util", "test_util", "experimental",
                 "dtypes", "core", "interpreters", "custom_batching", "lib"):
        assert name in dir(lamina), name
        assert getattr(lamina, name).__name__ == f"lamina.{name}"
    assert lamina.experimental.__name__ == "lamina.experimental"
    # JAX lists these in dir(jax.experimental); the submodules load on first use
    assert {"io_callback", "compilation_cache", "checkify"} <= set(dir(lamina.experimental))
    assert lamina.experimental.compilation_cache.__name__ == \
        "lamina.experimental.compilation_cache"


def test_shard_is_exported() -> None:
    x = lamina.device_put(np.arange(3.0, dtype=np.float32))
    (shard,) = x.addressable_shards
    assert isinstance(shard, lamina.Shard) and "Shard" in dir(lamina)


@pytest.mark.parametrize("flag, bad", [("debug_nans", lambda: jnp.log(-jnp.ones(2))),
                                       ("debug_infs", lambda: jnp.ones(2) / 0.0)])
def test_debug_nans_and_infs_context_managers(flag: str, bad: typing.Any) -> None:
    setting = getattr(lamina, flag)
    assert setting.value is False
    with setting():
        assert setting.value is True and lamina.config.read(flag) is True
        with pytest.raises(FloatingPointError):
            bad()
    assert setting.value is False
    assert np.isnan(bad()).any() or np.isinf(bad()).any()  # unchecked again


def test_sharding_base_class_and_aval_sharding() -> None:
    # optax annotates with jax.sharding.Sharding and reads jax.typeof(x).sharding
    x = lamina.device_put(np.ones(2, np.float32))
    assert isinstance(x.sharding, shardings.Sharding)
    mesh = shardings.Mesh(np.array(lamina.devices()[:1]), ("a",))
    assert isinstance(shardings.NamedSharding(mesh, shardings.PartitionSpec()), shardings.Sharding)
    assert not isinstance("replicated", shardings.Sharding)
    # JAX 0.10.2: replicated over the (empty) abstract mesh, never None
    assert lamina.typeof(x).sharding.is_fully_replicated
