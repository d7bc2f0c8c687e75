import lamina_tracing_core


def test_version() -> None:
    assert lamina_tracing_core.__version__.count('.') == 2
