"""Counting XLA compilations through ``log_compiles``, for the cache workers.

The warm-start and multi-process cache workers (run as scripts from this
folder) both check that a restarted process compiles nothing; each counts the
``Finished XLA compilation`` lines lamina logs with ``log_compiles`` on.
"""

from __future__ import annotations

import logging
from typing import Any


def count_compiles(lx: Any) -> list[str]:
    """Turns ``log_compiles`` on and returns the list to which each XLA
    compilation's log line is appended from now on (not printed)."""
    compiles: list[str] = []

    class CountCompiles(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            if record.getMessage().startswith("Finished XLA compilation"):
                compiles.append(record.getMessage())

    logger = logging.getLogger("lamina.compiles")
    logger.addHandler(CountCompiles())
    logger.propagate = False
    lx.config.update("log_compiles", True)
    return compiles
