"""``lamina.nn``: activation functions, softmax and friends, and
``dot_product_attention``, with JAX's values and gradients.

``relu``, ``relu6`` and ``softmax`` have custom JVP rules (as in JAX): relu's
derivative at 0 is 0, and softmax's derivative is computed from its output,
which is both cheaper and stable. ``softmax``, ``log_softmax`` and
``logsumexp`` subtract the (gradient-stopped) maximum before exponentiating,
so large inputs do not overflow.
"""

from __future__ import annotations

import lamina_interpreters_pxla  # noqa: F401  (sets the default eager impl)
import functools
import math
from typing import Any

import numpy as np
from lamina_tracing_core import api as tc_api
from lamina_tracing_core import dtypes, lax, trace_settings
from lamina_tracing_core.avals import get_aval
from lamina_tracing_core.custom_derivatives import custom_jvp
from lamina_tracing_core.numpy import _util

import lamina.numpy as jnp
from lamina.nn import initializers as initializers

Array = Any
ArrayLike = Any
Axis = int | tuple[int, ...] | None

__all__ = [
    "celu", "dot_product_attention", "elu", "gelu", "glu", "hard_sigmoid", "hard_silu", "hard_swish", "hard_tanh",
    "identity", "initializers", "leaky_relu", "log1mexp", "log_sigmoid", "log_softmax",
    "logmeanexp", "logsumexp", "mish", "normalize", "one_hot",
    "relu", "relu6", "selu", "sigmoid", "silu", "soft_sign", "softmax", "softplus",
    "sparse_plus", "sparse_sigmoid", "squareplus", "standardize", "swish", "tanh",
]


def _inexact(fun: str, x: Any) -> Any:
    (a,) = _util.promote_dtypes_inexact(f"lamina.nn.{fun}", x)
    return a


def identity(x: ArrayLike) -> Array:
    """``x`` itself, as an array; a list or tuple is refused (JAX's error), as
    is any other non-array."""
    if isinstance(x, (list, tuple)):
        raise TypeError(f"identity requires ndarray or scalar arguments, got {type(x)} at "
                        "position 0.")
    return jnp.asarray(_util.operand("lamina.nn.identity", x))


def _relu(x: ArrayLike) -> Array:
    return jnp.maximum(x, 0)


relu = custom_jvp(_relu)
relu.__doc__ = "The rectified linear unit ``max(x, 0)`` (its derivative at 0 is 0)."
relu.defjvps(lambda g, ans, x: lax.select(jnp.greater(x, 0), g, lax.full_like(g, 0)))


def _relu6(x: ArrayLike) -> Array:
    return jnp.minimum(jnp.maximum(x, 0), 6.0)


relu6 = custom_jvp(_relu6)
relu6.__doc__ = "``min(max(x, 0), 6)`` (derivative 0 at both kinks)."
relu6.defjvps(lambda g, ans, x: lax.select(
    jnp.logical_and(jnp.greater(x, 0), jnp.less(x, 6)), g, lax.full_like(g, 0)))


def sigmoid(x: ArrayLike) -> Array:
    """The logistic function ``1 / (1 + exp(-x))``."""
    return lax.logistic(_inexact("sigmoid", x))


def silu(x: ArrayLike) -> Array:
    """The SiLU (swish) activation ``x * sigmoid(x)``."""
    a = _inexact("silu", x)
    return jnp.multiply(a, sigmoid(a))


swish = silu


def softplus(x: ArrayLike) -> Array:
    """``log(1 + exp(x))``, computed without overflow."""
    return jnp.logaddexp(x, 0)


def log_sigmoid(x: ArrayLike) -> Array:
    """``log(sigmoid(x))`` computed stably as ``-softplus(-x)``."""
    a = _inexact("log_sigmoid", x)
    return jnp.negative(softplus(jnp.negative(a)))


def soft_sign(x: ArrayLike) -> Array:
    """``x / (|x| + 1)``."""
    a = _inexact("soft_sign", x)
    return jnp.divide(a, jnp.add(jnp.abs(a), 1))


def tanh(x: ArrayLike) -> Array:
    """The hyperbolic tangent."""
    return jnp.tanh(x)


def elu(x: ArrayLike, alpha: ArrayLike = 1.0) -> Array:
    """``x`` for ``x > 0``, else ``alpha * (exp(x) - 1)``."""
    a = _inexact("elu", x)
    positive = jnp.greater(a, 0)
    # exp of the positive branch is never used; zeroing it keeps gradients finite.
    safe = jnp.where(positive, 0.0, a)
    return jnp.where(positive, a, jnp.multiply(alpha, jnp.expm1(safe)))


def celu(x: ArrayLike, alpha: ArrayLike = 1.0) -> Array:
    """The continuously differentiable ELU: ``max(x, 0) + alpha * expm1(min(x, 0) / alpha)``."""
    a = _inexact("celu", x)
    return jnp.add(jnp.maximum(a, 0.0),
                   jnp.multiply(alpha, jnp.expm1(jnp.divide(jnp.minimum(a, 0.0), alpha))))


_SELU_ALPHA = 1.6732632423543772848170429916717
_SELU_SCALE = 1.0507009873554804934193349852946


def selu(x: ArrayLike) -> Array:
    """The scaled ELU of self-normalising networks."""
    return jnp.multiply(_SELU_SCALE, elu(x, _SELU_ALPHA))


def leaky_relu(x: ArrayLike, negative_slope: ArrayLike = 1e-2) -> Array:
    """``x`` for ``x >= 0``, else ``negative_slope * x``."""
    a = _inexact("leaky_relu", x)
    return jnp.where(jnp.greater_equal(a, 0), a, jnp.multiply(negative_slope, a))


def hard_tanh(x: ArrayLike) -> Array:
    """``x`` clipped to ``[-1, 1]``."""
    a = _inexact("hard_tanh", x)
    return jnp.where(jnp.greater(a, 1), 1, jnp.where(jnp.less(a, -1), -1, a))


def hard_sigmoid(x: ArrayLike) -> Array:
    """``relu6(x + 3) / 6``."""
    return jnp.divide(relu6(jnp.add(_inexact("hard_sigmoid", x), 3.0)), 6.0)


def hard_silu(x: ArrayLike) -> Array:
    """``x * hard_sigmoid(x)``."""
    a = _inexact("hard_silu", x)
    return jnp.multiply(a, hard_sigmoid(a))


hard_swish = hard_silu


def mish(x: ArrayLike) -> Array:
    """``x * tanh(softplus(x))``."""
    a = _inexact("mish", x)
    return jnp.multiply(a, jnp.tanh(softplus(a)))


def squareplus(x: ArrayLike, b: ArrayLike = 4) -> Array:
    """``(x + sqrt(x**2 + b)) / 2``, a smooth relu; eagerly, one compiled
    program, as JAX's."""
    a = _inexact("squareplus", x)
    return _squareplus_compiled(a, _util.operand("lamina.nn.squareplus", b, "b"))


def _squareplus(a: Any, b: Any) -> Array:
    return jnp.divide(jnp.add(a, jnp.sqrt(jnp.add(jnp.square(a), b))), 2)


_squareplus_compiled = tc_api.compiled_when_eager(_squareplus)


def sparse_sigmoid(x: ArrayLike) -> Array:
    """0 for ``x <= -1``, ``(x + 1) / 2`` in between, 1 for ``x >= 1``: the
    derivative of :func:`sparse_plus`."""
    a = _inexact("sparse_sigmoid", x)
    return jnp.multiply(0.5, jnp.clip(jnp.add(a, 1.0), 0.0, 2.0))


def _log1mexp(x: ArrayLike) -> Array:
    a = _inexact("log1mexp", x)
    # two forms, each accurate on its side of log(2) (Maechler's note):
    # log(-expm1(-x)) for small x, log1p(-exp(-x)) for large x
    return jnp.where(jnp.less(a, math.log(2.0)), jnp.log(jnp.negative(jnp.expm1(jnp.negative(a)))),
                     jnp.log1p(jnp.negative(jnp.exp(jnp.negative(a)))))


log1mexp = custom_jvp(_log1mexp)
log1mexp.__doc__ = ("``log(1 - exp(-x))`` for ``x >= 0``, accurate near 0 and for large "
                    "``x``; its derivative is ``1 / expm1(x)``.")
log1mexp.defjvps(lambda g, ans, x: jnp.divide(g, jnp.expm1(x)))


def sparse_plus(x: ArrayLike) -> Array:
    """0 for ``x <= -1``, ``(x + 1)**2 / 4`` in between, ``x`` for ``x >= 1``."""
    a = _inexact("sparse_plus", x)
    middle = jnp.divide(jnp.square(jnp.add(a, 1)), 4)
    return jnp.where(jnp.less_equal(a, -1), 0.0, jnp.where(jnp.greater_equal(a, 1), a, middle))


def gelu(x: ArrayLike, approximate: bool = True) -> Array:
    """The Gaussian error linear unit; ``approximate=True`` (the default, as
    JAX) uses the tanh approximation, else the exact form
    ``x * erfc(-x / sqrt(2)) / 2`` (erfc keeps the far negative tail, which
    ``1 + erf`` rounds to zero)."""
    a = _inexact("gelu", x)
    dtype = get_aval(a).dtype
    if approximate:
        coeff = np.asarray(math.sqrt(2 / math.pi), dtype)
        inner = jnp.multiply(coeff, jnp.add(a, jnp.multiply(0.044715, lax.integer_pow(a, 3))))
        return jnp.multiply(a, jnp.multiply(0.5, jnp.add(1.0, jnp.tanh(inner))))
    if dtypes.is_complex(dtype):
        raise TypeError("lamina.nn.gelu: approximate=False does not support complex inputs")
    sqrt_half = np.asarray(math.sqrt(0.5), dtype)
    return jnp.multiply(jnp.multiply(0.5, a), lax.erfc(jnp.multiply(jnp.negative(a), sqrt_half)))


def glu(x: ArrayLike, axis: int = -1) -> Array:
    """The gated linear unit: the first half of ``x`` along ``axis`` times the
    sigmoid of the second half."""
    a = _inexact("glu", x)
    size = get_aval(a).shape[_util.canonicalize_axis("lamina.nn.glu", axis, get_aval(a).ndim)]
    if size % 2:
        raise ValueError(f"lamina.nn.glu: axis {axis} must have even size, got {size}")
    first, second = jnp.split(a, 2, axis)
    return jnp.multiply(first, sigmoid(second))


# --- softmax and friends --------------------------------------------------------------------
@functools.lru_cache(maxsize=64)
def _softmax_along(axis: Axis) -> Any:
    """softmax over ``axis`` as a custom-JVP function of ``(x, where)``.

    One function per (static) axis: the axis is closed over rather than passed
    as a non-differentiable argument."""

    def softmax_fn(x: Any, where: Any) -> Any:
        x_max = jnp.max(x, axis, where=where, initial=-np.inf, keepdims=True)
        x_safe = x if where is None else jnp.where(where, x, -np.inf)
        unnormalized = jnp.exp(jnp.subtract(x_safe, x_max))
        result = jnp.divide(unnormalized, jnp.sum(unnormalized, axis, where=where, keepdims=True))
        return result if where is None else jnp.where(where, result, 0)

    fun = custom_jvp(softmax_fn)

    def softmax_jvp(primals: Any, tangents: Any) -> tuple[Any, Any]:
        # d softmax = y * (dx - sum(y * dx)): from the output, no re-exponentiation.
        (x, where), (x_dot, _) = primals, tangents
        y = fun(x, where)
        inner = jnp.sum(jnp.multiply(y, x_dot), axis, where=where, keepdims=True)
        return y, jnp.multiply(y, jnp.subtract(x_dot, inner))

    fun.defjvp(softmax_jvp)
    return fun


def _axis_key(axis: Any) -> Axis:
    """A hashable axis (lists become tuples) for the custom-JVP static argument."""
    if axis is None or isinstance(axis, (int, np.integer)):
        return None if axis is None else int(axis)
    return tuple(int(a) for a in axis)


def _softmax_autodiff(x: Any, axis: Axis, where: Any) -> Any:
    """softmax differentiated through its operations (the maximum subtracted
    for stability held constant): JAX's rule while ``softmax_custom_jvp`` is off."""
    x_max = jnp.max(x, axis, where=where, initial=-np.inf, keepdims=True)
    x_safe = x if where is None else jnp.where(where, x, -np.inf)
    unnormalized = jnp.exp(jnp.subtract(x_safe, lax.stop_gradient(x_max)))
    result = jnp.divide(unnormalized, jnp.sum(unnormalized, axis, where=where, keepdims=True))
    return result if where is None else jnp.where(where, result, 0)


def softmax(x: ArrayLike, axis: Axis = -1, where: ArrayLike | None = None) -> Array:
    """``exp(x) / sum(exp(x))`` along ``axis`` (0 where ``where`` is False).

    Differentiated as JAX does: through its operations by default, or, with
    the ``softmax_custom_jvp`` setting on, by the rule ``y * (dx - sum(y *
    dx))`` from the output (one ``custom_jvp_call``)."""
    a = _inexact("softmax", x)
    mask = None if where is None else _util.operand("lamina.nn.softmax", where, "where")
    if not trace_settings.state.softmax_custom_jvp:
        return _softmax_autodiff(a, _axis_key(axis), mask)
    return _softmax_along(_axis_key(axis))(a, mask)


def log_softmax(x: ArrayLike, axis: Axis = -1, where: ArrayLike | None = None) -> Array:
    """``x - logsumexp(x)`` along ``axis`` (-inf where ``where`` is False)."""
    a = _inexact("log_softmax", x)
    axis = _axis_key(axis)
    x_max = jnp.max(a, axis, where=where, initial=-np.inf, keepdims=True)
    x_safe = a if where is None else jnp.where(where, a, -np.inf)
    shifted = jnp.subtract(x_safe, lax.stop_gradient(x_max))
    result = jnp.subtract(shifted, jnp.log(jnp.sum(jnp.exp(shifted), axis, where=where,
                                                   keepdims=True)))
    return result if where is None else jnp.where(where, result, -np.inf)


def logsumexp(a: ArrayLike, axis: Axis = None, b: ArrayLike | None = None,
              keepdims: bool = False, return_sign: bool = False,
              where: ArrayLike | None = None) -> Any:
    """``log(sum(b * exp(a)))`` over ``axis``, without overflow; with
    ``return_sign`` also the sign of the sum (for negative ``b``)."""
    if b is not None:
        x, scale = _util.promote_args_inexact("lamina.nn.logsumexp", a, b)
        x = jnp.where(jnp.not_equal(scale, 0), x, -np.inf)
    else:
        x = _inexact("logsumexp", a)
        scale = None
    nd = get_aval(x).ndim
    axes = _util.canonicalize_axes("lamina.nn.logsumexp", _axis_key(axis), nd)
    real = jnp.real(x)
    amax = jnp.max(real, axis=axes, keepdims=keepdims, where=where, initial=-np.inf)
    # An all -inf (or +inf) slice would make x - amax NaN; shift by 0 instead.
    amax = lax.stop_gradient(jnp.where(jnp.isfinite(amax), amax, 0))
    amax_kept = amax if keepdims else (lax.expand_dims(amax, axes) if axes else amax)
    exp_x = jnp.exp(jnp.subtract(x, _util.convert(amax_kept, get_aval(x).dtype)))
    if scale is not None:
        exp_x = jnp.multiply(exp_x, scale)
    total = jnp.sum(exp_x, axis=axes, keepdims=keepdims, where=where)
    sign = lax.sign(total)
    complex_input = dtypes.is_complex(get_aval(total).dtype)
    if return_sign or not complex_input:
        total = jnp.abs(total)
    log_total = jnp.log(total)
    out = jnp.add(log_total, _util.convert(amax, get_aval(log_total).dtype))
    if return_sign:
        return out, sign
    if scale is not None and not complex_input:
        out = jnp.where(jnp.less(sign, 0), np.nan, out)
    return out


def one_hot(x: ArrayLike, num_classes: int, *, dtype: Any = None, axis: int = -1) -> Array:
    """``x`` as one-hot vectors of length ``num_classes`` along ``axis``
    (out-of-range values give all zeros); default dtype the default float."""
    a = _util.operand("lamina.nn.one_hot", x, "x")
    n = _util.concrete_int("lamina.nn.one_hot", num_classes, "num_classes")
    out_dtype = _util.user_dtype("lamina.nn.one_hot", dtype) or dtypes.default_float_dtype()
    nd = get_aval(a).ndim
    pos = _util.canonicalize_axis("lamina.nn.one_hot", axis, nd + 1)
    lhs = lax.expand_dims(a, (pos,))
    classes_shape = [1] * (nd + 1)
    classes_shape[pos] = n
    classes = lax.broadcasted_iota(get_aval(a).dtype, tuple(classes_shape), pos)
    return lax.convert_element_type(jnp.equal(lhs, classes), out_dtype)


def logmeanexp(x: ArrayLike, axis: Axis = None, where: ArrayLike | None = None,
               keepdims: bool = False) -> Array:
    """``log(mean(exp(x)))`` over ``axis`` (the elements ``where`` selects):
    ``logsumexp(x) - log(n)``, without overflow; eagerly, one compiled
    program, as JAX's."""
    a = _inexact("logmeanexp", x)
    mask = None if where is None else _util.operand("lamina.nn.logmeanexp", where, "where")
    return _logmeanexp_compiled(a, _axis_key(axis), bool(keepdims), mask)


def _logmeanexp(a: Any, axis: Axis, keepdims: bool, where: Any) -> Array:
    total = logsumexp(a, axis=axis, keepdims=keepdims, where=where)
    included = jnp.ones_like(a) if where is None else jnp.broadcast_to(where, jnp.shape(a))
    count = jnp.sum(included, axis=axis, keepdims=keepdims, dtype=total.dtype)
    return jnp.subtract(total, jnp.log(count))


_logmeanexp_compiled = tc_api.compiled_when_eager(_logmeanexp, static_argnums=(1, 2))


def standardize(x: ArrayLike, axis: Axis = -1, mean: ArrayLike | None = None,
                variance: ArrayLike | None = None, epsilon: ArrayLike = 1e-5,
                where: ArrayLike | None = None, *, algorithm: str = "fast") -> Array:
    """``(x - mean) / sqrt(variance + epsilon)`` over ``axis``; the variance is
    ``mean(x**2) - mean(x)**2`` ('fast', JAX's default) or ``mean((x - mean)**2)``
    ('stable'); eagerly, one compiled program, as JAX's."""
    a = _inexact("standardize", x)
    if algorithm not in ("fast", "stable"):
        raise ValueError(f"lamina.nn.standardize: unknown algorithm {algorithm!r}; expected "
                         "'fast' or 'stable'")
    operands = [None if t is None else _util.operand("lamina.nn.standardize", t, name)
                for t, name in ((mean, "mean"), (variance, "variance"), (where, "where"))]
    return _standardize_compiled(a, _axis_key(axis), operands[0], operands[1],
                                 _util.operand("lamina.nn.standardize", epsilon, "epsilon"),
                                 operands[2], algorithm)


def _standardize(a: Any, axis: Axis, mean: Any, variance: Any, epsilon: Any, where: Any,
                 algorithm: str) -> Array:
    if mean is None:
        mean = jnp.mean(a, axis, keepdims=True, where=where)
    if variance is None:
        if algorithm == "stable":
            variance = jnp.mean(jnp.square(jnp.subtract(a, mean)), axis, keepdims=True,
                                where=where)
        else:
            variance = jnp.subtract(jnp.mean(jnp.square(a), axis, keepdims=True, where=where),
                                    jnp.square(mean))
            # The fast formula can go slightly negative; rsqrt needs >= 0.
            variance = jnp.clip(variance, 0)
    return jnp.multiply(jnp.subtract(a, mean), lax.rsqrt(jnp.add(variance, epsilon)))


_standardize_compiled = tc_api.compiled_when_eager(_standardize, static_argnums=(1, 6))


normalize = standardize


# --- dot-product attention --------------------------------------------------------
# Scaled dot-product attention as JAX 0.10.2 computes it with its XLA
# implementation. Layout: query [B, T, N, H] (batch, query length, heads, head
# size), key and value [B, S, K, H] with N a multiple of K (grouped-query
# attention: each key/value head serves N // K query heads); rank 2 or 3 inputs
# get leading axes of size 1. Logits are computed in at least float32 and the
# softmax in float32; masked logits become a large negative number (not -inf),
# so a fully masked row averages the values uniformly, as in JAX.


def _attention_4d(t: Any) -> Array:
    t = jnp.asarray(t)
    missing = 4 - t.ndim
    return jnp.expand_dims(t, tuple(range(missing))) if missing > 0 else t


def _check_attention_operand(t: Array | None, shape: tuple[int, ...], dtype: Any, name: str) -> None:
    """JAX's checks of each operand's rank, dtype and sizes (-1: any size)."""
    if t is None:
        return
    if t.ndim != len(shape):
        raise ValueError(f"dot_product_attention: {name} ndim should be {len(shape)}, but got "
                         f"{t.ndim}")
    if dtype is not None and t.dtype != dtype:
        raise ValueError(f"dot_product_attention: {name} dtype should be {np.dtype(dtype)}, but "
                         f"got {t.dtype}")
    if any(want != -1 and got != want for got, want in zip(t.shape, shape)):
        raise ValueError(f"dot_product_attention: {name} shape should be {list(shape)}: but got "
                         f"{t.shape}")


def _grouped(t: Array | None, k: int, g: int) -> Array | None:
    """A ``[B, N or 1, T, S]`` bias or mask as ``[B, K, G or 1, T, S]``."""
    if t is None:
        return None
    b, n, tq, s = t.shape
    if n == 1:
        return t[:, :, None]
    return jnp.reshape(t, (b, k, g, tq, s))


def _large_negative(dtype: Any) -> Array:
    # far below any logit, yet finite in every float type (and in float32,
    # which the softmax runs in)
    biggest = min(float(dtypes.finfo(dtype).max), float(np.finfo(np.float32).max))
    return jnp.asarray(-0.7 * biggest, dtype=dtype)


def _keep_mask(shape: tuple[int, ...], mask: Array | None, is_causal: bool,
               window: tuple[int, int] | None, q_lengths: Array | None,
               kv_lengths: Array | None) -> Array | None:
    """Where logits of shape ``[B, K, G, T, S]`` are kept, or None for everywhere."""
    tq, s = shape[-2], shape[-1]
    keep = None if mask is None else mask

    def both(a: Array | None, b: Array) -> Array:
        return b if a is None else jnp.logical_and(a, b)

    q_pos = jnp.arange(tq)[:, None]
    k_pos = jnp.arange(s)[None, :]
    if is_causal:
        keep = both(keep, q_pos >= k_pos)
    if window is not None:
        left, right = window
        keep = both(keep, jnp.logical_and(q_pos <= k_pos + left, q_pos >= k_pos - right))
    if q_lengths is not None:
        keep = both(keep, (jnp.arange(tq)[None, :, None] < q_lengths[:, None, None])
                    [:, None, None])
    if kv_lengths is not None:
        keep = both(keep, (jnp.arange(s)[None, None, :] < kv_lengths[:, None, None])
                    [:, None, None])
    return keep


def dot_product_attention(query: Any, key: Any, value: Any, bias: Any = None,
                          mask: Any = None, *, scale: float | None = None,
                          is_causal: bool = False, query_seq_lengths: Any = None,
                          key_value_seq_lengths: Any = None,
                          local_window_size: int | tuple[int, int] | None = None,
                          implementation: str | None = None,
                          return_residual: bool = False) -> Any:
    """``softmax(Q K^T * scale + bias, masked) V`` per head (``scale``
    defaults to ``1 / sqrt(H)``). ``mask`` (bool, broadcastable to
    ``[B, N, T, S]``) keeps the logits where it is True; ``is_causal`` keeps
    keys at or before each query; ``local_window_size=(left, right)`` (or one
    int for both) keeps keys within that many positions; the sequence lengths
    (int32, ``[B]``) mask out padding, and query positions past their length
    give zeros. With ``return_residual`` also the logsumexp of each row's
    logits (``[B, T, N]``, no gradient). ``implementation`` is ``'xla'`` or
    None; lamina has no cuDNN attention kernel."""
    if implementation not in (None, "xla"):
        if implementation == "cudnn":
            raise ValueError("dot_product_attention: implementation='cudnn' needs the cuDNN "
                             "attention kernel, which lamina does not provide; use "
                             "implementation='xla' or None")
        raise ValueError(f"Unsupported implementation option: {implementation}")
    out_shape = jnp.shape(query)
    q, k, v = _attention_4d(query), _attention_4d(key), _attention_4d(value)
    bias = None if bias is None else _attention_4d(bias)
    mask = None if mask is None else _attention_4d(mask)
    q_lengths = None if query_seq_lengths is None else jnp.asarray(query_seq_lengths)
    kv_lengths = None if key_value_seq_lengths is None else jnp.asarray(key_value_seq_lengths)
    window = ((local_window_size, local_window_size) if isinstance(local_window_size, int)
              else local_window_size)
    b, s, kh, h = k.shape
    _check_attention_operand(v, (b, s, kh, h), k.dtype, "value")
    _check_attention_operand(q, (b, -1, -1, h), k.dtype, "query")
    _check_attention_operand(mask, (-1,) * 4, np.dtype(bool), "mask")
    _check_attention_operand(bias, (-1,) * 4, None, "bias")
    _check_attention_operand(q_lengths, (b,), np.dtype(np.int32), "query_seq_lengths")
    _check_attention_operand(kv_lengths, (b,), np.dtype(np.int32), "key_value_seq_lengths")
    n = q.shape[2]
    if n % kh:
        raise ValueError(f"The number of query heads must be a multiple of key/value heads, "
                         f"but got {n} vs {kh}")
    g = n // kh
    t = q.shape[1]
    factor = 1.0 / np.sqrt(h) if scale is None else scale

    logits_dtype = jnp.promote_types(q.dtype, np.float32)
    grouped_q = jnp.reshape(q, (b, t, kh, g, h))
    logits = jnp.einsum("BTKGH,BSKH->BKGTS", grouped_q, k,
                        preferred_element_type=logits_dtype)
    logits = logits * jnp.array(factor, dtype=logits.dtype)
    grouped_bias = _grouped(bias, kh, g)
    if grouped_bias is not None:
        logits = (logits + grouped_bias).astype(logits.dtype)
    keep = _keep_mask(logits.shape, _grouped(mask, kh, g), is_causal, window, q_lengths,
                      kv_lengths)
    if keep is not None:
        logits = jnp.where(keep, logits, _large_negative(logits.dtype))
    logits = logits.astype(np.float32)
    probs = softmax(logits, axis=-1).astype(k.dtype)
    encoded = jnp.einsum("BKGTS,BSKH->BTKGH", probs, v)
    encoded = jnp.reshape(encoded, (b, t, n, h))
    if q_lengths is not None:
        valid = jnp.arange(t)[None, :] < q_lengths[:, None]
        encoded = encoded * valid[:, :, None, None].astype(encoded.dtype)
    encoded = jnp.reshape(encoded, out_shape)
    if not return_residual:
        return encoded
    lse = logsumexp(logits, axis=-1).astype(k.dtype)  # [B, K, G, T]
    lse = jnp.reshape(jnp.transpose(lse, (0, 3, 1, 2)), (b, t, n))
    return encoded, lax.stop_gradient(jnp.reshape(lse, out_shape[:-1]))
