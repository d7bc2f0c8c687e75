"""The distributions of lamina.random reproduce JAX 0.10.2's values bit for bit
(recorded from JAX for the same keys), have the right moments over 10^5
samples, and work under jit, vmap and differentiation.

Each sampler is compiled once per shape, so one call per sampler serves both
the bit check (its first values) and the moment check."""

from __future__ import annotations

import math

import numpy as np
import pytest
import scipy.special
import scipy.stats

import lamina
import lamina.numpy as jnp
import lamina.random as random

K = random.PRNGKey(0)
K1 = random.PRNGKey(1)
N = 100_000

# name: (dtype, shape, first values) as JAX 0.10.2 gives them; the float32
# values are exact in these decimal forms, so equality is equality of the bits.
JAX = {
    'gamma': ('float32', (100000, 4), [0.4679066240787506, 0.726284921169281, 1.9683666229248047, 26.020463943481445, 0.01695382222533226, 0.8707789778709412, 2.434197425842285, 14.256354331970215]),
    'beta': ('float32', (100000, 2), [0.004462773445993662, 0.00898595992475748, 0.00043886061757802963, 0.009087505750358105, 0.07492797821760178, 0.04624699801206589, 0.4038112759590149, 0.008955687284469604]),
    'poisson': ('int32', (100000, 4), [0.0, 1.0, 34.0, 284.0, 0.0, 2.0, 33.0, 302.0]),
    'binomial': ('float32', (100000, 4), [1.0, 34.0, 94.0, 23.0, 0.0, 35.0, 104.0, 15.0]),
    'geometric': ('int32', (100000,), [1.0, 1.0, 4.0, 3.0, 2.0, 7.0, 5.0, 2.0]),
    't': ('float32', (100000,), [0.8109164237976074, -1.4961943626403809, -1.0472464561462402, -1.4059374332427979, -0.6206905841827393, 0.6089252233505249, 0.5781968832015991, -1.0060042142868042]),
    'chisquare': ('float32', (100000,), [2.2050840854644775, 2.489966869354248, 1.4557135105133057, 6.424534797668457, 4.5717902183532715, 2.861555337905884, 2.03054141998291, 0.4611361622810364]),
    'pareto': ('float32', (100000,), [1.8040345907211304, 2.1569278240203857, 1.0841331481933594, 1.134819746017456, 1.1838150024414062, 1.0368478298187256, 1.077096700668335, 1.263520359992981]),
    'rayleigh': ('float32', (100000,), [0.6557566523551941, 0.41620054841041565, 2.9688284397125244, 2.4622910022735596, 2.120969772338867, 3.7934319972991943, 3.0601377487182617, 1.7246837615966797]),
    'wald': ('float32', (100000,), [0.5334219932556152, 0.5981154441833496, 0.7254838943481445, 0.4421730041503906, 0.6237919330596924, 0.8893736600875854, 0.7478854656219482, 0.5203557014465332]),
    'maxwell': ('float32', (100000,), [2.631096601486206, 0.9910328984260559, 0.9649305939674377, 3.078275203704834, 1.3358209133148193, 1.8929359912872314, 2.670332193374634, 1.9108933210372925]),
    'triangular': ('float32', (100000,), [0.8018845319747925, 0.8732518553733826, 0.29234087467193604, 0.3687325119972229, 0.4320356845855713, 0.2034103125333786, 0.28072673082351685, 0.5174136161804199]),
    'lognormal': ('float32', (100000,), [2.2508795261383057, 2.752837896347046, 0.8050932288169861, 0.961453914642334, 1.0920377969741821, 0.6150543689727783, 0.7806336283683777, 1.280421495437622]),
    'weibull_min': ('float32', (100000,), [4.113933563232422, 4.9072957038879395, 1.0928194522857666, 1.4734783172607422, 1.7857714891433716, 0.6397803425788879, 1.0332742929458618, 2.220064640045166]),
    'dirichlet': ('float32', (100000, 3), [0.24713923037052155, 0.20291729271411896, 0.5499435067176819, 0.01555612776428461, 0.33506086468696594, 0.649383008480072, 0.10803167521953583, 0.01630481518805027]),
    'multinomial': ('float32', (1000, 3), [3.0, 10.0, 17.0, 11.0, 6.0, 13.0, 8.0, 10.0]),
    'ball': ('float32', (1000, 3), [0.9171597361564636, 0.3927421569824219, 0.01165350154042244, -0.8613650798797607, 0.3168482482433319, -0.06285543739795685, -0.8305728435516357, 0.020981580018997192]),
    'f': ('float32', (3,), [3.5078601837158203, 0.1921967715024948, 0.16590972244739532]),
    'double_sided_maxwell': ('float32', (4,), [4.091442108154297, 4.148255348205566, -3.1650609970092773, 5.584834575653076]),
    'generalized_normal': ('float32', (5,), [1.0603917837142944, 0.08920828253030777, -1.375133752822876, 0.5591428875923157, 0.6801239252090454]),
    'exponential_bf16': ('bfloat16', (3,), [1.046875, 0.84375, 0.169921875]),
    'gamma_jvp': ([0.6292697191238403, 1.244983434677124, 2.8358044624328613], [2.2258236408233643, 1.0139238834381104, 0.8731967806816101]),
    'loggamma_jvp': ([-36.146690368652344, -0.5832172632217407, 1.308902382850647], [712.9769287109375, 2.537107229232788, 0.3930412530899048]),
    'vmap_gamma': [[1.5650783777236938, 0.6927400827407837], [3.932621479034424, 0.2811239957809448], [2.0865793228149414, 2.309675931930542]],

}

A = np.array([0.2, 1.0, 3.0, 20.0], np.float32)
LAM = np.array([0.5, 4.0, 30.0, 300.0], np.float32)
BIN_N = np.array([10.0, 40.0, 200.0, 1000.0], np.float32)
BIN_P = np.array([0.3, 0.9, 0.5, 0.02], np.float32)
_G1, _G2 = math.gamma(1 + 1 / 1.5), math.gamma(1 + 2 / 1.5)
_BA, _BB = A[:2].astype(np.float64), A[2:].astype(np.float64)

# name: (sampler call, mean, variance); a None mean skips the moment check.
SAMPLERS = {
    "gamma": (lambda: random.gamma(K, A, (N, 4)), A, A),
    "beta": (lambda: random.beta(K1, A[:2], A[2:], (N, 2)), _BA / (_BA + _BB),
             _BA * _BB / ((_BA + _BB) ** 2 * (_BA + _BB + 1))),
    "poisson": (lambda: random.poisson(K, LAM, (N, 4)), LAM, LAM),
    "binomial": (lambda: random.binomial(K1, BIN_N, BIN_P, (N, 4)), BIN_N * BIN_P,
                 BIN_N * BIN_P * (1 - BIN_P)),
    "geometric": (lambda: random.geometric(K, 0.25, (N,)), 4.0, 0.75 / 0.25 ** 2),
    "t": (lambda: random.t(K, 10.0, (N,)), 0.0, 10.0 / 8.0),
    "chisquare": (lambda: random.chisquare(K, 3.0, (N,)), 3.0, 6.0),
    "pareto": (lambda: random.pareto(K, 5.0, (N,)), 5.0 / 4.0, 5.0 / 48.0),
    "rayleigh": (lambda: random.rayleigh(K, 2.0, (N,)), 2.0 * math.sqrt(math.pi / 2),
                 (4 - math.pi) * 2.0),
    "wald": (lambda: random.wald(K, 2.0, (N,)), 2.0, 8.0),
    "maxwell": (lambda: random.maxwell(K, (N,)), 2 * math.sqrt(2 / math.pi), 3 - 8 / math.pi),
    "triangular": (lambda: random.triangular(K, 0.0, 0.25, 1.0, (N,)), 1.25 / 3,
                   (1 + 0.0625 - 0.25) / 18),
    "lognormal": (lambda: random.lognormal(K, 0.5, (N,)), math.exp(0.125),
                  (math.exp(0.25) - 1) * math.exp(0.25)),
    "weibull_min": (lambda: random.weibull_min(K, 2.0, 1.5, (N,)), 2.0 * _G1,
                    4.0 * (_G2 - _G1 ** 2)),
    "dirichlet": (lambda: random.dirichlet(K, np.array([0.5, 1.0, 3.0]), (N,)),
                  np.array([0.5, 1.0, 3.0]) / 4.5,
                  np.array([0.5, 1.0, 3.0]) * (4.5 - np.array([0.5, 1.0, 3.0])) / (4.5 ** 2 * 5.5)),
    "multinomial": (lambda: random.multinomial(K, 30.0, jnp.array([0.2, 0.3, 0.5]),
                                               shape=(1000, 3)), None, None),
    "ball": (lambda: random.ball(K, 3, 2.0, (1000,)), None, None),
    "f": (lambda: random.f(K, 3.0, jnp.array([2.0, 5.0, 10.0])), None, None),
    "double_sided_maxwell": (lambda: random.double_sided_maxwell(K, 1.0, 2.0, (4,)), None, None),
    "generalized_normal": (lambda: random.generalized_normal(K, 1.5, (5,)), None, None),
    "exponential_bf16": (lambda: random.exponential(K, (3,), jnp.bfloat16), None, None),
}


def _check_moments(samples, mean, var, sigmas=5.0):
    """Sample mean and variance within ``sigmas`` standard errors."""
    samples = np.asarray(samples, np.float64)
    mean = np.broadcast_to(np.asarray(mean, np.float64), samples.shape[1:])
    var = np.broadcast_to(np.asarray(var, np.float64), samples.shape[1:])
    n = len(samples)
    np.testing.assert_array_less(np.abs(samples.mean(0) - mean), sigmas * np.sqrt(var / n))
    centred = samples - samples.mean(0)
    se_var = np.sqrt(np.maximum((centred ** 4).mean(0) - var ** 2, 1e-12) / n)
    np.testing.assert_array_less(np.abs(samples.var(0) - var), sigmas * se_var)


@pytest.mark.parametrize("name", sorted(SAMPLERS))
def test_sampler_matches_jax_bits_and_moments(name):
    call, mean, var = SAMPLERS[name]
    dtype, shape, head = JAX[name]
    out = np.asarray(call())
    assert str(out.dtype) == dtype
    assert out.shape == shape
    np.testing.assert_array_equal(out.reshape(-1)[:len(head)].astype(np.float64), head)
    if mean is not None:
        _check_moments(out, mean, var)


def test_support_and_constraints():
    counts = np.asarray(random.multinomial(K, 30.0, jnp.array([0.2, 0.3, 0.5]), shape=(1000, 3)))
    np.testing.assert_array_equal(counts.sum(-1), 30.0)
    np.testing.assert_allclose(counts.mean(0), [6.0, 9.0, 15.0], atol=0.5)
    pts = np.asarray(random.ball(K, 3, 2.0, (1000,)))
    assert (np.linalg.norm(pts, axis=-1) <= 1.0).all()
    x = np.asarray(random.dirichlet(K, np.array([0.5, 1.0, 3.0]), (N,)))
    np.testing.assert_allclose(x.sum(-1), 1.0, rtol=1e-5)
    k = np.asarray(random.binomial(K1, BIN_N, BIN_P, (N, 4)))
    assert (k >= 0).all() and (k <= BIN_N).all()


MVN_JAX = {
    "cholesky": [[3.29476261138916, 1.4681522846221924], [0.38680487871170044, -1.2268385887145996],
                 [1.2490301132202148, -1.8470487594604492]],
    "eigh": [[-1.2268402576446533, -3.4863080978393555], [0.9601548910140991, -0.598601222038269],
             [2.39424204826355, -0.5922044515609741]],
    "svd": [[-1.9172782897949219, -0.25640350580215454], [1.621917963027954, -0.8181654214859009],
            [1.089555025100708, -1.899815559387207]],
}


def test_matrix_samplers_match_jax_bits():
    mean, cov = jnp.array([1.0, -1.0]), jnp.array([[2.0, 0.5], [0.5, 1.0]])
    for method, want in MVN_JAX.items():
        out = random.multivariate_normal(K, mean, cov, (3,), method=method)
        np.testing.assert_array_equal(np.asarray(out, np.float64), want)
    q = np.asarray(random.orthogonal(K, 3), np.float64)
    np.testing.assert_array_equal(
        q, [[0.9554101228713989, 0.2941357493400574, 0.02599557861685753],
            [-0.04628981649875641, 0.2361408770084381, -0.9706156253814697],
            [-0.2916313707828522, 0.9261326193809509, 0.23922686278820038]])
    wide = np.asarray(random.orthogonal(K, 2, (2,), m=4))
    assert wide.shape == (2, 2, 4)
    np.testing.assert_allclose(wide @ np.swapaxes(wide, -1, -2),
                               np.broadcast_to(np.eye(2), (2, 2, 2)), atol=1e-5)


def _implicit_grad(x, a, eps=1e-6):
    """d x / d a for x = F^-1(u; a) with F the Gamma(a) CDF: -(dF/da) / f (float64)."""
    dfda = (scipy.special.gammainc(a + eps, x) - scipy.special.gammainc(a - eps, x)) / (2 * eps)
    return -dfda / scipy.stats.gamma.pdf(x, a)


def test_gamma_implicit_reparameterisation_gradient():
    a = jnp.array([0.3, 1.5, 4.0])
    x, dx = lamina.jvp(lambda a: random.gamma(K, a), (a,), (jnp.ones(3),))
    want_x, want_dx = JAX["gamma_jvp"]
    np.testing.assert_array_equal(np.asarray(x, np.float64), want_x)
    np.testing.assert_allclose(np.asarray(dx), want_dx, rtol=1e-5)
    np.testing.assert_allclose(np.asarray(dx), _implicit_grad(np.asarray(x, np.float64),
                                                              np.asarray(a, np.float64)),
                               rtol=2e-3)
    # In log space the derivative is (dx / da) / x; a = 0.05 draws ~e^-36.
    a = jnp.array([0.05, 0.5, 2.0])
    logx, dlogx = lamina.jvp(lambda a: random.loggamma(K1, a), (a,), (jnp.ones(3),))
    want_x, want_dx = JAX["loggamma_jvp"]
    np.testing.assert_array_equal(np.asarray(logx, np.float64), want_x)
    np.testing.assert_allclose(np.asarray(dlogx), want_dx, rtol=1e-4)
    x64 = np.exp(np.asarray(logx, np.float64))
    np.testing.assert_allclose(np.asarray(dlogx)[1:],
                               _implicit_grad(x64, np.asarray(a, np.float64))[1:] / x64[1:],
                               rtol=2e-3)


def test_samplers_under_vmap_and_jit():
    keys = random.split(K, 3)
    batched = lamina.vmap(lambda k: random.gamma(k, 2.0, (2,)))(keys)
    np.testing.assert_array_equal(np.asarray(batched, np.float64), JAX["vmap_gamma"])
    # Inside a jit, each row of a vmapped key batch is its own key.
    rows = lamina.jit(lamina.vmap(lambda k: random.pareto(k, 2.0, (2,))))(keys)
    for i in range(3):
        np.testing.assert_array_equal(np.asarray(rows[i]),
                                      np.asarray(random.pareto(keys[i], 2.0, (2,))))
    np.testing.assert_array_equal(np.asarray(lamina.jit(random.clone)(K)), np.asarray(K))


def test_bad_input_names_the_function_and_argument():
    with pytest.raises(TypeError, match="gamma.*PRNG key"):
        random.gamma(np.zeros(3, np.uint32), 1.0)
    with pytest.raises(ValueError, match="beta: shape dimensions must be non-negative"):
        random.beta(K, 1.0, 1.0, (-1,))
    with pytest.raises(ValueError, match="lamina.random.t: parameter shapes"):
        random.t(K, jnp.ones(3), (2,))
    with pytest.raises(ValueError, match="gamma: dtype argument must be a float"):
        random.gamma(K, 1.0, dtype=jnp.int32)
    with pytest.raises(ValueError, match="poisson: dtype argument must be an integer"):
        random.poisson(K, 1.0, dtype=jnp.float32)
    with pytest.raises(ValueError, match="dirichlet: alpha must have at least one dimension"):
        random.dirichlet(K, 1.0)
    with pytest.raises(TypeError, match="binomial: p must be a real"):
        random.binomial(K, 3.0, 1j)
    with pytest.raises(ValueError, match="multivariate_normal: cov must have shape"):
        random.multivariate_normal(K, jnp.zeros(2), jnp.eye(3))
    with pytest.raises(ValueError, match="multivariate_normal: method must be one of"):
        random.multivariate_normal(K, jnp.zeros(2), jnp.eye(2), method="lu")
    with pytest.raises(ValueError, match="orthogonal: n must be non-negative"):
        random.orthogonal(K, -2)
    with pytest.raises(ValueError, match="ball: d must be non-negative"):
        random.ball(K, -1)
