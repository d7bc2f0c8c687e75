import os
import sys
from collections.abc import Iterator

import pytest

# Lets the tests import the shared helpers (tc_testing, numpy_reference) by name.
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from lamina_tracing_core import core  # noqa: E402
from numpy_reference import installed  # noqa: E402

# Every jaxpr a transformation produces in these tests is checked against the
# debug-info contract (validate_jaxpr_debug_info).
core.config.validate_debug_info = True


@pytest.fixture(autouse=True, scope="module")
def _numpy_reference_impls() -> Iterator[None]:
    """Eager values come from the numpy reference interpreter (numpy_reference's
    one table) while this folder's tests run; the impl rules are restored after
    each module, so nothing leaks into other packages' tests in the same run."""
    with installed():
        yield
