"""Makes this directory's helpers (ml_build, ml_runner) importable by the tests."""

import os
import sys

_HERE = os.path.dirname(os.path.abspath(__file__))
if _HERE not in sys.path:
    sys.path.insert(0, _HERE)
