"""The sine and cosine integrals (``sici``) and the Fresnel integrals
(``fresnel``), as Cephes evaluates them: rational approximations in ``x^2``
near 0 and auxiliary functions ``f``, ``g`` of ``1 / x^2`` further out, with
``sin``/``cos`` of the large argument taken exactly.

Each is a ``custom_jvp`` whose tangent is the integrand (``sin x / x``,
``cos x / x``, ``sin(pi x^2 / 2)``, ``cos(pi x^2 / 2)``), and each is one
compiled computation (``jit``) so that the many branches fuse.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
from lamina_tracing_core import dtypes
from lamina_tracing_core.avals import get_aval
from lamina_tracing_core.custom_derivatives import custom_jvp
from lamina_tracing_core.numpy import _util
from lamina_sharded_jit import jit

import lamina.numpy as jnp

Array = Any
ArrayLike = Any


def _real_operand(fun: str, x: ArrayLike) -> Array:
    (a,) = _util.promote_args_inexact(f"lamina.scipy.special.{fun}", x)
    if dtypes.is_complex(get_aval(a).dtype):
        raise ValueError(f"lamina.scipy.special.{fun}: the argument x must be real-valued, "
                         f"got dtype {get_aval(a).dtype}")
    return a


def _ratio(numerator: tuple[float, ...], denominator: tuple[float, ...], t: Array) -> Array:
    """``P(t) / Q(t)`` with coefficients listed from the highest power down."""
    dtype = get_aval(t).dtype
    return (jnp.polyval(np.asarray(numerator, dtype), t)
            / jnp.polyval(np.asarray(denominator, dtype), t))


def _poly(coefficients: tuple[float, ...], t: Array) -> Array:
    return jnp.polyval(np.asarray(coefficients, get_aval(t).dtype), t)


# --- sine and cosine integrals ---------------------------------------------------------------
# Cephes sici.c: Si and Ci - gamma - log x as rational functions of x^2 on [0, 4] ...
_SI_NUM = (-8.39167827910303881427e-11, 4.62591714427012837309e-8, -9.75759303843632795789e-6,
           9.76945438170435310816e-4, -4.13470316229406538752e-2, 1.00000000000000000302e0)
_SI_DEN = (2.03269266195951942049e-12, 1.27997891179943299903e-9, 4.41827842801218905784e-7,
           9.96412122043875552487e-5, 1.42085239326149893930e-2, 9.99999999999999996984e-1)
_CI_NUM = (2.02524002389102268789e-11, -1.35249504915790756375e-8, 3.59325051419993077021e-6,
           -4.74007206873407909465e-4, 2.89159652607555242092e-2, -1.00000000000000000080e0)
_CI_DEN = (4.07746040061880559506e-12, 3.06780997581887812692e-9, 1.23210355685883423679e-6,
           3.17442024775032769882e-4, 5.10028056236446052392e-2, 4.00000000000000000080e0)
# ... and the auxiliary functions f(x) (times x) and g(x) (over 1/x^2) on (4, 8] and (8, inf).
_F4_NUM = (4.23612862892216586994e0, 5.45937717161812843388e0, 1.62083287701538329132e0,
           1.67006611831323023771e-1, 6.81020132472518137426e-3, 1.08936580650328664411e-4,
           5.48900223421373614008e-7)
_F4_DEN = (1.0, 8.16496634205391016773e0, 7.30828822505564552187e0, 1.86792257950184183883e0,
           1.78792052963149907262e-1, 7.01710668322789753610e-3, 1.10034357153915731354e-4,
           5.48900252756255700982e-7)
_G4_NUM = (8.71001698973114191777e-2, 6.11379109952219284151e-1, 3.97180296392337498885e-1,
           7.48527737628469092119e-2, 5.38868681462177273157e-3, 1.61999794598934024525e-4,
           1.97963874140963632189e-6, 7.82579040744090311069e-9)
_G4_DEN = (1.0, 1.64402202413355338886e0, 6.66296701268987968381e-1, 9.88771761277688796203e-2,
           6.22396345441768420760e-3, 1.73221081474177119497e-4, 2.02659182086343991969e-6,
           7.82579218933534490868e-9)
_F8_NUM = (4.55880873470465315206e-1, 7.13715274100146711374e-1, 1.60300158222319456320e-1,
           1.16064229408124407915e-2, 3.49556442447859055605e-4, 4.86215430826454749482e-6,
           3.20092790091004902806e-8, 9.41779576128512936592e-11, 9.70507110881952024631e-14)
_F8_DEN = (1.0, 9.17463611873684053703e-1, 1.78685545332074536321e-1, 1.22253594771971293032e-2,
           3.58696481881851580297e-4, 4.92435064317881464393e-6, 3.21956939101046018377e-8,
           9.43720590350276732376e-11, 9.70507110881952025725e-14)
_G8_NUM = (6.97359953443276214934e-1, 3.30410979305632063225e-1, 3.84878767649974295920e-2,
           1.71718239052347903558e-3, 3.48941165502279436777e-5, 3.47131167084116673800e-7,
           1.70404452782044526189e-9, 3.85945925430276600453e-12, 3.14040098946363334640e-15)
_G8_DEN = (1.0, 1.68548898811011640017e0, 4.87852258695304967486e-1, 4.67913194259625806320e-2,
           1.90284426674399523638e-3, 3.68475504442561108162e-5, 3.57043223443740838771e-7,
           1.72693748966316146736e-9, 3.87830166023954706752e-12, 3.14040098946363335242e-15)

_EULER_GAMMA = 0.57721566490153286061
_SICI_SERIES_END = 4.0
_SICI_ASYMPTOTIC_END = 1e9


def _sici_impl(x: Array) -> tuple[Array, Array]:
    ax = jnp.abs(x)
    near = ax <= _SICI_SERIES_END
    # Each branch sees a harmless argument where another branch answers, so no
    # inf or NaN leaks through the selects (or their derivatives).
    xs = jnp.where(near & (ax > 0), ax, 1.0)
    t = xs * xs
    si_near = xs * _ratio(_SI_NUM, _SI_DEN, t)
    ci_near = _EULER_GAMMA + jnp.log(xs) + t * _ratio(_CI_NUM, _CI_DEN, t)
    si_near = jnp.where(ax == 0, 0.0, si_near)
    ci_near = jnp.where(ax == 0, -np.inf, ci_near)

    xf = jnp.where(near | jnp.isinf(ax), 10.0, ax)
    z = 1.0 / (xf * xf)
    below_8 = xf < 8.0
    f = jnp.where(below_8, _ratio(_F4_NUM, _F4_DEN, z), _ratio(_F8_NUM, _F8_DEN, z)) / xf
    g = z * jnp.where(below_8, _ratio(_G4_NUM, _G4_DEN, z), _ratio(_G8_NUM, _G8_DEN, z))
    s, c = jnp.sin(xf), jnp.cos(xf)
    si_far = math.pi / 2 - f * c - g * s
    ci_far = f * s - g * c
    # Beyond 1e9 only the leading terms f = 1/x, g = 0 remain.
    huge = ax > _SICI_ASYMPTOTIC_END
    si_far = jnp.where(huge, math.pi / 2 - c / xf, si_far)
    ci_far = jnp.where(huge, s / xf, ci_far)
    si_far = jnp.where(jnp.isinf(ax), math.pi / 2, si_far)
    ci_far = jnp.where(jnp.isinf(ax), 0.0, ci_far)

    si = jnp.sign(x) * jnp.where(near, si_near, si_far)
    ci = jnp.where(near, ci_near, ci_far)
    # Ci of a negative argument is complex in general; SciPy answers its real
    # part Ci(|x|), and NaN at -inf.
    ci = jnp.where(x == -np.inf, np.nan, ci)
    ci = jnp.where(jnp.isnan(x), x, ci)
    return si, ci


_sici = custom_jvp(jit(_sici_impl))


@_sici.defjvp
def _sici_jvp(primals: Any, tangents: Any) -> tuple[Any, Any]:
    (x,), (dx,) = primals, tangents
    return _sici(x), (jnp.sinc(x / math.pi) * dx, jnp.cos(x) / x * dx)


def sici(x: ArrayLike) -> tuple[Array, Array]:
    """The sine and cosine integrals ``(Si(x), Ci(x))``: ``Si(x) = integral_0^x
    sin t / t dt`` and ``Ci(x) = gamma + log x + integral_0^x (cos t - 1) / t dt``.
    For ``x < 0``, ``Si`` is odd and ``Ci`` is ``Ci(|x|)`` (SciPy's real part);
    ``Ci(0) = -inf`` and ``Ci(-inf)`` is NaN."""
    return _sici(_real_operand("sici", x))  # type: ignore[no-any-return]


# --- Fresnel integrals ------------------------------------------------------------------------
# Cephes fresnl.c (double precision): S and C as rational functions of x^4 for x^2 < 2.5625 ...
_S_NUM_64 = (-2.99181919401019853726e3, 7.08840045257738576863e5, -6.29741486205862506537e7,
             2.54890880573376359104e9, -4.42979518059697779103e10, 3.18016297876567817986e11)
_S_DEN_64 = (1.0, 2.81376268889994315696e2, 4.55847810806532581675e4, 5.17343888770096400730e6,
             4.19320245898111231129e8, 2.24411795645340920940e10, 6.07366389490084639049e11)
_C_NUM_64 = (-4.98843114573573548651e-8, 9.50428062829859605134e-6, -6.45191435683965050962e-4,
             1.88843319396703850064e-2, -2.05525900955013891793e-1, 9.99999999999999998822e-1)
_C_DEN_64 = (3.99982968972495980367e-12, 9.15439215774657478799e-10, 1.25001862479598821474e-7,
             1.22262789024179030997e-5, 8.68029542941784300606e-4, 4.12142090722199792936e-2,
             1.00000000000000000118e0)
# ... and the auxiliary f, g as rational functions of 1 / (pi x^2)^2 beyond.
_F_NUM_64 = (4.21543555043677546506e-1, 1.43407919780758885261e-1, 1.15220955073585758835e-2,
             3.45017939782574027900e-4, 4.63613749287867322088e-6, 3.05568983790257605827e-8,
             1.02304514164907233465e-10, 1.72010743268161828879e-13, 1.34283276233062758925e-16,
             3.76329711269987889006e-20)
_F_DEN_64 = (1.0, 7.51586398353378947175e-1, 1.16888925859191382142e-1, 6.44051526508858611005e-3,
             1.55934409164153020873e-4, 1.84627567348930545870e-6, 1.12699224763999035261e-8,
             3.60140029589371370404e-11, 5.88754533621578410010e-14, 4.52001434074129701496e-17,
             1.25443237090011264384e-20)
_G_NUM_64 = (5.04442073643383265887e-1, 1.97102833525523411709e-1, 1.87648584092575249293e-2,
             6.84079380915393090172e-4, 1.15138826111884280931e-5, 9.82852443688422223854e-8,
             4.45344415861750144738e-10, 1.08268041139020870318e-12, 1.37555460633261799868e-15,
             8.36354435630677421531e-19, 1.86958710162783235106e-22)
_G_DEN_64 = (1.0, 1.47495759925128324529e0, 3.37748989120019970451e-1, 2.53603741420338795122e-2,
             8.14679107184306179049e-4, 1.27545075667729118702e-5, 1.04314589657571990585e-7,
             4.60680728146520428211e-10, 1.10273215066240270757e-12, 1.38796531259578871258e-15,
             8.39158816283118707363e-19, 1.86958710162783236342e-22)
# Cephes fresnlf.c (single precision): polynomials only.
_S_POLY_32 = (1.647629463788700e-9, -1.522754752581096e-7, 8.424748808502400e-6,
              -3.120693124703272e-4, 7.244727626597022e-3, -9.228055941124598e-2,
              5.235987735681432e-1)
_C_POLY_32 = (1.416802502367354e-8, -1.157231412229871e-6, 5.387223446683264e-5,
              -1.604381798862293e-3, 2.818489036795073e-2, -2.467398198317899e-1,
              9.999999760004487e-1)
_F_POLY_32 = (-1.903009855649792e12, 1.355942388050252e11, -4.158143148511033e9,
              7.343848463587323e7, -8.732356681548485e5, 8.560515466275470e3,
              -1.032877601091159e2, 2.999401847870011e0)
_G_POLY_32 = (-1.860843997624650e11, 1.278350673393208e10, -3.779387713202229e8,
              6.492611570598858e6, -7.787789623358162e4, 8.602931494734327e2,
              -1.493439396592284e1, 9.999841934744914e-1)

_FRESNEL_SERIES_END_SQUARED = 2.5625
_FRESNEL_ASYMPTOTIC_START = 36974.0


def _sin_cos_half_pi_square(x: Array) -> tuple[Array, Array]:
    """``sin(pi x^2 / 2)`` and ``cos(pi x^2 / 2)`` without forming ``x^2``
    for large ``x``: with ``s = x mod 2``, ``x^2 / 2 = s (x - s / 2)`` modulo 2,
    so the reduced angle is exact where ``pi x^2 / 2`` would have lost every digit."""
    x = jnp.abs(x)
    s = jnp.fmod(x, 2.0)
    r = jnp.fmod(s * (x - s / 2), 2.0)  # the angle over pi, in [0, 2)
    sin = jnp.where(r < 0.5, jnp.sin(math.pi * r),
                    jnp.where(r > 1.5, jnp.sin(math.pi * (r - 2.0)),
                              -jnp.sin(math.pi * (r - 1.0))))
    cos = jnp.where(r == 0.5, 0.0,
                    jnp.where(r < 1.0, -jnp.sin(math.pi * (r - 0.5)),
                              jnp.sin(math.pi * (r - 1.5))))
    return sin, cos


def _fresnel_impl(x: Array) -> tuple[Array, Array]:
    dtype = get_aval(x).dtype
    single = dtype != np.float64
    if single:
        # The single-precision coefficients are float32's; narrower floats would
        # overflow the series, so they are computed in float32 too.
        x = x.astype(np.float32)
    ax = jnp.abs(x)
    x2 = ax * ax
    small = x2 < _FRESNEL_SERIES_END_SQUARED
    x4 = x2 * x2
    if single:
        s_small = ax * x2 * _poly(_S_POLY_32, x4)
        c_small = ax * _poly(_C_POLY_32, x4)
    else:
        s_small = ax * x2 * _ratio(_S_NUM_64, _S_DEN_64, x4)
        c_small = ax * _ratio(_C_NUM_64, _C_DEN_64, x4)

    sin, cos = _sin_cos_half_pi_square(ax)
    xf = jnp.where(small | jnp.isinf(ax), 2.0, ax)
    t = 1.0 / (math.pi * xf * xf)
    u = t * t
    if single:
        f = 1.0 - u * _poly(_F_POLY_32, u)
        g = t * _poly(_G_POLY_32, u)
    else:
        f = 1.0 - u * _ratio(_F_NUM_64, _F_DEN_64, u)
        g = t * _ratio(_G_NUM_64, _G_DEN_64, u)
    pi_x = math.pi * xf
    c_mid = 0.5 + (f * sin - g * cos) / pi_x
    s_mid = 0.5 - (f * cos + g * sin) / pi_x
    # Far out, f = 1 and g = 0 to working precision (float32 keeps only the 1/2).
    if single:
        c_far, s_far = jnp.full_like(ax, 0.5), jnp.full_like(ax, 0.5)
    else:
        c_far = 0.5 + sin / pi_x
        s_far = 0.5 - cos / pi_x
    far = ax > _FRESNEL_ASYMPTOTIC_START
    s = jnp.where(small, s_small, jnp.where(far, s_far, s_mid))
    c = jnp.where(small, c_small, jnp.where(far, c_far, c_mid))
    s = jnp.where(jnp.isinf(ax), 0.5, s)
    c = jnp.where(jnp.isinf(ax), 0.5, c)
    negative = x < 0
    s = jnp.where(negative, -s, s)
    c = jnp.where(negative, -c, c)
    return s.astype(dtype), c.astype(dtype)


_fresnel = custom_jvp(jit(_fresnel_impl))


@_fresnel.defjvp
def _fresnel_jvp(primals: Any, tangents: Any) -> tuple[Any, Any]:
    (x,), (dx,) = primals, tangents
    sin, cos = _sin_cos_half_pi_square(x)
    return _fresnel(x), (sin * dx, cos * dx)


def fresnel(x: ArrayLike) -> tuple[Array, Array]:
    """The Fresnel integrals ``(S(x), C(x))``: ``S(x) = integral_0^x sin(pi t^2 / 2) dt``
    and ``C(x) = integral_0^x cos(pi t^2 / 2) dt`` (both odd, 1/2 at ``+inf``).
    Real arguments only; ``float16``/``bfloat16`` are computed in ``float32``."""
    return _fresnel(_real_operand("fresnel", x))  # type: ignore[no-any-return]
