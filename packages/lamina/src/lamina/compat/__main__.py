"""``python -m lamina.compat script.py [args]``: runs a JAX script on lamina.

The alias (:func:`lamina.compat.install`) is installed first, then the script
runs as ``python script.py [args]`` would run it: as ``__main__``, with
``sys.argv == [script.py, args...]`` and the script's folder first on
``sys.path``. ``python -m lamina.compat -m module [args]`` runs a module the
same way (``python -m module``).
"""

from __future__ import annotations

import os
import runpy
import sys

from lamina.compat import install

_USAGE = "usage: python -m lamina.compat (script.py | -m module) [args...]"


def main(argv: list[str]) -> int:
    """Runs the script or module ``argv`` names under the alias; returns the exit status."""
    if not argv or argv[0] in ("-h", "--help") or (argv[0] == "-m" and len(argv) < 2):
        print(_USAGE, file=sys.stderr)
        return 0 if argv and argv[0] in ("-h", "--help") else 2
    install()
    if argv[0] == "-m":
        sys.argv = [argv[1], *argv[2:]]
        sys.path[0] = os.getcwd()
        runpy.run_module(argv[1], run_name="__main__", alter_sys=True)
        return 0
    script = argv[0]
    sys.argv = [script, *argv[1:]]
    sys.path[0] = os.path.dirname(os.path.abspath(script))
    runpy.run_path(script, run_name="__main__")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
