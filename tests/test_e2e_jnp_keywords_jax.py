"""The keyword parameters JAX 0.10.2's jnp functions have: ``device=`` on the
creation functions, ``out_sharding=`` on ``array``/``asarray``/``repeat``/
``bincount``/``percentile``/``.at[].get``, and ``argsort(dtype=)``,
``cov``/``corrcoef(dtype=)``, ``digitize(method=)``, ``var``/``std(mean=)``,
``take_along_axis(wrap_negative_indices=)``, ``isposinf``/``isneginf``/
``modf(out=)``, ``ravel_multi_index(dtype=)``, ``matrix_rank(hermitian=)``,
``einsum(_dot_general=)``. Every expected value, dtype, weak type, type and
error text is JAX 0.10.2's, recorded from it (lamina's errors add which
function's argument it was)."""

import re

import lamina as lx
import lamina.lax as lax
import lamina.numpy as jnp
import numpy as np
import pytest
from lamina.sharding import NamedSharding, SingleDeviceSharding
from lamina.sharding import PartitionSpec as P

X = [[3., 1, 2, 5], [4, 0, 2, 1]]


def check(out, dtype, values, weak=False):
    assert str(out.dtype) == dtype
    assert lx.typeof(out).weak_type is weak
    np.testing.assert_allclose(np.asarray(out).ravel(), values, rtol=1e-3)


@pytest.fixture
def mesh(devices8):
    return lx.make_mesh((4, 2), ("x", "y"))


# --- device= -------------------------------------------------------------------------------
CREATORS = {
    "zeros": (lambda d: jnp.zeros(8, device=d), "float32", [0.] * 8, False),
    "ones": (lambda d: jnp.ones((8, 2), "int32", device=d), "int32", [1] * 16, False),
    "empty": (lambda d: jnp.empty(8, device=d), "float32", [0.] * 8, False),
    "full": (lambda d: jnp.full(8, 3, device=d), "int32", [3] * 8, False),
    "full_arr": (lambda d: jnp.full((8, 2), jnp.arange(2), device=d), "int32", [0, 1] * 8,
                 False),
    "zeros_like": (lambda d: jnp.zeros_like(jnp.arange(8), device=d), "int32", [0] * 8, False),
    "ones_like": (lambda d: jnp.ones_like(jnp.arange(8.), device=d), "float32", [1.] * 8,
                  False),
    "empty_like": (lambda d: jnp.empty_like(jnp.arange(8), device=d), "int32", [0] * 8, False),
    "full_like": (lambda d: jnp.full_like(jnp.arange(8), 2.5, device=d), "int32", [2] * 8,
                  False),
    "full_like_weak": (lambda d: jnp.full_like(2.0, 3, device=d), "float32", [3.], False),
    "arange": (lambda d: jnp.arange(8, device=d), "int32", list(range(8)), False),
    "arange_f": (lambda d: jnp.arange(0, 4, 0.5, device=d), "float32",
                 [0, .5, 1, 1.5, 2, 2.5, 3, 3.5], False),
    "linspace": (lambda d: jnp.linspace(0, 1, 8, device=d), "float32",
                 [i / 7 for i in range(8)], False),
    "eye": (lambda d: jnp.eye(8, device=d), "float32", np.eye(8).ravel(), False),
    "array": (lambda d: jnp.array(np.arange(8), device=d), "int32", list(range(8)), False),
    "array_scalar": (lambda d: jnp.array(3, device=d), "int32", [3], True),
    "array_list": (lambda d: jnp.array([1., 2, 3, 4, 5, 6, 7, 8], device=d), "float32",
                   list(range(1, 9)), False),
    "asarray": (lambda d: jnp.asarray(np.arange(8.), device=d), "float32", list(range(8)),
                False),
    "asarray_array": (lambda d: jnp.asarray(jnp.arange(8.), device=d), "float32",
                      list(range(8)), False),
}


@pytest.mark.parametrize("name", sorted(CREATORS))
def test_device_places_on_a_device(devices8, name):
    fn, dtype, values, weak = CREATORS[name]
    dev = lx.devices()[1]
    for where in (dev, SingleDeviceSharding(dev)):
        out = fn(where)
        check(out, dtype, values, weak)
        assert out.devices() == {dev}
        assert out.committed


@pytest.mark.parametrize("name", ["zeros", "ones", "full", "zeros_like", "ones_like",
                                  "empty_like", "full_like", "arange", "eye", "linspace"])
def test_device_takes_a_named_sharding(mesh, name):
    fn, dtype, values, weak = CREATORS[name]
    out = fn(NamedSharding(mesh, P("x")))
    check(out, dtype, values, weak)
    assert tuple(out.sharding.spec)[:1] == ("x",)
    assert len(out.devices()) == 8


@pytest.mark.parametrize("name", ["zeros", "ones_like", "full", "eye"])
def test_device_is_ignored_under_jit_by_the_full_family(devices8, name):
    fn, dtype, values, weak = CREATORS[name]
    out = lx.jit(lambda: fn(lx.devices()[1]))()
    assert out.devices() == {lx.devices()[0]}
    assert not out.committed


@pytest.mark.parametrize("call", [
    lambda d, s: jnp.zeros(8, device=d, out_sharding=s),
    lambda d, s: jnp.arange(8, device=d, out_sharding=s),
    lambda d, s: jnp.array(np.ones(8), device=d, out_sharding=s),
    lambda d, s: jnp.asarray(np.ones(8), device=d, out_sharding=s),
])
def test_device_and_out_sharding_together_is_an_error(mesh, call):
    with pytest.raises(ValueError, match=re.escape(
            "Only one of `device` or `out_sharding` can be set. Got device=")):
        call(lx.devices()[1], NamedSharding(mesh, P("x")))


# --- out_sharding= ---------------------------------------------------------------------------
def typed(fn, *args):
    """``typeof`` of ``fn``'s result and its spec, eagerly and under jit."""
    out = fn(*args)
    jitted = lx.jit(fn)(*args)
    return (str(lx.typeof(out)), tuple(out.sharding.spec),
            str(lx.typeof(jitted)), tuple(jitted.sharding.spec))


@pytest.mark.parametrize("fn, expected, spec", [
    (lambda: jnp.array(np.ones((8, 4)), out_sharding=P("x")), "float32[8@x,4]", ("x", None)),
    (lambda: jnp.asarray(jnp.ones((8, 4)), out_sharding=P(None, "y")), "float32[8,4@y]",
     (None, "y")),
    (lambda: jnp.repeat(jnp.ones((8, 4)), 2, axis=1, out_sharding=P("x")), "float32[8@x,8]",
     ("x", None)),
    (lambda: jnp.repeat(jnp.arange(4), 2, out_sharding=P("x")), "int32[8@x]", ("x",)),
    (lambda: jnp.ones((8, 4)).at[jnp.array([0, 1])].get(out_sharding=P(None, "y")),
     "float32[2,4@y]", (None, "y")),
    (lambda: jnp.percentile(jnp.arange(32.).reshape(8, 4), 50, axis=1, out_sharding=P("x")),
     "float32[8@x]", ("x",)),
    (lambda: jnp.percentile(jnp.arange(32.).reshape(8, 4), jnp.array([10., 20, 30, 40]),
                            axis=1, out_sharding=P("x", "y")), "float32[4@x,8@y]",
     ("x", "y")),
])
def test_out_sharding_lays_out_the_result(mesh, fn, expected, spec):
    with lx.set_mesh(mesh):
        assert typed(fn) == (expected, spec, expected, spec)


def test_out_sharding_values(mesh):
    with lx.set_mesh(mesh):
        got = jnp.arange(8.).at[jnp.array([0, 9, 3, 4])].get(mode="fill", fill_value=-1,
                                                             out_sharding=P("x"))
        assert str(lx.typeof(got)) == "float32[4@x]"
        np.testing.assert_array_equal(got, [0., -1, 3, 4])
        pct = jnp.percentile(jnp.arange(32.).reshape(8, 4), jnp.array([10., 20, 30, 40]),
                             axis=1, out_sharding=P("x", "y"))
        np.testing.assert_allclose(np.asarray(pct)[0, :4], [0.3, 4.3, 8.3, 12.3], rtol=1e-6)
        counts = jnp.bincount(jnp.array([0, 1, 1, 3]), out_sharding=P())
        assert str(lx.typeof(counts)) == "int32[4]"
        np.testing.assert_array_equal(counts, [1, 2, 0, 1])


def test_out_sharding_errors(mesh):
    with lx.set_mesh(mesh):
        with pytest.raises(ValueError, match=re.escape(
                "Sharding spec ('x',) implies that array axis 0 is partitioned 4 times, but "
                "does not evenly divide the dimension size 6.")):
            jnp.array(np.ones((6, 4)), out_sharding=P("x"))
        with pytest.raises(TypeError, match=re.escape(
                "out_sharding passed to `jnp.bincount` can only be fully replicated or fully "
                "unreduced along all mesh axes")):
            jnp.bincount(jnp.array([0, 1, 1, 3]), length=8, out_sharding=P("x"))
    with pytest.raises(ValueError, match=re.escape(
            "Using PartitionSpec when you are not under a mesh context is not allowed.")):
        jnp.array(np.ones(8), out_sharding=P("x"))


# --- the others ------------------------------------------------------------------------------
@pytest.mark.parametrize("fn, dtype, values", [
    (lambda: jnp.argsort(jnp.array(X), dtype=jnp.int16), "int16", [1, 2, 0, 3, 1, 3, 2, 0]),
    (lambda: jnp.argsort(jnp.array(X), axis=None, dtype="uint8"), "uint8",
     [5, 1, 7, 2, 6, 0, 4, 3]),
    (lambda: jnp.argsort(jnp.array(X), dtype=jnp.float32), "float32",
     [1, 2, 0, 3, 1, 3, 2, 0]),
    (lambda: jnp.argsort(jnp.array(X), descending=True, dtype=jnp.int8), "int8",
     [3, 0, 2, 1, 0, 2, 3, 1]),
    (lambda: jnp.cov(jnp.array(X), dtype=jnp.float16), "float16",
     [2.91602, 0.58301, 0.58301, 2.91602]),
    (lambda: jnp.cov(jnp.array(X), dtype=jnp.complex64), "complex64",
     [2.91667, 0.58333, 0.58333, 2.91667]),
    (lambda: jnp.cov(jnp.array([[1, 2, 4], [3, 1, 0]]), dtype="float16"), "float16",
     [2.33398, -2.16602, -2.16602, 2.33398]),
    (lambda: jnp.cov(jnp.array(X[0]), jnp.array(X[1]), dtype=jnp.float16), "float16",
     [2.91602, 0.58301, 0.58301, 2.91602]),
    (lambda: jnp.corrcoef(jnp.array(X), dtype=jnp.float16), "float16",
     [0.99951, 0.19983, 0.19983, 0.99951]),
    (lambda: jnp.corrcoef(jnp.array(X), dtype=jnp.complex64), "complex64", [1, .2, .2, 1]),
    (lambda: jnp.digitize(jnp.array(X), jnp.array([0., 1, 2.5, 4]), method="scan"), "int32",
     [3, 2, 2, 4, 4, 1, 2, 2]),
    (lambda: jnp.digitize(jnp.array(X), jnp.array([0., 1, 2.5, 4]), right=True,
                          method="sort"), "int32", [3, 1, 2, 4, 3, 0, 2, 1]),
    (lambda: jnp.digitize(jnp.array(X), jnp.array([0., 1, 2.5, 4]), method="compare_all"),
     "int32", [3, 2, 2, 4, 4, 1, 2, 2]),
    (lambda: jnp.var(jnp.array(X), axis=1, mean=jnp.array([[1.], [2.]])), "float32",
     [5.25, 2.25]),
    (lambda: jnp.var(jnp.array(X), axis=1, keepdims=True,
                     mean=jnp.mean(jnp.array(X), 1, keepdims=True)), "float32",
     [2.1875, 2.1875]),
    (lambda: jnp.var(jnp.array(X), mean=2), "float32", [2.5]),
    (lambda: jnp.var(jnp.arange(6), mean=2), "float32", [3.16667]),
    (lambda: jnp.var(jnp.array(X), axis=1, mean=jnp.ones((2, 1)), where=jnp.array(X) > 1),
     "float32", [7.0, 5.0]),
    (lambda: jnp.var(jnp.array(X).astype(jnp.complex64), mean=1j), "float32", [8.5]),
    (lambda: jnp.std(jnp.array(X), axis=1, mean=jnp.array([[1.], [2.]])), "float32",
     [5.25 ** .5, 2.25 ** .5]),
    (lambda: jnp.take_along_axis(jnp.array(X), jnp.array([[0, -1], [3, -4]])), "float32",
     [3, 5, 1, 4]),
    (lambda: jnp.take_along_axis(jnp.array(X), jnp.array([[0, -1], [3, -4]]), axis=1,
                                 wrap_negative_indices=False), "float32",
     [3, np.nan, 1, np.nan]),
    (lambda: jnp.take_along_axis(jnp.array(X), jnp.array([[0, -1], [3, -4]]), axis=1,
                                 wrap_negative_indices=True), "float32", [3, 5, 1, 4]),
    (lambda: jnp.take_along_axis(jnp.array(X), jnp.array([[0, -1], [3, -4]]), axis=1,
                                 mode="promise_in_bounds", wrap_negative_indices=True),
     "float32", [3, 5, 1, 4]),
    (lambda: jnp.take_along_axis(jnp.array(X), jnp.array([[0, -1], [3, -4]]), axis=1,
                                 mode="clip", wrap_negative_indices=False), "float32",
     [3, 3, 1, 4]),
    (lambda: jnp.take_along_axis(jnp.array(X), jnp.array([[0, -1], [3, -4]]), axis=1,
                                 mode="fill", fill_value=-9, wrap_negative_indices=False),
     "float32", [3, -9, 1, -9]),
    (lambda: jnp.take_along_axis(jnp.array(X), jnp.array([[0, -1], [3, -4]]).astype(jnp.uint8),
                                 axis=1, wrap_negative_indices=True), "float32",
     [3, np.nan, 1, np.nan]),
    (lambda: jnp.isposinf(jnp.array(X), out=None), "bool", [False] * 8),
    (lambda: jnp.ravel_multi_index((jnp.array([0, 1, 2]), jnp.array([1, 3, 0])), (3, 4)),
     "int32", [1, 7, 8]),
    (lambda: jnp.ravel_multi_index((jnp.array([0, 1, 2]), jnp.array([1, 3, 0])), (3, 4),
                                   dtype=jnp.int8), "int8", [1, 7, 8]),
    (lambda: jnp.ravel_multi_index((jnp.array([0, 1, 2]), jnp.array([1, 3, 0])), (3, 4),
                                   mode="clip", dtype="uint16"), "uint16", [1, 7, 8]),
    (lambda: jnp.ravel_multi_index((jnp.array([0, 1], jnp.int8), jnp.array([1, 2], jnp.int8)),
                                   (3, 4)), "int8", [1, 6]),
    (lambda: jnp.ravel_multi_index((1, 2), (3, 4)), "int32", [6]),
    (lambda: jnp.linalg.matrix_rank(jnp.array([[2., 1], [1, 2]]), hermitian=True), "int32",
     [2]),
    (lambda: jnp.linalg.matrix_rank(jnp.array([[1., 1], [1, 1]]), hermitian=True), "int32",
     [1]),
    (lambda: jnp.linalg.matrix_rank(jnp.array([[[1., 0], [0, -3]], [[0, 0], [0, 0.]]]),
                                    hermitian=True), "int32", [2, 0]),
    (lambda: jnp.linalg.matrix_rank(jnp.array([[2., 1j], [-1j, 2]]), hermitian=True),
     "int32", [2]),
    (lambda: jnp.linalg.matrix_rank(jnp.array([[1., 0], [0, 1e-3]]), rtol=0.01,
                                    hermitian=True), "int32", [1]),
    (lambda: jnp.einsum("ij,kj->ik", jnp.array(X), jnp.array(X),
                        _dot_general=lax.dot_general), "float32", [39, 21, 21, 21]),
])
def test_keyword_values(fn, dtype, values):
    check(fn(), dtype, values)


def test_modf_out_none():
    frac, whole = jnp.modf(jnp.array(X), out=None)
    check(frac, "float32", [0.] * 8)
    check(whole, "float32", [3, 1, 2, 5, 4, 0, 2, 1])


def test_einsum_calls_the_given_dot_general():
    calls = []

    def dot(*args, **kwargs):
        calls.append(sorted(kwargs))
        return lax.dot_general(*args, **kwargs)
    jnp.einsum("ij,kj->ik", jnp.array(X), jnp.array(X), _dot_general=dot)
    assert calls == [["preferred_element_type"]]


@pytest.mark.parametrize("call, error, text", [
    (lambda: jnp.cov(jnp.array(X), dtype=jnp.int32), ValueError,
     "cov: dtype must be a subclass of float or complex; got dtype="),
    (lambda: jnp.corrcoef(jnp.array(X), dtype=int), ValueError,
     "corrcoef: dtype must be a subclass of float or complex; got dtype=<class 'int'>"),
    (lambda: jnp.digitize(jnp.array(X), jnp.array([0., 1]), method="foo"), ValueError,
     "invalid argument method='foo', expected one of ['compare_all', 'scan', "
     "'scan_unrolled', 'sort']"),
    (lambda: jnp.var(jnp.array(X), axis=1, mean=jnp.ones(3)), TypeError,
     "sub: arrays must have the same number of dimensions, got {1, 2}"),
    (lambda: jnp.std(jnp.array(X), axis=0, mean=jnp.ones(4)), TypeError,
     "sub: arrays must have the same number of dimensions, got {1, 2}"),
    (lambda: jnp.isposinf(jnp.array(X), out=np.zeros((2, 4), bool)), NotImplementedError,
     "The 'out' argument to"),
    (lambda: jnp.isneginf(jnp.array(X), out=np.zeros((2, 4), bool)), NotImplementedError,
     "The 'out' argument to"),
    (lambda: jnp.modf(jnp.array(X), out=(np.zeros(1), np.zeros(1))), NotImplementedError,
     "The 'out' argument to"),
    (lambda: jnp.ravel_multi_index((jnp.array([0]), jnp.array([1])), (30, 40), dtype=jnp.int8),
     ValueError, "jnp.ravel_multi_index: dtype=dtype('int8') not large enough to hold "
     "flattened index for dims=(30, 40). Use the dtype argument to pass a suitable dtype "
     "(e.g. dtype=np.min_scalar_type(prod(dims)))."),
    (lambda: jnp.ravel_multi_index((jnp.array([0], jnp.int8), jnp.array([1], jnp.int8)),
                                   (300, 400)), ValueError,
     "jnp.ravel_multi_index: dtype=dtype('int8') not large enough"),
    (lambda: jnp.ravel_multi_index((jnp.array([0]), jnp.array([1])), (3, 4),
                                   dtype=jnp.float32), ValueError,
     "dtype=dtype('float32') is not an integer type."),
    (lambda: jnp.real(val=jnp.array(X)), TypeError,
     "got some positional-only arguments passed as keyword arguments: 'val'"),
    (lambda: jnp.imag(val=jnp.array(X)), TypeError,
     "got some positional-only arguments passed as keyword arguments: 'val'"),
])
def test_keyword_errors(call, error, text):
    with pytest.raises(error, match=re.escape(text)):
        call()


def test_inverted_cdf_quantiles_and_weights():
    """JAX 0.10.2's ``method='inverted_cdf'`` and its ``weights`` (values
    recorded from JAX; the data is NumPy's RandomState(0))."""
    rng = np.random.RandomState(0)
    x = rng.randn(4, 6).astype(np.float32)
    w = rng.rand(4, 6).astype(np.float32)
    w1 = rng.rand(6).astype(np.float32)
    xn = x.copy()
    xn[1, 2] = np.nan
    nan = float("nan")
    cases = [
        (lambda: jnp.quantile(x, 0.5, axis=1, method="inverted_cdf", weights=w),
         [1.764052391052246, 0.14404356479644775, 0.44386324286460876, -0.8540957570075989]),
        (lambda: jnp.quantile(x, jnp.array([0.25, 0.75]), axis=1, method="inverted_cdf",
                              weights=w1, keepdims=True),
         [[[0.978738009929657], [-0.10321885347366333], [0.3336743414402008],
           [-0.8540957570075989]],
          [[1.764052391052246], [0.9500884413719177], [0.7610377073287964],
           [0.3130677044391632]]]),
        (lambda: jnp.quantile(xn, 0.5, axis=1, method="inverted_cdf"),
         [0.978738009929657, nan, 0.3336743414402008, -0.7421650290489197]),
        (lambda: jnp.nanquantile(xn, 0.5, axis=1, method="inverted_cdf", weights=w),
         [1.764052391052246, 0.4105985164642334, 0.44386324286460876, -0.8540957570075989]),
        (lambda: jnp.nanpercentile(xn, jnp.array([10.0, 90.0]), axis=0, method="inverted_cdf"),
         [[0.3130677044391632, -0.8540957570075989, -2.5529897212982178, 0.3336743414402008,
           0.14404356479644775, -0.9772778749465942],
          [1.764052391052246, 0.40015721321105957, 0.978738009929657, 2.2408931255340576,
           1.8675580024719238, 1.4542734622955322]]),
        (lambda: jnp.quantile(x, 0.5, axis=1, method="inverted_cdf", weights=w - 0.5),
         [nan] * 4),  # a negative weight makes the slice NaN
    ]
    for make, expected in cases:
        for out in (make(), lx.jit(make)()):
            np.testing.assert_array_equal(np.asarray(out), np.asarray(expected, np.float32))
    with pytest.raises(NotImplementedError, match="linear doesn't support weights. Only method "
                                                  "'inverted_cdf' supports weights."):
        jnp.quantile(x, 0.5, axis=1, weights=w)
    with pytest.raises(ValueError, match="Weights cannot be complex types."):
        jnp.quantile(x, 0.5, axis=1, method="inverted_cdf", weights=w.astype(np.complex64))
    with pytest.raises(ValueError, match="Weights shape must match 'a' shape when axis is None."):
        jnp.quantile(x, 0.5, method="inverted_cdf", weights=w1)
    with pytest.raises(ValueError, match=r"Weights shape \(6,\) must match reduction axes \(4,\)"):
        jnp.quantile(x, 0.5, axis=0, method="inverted_cdf", weights=w1)
    with pytest.raises(ValueError, match="method can only be 'linear', 'lower', 'higher', "
                                         "'midpoint', 'nearest' or 'inverted_cdf'"):
        jnp.quantile(x, 0.5, method="foo")


def test_matrix_rank_cutoff_is_jax_s():
    """JAX 0.10.2 compares the singular values with ``rtol`` (or ``tol``)
    itself, default ``max(s) * max(M.shape) * eps``; results recorded from JAX."""
    m = np.array([[1.0, 2.0], [2.0, 4.0001], [0, 1e-3]], np.float32) * 100
    assert int(jnp.linalg.matrix_rank(m)) == 2
    assert int(jnp.linalg.matrix_rank(m, rtol=0.5)) == 1
    assert int(jnp.linalg.matrix_rank(m, tol=1e-2)) == 2
    assert jnp.linalg.matrix_rank(m, rtol=jnp.array([1e-3])).tolist() == [2]
    batch = np.stack([m, m * 0, m * 1e-6]) / 100
    assert jnp.linalg.matrix_rank(batch).tolist() == [2, 0, 2]
    assert jnp.linalg.matrix_rank(batch, rtol=jnp.array([1e-3, 1.0, 1e-9])).tolist() == [1, 0, 1]
    assert int(lx.jit(lambda a: jnp.linalg.matrix_rank(a, rtol=0.1))(m / 100)) == 1
    with pytest.raises(ValueError, match="matrix_rank: only one of tol or rtol may be "
                                         "specified."):
        jnp.linalg.matrix_rank(m, rtol=1.0, tol=1.0)


def test_cov_observation_weights():
    """``cov``'s ``fweights`` and ``aweights`` as JAX 0.10.2 (NumPy's
    normalization; values and errors recorded from JAX)."""
    rng = np.random.RandomState(1)
    x = rng.randn(3, 7).astype(np.float32)
    fw = np.array([1, 2, 0, 3, 1, 1, 2])
    aw = rng.rand(7).astype(np.float32)
    both = [[1.746705174446106, -0.981570303440094, 0.2356492578983307],
            [-0.9815702438354492, 1.5692870616912842, -0.5998607277870178],
            [0.23564930260181427, -0.5998607277870178, 0.669495701789856]]
    ddof2 = [[3.0768930912017822, -1.3779394626617432, 0.34219250082969666],
             [-1.3779394626617432, 2.1235570907592773, -0.793019711971283],
             [0.3421925902366638, -0.7930196523666382, 1.0802291631698608]]
    np.testing.assert_allclose(jnp.cov(x, fweights=fw, aweights=aw), both, rtol=2e-6)
    np.testing.assert_allclose(jnp.cov(x, fweights=-fw, aweights=aw), both, rtol=2e-6)
    np.testing.assert_allclose(jnp.cov(x, aweights=aw, ddof=2), ddof2, rtol=2e-6)
    np.testing.assert_allclose(lx.jit(lambda a, b: jnp.cov(a, aweights=b, ddof=2))(x, aw),
                               ddof2, rtol=2e-6)
    np.testing.assert_allclose(jnp.cov(x[0], aweights=aw), 2.3994810581207275, rtol=2e-6)
    with pytest.raises(TypeError, match="fweights must be integer."):
        jnp.cov(x, fweights=fw.astype(float))
    with pytest.raises(RuntimeError, match="cannot handle multidimensional fweights"):
        jnp.cov(x, fweights=np.ones((2, 7), int))
    with pytest.raises(RuntimeError, match="incompatible numbers of samples and aweights"):
        jnp.cov(x, aweights=np.ones(5))
