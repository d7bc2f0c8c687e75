"""``lamina.scipy.spatial.transform``: 3-D rotations (``Rotation``) and their
spherical linear interpolation (``Slerp``), as SciPy and JAX define them.

A ``Rotation`` holds unit quaternions ``(x, y, z, w)`` (scalar last), one
(``quat`` of shape ``(4,)``, a *single* rotation) or a stack of them (leading
axes); every conversion works on the last axis, so stacks of any shape
broadcast. Both classes are named tuples of arrays, hence pytrees: they pass
through ``jit``, ``vmap`` and ``grad``.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from typing import Any, NamedTuple

from lamina_tracing_core.numpy import _util

import lamina.numpy as jnp
from lamina import random as lamina_random

Array = Any
ArrayLike = Any

__all__ = ["Rotation", "Slerp"]

_SMALL_ANGLE = 1e-3
_GIMBAL_EPS = 1e-7


def _fun(name: str) -> str:
    return f"lamina.scipy.spatial.transform.{name}"


def _vectors(fun: str, value: ArrayLike, name: str, size: int) -> Array:
    """``value`` as a float array whose last axis has ``size`` entries."""
    (x,) = _util.promote_dtypes_inexact(_fun(fun), value)
    if x.ndim == 0 or x.shape[-1] != size:
        raise ValueError(f"{_fun(fun)}: the argument {name} must have shape (..., {size}), got "
                         f"{x.shape}")
    return x


# --- quaternion algebra (last axis: x, y, z, w) -----------------------------------------------
def _normalize(q: Array) -> Array:
    return q / jnp.linalg.norm(q, axis=-1, keepdims=True)


def _canonical(q: Array) -> Array:
    """``q`` or ``-q``, whichever has ``w > 0``; where ``w`` is 0, whichever
    has its first non-zero of x, y, z positive (SciPy's ``canonical=True``)."""
    decider = q[..., 3]
    undecided = decider == 0
    for i in range(3):
        decider = jnp.where(undecided, q[..., i], decider)
        undecided = undecided & (q[..., i] == 0)
    return jnp.where((decider < 0)[..., None], -q, q)


def _compose(p: Array, q: Array) -> Array:
    """The Hamilton product ``p q`` (apply ``q``, then ``p``)."""
    pv, pw = p[..., :3], p[..., 3:]
    qv, qw = q[..., :3], q[..., 3:]
    vector = pw * qv + qw * pv + jnp.cross(pv, qv)
    scalar = pw * qw - jnp.sum(pv * qv, axis=-1, keepdims=True)
    return jnp.concatenate([vector, scalar], axis=-1)


def _as_matrix(q: Array) -> Array:
    x, y, z, w = (q[..., i] for i in range(4))
    xx, yy, zz, ww = x * x, y * y, z * z, w * w
    xy, zw, xz, yw, yz, xw = x * y, z * w, x * z, y * w, y * z, x * w
    rows = [
        [xx - yy - zz + ww, 2 * (xy - zw), 2 * (xz + yw)],
        [2 * (xy + zw), -xx + yy - zz + ww, 2 * (yz - xw)],
        [2 * (xz - yw), 2 * (yz + xw), -xx - yy + zz + ww],
    ]
    return jnp.stack([jnp.stack(row, axis=-1) for row in rows], axis=-2)


def _from_matrix(m: Array) -> Array:
    """Markley's method: of the four ways to read the quaternion off the
    matrix, the one whose pivot (a diagonal entry or the trace) is largest."""
    trace = m[..., 0, 0] + m[..., 1, 1] + m[..., 2, 2]
    pivots = jnp.stack([m[..., 0, 0], m[..., 1, 1], m[..., 2, 2], trace], axis=-1)
    choice = jnp.argmax(pivots, axis=-1)[..., None]
    candidates = []
    for i in range(3):
        j, k = (i + 1) % 3, (i + 2) % 3
        parts: list[Any] = [None] * 4
        parts[i] = 1 - trace + 2 * m[..., i, i]
        parts[j] = m[..., j, i] + m[..., i, j]
        parts[k] = m[..., k, i] + m[..., i, k]
        parts[3] = m[..., k, j] - m[..., j, k]
        candidates.append(jnp.stack(parts, axis=-1))
    candidates.append(jnp.stack([m[..., 2, 1] - m[..., 1, 2], m[..., 0, 2] - m[..., 2, 0],
                                 m[..., 1, 0] - m[..., 0, 1], 1 + trace], axis=-1))
    q = candidates[3]
    for i in range(3):
        q = jnp.where(choice == i, candidates[i], q)
    return _normalize(q)


def _from_rotvec(r: Array) -> Array:
    angle = jnp.linalg.norm(r, axis=-1, keepdims=True)
    small = angle <= _SMALL_ANGLE
    a2 = angle * angle
    # sin(angle / 2) / angle, by its series near 0 (the division is kept finite there)
    scale = jnp.where(small, 0.5 - a2 / 48 + a2 * a2 / 3840,
                      jnp.sin(angle / 2) / jnp.where(small, 1.0, angle))
    return jnp.concatenate([r * scale, jnp.cos(angle / 2)], axis=-1)


def _as_rotvec(q: Array) -> Array:
    q = jnp.where(q[..., 3:] < 0, -q, q)
    angle = 2 * jnp.arctan2(jnp.linalg.norm(q[..., :3], axis=-1, keepdims=True), q[..., 3:])
    small = angle <= _SMALL_ANGLE
    a2 = angle * angle
    scale = jnp.where(small, 2 + a2 / 12 + 7 * a2 * a2 / 2880,
                      angle / jnp.where(small, 1.0, jnp.sin(angle / 2)))
    return scale * q[..., :3]


def _from_mrp(p: Array) -> Array:
    squared = jnp.sum(p * p, axis=-1, keepdims=True)
    return jnp.concatenate([2 * p, 1 - squared], axis=-1) / (1 + squared)


def _as_mrp(q: Array) -> Array:
    sign = jnp.where(q[..., 3:] < 0, -1.0, 1.0).astype(q.dtype)
    return sign * q[..., :3] / (1 + sign * q[..., 3:])


def _elementary(axis: int, angle: Array) -> Array:
    half = angle / 2
    parts = [jnp.zeros_like(angle)] * 3 + [jnp.cos(half)]
    parts[axis] = jnp.sin(half)
    return jnp.stack(parts, axis=-1)


def _parse_sequence(fun: str, seq: Any, exact: int | None) -> tuple[list[int], bool]:
    """The axes (0, 1, 2) of an Euler sequence and whether it is intrinsic
    (upper case) or extrinsic (lower case)."""
    if not isinstance(seq, str) or not (1 <= len(seq) <= 3) or (
            exact is not None and len(seq) != exact):
        wanted = f"{exact}" if exact is not None else "1 to 3"
        raise ValueError(f"{_fun(fun)}: the argument seq must be a string of {wanted} axes, "
                         f"got {seq!r}")
    intrinsic = re.fullmatch(r"[XYZ]+", seq) is not None
    if not intrinsic and re.fullmatch(r"[xyz]+", seq) is None:
        raise ValueError(f"{_fun(fun)}: the axes of seq must all be from 'xyz' (extrinsic) or "
                         f"all from 'XYZ' (intrinsic), got {seq!r}")
    if any(a == b for a, b in zip(seq, seq[1:])):
        raise ValueError(f"{_fun(fun)}: consecutive axes of seq must differ, got {seq!r}")
    return ["xyz".index(c) for c in seq.lower()], intrinsic


def _as_euler(q: Array, axes: list[int], intrinsic: bool) -> Array:
    """Bernardes and Viollet's direct quaternion-to-Euler formula (2022), as
    SciPy: angles in ``[-pi, pi]``; at gimbal lock the third angle is 0."""
    i, j, k = axes[::-1] if intrinsic else axes
    symmetric = i == k
    if symmetric:
        k = 3 - i - j
    sign = (i - j) * (j - k) * (k - i) // 2
    if symmetric:
        a, b, c, d = q[..., 3], q[..., i], q[..., j], q[..., k] * sign
    else:
        a, b = q[..., 3] - q[..., j], q[..., i] + q[..., k] * sign
        c, d = q[..., j] + q[..., 3], q[..., k] * sign - q[..., i]
    middle = 2 * jnp.arctan2(jnp.hypot(c, d), jnp.hypot(a, b))
    half_sum, half_diff = jnp.arctan2(b, a), jnp.arctan2(d, c)
    near_zero = jnp.abs(middle) <= _GIMBAL_EPS
    near_pi = jnp.abs(middle - math.pi) <= _GIMBAL_EPS
    regular = ~(near_zero | near_pi)
    locked = jnp.where(near_zero, 2 * half_sum, 2 * half_diff * (1 if intrinsic else -1))
    first = jnp.where(regular, half_sum - half_diff, 0.0 if intrinsic else locked)
    third = jnp.where(regular, half_sum + half_diff, locked if intrinsic else 0.0)
    if not symmetric:
        third = third * sign
        middle = middle - math.pi / 2
    first, third = (jnp.remainder(t + math.pi, 2 * math.pi) - math.pi for t in (first, third))
    # (the middle angle is in range already: [0, pi], or [-pi/2, pi/2] for
    # asymmetric sequences; wrapping would send pi to -pi)
    # `first` and `third` are in the order of the extrinsic sequence
    angles = [third, middle, first] if intrinsic else [first, middle, third]
    return jnp.stack(angles, axis=-1)


# --- Rotation ---------------------------------------------------------------------------------
class Rotation(NamedTuple):
    """Rotations in 3-D as unit quaternions ``quat`` (scalar last)."""

    quat: Array

    # constructors
    @classmethod
    def from_quat(cls, quat: ArrayLike, *, scalar_first: bool = False) -> Rotation:
        """From quaternions ``(x, y, z, w)`` (or ``(w, x, y, z)`` with
        ``scalar_first``), normalised."""
        q = _vectors("Rotation.from_quat", quat, "quat", 4)
        if scalar_first:
            q = jnp.roll(q, -1, axis=-1)
        return cls(_normalize(q))

    @classmethod
    def from_matrix(cls, matrix: ArrayLike) -> Rotation:
        """From rotation matrices ``(..., 3, 3)``."""
        (m,) = _util.promote_dtypes_inexact(_fun("Rotation.from_matrix"), matrix)
        if m.ndim < 2 or m.shape[-2:] != (3, 3):
            raise ValueError(f"{_fun('Rotation.from_matrix')}: the argument matrix must have "
                             f"shape (..., 3, 3), got {m.shape}")
        return cls(_from_matrix(m))

    @classmethod
    def from_rotvec(cls, rotvec: ArrayLike, degrees: bool = False) -> Rotation:
        """From rotation vectors (axis times angle, radians unless ``degrees``)."""
        r = _vectors("Rotation.from_rotvec", rotvec, "rotvec", 3)
        return cls(_from_rotvec(jnp.deg2rad(r) if degrees else r))

    @classmethod
    def from_mrp(cls, mrp: ArrayLike) -> Rotation:
        """From modified Rodrigues parameters ``axis * tan(angle / 4)``."""
        return cls(_from_mrp(_vectors("Rotation.from_mrp", mrp, "mrp", 3)))

    @classmethod
    def from_euler(cls, seq: str, angles: ArrayLike, degrees: bool = False) -> Rotation:
        """From Euler angles about the axes of ``seq`` ('xyz': extrinsic, about
        the fixed frame; 'XYZ': intrinsic, about the rotating one). ``angles``
        has the sequence's length on its last axis (a scalar for one axis)."""
        fun = "Rotation.from_euler"
        axes, intrinsic = _parse_sequence(fun, seq, None)
        (a,) = _util.promote_dtypes_inexact(_fun(fun), angles)
        a = jnp.atleast_1d(a)
        if a.shape[-1] != len(axes):
            raise ValueError(f"{_fun(fun)}: the last axis of angles must have {len(axes)} "
                             f"entries (one per axis of seq={seq!r}), got shape {a.shape}")
        if degrees:
            a = jnp.deg2rad(a)
        q = _elementary(axes[0], a[..., 0])
        for n, axis in enumerate(axes[1:], start=1):
            step = _elementary(axis, a[..., n])
            q = _compose(q, step) if intrinsic else _compose(step, q)
        return cls(q)

    @classmethod
    def identity(cls, num: int | None = None, dtype: Any = float) -> Rotation:
        """The identity rotation, or ``num`` of them."""
        q = jnp.array([0.0, 0.0, 0.0, 1.0], dtype=dtype)
        if num is None:
            return cls(q)
        return cls(jnp.tile(q, (_count("Rotation.identity", num), 1)))

    @classmethod
    def random(cls, random_key: Any, num: int | None = None) -> Rotation:
        """Rotations drawn uniformly (Haar measure): normalised Gaussian
        quaternions from ``lamina.random.normal``."""
        shape = (4,) if num is None else (_count("Rotation.random", num), 4)
        return cls(_normalize(lamina_random.normal(random_key, shape)))

    @classmethod
    def concatenate(cls, rotations: Sequence[Rotation]) -> Rotation:
        """One stack of the given rotations (single ones count as one)."""
        quats = [jnp.atleast_2d(r.quat) for r in rotations]
        return cls(jnp.concatenate(quats, axis=0))

    # conversions
    def as_quat(self, canonical: bool = False, scalar_first: bool = False) -> Array:
        """The quaternions; ``canonical``: the sign with ``w >= 0``."""
        q = _canonical(self.quat) if canonical else self.quat
        return jnp.roll(q, 1, axis=-1) if scalar_first else q

    def as_matrix(self) -> Array:
        return _as_matrix(self.quat)

    def as_rotvec(self, degrees: bool = False) -> Array:
        r = _as_rotvec(self.quat)
        return jnp.rad2deg(r) if degrees else r

    def as_mrp(self) -> Array:
        return _as_mrp(self.quat)

    def as_euler(self, seq: str, degrees: bool = False) -> Array:
        """Euler angles about the three axes of ``seq``, in ``[-pi, pi]`` (the
        middle one in ``[0, pi]`` for symmetric sequences such as 'zxz')."""
        axes, intrinsic = _parse_sequence("Rotation.as_euler", seq, 3)
        angles = _as_euler(self.quat, axes, intrinsic)
        return jnp.rad2deg(angles) if degrees else angles

    # operations
    def apply(self, vectors: ArrayLike, inverse: bool = False) -> Array:
        """The rotated vectors (``(..., 3)``, broadcast against the rotations)."""
        v = _vectors("Rotation.apply", vectors, "vectors", 3)
        m = self.as_matrix()
        if inverse:
            m = jnp.swapaxes(m, -1, -2)
        return jnp.einsum("...ij,...j->...i", m, v)

    def inv(self) -> Rotation:
        return Rotation(self.quat * jnp.array([-1.0, -1.0, -1.0, 1.0], self.quat.dtype))

    def magnitude(self) -> Array:
        """The rotation angles in ``[0, pi]``."""
        return 2 * jnp.arctan2(jnp.linalg.norm(self.quat[..., :3], axis=-1),
                               jnp.abs(self.quat[..., 3]))

    def mean(self, weights: ArrayLike | None = None) -> Rotation:
        """The rotation minimising the weighted sum of squared chordal
        distances: the top eigenvector of ``sum w q q^T``."""
        fun = _fun("Rotation.mean")
        q = jnp.atleast_2d(self.quat)
        if weights is None:
            w = jnp.ones(q.shape[0], q.dtype)
        else:
            w = jnp.asarray(_util.operand(fun, weights, "weights"), q.dtype)
            if w.ndim != 1 or w.shape[0] != q.shape[0]:
                raise ValueError(f"{fun}: the argument weights must have shape "
                                 f"({q.shape[0]},) (one per rotation), got {w.shape}")
        k = jnp.einsum("n,ni,nj->ij", w, q, q)
        _, vectors = jnp.linalg.eigh(k)
        return Rotation(vectors[:, -1])

    # (a tuple's * repeats it; a Rotation's composes, as in SciPy and JAX)
    def __mul__(self, other: Rotation) -> Rotation:  # type: ignore[override]
        """The composition: ``(p * q).apply(v) == p.apply(q.apply(v))``."""
        if not isinstance(other, Rotation):
            return NotImplemented
        return Rotation(_normalize(_compose(self.quat, other.quat)))

    def __getitem__(self, index: Any) -> Rotation:
        if self.single:
            raise TypeError(f"{_fun('Rotation')}: a single rotation is not subscriptable")
        return Rotation(self.quat[index])

    def __len__(self) -> int:
        if self.single:
            raise TypeError(f"{_fun('Rotation')}: a single rotation has no len()")
        return int(self.quat.shape[0])

    @property
    def single(self) -> bool:
        """Whether this is one rotation (``quat`` of shape ``(4,)``)."""
        return bool(self.quat.ndim == 1)


def _count(fun: str, num: Any) -> int:
    n = _util.concrete_int(fun, num, "the argument num")
    if n < 0:
        raise ValueError(f"{_fun(fun)}: the argument num must be non-negative, got {n}")
    return n


# --- Slerp ------------------------------------------------------------------------------------
class Slerp(NamedTuple):
    """Spherical linear interpolation between key rotations at increasing
    ``times``: between keys ``i`` and ``i + 1`` it turns at constant rate about
    one axis. Build it with :meth:`init`; call it with times."""

    times: Array
    timedelta: Array
    rotations: Rotation
    rotvecs: Array

    @classmethod
    def init(cls, times: ArrayLike, rotations: Rotation) -> Slerp:
        fun = _fun("Slerp.init")
        if not isinstance(rotations, Rotation):
            raise TypeError(f"{fun}: the argument rotations must be a Rotation, got "
                            f"{type(rotations).__name__}")
        if rotations.single or len(rotations) < 2:
            raise ValueError(f"{fun}: the argument rotations must hold at least 2 rotations")
        t = jnp.asarray(_util.operand(fun, times, "times"), rotations.quat.dtype)
        if t.ndim != 1 or t.shape[0] != len(rotations):
            raise ValueError(f"{fun}: the argument times must be 1-D with one time per "
                             f"rotation ({len(rotations)}), got shape {t.shape}")
        starts = Rotation(rotations.quat[:-1])
        steps = starts.inv() * Rotation(rotations.quat[1:])
        return cls(t, jnp.diff(t), starts, steps.as_rotvec())

    def __call__(self, times: ArrayLike) -> Rotation:
        fun = _fun("Slerp")
        t = jnp.asarray(_util.operand(fun, times, "times"), self.times.dtype)
        if t.ndim > 1:
            raise ValueError(f"{fun}: times must be a scalar or 1-D, got shape {t.shape}")
        single = t.ndim == 0
        t = jnp.atleast_1d(t)
        segment = jnp.clip(jnp.searchsorted(self.times, t) - 1, 0, self.timedelta.shape[0] - 1)
        fraction = (t - self.times[segment]) / self.timedelta[segment]
        turn = Rotation.from_rotvec(self.rotvecs[segment] * fraction[:, None])
        result: Rotation = self.rotations[segment] * turn
        return result[0] if single else result



