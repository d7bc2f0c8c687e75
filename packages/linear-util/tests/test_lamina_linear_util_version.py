import lamina_linear_util


def test_version() -> None:
    assert lamina_linear_util.__version__.count('.') == 2
