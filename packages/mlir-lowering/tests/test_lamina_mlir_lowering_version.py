import lamina_mlir_lowering


def test_version() -> None:
    assert lamina_mlir_lowering.__version__.count('.') == 2
