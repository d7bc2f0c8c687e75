"""Settings that change what tracing produces, beyond ``enable_x64``.

These JAX config options decide how ``lamina.numpy``, ``lax`` and
``lamina.random`` build equations, so a function traced under one value must
not be reused under another:

- ``numpy_rank_promotion``: whether NumPy's implicit rank promotion
  (``(3,) + (2, 3)``) is allowed (``'allow'``), warned about (``'warn'``) or
  an error naming the function and the shapes (``'raise'``);
- ``numpy_dtype_promotion``: ``'standard'`` (JAX's promotion lattice) or
  ``'strict'`` (only Python scalars promote; mixing two different array dtypes
  is a ``TypePromotionError``);
- ``default_matmul_precision``: the ``precision`` that contractions given
  ``precision=None`` record (``'highest'``, ``'float32'``, ``'tensorfloat32'``...),
  or None for the backend's default;
- ``auto_pcast``: whether an invariant value meeting a varying one in a
  ``shard_map`` body is ``pvary``'d implicitly (True, the default) or the
  mismatch is an error;
- ``legacy_prng_key``: whether ``lamina.random`` accepts raw ``uint32`` keys
  silently (``'allow'``, the default), with a warning (``'warn'``) or not at
  all (``'error'``);
- ``default_prng_impl``: the implementation ``random.key`` and
  ``random.PRNGKey`` use, and that raw keys are read as (``'threefry2x32'``,
  ``'rbg'`` or ``'unsafe_rbg'``);
- ``threefry_partitionable``: whether Threefry keys split and draw bits by the
  partitionable scheme (True, JAX's default) or JAX's original one;
- ``high_dynamic_range_gumbel``: whether ``random.gumbel`` (and ``categorical``,
  ``choice`` without replacement) draw two uniforms per sample by default
  (``mode='high'``, JAX's ``jax_high_dynamic_range_gumbel``) or one (False);
- ``softmax_custom_jvp``: whether ``nn.softmax`` is differentiated by its
  custom JVP rule (True) or through its operations (False, JAX's default).

:data:`state` holds the values; :attr:`TraceSettings.key` is a tuple of them
all, a new object on every change, which the tracing caches put in their
keys and the cached call paths compare by identity. :data:`hooks` are called
with the new key (jit's C++ path folds it into its cache key).
Environment variables give the initial values (``LAMINA_`` and the setting's
name in capitals: ``LAMINA_NUMPY_RANK_PROMOTION``, ``LAMINA_DEFAULT_PRNG_IMPL``...).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

__all__ = ["LEGACY_PRNG_KEY_MODES", "MATMUL_PRECISIONS", "PRNG_IMPLS", "RANK_PROMOTIONS",
           "DTYPE_PROMOTIONS", "TraceSettings",
           "hooks", "reader", "scoped", "state", "update"]

RANK_PROMOTIONS = ("allow", "warn", "raise")
DTYPE_PROMOTIONS = ("standard", "strict")
#: The precision names ``default_matmul_precision`` takes (lax.Precision's
#: names and their dtype aliases); None is the backend's default.
MATMUL_PRECISIONS = ("default", "high", "highest", "bfloat16", "tensorfloat32", "float32")
LEGACY_PRNG_KEY_MODES = ("allow", "warn", "error")
#: The key implementations lamina has (JAX also names threefry4x32 and the philox ones).
PRNG_IMPLS = ("threefry2x32", "rbg", "unsafe_rbg")

_CHOICES: dict[str, tuple[Any, ...]] = {
    "numpy_rank_promotion": RANK_PROMOTIONS,
    "numpy_dtype_promotion": DTYPE_PROMOTIONS,
    "default_matmul_precision": (None, *MATMUL_PRECISIONS),
    "auto_pcast": (True, False),
    "legacy_prng_key": LEGACY_PRNG_KEY_MODES,
    "default_prng_impl": PRNG_IMPLS,
    "threefry_partitionable": (True, False),
    "softmax_custom_jvp": (False, True),
    "high_dynamic_range_gumbel": (False, True),
}
_BOOLEANS = frozenset({"auto_pcast", "threefry_partitionable", "softmax_custom_jvp",
                       "high_dynamic_range_gumbel"})


class TraceSettings:
    """The current values (read directly on hot paths) and their :attr:`key`."""

    __slots__ = ("numpy_rank_promotion", "numpy_dtype_promotion", "default_matmul_precision",
                 "auto_pcast", "legacy_prng_key", "default_prng_impl", "threefry_partitionable",
                 "softmax_custom_jvp", "high_dynamic_range_gumbel", "key")

    def __init__(self) -> None:
        self.numpy_rank_promotion: str = "allow"
        self.numpy_dtype_promotion: str = "standard"
        self.default_matmul_precision: str | None = None
        self.auto_pcast: bool = True
        self.legacy_prng_key: str = "allow"
        self.default_prng_impl: str = "threefry2x32"
        self.threefry_partitionable: bool = True
        self.softmax_custom_jvp: bool = False
        self.high_dynamic_range_gumbel: bool = False
        self.key: tuple[Any, ...] = ()
        for name in _CHOICES:
            value: Any = os.environ.get("LAMINA_" + name.upper())
            if value and name in _BOOLEANS:
                value = value.lower() not in ("0", "false", "no", "off")
            if value is not None and value != "":
                setattr(self, name, _checked(name, value))
        self._rekey()

    def _rekey(self) -> None:
        self.key = tuple(getattr(self, name) for name in _CHOICES)


state = TraceSettings()

#: Called with the new :attr:`TraceSettings.key` after every change.
hooks: list[Callable[[tuple[Any, ...]], None]] = []


def _known(name: str) -> str:
    if name not in _CHOICES:
        raise AttributeError(f"lamina: unknown trace setting {name!r}; known: {sorted(_CHOICES)}")
    return name


def _checked(name: str, value: Any) -> Any:
    choices = _CHOICES[_known(name)]
    if value not in choices:
        allowed = [c for c in choices if c is not None]
        none = "None or " if None in choices else ""
        raise ValueError(f"{name}: the value must be {none}one of {allowed}, got {value!r} "
                         f"of type {type(value)}")
    return value


def update(name: str, value: Any) -> None:
    """Sets one setting for the whole process (a ValueError names the allowed values)."""
    value = _checked(name, value)
    if getattr(state, name) == value:
        return
    setattr(state, name, value)
    state._rekey()
    for hook in hooks:
        hook(state.key)


@contextmanager
def scoped(name: str, value: Any) -> Iterator[None]:
    """``with scoped('numpy_rank_promotion', 'raise'):`` sets a setting for a
    block and restores the previous value on exit."""
    previous = getattr(state, _known(name))
    update(name, value)
    try:
        yield
    finally:
        update(name, previous)


def reader(name: str) -> Callable[[], Any]:
    """A function reading setting ``name`` (for config tables)."""
    _known(name)
    return lambda: getattr(state, name)
