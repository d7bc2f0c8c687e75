"""Compiling and running lowered modules on jaxlib's CPU client, for tests.

No lamina runtime is involved: the tiny aval and sharding classes below are
all the C++ runtime reads (see JAXLIB_NOTES §5).

- ``run(result, *args)``: a single-device module;
- ``run_replicas(result, per_replica_args)``: a replica-mode module (pmap
  style), one list of arguments per replica -> one list of outputs per replica;
- ``run_spmd(result, *global_args)``: an SPMD module over ``num_partitions``
  devices, global arrays in and out (laid out by the module's shardings).
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from typing import Any

import numpy as np
from jaxlib import _jax
from jaxlib import xla_client as xc
from lamina_mlir_lowering import LoweringResult, ShardingSpec, module_to_bytecode


class Aval:
    __slots__ = ("shape", "dtype", "weak_type")

    def __init__(self, shape: Sequence[int], dtype: Any, weak_type: bool = False):
        self.shape, self.dtype, self.weak_type = tuple(shape), np.dtype(dtype), weak_type


class Single(_jax.SingleDeviceSharding):
    memory_kind = property(lambda self: self._memory_kind)

    def _to_xla_hlo_sharding(self, ndim: int) -> Any:
        return xc.HloSharding.replicate()


class Gspmd(_jax.GSPMDSharding):
    memory_kind = property(lambda self: self._memory_kind)

    def _to_xla_hlo_sharding(self, ndim: int) -> Any:
        return self._hlo_sharding


@functools.lru_cache(maxsize=1)
def client() -> Any:
    return xc.make_cpu_client(num_devices=8)


def _options(replicas: int, partitions: int, shardy: bool) -> Any:
    opts = xc.CompileOptions()
    opts.num_replicas, opts.num_partitions = replicas, partitions
    build = opts.executable_build_options
    build.use_spmd_partitioning = partitions > 1
    build.use_shardy_partitioner = shardy
    ids = [d.id for d in client().devices()[:replicas * partitions]]
    opts.device_assignment = xc.DeviceAssignment.create(
        np.array(ids).reshape(replicas, partitions))
    return opts


def compile_result(result: LoweringResult) -> Any:
    n = result.num_replicas * result.num_partitions
    devs = client().devices()[:n]
    return client().compile_and_load(
        module_to_bytecode(result.module), _jax.DeviceList(tuple(devs)),
        _options(result.num_replicas, result.num_partitions,
                 result.sharding_format == "shardy"))


def _to_host(arr: Any) -> np.ndarray:
    value, _ = arr._single_device_array_to_np_array_did_copy()
    return np.array(value)


def _put(x: Any, dev: Any) -> Any:
    x = np.asarray(x)
    return _jax.batched_device_put(Aval(x.shape, x.dtype), Single(dev), [x], [dev], True,
                                   enable_x64=True)


def _platform_args(result: LoweringResult, index: int = 0) -> list[Any]:
    return [np.asarray(index, np.int32)] if result.has_platform_index_arg else []


def run(result: LoweringResult, *args: Any, platform_index: int = 0) -> list[np.ndarray]:
    """Runs a single-device module; returns numpy outputs."""
    exe = compile_result(result)
    dev = client().devices()[0]
    ins = [_put(x, dev) for x in _platform_args(result, platform_index) + list(args)]
    outs = exe.execute_sharded(ins)
    handlers = [_jax.array_result_handler(Aval(a.shape, a.dtype), Single(dev), True,
                                          _skip_checks=True) for a in result.out_avals]
    return [_to_host(o) for o in outs.consume_with_handlers(handlers)]


def run_replicas(result: LoweringResult, per_replica: Sequence[Sequence[Any]]) -> list[list[np.ndarray]]:
    """Runs a replica-mode module: ``per_replica[r]`` are replica r's arguments."""
    exe = compile_result(result)
    r = result.num_replicas
    devs = client().devices()[:r]
    dl = _jax.DeviceList(tuple(devs))
    sharding = Gspmd(dl, xc.HloSharding.iota_tile([r]))
    n_args = len(per_replica[0])
    stacked = []
    for i in range(n_args):
        singles = [_put(per_replica[k][i], devs[k]) for k in range(r)]
        x = np.asarray(per_replica[0][i])
        stacked.append(_jax.ArrayImpl(Aval((r, *x.shape), x.dtype),
                                      Gspmd(dl, xc.HloSharding.iota_tile([r] + [1] * x.ndim)),
                                      singles, True, _skip_checks=True))
    del sharding
    outs = exe.execute_sharded(stacked)
    handlers = [_jax.array_result_handler(
        Aval((r, *a.shape), a.dtype), Gspmd(dl, xc.HloSharding.iota_tile([r] + [1] * len(a.shape))),
        True, _skip_checks=True) for a in result.out_avals]
    arrays = outs.consume_with_handlers(handlers)
    return [[_to_host(arr._arrays[k]) for arr in arrays] for k in range(r)]


def _shards(x: np.ndarray, spec: ShardingSpec | None, n: int) -> list[np.ndarray]:
    """Device i's piece of ``x`` under ``spec`` (iota device order)."""
    if spec is None:
        return [x] * n
    mesh = spec.mesh
    out = []
    for dev in range(n):
        coords = dict(zip(mesh.axis_names, np.unravel_index(dev, mesh.axis_sizes)))
        index = []
        for d, axes in enumerate(spec.dims):
            count = 1
            pos = 0
            for a in axes:
                size = mesh.axis_size(a)
                pos = pos * size + int(coords[a])
                count *= size
            step = x.shape[d] // count
            index.append(slice(pos * step, (pos + 1) * step))
        out.append(np.ascontiguousarray(x[tuple(index)]))
    return out


def run_spmd(result: LoweringResult, *args: Any) -> list[np.ndarray]:
    """Runs an SPMD module on ``num_partitions`` devices with global arrays."""
    exe = compile_result(result)
    n = result.num_partitions
    devs = client().devices()[:n]
    dl = _jax.DeviceList(tuple(devs))
    ins = []
    for x, spec in zip(args, result.arg_shardings):
        x = np.asarray(x)
        s = spec if isinstance(spec, ShardingSpec) else None
        hs = s.to_hlo_sharding() if s is not None else xc.HloSharding.replicate()
        pieces = _shards(x, s, n)
        singles = [_put(p, d) for p, d in zip(pieces, devs)]
        ins.append(_jax.ArrayImpl(Aval(x.shape, x.dtype), Gspmd(dl, hs), singles, True,
                                  _skip_checks=True))
    outs = exe.execute_sharded(ins)
    out_shardings = exe.get_output_shardings()
    handlers = []
    for a, op in zip(result.out_avals, out_shardings):
        hs = xc.HloSharding.from_proto(op)
        handlers.append(_jax.array_result_handler(Aval(a.shape, a.dtype), Gspmd(dl, hs), True,
                                                  _skip_checks=True))
    arrays = outs.consume_with_handlers(handlers)
    results = []
    for arr, a, spec in zip(arrays, result.out_avals, result.result_shardings):
        s = spec if isinstance(spec, ShardingSpec) else None
        pieces = [_to_host(p) for p in arr._arrays]
        results.append(_assemble(pieces, a.shape, s, n))
    return results


def _assemble(pieces: list[np.ndarray], shape: Sequence[int], spec: ShardingSpec | None,
              n: int) -> np.ndarray:
    if spec is None:
        return pieces[0]
    out = np.zeros(shape, pieces[0].dtype)
    template = _shards(np.arange(int(np.prod(shape))).reshape(shape), spec, n)
    flat = out.reshape(-1)
    for piece, idx in zip(pieces, template):
        flat[idx.reshape(-1)] = piece.reshape(-1)
    return out


def lower_one(prim: Any, *args: Any, platforms: Sequence[str] = ("cpu",),
              out_avals: Any = None, **params: Any) -> LoweringResult:
    """A module applying ``prim`` once to arguments shaped like ``args``."""
    from ml_build import JaxprBuilder

    from lamina_mlir_lowering import lower_jaxpr_to_module

    b = JaxprBuilder(prim.name)
    arrays = [np.asarray(a) for a in args]
    vars_ = [b.arg(a.shape, a.dtype, f"x{i}") for i, a in enumerate(arrays)]
    out = b.eqn(prim, *vars_, out_avals=out_avals, **params)
    outs = out if prim.multiple_results else [out]
    return lower_jaxpr_to_module(f"jit_{prim.name}", b.build(outs), platforms=platforms)


def lower_run(prim: Any, *args: Any, out_avals: Any = None, **params: Any) -> list[np.ndarray]:
    """Lowers ``prim`` applied to ``args``, runs it on CPU, returns the outputs."""
    result = lower_one(prim, *args, out_avals=out_avals, **params)
    return run(result, *[np.asarray(a) for a in args])
