"""Property: debug_info names every flat dynamic leaf, in flatten order, by a
Python expression that evaluates to that very leaf.

For random nested pytrees passed positionally and by keyword (some of them
static) to functions of various signatures, each name, evaluated in the
namespace of the call's bound arguments (parameter names, plus ``args`` and
``kwargs`` for the generic names), must return the leaf at that flat position.
"""

import dataclasses
import inspect
from collections.abc import Callable
from typing import Any, NamedTuple

from hypothesis import given, settings
from hypothesis import strategies as st

from lamina_linear_util import debug_info, register_dataclass, tree_leaves


class Leaf:
    """A distinct object per leaf, so evaluation is checked by identity."""

    def __repr__(self) -> str:
        return f"Leaf#{id(self) % 1000}"


class Pair(NamedTuple):
    first: Any
    second: Any


@register_dataclass
@dataclasses.dataclass
class Node:
    left: Any
    right: Any


def pos_varargs_varkw(a, b, *args, **kwargs):  # type: ignore[no-untyped-def]
    return a


def every_kind(a, /, b=0, *rest, c, d=1, **kw):  # type: ignore[no-untyped-def]
    return a


def only_var(*args, **kwargs):  # type: ignore[no-untyped-def]
    return args


def fixed(x, y, z):  # type: ignore[no-untyped-def]
    return x


def keyword_only(*, p, q=2):  # type: ignore[no-untyped-def]
    return p


FUNCTIONS: list[Callable[..., Any]] = [
    pos_varargs_varkw, every_kind, only_var, fixed, keyword_only, lambda *xs, **ks: xs, max,
]

KEYWORDS = ["a", "b", "c", "d", "p", "q", "x", "y", "z", "rest", "kw", "w", "k'ey"]

leaves = st.builds(Leaf)
dict_keys = st.sampled_from(["a", "b", "hi", "x y", "q'uote", 'dq"'])
trees = st.recursive(
    st.one_of(leaves, st.none()),
    lambda children: st.one_of(
        st.lists(children, max_size=3),
        st.lists(children, max_size=3).map(tuple),
        st.dictionaries(dict_keys, children, max_size=3),
        st.builds(Pair, children, children),
        st.builds(Node, children, children),
    ),
    max_leaves=8,
)


@st.composite
def calls(draw: st.DrawFn) -> tuple[Callable[..., Any], tuple[Any, ...], dict[str, Any],
                                    tuple[int, ...], tuple[str, ...]]:
    fun = draw(st.sampled_from(FUNCTIONS))
    args = tuple(draw(st.lists(trees, max_size=5)))
    kwargs = draw(st.dictionaries(st.sampled_from(KEYWORDS), trees, max_size=4))
    static_argnums = tuple(draw(st.sets(st.integers(0, max(len(args) - 1, 0)))) if args else ())
    static_argnames = tuple(draw(st.sets(st.sampled_from(sorted(kwargs))))) if kwargs else ()
    return fun, args, kwargs, static_argnums, static_argnames


class _Static:
    pass


def call_namespace(fun: Callable[..., Any], args: tuple[Any, ...], kwargs: dict[str, Any]
                   ) -> dict[str, Any]:
    namespace: dict[str, Any] = {"args": args, "kwargs": kwargs}
    try:
        bound = inspect.signature(fun).bind(*args, **kwargs)
    except (TypeError, ValueError):
        return namespace
    namespace.update(bound.arguments)
    return namespace


@settings(max_examples=50, deadline=None)
@given(calls())
def test_each_name_evaluates_to_its_leaf(call: Any) -> None:
    fun, args, kwargs, static_argnums, static_argnames = call
    dbg = debug_info("jit", fun, args, kwargs, static_argnums=static_argnums,
                     static_argnames=static_argnames)
    marker = _Static()
    dynamic_args = [marker if i in static_argnums else a for i, a in enumerate(args)]
    dynamic_kwargs = {k: marker if k in static_argnames else v for k, v in kwargs.items()}
    expected = [leaf for leaf in tree_leaves((dynamic_args, dynamic_kwargs))
                if leaf is not marker]
    assert len(dbg.arg_names) == len(expected)
    namespace = call_namespace(fun, args, kwargs)
    for name, leaf in zip(dbg.arg_names, expected):
        assert name is not None
        assert eval(name, {}, dict(namespace)) is leaf, (name, dbg.arg_names)


@settings(max_examples=30, deadline=None)
@given(st.lists(trees, max_size=4), st.dictionaries(st.sampled_from(KEYWORDS), trees,
                                                    max_size=3))
def test_generic_names_when_the_call_does_not_bind(args: list[Any], kwargs: dict[str, Any]
                                                   ) -> None:
    dbg = debug_info("jit", max, tuple(args), kwargs)  # no signature: generic names
    namespace = {"args": tuple(args), "kwargs": kwargs}
    expected = tree_leaves((args, kwargs))
    assert [eval(n, {}, dict(namespace)) for n in dbg.arg_names if n is not None] == expected
    assert all(n is not None and (n.startswith("args[") or n.startswith("kwargs["))
               for n in dbg.arg_names)
