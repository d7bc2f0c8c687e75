import lamina_interpreters_pxla


def test_version() -> None:
    assert lamina_interpreters_pxla.__version__.count('.') == 2
