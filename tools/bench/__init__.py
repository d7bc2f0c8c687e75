"""lamina's benchmark harness: lamina vs jax, workload by workload.

Run ``python -m tools.bench --list`` for the workloads and
``python -m tools.bench --all`` (or ``hatch run bench:all``) for the full run;
see README.md for how to read the figures. This package imports only the
standard library at import time; lamina and jax are loaded inside workers.
"""
