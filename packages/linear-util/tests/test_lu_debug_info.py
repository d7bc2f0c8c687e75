"""TracingDebugInfo: the record, its helpers and its validator."""

import dataclasses
from collections.abc import Generator, Iterator

import pytest

from lamina_linear_util import (
    DebugInfoError,
    StoreError,
    TracingDebugInfo,
    validate_tracing_debug_info,
)
from lamina_linear_util.debug_info import fit_names, set_validation, validation_enabled
from lamina_linear_util.linear_util import transformation, wrap_init


def make(**changes: object) -> TracingDebugInfo:
    base = TracingDebugInfo("jit", "f at /x/y.py:12", ("x", "y['hi']"), ("result",))
    return base.replace(**changes)


def test_fields_and_frozen() -> None:
    dbg = make()
    assert dbg.traced_for == "jit"
    assert dbg.func_src_info == "f at /x/y.py:12"
    assert dbg.arg_names == ("x", "y['hi']")
    assert dbg.result_paths == ("result",)
    with pytest.raises(dataclasses.FrozenInstanceError):
        dbg.traced_for = "pmap"  # type: ignore[misc]


def test_lists_are_stored_as_tuples() -> None:
    dbg = TracingDebugInfo("jit", None, ["a", None], ["result"])  # type: ignore[arg-type]
    assert dbg.arg_names == ("a", None)
    assert dbg.result_paths == ("result",)
    hash(dbg)


@pytest.mark.parametrize("src, name, filename, lineno", [
    ("f at /x/y.py:12", "f", "/x/y.py", 12),
    ("<lambda> at a b/c.py:3", "<lambda>", "a b/c.py", 3),
    ("max", "max", None, None),
    (None, "<unknown>", None, None),
])
def test_func_name_file_and_line(src: str | None, name: str, filename: str | None,
                                 lineno: int | None) -> None:
    dbg = make(func_src_info=src)
    assert dbg.func_name == name
    assert dbg.func_filename == filename
    assert dbg.func_lineno == lineno


def test_resolve_result_paths_calls_the_thunk_once() -> None:
    calls = []

    def thunk() -> tuple[str | None, ...]:
        calls.append(1)
        return ("result[0]", None)

    dbg = make(result_paths=thunk)
    assert dbg.has_pending_result_paths
    resolved = dbg.resolve_result_paths()
    assert resolved.result_paths == ("result[0]", None)
    assert not resolved.has_pending_result_paths
    assert resolved.resolve_result_paths() is resolved
    assert calls == [1]


def test_resolve_rejects_a_malformed_thunk_value() -> None:
    with pytest.raises(DebugInfoError, match=r"result_paths\[1\] must be a str or None"):
        make(result_paths=lambda: ("result", 3)).resolve_result_paths()


@pytest.fixture
def validation_off() -> Iterator[None]:
    was = validation_enabled()
    set_validation(False)
    yield
    set_validation(was)


@pytest.fixture
def validation_on() -> Iterator[None]:
    was = validation_enabled()
    set_validation(True)
    yield
    set_validation(was)


def test_safe_names_that_fit_are_returned_as_they_are(validation_on: None) -> None:
    dbg = make()
    assert dbg.safe_arg_names(2) == ("x", "y['hi']")
    assert make().safe_result_paths(1) == ("result",)
    assert make(result_paths=None).safe_result_paths(2) == (None, None)
    assert make(result_paths=lambda: ("a", "b")).safe_result_paths(2) == ("a", "b")

    def not_run_yet() -> tuple[str | None, ...]:
        raise StoreError("not run")

    # unknown paths are no mismatch: no name exists yet
    assert make(result_paths=not_run_yet).safe_result_paths(1) == (None,)


def test_a_stale_count_raises_under_validation_naming_the_transformation(
        validation_on: None) -> None:
    with pytest.raises(DebugInfoError, match=r"f at /x/y.py:12 \(traced for jit\): 2 arg_names "
                       r".* for 3 arguments; the count was changed by _nonzero_outputs"):
        make().safe_arg_names(3, made_by="_nonzero_outputs")
    with pytest.raises(DebugInfoError, match=r"1 result_paths .* for 2 results; the count "
                       r"was changed by jvp"):
        make().safe_result_paths(2, made_by=lambda: "jvp")


def test_without_validation_a_stale_count_keeps_the_certain_names(validation_off: None) -> None:
    # entries added after the known ones: the known names keep their places
    assert make().safe_arg_names(3) == ("x", "y['hi']", None)
    assert make().safe_result_paths(2) == ("result", None)
    # one entry removed: entry i is names[i] or names[i + 1]; only agreeing
    # candidates are certain
    dbg = make(arg_names=("a", "a", "b", None, None))
    assert dbg.safe_arg_names(4) == ("a", None, None, None)
    dbg = make(arg_names=("a", "a", "a", "b", "b"))
    assert dbg.safe_arg_names(4) == ("a", "a", None, "b")
    assert fit_names(("a", "b"), 2, what="arg_names", dbg=None) == ("a", "b")


def test_wrapped_fun_names_the_transformations_that_carried_a_stale_record(
        validation_on: None) -> None:
    def f(x: object) -> object:
        return x

    def drop_last(*args: object) -> Generator[object, object, None]:
        outs = yield args, {}
        yield list(outs)[:-1]  # type: ignore[call-overload]

    wf = wrap_init(f, debug_info=make())
    wf = transformation(drop_last, wf)
    with pytest.raises(DebugInfoError, match=r"one of the transformations drop_last "
                       r"\(outermost first\), which carried the record of f at /x/y.py:12"):
        wf.safe_arg_names(1)
    renamed = wf.replace_debug_info(make(arg_names=("x",)))
    assert renamed.safe_arg_names(1) == ("x",)
    with pytest.raises(DebugInfoError, match=r"the record of f at /x/y.py:12 itself"):
        renamed.safe_result_paths(0)
    assert wrap_init(f).safe_result_paths(2) == (None, None)


def test_functional_updates() -> None:
    dbg = make()
    assert dbg.with_arg_names(["a"]).arg_names == ("a",)
    assert dbg.with_result_paths(["r0", None]).result_paths == ("r0", None)
    assert dbg.with_result_paths(None).result_paths is None
    thunk = lambda: ("z",)
    assert dbg.with_result_paths(thunk).result_paths is thunk
    assert dbg.replace(traced_for="pmap").traced_for == "pmap"
    assert dbg.with_unknown_names() == make(arg_names=(None, None), result_paths=None)
    assert dbg.filter_arg_names([False, True]).arg_names == ("y['hi']",)
    assert dbg.filter_result_paths([False]).result_paths == ()
    with pytest.raises(DebugInfoError, match="3 flags for 2 argument names"):
        dbg.filter_arg_names([True, True, True])


def test_equality_treats_pending_thunks_alike() -> None:
    a = make(result_paths=lambda: ("r",))
    b = make(result_paths=lambda: ("s",))
    assert a == b and hash(a) == hash(b)
    assert a != make(result_paths=("r",))
    assert make() != make(arg_names=("x", "z"))
    assert make() == make() and hash(make()) == hash(make())
    assert "<pending>" in repr(a)


def test_validator_accepts_good_records() -> None:
    validate_tracing_debug_info(make(), num_args=2, num_results=1)
    validate_tracing_debug_info(make(func_src_info=None, result_paths=None), num_results=5)
    validate_tracing_debug_info(make(result_paths=lambda: ("r",)))
    validate_tracing_debug_info(make(func_src_info="max", arg_names=(None, None)))


@pytest.mark.parametrize("changes, kwargs, message", [
    (dict(traced_for=""), {}, "traced_for must be a non-empty str"),
    (dict(traced_for=3), {}, "traced_for must be a non-empty str"),
    (dict(func_src_info=7), {}, "func_src_info must be a str or None"),
    (dict(func_src_info="two words"), {}, "must look like 'name' or 'name at file:line'"),
    (dict(arg_names="xy"), {}, "arg_names must be a tuple"),
    (dict(arg_names=("x", 1)), {}, r"arg_names\[1\] must be a str or None"),
    (dict(arg_names=("x", "")), {}, r"arg_names\[1\] is an empty string"),
    (dict(), dict(num_args=3), "has 2 arg_names"),
    (dict(result_paths=("",)), {}, "result_paths\\[0\\] is an empty string"),
    (dict(), dict(num_results=2), "has 1 result_paths"),
    (dict(result_paths=lambda: ("r",)), dict(num_results=1), "pending result_paths thunk"),
])
def test_validator_rejects_broken_invariants(changes: dict[str, object],
                                             kwargs: dict[str, int], message: str) -> None:
    dbg = make(**changes)
    with pytest.raises(DebugInfoError, match=message):
        validate_tracing_debug_info(dbg, **kwargs)


def test_validator_rejects_other_types() -> None:
    with pytest.raises(DebugInfoError, match="expected a TracingDebugInfo"):
        validate_tracing_debug_info(("jit", None, (), None))  # type: ignore[arg-type]


def test_debug_info_error_is_a_value_error() -> None:
    assert issubclass(DebugInfoError, ValueError)
