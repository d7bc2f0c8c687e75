"""``lamina.extend.linear_util``: functions with pending transformations
(JAX's ``jax.extend.linear_util``), from lamina-linear-util.

``transformation(gen, fun, *static)`` accepts a generator transformation
(``args, kwargs`` yielded on the way in, results on the way out) or a plain
function ``gen(inner, *static, *args, **kwargs)`` that calls ``inner``
itself; ``transformation2`` is the same function (JAX's name for the plain
form). ``transformation_with_aux`` / ``transformation_with_aux2`` take
``gen(inner, store, *static, *args, **kwargs)`` for the plain form and return
``(new_fun, aux_thunk)``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from lamina_linear_util.cache import cache as cache
from lamina_linear_util.errors import StoreError
from lamina_linear_util.linear_util import Store as Store
from lamina_linear_util.linear_util import WrappedFun as WrappedFun
from lamina_linear_util.linear_util import transformation as transformation
from lamina_linear_util.linear_util import transformation_with_aux as transformation_with_aux
from lamina_linear_util.linear_util import wrap_init as wrap_init

#: JAX's name for reading an aux output too early (or storing it twice).
StoreException = StoreError

#: JAX's name for the plain-function form, which ``transformation`` accepts.
transformation2 = transformation
transformation_with_aux2 = transformation_with_aux

__all__ = [
    "Store", "StoreException", "WrappedFun", "cache", "merge_linear_aux", "transformation",
    "transformation2", "transformation_with_aux", "transformation_with_aux2", "wrap_init",
]


def merge_linear_aux(aux1: Callable[[], Any], aux2: Callable[[], Any]) -> tuple[bool, Any]:
    """``(True, aux1())`` when the first of two alternative transformations
    ran, else ``(False, aux2())``; a ``StoreException`` when neither has."""
    try:
        return True, aux1()
    except StoreError:
        try:
            return False, aux2()
        except StoreError:
            raise StoreError("merge_linear_aux: neither auxiliary output was stored "
                             "(the function has not run)") from None
