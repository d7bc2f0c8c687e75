"""Backends: lazy client creation, devices, platform selection, config."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import pytest

import lamina_interpreters_pxla as px
from lamina_interpreters_pxla import backends
from lamina_interpreters_pxla.config import ConfigError, RuntimeConfig, config


def _run(code: str, **env: str) -> subprocess.CompletedProcess[str]:
    full_env = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "1", **env}
    return subprocess.run([sys.executable, "-c", textwrap.dedent(code)], env=full_env,
                          capture_output=True, text=True, timeout=120)


def test_devices_and_counts() -> None:
    devs = px.devices()
    assert len(devs) == px.device_count() >= 1
    assert px.local_devices() == devs
    assert px.local_device_count() == len(devs)
    assert px.process_index() == 0
    assert px.process_count() == 1
    assert px.default_backend() == "cpu"
    assert px.default_device() is devs[0]
    assert backends.devices("cpu") == devs
    assert backends.local_devices(process_index=0) == devs
    assert all(d.platform == "cpu" for d in devs)


def test_default_device_scope() -> None:
    devs = px.devices()
    with backends.default_device_scope(devs[-1]):
        assert px.default_device() is devs[-1]
        with backends.default_device_scope("cpu"):
            assert px.default_device() is devs[0]
        assert px.default_device() is devs[-1]
    assert px.default_device() is devs[0]


def test_missing_platform_is_a_clear_error() -> None:
    with pytest.raises(px.BackendError, match="'tpu' requested.*Available platforms: cpu"):
        px.get_backend("tpu")
    with pytest.raises(px.BackendError, match="'gpu' requested"):
        px.devices("gpu")


def test_client_is_reused() -> None:
    assert px.get_backend() is px.get_backend("cpu") is px.get_backend("CPU")
    assert px.get_backend(px.get_backend()) is px.get_backend()


def test_config_cannot_change_after_backends_exist() -> None:
    px.devices()
    with pytest.raises(ConfigError, match="before the first backend"):
        config.update("num_cpu_devices", (config.num_cpu_devices or 1) + 5)
    config.update("num_cpu_devices", config.num_cpu_devices)  # same value: fine
    with pytest.raises(ConfigError, match="unknown runtime setting"):
        config.update("nonsense", 1)


def test_config_validation() -> None:
    fresh = RuntimeConfig()
    with pytest.raises(ConfigError, match="positive int"):
        fresh.update("num_cpu_devices", 0)
    with pytest.raises(ConfigError, match="comma-separated"):
        fresh.update("platforms", 3)
    fresh.update("platforms", " CPU , cuda ")
    assert fresh.platform_list() == ["cpu", "cuda"]
    fresh.update("num_cpu_devices", 3)
    assert fresh.num_cpu_devices == 3


def test_import_creates_no_client_and_env_settings() -> None:
    proc = _run("""
        import lamina_interpreters_pxla as px
        from lamina_interpreters_pxla import backends
        assert not backends.backends_are_initialized()
        print(px.device_count(), backends.backends_are_initialized())
    """, LAMINA_NUM_CPU_DEVICES="3", XLA_FLAGS="--xla_force_host_platform_device_count=5")
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.split() == ["3", "True"]
    assert "PjRt-IFRT device" not in proc.stderr  # INFO logs are silenced


def test_config_update_before_first_use() -> None:
    proc = _run("""
        import lamina_interpreters_pxla as px
        px.config.update("num_cpu_devices", 2)
        print(px.device_count())
    """)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "2"


def test_requested_missing_platform_in_env_is_an_error() -> None:
    proc = _run("""
        import lamina_interpreters_pxla as px
        try:
            px.devices()
        except px.BackendError as e:
            print("ERROR:", e)
    """, LAMINA_PLATFORMS="cuda,cpu", PJRT_NAMES_AND_LIBRARY_PATHS="")
    assert proc.returncode == 0, proc.stderr
    assert "ERROR: platform 'cuda' was requested" in proc.stdout
    assert "could not be initialized" in proc.stdout


def test_unknown_platform_in_env() -> None:
    proc = _run("""
        import lamina_interpreters_pxla as px
        try:
            px.devices()
        except px.BackendError as e:
            print("ERROR:", e)
    """, LAMINA_PLATFORMS="quantum")
    assert "ERROR: unknown platform 'quantum'" in proc.stdout, proc.stderr


def test_platforms_cpu_only() -> None:
    proc = _run("""
        import lamina_interpreters_pxla as px
        print(px.default_backend(), list(px.backends.backends()))
    """, LAMINA_PLATFORMS="cpu")
    assert proc.stdout.split() == ["cpu", "['cpu']"], proc.stderr


def test_plugin_discovery(tmp_path: object, monkeypatch: pytest.MonkeyPatch) -> None:
    lib = os.path.join(str(tmp_path), "fake_plugin.so")
    open(lib, "w").close()
    monkeypatch.setenv("PJRT_NAMES_AND_LIBRARY_PATHS", f"cuda:{lib},rocm:/no/such/file.so")
    assert backends.find_plugin_library("cuda") == lib
    assert backends.find_plugin_library("rocm") is None
    monkeypatch.setenv("PJRT_NAMES_AND_LIBRARY_PATHS", "")
    monkeypatch.setattr(sys, "path", [str(tmp_path)])
    assert backends.find_plugin_library("cuda") is None
    plugin_dir = os.path.join(str(tmp_path), "jax_plugins", "xla_cuda12")
    os.makedirs(plugin_dir)
    open(os.path.join(plugin_dir, "xla_cuda_plugin.so"), "w").close()
    assert backends.find_plugin_library("cuda") == os.path.join(plugin_dir,
                                                                "xla_cuda_plugin.so")
    assert backends.find_plugin_library("no-such-platform") is None


def test_distributed_hook_must_come_first() -> None:
    px.devices()
    with pytest.raises(px.BackendError, match="before the first backend"):
        backends.set_distributed_settings(None)
