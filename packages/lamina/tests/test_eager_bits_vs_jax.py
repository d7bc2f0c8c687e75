"""Eager library functions give JAX 0.10.2's exact bits.

JAX runs many library functions (``jnp.cross``, ``jnp.linalg.det``,
``jax.nn.standardize``, ...) as one compiled program even when called eagerly,
and XLA's rewrites inside that program (a division by a broadcast turned into
a product by reciprocals, fused elementwise chains) decide the last bits. The
expected values below are JAX's own results on CPU (``tobytes().hex()`` of the
eager result, then of the result under ``jax.jit`` with the inputs as
arguments), recorded from the peer environment; lamina must give the same bits
both ways.
"""

from __future__ import annotations

from typing import Any, Callable

import numpy as np
import pytest

import lamina
import lamina.nn as nn
import lamina.numpy as jnp
import lamina.scipy.special as special
import lamina.scipy.stats as stats


def _inputs() -> dict[str, np.ndarray]:
    rng = np.random.default_rng(20261203)

    def normal(*shape: int) -> np.ndarray:
        return rng.standard_normal(shape).astype(np.float32)

    x56, x345, x7 = normal(5, 6), normal(3, 4, 5), normal(7)
    sq = normal(5, 5)
    s3 = normal(2, 3, 3)
    xs = np.sort(normal(9))
    ys, xq = normal(9), normal(11)
    tall, b6 = normal(6, 4), normal(6)
    withnan = x56.copy()
    withnan[1, 2] = withnan[3, 0] = np.nan
    pos56 = rng.uniform(0.1, 5, (5, 6)).astype(np.float32)
    w6 = rng.uniform(0.05, 0.95, 6).astype(np.float32)
    prob56 = rng.uniform(0.05, 0.95, (5, 6)).astype(np.float32)
    return dict(prob56=prob56, pos56=pos56, w6=w6, x56=x56, x345=x345, x7=x7, sq=sq, s3=s3, xs=xs, ys=ys, xq=xq, tall=tall, b6=b6,
                withnan=withnan)


INPUTS = _inputs()

# name -> (function of the named inputs, their names)
CASES: dict[str, tuple[Callable[..., Any], tuple[str, ...]]] = {
    "nn.squareplus": (lambda x: nn.squareplus(x), ("x345",)),
    "nn.logmeanexp": (lambda x: nn.logmeanexp(x), ("x7",)),
    "nn.standardize": (lambda x: nn.standardize(x), ("x56",)),
    "nn.standardize_axis0": (lambda x: nn.standardize(x, axis=0), ("x345",)),
    "special.softmax": (lambda x: special.softmax(x), ("x56",)),
    "special.log_softmax": (lambda x: special.log_softmax(x), ("x345",)),
    "special.softmax_axis1": (lambda x: special.softmax(x, axis=1), ("x345",)),
    "cross": (lambda x: jnp.cross(x[:, :3], x[:, 3:]), ("x56",)),
    "linalg.cross": (lambda x: jnp.linalg.cross(x[:, :3], x[:, 3:]), ("x56",)),
    "interp": (lambda q, xp, fp: jnp.interp(q, xp, fp), ("xq", "xs", "ys")),
    "vander": (lambda x: jnp.vander(x, 4), ("x7",)),
    "polyfit": (lambda x, y: jnp.polyfit(x, y, 3), ("xs", "ys")),
    "linalg.cond_fro": (lambda a: jnp.linalg.cond(a, "fro"), ("sq",)),
    "linalg.det_3x3": (lambda a: jnp.linalg.det(a), ("s3",)),
    "linalg.det_2x2": (lambda a: jnp.linalg.det(a[:, :2, :2]), ("s3",)),
    "linalg.matrix_power_3": (lambda a: jnp.linalg.matrix_power(a, 3), ("sq",)),
    "linalg.lstsq_resid": (lambda a, b: jnp.linalg.lstsq(a, b)[1], ("tall", "b6")),
    "var_axis1": (lambda x: jnp.var(x, axis=1), ("x56",)),
    "std_axis1": (lambda x: jnp.std(x, axis=1), ("x56",)),
    "var_no_dof_left": (lambda x: jnp.var(x, axis=1, ddof=6), ("x56",)),
    "nanvar": (lambda x: jnp.nanvar(x), ("withnan",)),
    "nanvar_axis1": (lambda x: jnp.nanvar(x, axis=1, ddof=1), ("withnan",)),
    "nanstd_axis0": (lambda x: jnp.nanstd(x, axis=0), ("withnan",)),
    "logaddexp2": (lambda x: jnp.logaddexp2(x, x[::-1]), ("x56",)),
    "logaddexp": (lambda x: jnp.logaddexp(x, x[::-1]), ("x56",)),
    "average_weighted": (lambda x, w: jnp.average(x, axis=1, weights=w), ("x56", "w6")),
    "linalg.multi_dot": (lambda a, v: jnp.linalg.multi_dot([a, a.T, v[:5]]), ("sq", "x7")),
    "special.gammainc_scalar_a": (lambda x: special.gammainc(2.0, x), ("pos56",)),
    "special.gammaincc_scalar_a": (lambda x: special.gammaincc(2.0, x), ("pos56",)),
    "special.ndtri": (lambda q: special.ndtri(q), ("prob56",)),
    "stats.norm.ppf": (lambda q: stats.norm.ppf(q), ("prob56",)),
    "stats.gamma.cdf": (lambda x: stats.gamma.cdf(x, 2.0), ("pos56",)),
}

# JAX 0.10.2 on CPU: (eager bits, jitted bits), as hex of the float32 bytes.
EXPECTED: dict[str, tuple[str, str]] = {
    'nn.squareplus': ('30d3b33f4ec6873f0480223ffc49c73fb9dc553fe2d88a3f828c08401295823fd09d273f5490d93eee3ca33f68cc9c3f10efab3f5de3aa3f29f4563ff5af623f6609cb3f283f11402af7333fe2d7e73f320b513ffe2f953f1ad0353fb0380b3f7800113f1b96693f6c254b3f5230fa3edc4b1f3f6b7c043f5831b43fbde3bb3ffed9303faa4b003f0598763f5bae903f88adcb3f8ed1a93f312a783f3cff233f1cb9c83f05098d3f79451d3f601e154000d9d53f30c5863f2bc9713f8485b03f81fa493f5849213f47e0403f9fc78c3f1043ad3ec252923f750ea63f3f6c7e3fe608da3f1368473f9ca3df3f52372b3f',
        '30d3b33f4ec6873f0480223ffc49c73fb9dc553fe2d88a3f828c08401295823fd09d273f5490d93eee3ca33f68cc9c3f10efab3f5de3aa3f29f4563ff5af623f6609cb3f283f11402af7333fe2d7e73f320b513ffe2f953f1ad0353fb0380b3f7800113f1b96693f6c254b3f5230fa3edc4b1f3f6b7c043f5831b43fbde3bb3ffed9303faa4b003f0598763f5bae903f88adcb3f8ed1a93f312a783f3cff233f1cb9c83f05098d3f79451d3f601e154000d9d53f30c5863f2bc9713f8485b03f81fa493f5849213f47e0403f9fc78c3f1043ad3ec252923f750ea63f3f6c7e3fe608da3f1368473f9ca3df3f52372b3f'),
    'nn.logmeanexp': ('e6a3083f',
        'e6a3083f'),
    'nn.standardize': ('1a4383bf2bd0aabfbeb550beddcfd03f39b0163f1508b03e7f8494bf7b4e21bff2cc9a3f63261e3fc5e58ebf5d318a3f6056253e25cd0e3f8fd3ab3fc15cf7bf664a9dbe6953363e2908863f5fde5a3f341882bfab4a893f653e4abf9c8a95bf9d233d3fc099a5bf77e5ac3fbb0b99bfcb182c3fc1788bbe',
        '1a4383bf2bd0aabfbeb550beddcfd03f39b0163f1508b03e7f8494bf7b4e21bff2cc9a3f63261e3fc5e58ebf5d318a3f6056253e25cd0e3f8fd3ab3fc15cf7bf664a9dbe6953363e2908863f5fde5a3f341882bfab4a893f653e4abf9c8a95bf9d233d3fc099a5bf77e5ac3fbb0b99bfcb182c3fc1788bbe'),
    'nn.standardize_axis0': ('86cafc3ea68491bffdf4d6bed4469c3ebe0959be472d653f96dab23f8f18b43e727addbe30b19fbf838c033fc7b65dbe74f6933fb5a05f3f5b6186bf40d799bfabcb40bff798a03fe9a08abffce2b43fe37fb2bf0fc9a53f4d86b03f4e9bacbf516e8dbf019cb2bf9c3163bf135aaebf651a73bfa015413d2953623f5dc3a83faea3023ee230b3bfae5897be55809f3feea628bfc6e77ebd8bf27bbe3fd940bf819a663f642322be0d9275bf9989853f898fa83fba0a003f8f8302bff053813fd7ebb03f80a8993fd6efb2bf830c8dbfea4aa4bf11c1063f8737ac3fb62235bd2ab9b43fb9a198bf3a1faa3fb7ec28bf',
        '86cafc3ea68491bffdf4d6bed4469c3ebe0959be472d653f96dab23f8f18b43e727addbe30b19fbf838c033fc7b65dbe74f6933fb5a05f3f5b6186bf40d799bfabcb40bff798a03fe9a08abffce2b43fe37fb2bf0fc9a53f4d86b03f4e9bacbf516e8dbf019cb2bf9c3163bf135aaebf651a73bfa015413d2953623f5dc3a83faea3023ee230b3bfae5897be55809f3feea628bfc6e77ebd8bf27bbe3fd940bf819a663f642322be0d9275bf9989853f898fa83fba0a003f8f8302bff053813fd7ebb03f80a8993fd6efb2bf830c8dbfea4aa4bf11c1063f8737ac3fb62235bd2ab9b43fb9a198bf3a1faa3fb7ec28bf'),
    'special.softmax': ('9e4f903b8d3e443bd743493c35b4f83d0152073d695ec73cd9ff5e3c3775853c4d01f93c96bfcb3c0f58623cd149ee3ceb93f53cf8f8453d3bcefe3d1a841d3b5f9a8b3c8589fa3c0b296e3d99e84d3d89af473c2fcc723dc0046d3c4ffc313c13e8453d48b49c3bc988c63d1435af3bf277373dbf7c7a3c',
        '9e4f903b8d3e443bd743493c35b4f83d0152073d695ec73cd9ff5e3c3775853c4d01f93c96bfcb3c0f58623cd149ee3ceb93f53cf8f8453d3bcefe3d1a841d3b5f9a8b3c8589fa3c0b296e3d99e84d3d89af473c2fcc723dc0046d3c4ffc313c13e8453d48b49c3bc988c63d1435af3bf277373dbf7c7a3c'),
    'special.log_softmax': ('77a470c046b98ac07a99acc00c7662c070129ac0bb4989c07d7232c0ab388dc0d26baac06c35ccc09c907dc03f6c81c0c6ad76c0447e77c0b6bd99c03d4d96c01ad45fc0fef327c01e86a5c07c694cc0a88e9bc084a884c098d4a4c047f0b7c0d0deb4c03c5f94c09f6e9dc07a59c0c08e03aec09ec5bbc0945d70c09fa76ac0f4b6a6c0bc50bec069e590c0d8a386c086615fc0765478c04e7d90c0c6f3abc04e7361c0884888c0dcedaec0515923c0216258c01c338bc0622892c08c2573c0abcf9dc06b21adc0f4dca0c0606688c09c3be2c068e985c0cb4d7bc030e58ec0da8d55c0e4a79ec076cf51c096f1a8c0',
        '77a470c046b98ac07a99acc00c7662c070129ac0bb4989c07d7232c0ab388dc0d26baac06c35ccc09c907dc03f6c81c0c6ad76c0447e77c0b6bd99c03d4d96c01ad45fc0fef327c01e86a5c07c694cc0a88e9bc084a884c098d4a4c047f0b7c0d0deb4c03c5f94c09f6e9dc07a59c0c08e03aec09ec5bbc0945d70c09fa76ac0f4b6a6c0bc50bec069e590c0d8a386c086615fc0765478c04e7d90c0c6f3abc04e7361c0884888c0dcedaec0515923c0216258c01c338bc0622892c08c2573c0abcf9dc06b21adc0f4dca0c0606688c09c3be2c068e985c0cb4d7bc030e58ec0da8d55c0e4a79ec076cf51c096f1a8c0'),
    'special.softmax_axis1': ('6b05b73e7325db3db5b6283d21ddf53e0dbb0c3e9f68573e13a9003f90e4e03d3da8a43d02fcea3c048f953e3f88123e769f443e1000b13e99310e3e816e0f3eb9407d3e2530283f00e3bf3df7ec313fa9520e3e36bf4c3ec8b02c3e63d41a3e5206253eee26323e42cfbc3d0f28923d3221533e6f02053e19f3d63eea4aa53edad0223e2cb6fd3d83f3fd3e1dd0883ea921c53e96da193fd6cb043f3c105a3e59e3f93e7538433ec1e8fa3d9379103f5995093fad825a3e55630f3ed22b263f6018563df1a6903d3a12de3dc082423e9bf9c93cade8e13dbe739f3e85ad423ebc70f53e1f9d503ea3cf8b3e46dfa43d',
        '6b05b73e7325db3db5b6283d21ddf53e0dbb0c3e9f68573e13a9003f90e4e03d3da8a43d02fcea3c048f953e3f88123e769f443e1000b13e99310e3e816e0f3eb9407d3e2530283f00e3bf3df7ec313fa9520e3e36bf4c3ec8b02c3e63d41a3e5206253eee26323e42cfbc3d0f28923d3221533e6f02053e19f3d63eea4aa53edad0223e2cb6fd3d83f3fd3e1dd0883ea921c53e96da193fd6cb043f3c105a3e59e3f93e7538433ec1e8fa3d9379103f5995093fad825a3e55630f3ed22b263f6018563df1a6903d3a12de3dc082423e9bf9c93cade8e13dbe739f3e85ad423ebc70f53e1f9d503ea3cf8b3e46dfa43d'),
    'cross': ('4af8b0bdb26125bfbb052c40b0d0993da1ff603e25ab523e7c172d3fe69080c0b36ae23f941940bf5834e13d327fa8bfc9084abfcd17ebbf645ba4bf',
        '4af8b0bdb26125bfbb052c40b0d0993da1ff603e25ab523e7c172d3fe69080c0b36ae23f941940bf5834e13d327fa8bfc9084abfcd17ebbf645ba4bf'),
    'linalg.cross': ('4af8b0bdb26125bfbb052c40b0d0993da1ff603e25ab523e7c172d3fe69080c0b36ae23f941940bf5834e13d327fa8bfc9084abfcd17ebbf645ba4bf',
        '4af8b0bdb26125bfbb052c40b0d0993da1ff603e25ab523e7c172d3fe69080c0b36ae23f941940bf5834e13d327fa8bfc9084abfcd17ebbf645ba4bf'),
    'interp': ('1dd31dbe7b416cbfe09ca73ed7d788beb8e0983f7ac69abe69d2973e8424563ea63746bf54d38abf4b22b13e',
        '1dd31dbe7b416cbfe09ca73ed7d788beb8e0983f7ac69abe69d2973e8424563ea63746bf54d38abf4b22b13e'),
    'vander': ('d1a7983ea381e43eda052b3f0000803f2241a3408daa3d40d959dc3f0000803f172db6be748b003f746735bf0000803ff40056bfd82c633f452871bf0000803f4f054c3d1ba00a3e0462bc3e0000803f744faa3b1dcdf53c7b60313e0000803f38df10bbaa038b3cbe6405be0000803f',
        'd1a7983ea381e43eda052b3f0000803f2241a3408daa3d40d959dc3f0000803f172db6be748b003f746735bf0000803ff40056bfd82c633f452871bf0000803f4f054c3d1ba00a3e0462bc3e0000803f744faa3b1dcdf53c7b60313e0000803f38df10bbaa038b3cbe6405be0000803f'),
    'polyfit': ('c9ee393f4e6dbe3ef05c62bf2c63bbbe',
        'c9ee393f4e6dbe3ef05c62bf2c63bbbe'),
    'linalg.cond_fro': ('03d52541',
        '03d52541'),
    'linalg.det_3x3': ('39235d3f0de4613e',
        '39235d3f0de4613e'),
    'linalg.det_2x2': ('96b0663f7039ff3d',
        '96b0663f7039ff3d'),
    'linalg.matrix_power_3': ('84c1683f15ed43c1bac869bf585c4440302020c13ff5df40442656c02c140241e224414177bb6fc0b044b2c0f0e0b440b4255041437c2ac07dbbb9c15f5224409967913f99fe0a41290b9740abc6d1c0e30b03407ee72b403967a7c1a38169c1c0789041',
        '84c1683f15ed43c1bac869bf585c4440302020c13ff5df40442656c02c140241e224414177bb6fc0b044b2c0f0e0b440b4255041437c2ac07dbbb9c15f5224409967913f99fe0a41290b9740abc6d1c0e30b03407ee72b403967a7c1a38169c1c0789041'),
    'linalg.lstsq_resid': ('fcd3a640',
        'fcd3a640'),
    'var_axis1': ('a57fc73f4c6aeb3d3fe6b93f8ac7123f61bca53f',
        'a67fc73f4c6aeb3d3fe6b93f8ac7123f61bca53f'),
    'std_axis1': ('a0cc9f3fca96ad3eb6419a3f18d8413fa2a6913f',
        'a1cc9f3fca96ad3eb6419a3f18d8413fa2a6913f'),
    'var_no_dof_left': ('0000c07f0000c07f0000c07f0000c07f0000c07f',
        '0000c07f0000c07f0000c07f0000c07f0000c07f'),
    'nanvar': ('77c4873f',
        '77c4873f'),
    'nanvar_axis1': ('fb65ef3f86d1f93d4b14df3ff9e22b3f0ee2c63f',
        'fb65ef3f86d1f93d4b14df3ff9e22b3f0ee2c63f'),
    'nanstd_axis0': ('a10a683fa970943fabe68c3fff26bb3fd634f33e44f3cc3e',
        'a10a683fa970943fabe68c3fff26bb3fd634f33e44f3cc3e'),
    'logaddexp2': ('1eef8d3f96952bbf987aee3fe8d4f73f3aa5d13fe24c753fe605bf3f467eb83fcb18813f959fd83f1d05213fe4b9703f0cb3b03f10d7ed3fed6e3340ee4f92bfa3ce503f3242b33fe605bf3f467eb83fcb18813f959fd83f1d05213fe4b9703f1eef8d3f96952bbf987aee3fe8d4f73f3aa5d13fe24c753f',
        '1eef8d3f96952bbf987aee3fe8d4f73f3aa5d13fe24c753fe605bf3f467eb83fcb18813f959fd83f1d05213fe4b9703f0cb3b03f10d7ed3fed6e3340ee4f92bfa3ce503f3242b33fe605bf3f467eb83fcb18813f959fd83f1d05213fe4b9703f1eef8d3f96952bbf987aee3fe8d4f73f3aa5d13fe24c753f'),
    'logaddexp': ('09ed713f510778bf8532d63f8e47e93fc3d1aa3fd3d3283f356ba03f50cd963fb1423b3fc0cfb43f17f9a43e6aec2a3f186c893f1c90c63f74cb1f40e296b9bfbb40023f3efb8b3f356ba03f50cd963fb1423b3fc0cfb43f17f9a43e6aec2a3f09ed713f510778bf8532d63f8e47e93fc3d1aa3fd3d3283f',
        '09ed713f510778bf8532d63f8e47e93fc3d1aa3fd3d3283f356ba03f50cd963fb1423b3fc0cfb43f17f9a43e6aec2a3f186c893f1c90c63f74cb1f40e296b9bfbb40023f3efb8b3f356ba03f50cd963fb1423b3fc0cfb43f17f9a43e6aec2a3f09ed713f510778bf8532d63f8e47e93fc3d1aa3fd3d3283f'),
    'average_weighted': ('7e7ae5bef98c41bd792aff3ecb7c363efe29d23e',
        '7e7ae5bef98c41bd792aff3ecb7c363efe29d23e'),
    'linalg.multi_dot': ('ecd71d41e9e4d340d07a1fc1a0dc9a3f86e72ec0',
        'ecd71d41e9e4d340d07a1fc1a0dc9a3f86e72ec0'),
    'special.gammainc_scalar_a': ('0a9eb63d7294753f84ad1a3ffdc9bb3ed9ce663f4cb28b3ca888283f47b4613f0f05753facc7d43ea25a3b3ca438693f6303593fc3e76e3f4b0d643fbc42583f304fa13d89776d3ffff4703fad67593fa3d05e3fe76a4d3d6a16713f055d593e5b2d703f7ae0313fd779503f7f72903ded97283f6648623f',
        '0a9eb63d7294753f84ad1a3ffdc9bb3ed9ce663f4cb28b3ca888283f47b4613f0f05753facc7d43ea25a3b3ca438693f6303593fc3e76e3f4b0d643fbc42583f304fa13d89776d3ffff4703fad67593fa3d05e3fe76a4d3d6a16713f055d593e5b2d703f7ae0313fd779503f7f72903ded97283f6648623f'),
    'special.ndtri': ('a12823bf9c15643f1ece63bf6d59c13ff0d96abf57d785bfe2228ebff82a2ebe628a1f3f10fc52bf82a6933ff8378c3eed15ba3ee333013f6ef3543f791191bd6d02893eba2ba93f093512bf4f8c74bf40b527bedf8bc0bf029f573ecd0b303fbc9468be7be2f9be23c895be112cd3beb63b6dbff687e53e',
        'a12823bf9c15643f1ece63bf6d59c13ff0d96abf57d785bfe3228ebff82a2ebe628a1f3f10fc52bf83a6933ff8378c3eed15ba3ee333013f6ef3543f791191bd6d02893eba2ba93f093512bf4f8c74bf40b527bedf8bc0bf029f573ecd0b303fbc9468be7be2f9be23c895be112cd3beb63b6dbff687e53e'),
    'special.gammaincc_scalar_a': ('3f2c693fe5b8263df8a4ca3e021b223f3589c93d6ea27b3fb0eeae3ec95df23d17af2f3d2a9c153f95127d3fe13ab63d74f21b3eecc1883da695df3d0ef51e3e1ad66b3fb943943d16b0703d4b611a3e75bd043e5229733f61996e3dbfa8493f4b2a7d3d0c3f9c3ea6183e3eb0f16d3f26d0ae3ed0bced3d',
        '3f2c693fe5b8263df8a4ca3e021b223f3589c93d6ea27b3fb0eeae3ec95df23d17af2f3d2a9c153f95127d3fe13ab63d74f21b3eecc1883da695df3d0ef51e3e1ad66b3fb943943d16b0703d4b611a3e75bd043e5229733f61996e3dbfa8493f4b2a7d3d0c3f9c3ea6183e3eb0f16d3f26d0ae3ed0bced3d'),
    'stats.norm.ppf': ('a12823bf9c15643f1ece63bf6d59c13ff0d96abf57d785bfe2228ebff82a2ebe628a1f3f10fc52bf82a6933ff8378c3eed15ba3ee333013f6ef3543f791191bd6d02893eba2ba93f093512bf4f8c74bf40b527bedf8bc0bf029f573ecd0b303fbc9468be7be2f9be23c895be112cd3beb63b6dbff687e53e',
        'a12823bf9c15643f1ece63bf6d59c13ff0d96abf57d785bfe3228ebff82a2ebe628a1f3f10fc52bf83a6933ff8378c3eed15ba3ee333013f6ef3543f791191bd6d02893eba2ba93f093512bf4f8c74bf40b527bedf8bc0bf029f573ecd0b303fbc9468be7be2f9be23c895be112cd3beb63b6dbff687e53e'),
    'stats.gamma.cdf': ('0a9eb63d7294753f84ad1a3ffdc9bb3ed9ce663f4cb28b3ca888283f47b4613f0f05753facc7d43ea25a3b3ca438693f6303593fc3e76e3f4b0d643fbc42583f304fa13d89776d3ffff4703fad67593fa3d05e3fe76a4d3d6a16713f055d593e5b2d703f7ae0313fd779503f7f72903ded97283f6648623f',
        '0a9eb63d7294753f84ad1a3ffdc9bb3ed9ce663f4cb28b3ca888283f47b4613f0f05753facc7d43ea25a3b3ca438693f6303593fc3e76e3f4b0d643fbc42583f304fa13d89776d3ffff4703fad67593fa3d05e3fe76a4d3d6a16713f055d593e5b2d703f7ae0313fd779503f7f72903ded97283f6648623f'),
}


def _bits(x: Any) -> str:
    return np.asarray(x).tobytes().hex()


@pytest.mark.parametrize("name", sorted(CASES))
def test_eager_bits_match_jax(name: str) -> None:
    fun, arg_names = CASES[name]
    assert _bits(fun(*(INPUTS[a] for a in arg_names))) == EXPECTED[name][0]


@pytest.mark.parametrize("name", sorted(CASES))
def test_jitted_bits_match_jax(name: str) -> None:
    fun, arg_names = CASES[name]
    assert _bits(lamina.jit(fun)(*(INPUTS[a] for a in arg_names))) == EXPECTED[name][1]


def test_no_degrees_of_freedom_left_is_nan() -> None:
    # JAX 0.10.2: NaN (not inf, nor a negative variance) once ddof >= N.
    x = np.arange(7.0, dtype=np.float32)
    for ddof in (7, 8):
        assert np.isnan(jnp.var(x, ddof=ddof))
        assert np.isnan(jnp.nanvar(x, ddof=ddof))
        assert np.isnan(lamina.jit(lambda v, d=ddof: jnp.var(v, ddof=d))(x))


def test_scipy_softmax_defaults_to_all_axes() -> None:
    x = INPUTS["x56"]
    assert np.isclose(float(jnp.sum(special.softmax(x))), 1.0, atol=1e-6)
    with pytest.raises(TypeError):
        special.softmax(x, 1)  # type: ignore[misc]  (axis is keyword-only, as JAX's)


def test_sample_frequencies_divide_once_in_float32() -> None:
    # JAX 0.10.2: k / float32(d * n), one float32 division per element.
    assert _bits(jnp.fft.fftfreq(7, 0.3)) == (
        "000000003ecff33e3ecf733f6edbb63f6edbb6bf3ecf73bf3ecff3be")
    assert _bits(jnp.fft.rfftfreq(7, 0.3)) == "000000003ecff33e3ecf733f6edbb63f"
