"""Shared setup for the tools' tests: import the tools as top-level modules."""

import sys
from pathlib import Path

TOOLS = Path(__file__).resolve().parent.parent

# release.py imports check_layers as a sibling module, as it does when run as a script.
if str(TOOLS) not in sys.path:
    sys.path.insert(0, str(TOOLS))

# The fixture trees are inputs for the tools, not tests.
collect_ignore_glob = ["fixtures/*"]
