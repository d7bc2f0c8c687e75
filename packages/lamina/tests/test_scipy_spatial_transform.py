"""Rotation and Slerp against scipy.spatial.transform (float32): every
conversion both ways, Euler sequences (intrinsic, extrinsic, symmetric,
gimbal lock), composition, inversion, means, application; jit, vmap and the
argument errors."""

from __future__ import annotations

import warnings
from typing import Any

import numpy as np
import pytest
from scipy.spatial.transform import Rotation as SciPyRotation
from scipy.spatial.transform import Slerp as SciPySlerp

import lamina
from lamina.scipy.spatial.transform import Rotation, Slerp

_RNG = np.random.default_rng(1)
_Q = _RNG.standard_normal((6, 4))
_Q /= np.linalg.norm(_Q, axis=1, keepdims=True)
_V = _RNG.standard_normal((6, 3)).astype(np.float32)
_SEQUENCES = ("xyz", "ZXY", "zxz", "XYX", "yzx", "ZYZ")
_WEIGHTS = np.float32([1, 2, 3, 0.5, 0.1, 1])


def _close(got: Any, want: Any, atol: float = 3e-5) -> None:
    got = np.asarray(got)
    assert got.shape == np.shape(want)
    np.testing.assert_allclose(got, want, atol=atol, rtol=0)


def _conversions(q: Any, m: Any, rv: Any, mrp: Any, v: Any) -> dict[str, Any]:
    r = Rotation.from_quat(q)
    out = dict(
        matrix=r.as_matrix(), rotvec=r.as_rotvec(), rotvec_deg=r.as_rotvec(degrees=True),
        mrp=r.as_mrp(), inv=r.inv().as_quat(), magnitude=r.magnitude(),
        apply=r.apply(v), apply_inv=r.apply(v, inverse=True), apply_one=r[0].apply(v),
        from_matrix=Rotation.from_matrix(m).as_quat(canonical=True),
        from_rotvec=Rotation.from_rotvec(rv).as_quat(canonical=True),
        from_mrp=Rotation.from_mrp(mrp).as_quat(canonical=True),
        compose=(r * r[::-1]).as_quat(canonical=True),
        mean=r.mean().as_quat(canonical=True),
        weighted_mean=r.mean(_WEIGHTS).as_quat(canonical=True),
        concatenate=Rotation.concatenate([r, r[0]]).as_quat(),
        scalar_first=r.as_quat(scalar_first=True),
    )
    for seq in _SEQUENCES:
        out["euler_" + seq] = r.as_euler(seq)
    return out


def test_conversions_match_scipy_under_jit() -> None:
    s = SciPyRotation.from_quat(_Q)
    f32 = np.float32
    got = lamina.jit(_conversions)(_Q.astype(f32), s.as_matrix().astype(f32),
                                   s.as_rotvec().astype(f32), s.as_mrp().astype(f32), _V)
    v = _V.astype(np.float64)
    want = dict(
        matrix=s.as_matrix(), rotvec=s.as_rotvec(), rotvec_deg=s.as_rotvec(degrees=True),
        mrp=s.as_mrp(), inv=s.inv().as_quat(), magnitude=s.magnitude(),
        apply=s.apply(v), apply_inv=s.apply(v, inverse=True), apply_one=s[0].apply(v),
        from_matrix=s.as_quat(canonical=True), from_rotvec=s.as_quat(canonical=True),
        from_mrp=s.as_quat(canonical=True),
        compose=(s * s[::-1]).as_quat(canonical=True), mean=s.mean().as_quat(canonical=True),
        weighted_mean=s.mean(_WEIGHTS).as_quat(canonical=True),
        concatenate=SciPyRotation.concatenate([s, s[0]]).as_quat(),
        scalar_first=s.as_quat(scalar_first=True),
    )
    for seq in _SEQUENCES:
        want["euler_" + seq] = s.as_euler(seq)
    for name, value in want.items():
        _close(got[name], value, atol=3e-3 if name == "rotvec_deg" else 1e-4)


def test_from_euler_and_gimbal_lock_match_scipy() -> None:
    s = SciPyRotation.from_quat(_Q)

    def build(angles: dict[str, Any]) -> dict[str, Any]:
        return {seq: Rotation.from_euler(seq, a).as_quat(canonical=True)
                for seq, a in angles.items()}

    angles = {seq: s.as_euler(seq) for seq in _SEQUENCES}
    got = lamina.jit(build)({k: v.astype(np.float32) for k, v in angles.items()})
    for seq, a in angles.items():
        _close(got[seq], SciPyRotation.from_euler(seq, a).as_quat(canonical=True))
    _close(Rotation.from_euler("z", np.float32(90), degrees=True).as_quat(),
           SciPyRotation.from_euler("z", 90, degrees=True).as_quat())
    locked = SciPyRotation.from_euler("zxz", [[0.3, 0.0, 0.2], [0.1, np.pi, 0.4]])
    tilted = SciPyRotation.from_euler("xyz", [[0.3, np.pi / 2, 0.2], [0.1, 0.0, 0.4]])
    ours, ours_tilted = (Rotation.from_quat(r.as_quat().astype(np.float32))
                         for r in (locked, tilted))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # SciPy warns of the gimbal lock
        for rot, ref, seq in ((ours, locked, "zxz"), (ours, locked, "ZXZ"),
                              (ours_tilted, tilted, "xyz"), (ours_tilted, tilted, "XYZ")):
            _close(rot.as_euler(seq), ref.as_euler(seq), atol=2e-3)


def test_slerp_identity_random_and_vmap() -> None:
    times = [0, 1, 3, 4, 5, 7]
    s = SciPyRotation.from_quat(_Q)

    def interpolate(t: Any, q: Any, at: Any, one: Any) -> tuple[Any, Any]:
        slerp = Slerp.init(t, Rotation.from_quat(q))
        single = slerp(one)
        assert single.single
        return slerp(at).as_quat(canonical=True), single.as_quat(canonical=True)

    at = np.float32([0, 0.5, 1, 2.2, 4.9, 7])
    many, one = lamina.jit(interpolate)(np.float32(times), _Q.astype(np.float32), at,
                                             np.float32(2.5))
    _close(many, SciPySlerp(times, s)(at).as_quat(canonical=True))
    _close(one, SciPySlerp(times, s)(2.5).as_quat(canonical=True))
    _close(Rotation.identity(3).as_quat(), SciPyRotation.identity(3).as_quat())
    drawn = Rotation.random(lamina.random.key(0), 5)
    assert len(drawn) == 5
    np.testing.assert_allclose(np.linalg.norm(np.asarray(drawn.quat), axis=-1), 1, rtol=1e-6)
    eulers = lamina.vmap(lambda q: Rotation.from_quat(q).as_euler("xyz"))(_Q.astype(np.float32))
    _close(eulers, s.as_euler("xyz"), atol=1e-4)


@pytest.mark.parametrize("call, error, words", [
    (lambda: Rotation.from_quat(np.ones(3)), ValueError, r"from_quat: the argument quat must"),
    (lambda: Rotation.from_matrix(np.eye(4)), ValueError, "from_matrix: the argument matrix"),
    (lambda: Rotation.from_rotvec(np.ones(4)), ValueError, "from_rotvec: the argument rotvec"),
    (lambda: Rotation.from_euler("xx", [1.0, 2.0]), ValueError, "consecutive axes"),
    (lambda: Rotation.from_euler("xY", [1.0, 2.0]), ValueError, "must all be from 'xyz'"),
    (lambda: Rotation.from_euler("xyz", [1.0, 2.0]), ValueError, "must have 3 entries"),
    (lambda: Rotation.identity().as_euler("xy"), ValueError, "as_euler: the argument seq"),
    (lambda: Rotation.identity()[0], TypeError, "not subscriptable"),
    (lambda: len(Rotation.identity()), TypeError, "has no len"),
    (lambda: Rotation.identity(3).mean(np.ones(2)), ValueError, "mean: the argument weights"),
    (lambda: Slerp.init([0.0, 1.0], Rotation.identity()), ValueError, "at least 2 rotations"),
    (lambda: Slerp.init([0.0, 1.0], np.ones((2, 4))), TypeError, "must be a Rotation"),
    (lambda: Slerp.init([0.0, 1.0, 2.0], Rotation.identity(2)), ValueError, "one time per"),
])
def test_bad_arguments(call: Any, error: type[Exception], words: str) -> None:
    with pytest.raises(error, match=words):
        call()
