"""Where lamina's cached-jit floor is: A/B against the same executable in one process.

``python -m tools.bench.dispatch_floor`` (in lamina's environment; jax is not
needed) times, interleaved and best-of-rounds, a cached call of
``jit(lambda x: x + 1)`` and of a 10-array dict function against a *twin*:
jaxlib's C++ ``pjit`` over the very same compiled program, taking and
returning jaxlib ``ArrayImpl``s, which is what JAX's own cached path does.
The difference is what lamina's ``Array`` wrapper costs on that path (one
pytree node per argument, one Python call per call that wraps every result,
an ``Array`` object per result, and the Python ``block_until_ready`` method),
separated from every other difference between the two libraries. The twin
also runs on lamina ``Array`` arguments (its results still raw), which splits
that cost into the arguments' part and the results' part. Times are this
process's CPU time (best of rounds), which other processes on a shared
machine disturb less than wall time.
"""

from __future__ import annotations

import time
import timeit
from collections.abc import Callable
from typing import Any

ROUNDS = 15
NUMBER = 2000


def _raw_twin(f: Any, args: tuple[Any, ...]) -> Any:
    """A C++ pjit over ``f``'s compiled program on ArrayImpls (see the module docstring)."""
    import lamina as lx
    from lamina_interpreters_pxla._jaxlib import _jax
    from lamina_interpreters_pxla.cpp_dispatch import Fastpath
    from lamina_linear_util import tree_util as tu

    out = f(*args)
    run = next(f._jitted._calls.signatures()).run
    n_args = len(tu.tree_leaves(args))
    outs, out_def = tu.dispatch_registry.flatten(out, lambda x: type(x) is lx.Array)
    impls = [o._arr for o in outs]
    fast = Fastpath(run.loaded, tu.dispatch_registry.flatten(out_def.unflatten(impls))[1],
                    list(run.shardings), [i._sharding for i in impls], [i.aval for i in impls],
                    [bool(i._committed) for i in impls], [True] * n_args, [None] * n_args, [])

    def miss(*a: Any) -> Any:
        leaves = [x._arr if type(x) is lx.Array else x for x in tu.tree_leaves(a)]
        results = run.loaded.execute_sharded(leaves)
        return out_def.unflatten(results.consume_with_handlers(run.handlers)), fast, False

    return _jax.pjit("twin", None, miss, [], [], ("twin", id(f)), tu.dispatch_registry,
                     lambda x, s, layout: x, _jax.PjitFunctionCache(8))


def cases() -> dict[str, Callable[[], Any]]:
    import numpy as np

    import lamina as lx

    x = lx.device_put(np.arange(8, dtype=np.float32))
    add1 = lx.jit(lambda v: v + 1)
    add1_twin = _raw_twin(add1, (x,))
    x_impl = x._arr
    tree = lx.device_put({f"a{i}": np.full((8,), i, np.float32) for i in range(10)})
    tree_fn = lx.jit(lambda t: {k: v + 1 for k, v in t.items()})
    tree_twin = _raw_twin(tree_fn, (tree,))
    tree_impls = {k: v._arr for k, v in tree.items()}
    return {
        "add1 lamina": lambda: add1(x).block_until_ready(),
        "add1 twin": lambda: add1_twin(x_impl).block_until_ready(),
        "add1 lamina, no wait": lambda: add1(x),
        "add1 twin, no wait": lambda: add1_twin(x_impl),
        "add1 twin, Array in": lambda: add1_twin(x),
        "pytree10 lamina": lambda: [v.block_until_ready() for v in tree_fn(tree).values()],
        "pytree10 twin": lambda: [v.block_until_ready() for v in tree_twin(tree_impls).values()],
        "pytree10 lamina, no wait": lambda: tree_fn(tree),
        "pytree10 twin, no wait": lambda: tree_twin(tree_impls),
        "pytree10 twin, Array in": lambda: tree_twin(tree),
    }


def main() -> None:
    timed = cases()
    for call in timed.values():
        call()
    best = dict.fromkeys(timed, float("inf"))
    for _ in range(ROUNDS):
        for name, call in timed.items():
            best[name] = min(best[name], min(timeit.repeat(
                call, number=NUMBER, repeat=3, timer=time.process_time)) / NUMBER)
    for name in timed:
        if name.endswith("lamina") or name.endswith("lamina, no wait"):
            twin = name.replace("lamina", "twin")
            print(f"{name:28s} {best[name] * 1e6:8.2f} µs   twin {best[twin] * 1e6:8.2f} µs   "
                  f"ratio {best[name] / best[twin]:.3f}")
    for case in ("add1", "pytree10"):
        raw, lamina = best[f"{case} twin, no wait"], best[f"{case} lamina, no wait"]
        array_in = best[f"{case} twin, Array in"]
        print(f"{case:8s} extra per call: arguments {(array_in - raw) * 1e6:6.2f} µs, "
              f"results {(lamina - array_in) * 1e6:6.2f} µs")


if __name__ == "__main__":
    main()
