import os
import sys

# Lets the tests import the shared helpers (tc_testing) by name.
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from lamina_tracing_core import core  # noqa: E402

# Every jaxpr a transformation produces in these tests is checked against the
# debug-info contract (validate_jaxpr_debug_info).
core.config.validate_debug_info = True
