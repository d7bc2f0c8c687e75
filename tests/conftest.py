"""Shared set-up of lamina's cross-package tests (``tests/test_e2e_*.py``).

The CPU client gets 8 devices unless the environment already chose (pmap and
sharded_jit tests need them and are skipped, not failed, on fewer), and every
jaxpr a transformation produces is checked against tracing-core's debug-info
contract while the tests run.
"""

import os

os.environ.setdefault("XLA_FLAGS", "--xla_force_host_platform_device_count=8")
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "1")

import lamina_interpreters_pxla  # noqa: E402,F401  (see below)
import pytest  # noqa: E402
from lamina_tracing_core import core  # noqa: E402

# The runtime registers the eager impl rules when it is imported. Importing it
# here makes every test independent of which test happened to import it first;
# test_e2e_import_swap.py checks in fresh processes that a plain
# ``import lamina`` is enough.

core.config.validate_debug_info = True


@pytest.fixture
def devices8() -> list:  # type: ignore[type-arg]
    """Eight CPU devices (the test is skipped on a client with fewer)."""
    import lamina as lx
    devices = lx.devices()
    if len(devices) < 8:
        pytest.skip("needs 8 CPU devices (XLA_FLAGS=--xla_force_host_platform_device_count=8)")
    return list(devices[:8])


@pytest.fixture
def cache_dir(tmp_path):  # type: ignore[no-untyped-def]
    """A fresh persistent cache directory for one test, every compilation
    written to it; the in-memory caches are emptied before and after (a test
    stands for a restart with ``lamina.clear_caches()``), the settings restored."""
    import lamina as lx
    from lamina_interpreters_pxla import persistent_cache

    saved = dict(persistent_cache.cache_config.values)
    lx.config.update("jax_compilation_cache_dir", str(tmp_path))
    lx.config.update("jax_persistent_cache_min_compile_time_secs", 0)
    lx.clear_caches()
    try:
        yield tmp_path
    finally:
        lx.config.update("persistent_trace_cache_verify", False)
        persistent_cache.cache_config.values.update(saved)
        persistent_cache.reset_cache()
        lx.clear_caches()
