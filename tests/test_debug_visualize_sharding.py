"""debug.visualize_sharding: the rich picture (the `rich` extra) and the plain-text
picture without it, with the same device labels, on 1-D and 2-D meshes."""

from __future__ import annotations

import re
import sys

import lamina as lx
import lamina.numpy as jnp
import numpy as np
import pytest

# The picture's blocks run from column to column of box lines (rich) or '|' (plain).
_LABEL = re.compile(r"CPU [0-9,]+")


def _sharded(devices8: list, mesh_shape: tuple[int, ...], shape: tuple[int, ...], spec: lx.P):  # type: ignore[type-arg]
    used = devices8[:int(np.prod(mesh_shape))]
    mesh = lx.sharding.Mesh(np.array(used).reshape(mesh_shape), ("a", "b")[:len(mesh_shape)])
    return lx.device_put(jnp.zeros(shape), lx.NamedSharding(mesh, spec))


def _rows_of_labels(out: str) -> list[list[str]]:
    return [found for line in out.splitlines() if (found := _LABEL.findall(line))]


def _without_rich(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "rich", None)  # `import rich` now fails, as without the extra


CASES = [
    ((4, 2), (8, 4), lx.P("a", "b"), [["CPU 0", "CPU 1"], ["CPU 2", "CPU 3"],
                                      ["CPU 4", "CPU 5"], ["CPU 6", "CPU 7"]]),
    ((8,), (16,), lx.P("a"), [[f"CPU {i}" for i in range(8)]]),
    ((4, 2), (8, 4), lx.P("a"), [["CPU 0,1"], ["CPU 2,3"], ["CPU 4,5"], ["CPU 6,7"]]),
]


@pytest.mark.parametrize(("mesh_shape", "shape", "spec", "labels"), CASES)
def test_rich_and_plain_pictures_carry_the_same_labels(capfd, devices8, monkeypatch, mesh_shape,
                                                       shape, spec, labels) -> None:
    pytest.importorskip("rich")
    x = _sharded(devices8, mesh_shape, shape, spec)
    lx.debug.visualize_array_sharding(x)
    rich_out = capfd.readouterr().out
    assert "┌" in rich_out and "┘" in rich_out  # rich's square box
    assert _rows_of_labels(rich_out) == labels
    _without_rich(monkeypatch)
    lx.debug.visualize_array_sharding(x)
    plain_out = capfd.readouterr().out
    assert "┌" not in plain_out and plain_out.startswith("+")
    assert _rows_of_labels(plain_out) == labels


def test_rich_picture_is_sized_by_scale_and_widths(capfd, devices8) -> None:
    pytest.importorskip("rich")
    x = _sharded(devices8, (2, 2), (8, 8), lx.P("a", "b"))
    lx.debug.visualize_sharding(x.shape, x.sharding)
    small = capfd.readouterr().out.splitlines()
    lx.debug.visualize_sharding(x.shape, x.sharding, scale=2.0, max_width=200)
    large = capfd.readouterr().out.splitlines()
    # A block is half the array: 5 lines tall at scale 1 and 10 at scale 2, 12 and 25
    # columns wide (0.5 * 10 * scale * 2.5); as in JAX, a cell's inside is its size less 1
    # line and less 2 columns (the label centred in it), between the box lines.
    assert len([line for line in small if line.startswith("│")]) == 2 * 4
    assert len([line for line in large if line.startswith("│")]) == 2 * 9
    assert len(small[0]) == 2 * 10 + 3 and len(large[0]) == 2 * 23 + 3
    lx.debug.visualize_sharding(x.shape, x.sharding, scale=2.0, max_width=20)
    capped = capfd.readouterr().out.splitlines()
    # max_width is also the console's width: the whole picture fits in it
    assert max(len(line) for line in capped) == 20
    # a 1-D block of 2 in 16 is far narrower than min_width: the cells widen to it
    lx.debug.visualize_sharding((16,), _sharded(devices8, (8,), (16,), lx.P("a")).sharding,
                                min_width=10)
    assert len(capfd.readouterr().out.splitlines()[0]) == 8 * 8 + 9


def test_rich_picture_colours_cells_from_color_map(capfd, devices8, monkeypatch) -> None:
    pytest.importorskip("rich")
    monkeypatch.setenv("FORCE_COLOR", "1")
    monkeypatch.setenv("TERM", "xterm-256color")
    monkeypatch.setenv("COLORTERM", "truecolor")
    monkeypatch.delenv("NO_COLOR", raising=False)
    x = _sharded(devices8, (4, 2), (8, 4), lx.P("a", "b"))
    asked: list[float] = []

    def red_to_blue(value: float) -> tuple[float, float, float, float]:
        asked.append(value)
        return (1.0 - value, 0.0, value, 1.0)

    lx.debug.visualize_array_sharding(x, color_map=red_to_blue)
    out = capfd.readouterr().out
    assert sorted(asked) == pytest.approx(list(np.linspace(0, 1, 8)))
    assert "48;2;255;0;0m" in out and "48;2;0;0;255m" in out  # the map's end colours as backgrounds
    assert "┌" not in out and len(_LABEL.findall(out)) == 8
    lx.debug.visualize_array_sharding(x, use_color=False)
    assert "48;2;" not in capfd.readouterr().out
