"""The terminal picture of a sharding drawn with ``rich`` (the ``rich`` extra).

:func:`draw_with_rich` lays out the blocks of a 1-D or 2-D array as a table
whose cells are sized like the blocks, as ``jax.debug.visualize_sharding``
does: ``10 * scale`` lines for the whole height, 2.5 columns per line of
height scaled by the array's aspect ratio for the width, each cell's width kept
within ``[min_width, max_width]`` and the console ``max_width`` wide. With
``use_color`` (and a terminal that shows colour) each cell gets a background
from ``color_map`` (a callable from ``[0, 1]`` to an RGB(A) tuple of floats,
as a matplotlib colormap) and black or white text, whichever reads better;
without a ``color_map`` a fixed palette is used. Without colour the cells are
drawn with box lines.

``rich`` is imported when a picture is drawn, never when lamina is imported,
so lamina works without the extra; :func:`draw_with_rich` then returns False
and the caller draws plain text.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from typing import Any

import numpy as np

#: a cell: its (start, stop) rows and columns, and its label
Cell = tuple[tuple[int, int], tuple[int, int], str]

# Lines of height per unit of scale, and terminal columns per line of height
# (a character cell is about 2.5 times taller than wide).
_LINES_PER_SCALE = 10
_COLUMNS_PER_LINE = 2.5

# The palette used when colour is asked for without a color_map: ten hues in
# two shades, spread over [0, 1].
_PALETTE: tuple[str, ...] = (
    "#3B4CC0", "#6F8FE8", "#2E8B57", "#7CCD7C", "#B8860B",
    "#F0C05A", "#B22222", "#F08080", "#6A3D9A", "#B39DDB",
    "#00838F", "#80DEEA", "#8D6E63", "#D7CCC8", "#C2185B",
    "#F48FB1", "#455A64", "#B0BEC5", "#827717", "#DCE775",
)


def _palette_color(value: float) -> str:
    index = min(int(value * len(_PALETTE)), len(_PALETTE) - 1)
    return _PALETTE[index]


def _hex_color(color: Any) -> str:
    """A colour map's answer (a name, ``#rrggbb`` or an RGB(A) float tuple) as rich reads it."""
    if isinstance(color, str):
        return color
    red, green, blue = (int(round(float(c) * 255)) for c in tuple(color)[:3])
    return f"#{red:02X}{green:02X}{blue:02X}"


def _text_color(background: str) -> str:
    """Black on light backgrounds, white on dark ones (by perceived brightness)."""
    if not (background.startswith("#") and len(background) == 7):
        return "#ffffff"
    red, green, blue = (int(background[i:i + 2], 16) for i in (1, 3, 5))
    return "#000000" if 0.299 * red + 0.587 * green + 0.114 * blue > 186 else "#ffffff"


def _cell_colors(color_map: Callable[[float], Any], count: int) -> Iterator[str]:
    """``count`` colours from ``color_map``, neighbouring cells taken half the range apart."""
    values = np.linspace(0.0, 1.0, count)
    stride = count // 2 + (1 if count % 2 == 0 else 0)
    position = 0
    for _ in range(count):
        yield _hex_color(color_map(float(values[position])))
        position = (position + stride) % count


def _cell_size(shape: Sequence[int], rows: tuple[int, int], cols: tuple[int, int],
               scale: float, min_width: int, max_width: int) -> tuple[int, int]:
    """The (height, width) in terminal cells of the block ``rows`` x ``cols``."""
    base_height = int(_LINES_PER_SCALE * scale)
    width_units = shape[1] if len(shape) == 2 else 1
    base_width = int(base_height * width_units / shape[0])
    across = shape[1] if len(shape) == 2 else shape[0]
    width = int((cols[1] - cols[0]) / across * base_width * _COLUMNS_PER_LINE)
    height = int((rows[1] - rows[0]) / shape[0] * base_height) if len(shape) == 2 else 1
    return height, min(max(width, min_width), max_width)


def _padding(height: int, width: int, label: str, colored: bool) -> tuple[int, int, int, int]:
    """The (top, right, bottom, left) padding that centres ``label`` in a cell of that size;
    a coloured cell (no box lines) gets one more on each side."""
    left, extra_right = divmod(width - len(label) - 2, 2)
    top, extra_bottom = divmod(height - 2, 2)
    grow = 1 if colored else 0
    top, right, bottom, left = (max(side + grow, 0) for side in
                                (top, left + extra_right, top + extra_bottom, left))
    return top, right, bottom, left


def draw_with_rich(shape: Sequence[int], cells: Sequence[Cell], n_cols: int, *,
                   use_color: bool, scale: float, min_width: int, max_width: int,
                   color_map: Callable[[float], Any] | None) -> bool:
    """Print the picture of ``cells`` (row-major, ``n_cols`` to a row) through a
    rich Console on ``sys.stdout``; False (nothing printed) when rich is not installed."""
    try:
        # rich is the optional `rich` extra: imported only when a picture is drawn
        from rich import align, box, console, padding, style, table
    except ImportError:
        return False
    screen = console.Console(width=max_width)
    colored = use_color and screen.color_system is not None
    colors = _cell_colors(color_map or _palette_color, len(cells)) if colored else None
    grid = table.Table(show_header=False, show_lines=not colored, padding=0,
                       highlight=not colored, pad_edge=False,
                       box=None if colored else box.SQUARE)
    row: list[padding.Padding] = []
    for rows, cols, label in cells:
        height, width = _cell_size(shape, rows, cols, scale, min_width, max_width)
        look = style.Style()
        if colors is not None:
            background = next(colors)
            look = style.Style(bgcolor=background, color=_text_color(background))
        content = align.Align(label, "center", vertical="middle")
        sides = _padding(height, width, label, colored)
        row.append(padding.Padding(content, sides, style=look))
        if len(row) == n_cols:
            grid.add_row(*row)
            row = []
    screen.print(grid, end="\n\n")
    return True
