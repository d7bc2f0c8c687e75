"""What ``jit(fun, ...)`` fixes once, and what each call infers.

:class:`JitInfo` (made by :func:`make_jit_info`) holds the facts ``jit``'s
own arguments determine: the function's name, source and signature, the
resolved static/donated argnums and argnames, and the sharding
specification trees. :func:`infer_params` computes, per call, only what
depends on the arguments (:class:`PjitParams`): the debug info naming the
flat arguments, the static arguments baked into the function, the flat
avals (:func:`~lamina_sharded_jit.arguments.arg_aval`), the sharding and
donation of each flat argument, and the traced jaxpr (through the tracing
cache, :mod:`lamina_sharded_jit.tracing`).
"""

from __future__ import annotations

import dataclasses
import inspect
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from lamina_interpreters_pxla.backends import get_backend
from lamina_interpreters_pxla.sharding import (
    NamedSharding,
    context_mesh,
    named_sharding_of_type,
    single_device_sharding,
)
from lamina_linear_util import api_util
from lamina_linear_util import tree_util as tu
from lamina_linear_util.linear_util import annotate, wrap_init
from lamina_tracing_core.avals import ShapedArray
from lamina_tracing_core.memory import MemorySpace, space_to_kind
from lamina_tracing_core.jaxpr import ClosedJaxpr

from lamina_sharded_jit.arguments import arg_aval
from lamina_sharded_jit.shardings import (
    UNSPECIFIED,
    canonicalize_leaf,
    check_sharding_fits,
    is_unspecified,
    resolve_leaf,
)
from lamina_sharded_jit.tracing import trace_pjit

__all__ = ["JitInfo", "PjitParams", "flat_in_shardings", "flat_out_shardings", "infer_params",
           "make_jit_info", "split_static"]

_flatten = tu.registry.flatten

# --- what jit(...) knows ---------------------------------------------------------------------
@dataclass(frozen=True)
class JitInfo:
    """The facts ``jit(fun, ...)`` determines once, before any call."""

    fun: Callable[..., Any]
    fun_name: str
    fun_sourceinfo: str | None
    fun_signature: inspect.Signature | None
    static_argnums: tuple[int, ...]
    static_argnames: tuple[str, ...]
    donate_argnums: tuple[int, ...]
    donate_argnames: tuple[str, ...]
    in_shardings: Any          # the prefix tree, leaves canonicalized; None if not given
    out_shardings: Any         # likewise
    has_in_shardings: bool
    has_out_shardings: bool
    keep_unused: bool
    inline: bool
    compiler_options_kvs: tuple[tuple[str, Any], ...]
    api_name: str = "jit"

    @property
    def has_static(self) -> bool:
        return bool(self.static_argnums or self.static_argnames)


def _canonical_tree(tree: Any, what: str) -> Any:
    leaves, treedef = tu.none_leaf_registry.flatten(tree)
    return treedef.unflatten([canonicalize_leaf(x, where=f"{what} entry {i}")
                              for i, x in enumerate(leaves)])


def _device_sharding(device: Any, backend: str | None) -> Any:
    if device is not None and backend is not None:
        raise ValueError("can't specify both a device and a backend for jit, got "
                         f"device={device!r} and backend={backend!r}")
    if device is None:
        if backend is None:
            return None
        device = get_backend(backend).local_devices()[0]
    return single_device_sharding(device)


def make_jit_info(fun: Callable[..., Any], *, in_shardings: Any, out_shardings: Any,
                  static_argnums: Any, static_argnames: Any, donate_argnums: Any,
                  donate_argnames: Any, keep_unused: bool, device: Any, backend: str | None,
                  inline: bool, compiler_options: dict[str, Any] | None,
                  api_name: str = "jit") -> JitInfo:
    """Resolves ``jit``'s arguments (errors name the function)."""
    api_util.check_callable(fun)
    donate_nums, donate_names, static_nums, static_names = api_util.resolve_argnums(
        fun, donate_argnums, donate_argnames, static_argnums, static_argnames,
        api_name=api_name)
    name = api_util.fun_name(fun)
    has_in = in_shardings is not None and not is_unspecified(in_shardings)
    has_out = out_shardings is not None and not is_unspecified(out_shardings)
    in_tree = _canonical_tree(in_shardings, f"{api_name}({name}) in_shardings") if has_in \
        else None
    out_tree = _canonical_tree(out_shardings, f"{api_name}({name}) out_shardings") if has_out \
        else None
    pinned = _device_sharding(device, backend)
    if pinned is not None:
        if has_in or has_out:
            raise ValueError(f"{api_name}({name}): pass either device/backend or "
                             "in_shardings/out_shardings, not both")
        in_tree, out_tree, has_in, has_out = pinned, pinned, True, True
    kvs = tuple(sorted((compiler_options or {}).items()))
    return JitInfo(fun, name, api_util.fun_sourceinfo(fun), api_util.fun_signature(fun),
                   static_nums, static_names, donate_nums, donate_names, in_tree, out_tree,
                   has_in, has_out, bool(keep_unused), bool(inline), kvs, api_name)


# --- what each call infers -------------------------------------------------------------------------
@dataclass(frozen=True)
class PjitParams:
    """Everything one call of a jitted function needs (see :func:`infer_params`)."""

    params: dict[str, Any]          # pjit_p's params
    consts: tuple[Any, ...]         # tracers the body closes over (leading arguments)
    args_flat: tuple[Any, ...]      # the flat dynamic arguments
    in_tree: Any                    # structure of (dynamic args, dynamic kwargs)
    out_tree: Any
    in_avals: tuple[ShapedArray, ...]
    arg_names: tuple[str | None, ...]
    in_shardings: tuple[Any, ...]   # per flat argument (explicit or UNSPECIFIED)
    donated_invars: tuple[bool, ...]
    static_key: Any

    @property
    def jaxpr(self) -> ClosedJaxpr:
        jaxpr: ClosedJaxpr = self.params["jaxpr"]
        return jaxpr

    @property
    def out_shardings(self) -> tuple[Any, ...]:
        return tuple(self.params["out_shardings"])

    def without_args(self) -> PjitParams:
        """These params with no argument values (what the call cache keeps)."""
        return dataclasses.replace(self, args_flat=())


def split_static(info: JitInfo, args: tuple[Any, ...], kwargs: dict[str, Any]
                  ) -> tuple[tuple[int, ...], tuple[Any, ...], dict[str, Any], Any]:
    """The static positions present in this call, the dynamic args and
    kwargs, and a hashable key of the static values (types included)."""
    n = len(args)
    nums = tuple(sorted({i % n for i in info.static_argnums if -n <= i < n}))
    if not nums and not info.static_argnames:
        return (), args, kwargs, ()
    static_vals: list[tuple[Any, ...]] = []
    for i in nums:
        static_vals.append((type(args[i]), args[i]))
    dyn_args = tuple(a for i, a in enumerate(args) if i not in nums)
    names = [k for k in info.static_argnames if k in kwargs]
    for k in names:
        static_vals.append((k, type(kwargs[k]), kwargs[k]))
    dyn_kwargs = {k: v for k, v in kwargs.items() if k not in info.static_argnames}
    return nums, dyn_args, dyn_kwargs, tuple(static_vals)


def flat_in_shardings(info: JitInfo, in_tree: Any, names: Sequence[str | None],
                      avals: Sequence[ShapedArray], n_kw_leaves: int, desc: str
                      ) -> tuple[Any, ...]:
    """``in_shardings`` per flat argument (explicit, or UNSPECIFIED)."""
    if not info.has_in_shardings:
        return (UNSPECIFIED,) * len(avals)
    args_tree, _ = in_tree.children()
    if n_kw_leaves and not _is_single_leaf(info.in_shardings):
        raise ValueError(f"{desc} does not support kwargs when in_shardings is specified.")
    try:
        positional = api_util.flatten_axes(f"{info.api_name} in_shardings", args_tree,
                                           info.in_shardings)
    except ValueError:
        raise ValueError(_prefix_error(info, args_tree)) from None
    flat = positional + ([info.in_shardings] * n_kw_leaves if n_kw_leaves else [])
    return tuple(_checked_sharding(s, aval, f"{desc}: in_shardings entry of argument {name}")
                 for s, name, aval in zip(flat, names, avals))


def _checked_sharding(spec: Any, aval: ShapedArray, where: str) -> Any:
    """A user's sharding entry resolved to a sharding (or UNSPECIFIED) and
    checked to fit ``aval``; errors say ``where``."""
    sharding = resolve_leaf(spec, where=where)
    if not is_unspecified(sharding):
        check_sharding_fits(sharding, aval, where)
    return sharding


def _is_single_leaf(tree: Any) -> bool:
    return bool(tu.none_leaf_registry.flatten(tree)[1].num_nodes == 1)


def _prefix_error(info: JitInfo, args_tree: Any) -> str:
    spec = info.in_shardings
    n_args = len(args_tree.children())
    detail = ""
    if isinstance(spec, (tuple, list)) and len(spec) != n_args:
        detail = (f" But {info.api_name} in_shardings is the wrong length: got a tuple or "
                  f"list of length {len(spec)} for an args tuple of length {n_args}.")
    return (f"{info.api_name} in_shardings specification must be a tree prefix of the "
            f"positional arguments tuple. In particular, {info.api_name} in_shardings must "
            "either be a Sharding, a PartitionSpec, or a tuple of length equal to the number "
            f"of positional arguments.{detail}")


def _donated_flags(info: JitInfo, in_tree: Any, static_nums: tuple[int, ...],
                   n_args: int) -> tuple[bool, ...]:
    args_tree, kwargs_tree = in_tree.children()
    if not info.donate_argnums and not info.donate_argnames:
        return (False,) * int(in_tree.num_leaves)
    donate_pos = {i % n_args for i in info.donate_argnums if -n_args <= i < n_args}
    dyn_positions = [i for i in range(n_args) if i not in static_nums]
    flags: list[bool] = []
    for pos, sub in zip(dyn_positions, args_tree.children()):
        flags += [pos in donate_pos] * sub.num_leaves
    kw_node = kwargs_tree.node_data()
    keys = list(kw_node[1]) if kw_node is not None and kw_node[1] is not None else []
    sig = info.fun_signature
    param_names = list(sig.parameters) if sig is not None else []
    for key, sub in zip(keys, kwargs_tree.children()):
        donated = key in info.donate_argnames or (
            key in param_names and param_names.index(key) in donate_pos)
        flags += [donated] * sub.num_leaves
    return tuple(flags)


def flat_out_shardings(info: JitInfo, out_tree: Any, out_avals: Sequence[ShapedArray],
                        paths: Sequence[str | None], desc: str) -> tuple[Any, ...]:
    """``out_shardings`` per flat result (explicit, or UNSPECIFIED)."""
    if not info.has_out_shardings:
        return tuple(_from_type(a) for a in out_avals)
    try:
        flat = api_util.flatten_axes(f"{info.api_name} out_shardings", out_tree,
                                     info.out_shardings)
    except ValueError as e:
        raise ValueError(f"{desc}: out_shardings must be a tree prefix of the function's "
                         f"output {out_tree}: {e}") from None
    return tuple(_checked_sharding(s, aval, f"{desc}: out_shardings entry of {path or 'a result'}")
                 for s, path, aval in zip(flat, paths, out_avals))


def _from_type(aval: ShapedArray) -> Any:
    """A result whose type is sharded (over Explicit axes) is laid out so, in
    the memory its type says; an unsharded one is replicated over a
    ``set_mesh`` mesh of Explicit axes."""
    named = named_sharding_of_type(aval.sharding)
    if named is not None:
        if aval.memory_space is MemorySpace.Host:
            return named.with_memory_kind(space_to_kind(aval.memory_space))
        return named
    mesh = context_mesh()
    if mesh is not None and mesh.abstract_mesh.are_all_axes_explicit:
        return NamedSharding(mesh, (None,) * aval.ndim)
    return UNSPECIFIED


def infer_params(info: JitInfo, args: tuple[Any, ...], kwargs: dict[str, Any]) -> PjitParams:
    """What one call of the jitted function needs; traces (through the cache)."""
    desc = f"{info.api_name}({info.fun_name})"
    static_nums, dyn_args, dyn_kwargs, static_key = split_static(info, args, kwargs)
    dbg = api_util.debug_info(info.api_name, info.fun, args, kwargs,
                              static_argnums=info.static_argnums,
                              static_argnames=info.static_argnames,
                              sourceinfo=info.fun_sourceinfo, signature=info.fun_signature)
    fun = wrap_init(info.fun, debug_info=dbg)
    if static_nums:
        fun, _ = api_util.argnums_partial_except(fun, static_nums, args, allow_invalid=True)
    if info.static_argnames and len(dyn_kwargs) != len(kwargs):
        fun, _ = api_util.argnames_partial_except(fun, info.static_argnames, kwargs)
    fun, _ = api_util.result_paths(fun)
    args_flat, in_tree = _flatten((dyn_args, dyn_kwargs))
    names = dbg.arg_names if len(dbg.arg_names) == len(args_flat) else (None,) * len(args_flat)
    in_avals = tuple(arg_aval(x, n, desc) for x, n in zip(args_flat, names))
    flat_fun, out_tree_thunk = api_util.flatten_fun(fun, in_tree)
    flat_fun = annotate(flat_fun, in_avals)
    n_kw = in_tree.children()[1].num_leaves
    in_sh = flat_in_shardings(info, in_tree, names, in_avals, n_kw, desc)
    donated = _donated_flags(info, in_tree, static_nums, len(args))
    traced = trace_pjit(flat_fun, in_sh)
    out_tree = out_tree_thunk()
    jaxpr = traced.jaxpr
    jdbg = jaxpr.jaxpr.debug_info
    n_consts = len(traced.consts)
    paths = jdbg.result_paths if jdbg is not None else (None,) * len(traced.out_avals)
    out_sh = flat_out_shardings(info, out_tree, traced.out_avals, paths, desc)
    params = dict(
        jaxpr=jaxpr,
        in_shardings=(UNSPECIFIED,) * n_consts + in_sh,
        out_shardings=out_sh,
        donated_invars=(False,) * n_consts + donated,
        name=info.fun_name,
        keep_unused=info.keep_unused,
        inline=info.inline,
        compiler_options_kvs=info.compiler_options_kvs)
    return PjitParams(params, traced.consts, tuple(args_flat), in_tree, out_tree, in_avals,
                      tuple(names), in_sh, donated, static_key)
