"""WrappedFun, Store and the transformation protocols."""

from collections.abc import Callable, Generator
from typing import Any

import pytest

from lamina_linear_util import (
    EqualStore,
    Store,
    StoreError,
    TracingDebugInfo,
    TransformationError,
    WrappedFun,
    add_debug_info,
    annotate,
    transformation,
    transformation_with_aux,
    wrap_init,
)


def add(x: float, y: float) -> float:
    return x + y


def scale_inputs(factor: float, *args: float, **kwargs: Any
                 ) -> Generator[Any, Any, None]:
    results = yield tuple(factor * a for a in args), kwargs
    yield results


def count_calls(*args: Any, **kwargs: Any) -> Generator[Any, Any, None]:
    results = yield args, kwargs
    yield results, ("called with", args)


def negate_output(inner: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
    return -inner(*args, **kwargs)


def record_output(inner: Callable[..., Any], store: Store, tag: str, *args: Any) -> Any:
    out = inner(*args)
    store.store((tag, out))
    return out


DBG = TracingDebugInfo("test", "add at t.py:1", ("x", "y"), None)


# -- Store ----------------------------------------------------------------------

def test_store_write_once_read_after() -> None:
    store = Store("flatten")
    assert not store
    with pytest.raises(StoreError, match="'flatten' was read before the transformed function ran"):
        _ = store.val
    store.store(3)
    assert store and store.val == 3
    with pytest.raises(StoreError, match="'flatten' was stored twice"):
        store.store(4)
    store.reset()
    assert not store


def test_equal_store_accepts_equal_rewrites() -> None:
    store = EqualStore("t")
    store.store((1, 2))
    store.store((1, 2))
    with pytest.raises(StoreError, match="different values"):
        store.store((1, 3))


# -- wrapping and calling ------------------------------------------------------------

def test_wrap_init_and_call() -> None:
    wf = wrap_init(add)
    assert wf.f is add and wf.transforms == () and wf.stores == () and wf.params == ()
    assert wf.in_type is None and wf.debug_info is None
    assert wf.call_wrapped(1, 2) == 3
    assert wf.__name__ == "add"


def test_params_are_passed_as_keywords_and_sorted() -> None:
    def f(x: float, *, b: int, a: int) -> float:
        return x * b + a

    wf = wrap_init(f, {"b": 10, "a": 1})
    assert wf.params == (("a", 1), ("b", 10))
    assert wf.call_wrapped(2) == 21


def test_wrap_init_checks_its_arguments() -> None:
    with pytest.raises(TypeError, match="expected a callable"):
        wrap_init(3)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="debug_info must be a TracingDebugInfo"):
        wrap_init(add, debug_info=("jit",))  # type: ignore[arg-type]


def test_generator_transformation() -> None:
    wf = transformation(scale_inputs, wrap_init(add), 10.0)
    assert wf.call_wrapped(1, 2) == 30
    assert wf.transforms == ((scale_inputs, (10.0,)),)
    assert wf.stores == (None,)


def test_generator_transformation_with_aux() -> None:
    wf, aux = transformation_with_aux(count_calls, wrap_init(add))
    with pytest.raises(StoreError, match="'count_calls' was read before"):
        aux()
    assert wf.call_wrapped(1, 2) == 3
    assert aux() == ("called with", (1, 2))
    with pytest.raises(StoreError, match="stored twice"):
        wf.call_wrapped(1, 2)


def test_call_style_transformations() -> None:
    wf = transformation(negate_output, wrap_init(add))
    assert wf.call_wrapped(1, 2) == -3
    wf2, aux = transformation_with_aux(record_output, wf, "tag")
    assert wf2.call_wrapped(3, 4) == -7
    assert aux() == ("tag", -7)


def test_stack_order_last_applied_sees_arguments_first() -> None:
    seen: list[str] = []

    def tracer(label: str, *args: Any, **kwargs: Any) -> Generator[Any, Any, None]:
        seen.append(f"in {label}")
        out = yield args, kwargs
        seen.append(f"out {label}")
        yield out

    wf = transformation(tracer, transformation(tracer, wrap_init(add), "first"), "second")
    wf.call_wrapped(1, 2)
    assert seen == ["in second", "in first", "out first", "out second"]
    assert [static for _, static in wf.transforms] == [("second",), ("first",)]


def test_generator_is_closed_when_the_function_raises() -> None:
    events: list[str] = []

    def guarded(*args: Any, **kwargs: Any) -> Generator[Any, Any, None]:
        try:
            out = yield args, kwargs
            yield out
        finally:
            events.append("cleanup")

    def boom(x: float) -> float:
        raise RuntimeError("boom")

    with pytest.raises(RuntimeError, match="boom"):
        transformation(guarded, wrap_init(boom)).call_wrapped(1.0)
    assert events == ["cleanup"]
    transformation(guarded, wrap_init(abs)).call_wrapped(-1.0)
    assert events == ["cleanup", "cleanup"]  # closed right after the second yield too


def test_protocol_errors_are_clear() -> None:
    def no_pair(*args: Any) -> Generator[Any, Any, None]:
        yield args
        yield None

    def no_results(*args: Any, **kwargs: Any) -> Generator[Any, Any, None]:
        yield args, kwargs

    def no_aux(*args: Any, **kwargs: Any) -> Generator[Any, Any, None]:
        out = yield args, kwargs
        yield out

    with pytest.raises(TransformationError, match="no_pair must first yield a pair"):
        transformation(no_pair, wrap_init(add)).call_wrapped(1, 2)
    with pytest.raises(TransformationError, match="no_results finished without yielding its results"):
        transformation(no_results, wrap_init(add)).call_wrapped(1, 2)
    wf, _ = transformation_with_aux(no_aux, wrap_init(add))
    with pytest.raises(TransformationError, match=r"must finally yield a pair \(results, aux\)"):
        wf.call_wrapped(1, 2)


# -- identity -------------------------------------------------------------------------

def test_equality_and_hash_ignore_stores() -> None:
    a, _ = transformation_with_aux(count_calls, transformation(scale_inputs, wrap_init(add), 2.0))
    b, _ = transformation_with_aux(count_calls, transformation(scale_inputs, wrap_init(add), 2.0))
    assert a == b and hash(a) == hash(b)
    assert a.stores[0] is not b.stores[0]


@pytest.mark.parametrize("other", [
    lambda: transformation(scale_inputs, wrap_init(add), 3.0),            # static args
    lambda: transformation(scale_inputs, wrap_init(abs), 2.0),            # function
    lambda: transformation(negate_output, wrap_init(add)),                # transformation
    lambda: transformation(scale_inputs, wrap_init(add, {"p": 1}), 2.0),  # params
    lambda: annotate(transformation(scale_inputs, wrap_init(add), 2.0), ("f32",)),
    lambda: transformation(scale_inputs, wrap_init(add, debug_info=DBG), 2.0),
])
def test_inequality(other: Callable[[], WrappedFun]) -> None:
    base = transformation(scale_inputs, wrap_init(add), 2.0)
    assert base != other()


def test_annotate() -> None:
    wf = wrap_init(add)
    assert annotate(wf, None) is wf
    annotated = annotate(wf, ("float32[]", "float32[]"))
    assert annotated.in_type == ("float32[]", "float32[]")
    assert annotated.call_wrapped(1, 2) == 3
    with pytest.raises(ValueError, match="already has an input type"):
        annotate(annotated, ("x",))
    with pytest.raises(TypeError, match="in_type for add must be a tuple"):
        annotate(wf, ["x"])  # type: ignore[arg-type]
    # A new transformation may change the arguments: the annotation is dropped.
    assert transformation(negate_output, annotated).in_type is None


def test_debug_info_at_most_once() -> None:
    wf = add_debug_info(wrap_init(add), DBG)
    assert wf.debug_info is DBG
    with pytest.raises(ValueError, match="add already has debug info"):
        add_debug_info(wf, DBG)
    with pytest.raises(ValueError, match="already has debug info"):
        add_debug_info(wrap_init(add, debug_info=DBG), DBG)
    # It survives transformations, and replace_debug_info updates it.
    moved = transformation(negate_output, wf)
    assert moved.debug_info is DBG
    renamed = moved.replace_debug_info(DBG.with_arg_names(["a", "b"]))
    assert renamed.debug_info is not None and renamed.debug_info.arg_names == ("a", "b")
    assert renamed.call_wrapped(1, 2) == -3


def test_populate_stores_copies_values() -> None:
    ran, aux_ran = transformation_with_aux(count_calls, wrap_init(add))
    ran.call_wrapped(5, 6)
    fresh, aux_fresh = transformation_with_aux(count_calls, wrap_init(add))
    fresh.populate_stores(ran.stores)
    assert aux_fresh() == aux_ran()


def test_repr_lists_the_transformations() -> None:
    wf = transformation(scale_inputs, wrap_init(add), 2.0)
    assert "scale_inputs (2.0,)" in repr(wf) and "WrappedFun of add" in repr(wf)
