"""JAX's remaining extension names as a library uses them: a lowering rule
that inlines a jaxpr with ``mlir.jaxpr_subcomp``, a user call primitive
lowered by ``mlir.core_call_lowering`` and pruned by
``partial_eval.dce_jaxpr_closed_call_rule``, the MLIR helpers, jaxlib's
artifact converters under ``extend.mlir``, the primitives
``extend.core.primitives`` names, and ``CallPrimitive`` (``call_p``,
``closed_call_p``) under every transformation."""

from __future__ import annotations

from typing import Any

import lamina as lx
import lamina.lax as lax
import lamina.numpy as jnp
import numpy as np
import pytest
from jaxlib.mlir.dialects import func
from jaxlib.mlir.dialects import stablehlo as hlo
from lamina.core import ShapedArray
from lamina.extend import core as ext_core
from lamina.extend import linear_util as lu
from lamina.extend import mlir as ext_mlir
from lamina.extend.core import primitives as prims
from lamina.interpreters import ad, mlir
from lamina.interpreters import partial_eval as pe

ir = mlir.ir


def _softplus_p() -> ext_core.Primitive:
    """A primitive whose lowering rule inlines the jaxpr of its reference
    implementation with ``jaxpr_subcomp`` (JAX's form)."""
    prim = ext_core.Primitive("softplus_subcomp")

    def reference(x: Any) -> Any:
        return jnp.logaddexp(x, 0.0)

    prim.def_impl(reference)
    prim.def_abstract_eval(lambda x: ShapedArray(x.shape, x.dtype))

    def lowering(ctx: Any, x: Any) -> Any:
        closed = lx.make_jaxpr(reference)(*ctx.avals_in)
        consts = [mlir.ir_constant(c) for c in closed.consts]
        outs, tokens = mlir.jaxpr_subcomp(ctx.module_context, closed.jaxpr, ctx.name_stack,
                                          mlir.TokenSet(), consts, x)
        assert len(tokens) == 0
        return outs

    mlir.register_lowering(prim, lowering)
    ad.defjvp(prim, lambda g, x: g * lx.nn.sigmoid(x))
    return prim


def test_jaxpr_subcomp_in_a_lowering_rule_under_jit_and_grad() -> None:
    softplus_p = _softplus_p()
    x = np.array([-2.0, 0.0, 3.0], np.float32)
    want = np.logaddexp(x, 0.0)
    np.testing.assert_allclose(lx.jit(softplus_p.bind)(x), want, rtol=1e-6)
    grad = lx.jit(lx.grad(lambda v: softplus_p.bind(v).sum()))(x)
    np.testing.assert_allclose(grad, 1 / (1 + np.exp(-x)), rtol=1e-6)
    text = lx.jit(softplus_p.bind).lower(x).as_text()
    assert "stablehlo.log" in text or "stablehlo.log_plus_one" in text


def _call_p() -> ext_core.Primitive:
    """A user call primitive: params ``call_jaxpr`` (a ClosedJaxpr) and ``name``."""
    prim = ext_core.Primitive("user_call")
    prim.multiple_results = True
    prim.def_impl(lambda *args, call_jaxpr, name: ext_core.jaxpr_as_fun(call_jaxpr)(*args))
    prim.def_abstract_eval(lambda *avals, call_jaxpr, name: call_jaxpr.out_avals)
    mlir.register_lowering(prim, mlir.core_call_lowering)
    pe.dce_rules[prim] = pe.dce_jaxpr_closed_call_rule
    return prim


def _sum_and_prod(a: Any, b: Any) -> Any:
    return a + b, a * b


def test_core_call_lowering_emits_a_named_private_function() -> None:
    call_p = _call_p()
    x = np.arange(3.0, dtype=np.float32)
    body = lx.make_jaxpr(_sum_and_prod)(x, x)

    def f(a: Any, b: Any) -> Any:
        return call_p.bind(a, b, call_jaxpr=body, name="sum_and_prod")

    s, p = lx.jit(f)(x, x + 1)
    np.testing.assert_allclose(s, 2 * x + 1)
    np.testing.assert_allclose(p, x * (x + 1))
    text = lx.jit(f).lower(x, x).as_text()
    assert "func.func private @sum_and_prod" in text
    assert "call @sum_and_prod" in text


def test_dce_closed_call_rule_prunes_the_body_and_its_inputs() -> None:
    call_p = _call_p()
    x = np.arange(3.0, dtype=np.float32)
    body = lx.make_jaxpr(lambda a, b: (a * 2, b * 3))(x, x)

    def f(a: Any, b: Any) -> Any:
        return call_p.bind(a, b, call_jaxpr=body, name="pair")[1]

    jaxpr = lx.make_jaxpr(f)(x, x).jaxpr
    (eqn,) = jaxpr.eqns
    assert len(eqn.outvars) == 2
    pruned, used_inputs = pe.dce_jaxpr(jaxpr, [True], instantiate=True)
    (new_eqn,) = pruned.eqns
    assert [v is jaxpr.invars[1] for v in new_eqn.invars] == [True]
    assert len(new_eqn.outvars) == 1 and len(new_eqn.params["call_jaxpr"].out_avals) == 1
    assert len(new_eqn.params["call_jaxpr"].jaxpr.eqns) == 1
    assert used_inputs == [True, True]
    # no output used and no effects: the equation goes
    used, gone = pe.dce_jaxpr_closed_call_rule([False, False], eqn)
    assert used == [False, False] and gone is None


def test_dce_call_rule_on_an_open_call_jaxpr() -> None:
    call_p = _call_p()
    x = np.ones(2, np.float32)
    body = lx.make_jaxpr(lambda a, b: (jnp.sin(a), b + 1.0))(x, x).jaxpr
    a, b = ext_core.gensym()(ShapedArray((2,), np.dtype(np.float32))), ext_core.Var(
        ShapedArray((2,), np.dtype(np.float32)))
    outs = [ext_core.Var(v.aval) for v in body.outvars]
    eqn = ext_core.new_jaxpr_eqn([a, b], outs, call_p, {"call_jaxpr": body, "name": "open"})
    used, new_eqn = pe.dce_jaxpr_call_rule([True, False], eqn)
    assert used == [True, False]
    assert new_eqn is not None and new_eqn.invars == [a] and new_eqn.outvars == [outs[0]]
    assert [e.primitive.name for e in new_eqn.params["call_jaxpr"].eqns] == ["sin"]


def test_mlir_type_and_attribute_helpers() -> None:
    with mlir.make_ir_context(), ir.Location.unknown():
        assert str(mlir.token_type()) == "!stablehlo.token"
        f32 = ir.F32Type.get()
        i1 = ir.IntegerType.get_signless(1)
        assert mlir.flatten_ir_types([f32, (i1, f32)]) == [f32, i1, f32]
        assert str(mlir.ir_attribute(3)) == "3 : i64"
        assert str(mlir.ir_attribute(True)) == "true"
        assert str(mlir.ir_attribute("cpu")) == '"cpu"'
        # JAX's forms (its own printing of the attributes)
        assert str(mlir.ir_attribute([1, 2.5])) == "[1, 2.500000e+00]"
        assert str(mlir.ir_attribute(np.float32(1.5))) == "1.500000e+00 : f32"
        assert str(mlir.ir_attribute(np.int32(3))) == "3 : i32"
        assert str(mlir.ir_attribute(np.array([1, 2], np.int32))) == "dense<[1, 2]> : tensor<2xi32>"
        module = ir.Module.create()
        with ir.InsertionPoint(module.body):
            n = mlir.ir_constant(np.int64(5))
            shape = mlir.shape_tensor(None, [2, n])  # type: ignore[arg-type]
            assert str(shape.type) == "tensor<2xi32>"
            vals = [mlir.ir_constant(np.float32(v)) for v in range(3)]
            grouped = mlir.unflatten_ir_values_like_types(vals, [f32, (f32, f32)])
            assert grouped[0] == vals[0] and grouped[1] == vals[1:]


def test_extend_mlir_portable_artifact_round_trip() -> None:
    text = lx.jit(lambda v: v * 2).lower(np.ones(3, np.float32)).as_text()
    with mlir.make_ir_context():
        bytecode = mlir.module_to_bytecode(ir.Module.parse(text))
    artifact = ext_mlir.serialize_portable_artifact(bytecode, hlo.get_minimum_version())
    with mlir.make_ir_context():
        back = ext_mlir.deserialize_portable_artifact(artifact)
        module = back if isinstance(back, ir.Module) else ir.Module.parse(back)
        assert "stablehlo.multiply" in str(module)


def _primitives_in(jaxpr: ext_core.Jaxpr) -> set[ext_core.Primitive]:
    """The primitives of ``jaxpr``'s equations, nested jaxprs included."""
    found = {e.primitive for e in jaxpr.eqns}
    for eqn in jaxpr.eqns:
        for inner in ext_core.jaxprs_in_params(eqn.params):
            found |= _primitives_in(inner)
    return found


def test_extend_core_primitives_are_the_ones_lax_binds() -> None:
    assert ext_core.primitives is prims
    x = np.eye(3, dtype=np.float32) + 0.1
    names = {
        prims.linear_solve_p: lx.make_jaxpr(lambda b: lax.custom_linear_solve(
            lambda v: x @ v, b, lambda mv, v: jnp.linalg.solve(x, v)))(np.ones(3, np.float32)),
        prims.rng_bit_generator_p: lx.make_jaxpr(lambda k: lax.rng_bit_generator(k, (2,))[1])(
            np.zeros(4, np.uint32)),
        prims.random_gamma_p: lx.make_jaxpr(lambda k: lx.random.gamma(k, 2.0))(
            lx.random.PRNGKey(0)),
    }
    for prim, closed in names.items():
        assert prim in _primitives_in(closed.jaxpr), prim
    for name in ("schur_p", "hessenberg_p", "tridiagonal_p", "tridiagonal_solve_p"):
        assert isinstance(getattr(prims, name), ext_core.Primitive)


def _user_call_p() -> ext_core.CallPrimitive:
    return ext_core.CallPrimitive("user_call_prim")


def _body_fn(x: Any, y: Any) -> list[Any]:
    return [jnp.sin(x) * y, x + y]


def _loss_with(prim: ext_core.CallPrimitive) -> Any:
    def loss(x: Any, y: Any) -> Any:
        a, b = prim.bind(lu.wrap_init(_body_fn, debug_info=None), x, y)
        return (a * b).sum()
    return loss


def _reference_loss_and_grads(x: np.ndarray, y: np.ndarray) -> tuple[Any, Any, Any]:
    s = np.sin(x)
    return ((s * y * (x + y)).sum(), np.cos(x) * y * (x + y) + s * y,
            s * (x + y) + s * y)


def test_call_primitive_under_jit_grad_vmap_and_checkpoint() -> None:
    prim = _user_call_p()
    loss = _loss_with(prim)
    x = np.arange(3.0, dtype=np.float32)
    y = x + 1
    want, gx, gy = _reference_loss_and_grads(x, y)
    np.testing.assert_allclose(loss(x, y), want, rtol=1e-6)
    np.testing.assert_allclose(lx.jit(loss)(x, y), want, rtol=1e-6)
    grads = lx.jit(lx.grad(loss, argnums=(0, 1)))(x, y)
    np.testing.assert_allclose(grads[0], gx, rtol=1e-5)
    np.testing.assert_allclose(grads[1], gy, rtol=1e-5)
    np.testing.assert_allclose(lx.grad(lx.checkpoint(loss))(x, y), gx, rtol=1e-5)
    xs, ys = np.stack([x, 2 * x]), np.stack([y, y])
    batched = lx.jit(lx.vmap(lx.grad(loss)))(xs, ys)
    np.testing.assert_allclose(batched[1], _reference_loss_and_grads(2 * x, y)[1], rtol=1e-5)
    _, scanned = lx.lax.scan(lambda c, xy: (c, loss(*xy)), 0.0, (xs, ys))
    np.testing.assert_allclose(scanned[0], want, rtol=1e-6)


def test_call_primitive_equation_and_lowering() -> None:
    prim = _user_call_p()
    loss = _loss_with(prim)
    x = np.ones(3, np.float32)
    (eqn, *_) = lx.make_jaxpr(loss)(x, x).jaxpr.eqns
    assert eqn.primitive is prim and isinstance(eqn.params["call_jaxpr"], ext_core.Jaxpr)
    assert [e.primitive.name for e in eqn.params["call_jaxpr"].eqns] == ["sin", "mul", "add"]
    text = lx.jit(loss).lower(x, x).as_text()
    assert "func.func private @user_call_prim" in text and "call @user_call_prim" in text


def test_call_impl_runs_the_function_eagerly_and_bad_binds_are_named() -> None:
    prim = _user_call_p()
    calls: list[int] = []

    def body(v: Any) -> list[Any]:
        calls.append(1)
        return [v * 2]

    (out,) = prim.bind(lu.wrap_init(body, debug_info=None), np.float32(3.0))
    assert float(out) == 6.0 and len(calls) == 1
    (direct,) = ext_core.call_impl(lu.wrap_init(body, debug_info=None), np.float32(2.0))
    assert float(direct) == 4.0
    with pytest.raises(TypeError, match="user_call_prim.bind: expected a WrappedFun"):
        prim.bind(np.float32(1.0))


def test_closed_call_p_holds_a_closed_jaxpr_and_closes_over_tracers() -> None:
    x = np.arange(3.0, dtype=np.float32)

    def h(v: Any) -> Any:
        # the body closes over ``v``, a tracer of grad: it becomes an operand
        body = lu.wrap_init(lambda w: [w * v], debug_info=None)
        return prims.closed_call_p.bind(body, v)[0].sum()

    np.testing.assert_allclose(lx.grad(h)(x), 2 * x)
    np.testing.assert_allclose(lx.jit(lx.grad(h))(x), 2 * x)
    (eqn, *_) = lx.make_jaxpr(h)(x).jaxpr.eqns
    assert eqn.primitive is prims.closed_call_p
    assert isinstance(eqn.params["call_jaxpr"], ext_core.ClosedJaxpr)
    assert prims.call_p.name == "call" and prims.closed_call_p.name == "closed_call"


class _Pair:
    """A user constant type lowered as two MLIR values."""

    def __init__(self, first: np.ndarray, second: np.ndarray):
        self.first, self.second = first, second


class _NamedPair(_Pair):
    pass


def test_register_constant_handler_builds_a_user_types_constants() -> None:
    mlir.register_constant_handler(
        _Pair, lambda val, aval: (mlir.ir_constant(val.first), mlir.ir_constant(val.second)))
    offset_p = ext_core.Primitive("add_pair_constant")
    offset_p.def_abstract_eval(lambda x: ShapedArray(x.shape, x.dtype))
    pair = _NamedPair(np.float32([1.0, 2.0]), np.float32([10.0, 20.0]))

    def lowering(ctx: Any, x: Any) -> Any:
        first, second = mlir.ir_constants(pair)  # the subclass uses _Pair's handler
        return [hlo.add(hlo.add(x, first), second)]

    mlir.register_lowering(offset_p, lowering)
    np.testing.assert_allclose(lx.jit(offset_p.bind)(np.float32([0.5, 0.5])), [11.5, 22.5])
    with mlir.make_ir_context(), ir.Location.unknown():
        with ir.InsertionPoint(ir.Module.create().body):
            with pytest.raises(ValueError, match="ir_constant: the constant handler of "
                                                 "_NamedPair built 2 values"):
                mlir.ir_constant(pair)


def test_lower_jaxpr_to_fun_in_a_lowering_rule() -> None:
    cube_p = ext_core.Primitive("cube_via_function")
    cube_p.def_abstract_eval(lambda x: ShapedArray(x.shape, x.dtype))
    scale = np.float32(3.0)

    def lowering(ctx: Any, x: Any) -> Any:
        closed = lx.make_jaxpr(lambda v: v * v * v * scale)(*ctx.avals_in)
        fn = mlir.lower_jaxpr_to_fun(ctx.module_context, "cube_fn", closed, [],
                                     num_const_args=0, in_avals=ctx.avals_in)
        call = func.CallOp(fn.type.results, ir.FlatSymbolRefAttr.get(fn.sym_name.value), [x])
        return list(call.results)

    mlir.register_lowering(cube_p, lowering)
    x = np.float32([1.0, 2.0])
    np.testing.assert_allclose(lx.jit(cube_p.bind)(x), 3 * x ** 3)
    assert "func.func private @cube_fn" in lx.jit(cube_p.bind).lower(x).as_text()


def test_merge_mlir_modules_renames_and_makes_private() -> None:
    x = np.ones(2, np.float32)
    dst_text = lx.jit(lambda v: v + 1).lower(x).as_text()
    src_text = lx.jit(lambda v: v * 2).lower(x).as_text()
    with mlir.make_ir_context():
        dst, src = ir.Module.parse(dst_text), ir.Module.parse(src_text)
        name = mlir.merge_mlir_modules(dst, "main", src)
        assert name == "main_0"
        text = str(dst)
        assert "func.func public @main" in text and "func.func private @main_0" in text
        assert "stablehlo.multiply" in text and dst.operation.verify()
        assert list(src.body.operations) == []


def test_channel_types_mesh_and_token_names() -> None:
    with mlir.make_ir_context(), ir.Location.unknown():
        handle = hlo.ChannelHandle.get(handle=1, type=mlir.SEND_TO_HOST_TYPE)
        assert "type = 2" in str(handle)
        assert (mlir.DEVICE_TO_DEVICE_TYPE, mlir.RECV_FROM_HOST_TYPE) == (1, 3)
        with ir.InsertionPoint(ir.Module.create().body):
            token = hlo.after_all([])
            assert isinstance(token, mlir.Token) and token.type == mlir.token_type()
    assert mlir.Mesh is lx.sharding.Mesh
