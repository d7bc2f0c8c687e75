"""``lamina.profiler``: traces written where JAX writes them
(``plugins/profile/<timestamp>/<host>.xplane.pb`` and ``.trace.json.gz``, as
JAX 0.10.2 does), annotations that appear in them, and memory profiles."""

from __future__ import annotations

import functools
import gzip
import json
import pathlib

import lamina as lx
import lamina.numpy as jnp
import pytest
from jaxlib import _jax
from lamina import profiler


def _trace_files(log_dir: pathlib.Path) -> list[pathlib.Path]:
    return sorted((log_dir / "plugins" / "profile").glob("*/*"))


def _event_names(trace_json: pathlib.Path) -> set[str]:
    with gzip.open(trace_json, "rb") as f:
        events = json.load(f)["traceEvents"]
    return {e.get("name", "") for e in events}


def test_start_stop_writes_xplane_and_trace_json(tmp_path: pathlib.Path) -> None:
    profiler.start_trace(tmp_path)
    with profiler.TraceAnnotation("lamina_test_label"):
        jnp.dot(jnp.ones((8, 8)), jnp.ones((8, 8))).block_until_ready()
    profiler.stop_trace()
    files = _trace_files(tmp_path)
    suffixes = sorted(f.name.split(".", 1)[1] for f in files)
    assert suffixes == ["trace.json.gz", "xplane.pb"]
    xplane = next(f for f in files if f.name.endswith(".xplane.pb"))
    assert xplane.stat().st_size > 0
    trace_json = next(f for f in files if f.name.endswith(".trace.json.gz"))
    assert "lamina_test_label" in _event_names(trace_json)
    data = profiler.ProfileData.from_file(str(xplane))
    assert any("Host" in plane.name or "CPU" in plane.name for plane in data.planes)


def test_trace_context_annotations_and_perfetto(tmp_path: pathlib.Path) -> None:
    @functools.partial(profiler.annotate_function, name="annotated_fn")
    def work(x: object) -> object:
        return lx.block_until_ready(jnp.sin(x))

    @profiler.annotate_function
    def plain() -> int:
        return 3

    with profiler.trace(tmp_path, create_perfetto_trace=True):
        work(jnp.arange(4.0))
        assert plain() == 3
        for step in range(2):
            with profiler.StepTraceAnnotation("train", step_num=step):
                jnp.ones(3).block_until_ready()
    names = {f.name for f in _trace_files(tmp_path)}
    assert "perfetto_trace.json.gz" in names
    trace_json = next(f for f in _trace_files(tmp_path) if f.name.endswith(".trace.json.gz"))
    seen = _event_names(trace_json)
    assert {"annotated_fn", "train"} <= seen
    assert any("plain" in name for name in seen)
    perfetto = next(f for f in _trace_files(tmp_path) if f.name == "perfetto_trace.json.gz")
    with gzip.open(perfetto, "rb") as f:
        assert "metadata" not in json.load(f)


def test_one_trace_at_a_time(tmp_path: pathlib.Path) -> None:
    with pytest.raises(RuntimeError, match="^No profile started$"):
        profiler.stop_trace()
    profiler.start_trace(tmp_path)
    try:
        with pytest.raises(RuntimeError, match="already been started"):
            profiler.start_trace(tmp_path)
    finally:
        profiler.stop_trace()
    with pytest.raises(TypeError, match="log_dir"):
        profiler.start_trace(3)  # type: ignore[arg-type]


def test_profile_options() -> None:
    options = profiler.ProfileOptions()
    # JAX 0.10.2's defaults
    assert (options.host_tracer_level, options.python_tracer_level,
            options.enable_hlo_proto) == (2, 1, True)


def test_server_once() -> None:
    with pytest.raises(ValueError, match="No active profiler server"):
        profiler.stop_server()
    profiler.start_server(0)  # port 0: any free port
    try:
        with pytest.raises(ValueError, match="Only one profiler server"):
            profiler.start_server(0)
    finally:
        profiler.stop_server()


def test_device_memory_profile(tmp_path: pathlib.Path) -> None:
    keep = jnp.ones((256, 256))
    profile = profiler.device_memory_profile()
    assert profile[:2] == b"\x1f\x8b"  # gzip
    samples = json.loads(_jax.pprof_profile_to_json(gzip.decompress(profile)))["sample"]
    assert any(s["value"][1] == str(256 * 256 * 4) for s in samples)  # keep's bytes
    out = tmp_path / "memory.prof"
    profiler.save_device_memory_profile(out)
    assert out.read_bytes()[:2] == b"\x1f\x8b"
    del keep
