"""Explaining cache misses of jit's tracing, lowering and compilation.

With ``lamina.config.update('explain_cache_misses', True)`` (linear-util's
``set_explain_cache_misses``) every miss is logged at WARNING level on the
``lamina.cache`` logger: which part of the key changed, naming an argument
by its path (``argument y['hi'] changed from float32[3] to float32[4]``,
``static argument n changed from 1 to 2``), and how long the miss cost
(``explain: tracing f at x.py:3 took 4.1 ms``).

The tracing cache is linear-util's ``cache``: :func:`describe_trace_miss` is
its ``describe_key_difference`` hook. The lowering and compilation caches
are jit's own and call :func:`explain_miss` / :func:`log_cost` directly.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any

from lamina_linear_util import api_util
from lamina_linear_util.cache import CacheKey, explain_cache_misses_enabled
from lamina_linear_util.linear_util import WrappedFun

__all__ = ["describe_trace_miss", "explain_miss", "log_cost", "timed", "logger"]

logger = logging.getLogger("lamina.cache")


def _show(x: Any) -> str:
    inner = getattr(x, "val", x)  # StrictHashable / Unhashable boxes
    text = str(inner) if not isinstance(inner, str) else repr(inner)
    return text if len(text) <= 120 else text[:117] + "..."


def _differs(a: Any, b: Any) -> bool:
    try:
        return a is not b and not bool(a == b)
    except Exception:
        return True


def _static_position_names(fun: WrappedFun, positions: Sequence[int]) -> list[str]:
    sig = api_util.fun_signature(fun.f)
    names: list[str] = []
    params = list(sig.parameters.values()) if sig is not None else []
    for pos in positions:
        if pos < len(params) and params[pos].kind in (params[pos].POSITIONAL_ONLY,
                                                      params[pos].POSITIONAL_OR_KEYWORD):
            names.append(params[pos].name)
        else:
            names.append(f"args[{pos}]")
    return names


def _describe_transform(fun: WrappedFun, gen: Callable[..., Any], old: tuple[Any, ...],
                        new: tuple[Any, ...]) -> list[str]:
    kind = api_util.fun_name(gen)
    if kind == "_argnums_partial" and len(old) == 2 and len(new) == 2:
        (old_dyn, old_fixed), (new_dyn, new_fixed) = old, new
        if old_dyn == new_dyn and len(old_fixed) == len(new_fixed):
            n = len(old_dyn) + len(old_fixed)
            positions = [i for i in range(n) if i not in set(old_dyn)]
            names = _static_position_names(fun, positions)
            return [f"static argument {name} changed from {_show(a)} to {_show(b)}"
                    for name, a, b in zip(names, old_fixed, new_fixed) if _differs(a, b)]
    if kind == "_argnames_partial" and len(old) == 1 and len(new) == 1:
        old_kw, new_kw = dict(old[0]), dict(new[0])
        out = [f"static argument {k} changed from {_show(old_kw.get(k))} to "
               f"{_show(new_kw.get(k))}" for k in sorted(set(old_kw) | set(new_kw))
               if _differs(old_kw.get(k), new_kw.get(k))]
        if out:
            return out
    if kind == "_flatten_fun" and len(old) == 1 and len(new) == 1:
        return [f"the argument tree structure changed from {old[0]} to {new[0]}"]
    return [f"the static arguments of {kind} changed from {_show(old)} to {_show(new)}"]


def describe_trace_miss(fun: WrappedFun, old: CacheKey, new: CacheKey) -> str:
    """linear-util ``describe_key_difference`` hook for jit's tracing cache."""
    reasons: list[str] = []
    if _differs(old.transforms, new.transforms):
        if len(old.transforms) != len(new.transforms):
            reasons.append("the static arguments or keyword arguments changed")
        else:
            for (gen, a), (gen2, b) in zip(old.transforms, new.transforms):
                if gen is not gen2:
                    reasons.append("the static arguments or keyword arguments changed")
                    break
                if _differs(a, b):
                    reasons += _describe_transform(fun, gen, a, b)
    names = new.debug_info.arg_names if new.debug_info is not None else ()
    if _differs(old.in_type, new.in_type) and old.in_type is not None and \
            new.in_type is not None:
        if len(old.in_type) != len(new.in_type):
            reasons.append(f"the number of arguments changed from {len(old.in_type)} to "
                           f"{len(new.in_type)}")
        else:
            for i, (a, b) in enumerate(zip(old.in_type, new.in_type)):
                if _differs(a, b):
                    name = names[i] if i < len(names) and names[i] else f"#{i}"
                    reasons.append(f"argument {name} changed from {_show(a)} to "
                                   f"{_show(b)}")
    if not reasons and _differs(old.debug_info, new.debug_info):
        reasons.append("the argument names changed (a different call signature)")
    for i, (a, b) in enumerate(zip(old.args, new.args)):
        if not _differs(a, b):
            continue
        label = _EXTRA_ARG_LABELS[i] if i < len(_EXTRA_ARG_LABELS) else f"extra key {i}"
        if isinstance(a, tuple) and isinstance(b, tuple) and len(a) == len(b) == len(names):
            for j, (x, y) in enumerate(zip(a, b)):
                if _differs(x, y):
                    reasons.append(f"the {label} of argument {names[j] or f'#{j}'} changed "
                                   f"from {_show(x)} to {_show(y)}")
        else:
            reasons.append(f"the {label} changed from {_show(a)} to {_show(b)}")
    if _differs(old.context, new.context):
        reasons.append(f"the tracing context (x64 flag, bound axis names, mesh, sharded_jit scope, "
                       f"full tracebacks in locations) changed "
                       f"from {_show(old.context)} to {_show(new.context)}")
    return "; ".join(reasons) or "no part of the key differs (an unequal but alike value?)"


#: What the extra arguments of jit's tracing cache are, in order.
_EXTRA_ARG_LABELS = ("input sharding", "output sharding specification")


def explain_miss(what: str, fun_desc: str, reasons: Sequence[str]) -> None:
    """``explain: <what> cache miss for <fun>: <reasons>`` (when enabled)."""
    if explain_cache_misses_enabled():
        text = "; ".join(reasons) if reasons else "never seen this signature before"
        logger.warning("explain: %s cache miss for %s: %s", what, fun_desc, text)


def log_cost(what: str, fun_desc: str, seconds: float) -> None:
    if explain_cache_misses_enabled():
        logger.warning("explain: %s %s took %.2f ms", what, fun_desc, seconds * 1e3)


@contextmanager
def timed(what: str, fun_desc: str) -> Iterator[None]:
    """Logs how long the block took (when explaining is enabled)."""
    if not explain_cache_misses_enabled():
        yield
        return
    start = time.perf_counter()
    try:
        yield
    finally:
        log_cost(what, fun_desc, time.perf_counter() - start)
