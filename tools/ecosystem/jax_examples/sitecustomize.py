"""Copied into each example's scratch folder by ``run_jax_examples.py``,
which puts that folder on ``PYTHONPATH``, so Python runs it at start-up.

Some of JAX's examples draw their data from NumPy's global random state
without seeding it (``kernel_lsq.py``); seeding it here makes the run on
lamina and the run on JAX see the same data, so their printed numbers can be
compared. Nothing else is changed.
"""

import numpy.random

numpy.random.seed(0)
