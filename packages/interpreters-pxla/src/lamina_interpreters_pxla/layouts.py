"""Layouts: the order (and tiling) in which an array's elements sit in memory.

``Layout(major_to_minor, tiling=None, sub_byte_element_size_in_bits=0)``
describes a device buffer's layout; ``Format(layout, sharding)`` pairs it with
a sharding and is what ``device_put`` accepts to place data with a chosen
layout. ``Layout.AUTO`` lets the compiler choose. The default layout of a
backend is :func:`default_layout` (the client's ``get_default_layout``).
"""

from __future__ import annotations

import weakref
from typing import Any

import numpy as np

from lamina_interpreters_pxla._jaxlib import xc
from lamina_interpreters_pxla.sharding import is_sharding


class _AutoLayout:
    """``Layout.AUTO``: the compiler picks the layout."""

    _instance: _AutoLayout | None = None

    def __new__(cls) -> _AutoLayout:
        if cls._instance is None:
            cls._instance = super().__new__(cls)
        return cls._instance

    def __repr__(self) -> str:
        return "AUTO"


AUTO = _AutoLayout()


class Layout:
    """``major_to_minor`` lists the dimensions from slowest- to fastest-varying
    (row-major for rank 2 is ``(0, 1)``); ``tiling`` optionally tiles them."""

    AUTO = AUTO
    __slots__ = ("major_to_minor", "tiling", "sub_byte_element_size_in_bits")

    def __init__(self, major_to_minor: tuple[int, ...],
                 tiling: tuple[tuple[int, ...], ...] | None = None,
                 sub_byte_element_size_in_bits: int = 0):
        self.major_to_minor = tuple(int(d) for d in major_to_minor)
        if sorted(self.major_to_minor) != list(range(len(self.major_to_minor))):
            raise ValueError(f"Layout: major_to_minor must be a permutation of "
                             f"0..{len(self.major_to_minor) - 1}, got {self.major_to_minor}")
        self.tiling = None if tiling is None else tuple(tuple(int(t) for t in tile)
                                                        for tile in tiling)
        self.sub_byte_element_size_in_bits = int(sub_byte_element_size_in_bits)

    @staticmethod
    def from_pjrt_layout(pjrt_layout: Any) -> Layout:
        xla = pjrt_layout._xla_layout()
        tiling = tuple(tuple(t) for t in xla.tiling())
        return Layout(tuple(xla.minor_to_major())[::-1], tiling or None,
                      xla.element_size_in_bits())

    def _to_xla_layout(self) -> Any:
        minor_to_major = list(self.major_to_minor[::-1])
        if self.tiling is None and not self.sub_byte_element_size_in_bits:
            return xc.Layout(minor_to_major)
        return xc.Layout(minor_to_major, list(self.tiling or ()),
                         self.sub_byte_element_size_in_bits)

    def to_string(self) -> str:
        """XLA's form, e.g. ``{0,1}`` or ``{1,0:T(8,128)}`` (minor-to-major)."""
        return str(self._to_xla_layout().to_string())

    def check_compatible_aval(self, shape: tuple[int, ...]) -> None:
        if len(self.major_to_minor) != len(shape):
            raise ValueError(
                f"Layout {self} has rank {len(self.major_to_minor)} but the value has shape "
                f"{tuple(shape)}")

    def _key(self) -> tuple[Any, ...]:
        return (self.major_to_minor, self.tiling or None, self.sub_byte_element_size_in_bits)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Layout) and self._key() == other._key()

    def __hash__(self) -> int:
        return hash(self._key())

    def __repr__(self) -> str:
        return (f"Layout(major_to_minor={self.major_to_minor}, tiling={self.tiling or ()}, "
                f"sub_byte_element_size_in_bits={self.sub_byte_element_size_in_bits})")


class Format:
    """A layout together with a sharding: where the data goes and how it sits."""

    __slots__ = ("layout", "sharding")

    def __init__(self, layout: Layout | _AutoLayout | None = None, sharding: Any = None):
        if not isinstance(layout, (Layout, _AutoLayout, type(None))):
            raise TypeError(f"Format: layout must be a Layout, Layout.AUTO or None, got "
                            f"{layout!r} of type {type(layout).__name__}")
        if sharding is not None and not is_sharding(sharding):
            raise TypeError(f"Format: sharding must be a lamina sharding or None, got "
                            f"{sharding!r}")
        if isinstance(layout, Layout) and sharding is None:
            raise ValueError("Format: a concrete Layout needs a concrete sharding too "
                             "(a NamedSharding or SingleDeviceSharding)")
        self.layout = layout
        self.sharding = sharding

    def __eq__(self, other: object) -> bool:
        return (isinstance(other, Format) and self.layout == other.layout
                and self.sharding == other.sharding)

    def __hash__(self) -> int:
        return hash((self.layout, self.sharding))

    def __repr__(self) -> str:
        return f"Format(layout={self.layout}, sharding={self.sharding})"


def default_layout(dtype: Any, shape: tuple[int, ...], sharding: Any) -> Layout:
    """The backend's default layout for a ``shape`` array placed with ``sharding``."""
    device = sharding._device_assignment[0]
    shard_shape = sharding.shard_shape(tuple(shape))
    pjrt = device.client.get_default_layout(np.dtype(dtype), shard_shape, device)
    return Layout.from_pjrt_layout(pjrt)


# --- arrays whose buffers are not in the default layout -------------------------
# Programs are compiled for default-layout inputs and XLA does not check: a
# buffer in another layout would be read wrongly. The runtime records the
# ArrayImpls it re-laid out (by id, with a weak reference: ArrayImpl is not
# hashable) and converts them back before they reach a program.
_custom_layouts: dict[int, weakref.ref[Any]] = {}


def mark_custom_layout(impl: Any) -> None:
    """Records that ``impl``'s buffers are in a non-default layout."""
    key = id(impl)

    def forget(_ref: weakref.ref[Any]) -> None:
        _custom_layouts.pop(key, None)

    _custom_layouts[key] = weakref.ref(impl, forget)


def has_custom_layout(impl: Any) -> bool:
    ref = _custom_layouts.get(id(impl))
    return ref is not None and ref() is impl
