"""``lamina.example_libraries.stax``: neural network layers as pairs of
functions, with the API of ``jax.example_libraries.stax``.

A layer is ``(init_fun, apply_fun)``: ``init_fun(rng, input_shape)`` returns
``(output_shape, params)``, ``apply_fun(params, inputs, **kwargs)`` the outputs
(``rng=`` is passed to layers that are random, e.g. :func:`Dropout`). The
combinators :func:`serial`, :func:`parallel` and :func:`shape_dependent` build
layers out of layers. The pooling layers (:func:`MaxPool`, :func:`SumPool`,
:func:`AvgPool`) are ``lax.reduce_window``.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable, Sequence
from typing import Any

import lamina.numpy as jnp
from lamina import lax, random
from lamina.nn import (
    elu,
    gelu,
    leaky_relu,
    log_softmax,
    relu,
    selu,
    sigmoid,
    softmax,
    softplus,
    standardize,
)
from lamina.nn.initializers import glorot_normal, normal, ones, zeros

__all__ = [
    "AvgPool", "BatchNorm", "Conv", "Conv1DTranspose", "ConvTranspose", "Dense", "Dropout", "Elu", "Exp",
    "FanInConcat", "FanInSum", "FanOut", "Flatten", "Gelu", "GeneralConv",
    "GeneralConvTranspose", "Identity", "LeakyRelu", "LogSoftmax", "MaxPool", "Relu", "Selu", "Sigmoid",
    "Softmax", "Softplus", "SumPool", "Tanh", "elementwise", "elu", "gelu", "glorot", "glorot_normal",
    "leaky_relu", "log_softmax", "logsoftmax", "normal", "ones", "parallel", "randn", "relu",
    "selu", "serial", "shape_dependent", "sigmoid", "softmax", "softplus", "standardize",
    "zeros",
]

Shape = Any
Params = Any
InitFun = Callable[[Any, Shape], tuple[Shape, Params]]
ApplyFun = Callable[..., Any]
Layer = tuple[InitFun, ApplyFun]

logsoftmax = log_softmax


# The initializers' older names.
glorot = glorot_normal
randn = normal


# --------------------------------------------------------------------------
# Layers with parameters
# --------------------------------------------------------------------------

def Dense(out_dim: int, W_init: Callable[..., Any] = glorot_normal(),  # noqa: N802,N803
          b_init: Callable[..., Any] = normal()) -> Layer:  # noqa: N803
    """A fully connected layer: ``inputs @ W + b`` with ``W`` of shape
    ``(in_dim, out_dim)``."""
    def init_fun(rng: Any, input_shape: Shape) -> tuple[Shape, Params]:
        w_key, b_key = random.split(rng)
        weights = W_init(w_key, (input_shape[-1], out_dim))
        bias = b_init(b_key, (out_dim,))
        return tuple(input_shape[:-1]) + (out_dim,), (weights, bias)

    def apply_fun(params: Params, inputs: Any, **kwargs: Any) -> Any:
        weights, bias = params
        return jnp.dot(inputs, weights) + bias

    return init_fun, apply_fun


def _kernel_shape(specs: tuple[str, str, str], out_chan: int, filter_shape: Sequence[int],
                  input_shape: Shape) -> list[int]:
    lhs_spec, rhs_spec, _ = specs
    spatial = iter(filter_shape)
    in_chan = input_shape[lhs_spec.index("C")]
    return [out_chan if c == "O" else in_chan if c == "I" else next(spatial)
            for c in rhs_spec]


def _convolution(dimension_numbers: tuple[str, str, str], out_chan: int,
                 filter_shape: Sequence[int], strides: Sequence[int] | None, padding: Any,
                 W_init: Callable[..., Any] | None, b_init: Callable[..., Any],  # noqa: N803
                 transpose: bool) -> Layer:
    """The layer of :func:`GeneralConv` (``transpose=False``) or
    :func:`GeneralConvTranspose`: they differ only in the lax operation and
    its output-shape rule."""
    _, rhs_spec, out_spec = dimension_numbers
    unit = (1,) * len(filter_shape)
    window_strides = tuple(strides) if strides else unit
    kernel_init = W_init or glorot_normal(rhs_spec.index("I"), rhs_spec.index("O"))
    output_shape_of = lax.conv_transpose_shape_tuple if transpose else lax.conv_general_shape_tuple

    def init_fun(rng: Any, input_shape: Shape) -> tuple[Shape, Params]:
        kernel_shape = _kernel_shape(dimension_numbers, out_chan, filter_shape, input_shape)
        output_shape = output_shape_of(input_shape, kernel_shape, window_strides, padding,
                                       dimension_numbers)
        bias_shape = [out_chan if c == "C" else 1 for c in out_spec]
        w_key, b_key = random.split(rng)
        return output_shape, (kernel_init(w_key, kernel_shape), b_init(b_key, bias_shape))

    def apply_fun(params: Params, inputs: Any, **kwargs: Any) -> Any:
        weights, bias = params
        if transpose:
            out = lax.conv_transpose(inputs, weights, window_strides, padding,
                                     dimension_numbers=dimension_numbers)
        else:
            out = lax.conv_general_dilated(inputs, weights, window_strides, padding, unit, unit,
                                           dimension_numbers=dimension_numbers)
        return out + bias

    return init_fun, apply_fun


def GeneralConv(dimension_numbers: tuple[str, str, str], out_chan: int,  # noqa: N802
                filter_shape: Sequence[int], strides: Sequence[int] | None = None,
                padding: Any = "VALID", W_init: Callable[..., Any] | None = None,  # noqa: N803
                b_init: Callable[..., Any] = normal(1e-6)) -> Layer:  # noqa: N803
    """A convolution with layouts ``dimension_numbers`` (e.g. ``('NHWC',
    'HWIO', 'NHWC')``), ``out_chan`` output channels and a kernel of spatial
    shape ``filter_shape``."""
    return _convolution(dimension_numbers, out_chan, filter_shape, strides, padding, W_init,
                        b_init, transpose=False)


Conv = functools.partial(GeneralConv, ("NHWC", "HWIO", "NHWC"))


# --------------------------------------------------------------------------
# Pooling
# --------------------------------------------------------------------------

def _with_unit_axes(values: Sequence[int], spec: str | None, ndim: int) -> tuple[int, ...]:
    """``values`` (one per spatial axis) with 1 inserted at the batch and
    feature axes (first and last, or where ``spec`` puts ``N`` and ``C``)."""
    axes = (0, ndim - 1) if spec is None else (spec.index("N"), spec.index("C"))
    out = list(values)
    for i in sorted(axes):
        out.insert(i, 1)
    return tuple(out)


def _pooling_layer(reducer: Callable[..., Any], init_val: float, average: bool
                   ) -> Callable[..., Layer]:
    def layer(window_shape: Sequence[int], strides: Sequence[int] | None = None,
              padding: Any = "VALID", spec: str | None = None) -> Layer:
        nd = len(window_shape) + 2
        window = _with_unit_axes(window_shape, spec, nd)
        stride = _with_unit_axes(strides or (1,) * len(window_shape), spec, nd)

        def init_fun(rng: Any, input_shape: Shape) -> tuple[Shape, Params]:
            pads = padding if not isinstance(padding, str) else lax.padtype_to_pads(
                input_shape, window, stride, padding)
            return lax.reduce_window_shape_tuple(input_shape, window, stride, pads), ()

        def apply_fun(params: Params, inputs: Any, **kwargs: Any) -> Any:
            out = lax.reduce_window(inputs, init_val, reducer, window, stride, padding)
            if not average:
                return out
            # Divide by the number of real (unpadded) elements in each window.
            ones = jnp.ones(inputs.shape[1:-1] if spec is None else inputs.shape,
                            inputs.dtype)
            if spec is None:
                counts = lax.reduce_window(ones, 0.0, lax.add, tuple(window[1:-1]),
                                           tuple(stride[1:-1]), padding if isinstance(
                                               padding, str) else padding[1:-1])
                counts = jnp.expand_dims(counts, (0, counts.ndim + 1))
            else:
                counts = lax.reduce_window(ones, 0.0, lax.add, window, stride, padding)
            return out / counts

        return init_fun, apply_fun

    return layer


#: ``MaxPool(window_shape, strides=None, padding='VALID', spec=None)``
MaxPool = _pooling_layer(lax.max, -jnp.inf, False)
#: ``SumPool(window_shape, strides=None, padding='VALID', spec=None)``
SumPool = _pooling_layer(lax.add, 0.0, False)
#: ``AvgPool(window_shape, strides=None, padding='VALID', spec=None)``: the mean
#: over the unpadded elements of each window.
AvgPool = _pooling_layer(lax.add, 0.0, True)


def GeneralConvTranspose(dimension_numbers: tuple[str, str, str], out_chan: int,  # noqa: N802
                         filter_shape: Sequence[int], strides: Sequence[int] | None = None,
                         padding: Any = "VALID",
                         W_init: Callable[..., Any] | None = None,  # noqa: N803
                         b_init: Callable[..., Any] = normal(1e-6)) -> Layer:  # noqa: N803
    """A transposed convolution (see :func:`GeneralConv` for the arguments)."""
    return _convolution(dimension_numbers, out_chan, filter_shape, strides, padding, W_init,
                        b_init, transpose=True)


Conv1DTranspose = functools.partial(GeneralConvTranspose, ("NHC", "HIO", "NHC"))
ConvTranspose = functools.partial(GeneralConvTranspose, ("NHWC", "HWIO", "NHWC"))


def BatchNorm(axis: int | Sequence[int] = (0, 1, 2), epsilon: float = 1e-5,  # noqa: N802
              center: bool = True, scale: bool = True,
              beta_init: Callable[..., Any] = zeros,
              gamma_init: Callable[..., Any] = ones) -> Layer:
    """Batch normalization over ``axis``, then ``gamma * z + beta`` (either
    term left out with ``scale=False`` / ``center=False``)."""
    axes: tuple[int, ...] = (tuple(int(a) for a in axis) if isinstance(axis, Sequence)
                             else (int(axis),))

    def init_fun(rng: Any, input_shape: Shape) -> tuple[Shape, Params]:
        kept = tuple(d for i, d in enumerate(input_shape) if i not in axes)
        beta_key, gamma_key = random.split(rng)
        beta = beta_init(beta_key, kept) if center else ()
        gamma = gamma_init(gamma_key, kept) if scale else ()
        return input_shape, (beta, gamma)

    def apply_fun(params: Params, x: Any, **kwargs: Any) -> Any:
        beta, gamma = params
        expand = tuple(None if i in axes else slice(None) for i in range(jnp.ndim(x)))
        z = standardize(x, axes, epsilon=epsilon)
        if scale:
            z = gamma[expand] * z
        if center:
            z = z + beta[expand]
        return z

    return init_fun, apply_fun


# --------------------------------------------------------------------------
# Layers without parameters
# --------------------------------------------------------------------------

def elementwise(fun: Callable[..., Any], **fun_kwargs: Any) -> Layer:
    """A layer applying ``fun(inputs, **fun_kwargs)``; it has no parameters."""
    def init_fun(rng: Any, input_shape: Shape) -> tuple[Shape, Params]:
        return input_shape, ()

    def apply_fun(params: Params, inputs: Any, **kwargs: Any) -> Any:
        return fun(inputs, **fun_kwargs)

    return init_fun, apply_fun


Tanh = elementwise(jnp.tanh)
Relu = elementwise(relu)
Exp = elementwise(jnp.exp)
LogSoftmax = elementwise(log_softmax, axis=-1)
Softmax = elementwise(softmax, axis=-1)
Softplus = elementwise(softplus)
Sigmoid = elementwise(sigmoid)
Elu = elementwise(elu)
LeakyRelu = elementwise(leaky_relu)
Selu = elementwise(selu)
Gelu = elementwise(gelu)


def _flatten_init(rng: Any, input_shape: Shape) -> tuple[Shape, Params]:
    return (input_shape[0], math.prod(input_shape[1:])), ()


def _flatten_apply(params: Params, inputs: Any, **kwargs: Any) -> Any:
    return jnp.reshape(inputs, (inputs.shape[0], -1))


Flatten: Layer = (_flatten_init, _flatten_apply)
"""Flattens all dimensions but the leading (batch) one."""

Identity: Layer = elementwise(lambda x: x)
"""Returns its inputs."""


def FanOut(num: int) -> Layer:  # noqa: N802
    """Copies its input into a list of ``num`` (for :func:`parallel`)."""
    def init_fun(rng: Any, input_shape: Shape) -> tuple[Shape, Params]:
        return [input_shape] * num, ()

    def apply_fun(params: Params, inputs: Any, **kwargs: Any) -> Any:
        return [inputs] * num

    return init_fun, apply_fun


def _fan_in_sum_init(rng: Any, input_shape: Shape) -> tuple[Shape, Params]:
    return input_shape[0], ()


def _fan_in_sum_apply(params: Params, inputs: Any, **kwargs: Any) -> Any:
    return sum(inputs)


FanInSum: Layer = (_fan_in_sum_init, _fan_in_sum_apply)
"""Sums a list of inputs."""


def FanInConcat(axis: int = -1) -> Layer:  # noqa: N802
    """Concatenates a list of inputs along ``axis``."""
    def init_fun(rng: Any, input_shape: Shape) -> tuple[Shape, Params]:
        first = tuple(input_shape[0])
        ax = axis % len(first)
        size = sum(shape[ax] for shape in input_shape)
        return first[:ax] + (size,) + first[ax + 1:], ()

    def apply_fun(params: Params, inputs: Any, **kwargs: Any) -> Any:
        return jnp.concatenate(inputs, axis)

    return init_fun, apply_fun


def Dropout(rate: float, mode: str = "train") -> Layer:  # noqa: N802
    """Dropout in ``mode='train'``: each input is kept with probability
    ``rate`` (as in JAX's stax, ``rate`` is the keep probability) and the kept
    ones are divided by ``rate``; any other mode returns the inputs. The layer
    needs ``rng=`` when applied."""
    def init_fun(rng: Any, input_shape: Shape) -> tuple[Shape, Params]:
        return input_shape, ()

    def apply_fun(params: Params, inputs: Any, **kwargs: Any) -> Any:
        rng = kwargs.get("rng")
        if rng is None:
            raise ValueError(
                "Dropout: apply_fun needs a PRNG key: call it as apply_fun(params, inputs, "
                "rng=key) with a key from lamina.random.key or lamina.random.PRNGKey")
        if mode != "train":
            return inputs
        keep = random.bernoulli(rng, rate, inputs.shape)
        return jnp.where(keep, inputs / rate, 0)

    return init_fun, apply_fun


# --------------------------------------------------------------------------
# Combinators
# --------------------------------------------------------------------------

def _split_or_none(rng: Any, n: int) -> Sequence[Any]:
    return random.split(rng, n) if rng is not None else (None,) * n


def serial(*layers: Layer) -> Layer:
    """The layers applied one after the other. ``init_fun`` gives each layer
    a key split off the one before; ``apply_fun`` splits ``rng`` (when given)
    into one key per layer."""
    init_funs = [init for init, _ in layers]
    apply_funs = [apply for _, apply in layers]

    def init_fun(rng: Any, input_shape: Shape) -> tuple[Shape, Params]:
        params = []
        shape = input_shape
        for init in init_funs:
            rng, layer_rng = random.split(rng)
            shape, layer_params = init(layer_rng, shape)
            params.append(layer_params)
        return shape, params

    def apply_fun(params: Params, inputs: Any, **kwargs: Any) -> Any:
        rngs = _split_or_none(kwargs.pop("rng", None), len(apply_funs))
        out = inputs
        for apply, layer_params, layer_rng in zip(apply_funs, params, rngs):
            out = apply(layer_params, out, rng=layer_rng, **kwargs)
        return out

    return init_fun, apply_fun


def parallel(*layers: Layer) -> Layer:
    """The layers side by side: layer ``i`` takes input ``i`` of a sequence
    and gives output ``i`` (use with :func:`FanOut` and :func:`FanInSum`)."""
    init_funs = [init for init, _ in layers]
    apply_funs = [apply for _, apply in layers]

    def init_fun(rng: Any, input_shape: Shape) -> tuple[Shape, Params]:
        rngs = random.split(rng, len(init_funs))
        results = [init(key, shape) for init, key, shape in zip(init_funs, rngs, input_shape)]
        return tuple(shape for shape, _ in results), tuple(p for _, p in results)

    def apply_fun(params: Params, inputs: Any, **kwargs: Any) -> Any:
        rngs = _split_or_none(kwargs.pop("rng", None), len(apply_funs))
        return [apply(p, x, rng=key, **kwargs)
                for apply, p, x, key in zip(apply_funs, params, inputs, rngs)]

    return init_fun, apply_fun


def shape_dependent(make_layer: Callable[[Shape], Layer]) -> Layer:
    """A layer built by ``make_layer(input_shape)`` once the shape is known
    (at init, and from ``inputs.shape`` at apply)."""
    def init_fun(rng: Any, input_shape: Shape) -> tuple[Shape, Params]:
        return make_layer(input_shape)[0](rng, input_shape)

    def apply_fun(params: Params, inputs: Any, **kwargs: Any) -> Any:
        return make_layer(inputs.shape)[1](params, inputs, **kwargs)

    return init_fun, apply_fun
