import lamina_sharded_jit


def test_version() -> None:
    assert lamina_sharded_jit.__version__.count('.') == 2
