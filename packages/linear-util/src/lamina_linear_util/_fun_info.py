"""Names and source locations of user functions (re-exported by ``api_util``).

Kept apart from ``api_util`` so that ``linear_util`` can name functions without
importing the higher-level helpers.
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable
from types import CodeType, FunctionType
from typing import Any

__all__ = ["fun_name", "fun_sourceinfo", "is_generator_function"]

def is_generator_function(fun: object) -> bool:
    """``inspect.isgeneratorfunction(fun)``, read straight from the code flags
    for a plain function (jit, make_jaxpr and every transformation pushed on a
    traced function ask it, so it is on the path of each call)."""
    if type(fun) is FunctionType:
        return bool(fun.__code__.co_flags & inspect.CO_GENERATOR)
    return inspect.isgeneratorfunction(fun)


# Bounds the unwrapping of pathological chains (objects whose `__wrapped__`
# or `func` keeps producing new objects).
_MAX_UNWRAP = 100


def _unwrap(fun: Any) -> Any:
    """Follow ``functools.partial`` and ``functools.wraps`` (``__wrapped__``)
    to the function that holds the code."""
    for _ in range(_MAX_UNWRAP):
        if isinstance(fun, functools.partial):
            fun = fun.func
            continue
        try:
            unwrapped = inspect.unwrap(fun)
        except ValueError:  # a __wrapped__ cycle
            return fun
        if unwrapped is fun:
            return fun
        fun = unwrapped
    return fun


def _code_and_name(fun: Any) -> tuple[CodeType, str] | None:
    code = getattr(fun, "__code__", None)
    if isinstance(code, CodeType):  # functions, lambdas, bound methods
        name = getattr(fun, "__name__", None)
        return code, name if isinstance(name, str) else code.co_name
    if isinstance(fun, type) or not callable(fun):
        return None
    # A callable object: its source is its class's __call__, its name the class's.
    call = _unwrap(type(fun).__call__)
    code = getattr(call, "__code__", None)
    if isinstance(code, CodeType):
        return code, type(fun).__name__
    return None


def fun_sourceinfo(fun: Callable[..., Any]) -> str | None:
    """``"<name> at <file>:<line>"`` for ``fun``, or ``None`` if it has no
    Python source (builtins, C extensions).

    ``functools.partial`` and ``functools.wraps`` wrappers are looked through;
    bound methods give the method; a callable object gives its class name and
    the location of its ``__call__``.
    """
    found = _code_and_name(_unwrap(fun))
    if found is None:
        return None
    code, name = found
    return f"{name} at {code.co_filename}:{code.co_firstlineno}"


def fun_name(fun: Callable[..., Any]) -> str:
    """A short name for ``fun`` (used in module names and messages): its
    ``__name__`` (``f``, ``<lambda>``), the wrapped function's name for a
    ``functools.partial``, or the class name for a callable object."""
    for _ in range(_MAX_UNWRAP):
        if not isinstance(fun, functools.partial):
            break
        fun = fun.func
    name = getattr(fun, "__name__", None)
    if isinstance(name, str):
        return name
    return type(fun).__name__
