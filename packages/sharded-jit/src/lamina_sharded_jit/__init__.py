"""jit with shardings, tracing caches, AOT stages and sharded_jit.

- :func:`jit` / :func:`eval_shape` (:mod:`~lamina_sharded_jit.api`): one code
  path for plain jit, jit with ``in_shardings``/``out_shardings`` and
  ``sharded_jit``; ``jit(f).trace/lower/eval_shape``;
- :data:`pjit_p` (:mod:`~lamina_sharded_jit.primitive`): the initial-style
  primitive with its JVP, batching, partial-eval, transpose and DCE rules;
  its impl (:mod:`~lamina_sharded_jit.execution`) and lowering
  (:mod:`~lamina_sharded_jit.lowering_rules`) rules;
- :func:`with_sharding_constraint` (:mod:`~lamina_sharded_jit.sharding_constraint`);
- :mod:`~lamina_sharded_jit.sharded_jit`: ``sharded_jit`` with partition counts;
- :mod:`~lamina_sharded_jit.export`: serialize a lowered function and call it back;
- :data:`config` / :func:`disable_jit` (:mod:`~lamina_sharded_jit.settings`).
"""

import os as _os

import lamina_interpreters_pxla as _pxla
import lamina_linear_util as _lu
import lamina_mlir_lowering as _ml
from lamina_mlir_lowering.rule_table import defer_rule_module as _defer_rule_module
from lamina_tracing_core.source_info import register_internal_directory as _register_dir

from lamina_sharded_jit.__about__ import __version__

# Frames of lamina's own packages are never "the user's line" of an equation.
for _module in (_lu, _ml, _pxla):
    if _module.__file__ is not None:
        _register_dir(_os.path.dirname(_os.path.dirname(_os.path.abspath(_module.__file__))))
_register_dir(_os.path.dirname(_os.path.dirname(_os.path.abspath(__file__))))

from lamina_sharded_jit import execution as _execution  # noqa: E402,F401  (impl rule)
# pjit's lowering rules load MLIR's dialects: registered at the first lowering.
_defer_rule_module("lamina_sharded_jit.lowering_rules")
from lamina_sharded_jit.api import (  # noqa: E402
    Jitted,
    ShapeDtypeStruct,
    clear_caches,
    eval_shape,
    jit,
    make_jaxpr,
)
from lamina_sharded_jit.primitive import pjit_p  # noqa: E402
from lamina_sharded_jit import shard_map as shard_map  # noqa: E402  (the module; impl rule)
from lamina_sharded_jit.settings import config, disable_jit  # noqa: E402
from lamina_sharded_jit.sharding_constraint import (  # noqa: E402
    sharding_constraint_p,
    with_sharding_constraint,
)
from lamina_sharded_jit.stages import JitCompiled, JitLowered, JitTraced  # noqa: E402

__all__ = [
    "__version__", "Jitted", "JitCompiled", "JitLowered", "JitTraced", "ShapeDtypeStruct",
    "clear_caches", "config", "disable_jit", "eval_shape", "jit", "make_jaxpr", "pjit_p",
    "sharding_constraint_p",
    "with_sharding_constraint",
]
