"""``lamina.stages``: the ahead-of-time stages ``Traced`` -> ``Lowered`` -> ``Compiled``.

``Traced``/``Lowered``/``Compiled`` are the runtime's classes (shared with
``pmap``); ``jit`` returns their subclasses ``JitTraced``/``JitLowered``/``JitCompiled``.
"""

from lamina_interpreters_pxla.stages import ArgInfo, Compiled, Lowered, OutInfo, Traced
from lamina_sharded_jit.stages import (
    CompilerOptions,
    JitCompiled,
    JitLowered,
    JitTraced,
    Wrapped,
)

__all__ = ["ArgInfo", "Compiled", "CompilerOptions", "JitCompiled", "JitLowered", "JitTraced",
           "Lowered", "OutInfo", "Traced", "Wrapped"]
