import lamina


def test_version() -> None:
    assert lamina.__version__.count('.') == 2
