"""``python -m tools.bench``: see :mod:`tools.bench.harness`."""

from .harness import main

raise SystemExit(main())
