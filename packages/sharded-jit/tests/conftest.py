"""Shared set-up of lamina-sharded-jit's tests.

Every jaxpr a transformation produces is checked against the debug-info
contract (tracing-core's ``validate_debug_info`` switch), and the CPU client
gets 8 devices unless the environment already chose (the sharding tests need
8; they are skipped, not failed, on a client made elsewhere with fewer).
"""

import os

os.environ.setdefault("XLA_FLAGS", "--xla_force_host_platform_device_count=8")
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "1")

import pytest  # noqa: E402
from lamina_tracing_core import core  # noqa: E402

core.config.validate_debug_info = True


@pytest.fixture
def explain(caplog: pytest.LogCaptureFixture):  # type: ignore[no-untyped-def]
    """Turns on cache-miss explanations for the test; yields caplog."""
    import logging

    from lamina_linear_util.cache import set_explain_cache_misses
    previous = set_explain_cache_misses(True)
    caplog.set_level(logging.WARNING, logger="lamina.cache")
    try:
        yield caplog
    finally:
        set_explain_cache_misses(previous)


@pytest.fixture
def devices8() -> list:  # type: ignore[type-arg]
    """Eight CPU devices (the test is skipped on a client with fewer)."""
    import lamina_interpreters_pxla as px
    devices = px.devices()
    if len(devices) < 8:
        pytest.skip("needs 8 CPU devices (XLA_FLAGS=--xla_force_host_platform_device_count=8)")
    return devices[:8]
