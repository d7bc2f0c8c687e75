"""jit with shardings over 8 CPU devices: same values as unsharded, the
requested shardings on the outputs, XLA's choice read back, constraints, and
errors that name the arguments."""

from __future__ import annotations

import re
from typing import Any

import numpy as np
import pytest

import lamina_interpreters_pxla as px
import lamina_sharded_jit as sj
from lamina_interpreters_pxla import Mesh, NamedSharding
from lamina_interpreters_pxla import PartitionSpec as P
from lamina_tracing_core import api, lax

X = np.arange(64, dtype=np.float32).reshape(8, 8)


def step(w: Any, x: Any) -> Any:
    return {"y": lax.tanh(x @ w), "s": (x * 2).sum()}


def _same(a: Any, b: Any) -> None:
    for k in a:
        np.testing.assert_allclose(np.asarray(a[k]), np.asarray(b[k]), rtol=1e-5, atol=1e-5)


def test_mesh_8_in_and_out_shardings(devices8: list[Any]) -> None:
    mesh = Mesh(np.array(devices8), ("x",))
    rows, rep = NamedSharding(mesh, P("x")), NamedSharding(mesh, P())
    w = X / 100
    expected = sj.jit(step)(w, X)
    f = sj.jit(step, in_shardings=(rep, rows), out_shardings={"y": rows, "s": rep})
    out = f(w, X)
    _same(out, expected)
    assert out["y"].sharding == rows and out["s"].sharding == rep
    assert len(out["y"].addressable_shards) == 8
    assert out["y"].addressable_shards[0].data.shape == (1, 8)
    again = f(w, X)  # the cached path gives the same
    _same(again, expected)


def test_mesh_2x4_and_xla_chosen_output_shardings(devices8: list[Any]) -> None:
    mesh = Mesh(np.array(devices8).reshape(2, 4), ("a", "b"))
    s = NamedSharding(mesh, P("a", "b"))
    f = sj.jit(lambda x: (x * 2, x.sum()), in_shardings=s)
    big, total = f(X)
    np.testing.assert_allclose(np.asarray(big), X * 2)
    np.testing.assert_allclose(float(total), X.sum())
    assert big.sharding == s  # what XLA chose, as a NamedSharding over the mesh
    assert total.sharding == NamedSharding(mesh, P())
    text = f.lower(X).as_text()
    assert 'sdy.mesh @mesh = <["a"=2, "b"=4]>' in text
    assert '#sdy.sharding<@mesh, [{"a"}, {"b"}]>' in text


def test_committed_sharded_argument_decides_placement(devices8: list[Any]) -> None:
    mesh = Mesh(np.array(devices8), ("x",))
    xs = px.device_put(X, NamedSharding(mesh, P("x")))
    out = sj.jit(lambda x, y: x + y)(xs, np.ones((8, 8), np.float32))
    np.testing.assert_allclose(np.asarray(out), X + 1)
    assert out.sharding.num_devices == 8 and out.committed


def test_bare_partition_spec_inside_mesh(devices8: list[Any]) -> None:
    mesh = Mesh(np.array(devices8), ("x",))
    f = sj.jit(lambda x: x * 3, in_shardings=P("x"), out_shardings=P())
    with pytest.raises(Exception, match="without a mesh"):
        f(X)
    with mesh:
        out = f(X)
    assert out.sharding == NamedSharding(mesh, P())
    with mesh:
        g = sj.jit(lambda x: x * 3, out_shardings=P("x"))  # resolved now
    assert g(X).sharding == NamedSharding(mesh, P("x"))


def test_with_sharding_constraint(devices8: list[Any]) -> None:
    mesh = Mesh(np.array(devices8), ("x",))
    s = NamedSharding(mesh, P(None, "x"))
    f = sj.jit(lambda x: sj.with_sharding_constraint(x * 2, s) + 1)
    np.testing.assert_allclose(np.asarray(f(X)), X * 2 + 1)
    text = f.lower(X).as_text()
    assert re.search(r'sdy\.sharding_constraint %\d+ <@mesh, \[\{\}, \{"x"\}\]>', text)
    # linear: under grad the cotangent gets the constraint too
    g = api.grad(lambda x: sj.with_sharding_constraint(x * x, s).sum())
    np.testing.assert_allclose(np.asarray(sj.jit(g)(X)), 2 * X)
    jaxpr = api.make_jaxpr(g)(X)
    assert sum(e.primitive is sj.sharding_constraint_p for e in jaxpr.jaxpr.eqns) == 2
    # vmap adds the batch dimension unsplit
    v = api.make_jaxpr(api.vmap(lambda x: sj.with_sharding_constraint(x, s)))(np.stack([X, X]))
    assert v.jaxpr.eqns[0].params["sharding"].spec == P(None, None, "x")
    # eagerly it is a device_put
    eager = sj.with_sharding_constraint(X, s)
    assert eager.sharding == s
    with pytest.raises(Exception, match=r"argument x\['a'\]"):
        sj.with_sharding_constraint({"a": np.ones(3, np.float32)}, NamedSharding(mesh, P("x")))


def test_nested_jit_shardings_become_constraints(devices8: list[Any]) -> None:
    mesh = Mesh(np.array(devices8), ("x",))
    rows = NamedSharding(mesh, P("x"))
    inner = sj.jit(lambda y: y * 2, out_shardings=rows)
    out = sj.jit(lambda x: inner(x) + 1)(X)
    np.testing.assert_allclose(np.asarray(out), X * 2 + 1)
    text = sj.jit(lambda x: inner(x) + 1).lower(X).as_text()
    assert "mhlo.num_partitions = 8" in text and "sdy.sharding_constraint" in text


def test_committed_to_different_devices_names_both_arguments() -> None:
    devices = px.devices()
    if len(devices) < 3:
        pytest.skip("needs 3 devices")
    a = px.device_put(np.ones(3, np.float32), devices[1])
    b = px.device_put(np.ones(3, np.float32), devices[2])
    with pytest.raises(ValueError, match=r"incompatible devices.*argument p of <lambda> with "
                       r"shape float32\[3\].*\[1\].*argument q of <lambda>.*\[2\]"):
        sj.jit(lambda p, q: p + q)(a, b)
    out = sj.jit(lambda p: p * 2)(a)
    assert out.sharding == px.SingleDeviceSharding(devices[1]) and out.committed


def test_sharding_mismatch_with_committed_argument(devices8: list[Any]) -> None:
    mesh = Mesh(np.array(devices8), ("x",))
    rows = NamedSharding(mesh, P("x"))
    a = px.device_put(X, NamedSharding(mesh, P()))
    with pytest.raises(ValueError, match="(?s)does not match the sharding.*argument x of type"):
        sj.jit(lambda x: x, in_shardings=rows)(a)
    uncommitted = px.device_put(X)
    assert sj.jit(lambda x: x, in_shardings=rows)(uncommitted).sharding == rows


def test_in_shardings_errors(devices8: list[Any]) -> None:
    mesh = Mesh(np.array(devices8), ("x",))
    rows = NamedSharding(mesh, P("x"))
    with pytest.raises(ValueError, match="wrong length: got a tuple or list of length 3 for an "
                       "args tuple of length 2"):
        sj.jit(lambda x, y: x, in_shardings=(rows, rows, rows))(X, X)
    with pytest.raises(ValueError, match="does not support kwargs when in_shardings"):
        sj.jit(lambda x, y: x, in_shardings=(rows,))(X, y=X)
    with pytest.raises(Exception, match=r"argument y\['v'\] of type f32\[3\]"):
        sj.jit(lambda x, y: x, in_shardings=rows)(X, {"v": np.ones(3, np.float32)})
    with pytest.raises(TypeError, match="not a valid sharding"):
        sj.jit(lambda x: x, in_shardings="x")


def test_eval_shape_reports_known_shardings(devices8: list[Any]) -> None:
    mesh = Mesh(np.array(devices8), ("x",))
    rows = NamedSharding(mesh, P("x"))
    out = sj.jit(lambda x: (x, x.sum()), out_shardings=(rows, None)).eval_shape(X)
    assert out[0].sharding == rows and out[1].sharding is None
    assert out[0].shape == (8, 8)
