"""The user-facing transformations: ``jvp``, ``linearize``, ``vjp``, ``grad``,
``value_and_grad``, ``jacfwd``, ``jacrev``, ``hessian``, ``vmap``,
``make_jaxpr`` and ``eval_jaxpr``, with JAX's signatures and semantics.

Each builds a ``TracingDebugInfo`` for the user function (argument names,
result paths) so that every jaxpr it produces names its inputs and outputs
and every trace-time error names the function and argument concerned.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from lamina_linear_util import api_util
from lamina_linear_util import tree_util as tu
from lamina_linear_util.linear_util import WrappedFun, transformation_with_aux, wrap_init
from lamina_tracing_core import ad, batching, core, dtypes, vmappable
from lamina_tracing_core import vma as _vma
from lamina_tracing_core import partial_eval as pe
from lamina_tracing_core.ad_util import (Zero, instantiate_zeros, is_transform_node,
                                         node_tangents_flat, staging, tangent_aval,
                                         user_tangents,
                                         typed_array)
from lamina_tracing_core.avals import (
    InvalidInputError,
    ShapedArray,
    abstract_only_types,
    aval_handlers,
    get_aval,
)
from lamina_tracing_core.jaxpr import ClosedJaxpr, Jaxpr
from lamina_tracing_core.primitives import Primitive
from lamina_tracing_core.lax.common import const
from lamina_tracing_core.lax import convert, structural, elementwise
from lamina_linear_util.debug_info import TracingDebugInfo

__all__ = [
    "ShapeDtypeStruct", "compiled_impl_when_eager", "compiled_when_eager", "eval_jaxpr", "grad", "set_eager_compiler", "hessian", "jacfwd", "jacrev", "jvp",
    "linearize", "make_jaxpr", "value_and_grad", "vjp", "vmap",
]


#: How :func:`compiled_when_eager` functions run eagerly: the jit layer
#: installs its ``jit`` (``compiler(fun, static_argnums)``); None runs them op by op.
_eager_compiler: Callable[[Callable[..., Any], tuple[int, ...]], Callable[..., Any]] | None = None


def set_eager_compiler(compiler: Callable[[Callable[..., Any], tuple[int, ...]],
                                          Callable[..., Any]]) -> None:
    """Installs the compiler :func:`compiled_when_eager` functions use (the jit layer's)."""
    global _eager_compiler
    _eager_compiler = compiler


def compiled_when_eager(fun: Callable[..., Any], static_argnums: tuple[int, ...] = ()
                        ) -> Callable[..., Any]:
    """``fun`` (positional arguments only), run as one compiled program when
    called outside every transformation, as JAX runs the library functions it
    jits: XLA may then fuse and simplify across its operations, which can
    change the last bits of the result against separate eager operations (JAX
    users see the compiled bits). Under a transformation, or before a
    compiler is installed, ``fun`` runs as written, its operations traced or
    run one by one."""
    compiled: list[Callable[..., Any]] = []

    @functools.wraps(fun)
    def run(*args: Any) -> Any:
        if (_eager_compiler is None or core._state.dynamic.trace_type is not core.EvalTrace
                or any(isinstance(a, core.Tracer) for a in args)):
            return fun(*args)
        if not compiled:
            compiled.append(_eager_compiler(fun, static_argnums))
        return compiled[0](*args)

    return run


class _StaticParams:
    """A primitive's params as one static argument of its compiled eager
    program: equal when every value is the same (jaxprs by identity)."""

    __slots__ = ("params", "_key")

    def __init__(self, params: dict[str, Any]):
        self.params = params
        self._key = tuple((k, _by_identity(v)) for k, v in params.items())

    def __hash__(self) -> int:
        return hash(self._key)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, _StaticParams) and self._key == other._key


def _by_identity(value: Any) -> Any:
    """``value`` as a hashable key: unhashable values by identity (the params
    object keeps them alive)."""
    if isinstance(value, (list, tuple)):
        return (type(value), tuple(_by_identity(v) for v in value))
    try:
        hash(value)
    except TypeError:
        return ("id", id(value))
    return value


def compiled_impl_when_eager(prim: Primitive, python_impl: Callable[..., Any]
                             ) -> Callable[..., Any]:
    """An impl rule for ``prim`` that runs it as one compiled program (as JAX
    dispatches an eager control-flow primitive), its params static; before a
    compiler is installed, ``python_impl`` evaluates it in Python."""
    def bind(static: _StaticParams, *args: Any) -> Any:
        if core._state.dynamic.trace_type is core.EvalTrace:
            # Not traced: jit is disabled (``disable_jit``), so the loop runs
            # in Python, as JAX's does then.
            return python_impl(*args, **static.params)
        return prim.bind(*args, **static.params)

    # The program's name in logs and name stacks (``jit(scan)``), as JAX's.
    bind.__name__ = bind.__qualname__ = prim.name
    run = compiled_when_eager(bind, static_argnums=(0,))

    def impl(*args: Any, **params: Any) -> Any:
        if _eager_compiler is None:
            return python_impl(*args, **params)
        return run(_StaticParams(params), *args)

    impl.__name__ = f"{prim.name}_impl"
    return impl


class ShapeDtypeStruct:
    """The shape and dtype of an array (what ``make_jaxpr(return_shape=True)``
    returns for each output)."""

    __slots__ = ("shape", "dtype", "weak_type")

    def __init__(self, shape: Sequence[int], dtype: Any, weak_type: bool = False):
        self.shape = tuple(shape)
        # A key dtype stays itself (``ShapeDtypeStruct((3,), key.dtype)``, as in JAX).
        self.dtype = dtype if getattr(dtype, "lamina_extended_dtype", False) else np.dtype(dtype)
        self.weak_type = weak_type

    @property
    def ndim(self) -> int:
        return len(self.shape)

    @property
    def size(self) -> int:
        return int(np.prod(self.shape))

    def __eq__(self, other: object) -> bool:
        return (isinstance(other, ShapeDtypeStruct) and self.shape == other.shape
                and self.dtype == other.dtype and self.weak_type == other.weak_type)

    def __hash__(self) -> int:
        return hash((self.shape, self.dtype, self.weak_type))

    def __repr__(self) -> str:
        weak = ", weak_type=True" if self.weak_type else ""
        return f"ShapeDtypeStruct(shape={self.shape}, dtype={self.dtype.name}{weak})"


def _aval_of_shape_dtype_struct(x: ShapeDtypeStruct) -> ShapedArray:
    return ShapedArray(x.shape, x.dtype, x.weak_type)


# A ShapeDtypeStruct has an aval but no value, as in JAX: it traces like an
# array wherever it is met (an argument, a closed-over constant, an operand of
# a lax or NumPy function while tracing), and running it is a TypeError.
aval_handlers[ShapeDtypeStruct] = _aval_of_shape_dtype_struct
abstract_only_types.add(ShapeDtypeStruct)


_HOST_VALUES = (bool, int, float, complex, np.ndarray, np.generic)


def _is_float0(ct: Any) -> bool:
    return isinstance(ct, np.ndarray) and ct.dtype == dtypes.float0


def _gradient_leaf(ct: Any, primal: Any) -> Any:
    """A gradient as an array, as JAX's ``grad`` returns: a cotangent that
    is still a host value (the seed passed through unchanged, a custom VJP's
    output, instantiated zeros) is placed on the device, in the type of the
    primal's tangent, weak type included. Float0 gradients of integer inputs
    stay numpy arrays, as in JAX; while staging, the staging turns constants
    into values itself."""
    if not isinstance(ct, _HOST_VALUES) or staging() or _is_float0(ct):
        return ct
    aval = tangent_aval(get_aval(primal))
    if aval.dtype == dtypes.float0:
        return ct
    return typed_array(ct, aval)


def _traced_fun(traced_for: str, fun: Callable[..., Any], args: Sequence[Any],
                kwargs: dict[str, Any], *, static_argnums: Sequence[int] = (),
                static_argnames: Sequence[str] = ()) -> WrappedFun:
    """``fun`` as a WrappedFun with its debug info and result paths."""
    api_util.check_callable(fun)
    dbg = api_util.debug_info(traced_for, fun, args, kwargs, static_argnums=static_argnums,
                              static_argnames=static_argnames)
    wrapped, _ = api_util.result_paths(wrap_init(fun, debug_info=dbg))
    return wrapped


# --- make_jaxpr ----------------------------------------------------------------------------
def make_jaxpr(fun: Callable[..., Any], static_argnums: int | Sequence[int] = (),
               axis_env: Sequence[tuple[Any, int]] | None = None,
               return_shape: bool = False, abstracted_axes: Any = None
               ) -> Callable[..., Any]:
    """``make_jaxpr(f)(*args, **kwargs)`` traces ``f`` and returns the
    ``ClosedJaxpr`` (with ``return_shape``, also the output shapes as
    ``ShapeDtypeStruct``s). The jaxpr's debug info names the arguments
    (``x``, ``y['hi']``) and results; ``axis_env`` binds named axes
    (``[('i', 4)]``). ``f`` may close over tracers of enclosing
    transformations: they become constants of the ClosedJaxpr."""
    if abstracted_axes is not None:
        raise TypeError("make_jaxpr: abstracted_axes (dynamic shapes) is not supported by "
                        "lamina; pass arrays of concrete shapes")
    static = api_util.ensure_index_tuple(static_argnums, what="static_argnums")

    @functools.wraps(fun)
    def make_jaxpr_f(*args: Any, **kwargs: Any) -> Any:
        f = _traced_fun("make_jaxpr", fun, args, kwargs, static_argnums=static)
        if static:
            f, dyn_args = api_util.argnums_partial_except(f, static, args, allow_invalid=True)
        else:
            dyn_args = tuple(args)
        args_flat, in_tree = tu.tree_flatten((dyn_args, kwargs))
        flat_fun, out_tree = api_util.flatten_fun(f, in_tree)
        in_avals = [get_aval(x) for x in args_flat]
        with core.extend_axis_env_nd(list(axis_env or ())):
            jaxpr, out_avals, consts = pe.trace_to_jaxpr_dynamic(flat_fun, in_avals)
        closed = ClosedJaxpr(jaxpr, consts)
        if return_shape:
            shapes = [ShapeDtypeStruct(a.shape, a.dtype, a.weak_type) for a in out_avals]
            return closed, tu.tree_unflatten(out_tree(), shapes)
        return closed

    make_jaxpr_f.__name__ = f"make_jaxpr({make_jaxpr_f.__name__})"
    return make_jaxpr_f


def eval_jaxpr(jaxpr: Jaxpr | ClosedJaxpr, consts: Sequence[Any], *args: Any,
               propagate_source_info: bool = True) -> list[Any]:
    """Evaluates a jaxpr (see ``core.eval_jaxpr``)."""
    inner = jaxpr.jaxpr if isinstance(jaxpr, ClosedJaxpr) else jaxpr
    return core.eval_jaxpr(inner, consts, *args, propagate_source_info=propagate_source_info)


def _for_function(traced_for: str, fun: Callable[..., Any]) -> str:
    """`` (the function f at file.py:3 for grad)``: appended to JAX's wording of
    an error about how a transformation was called, so it names the function."""
    src = api_util.fun_sourceinfo(fun) or api_util.fun_name(fun)
    return f" (the function {src} for {traced_for})"


# --- jvp and linearize ---------------------------------------------------------------------------
def _check_jvp_args(primals: Any, tangents: Any, fun: Callable[..., Any] | None = None
                    ) -> tuple[list[Any], list[Any], Any]:
    if not isinstance(primals, (tuple, list)) or not isinstance(tangents, (tuple, list)):
        raise TypeError("primal and tangent arguments to jvp must be tuples or lists; found "
                        f"{type(primals).__name__} and {type(tangents).__name__}.")
    primals_flat, tree = tu.tree_flatten(primals)
    tangents_flat, tangent_tree = tu.tree_flatten(tangents)
    if tree != tangent_tree and (expanded := node_tangents_flat(primals, tangents)) is not None:
        tangents_flat, tangent_tree = expanded, tree
    if tree != tangent_tree:
        raise TypeError("primal and tangent arguments to jvp must have the same tree "
                        f"structure; primals have tree structure {tree} whereas tangents "
                        f"have tree structure {tangent_tree}."
                        + (_for_function("jvp", fun) if fun is not None else ""))
    names = _flat_arg_names(primals)
    out_tangents: list[Any] = []
    for name, p, t in zip(names, primals_flat, tangents_flat):
        p_aval, t_aval = get_aval(p), get_aval(t)
        if p_aval.shape != t_aval.shape:
            raise ValueError("jvp called with different primal and tangent shapes;"
                             f"Got primal shape {p_aval.shape} and tangent shape as "
                             f"{t_aval.shape} (for {name})")
        expected = tangent_aval(p_aval).dtype
        if t_aval.dtype != expected:
            raise TypeError(
                "primal and tangent arguments to jvp do not match; dtypes must be equal, or "
                "in case of int/bool primal dtype the tangent dtype must be float0."
                f"Got primal dtype {p_aval.dtype} and so expected tangent dtype {expected}, "
                f"but got tangent dtype {t_aval.dtype} instead (for {name}).")
        out_tangents.append(Zero(t_aval) if t_aval.dtype == dtypes.float0 else t)
    return primals_flat, out_tangents, tree


def _flat_arg_names(primals: Sequence[Any]) -> list[str]:
    pairs, _ = tu.tree_flatten_with_path(tuple(primals))
    return [f"primals{tu.keystr(path)}" for path, _ in pairs]


def jvp(fun: Callable[..., Any], primals: Sequence[Any], tangents: Sequence[Any],
        has_aux: bool = False) -> Any:
    """``(primals_out, tangents_out)`` (and ``aux``): ``fun`` evaluated at
    ``primals`` with its Jacobian-vector product with ``tangents``."""
    api_util.check_callable(fun)
    primals_flat, tangents_flat, in_tree = _check_jvp_args(primals, tangents, fun)
    f = _traced_fun("jvp", fun, tuple(primals), {})
    if has_aux:
        flat_fun, trees = api_util.flatten_fun_nokwargs2(f, in_tree)
        flat_fun, n_main = transformation_with_aux(_concat_aux, flat_fun)
        # the outputs are again all of f's leaves, (ans, aux): f's names
        flat_fun = flat_fun.replace_debug_info(f.debug_info)
        outs_p, outs_t = ad.jvp(flat_fun, primals_flat, tangents_flat)
        n = n_main()
        out_tree, aux_tree = trees()
        primals_out = tu.tree_unflatten(out_tree, outs_p[:n])
        tangents_out = user_tangents(
            tu.tree_unflatten(out_tree, [instantiate_zeros(t) for t in outs_t[:n]]))
        aux = tu.tree_unflatten(aux_tree, outs_p[n:])
        return primals_out, tangents_out, aux
    flat_fun, out_tree_thunk = api_util.flatten_fun_nokwargs(f, in_tree)
    outs_p, outs_t = ad.jvp(flat_fun, primals_flat, tangents_flat)
    return (tu.tree_unflatten(out_tree_thunk(), outs_p),
            user_tangents(tu.tree_unflatten(out_tree_thunk(),
                                             [instantiate_zeros(t) for t in outs_t])))


def _concat_aux(inner: Callable[..., Any], store: Any, *args: Any) -> list[Any]:
    outs, aux = inner(*args)
    store.store(len(outs))
    return list(outs) + list(aux)


def linearize(fun: Callable[..., Any], *primals: Any, has_aux: bool = False) -> Any:
    """``(primals_out, f_jvp)`` (and ``aux``): ``f_jvp(*tangents)`` evaluates
    the linearized function (the JVP at ``primals``) on new tangents."""
    api_util.check_callable(fun)
    f = _traced_fun("linearize", fun, primals, {})
    primals_flat, in_tree = tu.tree_flatten(primals)
    if has_aux:
        flat_fun, trees = api_util.flatten_fun_nokwargs2(f, in_tree)
        lin = ad.linearize(flat_fun, primals_flat, has_aux=True)
        out_tree, aux_tree = trees()
    else:
        flat_fun, out_tree_thunk = api_util.flatten_fun_nokwargs(f, in_tree)
        lin = ad.linearize(flat_fun, primals_flat)
        out_tree = out_tree_thunk()
    in_avals = [tangent_aval(get_aval(p)) for p in primals_flat]
    jaxpr, consts = lin.jaxpr, lin.consts

    def f_jvp(*tangents: Any) -> Any:
        tangents_flat, tree = tu.tree_flatten(tangents)
        if tree != in_tree and (expanded := node_tangents_flat(primals, tangents)) is not None:
            tangents_flat, tree = expanded, in_tree
        if tree != in_tree:
            raise TypeError(f"linearized function called on tangents with tree structure "
                            f"{tree}, expected {in_tree}")
        for t, aval in zip(tangents_flat, in_avals):
            t_aval = get_aval(t)
            if t_aval.shape != aval.shape:
                raise ValueError(f"linearized function called with tangent of shape "
                                 f"{t_aval.shape}, expected {aval.shape}")
        outs = core.eval_jaxpr(jaxpr, consts, *tangents_flat)
        return user_tangents(tu.tree_unflatten(out_tree, outs))

    out = tu.tree_unflatten(out_tree, lin.out_primals)
    if has_aux:
        return out, f_jvp, tu.tree_unflatten(aux_tree, lin.aux)
    return out, f_jvp


# --- vjp ---------------------------------------------------------------------------------------
def vjp(fun: Callable[..., Any], *primals: Any, has_aux: bool = False,
        reduce_axes: Sequence[Any] = ()) -> Any:
    """``(primals_out, vjp_fn)`` (and ``aux``): ``vjp_fn(cotangents)`` pulls
    cotangents of the outputs back to the inputs (a tuple, one per primal)."""
    api_util.check_callable(fun)
    f = _traced_fun("vjp", fun, primals, {})
    return _vjp(f, primals, has_aux=has_aux)


def _vjp(f: WrappedFun, primals: Sequence[Any], *, has_aux: bool) -> Any:
    primals_flat, in_tree = tu.tree_flatten(tuple(primals))
    if has_aux:
        flat_fun, trees = api_util.flatten_fun_nokwargs2(f, in_tree)
        out_primals, vjp_flat, aux_flat = ad.vjp(flat_fun, primals_flat, has_aux=True)
        out_tree, aux_tree = trees()
    else:
        flat_fun, out_tree_thunk = api_util.flatten_fun_nokwargs(f, in_tree)
        out_primals, vjp_flat, _ = ad.vjp(flat_fun, primals_flat)
        out_tree = out_tree_thunk()
    out_avals = [get_aval(o) for o in out_primals]
    primal_avals = [get_aval(p) for p in primals_flat]

    def vjp_fn(cotangents: Any) -> tuple[Any, ...]:
        cts_flat, ct_tree = tu.tree_flatten(cotangents)
        if ct_tree != out_tree and (
                expanded := node_tangents_flat(out, cotangents)) is not None:
            cts_flat, ct_tree = expanded, out_tree
        if ct_tree != out_tree:
            raise ValueError(f"Tree structure of cotangent input {ct_tree}, does not match "
                             f"structure of primal output {out_tree}.")
        checked = []
        for i, (ct, aval) in enumerate(zip(cts_flat, out_avals)):
            ct_aval = get_aval(ct)
            want = tangent_aval(aval)
            if ct_aval.shape != aval.shape:
                owner = core.describe_output(f.debug_info, i, len(out_avals))
                raise ValueError(f"Shape of cotangent input to vjp pullback function "
                                 f"{ct_aval.shape} must be the same as the shape of "
                                 f"corresponding primal input {aval.shape} (the cotangent of "
                                 f"{owner}).")
            if ct_aval.dtype != want.dtype and not ct_aval.weak_type:
                raise ValueError(f"Type of cotangent input to vjp pullback function "
                                 f"({ct_aval.dtype}) is not the expected tangent type "
                                 f"({want.dtype}) of corresponding primal output with "
                                 f"dtype {aval.dtype}.")
            checked.append(Zero(want) if want.dtype == dtypes.float0 else ct)
        arg_cts = vjp_flat(*checked)
        arg_cts = [_fix_ct_dtype(ct, aval) for ct, aval in zip(arg_cts, primal_avals)]
        return tuple(user_tangents(tu.tree_unflatten(in_tree, arg_cts)))

    out = tu.tree_unflatten(out_tree, out_primals)
    if has_aux:
        return out, vjp_fn, tu.tree_unflatten(aux_tree, aux_flat)
    return out, vjp_fn


def _fix_ct_dtype(ct: Any, aval: ShapedArray) -> Any:
    want = tangent_aval(aval)
    if want.dtype == dtypes.float0:
        return np.zeros(aval.shape, dtypes.float0)
    return ct


# --- grad --------------------------------------------------------------------------------------
def _check_input_dtype_grad(holomorphic: bool, allow_int: bool, name: str | None,
                            x: Any) -> None:
    # a transformation-only node (a key array): named by its own dtype, not
    # its data's, and never differentiable
    node = is_transform_node(x)
    dt = x.dtype if node else get_aval(x).dtype
    where = f" (argument {name})" if name else ""
    if holomorphic and (node or not dtypes.is_complex(dt)):
        raise TypeError("grad with holomorphic=True requires inputs with complex dtype, "
                        f"but got {dt.name}{where}.")
    if (node or not dtypes.is_inexact(dt)) and not allow_int:
        raise TypeError("grad requires real- or complex-valued inputs (input dtype that is a "
                        f"sub-dtype of np.inexact), but got {dt.name}{where}. If you want to "
                        "use Boolean- or integer-valued inputs, use vjp or set allow_int to "
                        "True.")


def _check_output_dtype_grad(holomorphic: bool, x: Any) -> None:
    dt = get_aval(x).dtype
    if holomorphic:
        if not dtypes.is_complex(dt):
            raise TypeError("grad with holomorphic=True requires outputs with complex dtype, "
                            f"but got {dt.name}.")
    elif dtypes.is_complex(dt):
        raise TypeError("grad requires real-valued outputs (output dtype that is a sub-dtype "
                        f"of np.floating), but got {dt.name}. For holomorphic "
                        "differentiation, pass holomorphic=True. For differentiation of "
                        "non-holomorphic functions involving complex outputs, use vjp "
                        "directly.")
    elif not dtypes.is_floating(dt):
        raise TypeError("grad requires real-valued outputs (output dtype that is a sub-dtype "
                        f"of np.floating), but got {dt.name}. For differentiation of "
                        "functions with integer outputs, use jax.vjp directly.")


def _check_scalar(x: Any, traced_for: str, fun: Callable[..., Any]) -> None:
    msg = "Gradient only defined for scalar-output functions. Output {}." + _for_function(
        traced_for, fun)
    try:
        aval = get_aval(x)
    except TypeError as e:
        raise TypeError(msg.format(f"was {x}")) from e
    if aval.shape != ():
        raise TypeError(msg.format(f"had shape: {aval.shape}"))


def grad(fun: Callable[..., Any], argnums: int | Sequence[int] = 0, has_aux: bool = False,
         holomorphic: bool = False, allow_int: bool = False,
         reduce_axes: Sequence[Any] = ()) -> Callable[..., Any]:
    """The gradient of scalar-valued ``fun`` with respect to the arguments
    ``argnums`` (an int gives one gradient, a tuple a tuple of them)."""
    value_and_grad_f = _value_and_grad(fun, argnums, has_aux, holomorphic, allow_int, "grad")

    @functools.wraps(fun)
    def grad_f(*args: Any, **kwargs: Any) -> Any:
        if has_aux:
            (_, aux), g = value_and_grad_f(*args, **kwargs)
            return g, aux
        _, g = value_and_grad_f(*args, **kwargs)
        return g

    return grad_f


def value_and_grad(fun: Callable[..., Any], argnums: int | Sequence[int] = 0,
                   has_aux: bool = False, holomorphic: bool = False, allow_int: bool = False,
                   reduce_axes: Sequence[Any] = ()) -> Callable[..., Any]:
    """``(value, gradient)`` of scalar-valued ``fun`` (see ``grad``)."""
    return _value_and_grad(fun, argnums, has_aux, holomorphic, allow_int, "value_and_grad")


def _diff_fun(traced_for: str, fun: Callable[..., Any], argnums: int | Sequence[int],
              args: Sequence[Any], kwargs: dict[str, Any]
              ) -> tuple[WrappedFun, tuple[Any, ...]]:
    """``fun`` as a WrappedFun of the ``argnums`` arguments only, its debug
    info naming exactly their leaves."""
    api_util.check_callable(fun)
    nums = api_util.ensure_index_tuple(argnums, what="argnums")
    if not args:
        raise TypeError(f"differentiating with respect to argnums={argnums} requires at least "
                        f"{max(nums) + 1 if nums else 1} positional arguments to be passed "
                        f"by the caller, but got only 0 positional arguments."
                        + _for_function(traced_for, fun))
    for i in nums:
        if not -len(args) <= i < len(args):
            raise TypeError(f"differentiating with respect to argnums={argnums} requires at "
                            f"least {max(nums) + 1} positional arguments to be passed by the "
                            f"caller, but got only {len(args)} positional arguments."
                            + _for_function(traced_for, fun))
    dyn = tuple(i % len(args) for i in nums)
    static = [i for i in range(len(args)) if i not in dyn]
    dbg = api_util.debug_info(traced_for, fun, args, kwargs, static_argnums=static,
                              static_argnames=list(kwargs))
    target = functools.partial(fun, **kwargs) if kwargs else fun
    f, _ = api_util.result_paths(wrap_init(target, debug_info=dbg))
    f, dyn_args = api_util.argnums_partial(f, dyn, args, require_static_args_hashable=False)
    if len(set(dyn)) != len(dyn):
        raise ValueError(f"argnums {argnums} has repeated entries")
    if dyn != tuple(sorted(dyn)):
        # debug_info names leaves in argument order; argnums_partial passes them in
        # argnums order: reorder the names to match.
        names = _names_in_argnum_order(dbg.arg_names, args, dyn)
        f = f.replace_debug_info(f.debug_info.with_arg_names(names)
                                 if f.debug_info is not None else None)
    return f, dyn_args


def _names_in_argnum_order(names: Sequence[str | None], args: Sequence[Any],
                           dyn: Sequence[int]) -> list[str | None]:
    counts = {i: len(tu.tree_leaves(args[i])) for i in dyn}
    by_arg: dict[int, list[str | None]] = {}
    it = iter(names)
    for i in sorted(dyn):
        by_arg[i] = [next(it) for _ in range(counts[i])]
    return [n for i in dyn for n in by_arg[i]]


def _value_and_grad(fun: Callable[..., Any], argnums: int | Sequence[int], has_aux: bool,
                    holomorphic: bool, allow_int: bool, traced_for: str
                    ) -> Callable[..., Any]:
    @functools.wraps(fun)
    def value_and_grad_f(*args: Any, **kwargs: Any) -> Any:
        f, dyn_args = _diff_fun(traced_for, fun, argnums, args, kwargs)
        names = f.debug_info.arg_names if f.debug_info is not None else ()
        leaves = tu.tree_leaves(dyn_args)
        try:
            i = 0  # the flat index (into names) of each leaf users see
            for leaf in tu.user_trees.tree_leaves(dyn_args):
                _check_input_dtype_grad(holomorphic, allow_int,
                                        names[i] if i < len(names) else None, leaf)
                i += len(tu.tree_leaves(leaf))
        except InvalidInputError:
            raise core.invalid_argument_error(f.debug_info, leaves) from None
        if has_aux:
            ans, vjp_py, aux = _vjp(f, dyn_args, has_aux=True)
        else:
            ans, vjp_py = _vjp(f, dyn_args, has_aux=False)
        _check_scalar(ans, traced_for, fun)
        _check_output_dtype_grad(holomorphic, ans)
        # the seed 1 in the output's type: weak for a weak output (a Python
        # scalar), as in JAX, so the gradient promotes like the input did
        g = vjp_py(const(get_aval(ans), 1))
        g = tu.user_trees.tree_map(_gradient_leaf, g, dyn_args)
        g = g[0] if isinstance(argnums, int) else g
        if has_aux:
            return (ans, aux), g
        return ans, g

    return value_and_grad_f


# --- Jacobians -----------------------------------------------------------------------------------
def _std_basis(flat_avals: Sequence[ShapedArray], dtype: Any) -> list[np.ndarray[Any, Any]]:
    """One basis matrix per input: identity rows split by input, reshaped."""
    sizes = [a.size for a in flat_avals]
    total = sum(sizes)
    eye = np.eye(total, dtype=dtype)
    out, start = [], 0
    for a, n in zip(flat_avals, sizes):
        # each input's (output's) piece in its own dtype, as JAX's basis: a
        # float16 input gets float16 tangents even beside a float32 one
        piece = eye[:, start:start + n].reshape((total,) + a.shape)
        out.append(convert.convert_element_type_internal(piece, a.dtype))
        start += n
    return out


def _jac_dtype(avals: Sequence[ShapedArray], holomorphic: bool) -> Any:
    dts = [a.dtype for a in avals]
    return dtypes.result_type(*dts) if dts else dtypes.default_float_dtype()


def jacfwd(fun: Callable[..., Any], argnums: int | Sequence[int] = 0, has_aux: bool = False,
           holomorphic: bool = False) -> Callable[..., Any]:
    """The Jacobian of ``fun`` by forward mode (one JVP per input element,
    vmapped). Output ``[out..., in...]``."""

    @functools.wraps(fun)
    def jacfun(*args: Any, **kwargs: Any) -> Any:
        f, dyn_args = _diff_fun("jacfwd", fun, argnums, args, kwargs)
        leaves, in_tree = tu.tree_flatten(dyn_args)
        names = f.debug_info.arg_names if f.debug_info is not None else ()
        for i, leaf in enumerate(leaves):
            _check_input_dtype_jac(holomorphic, names[i] if i < len(names) else None, leaf,
                                   "jacfwd")
        avals = [get_aval(x) for x in leaves]
        basis = _std_basis(avals, _jac_dtype(avals, holomorphic))
        if has_aux:
            flat_fun, trees = api_util.flatten_fun_nokwargs2(f, in_tree)
            flat_fun, n_main = transformation_with_aux(_concat_aux, flat_fun)
        else:
            flat_fun, out_tree_thunk = api_util.flatten_fun_nokwargs(f, in_tree)

        counts: list[int] = []

        def pushfwd(*tangents: Any) -> list[Any]:
            outs_p, outs_t = ad.jvp(flat_fun, leaves, list(tangents))
            counts.append(len(outs_p))
            return list(outs_p) + list(outs_t)

        def out_dims() -> tuple[int | None, ...]:
            # primal outputs do not depend on the tangents; the Jacobian
            # columns go last
            return (None,) * counts[-1] + (-1,) * counts[-1]

        total = sum(a.size for a in avals)
        batched = batching.batch_fun(wrap_init(pushfwd, debug_info=_basis_debug_info(f)),
                                     batching.AxisData(None, total),
                                     [0] * len(basis), out_dims)
        outs = list(batched.call_wrapped(*basis))
        n_all = len(outs) // 2
        n = n_main() if has_aux else n_all
        ys, jac_cols = outs[:n_all], outs[n_all:]
        jacs = []
        for y, col in zip(ys[:n], jac_cols[:n]):
            y_aval = get_aval(y)
            pieces = [_like(p, y_aval) for p in _split_last(col, avals, y_aval.shape, structural)]
            tree = tu.tree_unflatten(in_tree, pieces)
            jacs.append(tree[0] if isinstance(argnums, int) else tree)
        if has_aux:
            out_tree, aux_tree = trees()
            return (tu.tree_unflatten(out_tree, jacs),
                    tu.tree_unflatten(aux_tree, ys[n:]))
        return tu.tree_unflatten(out_tree_thunk(), jacs)

    return jacfun


def _basis_debug_info(f: WrappedFun) -> Any:
    """Debug info for the function a Jacobian vmaps over its basis: the user
    function's name (so its equations are named ``vmap(f)/jvp(f)``), no
    argument names or result paths (its arguments are basis vectors)."""
    dbg = f.debug_info
    if dbg is None:
        return None
    return TracingDebugInfo(dbg.traced_for, dbg.func_src_info, (), None)


def _check_input_dtype_jac(holomorphic: bool, name: str | None, x: Any, api: str) -> None:
    dt = get_aval(x).dtype
    where = f" (argument {name})" if name else ""
    if holomorphic and not dtypes.is_complex(dt):
        raise TypeError(f"{api} with holomorphic=True requires inputs with complex dtype, "
                        f"but got {dt.name}{where}.")
    if not dtypes.is_inexact(dt):
        raise TypeError(f"{api} requires real- or complex-valued inputs (input dtype that is "
                        f"a sub-dtype of np.inexact), but got {dt.name}{where}. If you want "
                        f"to use Boolean- or integer-valued inputs, use vjp or set allow_int "
                        f"to True.")


def _like(block: Any, example: ShapedArray) -> Any:
    """A Jacobian block in the dtype and weak type of ``example`` (jacfwd: the
    output; jacrev: the input), as in JAX: the basis has the common dtype of
    all of them, and a real ``example`` keeps only the real part."""
    if dtypes.is_complex(get_aval(block).dtype) and not dtypes.is_complex(example.dtype):
        block = elementwise.real(block)
    return convert.convert_element_type_internal(block, example.dtype, example.weak_type)


def _split_last(col: Any, avals: Sequence[ShapedArray], out_shape: tuple[int, ...],
                structural: Any) -> list[Any]:
    """Splits the trailing input-element axis of a Jacobian block per input
    and reshapes each piece to ``out_shape + in_shape``."""
    pieces, start = [], 0
    nd = len(out_shape)
    for a in avals:
        n = a.size
        limits = list(out_shape) + [start + n]
        starts = [0] * nd + [start]
        piece = structural.slice(col, starts, limits)
        pieces.append(structural.reshape(piece, tuple(out_shape) + a.shape))
        start += n
    return pieces


def jacrev(fun: Callable[..., Any], argnums: int | Sequence[int] = 0, has_aux: bool = False,
           holomorphic: bool = False, allow_int: bool = False) -> Callable[..., Any]:
    """The Jacobian of ``fun`` by reverse mode (one VJP per output element,
    vmapped). Output ``[out..., in...]``."""

    @functools.wraps(fun)
    def jacfun(*args: Any, **kwargs: Any) -> Any:
        f, dyn_args = _diff_fun("jacrev", fun, argnums, args, kwargs)
        leaves, in_tree = tu.tree_flatten(dyn_args)
        names = f.debug_info.arg_names if f.debug_info is not None else ()
        for i, leaf in enumerate(leaves):
            if not allow_int:
                _check_input_dtype_jac(holomorphic, names[i] if i < len(names) else None, leaf,
                                       "jacrev")
        if has_aux:
            flat_fun, trees = api_util.flatten_fun_nokwargs2(f, in_tree)
            out_flat, vjp_flat, aux_flat = ad.vjp(flat_fun, leaves, has_aux=True)
            out_tree, aux_tree = trees()
        else:
            flat_fun, out_tree_thunk = api_util.flatten_fun_nokwargs(f, in_tree)
            out_flat, vjp_flat, _ = ad.vjp(flat_fun, leaves)
            out_tree = out_tree_thunk()
        out_avals = [get_aval(y) for y in out_flat]
        in_avals = [get_aval(x) for x in leaves]
        basis = _std_basis(out_avals, _jac_dtype(out_avals, holomorphic))
        total = sum(a.size for a in out_avals)
        pull = wrap_init(lambda *cts: vjp_flat(*cts), debug_info=_basis_debug_info(f))
        batched = batching.batch_fun(pull, batching.AxisData(None, total), [0] * len(basis),
                                     lambda: (0,) * len(in_avals))
        rows = list(batched.call_wrapped(*basis))  # per input: [total, *in_shape]
        # rows[j][k] = d out_flat_element_k / d in_j ; reshape per output.
        jac_per_out: list[list[Any]] = [[] for _ in out_avals]
        for row, in_aval in zip(rows, in_avals):
            start = 0
            for i, oa in enumerate(out_avals):
                n = oa.size
                piece = structural.slice(row, [start] + [0] * in_aval.ndim,
                                         [start + n] + list(in_aval.shape))
                jac_per_out[i].append(_like(structural.reshape(piece, oa.shape + in_aval.shape),
                                            in_aval))
                start += n
        jacs = []
        for pieces in jac_per_out:
            tree = tu.tree_unflatten(in_tree, pieces)
            jacs.append(tree[0] if isinstance(argnums, int) else tree)
        out = tu.tree_unflatten(out_tree, jacs)
        if has_aux:
            return out, tu.tree_unflatten(aux_tree, aux_flat)
        return out

    return jacfun


def hessian(fun: Callable[..., Any], argnums: int | Sequence[int] = 0, has_aux: bool = False,
            holomorphic: bool = False) -> Callable[..., Any]:
    """The Hessian of scalar ``fun``: ``jacfwd(jacrev(fun))``."""
    return jacfwd(jacrev(fun, argnums, has_aux=has_aux, holomorphic=holomorphic), argnums,
                  has_aux=has_aux, holomorphic=holomorphic)


# --- vmap ----------------------------------------------------------------------------------------
def _check_axis_spec(name: str, spec: Any) -> None:
    leaves = tu.tree_leaves(spec, is_leaf=lambda x: x is None)
    for leaf in leaves:
        if (leaf is not None and not isinstance(leaf, (int, np.integer))
                and type(leaf) not in vmappable.spec_types):
            raise TypeError(f"vmap {name} must be an int, None, or (nested) container with "
                            f"those types as leaves, but got {leaf!r}.")


def vmap(fun: Callable[..., Any], in_axes: Any = 0, out_axes: Any = 0,
         axis_name: Any = None, axis_size: int | None = None,
         spmd_axis_name: Any = None, sum_match: bool = False) -> Callable[..., Any]:
    """Vectorizes ``fun`` over the axes ``in_axes`` of its arguments (a prefix
    pytree of the positional arguments: int, None, or containers of them),
    putting the mapped axis of the outputs at ``out_axes``. ``axis_name``
    binds a named axis for collectives (``psum(x, axis_name)``). With
    ``sum_match`` a mapped output whose ``out_axes`` is None is summed over
    the mapped axis (otherwise an error)."""
    api_util.check_callable(fun)
    if isinstance(in_axes, list):
        in_axes = tuple(in_axes)
    if not (in_axes is None or isinstance(in_axes, (int, np.integer, tuple))
            or type(in_axes) in vmappable.spec_types):
        raise TypeError("vmap in_axes must be an int, None, or a tuple of entries "
                        "corresponding to the positional arguments passed to the function, "
                        f"but got {in_axes}.")
    _check_axis_spec("in_axes", in_axes)
    _check_axis_spec("out_axes", out_axes)

    @functools.wraps(fun)
    def vmap_f(*args: Any, **kwargs: Any) -> Any:
        if isinstance(in_axes, tuple) and len(in_axes) != len(args):
            raise ValueError("vmap in_axes must be an int, None, or a tuple of entries "
                             "corresponding to the positional arguments passed to the "
                             f"function, but got len(in_axes)={len(in_axes)}, "
                             f"len(args)={len(args)}" + _for_function("vmap", fun))
        f = _traced_fun("vmap", fun, args, kwargs)
        if vmappable.vmappables:
            leaves = tu.tree_leaves((tuple(args), kwargs), is_leaf=vmappable.is_vmappable)
            if any(map(vmappable.is_vmappable, leaves)):
                return _vmap_containers(fun, args, kwargs, in_axes, out_axes,
                                        batching.AxisData(axis_name, 0, spmd_axis_name),
                                        axis_size)
        args_flat, in_tree = tu.tree_flatten((tuple(args), kwargs))
        in_dims = api_util.flatten_axes("vmap in_axes", in_tree, (in_axes, 0), kws=True,
                                        tupled_args=True)
        try:
            size = _mapped_axis_size(fun, args_flat, in_dims, _vmap_arg_descriptions(f, kwargs),
                                     axis_size)
        except InvalidInputError:
            raise core.invalid_argument_error(f.debug_info, args_flat) from None
        in_dims = [None if d is None else int(d) % max(get_aval(x).ndim, 1)
                   for x, d in zip(args_flat, in_dims)]
        flat_fun, out_tree = api_util.flatten_fun(f, in_tree)

        def out_dims() -> tuple[int | None, ...]:
            tree = out_tree()
            dims = api_util.flatten_axes("vmap out_axes", tree, out_axes)
            return tuple(dims)

        axis_data = batching.AxisData(axis_name, size, spmd_axis_name)
        # negative out_axes count from the end of each batched output;
        # matchaxis/moveaxis normalize them once the output rank is known
        batched = batching.batch_fun(flat_fun, axis_data, in_dims, out_dims,
                                     sum_unbatched=bool(sum_match))
        if spmd_axis_name is not None:
            # inside a shard_map body the batched values vary over the spmd
            # axes, so every operation on them does (as JAX types them)
            args_flat = _vma.vary_over_spmd_axes(args_flat, [d is not None for d in in_dims],
                                                 spmd_axis_name,
                                                 "vmap" + _for_function("vmap", fun))
        outs = batched.call_wrapped(*args_flat)
        if spmd_axis_name is not None:
            outs = _vma.vary_over_spmd_axes(outs, [d is not None for d in out_dims()],
                                            spmd_axis_name, "vmap" + _for_function("vmap", fun))
        return tu.tree_unflatten(out_tree(), outs)

    return vmap_f


def _vmap_containers(fun: Callable[..., Any], args: Sequence[Any],
                     kwargs: dict[str, Any], in_axes: Any, out_axes: Any,
                     axis: batching.AxisData, axis_size: int | None) -> Any:
    """``vmap`` of arguments holding registered vmappable containers: each
    container goes in as the parts its ``to_elt`` maps (and comes out as the
    parts its ``from_elt`` batches), rebuilt on each side of the batching."""
    leaves, in_tree = tu.tree_flatten((tuple(args), kwargs), is_leaf=vmappable.is_vmappable)
    specs = api_util.flatten_axes("vmap in_axes", in_tree, (in_axes, 0), kws=True,
                                  tupled_args=True)
    plain = [(x, d) for x, d in zip(leaves, specs) if not vmappable.is_vmappable(x)]
    size = _mapped_axis_size(fun, [x for x, _ in plain], [d for _, d in plain], [],
                             axis_size)
    parts: list[Any] = []
    for x, d in zip(leaves, specs):
        parts.extend(vmappable.flatten_input(x, d) if vmappable.is_vmappable(x) else [(x, d)])
    for x, d in parts:
        shape = get_aval(x).shape
        if d is not None and not (-len(shape) <= d < len(shape) and shape[d] == size):
            raise ValueError(f"vmap: a vmappable container maps a part of shape {shape} along "
                             f"axis {d}, but the mapped axis has size {size}")
    # the examples' indices, for the handlers' get_idx()
    parts.append((np.arange(size, dtype=np.int32), 0))
    in_dims = [None if d is None else int(d) % max(get_aval(x).ndim, 1) for x, d in parts]
    out_info: list[Any] = []

    def flat_fun(*flat: Any) -> list[Any]:
        it, get_idx = iter(flat[:-1]), (lambda: flat[-1])
        rebuilt = [vmappable.unflatten_input(x, d, it, get_idx) if vmappable.is_vmappable(x)
                   else next(it) for x, d in zip(leaves, specs)]
        call_args, call_kwargs = tu.tree_unflatten(in_tree, rebuilt)
        ans = fun(*call_args, **call_kwargs)
        out_leaves, out_tree = tu.tree_flatten(ans, is_leaf=vmappable.is_vmappable)
        out_specs = api_util.flatten_axes("vmap out_axes", out_tree, out_axes)
        outs: list[tuple[Any, Any]] = []
        for y, d in zip(out_leaves, out_specs):
            outs.extend(vmappable.flatten_output(y, d, size) if vmappable.is_vmappable(y)
                        else [(y, d)])
        out_info[:] = [out_tree, out_leaves, out_specs, [d for _, d in outs]]
        return [y for y, _ in outs]

    wrapped = wrap_init(flat_fun, debug_info=None)
    axis_data = batching.AxisData(axis.name, size, axis.spmd_name)
    batched = batching.batch_fun(wrapped, axis_data, in_dims, lambda: out_info[3])
    it = iter(batched.call_wrapped(*[x for x, _ in parts]))
    out_tree, out_leaves, out_specs, _ = out_info
    rebuilt_out = [vmappable.unflatten_output(y, d, size, it) if vmappable.is_vmappable(y)
                   else next(it) for y, d in zip(out_leaves, out_specs)]
    return tu.tree_unflatten(out_tree, rebuilt_out)


def _vmap_arg_descriptions(f: WrappedFun, kwargs: dict[str, Any]) -> list[str | None]:
    """How vmap's errors name each flat argument: ``argument x['a']`` for a
    positional one, ``kwargs['w']`` for a keyword one (JAX 0.10's wording)."""
    names = list(f.debug_info.arg_names) if f.debug_info is not None else []
    kw_paths = [f"kwargs{tu.keystr(path)}" for path, _ in tu.tree_flatten_with_path(kwargs)[0]]
    n_positional = len(names) - len(kw_paths)
    described: list[str | None] = [None if n is None else f"argument {n}"
                                   for n in names[:n_positional]]
    return described + list(kw_paths) if n_positional >= 0 else [None] * len(names)


def _mapped_axis_size(fun: Callable[..., Any], args_flat: Sequence[Any],
                      in_dims: Sequence[Any], names: Sequence[str | None],
                      axis_size: int | None) -> int:
    """The one size of the mapped axes; a ValueError describing the sizes the
    way JAX does (the commonest size first) when they differ. ``names`` are
    the flat arguments' descriptions (``argument x['a']``, ``kwargs['w']``)."""
    sizes: list[tuple[int, int, str, ShapedArray]] = []
    d: Any
    for i, (x, d) in enumerate(zip(args_flat, in_dims)):
        if d is None:
            continue
        aval = get_aval(x)
        given = names[i] if i < len(names) else None
        name = given if given is not None else f"argument args[{i}]"
        if not -aval.ndim <= d < aval.ndim:
            raise ValueError(f"vmap was requested to map its argument along axis {d}, which "
                             f"implies that its rank should be at least {d + 1 if d >= 0 else -d}"
                             f", but is only {aval.ndim} (its shape is {aval.shape}) for "
                             f"{name}" + _for_function("vmap", fun))
        sizes.append((aval.shape[d], d % aval.ndim, name, aval))
    if not sizes:
        if axis_size is None:
            raise ValueError("vmap must have at least one non-None value in in_axes or "
                             "axis_size must be specified" + _for_function("vmap", fun))
        return int(axis_size)
    distinct = {s for s, _, _, _ in sizes}
    if axis_size is not None:
        distinct.add(int(axis_size))
    if len(distinct) == 1:
        return distinct.pop()
    raise ValueError("vmap got inconsistent sizes for array axes to be mapped:\n"
                     + ";\n".join(_size_groups(sizes, axis_size)))


def _size_groups(sizes: Sequence[tuple[int, int, str, ShapedArray]],
                 axis_size: int | None) -> list[str]:
    """One line per distinct size, the commonest first (then in order of
    appearance), each with its first axis as the example, as JAX words it."""
    by_size: dict[int, list[tuple[int, str, ShapedArray]]] = {}
    for s, d, name, aval in sizes:
        by_size.setdefault(s, []).append((d, name, aval))
    order = sorted(by_size, key=lambda s: -len(by_size[s]))  # stable: ties keep their order
    lines = [f"  * axis_size was given as {axis_size}"] if axis_size is not None else []
    for rank, s in enumerate(order):
        group = by_size[s]
        d, name, aval = group[0]
        example = f"axis {d} of {name} of type {aval.str_long()}"
        if len(group) == 1:
            lines.append(f"  * one axis had size {s}: {example}")
        else:
            many = "most axes" if rank == 0 else "some axes"
            lines.append(f"  * {many} ({len(group)} of them) had size {s}, e.g. {example}")
    return lines
