"""api_util: debug info (checked against JAX 0.10.2), flattening, static args,
axis specs, argnums/argnames resolution and hashability helpers.

The expected argument names and result paths below were produced by JAX 0.10.2
(``jax.make_jaxpr(f)(...).jaxpr.debug_info`` / ``jax._src.api_util.debug_info``)
for the same functions and calls.
"""

import dataclasses
import functools
import inspect
from collections.abc import Callable
from typing import Any, NamedTuple

import pytest

from lamina_linear_util import (
    HashableFunction,
    NonHashableStaticArgumentError,
    StrictHashable,
    Unhashable,
    argnames_partial,
    argnames_partial_except,
    argnums_partial,
    argnums_partial_except,
    as_hashable_function,
    check_callable,
    debug_info,
    ensure_index_tuple,
    ensure_str_tuple,
    flatten_axes,
    flatten_fun,
    flatten_fun_nokwargs,
    flatten_fun_nokwargs2,
    fun_name,
    fun_sourceinfo,
    hashable_partial,
    infer_argnums_and_argnames,
    register_dataclass,
    register_pytree_node,
    resolve_argnums,
    resolve_argnums_and_argnames,
    result_paths,
    tree_flatten,
    tree_structure,
    validate_tracing_debug_info,
    wrap_init,
)

THIS_FILE = __file__


class P(NamedTuple):
    u: Any
    v: Any


@register_dataclass
@dataclasses.dataclass
class D:
    a: Any
    b: Any


class N:
    def __init__(self, a: Any, b: Any) -> None:
        self.a, self.b = a, b


register_pytree_node(N, lambda n: ((n.a, n.b), None), lambda _, c: N(*c))


def f1(x, y, *args, z, **kwargs):  # type: ignore[no-untyped-def]
    return x


def f2(x, y):  # type: ignore[no-untyped-def]
    return x


def f3(a, *args):  # type: ignore[no-untyped-def]
    return a


def f4(x, y=3.0, *, z=2.0, **kw):  # type: ignore[no-untyped-def]
    return x


def g(a, b, /, c, *rest, d, e=1, **extra):  # type: ignore[no-untyped-def]
    return a


class C:
    def __call__(self, p, q):  # type: ignore[no-untyped-def]
        return p

    def m(self, r):  # type: ignore[no-untyped-def]
        return r


def names(fun: Callable[..., Any], *args: Any, static_argnums: tuple[int, ...] = (),
          static_argnames: tuple[str, ...] = (), **kwargs: Any) -> tuple[str | None, ...]:
    dbg = debug_info("jit", fun, args, kwargs, static_argnums=static_argnums,
                     static_argnames=static_argnames)
    validate_tracing_debug_info(dbg, num_args=len(tree_flatten((args, kwargs))[0]) - len(
        static_argnums) - len(static_argnames))
    return dbg.arg_names


# -- debug_info: JAX 0.10.2's names ------------------------------------------------------

JAX_ARG_NAMES: list[tuple[str, Callable[[], tuple[str | None, ...]], tuple[str, ...]]] = [
    ("varargs and kwargs",
     lambda: names(f1, 1.0, {"hi": 2.0}, 3.0, 4.0, z=5.0, w=6.0),
     ("x", "y['hi']", "args[0]", "args[1]", "kwargs['w']", "z")),
    ("all by keyword", lambda: names(f2, y=2.0, x=1.0), ("x", "y")),
    ("mixed", lambda: names(f2, 1.0, y=[2.0, 3.0]), ("x", "y[0]", "y[1]")),
    ("namedtuple and dict", lambda: names(f2, P(1.0, (2.0, 3.0)), [{"b": 1.0, "a": 2.0}]),
     ("x.u", "x.v[0]", "x.v[1]", "y[0]['a']", "y[0]['b']")),
    ("static positional", lambda: names(f2, 1.0, 2.0, static_argnums=(0,)), ("y",)),
    ("static in *args keeps numbering",
     lambda: names(f3, 1.0, 2.0, 3.0, 4.0, static_argnums=(2,)),
     ("a", "args[0]", "args[2]")),
    ("None leaves vanish", lambda: names(f3, None, (None, 1.0), 2.0),
     ("args[0][1]", "args[1]")),
    ("lambda", lambda: names(lambda *a, **k: 0, 1.0, (2.0, 3.0)), ("a[0]", "a[1][0]", "a[1][1]")),
    ("builtin", lambda: names(max, 1.0, 2.0), ("args[0]", "args[1]")),
    ("call does not fit", lambda: names(f2, 1.0, 2.0, 3.0, q=4.0),
     ("args[0]", "args[1]", "args[2]", "kwargs['q']")),
    ("partial", lambda: names(functools.partial(f2, 1.0), 2.0), ("y",)),
    ("partial with keyword", lambda: names(functools.partial(f2, y=1.0), 2.0), ("x",)),
    ("keyword-only and **kw", lambda: names(f4, 1.0, z={"a": (1.0, 2.0)}, b=8.0),
     ("x", "kw['b']", "z['a'][0]", "z['a'][1]")),
    ("static names", lambda: names(f4, 1.0, 2.0, z=3.0, b=4.0, static_argnames=("z", "b")),
     ("x", "y")),
    ("callable object", lambda: names(C(), 1.0, 2.0), ("p", "q")),
    ("bound method", lambda: names(C().m, {"z": 1.0}), ("r['z']",)),
    ("dataclass", lambda: names(f2, D(1.0, (2.0, 3.0)), 0.0), ("x.a", "x.b[0]", "x.b[1]", "y")),
    ("custom node without keys", lambda: names(f2, N(1.0, 2.0), 0.0), ("x[0]", "x[1]", "y")),
    ("defaults are not arguments", lambda: names(f4, 1.0), ("x",)),
    ("positional passed by keyword, static",
     lambda: names(f2, 1.0, y=2.0, static_argnames=("y",)), ("x",)),
    ("negative static argnum", lambda: names(f3, 1.0, 2.0, 3.0, static_argnums=(-1,)),
     ("a", "args[0]")),
    ("every parameter kind",
     lambda: names(g, 1.0, [2.0], 3.0, 4.0, (5.0, 6.0), d={"x": 7.0}, zz=8.0, aa=9.0),
     ("a", "b[0]", "c", "rest[0]", "rest[1][0]", "rest[1][1]", "extra['aa']", "d['x']",
      "extra['zz']")),
    ("every parameter kind, static",
     lambda: names(g, 1.0, 2.0, 3.0, 4.0, 5.0, 6.0, d=7.0, static_argnums=(1, 4)),
     ("a", "c", "rest[0]", "rest[2]", "d")),
    ("int dict keys", lambda: names(f2, {1: 1.0, 0: 2.0}, {"b": {"c": 1.0}, "a": [1.0, {"z": 2.0}]}),
     ("x[0]", "x[1]", "y['a'][0]", "y['a'][1]['z']", "y['b']['c']")),
]


@pytest.mark.parametrize("label, compute, expected", JAX_ARG_NAMES,
                         ids=[case[0] for case in JAX_ARG_NAMES])
def test_arg_names_match_jax(label: str, compute: Callable[[], tuple[str, ...]],
                             expected: tuple[str, ...]) -> None:
    assert compute() == expected


def test_keyword_named_like_the_var_keyword_parameter() -> None:
    # JAX 0.10 names this leaf 'kw' (the whole dict); lamina names the leaf itself.
    assert names(f4, 1.0, kw=7.0, b=8.0) == ("x", "kw['b']", "kw['kw']")
    assert names(lambda *a, **k: 0, 1.0, k={"q": 1.0}) == ("a[0]", "k['k']['q']")


def test_debug_info_record() -> None:
    dbg = debug_info("pmap", f2, (1.0, 2.0), {})
    assert dbg.traced_for == "pmap"
    assert dbg.func_src_info == f"f2 at {THIS_FILE}:{f2.__code__.co_firstlineno}"
    assert dbg.func_name == "f2"
    assert dbg.result_paths is None
    assert debug_info("jit", max, (1, 2), {}).func_src_info == "max"
    assert debug_info("jit", f2, (1, 2), {}, sourceinfo="custom").func_src_info == "custom"


def test_debug_info_static_argnum_out_of_range() -> None:
    assert debug_info("jit", f3, (1.0, 2.0), {}, static_argnums=(5,)).arg_names == \
        ("a", "args[0]")
    with pytest.raises(ValueError, match="greater than or equal to -len"):
        debug_info("jit", f3, (1.0, 2.0), {}, static_argnums=(-5,))


# -- result paths: JAX 0.10.2's paths ---------------------------------------------------------

JAX_RESULT_PATHS: list[tuple[Callable[[Any], Any], tuple[str, ...]]] = [
    (lambda x: {"b": [x, x], "a": x}, ("result['a']", "result['b'][0]", "result['b'][1]")),
    (lambda x: x, ("result",)),
    (lambda x: (x, (x, {"q": x})), ("result[0]", "result[1][0]", "result[1][1]['q']")),
    (lambda x: P(x, [x]), ("result.u", "result.v[0]")),
    (lambda x: N(x, x), ("result[0]", "result[1]")),
    (lambda x: D(x, (x,)), ("result.a", "result.b[0]")),
    (lambda x: (x, None, x), ("result[0]", "result[2]")),
    (lambda x: None, ()),
]


@pytest.mark.parametrize("fun, expected", JAX_RESULT_PATHS)
def test_result_paths_match_jax(fun: Callable[[Any], Any], expected: tuple[str, ...]) -> None:
    dbg = debug_info("jit", fun, (1.0,), {})
    wf, paths = result_paths(wrap_init(fun, debug_info=dbg))
    assert wf.debug_info is not None and wf.debug_info.has_pending_result_paths
    wf.call_wrapped(1.0)
    assert paths() == expected
    resolved = wf.debug_info.resolve_result_paths()
    assert resolved.result_paths == expected
    validate_tracing_debug_info(resolved, num_args=1, num_results=len(expected))


def test_full_final_style_pipeline() -> None:
    def f(x, y, *args, z, **kwargs):  # type: ignore[no-untyped-def]
        return {"b": [x, y["hi"]], "a": z}

    args, kwargs = (1.0, {"hi": 2.0}, 3.0, 4.0), {"z": 5.0, "w": 6.0}
    flat, in_tree = tree_flatten((args, kwargs))
    wf = wrap_init(f, debug_info=debug_info("pmap", f, args, kwargs))
    wf, _ = result_paths(wf)
    wf, out_tree = flatten_fun(wf, in_tree)
    assert wf.call_wrapped(*flat) == [5.0, 1.0, 2.0]
    assert out_tree() == tree_structure({"a": 0, "b": [0, 0]})
    assert wf.debug_info is not None
    dbg = wf.debug_info.resolve_result_paths()
    assert dbg.arg_names == ("x", "y['hi']", "args[0]", "args[1]", "kwargs['w']", "z")
    assert dbg.result_paths == ("result['a']", "result['b'][0]", "result['b'][1]")


# -- fun_sourceinfo / fun_name -------------------------------------------------------------

def _line(f: Any) -> int:
    return int(inspect.unwrap(f).__code__.co_firstlineno)


def decorated(f: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(f)
    def wrapper(*a: Any, **k: Any) -> Any:
        return f(*a, **k)
    return wrapper


@decorated
def wrapped_fn(x: float) -> float:
    return x


def test_fun_sourceinfo() -> None:
    lam = lambda x: x
    here = THIS_FILE
    assert fun_sourceinfo(f2) == f"f2 at {here}:{_line(f2)}"
    assert fun_sourceinfo(lam) == f"<lambda> at {here}:{_line(lam)}"
    assert fun_sourceinfo(functools.partial(functools.partial(f2, 1), 2)) == \
        f"f2 at {here}:{_line(f2)}"
    assert fun_sourceinfo(C().m) == f"m at {here}:{_line(C.m)}"
    assert fun_sourceinfo(C()) == f"C at {here}:{_line(C.__call__)}"
    assert fun_sourceinfo(wrapped_fn) == f"wrapped_fn at {here}:{_line(wrapped_fn)}"
    assert fun_sourceinfo(max) is None
    assert fun_sourceinfo(int) is None
    assert fun_sourceinfo(functools.partial(max, 1)) is None


def test_fun_name() -> None:
    assert fun_name(f2) == "f2"
    assert fun_name(lambda: 0) == "<lambda>"
    assert fun_name(functools.partial(f2, 1)) == "f2"
    assert fun_name(C()) == "C"
    assert fun_name(C().m) == "m"
    assert fun_name(max) == "max"
    assert fun_name(wrapped_fn) == "wrapped_fn"


# -- flattening transformations ------------------------------------------------------------

def test_flatten_fun_nokwargs_and_aux() -> None:
    def f(a: Any, b: Any) -> Any:
        return (a["x"] + b, [b])

    args = ({"x": 1}, 2)
    flat, in_tree = tree_flatten(args)
    wf, out_tree = flatten_fun_nokwargs(wrap_init(f), in_tree)
    assert wf.call_wrapped(*flat) == [3, 2]
    assert out_tree() == tree_structure((0, [0]))

    def with_aux(a: Any, b: Any) -> Any:
        return {"s": a["x"] + b}, ("aux", b)

    wf2, trees = flatten_fun_nokwargs2(wrap_init(with_aux), in_tree)
    assert wf2.call_wrapped(*flat) == ([3], ["aux", 2])
    assert trees() == (tree_structure({"s": 0}), tree_structure(("a", 0)))
    wf3, _ = flatten_fun_nokwargs2(wrap_init(f2), in_tree)
    with pytest.raises(TypeError, match="two-element tuple"):
        wf3.call_wrapped(*flat)


def test_flatten_fun_checks_the_flat_count() -> None:
    _, in_tree = tree_flatten(((1, 2), {}))
    wf, _ = flatten_fun(wrap_init(f2), in_tree)
    with pytest.raises(TypeError, match="expected 2 flat arguments"):
        wf.call_wrapped(1)


# -- static arguments ------------------------------------------------------------------------

def sub3(a: Any, b: Any, c: Any, **kw: Any) -> Any:
    return (a - b) * c + sum(kw.values())


def test_argnums_partial() -> None:
    wf, dyn = argnums_partial(wrap_init(sub3), (2, 0), (10, 4, 2))
    assert dyn == (2, 10)
    assert wf.call_wrapped(3, 20) == (20 - 4) * 3
    again, _ = argnums_partial(wrap_init(sub3), (2, 0), (0, 4, 0))
    assert again == wf  # same static value: same WrappedFun
    other, _ = argnums_partial(wrap_init(sub3), (2, 0), (0, 4.0, 0))
    assert other != wf  # 4 and 4.0 are different static arguments
    with pytest.raises(NonHashableStaticArgumentError,
                       match=r"Non-hashable static arguments are not supported.*index 1.*"
                             r"for function sub3"):
        argnums_partial(wrap_init(sub3), (0, 2), (1, [2], 3))
    loose, _ = argnums_partial(wrap_init(sub3), 0, (1, [2], 3), require_static_args_hashable=False)
    with pytest.raises(TypeError):
        hash(loose)
    with pytest.raises(ValueError, match="must have value greater than or equal to -len"):
        argnums_partial(wrap_init(sub3), 5, (1, 2, 3))
    with pytest.raises(ValueError, match="duplicates"):
        argnums_partial(wrap_init(sub3), (0, 0), (1, 2, 3))


def test_argnums_partial_except() -> None:
    wf, dyn = argnums_partial_except(wrap_init(sub3), (1, 7), (10, 4, 2), allow_invalid=True)
    assert dyn == (10, 2)
    assert wf.call_wrapped(10, 2) == 12
    same, dyn2 = argnums_partial_except(wrap_init(sub3), (), (1, 2, 3), allow_invalid=False)
    assert dyn2 == (1, 2, 3) and same.transforms == ()


def test_argnames_partial() -> None:
    wf, dyn = argnames_partial(wrap_init(sub3), ["p"], {"p": 1, "q": 100})
    assert dyn == {"p": 1}
    assert wf.call_wrapped(3, 1, 2, p=5) == 4 + 5 + 100
    wf2, dyn2 = argnames_partial_except(wrap_init(sub3), ("q",), {"p": 1, "q": 100})
    assert wf2 == wf and dyn2 == dyn
    with pytest.raises(NonHashableStaticArgumentError, match=r"\(name q\)"):
        argnames_partial_except(wrap_init(sub3), ("q",), {"q": {}})


# -- flatten_axes --------------------------------------------------------------------------

def test_flatten_axes_matches_jax() -> None:
    # Results of jax._src.api_util.flatten_axes for the same inputs.
    tree = tree_structure(((1.0, {"a": 2.0, "b": (3.0, 4.0)}, None, 5.0),))
    assert flatten_axes("vmap in_axes", tree, ((0, {"a": None, "b": 1}, 0, 2),)) == \
        [0, None, 1, 1, 2]
    assert flatten_axes("vmap in_axes", tree_structure((1.0, [2.0, 3.0])), 0) == [0, 0, 0]
    assert flatten_axes("vmap in_axes", tree_structure((1.0, [2.0, 3.0])), (None, 1)) == \
        [None, 1, 1]
    assert flatten_axes("pmap in_axes", tree_structure(((1.0, 2.0), {"z": 3.0})),
                        ((0, 1), 0), kws=True) == [0, 1, 0]


def test_flatten_axes_error_names_the_mismatch() -> None:
    with pytest.raises(ValueError) as info:
        flatten_axes("vmap in_axes", tree_structure((1.0, [2.0, 3.0])), (0, [1]))
    message = str(info.value)
    assert message.startswith(
        "vmap in_axes specification must be a tree prefix of the corresponding value, got "
        "specification (0, [1]) for value tree PyTreeDef((*, [*, *])).")
    assert "Mismatch at vmap in_axes[1]: the specification has a list of length 1 but the " \
           "value has a list of length 2." in message
    with pytest.raises(ValueError, match=r"might need to be wrapped in a singleton tuple"):
        flatten_axes("vmap in_axes", tree_structure(({"a": 1.0},)), {"a": 0}, tupled_args=True)
    with pytest.raises(ValueError, match=r"Mismatch at pmap in_axes\[0\]: the specification "
                                         r"has a dict with keys \['b'\] but the value has a "
                                         r"dict with keys \['a'\]"):
        flatten_axes("pmap in_axes", tree_structure((({"a": 1.0},), {})),
                     (({"b": 0},), 0), kws=True)


# -- argnums / argnames ------------------------------------------------------------------------

def test_resolve_infers_the_missing_half() -> None:
    assert resolve_argnums_and_argnames(f4, 0, None) == ((0,), ("x",))
    assert resolve_argnums_and_argnames(f4, None, ("y", "z")) == ((1,), ("y", "z"))
    assert resolve_argnums_and_argnames(f4, None, None) == ((), ())
    assert resolve_argnums_and_argnames(f3, (0, 5), None) == ((0, 5), ("a",))
    assert resolve_argnums_and_argnames(max, 3, "k") == ((3,), ("k",))  # no signature
    sig = inspect.signature(g)
    assert infer_argnums_and_argnames(sig, None, "c") == ((2,), ("c",))
    assert infer_argnums_and_argnames(sig, (0, 2), None) == ((0, 2), ("c",))


@pytest.mark.parametrize("call, error, message", [
    (lambda: resolve_argnums_and_argnames(f2, (5,), None), ValueError,
     r"Jitted function f2 has static_argnums=\(5,\), but only accepts 2 positional arguments"),
    (lambda: resolve_argnums_and_argnames(f2, (-3,), None), ValueError,
     r"static_argnums=\(-3,\), but only accepts 2"),
    (lambda: resolve_argnums_and_argnames(f2, (0, 0), None), ValueError,
     r"Jitted function f2 has static_argnums=\(0, 0\) with duplicate entries \[0\]"),
    (lambda: resolve_argnums_and_argnames(f2, ("a",), None), TypeError,
     r"static_argnums must be an int or a sequence of ints, got \('a',\)"),
    (lambda: resolve_argnums_and_argnames(f2, 1.5, None), TypeError,
     r"static_argnums must be an int or a sequence of ints, got float: 1.5"),
    (lambda: resolve_argnums_and_argnames(f2, None, ("z",)), ValueError,
     r"Jitted function f2 has invalid argnames \{'z'\} in static_argnames. Function does "
     r"not take these args"),
    (lambda: resolve_argnums_and_argnames(f2, None, (3,)), TypeError,
     r"static_argnames must be a str or a sequence of strs"),
    (lambda: resolve_argnums_and_argnames(g, None, ("a",)), ValueError,
     r"invalid argnames \{'a'\} in static_argnames. These are positional-only"),
    (lambda: resolve_argnums_and_argnames(f2, None, ("x", "x")), ValueError,
     r"duplicate entries \['x'\]"),
    (lambda: resolve_argnums_and_argnames(f2, (3,), None, argnums_name="argnums",
                                          api_name="grad"), ValueError,
     r"Differentiated function f2 has argnums=\(3,\)"),
    (lambda: resolve_argnums(f2, None, "x", None, "x"), ValueError,
     r"static_argnames and donate_argnames cannot intersect"),
    (lambda: resolve_argnums(max, None, "x", None, None), ValueError,
     r"Getting the signature of function max failed"),
])
def test_resolve_errors(call: Callable[[], Any], error: type[Exception], message: str) -> None:
    with pytest.raises(error, match=message):
        call()


def test_resolve_argnums_for_jit() -> None:
    assert resolve_argnums(f4, 0, None, None, "z") == ((0,), ("x",), (), ("z",))
    # **kw accepts any name; *args any index.
    assert resolve_argnums_and_argnames(f4, None, "anything") == ((), ("anything",))
    assert resolve_argnums_and_argnames(f3, 9, None) == ((9,), ())
    assert resolve_argnums_and_argnames(f2, (0, 0), None, allow_duplicates=True) == \
        ((0, 0), ("x",))


def test_ensure_tuples() -> None:
    assert ensure_index_tuple(3) == (3,)
    assert ensure_index_tuple([1, 2]) == (1, 2)
    assert ensure_str_tuple("a") == ("a",)
    assert ensure_str_tuple(["a", "b"]) == ("a", "b")


# -- hashability ------------------------------------------------------------------------------

def test_hashable_function_and_partial() -> None:
    def make(k: int) -> HashableFunction:
        return HashableFunction(lambda x: x + k, closure=k)

    assert make(1) == make(1) and hash(make(1)) == hash(make(1))
    assert make(1) != make(2)
    assert make(3)(1) == 4
    made = [as_hashable_function(k)(lambda: 5) for k in (5, 5, 6)]
    assert made[0] == made[1] and made[0] != made[2] and made[0]() == 5
    hp = hashable_partial(sub3, 1, 2, z=3)
    assert hp(4) == (1 - 2) * 4 + 3
    assert hp == hashable_partial(sub3, 1, 2, z=3)
    assert hash(hp) == hash(hashable_partial(sub3, 1, 2, z=3))
    assert hp != hashable_partial(sub3, 1, 2, z=4)
    assert hp.__name__ == "sub3"


def test_unhashable_and_strict_boxes() -> None:
    assert Unhashable([1]) == Unhashable([1])
    with pytest.raises(TypeError):
        hash(Unhashable(1))
    assert StrictHashable(1) == StrictHashable(1)
    assert StrictHashable(1) != StrictHashable(1.0)
    assert StrictHashable(1) != StrictHashable(True)


def test_check_callable() -> None:
    check_callable(f2)
    with pytest.raises(TypeError, match="Expected a callable value"):
        check_callable(3)

    def gen() -> Any:
        yield 1

    with pytest.raises(TypeError, match="generator function"):
        check_callable(gen)
    with pytest.raises(TypeError, match="staticmethod"):
        check_callable(staticmethod(f2))
