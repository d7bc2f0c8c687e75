"""Runtime settings: how many CPU devices, which platforms.

Each setting has an environment variable that gives its initial value and can
be changed with :meth:`RuntimeConfig.update` until the first backend is
created; after that the clients exist and changing a setting is an error (as
in JAX).

- ``num_cpu_devices`` (``LAMINA_NUM_CPU_DEVICES``): devices of the CPU client;
  ``None`` lets ``XLA_FLAGS=--xla_force_host_platform_device_count=N`` decide.
- ``platforms`` (``LAMINA_PLATFORMS``): comma-separated platforms to use, in
  priority order (``"cuda,cpu"``); ``None`` means every available one.
- ``pmap_chunked_shards`` (``LAMINA_PMAP_CHUNKED_SHARDS``, default on): pmap's
  shards keep the array's rank (see ``pmap_config``). Unlike the others it can
  change at any time: pmap reads it on every call.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable
from typing import Any


class ConfigError(ValueError):
    """A runtime setting got a bad value or was changed too late."""


def _parse_num_devices(raw: str | None) -> int | None:
    if raw is None or raw.strip() == "":
        return None
    try:
        value = int(raw)
    except ValueError as e:
        raise ConfigError(
            f"LAMINA_NUM_CPU_DEVICES must be a positive integer, got {raw!r}") from e
    return _check_num_devices(value)


def _check_num_devices(value: Any) -> int | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ConfigError(f"num_cpu_devices must be a positive int or None, got {value!r}")
    return value


_FALSY = frozenset({"0", "false", "no", "off"})
_TRUTHY = frozenset({"1", "true", "yes", "on", ""})


def _parse_flag(variable: str, raw: str | None, default: bool) -> bool:
    if raw is None:
        return default
    text = raw.strip().lower()
    if text in _FALSY or text in _TRUTHY:
        return text in _TRUTHY
    raise ConfigError(f"{variable} must be one of 1/true/yes/on or 0/false/no/off, got {raw!r}")


def _check_flag(value: Any) -> bool:
    if not isinstance(value, bool):
        raise ConfigError(f"expected a bool, got {value!r}")
    return value


#: settings that may change after the backends exist
_LIVE_SETTINGS = frozenset({"pmap_chunked_shards"})


def _check_platforms(value: Any) -> str | None:
    if value is None:
        return None
    if not isinstance(value, str):
        raise ConfigError(f"platforms must be a comma-separated str or None, got {value!r}")
    names = [p.strip().lower() for p in value.split(",") if p.strip()]
    return ",".join(names) if names else None


class RuntimeConfig:
    """The runtime's settings (one process-wide instance: :data:`config`)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._frozen_by: Callable[[], bool] | None = None
        self.num_cpu_devices: int | None = _parse_num_devices(
            os.environ.get("LAMINA_NUM_CPU_DEVICES"))
        self.platforms: str | None = _check_platforms(os.environ.get("LAMINA_PLATFORMS"))
        self.pmap_chunked_shards: bool = _parse_flag(
            "LAMINA_PMAP_CHUNKED_SHARDS", os.environ.get("LAMINA_PMAP_CHUNKED_SHARDS"), True)
        #: called with (name, value) after every change (the C++ dispatch
        #: cache keys on the live settings)
        self.update_hooks: list[Callable[[str, Any], None]] = []

    def _set_frozen_check(self, is_frozen: Callable[[], bool]) -> None:
        """The backends module says how to tell whether clients exist."""
        self._frozen_by = is_frozen

    def update(self, name: str, value: Any) -> None:
        """Sets ``name`` to ``value``; backend settings only before the first
        backend is created."""
        checkers: dict[str, Callable[[Any], Any]] = {
            "num_cpu_devices": _check_num_devices,
            "platforms": _check_platforms,
            "pmap_chunked_shards": _check_flag,
        }
        if name not in checkers:
            raise ConfigError(f"unknown runtime setting {name!r}; known: {sorted(checkers)}")
        checked = checkers[name](value)
        with self._lock:
            if getattr(self, name) == checked:
                return
            if name not in _LIVE_SETTINGS and self._frozen_by is not None and self._frozen_by():
                raise ConfigError(
                    f"config.update({name!r}, ...) must run before the first backend is "
                    "created (before any device, array or computation is used)")
            setattr(self, name, checked)
        for hook in self.update_hooks:
            hook(name, checked)

    def platform_list(self) -> list[str] | None:
        """``platforms`` as a list, or ``None`` when unset."""
        return None if self.platforms is None else self.platforms.split(",")


config = RuntimeConfig()
