"""The umbrella's public names: each one resolves, ``import lamina`` stays
lazy, and one idea has one function behind its names."""

from __future__ import annotations

import subprocess
import sys

import numpy as np

import lamina


def test_every_public_name_resolves() -> None:
    missing = []
    for name in lamina.__all__:
        try:
            getattr(lamina, name)
        except (AttributeError, ImportError) as err:
            missing.append(f"{name}: {err}")
    assert not missing


def test_typeof_is_the_one_value_to_aval_function() -> None:
    from lamina_sharded_jit.explicit_sharding import typeof
    from lamina_tracing_core.avals import get_aval

    # sharded-jit's typeof: get_aval's type, shown with its sharding over a mesh
    assert lamina.typeof is typeof
    value = np.ones((2, 3), np.float32)
    assert lamina.typeof(value) == get_aval(value)
    # a key array is no array to tracing's get_aval; its type for users is JAX's
    assert str(lamina.typeof(lamina.random.key(0))) == "key<fry>[]"
    aval = lamina.typeof(value)
    assert (aval.shape, aval.dtype) == ((2, 3), np.float32)
    assert lamina.typeof(1.0).weak_type


def test_dtypes_are_tracing_cores() -> None:
    from lamina_tracing_core import dtypes

    # lamina.dtypes wraps it to take JAX's allow_extended_dtype argument
    for t in (int, float, "float64", "uint64", np.complex128, dtypes.bfloat16):
        assert lamina.dtypes.canonicalize_dtype(t) == dtypes.canonicalize_dtype(t)
    assert lamina.dtypes.float0 == dtypes.float0
    assert lamina.dtypes.result_type(np.int8, 1.0) == np.float32


def test_plain_import_loads_no_layer() -> None:
    script = ("import sys, lamina\n"
              "loaded = [m for m in ('jaxlib', 'lamina_tracing_core', 'lamina_interpreters_pxla')\n"
              "          if m in sys.modules]\n"
              "assert not loaded, loaded\n")
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                          timeout=60)
    assert proc.returncode == 0, proc.stderr[-2000:]


def test_config_routes_to_the_owning_layer() -> None:
    from lamina_interpreters_pxla.config import config as runtime_config

    before = lamina.config.read("pmap_chunked_shards")
    try:
        lamina.config.update("pmap_chunked_shards", not before)
        assert runtime_config.pmap_chunked_shards is (not before)
    finally:
        lamina.config.update("pmap_chunked_shards", before)
    assert lamina.config.read("jax_enable_x64") is lamina.config.enable_x64
