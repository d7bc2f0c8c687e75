"""Per-call overheads: cached jit dispatch, eager ops, device_put, pmap.

Every timed call waits for its results (``block_until_ready``), and every
executable is compiled during warm-up, so the figures are steady-state calls.
"""

from __future__ import annotations

from typing import Any

from ..adapters import Adapter
from ..registry import DISPATCH, EAGER, Bench, workload
from .models import block_leaves

VECTOR = 8
PYTREE_ARRAYS = 10
DEVICE_PUT_LEAF = 16
PMAP_DEVICES = 8
PMAP_FEATURES = 16


def _vector() -> Any:
    import numpy as np

    return np.arange(VECTOR, dtype=np.float32)


def _require_devices(a: Adapter, count: int) -> list[Any]:
    devices = list(a.api.devices())
    if len(devices) < count:
        raise RuntimeError(
            f"needs {count} devices, found {len(devices)}; "
            "set XLA_FLAGS=--xla_force_host_platform_device_count=8"
        )
    return devices[:count]


@workload(
    "dispatch_jit_add1",
    area="dispatch",
    goal=DISPATCH,
    description="cached call of jit(lambda x: x + 1) on a device array",
)
def dispatch_jit_add1(a: Adapter) -> Bench:
    f = a.api.jit(lambda x: x + 1)
    x = a.api.device_put(_vector())
    return Bench(run=lambda: f(x).block_until_ready())


@workload(
    "dispatch_jit_pytree10",
    area="dispatch",
    goal=DISPATCH,
    description="cached jit call taking and returning a 10-array dict",
)
def dispatch_jit_pytree10(a: Adapter) -> Bench:
    import numpy as np

    f = a.api.jit(lambda tree: {k: v + 1 for k, v in tree.items()})
    tree = a.api.device_put(
        {f"a{i}": np.full((VECTOR,), i, np.float32) for i in range(PYTREE_ARRAYS)}
    )
    return Bench(run=lambda: block_leaves(f(tree)))


@workload(
    "eager_add1",
    area="eager",
    goal=EAGER,
    description="eager x + 1 on a device array (op-by-op dispatch)",
)
def eager_add1(a: Adapter) -> Bench:
    x = a.api.device_put(_vector())
    return Bench(run=lambda: (x + 1).block_until_ready())


SCAN_STEPS = 1_000


@workload(
    "eager_scan_1000",
    area="eager",
    goal=EAGER,
    description="eager lax.scan of 1,000 steps (one compiled program, as JAX dispatches it)",
)
def eager_scan_1000(a: Adapter) -> Bench:
    import numpy as np

    def step(c: Any, x: Any) -> Any:
        c = c * 1.0001 + a.np_api.sin(x)
        return c, c * 2

    xs = a.api.device_put(np.arange(SCAN_STEPS, dtype=np.float32))
    c0 = a.api.device_put(np.ones(3, np.float32))
    return Bench(run=lambda: block_leaves(a.lax.scan(step, c0, xs)))


def _device_put_workload(count: int) -> None:
    @workload(
        f"device_put_{count}",
        area="device_put",
        goal=DISPATCH,
        description=f"device_put of a {count:,}-array dict (host to device)",
    )
    def setup(a: Adapter) -> Bench:
        import numpy as np

        tree = {
            f"p{i:04d}": np.full((DEVICE_PUT_LEAF,), i, np.float32) for i in range(count)
        }
        return Bench(run=lambda: block_leaves(a.api.device_put(tree)))


for _count in (10, 100, 1_000):
    _device_put_workload(_count)


def _sharded_input(a: Adapter) -> Any:
    """An [8, 16] array already split over the 8 devices by a pmap."""
    import numpy as np

    _require_devices(a, PMAP_DEVICES)
    host = np.ones((PMAP_DEVICES, PMAP_FEATURES), np.float32)
    return a.api.pmap(lambda x: x)(host).block_until_ready()


@workload(
    "pmap_dispatch",
    area="pmap",
    goal=DISPATCH,
    description="cached pmap(lambda x: x + 1) call over 8 devices",
)
def pmap_dispatch(a: Adapter) -> Bench:
    f = a.api.pmap(lambda x: x + 1)
    x = _sharded_input(a)
    return Bench(run=lambda: f(x).block_until_ready())


@workload(
    "pmap_psum_dispatch",
    area="pmap",
    goal=DISPATCH,
    description="cached pmap call with psum over 8 devices",
)
def pmap_psum_dispatch(a: Adapter) -> Bench:
    lax = a.lax
    f = a.api.pmap(lambda x: x + lax.psum(x, "i"), axis_name="i")
    x = _sharded_input(a)
    return Bench(run=lambda: f(x).block_until_ready())
