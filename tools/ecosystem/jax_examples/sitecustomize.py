"""Copied into each example's scratch folder by ``run_jax_examples.py``,
which puts that folder on ``PYTHONPATH``, so Python runs it at start-up.

Some of JAX's examples draw their data from NumPy's global random state
without seeding it (``kernel_lsq.py``); seeding it here makes the run on
lamina and the run on JAX see the same data, so their printed numbers can be
compared. Importing ``jax`` itself draws from that state (JAX 0.10.2 moves it
by 614 numbers; lamina's import draws nothing), so the modules named in
``LAMINA_EXAMPLE_PRELOAD`` (``jax`` for the run on JAX) are imported before
the seed is set. Nothing else is changed.
"""

import importlib
import os

import numpy.random

for _name in filter(None, os.environ.get("LAMINA_EXAMPLE_PRELOAD", "").split(",")):
    importlib.import_module(_name)

numpy.random.seed(0)
