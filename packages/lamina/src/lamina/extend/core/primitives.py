"""``lamina.extend.core.primitives``: lamina's built-in primitives under JAX's
names (``jax.extend.core.primitives``).

Each name is the ``Primitive`` object its rules are registered on, so a rule
table read through it (``ad.primitive_jvps[add_p]``) is lamina's own. JAX's
``jit_p`` is the primitive ``jit`` stages (its params: ``jaxpr``, ``name``,
shardings, ...); ``call_p``/``closed_call_p`` are JAX's call primitives
(see :mod:`lamina.call_primitives`). Not here, as lamina has no such
operation: JAX's mutable references (``get_p``, ``swap_p``), token values
(``create_token_p``, ``after_all_p``), the primitives of key arrays
(``random_bits_p``, ``random_split_p``, ``random_fold_in_p``,
``random_seed_p``: lamina's keys are arrays of raw key data, drawn with
``threefry2x32_p``/``rng_bit_generator_p``), shape-polymorphic dimension
tests (``eq_to_p``, ``le_to_p``, ``lt_to_p``), ``name_p``, ``empty2_p``,
``rng_uniform_p``, ``ragged_all_to_all_p`` and kernels lamina does not have
(``approx_top_k``, ``reduce`` with a user reducer, ``select_and_scatter``
with a user selector). ``random_gamma_p`` takes raw key data, as lamina's
keys are.
"""

from __future__ import annotations

from lamina.call_primitives import call_p as call_p
from lamina.call_primitives import closed_call_p as closed_call_p
from lamina.random import random_gamma_p as random_gamma_p
from lamina_interpreters_pxla.device_put import device_put_p as device_put_p
from lamina_sharded_jit.sharding_constraint import sharding_constraint_p as sharding_constraint_p
from lamina_sharded_jit.primitive import pjit_p as jit_p
from lamina_tracing_core.ad import custom_lin_p as custom_lin_p
from lamina_tracing_core.ad_util import add_jaxvals_p as add_jaxvals_p
from lamina_tracing_core.checkpoint import remat_p as remat_p
from lamina_tracing_core.control_flow import cond_p as cond_p
from lamina_tracing_core.control_flow import scan_p as scan_p
from lamina_tracing_core.control_flow import while_p as while_p
from lamina_tracing_core.control_flow.solves import linear_solve_p as linear_solve_p
from lamina_tracing_core.custom_derivatives import custom_jvp_call_p as custom_jvp_call_p
from lamina_tracing_core.custom_derivatives import custom_vjp_call_p as custom_vjp_call_p
from lamina_tracing_core.lax import abs_p as abs_p
from lamina_tracing_core.lax import acos_p as acos_p
from lamina_tracing_core.lax import acosh_p as acosh_p
from lamina_tracing_core.lax import add_p as add_p
from lamina_tracing_core.lax import all_gather_p as all_gather_p
from lamina_tracing_core.lax import all_to_all_p as all_to_all_p
from lamina_tracing_core.lax import and_p as and_p
from lamina_tracing_core.lax import argmax_p as argmax_p
from lamina_tracing_core.lax import argmin_p as argmin_p
from lamina_tracing_core.lax import asin_p as asin_p
from lamina_tracing_core.lax import asinh_p as asinh_p
from lamina_tracing_core.lax import atan2_p as atan2_p
from lamina_tracing_core.lax import atan_p as atan_p
from lamina_tracing_core.lax import atanh_p as atanh_p
from lamina_tracing_core.lax import axis_index_p as axis_index_p
from lamina_tracing_core.lax import bessel_i0e_p as bessel_i0e_p
from lamina_tracing_core.lax import bessel_i1e_p as bessel_i1e_p
from lamina_tracing_core.lax import bitcast_convert_type_p as bitcast_convert_type_p
from lamina_tracing_core.lax import broadcast_in_dim_p as broadcast_in_dim_p
from lamina_tracing_core.lax import cbrt_p as cbrt_p
from lamina_tracing_core.lax import ceil_p as ceil_p
from lamina_tracing_core.lax import clamp_p as clamp_p
from lamina_tracing_core.lax import clz_p as clz_p
from lamina_tracing_core.lax import complex_p as complex_p
from lamina_tracing_core.lax import concatenate_p as concatenate_p
from lamina_tracing_core.lax import conj_p as conj_p
from lamina_tracing_core.lax import conv_general_dilated_p as conv_general_dilated_p
from lamina_tracing_core.lax import convert_element_type_p as convert_element_type_p
from lamina_tracing_core.lax import copy_p as copy_p
from lamina_tracing_core.lax import cos_p as cos_p
from lamina_tracing_core.lax import cosh_p as cosh_p
from lamina_tracing_core.lax import cumlogsumexp_p as cumlogsumexp_p
from lamina_tracing_core.lax import cummax_p as cummax_p
from lamina_tracing_core.lax import cummin_p as cummin_p
from lamina_tracing_core.lax import cumprod_p as cumprod_p
from lamina_tracing_core.lax import cumsum_p as cumsum_p
from lamina_tracing_core.lax import digamma_p as digamma_p
from lamina_tracing_core.lax import div_p as div_p
from lamina_tracing_core.lax import dot_general_p as dot_general_p
from lamina_tracing_core.lax import dynamic_slice_p as dynamic_slice_p
from lamina_tracing_core.lax import dynamic_update_slice_p as dynamic_update_slice_p
from lamina_tracing_core.lax import eq_p as eq_p
from lamina_tracing_core.lax import erf_inv_p as erf_inv_p
from lamina_tracing_core.lax import erf_p as erf_p
from lamina_tracing_core.lax import erfc_p as erfc_p
from lamina_tracing_core.lax import exp2_p as exp2_p
from lamina_tracing_core.lax import exp_p as exp_p
from lamina_tracing_core.lax import expm1_p as expm1_p
from lamina_tracing_core.lax import fft_p as fft_p
from lamina_tracing_core.lax import floor_p as floor_p
from lamina_tracing_core.lax import gather_p as gather_p
from lamina_tracing_core.lax import ge_p as ge_p
from lamina_tracing_core.lax import gt_p as gt_p
from lamina_tracing_core.lax import igamma_grad_a_p as igamma_grad_a_p
from lamina_tracing_core.lax import igamma_p as igamma_p
from lamina_tracing_core.lax import igammac_p as igammac_p
from lamina_tracing_core.lax import imag_p as imag_p
from lamina_tracing_core.lax import integer_pow_p as integer_pow_p
from lamina_tracing_core.lax import iota_p as iota_p
from lamina_tracing_core.lax import is_finite_p as is_finite_p
from lamina_tracing_core.lax import le_p as le_p
from lamina_tracing_core.lax import lgamma_p as lgamma_p
from lamina_tracing_core.lax import log1p_p as log1p_p
from lamina_tracing_core.lax import log_p as log_p
from lamina_tracing_core.lax import logistic_p as logistic_p
from lamina_tracing_core.lax import lt_p as lt_p
from lamina_tracing_core.lax import max_p as max_p
from lamina_tracing_core.lax import min_p as min_p
from lamina_tracing_core.lax import mul_p as mul_p
from lamina_tracing_core.lax import ne_p as ne_p
from lamina_tracing_core.lax import neg_p as neg_p
from lamina_tracing_core.lax import nextafter_p as nextafter_p
from lamina_tracing_core.lax import not_p as not_p
from lamina_tracing_core.lax import or_p as or_p
from lamina_tracing_core.lax import pad_p as pad_p
from lamina_tracing_core.lax import pmax_p as pmax_p
from lamina_tracing_core.lax import pmin_p as pmin_p
from lamina_tracing_core.lax import polygamma_p as polygamma_p
from lamina_tracing_core.lax import population_count_p as population_count_p
from lamina_tracing_core.lax import pow_p as pow_p
from lamina_tracing_core.lax import ppermute_p as ppermute_p
from lamina_tracing_core.lax import psum_p as psum_p
from lamina_tracing_core.lax import real_p as real_p
from lamina_tracing_core.lax import reduce_and_p as reduce_and_p
from lamina_tracing_core.lax import reduce_max_p as reduce_max_p
from lamina_tracing_core.lax import reduce_min_p as reduce_min_p
from lamina_tracing_core.lax import reduce_or_p as reduce_or_p
from lamina_tracing_core.lax import reduce_precision_p as reduce_precision_p
from lamina_tracing_core.lax import reduce_prod_p as reduce_prod_p
from lamina_tracing_core.lax import reduce_sum_p as reduce_sum_p
from lamina_tracing_core.lax import reduce_window_max_p as reduce_window_max_p
from lamina_tracing_core.lax import reduce_window_min_p as reduce_window_min_p
from lamina_tracing_core.lax import reduce_window_p as reduce_window_p
from lamina_tracing_core.lax import reduce_window_sum_p as reduce_window_sum_p
from lamina_tracing_core.lax import reduce_xor_p as reduce_xor_p
from lamina_tracing_core.lax import regularized_incomplete_beta_p as regularized_incomplete_beta_p
from lamina_tracing_core.lax import rem_p as rem_p
from lamina_tracing_core.lax import reshape_p as reshape_p
from lamina_tracing_core.lax import rev_p as rev_p
from lamina_tracing_core.lax import round_p as round_p
from lamina_tracing_core.lax import rsqrt_p as rsqrt_p
from lamina_tracing_core.lax import scatter_add_p as scatter_add_p
from lamina_tracing_core.lax import scatter_max_p as scatter_max_p
from lamina_tracing_core.lax import scatter_min_p as scatter_min_p
from lamina_tracing_core.lax import scatter_mul_p as scatter_mul_p
from lamina_tracing_core.lax import scatter_p as scatter_p
from lamina_tracing_core.lax import select_and_gather_add_p as select_and_gather_add_p
from lamina_tracing_core.lax import select_and_scatter_add_p as select_and_scatter_add_p
from lamina_tracing_core.lax import select_n_p as select_n_p
from lamina_tracing_core.lax import shift_left_p as shift_left_p
from lamina_tracing_core.lax import shift_right_arithmetic_p as shift_right_arithmetic_p
from lamina_tracing_core.lax import shift_right_logical_p as shift_right_logical_p
from lamina_tracing_core.lax import sign_p as sign_p
from lamina_tracing_core.lax import sin_p as sin_p
from lamina_tracing_core.lax import sinh_p as sinh_p
from lamina_tracing_core.lax import slice_p as slice_p
from lamina_tracing_core.lax import sort_p as sort_p
from lamina_tracing_core.lax import sqrt_p as sqrt_p
from lamina_tracing_core.lax import square_p as square_p
from lamina_tracing_core.lax import squeeze_p as squeeze_p
from lamina_tracing_core.lax import stop_gradient_p as stop_gradient_p
from lamina_tracing_core.lax import sub_p as sub_p
from lamina_tracing_core.lax import tan_p as tan_p
from lamina_tracing_core.lax import tanh_p as tanh_p
from lamina_tracing_core.lax import threefry2x32_p as threefry2x32_p
from lamina_tracing_core.lax import top_k_p as top_k_p
from lamina_tracing_core.lax import transpose_p as transpose_p
from lamina_tracing_core.lax import xor_p as xor_p
from lamina_tracing_core.lax import zeta_p as zeta_p
from lamina_tracing_core.lax.linalg import cholesky_p as cholesky_p
from lamina_tracing_core.lax.linalg import eig_p as eig_p
from lamina_tracing_core.lax.linalg import eigh_p as eigh_p
from lamina_tracing_core.lax.linalg import hessenberg_p as hessenberg_p
from lamina_tracing_core.lax.linalg import householder_product_p as householder_product_p
from lamina_tracing_core.lax.linalg import lu_p as lu_p
from lamina_tracing_core.lax.linalg import qr_p as qr_p
from lamina_tracing_core.lax.linalg import schur_p as schur_p
from lamina_tracing_core.lax.linalg import svd_p as svd_p
from lamina_tracing_core.lax.linalg import triangular_solve_p as triangular_solve_p
from lamina_tracing_core.lax.linalg import tridiagonal_p as tridiagonal_p
from lamina_tracing_core.lax.linalg import tridiagonal_solve_p as tridiagonal_solve_p
from lamina_tracing_core.lax.prng import rng_bit_generator_p as rng_bit_generator_p

__all__ = [
    "abs_p", "acos_p", "acosh_p", "add_jaxvals_p", "add_p", "all_gather_p", "all_to_all_p",
    "and_p", "argmax_p", "argmin_p", "asin_p", "asinh_p", "atan2_p", "atan_p", "atanh_p",
    "axis_index_p", "bessel_i0e_p", "bessel_i1e_p", "bitcast_convert_type_p",
    "broadcast_in_dim_p", "call_p", "cbrt_p", "ceil_p", "cholesky_p", "clamp_p", "closed_call_p", "clz_p", "complex_p",
    "concatenate_p", "cond_p", "conj_p", "conv_general_dilated_p", "convert_element_type_p",
    "copy_p", "cos_p", "cosh_p", "cumlogsumexp_p", "cummax_p", "cummin_p", "cumprod_p",
    "cumsum_p", "custom_jvp_call_p", "custom_lin_p", "custom_vjp_call_p", "device_put_p",
    "digamma_p", "div_p", "dot_general_p", "dynamic_slice_p", "dynamic_update_slice_p", "eig_p",
    "eigh_p", "eq_p", "erf_inv_p", "erf_p", "erfc_p", "exp2_p", "exp_p", "expm1_p", "fft_p",
    "floor_p", "gather_p", "ge_p", "gt_p", "hessenberg_p", "householder_product_p",
    "igamma_grad_a_p", "igamma_p", "igammac_p", "imag_p", "integer_pow_p", "iota_p",
    "is_finite_p", "jit_p", "le_p", "lgamma_p", "linear_solve_p", "log1p_p", "log_p",
    "logistic_p", "lt_p", "lu_p", "max_p", "min_p", "mul_p", "ne_p", "neg_p", "nextafter_p",
    "not_p", "or_p", "pad_p", "pmax_p", "pmin_p", "polygamma_p", "population_count_p", "pow_p",
    "ppermute_p", "psum_p", "qr_p", "random_gamma_p", "real_p", "reduce_and_p", "reduce_max_p",
    "reduce_min_p", "reduce_or_p", "reduce_precision_p", "reduce_prod_p", "reduce_sum_p",
    "reduce_window_max_p", "reduce_window_min_p", "reduce_window_p", "reduce_window_sum_p",
    "reduce_xor_p", "regularized_incomplete_beta_p", "rem_p", "remat_p", "reshape_p", "rev_p",
    "rng_bit_generator_p", "round_p", "rsqrt_p", "scan_p", "scatter_add_p", "scatter_max_p",
    "scatter_min_p", "scatter_mul_p", "scatter_p", "schur_p", "select_and_gather_add_p",
    "select_and_scatter_add_p", "select_n_p", "sharding_constraint_p", "shift_left_p",
    "shift_right_arithmetic_p", "shift_right_logical_p", "sign_p", "sin_p", "sinh_p", "slice_p",
    "sort_p", "sqrt_p", "square_p", "squeeze_p", "stop_gradient_p", "sub_p", "svd_p", "tan_p",
    "tanh_p", "threefry2x32_p", "top_k_p", "transpose_p", "triangular_solve_p", "tridiagonal_p",
    "tridiagonal_solve_p", "while_p", "xor_p", "zeta_p",
]
