"""``lamina.example_libraries.optimizers``: first-order optimizers with the API
of ``jax.example_libraries.optimizers``.

An optimizer is a triple ``(init_fun, update_fun, get_params)``:
``opt_state = init_fun(params)``, ``opt_state = update_fun(step, grads,
opt_state)`` and ``params = get_params(opt_state)``, for any pytree of
parameters. Each optimizer here is written for one array and made to work on
pytrees by :func:`optimizer`; the state is an :class:`OptimizerState` (a
pytree: it can be passed through ``jit``). Step sizes are numbers or
schedules (functions of the step number, see :func:`exponential_decay` and
the others).
"""

from __future__ import annotations

import functools
from collections import namedtuple
from collections.abc import Callable
from typing import Any, NamedTuple

import lamina.numpy as jnp
from lamina import tree_util

__all__ = [
    "InitFn", "JoinPoint", "Optimizer", "OptimizerState", "Params", "ParamsFn", "Schedule",
    "State", "Step", "UpdateFn", "Updates", "adagrad", "adam", "adamax", "clip_grads",
    "constant", "exponential_decay", "inverse_time_decay", "l2_norm", "make_schedule",
    "momentum", "nesterov", "optimizer", "pack_optimizer_state", "piecewise_constant",
    "polynomial_decay", "rmsprop", "rmsprop_momentum", "sgd", "sm3",
    "unpack_optimizer_state",
]

Array = Any
Params = Any
State = Any
Updates = Any
Step = int
Schedule = Callable[[Step], Any]

# The parameters' pytree ("outer") and, per parameter leaf, the pytree of
# that leaf's state ("inner"), stored flattened: the leaves of each inner
# tree, the outer treedef and the inner treedefs.
OptimizerState = namedtuple("OptimizerState", ["packed_state", "tree_def", "subtree_defs"])
tree_util.register_pytree_node(
    OptimizerState,
    lambda state: ((state.packed_state,), (state.tree_def, state.subtree_defs)),
    lambda aux, children: OptimizerState(next(iter(children)), aux[0], aux[1]))

InitFn = Callable[[Params], Any]
UpdateFn = Callable[[Step, Updates, Any], Any]
ParamsFn = Callable[[Any], Params]


class Optimizer(NamedTuple):
    """The ``(init_fn, update_fn, params_fn)`` triple."""

    init_fn: InitFn
    update_fn: UpdateFn
    params_fn: ParamsFn


def _flatten_states(states: list[Any]) -> tuple[list[list[Any]], list[Any]]:
    flat = [tree_util.tree_flatten(s) for s in states]
    return [leaves for leaves, _ in flat], [treedef for _, treedef in flat]


def optimizer(opt_maker: Callable[..., Any]) -> Callable[..., Optimizer]:
    """Decorator: ``opt_maker(*args, **kwargs)`` returns ``(init, update,
    get_params)`` for a single array; the decorated function returns the
    :class:`Optimizer` for pytrees of arrays."""
    @functools.wraps(opt_maker)
    def make(*args: Any, **kwargs: Any) -> Optimizer:
        init, update, get_params = opt_maker(*args, **kwargs)

        @functools.wraps(init)
        def tree_init(params: Params) -> OptimizerState:
            leaves, treedef = tree_util.tree_flatten(params)
            packed, subtrees = _flatten_states([init(leaf) for leaf in leaves])
            return OptimizerState(packed, treedef, subtrees)

        @functools.wraps(update)
        def tree_update(i: Step, grads: Updates, opt_state: OptimizerState) -> OptimizerState:
            packed, treedef, subtrees = opt_state
            grad_leaves, grad_treedef = tree_util.tree_flatten(grads)
            if grad_treedef != treedef:
                raise TypeError(
                    f"optimizer update function was passed a gradient tree that did not "
                    f"match the parameter tree structure with which it was initialized: "
                    f"parameter tree {treedef} and grad tree {grad_treedef}.")
            states = [tree_util.tree_unflatten(sub, leaves)
                      for sub, leaves in zip(subtrees, packed)]
            new_states = [update(i, g, s) for g, s in zip(grad_leaves, states)]
            new_packed, new_subtrees = _flatten_states(new_states)
            for before, after in zip(subtrees, new_subtrees):
                if before != after:
                    raise TypeError(
                        f"optimizer update function produced an output structure that did "
                        f"not match its input structure: input {before} and output {after}.")
            return OptimizerState(new_packed, treedef, subtrees)

        @functools.wraps(get_params)
        def tree_get_params(opt_state: OptimizerState) -> Params:
            packed, treedef, subtrees = opt_state
            params = [get_params(tree_util.tree_unflatten(sub, leaves))
                      for sub, leaves in zip(subtrees, packed)]
            return tree_util.tree_unflatten(treedef, params)

        return Optimizer(tree_init, tree_update, tree_get_params)

    return make


# --------------------------------------------------------------------------
# Optimizers (for one array; @optimizer lifts them to pytrees)
# --------------------------------------------------------------------------

def _first(state: tuple[Any, ...]) -> Any:
    return state[0]


@optimizer
def sgd(step_size: float | Schedule) -> Any:
    """Stochastic gradient descent: ``x - step_size(i) * g``."""
    schedule = make_schedule(step_size)

    def init(x0: Array) -> Array:
        return x0

    def update(i: Step, g: Array, x: Array) -> Array:
        return x - schedule(i) * g

    def get_params(x: Array) -> Array:
        return x

    return Optimizer(init, update, get_params)


@optimizer
def momentum(step_size: float | Schedule, mass: float) -> Any:
    """SGD with momentum ``mass``: ``v = mass * v + g; x -= step_size(i) * v``."""
    schedule = make_schedule(step_size)

    def init(x0: Array) -> tuple[Array, Array]:
        return x0, jnp.zeros_like(x0)

    def update(i: Step, g: Array, state: tuple[Array, Array]) -> tuple[Array, Array]:
        x, velocity = state
        velocity = mass * velocity + g
        return x - schedule(i) * velocity, velocity

    return init, update, _first


@optimizer
def nesterov(step_size: float | Schedule, mass: float) -> Any:
    """SGD with Nesterov momentum ``mass``."""
    schedule = make_schedule(step_size)

    def init(x0: Array) -> tuple[Array, Array]:
        return x0, jnp.zeros_like(x0)

    def update(i: Step, g: Array, state: tuple[Array, Array]) -> tuple[Array, Array]:
        x, velocity = state
        velocity = mass * velocity + g
        return x - schedule(i) * (mass * velocity + g), velocity

    return init, update, _first


@optimizer
def adagrad(step_size: float | Schedule, momentum: float = 0.9) -> Any:
    """Adagrad (Duchi et al., 2011), with ``momentum`` on the scaled gradient."""
    schedule = make_schedule(step_size)

    def init(x0: Array) -> tuple[Array, Array, Array]:
        return x0, jnp.zeros_like(x0), jnp.zeros_like(x0)

    def update(i: Step, g: Array, state: tuple[Array, Array, Array]
               ) -> tuple[Array, Array, Array]:
        x, g_sq, m = state
        g_sq = g_sq + jnp.square(g)
        inv_sqrt = jnp.where(g_sq > 0, 1. / jnp.sqrt(g_sq), 0.0)
        m = (1. - momentum) * (g * inv_sqrt) + momentum * m
        return x - schedule(i) * m, g_sq, m

    return init, update, _first


@optimizer
def rmsprop(step_size: float | Schedule, gamma: float = 0.9, eps: float = 1e-8) -> Any:
    """RMSProp: a running average (decay ``gamma``) of squared gradients
    scales the step."""
    schedule = make_schedule(step_size)

    def init(x0: Array) -> tuple[Array, Array]:
        return x0, jnp.zeros_like(x0)

    def update(i: Step, g: Array, state: tuple[Array, Array]) -> tuple[Array, Array]:
        x, avg_sq = state
        avg_sq = avg_sq * gamma + jnp.square(g) * (1. - gamma)
        return x - schedule(i) * g / jnp.sqrt(avg_sq + eps), avg_sq

    return init, update, _first


@optimizer
def rmsprop_momentum(step_size: float | Schedule, gamma: float = 0.9, eps: float = 1e-8,
                     momentum: float = 0.9) -> Any:
    """RMSProp with ``momentum`` on the scaled step."""
    schedule = make_schedule(step_size)

    def init(x0: Array) -> tuple[Array, Array, Array]:
        return x0, jnp.zeros_like(x0), jnp.zeros_like(x0)

    def update(i: Step, g: Array, state: tuple[Array, Array, Array]
               ) -> tuple[Array, Array, Array]:
        x, avg_sq, mom = state
        avg_sq = avg_sq * gamma + jnp.square(g) * (1. - gamma)
        mom = momentum * mom + schedule(i) * g / jnp.sqrt(avg_sq + eps)
        return x - mom, avg_sq, mom

    return init, update, _first


@optimizer
def adam(step_size: float | Schedule, b1: float = 0.9, b2: float = 0.999,
         eps: float = 1e-8) -> Any:
    """Adam (Kingma and Ba, 2015): bias-corrected first and second moment
    estimates with decays ``b1`` and ``b2``."""
    schedule = make_schedule(step_size)

    def init(x0: Array) -> tuple[Array, Array, Array]:
        return x0, jnp.zeros_like(x0), jnp.zeros_like(x0)

    def update(i: Step, g: Array, state: tuple[Array, Array, Array]
               ) -> tuple[Array, Array, Array]:
        x, m, v = state
        m = (1 - b1) * g + b1 * m
        v = (1 - b2) * jnp.square(g) + b2 * v
        m_hat = m / (1 - jnp.asarray(b1, m.dtype) ** (i + 1))
        v_hat = v / (1 - jnp.asarray(b2, m.dtype) ** (i + 1))
        return x - schedule(i) * m_hat / (jnp.sqrt(v_hat) + eps), m, v

    return init, update, _first


@optimizer
def adamax(step_size: float | Schedule, b1: float = 0.9, b2: float = 0.999,
           eps: float = 1e-8) -> Any:
    """AdaMax: Adam with the infinity norm in place of the second moment."""
    schedule = make_schedule(step_size)

    def init(x0: Array) -> tuple[Array, Array, Array]:
        return x0, jnp.zeros_like(x0), jnp.zeros_like(x0)

    def update(i: Step, g: Array, state: tuple[Array, Array, Array]
               ) -> tuple[Array, Array, Array]:
        x, m, u = state
        m = (1 - b1) * g + b1 * m
        u = jnp.maximum(b2 * u, jnp.abs(g))
        corrected = schedule(i) / (1 - jnp.asarray(b1, m.dtype) ** (i + 1))
        return x - corrected * m / (u + eps), m, u

    return init, update, _first


def _without(seq: Any, i: int, replacement: list[Any]) -> list[Any]:
    items = list(seq)
    items[i:i + 1] = replacement
    return items


@optimizer
def sm3(step_size: float | Schedule, momentum: float = 0.9) -> Any:
    """SM3 (Anil et al., 2019): one accumulator per axis of each parameter."""
    schedule = make_schedule(step_size)

    def along(ndim: int, v: Array, axis: int) -> Array:
        return v[tuple(_without([None] * ndim, axis, [slice(None)]))]

    def init(x0: Array) -> tuple[Array, Array, list[Array], tuple[int, ...]]:
        shape = tuple(jnp.shape(x0))
        x = jnp.atleast_1d(x0)
        accumulators = [jnp.zeros(n, dtype=x.dtype) for n in x.shape]
        return x, jnp.zeros_like(x), accumulators, shape

    def update(i: Step, g: Array, state: Any) -> Any:
        x, m, vs, shape = state
        spread = [along(g.ndim, v, axis) for axis, v in enumerate(vs)]
        accum = functools.reduce(jnp.minimum, spread) + jnp.square(g)
        inv_sqrt = jnp.where(accum > 0, 1. / jnp.sqrt(accum), 0)
        m = (1. - momentum) * (g * inv_sqrt) + momentum * m
        x = x - schedule(i) * m
        vs = [accum.max(tuple(_without(range(x.ndim), j, []))) for j in range(x.ndim)]
        return x, m, vs, shape

    def get_params(state: Any) -> Array:
        x, _, _, shape = state
        return x.reshape(shape)

    return init, update, get_params


# --------------------------------------------------------------------------
# Step-size schedules
# --------------------------------------------------------------------------

def constant(step_size: Any) -> Schedule:
    """The schedule that is ``step_size`` at every step."""
    def schedule(i: Step) -> Any:
        return step_size
    return schedule


def exponential_decay(step_size: Any, decay_steps: Any, decay_rate: Any) -> Schedule:
    """``step_size * decay_rate ** (i / decay_steps)``."""
    def schedule(i: Step) -> Any:
        return step_size * decay_rate ** (i / decay_steps)
    return schedule


def inverse_time_decay(step_size: Any, decay_steps: Any, decay_rate: Any,
                       staircase: bool = False) -> Schedule:
    """``step_size / (1 + decay_rate * i / decay_steps)`` (with ``staircase``,
    ``i / decay_steps`` rounded down)."""
    if staircase:
        def schedule(i: Step) -> Any:
            return step_size / (1 + decay_rate * jnp.floor(i / decay_steps))
    else:
        def schedule(i: Step) -> Any:
            return step_size / (1 + decay_rate * i / decay_steps)
    return schedule


def polynomial_decay(step_size: Any, decay_steps: Any, final_step_size: Any,
                     power: float = 1.0) -> Schedule:
    """From ``step_size`` to ``final_step_size`` over ``decay_steps`` steps as
    ``(1 - i / decay_steps) ** power``, then constant."""
    def schedule(step_num: Step) -> Any:
        done = jnp.minimum(step_num, decay_steps)
        mult = (1 - done / decay_steps) ** power
        return mult * (step_size - final_step_size) + final_step_size
    return schedule


def piecewise_constant(boundaries: Any, values: Any) -> Schedule:
    """``values[k]`` for steps past ``k`` of the ``boundaries`` (one fewer
    boundaries than values)."""
    bounds = jnp.array(boundaries)
    vals = jnp.array(values)
    if not bounds.ndim == vals.ndim == 1:
        raise ValueError("boundaries and values must be sequences")
    if not bounds.shape[0] == vals.shape[0] - 1:
        raise ValueError("boundaries length must be one shorter than values length")

    def schedule(i: Step) -> Any:
        return vals[jnp.sum(i > bounds)]
    return schedule


def make_schedule(scalar_or_schedule: Any) -> Schedule:
    """A schedule as is; a scalar as the :func:`constant` schedule."""
    if callable(scalar_or_schedule):
        schedule: Schedule = scalar_or_schedule
        return schedule
    if jnp.ndim(scalar_or_schedule) == 0:
        return constant(scalar_or_schedule)
    raise TypeError(f"a step size must be a scalar or a schedule (a function of the step), "
                    f"got {type(scalar_or_schedule)}")


# --------------------------------------------------------------------------
# Utilities
# --------------------------------------------------------------------------

def l2_norm(tree: Any) -> Array:
    """The l2 norm of all the leaves of ``tree`` together."""
    leaves = tree_util.tree_leaves(tree)
    return jnp.sqrt(sum(jnp.vdot(x, x) for x in leaves))


def clip_grads(grad_tree: Any, max_norm: Any) -> Any:
    """``grad_tree`` scaled down to l2 norm ``max_norm`` when its norm is larger."""
    norm = l2_norm(grad_tree)
    return tree_util.tree_map(
        lambda g: jnp.where(norm < max_norm, g, g * (max_norm / norm)), grad_tree)


class JoinPoint:
    """Marks where an inner (per-parameter state) tree joins the outer
    (parameter) tree in :func:`unpack_optimizer_state`'s result."""

    def __init__(self, subtree: Any) -> None:
        self.subtree = subtree

    def __iter__(self) -> Any:
        yield self.subtree


def unpack_optimizer_state(opt_state: OptimizerState) -> Any:
    """The state as a pytree of the parameters' structure with a
    :class:`JoinPoint` (holding that parameter's state tree) at each leaf, for
    serialization."""
    packed, treedef, subtrees = opt_state
    joins = [JoinPoint(tree_util.tree_unflatten(sub, leaves))
             for sub, leaves in zip(subtrees, packed)]
    return tree_util.tree_unflatten(treedef, joins)


def pack_optimizer_state(marked_pytree: Any) -> OptimizerState:
    """The inverse of :func:`unpack_optimizer_state`."""
    joins, treedef = tree_util.tree_flatten(marked_pytree)
    if not all(isinstance(j, JoinPoint) for j in joins):
        raise TypeError("pack_optimizer_state: every leaf must be a JoinPoint (as made by "
                        "unpack_optimizer_state)")
    packed, subtrees = _flatten_states([j.subtree for j in joins])
    return OptimizerState(packed, treedef, subtrees)
