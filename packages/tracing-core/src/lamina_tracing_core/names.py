"""The naming algebra of transformations: how a value's name changes when a
transformation derives a new value from it.

Every name in a ``JaxprDebugInfo`` (an argument name such as ``y['hi']`` or a
result path such as ``result['a']``) that a transformation derives from
another one is built here, so that one set of rules holds everywhere:

==================  =========================  ======================================
operation           name                       why
==================  =========================  ======================================
``tangent(n)``      ``tangent(n)``             the JVP's tangent input / output of ``n``
``cotangent(n)``    ``cotangent(n)``           the transpose's cotangent of ``n``
``residual(n)``     ``residual(n)``            partial eval saves the input ``n`` itself
``batched(n)``      ``n``                      vmap maps over the same value
``per_replica(n)``  ``n``                      pmap's body sees one shard of the same value
==================  =========================  ======================================

One identity holds: ``cotangent(tangent(n)) == cotangent(n)``. Reverse mode
transposes the *linear* function from input tangents to output tangents; the
cotangent of the tangent of ``x`` is the cotangent of ``x`` (the gradient with
respect to ``x``), and the cotangent fed in for the tangent of ``result['a']``
is the cotangent of ``result['a']``. So ``grad`` names its results
``cotangent(x)`` and ``vjp``'s cotangent inputs are ``cotangent(result['a'])``.
No other names are rewritten: ``tangent(cotangent(x))`` (forward over reverse)
stays as it is.

``None`` means no name exists (a residual that is not an input, a constant);
every operation maps ``None`` to ``None``, so a missing name stays explicitly
missing and never becomes a wrong one.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import TypeAlias

__all__ = [
    "Name",
    "NameOp",
    "batched",
    "cotangent",
    "per_replica",
    "residual",
    "select",
    "tangent",
]

Name: TypeAlias = str | None
"""An argument name or result path; ``None`` where none exists."""

NameOp: TypeAlias = Callable[[Name], Name]
"""One operation of the algebra."""

_TANGENT = "tangent("


def tangent(name: Name) -> Name:
    """The name of the tangent of ``name`` (JVP inputs and outputs)."""
    return None if name is None else f"tangent({name})"


def cotangent(name: Name) -> Name:
    """The name of the cotangent of ``name``; ``cotangent(tangent(n))`` is
    ``cotangent(n)`` (see the module docstring)."""
    if name is None:
        return None
    if name.startswith(_TANGENT) and name.endswith(")") and _balanced(name[len(_TANGENT):-1]):
        name = name[len(_TANGENT):-1]
    return f"cotangent({name})"


def residual(name: Name) -> Name:
    """The name of a partial-evaluation residual that is the value ``name`` itself."""
    return None if name is None else f"residual({name})"


def batched(name: Name) -> Name:
    """vmap keeps names: the batched value is the same argument or result."""
    return name


def per_replica(name: Name) -> Name:
    """pmap keeps names: its body sees one shard of the same argument or result."""
    return name


def select(op: NameOp, names: Sequence[Name], keep: Iterable[bool] | None = None
           ) -> tuple[Name, ...]:
    """``op`` applied to each name (those whose ``keep`` flag is set, when given)."""
    if keep is None:
        return tuple(op(n) for n in names)
    return tuple(op(n) for n, k in zip(names, keep) if k)


def _balanced(inner: str) -> bool:
    # "tangent(a)(b)" is not the tangent of "a)(b": the stripped text must be
    # one name, its parentheses balanced.
    depth = 0
    for ch in inner:
        if ch == "(":
            depth += 1
        elif ch == ")":
            depth -= 1
            if depth < 0:
                return False
    return depth == 0
