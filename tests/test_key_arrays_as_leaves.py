"""Typed key arrays are pytree leaves to users (as in JAX 0.10.2), while every
transformation still carries their key data.

The expected values are JAX 0.10.2's, recorded (key data, structures, paths,
dtypes); the transformation checks also compare with the same computation done
eagerly, so a key that lost its data on the way through would show.
"""

from __future__ import annotations

import numpy as np
import pytest

import lamina as lx
import lamina.numpy as jnp
from lamina import random, tree_util
from lamina.dtypes import float0
from lamina.flatten_util import ravel_pytree
from lamina.sharding import Mesh, PartitionSpec

# JAX 0.10.2: key_data(split(key(0), 4)), and a few functions of key(0)
SPLIT4 = [[1797259609, 2579123966], [928981903, 3453687069],
          [4146024105, 2718843009], [2467461003, 3840466878]]
FOLD_IN_EACH_OF_3_BY_INDEX = [[4165894930, 804218099], [3968330031, 3923691647],
                              [915694800, 1641710144]]
FOLDED_0_1_2 = [276444683, 838309524]  # fold_in(fold_in(fold_in(k, 0), 1), 2)
FOLD_IN_EACH_OF_4_BY_5 = [[1526812653, 3822367991], [3006591476, 2914868775],
                          [1198101189, 3330557710], [1244721678, 2594860169]]
NORMAL_OF_KEY0 = 1.622642159461975


def data(keys: object) -> list[object]:
    out: list[object] = random.key_data(keys).tolist()
    return out


@pytest.fixture
def tree() -> dict[str, object]:
    k = random.key(0)
    return {"k": k, "x": jnp.arange(2.0), "n": (random.split(k, 3), None)}


# --- what users see: JAX's results ----------------------------------------------------------

def test_keys_are_leaves(tree: dict[str, object]) -> None:
    leaves = lx.tree.leaves(tree)
    assert [(str(leaf.dtype), leaf.shape) for leaf in leaves] == [
        ("key<fry>", ()), ("key<fry>", (3,)), ("float32", (2,))]
    assert isinstance(leaves[0], random.PRNGKeyArray)
    assert tree_util.tree_leaves(tree) == leaves
    assert len(tree_util.default_registry.flatten(tree)[0]) == 3


def test_structure_repr_and_equality(tree: dict[str, object]) -> None:
    treedef = lx.tree.structure(tree)
    assert str(treedef) == "PyTreeDef({'k': *, 'n': (*, None), 'x': *})"
    assert (treedef.num_leaves, treedef.num_nodes) == (3, 6)
    assert lx.tree.structure({"k": random.key(0)}) == lx.tree.structure({"k": 1})
    assert lx.tree.unflatten(treedef, [1, 2, 3]) == {"k": 1, "n": (2, None), "x": 3}
    assert tree_util.treedef_children(lx.tree.structure([random.key(0)]))[0].num_nodes == 1


def test_map_hands_f_the_key_array(tree: dict[str, object]) -> None:
    dtypes = lx.tree.map(lambda leaf: str(leaf.dtype), tree)
    assert dtypes == {"k": "key<fry>", "n": ("key<fry>", None), "x": "float32"}
    both = lx.tree.map(lambda a, b: str(a.dtype) + str(b.dtype), tree, tree)
    assert both["n"] == ("key<fry>key<fry>", None)
    assert lx.tree.reduce(lambda acc, _: acc + 1, tree, 0) == 3


def test_paths_and_keystr(tree: dict[str, object]) -> None:
    pairs, _ = tree_util.tree_flatten_with_path(tree)
    assert [tree_util.keystr(p) for p, _ in pairs] == ["['k']", "['n'][0]", "['x']"]
    assert [tree_util.keystr(p) for p, _ in lx.tree.leaves_with_path(tree)] == [
        "['k']", "['n'][0]", "['x']"]
    paths = lx.tree.map_with_path(lambda p, _: tree_util.keystr(p), tree)
    assert paths == {"k": "['k']", "n": ("['n'][0]", None), "x": "['x']"}


def test_node_queries() -> None:
    k = random.key(0)
    assert tree_util.all_leaves([k, random.split(k)])
    assert not tree_util.is_tree_node(type(k))
    with pytest.raises(ValueError, match="leaf"):
        tree_util.flatten_one_level(k)
    with pytest.raises(TypeError, match="boolean"):
        lx.tree.all([k])  # JAX: "key array cannot be converted to boolean."
    transposed = lx.tree.transpose(lx.tree.structure([0, 0]), lx.tree.structure({"a": 0}),
                                   [{"a": k}, {"a": k}])
    assert str(lx.tree.structure(transposed)) == "PyTreeDef({'a': [*, *]})"
    assert str(lx.tree.structure(lx.tree.broadcast(1, [k, (k,)]))) == "PyTreeDef([*, (*,)])"


def test_ravel_pytree_refuses_keys_by_path(tree: dict[str, object]) -> None:
    # JAX: TypeError "Cannot determine dtype of key<fry>"
    with pytest.raises(TypeError, match=r"ravel_pytree: .*pytree\['k'\].*key<fry>"):
        ravel_pytree(tree)


# --- what transformations see: the key data, values as before -------------------------------

def test_jit_and_names() -> None:
    k = random.key(0)
    assert data(lx.jit(random.split, static_argnums=1)(k, 4)) == SPLIT4
    assert lx.jit(lambda t: random.normal(t["k"]))({"k": k}) == np.float32(NORMAL_OF_KEY0)
    for _ in range(3):  # the cached (C++) path too
        assert data(lx.jit(lambda t: t)(k)) == [0, 0]
    f = lambda k, x: (random.normal(k, (2,)) + x, k)  # noqa: E731
    text = lx.jit(f).lower(k, 1.0).as_text()
    # JAX's names: the key by its own path, not its data's
    assert 'jax.arg_info = "k"' in text and 'jax.result_info = "result[1]"' in text
    assert lx.make_jaxpr(f)(k, 1.0).jaxpr.debug_info.arg_names == ("k", "x")


def test_vmap_with_axis_prefixes() -> None:
    keys = random.split(random.key(0), 3)
    folded = lx.vmap(random.fold_in)(keys, jnp.arange(3))
    assert data(folded) == FOLD_IN_EACH_OF_3_BY_INDEX
    by_prefix = lx.vmap(lambda t: random.fold_in(t["k"], 1), in_axes=({"k": 0},))({"k": keys})
    assert data(by_prefix) == [data(random.fold_in(k, 1)) for k in keys]
    out = lx.vmap(lambda t: {"a": random.split(t)}, out_axes={"a": 1})(keys[:2])["a"]
    assert out.shape == (2, 2)
    assert data(out[:, 0]) == data(random.split(keys[0]))


def test_control_flow_carries() -> None:
    k = random.key(0)
    assert data(lx.lax.fori_loop(0, 3, lambda i, c: random.fold_in(c, i), k)) == FOLDED_0_1_2
    final, _ = lx.lax.while_loop(lambda c: c[1] < 3,
                                 lambda c: (random.fold_in(c[0], c[1]), c[1] + 1), (k, 0))
    assert data(final) == FOLDED_0_1_2
    carry, seen = lx.lax.scan(lambda c, _: (random.fold_in(c, 1), c), k, None, length=2)
    assert data(carry) == data(random.fold_in(random.fold_in(k, 1), 1))
    assert data(seen) == [[0, 0], data(random.fold_in(k, 1))]
    picked = lx.lax.cond(True, lambda c: random.fold_in(c, 7), lambda c: c, k)
    assert data(picked) == data(random.fold_in(k, 7))
    assert data(lx.checkpoint(lambda c: random.fold_in(c, 3))(k)) == SPLIT4[3]


def test_pmap_shard_map_device_put() -> None:
    if len(lx.devices()) < 4:
        pytest.skip("needs 4 devices")
    keys = random.split(random.key(0), 4)
    assert data(lx.pmap(lambda t: random.fold_in(t, 5))(keys)) == FOLD_IN_EACH_OF_4_BY_5
    mesh = Mesh(np.array(lx.devices()[:4]), ("i",))
    mapped = lx.shard_map(lambda t: random.fold_in(t[0], 5)[None], mesh=mesh,
                          in_specs=PartitionSpec("i"), out_specs=PartitionSpec("i"))(keys)
    assert data(mapped) == FOLD_IN_EACH_OF_4_BY_5
    placed = lx.device_put({"k": keys})["k"]
    assert isinstance(placed, random.PRNGKeyArray) and data(placed) == SPLIT4
    shape = lx.eval_shape(random.split, random.key(0))
    assert (shape.shape, str(shape.dtype)) == ((2,), "key<fry>")


def test_keys_are_not_differentiable() -> None:
    k = random.key(0)
    f = lambda x, k: (x * random.normal(k), k)  # noqa: E731
    g = lx.grad(lambda x, k: f(x, k)[0], argnums=(0, 1), allow_int=True)(2.0, k)
    assert g[0] == np.float32(NORMAL_OF_KEY0)
    assert g[1].dtype == float0 and g[1].shape == ()  # JAX: float0 of the key's shape
    with pytest.raises(TypeError, match=r"got key<fry> \(argument k\)"):
        lx.grad(lambda x, k: f(x, k)[0], argnums=1)(2.0, k)
    zero = np.zeros((), float0)
    (_, k_out), (t_x, t_k) = lx.jvp(f, (2.0, k), (1.0, zero))
    assert data(k_out) == [0, 0] and t_x == np.float32(NORMAL_OF_KEY0)
    assert t_k.dtype == float0 and t_k.shape == ()
    _, pullback = lx.vjp(f, 2.0, k)
    ct_x, ct_k = pullback((1.0, zero))
    assert ct_x == np.float32(NORMAL_OF_KEY0) and ct_k.dtype == float0 and ct_k.shape == ()
    _, f_jvp = lx.linearize(f, 2.0, k)
    assert f_jvp(1.0, zero)[1].dtype == float0

    @lx.custom_vjp
    def h(x: object, k: object) -> object:
        return x * random.normal(k)

    h.defvjp(lambda x, k: (h(x, k), k), lambda k, g: (g * random.normal(k), zero))
    assert lx.grad(h)(2.0, k) == np.float32(NORMAL_OF_KEY0)
