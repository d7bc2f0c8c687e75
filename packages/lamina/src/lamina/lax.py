"""``lamina.lax``: the primitive operations and control flow (JAX's ``jax.lax``)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import lamina_interpreters_pxla  # noqa: F401  (sets the default eager impl)
from lamina_interpreters_pxla.backends import default_backend
from lamina_tracing_core.control_flow import (
    cond,
    fori_loop,
    scan,
    switch,
    while_loop,
)
from lamina_tracing_core.control_flow import map as map  # noqa: A004
from lamina_tracing_core.control_flow.cond import cond_p
from lamina_tracing_core.control_flow.loops import while_p
from lamina_tracing_core.control_flow.scan import scan_p
from lamina_tracing_core.control_flow.solves import (
    custom_linear_solve,
    custom_root,
    linear_solve_p,
)
from lamina_tracing_core.lax import *  # noqa: F401,F403
from lamina_tracing_core.lax import linalg as linalg  # lazy there, a name here
from lamina_tracing_core.lax.collectives import pmean as pmean

from lamina_sharded_jit import with_sharding_constraint

__all__ = ["cond", "cond_p", "custom_linear_solve", "custom_root", "fori_loop",
           "linear_solve_p", "map", "platform_dependent", "pmean", "scan",
           "scan_p", "switch", "while_loop", "while_p", "with_sharding_constraint"]

#: The keyword each platform's branch may be given under.
_BRANCH_NAMES = {"cpu": ("cpu",), "cuda": ("cuda", "gpu"), "rocm": ("rocm", "gpu"),
                 "gpu": ("cuda", "rocm", "gpu"), "tpu": ("tpu",)}


def platform_dependent(*args: Any, default: Callable[..., Any] | None = None,
                       **per_platform: Callable[..., Any]) -> Any:
    """``per_platform[p](*args)`` for the platform ``p`` the computation runs
    on (``cpu=``, ``cuda=``, ``rocm=``, ``tpu=``), else ``default(*args)``.

    lamina picks the branch when it traces, for the default backend's
    platform; only that branch is traced and compiled."""
    platform = default_backend()
    for name in _BRANCH_NAMES.get(platform, (platform,)):
        branch = per_platform.get(name)
        if branch is not None:
            return branch(*args)
    if default is None:
        raise ValueError(
            f"platform_dependent: no branch for platform {platform!r} and no default "
            f"(branches given: {sorted(per_platform)}); add {platform}= or default=")
    return default(*args)
