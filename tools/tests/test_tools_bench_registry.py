"""Workload registry, goals, selection and measurement plans."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from tools.bench.plans import default_mode, plan_for
from tools.bench.registry import (
    DISPATCH,
    EAGER,
    INFO,
    STEP,
    TRACING,
    Bench,
    Registry,
    UnknownWorkloadError,
    workload,
)

REPO_ROOT = Path(__file__).resolve().parents[2]


def _noop(a: object) -> Bench:
    return Bench(run=lambda: None)


def small_registry() -> Registry:
    reg = Registry()
    for name, area in (
        ("pytree_flatten", "pytree"),
        ("make_jaxpr_a", "tracing"),
        ("make_jaxpr_b", "tracing"),
        ("dispatch_x", "dispatch"),
    ):
        workload(name, area=area, goal=TRACING, description=name, registry=reg)(_noop)
    return reg


def test_duplicate_names_are_refused() -> None:
    reg = small_registry()
    with pytest.raises(ValueError, match="already registered"):
        workload("dispatch_x", area="x", goal=TRACING, description="", registry=reg)(_noop)


@pytest.mark.parametrize(
    ("patterns", "expected"),
    [
        (["dispatch_x"], ["dispatch_x"]),
        (["tracing"], ["make_jaxpr_a", "make_jaxpr_b"]),
        (["make_jaxpr_*"], ["make_jaxpr_a", "make_jaxpr_b"]),
        (["pytree"], ["pytree_flatten"]),  # area wins; also a prefix
        (["pytree_fl"], ["pytree_flatten"]),  # prefix
        # registration order, no repeats
        (["dispatch_x", "make_jaxpr_b", "tracing"], ["make_jaxpr_a", "make_jaxpr_b", "dispatch_x"]),
    ],
)
def test_select(patterns: list[str], expected: list[str]) -> None:
    assert [wl.name for wl in small_registry().select(patterns)] == expected


def test_select_unknown_names_the_pattern() -> None:
    with pytest.raises(UnknownWorkloadError, match="'nope'"):
        small_registry().select(["nope"])


@pytest.mark.parametrize(
    ("goal", "ratio", "met"),
    [
        (TRACING, 0.5, True),
        (TRACING, 0.51, False),
        (DISPATCH, 0.99, True),
        (EAGER, 2.5, False),
        (STEP, 1.04, True),
        (STEP, None, None),
        (INFO, 0.1, None),
    ],
)
def test_goal_met(goal: object, ratio: float | None, met: bool | None) -> None:
    assert goal.met(ratio) is met  # type: ignore[attr-defined]


def test_plans_quick_is_smaller() -> None:
    reg = Registry()
    workload(
        "w", area="a", goal=TRACING, description="", registry=reg, budget_s=1.0, min_samples=3,
        warmup_iters=3,
    )(_noop)
    wl = reg.get("w")
    full, quick = plan_for(wl, quick=False), plan_for(wl, quick=True)
    assert (full.budget_s, full.min_samples, full.warmup_iters) == (1.0, 3, 3)
    assert quick.budget_s < full.budget_s
    assert (quick.min_samples, quick.warmup_iters) == (1, 1)
    assert default_mode(quick=False).rounds == 3
    assert default_mode(quick=True).rounds == 1
    assert default_mode(quick=True, rounds=5).rounds == 5
    with pytest.raises(ValueError, match="rounds"):
        default_mode(quick=False, rounds=0)


REQUIRED = {
    "pytree_flatten_unflatten",
    "debug_info_100_args",
    "make_jaxpr_mlp16",
    "make_jaxpr_grad_mlp16",
    "make_jaxpr_vmap_50ops",
    "make_jaxpr_scan_8layers",
    "make_jaxpr_chain_1k",
    "make_jaxpr_chain_10k",
    "make_jaxpr_chain_50k",
    "lower_mlp_train_step",
    "lower_chain_2k",
    "jit_add_chain_200",
    "dispatch_jit_add1",
    "dispatch_jit_pytree10",
    "eager_add1",
    "device_put_10",
    "device_put_100",
    "device_put_1000",
    "pmap_dispatch",
    "pmap_psum_dispatch",
    "eval_shape_then_jit",
    "compile_mlp_train_step",
    "step_mlp_train",
    "step_sharded_matmul",
    "import_time",
    "import_peak_rss",
    "time_to_first_jit",
}


def test_every_issue_workload_is_registered_with_a_goal() -> None:
    from tools.bench.registry import REGISTRY
    from tools.bench.workloads import load_all

    load_all()
    assert REQUIRED <= set(REGISTRY.names())
    by_name = {wl.name: wl for wl in REGISTRY}
    assert by_name["make_jaxpr_mlp16"].goal is TRACING
    assert by_name["dispatch_jit_add1"].goal is DISPATCH
    assert by_name["eager_add1"].goal is EAGER
    assert by_name["step_mlp_train"].goal is STEP
    assert by_name["step_mlp_train"].report_memory
    assert by_name["import_peak_rss"].unit == "MB"


def test_loading_workloads_imports_no_numpy_jax_or_lamina() -> None:
    # The import-time workload relies on this: nothing big is loaded first.
    code = (
        "import sys; import tools.bench.workloads as w; w.load_all(); "
        "import tools.bench.worker, tools.bench.harness; "
        "print(sorted(m for m in ('numpy', 'jax', 'jaxlib', 'lamina') if m in sys.modules))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], cwd=REPO_ROOT, capture_output=True, text=True, check=True
    )
    assert out.stdout.strip() == "[]"
