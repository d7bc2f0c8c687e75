"""Shape primitives, slicing and indexing, lowered and run on CPU."""

from __future__ import annotations

import numpy as np
import pytest
from lamina_tracing_core.lax import indexing as ix
from lamina_tracing_core.lax import structural as st
from ml_runner import lower_run

F32 = np.float32
RNG = np.random.default_rng(1)


def _x(*shape: int) -> np.ndarray:
    return np.arange(int(np.prod(shape)), dtype=F32).reshape(shape)


@pytest.mark.parametrize("dtype,shape,dimension", [(np.int32, (5,), 0), (F32, (2, 3), 1),
                                                   (np.uint8, (3, 4), 0)])
def test_iota(dtype: type, shape: tuple[int, ...], dimension: int) -> None:
    from ml_build import JaxprBuilder
    from ml_runner import run

    import lamina_mlir_lowering as ml
    b = JaxprBuilder("iota")
    out = b.eqn(st.iota_p, dtype=np.dtype(dtype), shape=shape, dimension=dimension,
                sharding=None)
    res, = run(ml.lower_jaxpr_to_module("jit_iota", b.build([out])))
    expected = np.broadcast_to(
        np.arange(shape[dimension]).reshape([-1 if i == dimension else 1
                                             for i in range(len(shape))]), shape)
    np.testing.assert_array_equal(res, expected.astype(dtype))


def test_broadcast_in_dim_reshape_squeeze_transpose_rev() -> None:
    x = _x(3, 1, 4)
    out, = lower_run(st.broadcast_in_dim_p, x, shape=(2, 3, 5, 4),
                     broadcast_dimensions=(1, 2, 3), sharding=None)
    np.testing.assert_array_equal(out, np.broadcast_to(x[None], (2, 3, 5, 4)))
    out, = lower_run(st.reshape_p, x, new_sizes=(4, 3), dimensions=None, sharding=None)
    np.testing.assert_array_equal(out, x.reshape(4, 3))
    out, = lower_run(st.reshape_p, x, new_sizes=(12,), dimensions=(2, 1, 0), sharding=None)
    np.testing.assert_array_equal(out, x.transpose(2, 1, 0).reshape(12))
    out, = lower_run(st.squeeze_p, x, dimensions=(1,))
    np.testing.assert_array_equal(out, x[:, 0, :])
    out, = lower_run(st.transpose_p, x, permutation=(2, 0, 1))
    np.testing.assert_array_equal(out, x.transpose(2, 0, 1))
    out, = lower_run(st.rev_p, x, dimensions=(0, 2))
    np.testing.assert_array_equal(out, x[::-1, :, ::-1])


def _np_pad(x: np.ndarray, value: float, config: list[tuple[int, int, int]]) -> np.ndarray:
    out = x
    for axis, (lo, hi, interior) in enumerate(config):
        if interior:
            n = out.shape[axis]
            shape = list(out.shape)
            shape[axis] = n + (n - 1) * interior if n else 0
            spread = np.full(shape, value, out.dtype)
            idx = [slice(None)] * out.ndim
            idx[axis] = slice(None, None, interior + 1)
            spread[tuple(idx)] = out
            out = spread
        for amount, front in ((lo, True), (hi, False)):
            idx = [slice(None)] * out.ndim
            if amount >= 0:
                shape = list(out.shape)
                shape[axis] = amount
                block = np.full(shape, value, out.dtype)
                out = np.concatenate([block, out] if front else [out, block], axis)
            else:
                idx[axis] = slice(-amount, None) if front else slice(None, amount)
                out = out[tuple(idx)]
    return out


@pytest.mark.parametrize("config", [
    [(1, 2, 0), (0, 0, 0)],
    [(0, 0, 1), (2, 1, 2)],
    [(-1, 2, 0), (1, -2, 1)],   # negative edge padding crops
])
def test_pad(config: list[tuple[int, int, int]]) -> None:
    x = _x(3, 4)
    out, = lower_run(st.pad_p, x, np.array(-1.0, F32), padding_config=tuple(config))
    np.testing.assert_array_equal(out, _np_pad(x, -1.0, config))


def test_concatenate_and_slice() -> None:
    a, b, c = _x(2, 3), _x(1, 3) + 100, _x(4, 3) + 200
    out, = lower_run(st.concatenate_p, a, b, c, dimension=0)
    np.testing.assert_array_equal(out, np.concatenate([a, b, c], 0))
    x = _x(6, 7)
    out, = lower_run(st.slice_p, x, start_indices=(1, 2), limit_indices=(5, 7), strides=None)
    np.testing.assert_array_equal(out, x[1:5, 2:7])
    out, = lower_run(st.slice_p, x, start_indices=(0, 1), limit_indices=(6, 7), strides=(2, 3))
    np.testing.assert_array_equal(out, x[0:6:2, 1:7:3])


def test_dynamic_slice_clamps_and_update() -> None:
    x = _x(5, 6)
    out, = lower_run(ix.dynamic_slice_p, x, np.array(1, np.int32), np.array(4, np.int32),
                     slice_sizes=(2, 3))
    np.testing.assert_array_equal(out, x[1:3, 3:6])  # start 4 clamped to 3
    out, = lower_run(ix.dynamic_slice_p, x, np.array(-3, np.int32), np.array(2, np.int32),
                     slice_sizes=(2, 2))
    np.testing.assert_array_equal(out, x[0:2, 2:4])
    upd = -_x(2, 2) - 1
    out, = lower_run(ix.dynamic_update_slice_p, x, upd, np.array(4, np.int32),
                     np.array(1, np.int32))
    expected = x.copy()
    expected[3:5, 1:3] = upd
    np.testing.assert_array_equal(out, expected)


def _gather_rows(mode: ix.GatherScatterMode, fill_value: float | None = None) -> np.ndarray:
    x = _x(5, 3)
    idx = np.array([[0], [4], [7], [-2]], np.int32)
    dnums = ix.GatherDimensionNumbers(offset_dims=(1,), collapsed_slice_dims=(0,),
                                      start_index_map=(0,))
    out, = lower_run(ix.gather_p, x, idx, dimension_numbers=dnums, slice_sizes=(1, 3),
                     indices_are_sorted=False, unique_indices=False, mode=mode,
                     fill_value=fill_value)
    return out


def test_gather_modes() -> None:
    x = _x(5, 3)
    clip = _gather_rows(ix.GatherScatterMode.CLIP)
    np.testing.assert_array_equal(clip, x[[0, 4, 4, 0]])
    promise = _gather_rows(ix.GatherScatterMode.PROMISE_IN_BOUNDS)
    np.testing.assert_array_equal(promise[:2], x[[0, 4]])
    fill = _gather_rows(ix.GatherScatterMode.FILL_OR_DROP)
    np.testing.assert_array_equal(fill[:2], x[[0, 4]])
    assert np.isnan(fill[2:]).all()  # NaN is the default fill for floats
    fill7 = _gather_rows(ix.GatherScatterMode.FILL_OR_DROP, fill_value=7.0)
    np.testing.assert_array_equal(fill7[2:], np.full((2, 3), 7.0))
    one_hot = _gather_rows(ix.GatherScatterMode.ONE_HOT)
    np.testing.assert_array_equal(one_hot, np.concatenate([x[[0, 4]], np.zeros((2, 3))]))


def test_gather_2d_windows_and_batching() -> None:
    x = _x(4, 5)
    idx = np.array([[0, 1], [2, 3], [3, 0]], np.int32)
    dnums = ix.GatherDimensionNumbers(offset_dims=(1, 2), collapsed_slice_dims=(),
                                      start_index_map=(0, 1))
    out, = lower_run(ix.gather_p, x, idx, dimension_numbers=dnums, slice_sizes=(1, 2),
                     indices_are_sorted=False, unique_indices=False,
                     mode=ix.GatherScatterMode.CLIP, fill_value=None)
    expected = np.stack([x[0:1, 1:3], x[2:3, 3:5], x[3:4, 0:2]])
    np.testing.assert_array_equal(out, expected)
    # Batched gather: each batch row picks its own column.
    xb = _x(3, 4)
    idx_b = np.array([[1], [3], [0]], np.int32)
    dn_b = ix.GatherDimensionNumbers(offset_dims=(), collapsed_slice_dims=(1,),
                                     start_index_map=(1,), operand_batching_dims=(0,),
                                     start_indices_batching_dims=(0,))
    out_b, = lower_run(ix.gather_p, xb, idx_b, dimension_numbers=dn_b, slice_sizes=(1, 1),
                       indices_are_sorted=False, unique_indices=False,
                       mode=ix.GatherScatterMode.PROMISE_IN_BOUNDS, fill_value=None)
    np.testing.assert_array_equal(out_b, xb[np.arange(3), [1, 3, 0]])


SCATTERS = [("scatter", lambda a, b: b), ("scatter-add", np.add), ("scatter-sub", np.subtract),
            ("scatter-mul", np.multiply), ("scatter-min", np.minimum),
            ("scatter-max", np.maximum)]


@pytest.mark.parametrize("name,combine", SCATTERS, ids=[s[0] for s in SCATTERS])
def test_scatter_family_modes(name: str, combine: object) -> None:
    prim = {"scatter": ix.scatter_p, "scatter-add": ix.scatter_add_p,
            "scatter-sub": ix.scatter_sub_p, "scatter-mul": ix.scatter_mul_p,
            "scatter-min": ix.scatter_min_p, "scatter-max": ix.scatter_max_p}[name]
    x = _x(5, 3) + 1
    idx = np.array([[1], [3], [9], [-4]], np.int32)
    upd = (np.arange(12, dtype=F32).reshape(4, 3) * 2 - 5)
    dnums = ix.ScatterDimensionNumbers(update_window_dims=(1,), inserted_window_dims=(0,),
                                       scatter_dims_to_operand_dims=(0,))
    for mode in (ix.GatherScatterMode.FILL_OR_DROP, ix.GatherScatterMode.CLIP):
        out, = lower_run(prim, x, idx, upd, update_jaxpr=None, update_consts=(),
                         dimension_numbers=dnums, indices_are_sorted=False,
                         unique_indices=False, mode=mode)
        expected = x.copy()
        rows = [1, 3, 9, -4] if mode is ix.GatherScatterMode.FILL_OR_DROP else [1, 3, 4, 0]
        for r, u in zip(rows, upd):
            if 0 <= r < 5:
                expected[r] = combine(expected[r], u)  # type: ignore[operator]
        np.testing.assert_array_equal(out, expected, err_msg=str(mode))
