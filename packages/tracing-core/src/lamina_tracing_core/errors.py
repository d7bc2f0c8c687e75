"""Trace-time errors that name the culprit.

Each error about a traced value says which function was being traced and for
what (``while tracing the function f at file.py:12 for jit``) and, where it can
be found, which argument the value came from (``depends on the value of the
argument x['a']``). The tracer supplies that context through
``tracer._origin_message()`` (see ``core.Tracer``); this module only words
the messages, so it imports nothing from the tracing machinery.
"""

from __future__ import annotations

from typing import Any


def _origin(tracer: Any) -> str:
    describe = getattr(tracer, "_origin_message", None)
    if describe is None:
        return ""
    try:
        return str(describe())
    except Exception as e:  # the error message must never itself fail
        return f"(could not describe where the value came from: {e!r})"


def _aval_str(tracer: Any) -> str:
    aval = getattr(tracer, "aval", None)
    return str(aval) if aval is not None else type(tracer).__name__


class LaminaTypeError(TypeError):
    """Base of lamina's trace-time type errors."""


class ConcretizationTypeError(LaminaTypeError):
    """A traced (abstract) value was used where a concrete Python value is
    needed: in Python control flow, as a shape, or converted with ``int``/
    ``float``/``bool``. The message names the function being traced and the
    argument the value depends on."""

    def __init__(self, tracer: Any, context: str = ""):
        self.tracer = tracer
        self.context = context
        message = ("Abstract tracer value encountered where concrete value is expected: "
                   f"traced array with shape {_aval_str(tracer)}\n")
        if context:
            message += context.rstrip("\n") + "\n"
        message += _origin(tracer)
        super().__init__(message)


def conversion_context(fun_name: str) -> str:
    return (f"The problem arose with the `{fun_name}` function. If trying to convert the "
            f"data type of a value, try using `x.astype({fun_name})` or "
            f"`lx.numpy.array(x, {fun_name})` instead.")


class TracerBoolConversionError(ConcretizationTypeError):
    """``bool()`` of a traced value (``if x > 0:`` inside ``jit``)."""

    def __init__(self, tracer: Any):
        self.tracer = tracer
        self.context = "bool"
        message = (f"Attempted boolean conversion of traced array with shape "
                   f"{_aval_str(tracer)}.\n" + _origin(tracer))
        LaminaTypeError.__init__(self, message)


class TracerIntegerConversionError(LaminaTypeError):
    """A traced value was used as a Python integer (``__index__``): as a list
    index, in ``range``, or as a static size."""

    def __init__(self, tracer: Any):
        self.tracer = tracer
        message = (f"The __index__() method was called on traced array with shape "
                   f"{_aval_str(tracer)}.\n" + _origin(tracer))
        super().__init__(message)


class TracerArrayConversionError(LaminaTypeError):
    """A traced value was converted to a numpy array (``np.asarray(x)``)."""

    def __init__(self, tracer: Any):
        self.tracer = tracer
        message = ("The numpy.ndarray conversion method __array__() was called on traced "
                   f"array with shape {_aval_str(tracer)}.\n" + _origin(tracer))
        super().__init__(message)


class UnexpectedTracerError(LaminaTypeError):
    """A tracer was used outside the transformation that created it (it leaked
    through a side effect such as a global or a closure)."""


class UnboundAxisNameError(NameError):
    """A collective names an axis that no enclosing ``vmap``/``pmap`` (or the
    lowering's axis environment) binds."""

    def __init__(self, axis_name: object, bound: tuple[object, ...] = (),
                 tracing: str | None = None):
        self.axis_name = axis_name
        where = (f"; the axes bound here are {', '.join(map(repr, bound))}"
                 if bound else "; no named axis is bound here")
        during = f" The error occurred while tracing {tracing}." if tracing else ""
        super().__init__(
            f"Found an unbound axis name: {axis_name}. A collective (psum, all_gather, "
            f"axis_index, ...) must be called inside a transformation that binds the "
            f"axis, such as vmap(..., axis_name={axis_name!r}) or pmap(..., "
            f"axis_name={axis_name!r}){where}.{during}")


class JaxprTypeError(TypeError):
    """A jaxpr is ill-typed (``core.check_jaxpr``)."""
