"""lamina.nn.initializers against JAX 0.10.2's arrays for the same key.

The expected values were produced by JAX 0.10.2 (``jax.nn.initializers`` with
``jax.random.PRNGKey(42)``). lamina's random functions give JAX's bits, so every
initializer built on them must give JAX's arrays exactly; the orthogonal ones go
through a QR decomposition and agree to rounding. The truncated-normal ones are
compared jitted, as they were produced (eager ``random.truncated_normal``
differs from its jitted form in the last bit, a known random-module issue).
"""

from __future__ import annotations

import numpy as np
import pytest

import lamina
import lamina.numpy as jnp
from lamina.nn import initializers as I

EXPECTED = {
    'uniform': ('float32', (4,), [0.004887095652520657, 0.006797971669584513, 0.006162714678794146, 0.005610160529613495]),
    'uniform_f16': ('float16', (4,), [0.228515625, 0.5712890625, 2.92578125, 2.26953125]),
    'normal': ('float32', (4,), [-0.00849138479679823, 0.14013956487178802, 0.08871088922023773, 0.046063777059316635]),
    'truncated_normal': ('float32', (4,), [-0.027016498148441315, 0.44438081979751587, 0.2818770706653595, 0.14650805294513702]),
    'glorot_uniform': ('float32', (3, 4), [-0.020905816927552223, 0.3329196870326996, 0.21529297530651093, 0.11297983676195145, -0.09138841927051544, 0.1589926779270172, -0.7872999310493469, 0.5094479918479919, 0.368400901556015, 0.5899949073791504, -0.27718091011047363, 0.6903285384178162]),
    'lecun_uniform': ('float32', (3, 4), [-0.022580862045288086, 0.35959434509277344, 0.2325429916381836, 0.12203216552734375, -0.09871077537536621, 0.17173171043395996, -0.8503811359405518, 0.5502667427062988, 0.3979184627532959, 0.6372673511505127, -0.2993896007537842, 0.7456400394439697]),
    'he_uniform': ('float32', (3, 4), [-0.031934160739183426, 0.5085431933403015, 0.3288654386997223, 0.1725795418024063, -0.13959811627864838, 0.24286530911922455, -1.202620506286621, 0.7781946659088135, 0.5627416968345642, 0.901232123374939, -0.4234008193016052, 1.0544942617416382]),
    'glorot_normal': ('float32', (3, 4), [-0.0164171252399683, 0.27003705501556396, 0.17128834128379822, 0.08902860432863235, -0.07192526012659073, 0.12573154270648956, -0.7994455695152283, 0.4343254864215851, 0.30115261673927307, 0.5204616785049438, -0.22251516580581665, 0.6452774405479431]),
    'lecun_normal': ('float32', (3, 4), [-0.017732521519064903, 0.29167336225509644, 0.1850125640630722, 0.09616187959909439, -0.07768816500902176, 0.13580559194087982, -0.8634999394416809, 0.4691251218318939, 0.3252820074558258, 0.5621628761291504, -0.24034383893013, 0.696979284286499]),
    'he_normal': ('float32', (3, 4), [-0.0250775758177042, 0.4124884605407715, 0.2616472840309143, 0.13599345088005066, -0.10986766219139099, 0.19205811619758606, -1.2211734056472778, 0.6634431481361389, 0.46001824736595154, 0.7950184345245361, -0.3398975431919098, 0.9856775999069214]),
    'vs_fan_out_normal': ('float32', (3, 3, 2, 5), [-0.005967136938124895, 0.09848004579544067, 0.0623396597802639, 0.032370321452617645, -0.026148414239287376, 0.04573141410946846, -0.3037639558315277, 0.159349262714386, 0.10992280393838882, 0.19188076257705688, -0.08105900138616562, 0.24029585719108582, 0.30479851365089417, 0.22787512838840485, -0.011867651715874672, 0.1917593628168106, 0.11749888956546783, 0.04618130996823311, -0.3053724467754364, 0.16110487282276154, -0.05092257261276245, -0.24863535165786743, -0.4087598919868469, 0.07510717958211899, -0.050832491368055344, 0.2561713755130768, -0.294138640165329, -0.1127391830086708, 0.057063423097133636, 0.3246866762638092, 0.1462065726518631, -0.02189914509654045, -0.10589561611413956, 0.14276282489299774, 0.02336924709379673, -0.07331202924251556, 0.09590194374322891, 0.04803253337740898, -0.11743544787168503, -0.18615509569644928, -0.04500988498330116, 0.06493448466062546, -0.03946923837065697, 0.01974008046090603, 0.0788210853934288, -0.22287996113300323, 0.09416650980710983, 0.2552579939365387, 0.09147080034017563, -0.14836741983890533, 0.0371868871152401, -0.04189041256904602, -0.04598088189959526, 0.27095484733581543, 0.07913105189800262, -0.0375419482588768, -0.0505523681640625, -0.08639662712812424, 0.07739522308111191, 0.2504305839538574, -0.21893340349197388, -0.16745460033416748, 0.2231636494398117, -0.07634760439395905, -0.01161988452076912, -0.4327230453491211, 0.31644147634506226, -0.3083244264125824, 0.017001541331410408, -0.17403414845466614, -0.024891553446650505, -0.1902361661195755, 0.1188679188489914, -0.2202080339193344, -0.28165796399116516, 0.3450753390789032, 0.008955675177276134, -0.2612445056438446, -0.03935423120856285, 0.12892234325408936, -0.05372919514775276, 0.28068286180496216, 0.22204534709453583, 0.2093077450990677, -0.4151217043399811, -0.11108598858118057, -0.48894718289375305, 0.23095816373825073, 0.507022500038147, 0.1548071801662445]),
    'vs_geo_uniform': ('float32', (3, 2, 5), [-0.016711708158254623, 0.26612958312034607, 0.17210106551647186, 0.09031390398740768, -0.07305414974689484, 0.12709568440914154, -0.6293524503707886, 0.40724295377731323, 0.29449260234832764, 0.47163060307502747, -0.2215730994939804, 0.5518353581428528, 0.6303749680519104, 0.5330530405044556, -0.033223673701286316, 0.4714058041572571, 0.31283965706825256, 0.12832623720169067, -0.630939245223999, 0.410926878452301, -0.14125876128673553, -0.5637606978416443, -0.7012201547622681, 0.20600759983062744, -0.14101366698741913, 0.5740692615509033, -0.6194871664047241, -0.3013545572757721, 0.15790359675884247, 0.6486602425575256]),
    'vs_complex_uniform': ('complex64', (2, 2), [[-0.1018589437007904, -0.7210308313369751], [0.13193653523921967, -0.5440173745155334], [0.39510443806648254, 0.8633787035942078], [-0.06624709814786911, 0.8330332040786743]]),
    'orthogonal': ('float32', (3, 5), [-0.012633919715881348, 0.06853624433279037, -0.6431459784507751, 0.40626060962677, 0.6453363299369812, 0.3212231993675232, -0.08711835741996765, 0.5372233390808105, -0.27549630403518677, 0.7243747115135193, 0.22755993902683258, 0.16116178035736084, 0.45013225078582764, 0.8429985642433167, -0.09475192427635193]),
    'orthogonal_axis0': ('float32', (4, 2, 3), [-0.03415322303771973, -0.1496618688106537, 0.6291491389274597, 1.7445306777954102, 0.6725112199783325, -0.2914581000804901, 0.7784720659255981, 0.5150715708732605, 0.7183141112327576, -0.2916552722454071, -0.42519575357437134, -1.5319441556930542, -0.20755422115325928, -1.4745656251907349, -0.6504415273666382, 0.31211376190185547, -0.8554359078407288, -0.7282285094261169, 0.0396856963634491, -0.5061003565788269, 1.4627032279968262, -0.06138765066862106, -0.9662373661994934, 0.8157221078872681]),
    'delta_orthogonal': ('float32', (3, 2, 3), [0.0, 0.0, 0.0, 0.0, 0.0, 0.0, -0.08792734146118164, 0.918591320514679, -0.3853037655353546, 0.8722633719444275, 0.2578020691871643, 0.41556572914123535, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0]),
}


def _key() -> object:
    return lamina.random.PRNGKey(42)


def _cases() -> dict[str, object]:
    k = _key()
    jit = lamina.jit
    return {
        "uniform": lambda: I.uniform()(k, (4,)),
        "uniform_f16": lambda: I.uniform(3.0, jnp.float16)(k, (4,)),
        "normal": lambda: I.normal(0.3)(k, (4,)),
        "truncated_normal": lambda: jit(lambda k: I.truncated_normal(1.0)(k, (4,)))(k),
        "glorot_uniform": lambda: I.glorot_uniform()(k, (3, 4)),
        "lecun_uniform": lambda: I.lecun_uniform()(k, (3, 4)),
        "he_uniform": lambda: I.he_uniform()(k, (3, 4)),
        "glorot_normal": lambda: jit(lambda k: I.glorot_normal()(k, (3, 4)))(k),
        "lecun_normal": lambda: jit(lambda k: I.lecun_normal()(k, (3, 4)))(k),
        "he_normal": lambda: jit(lambda k: I.he_normal()(k, (3, 4)))(k),
        "vs_fan_out_normal": lambda: I.variance_scaling(2.0, "fan_out", "normal")(
            k, (3, 3, 2, 5)),
        "vs_geo_uniform": lambda: I.variance_scaling(
            1.0, "fan_geo_avg", "uniform", in_axis=0, out_axis=(1, 2))(k, (3, 2, 5)),
        "vs_complex_uniform": lambda: I.variance_scaling(
            1.0, "fan_in", "uniform", dtype=jnp.complex64)(k, (2, 2)),
        "orthogonal": lambda: I.orthogonal()(k, (3, 5)),
        "orthogonal_axis0": lambda: I.orthogonal(2.0, column_axis=0)(k, (4, 2, 3)),
        "delta_orthogonal": lambda: I.delta_orthogonal()(k, (3, 2, 3)),
    }


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_initializer_matches_jax(name: str) -> None:
    dtype, shape, values = EXPECTED[name]
    got = np.asarray(_cases()[name]())  # type: ignore[operator]
    assert got.dtype == np.dtype(dtype) and got.shape == shape
    want = np.array(values, dtype=np.float64)
    if got.dtype.kind == "c":
        want = want[:, 0] + 1j * want[:, 1]
    want = want.reshape(shape).astype(got.dtype)
    if "orthogonal" in name:
        np.testing.assert_allclose(got, want, atol=2e-6, rtol=0)
    else:
        np.testing.assert_array_equal(got, want)


def test_orthogonal_columns_are_orthonormal() -> None:
    q = np.asarray(I.orthogonal()(_key(), (6, 4)), np.float64)
    np.testing.assert_allclose(q.T @ q, np.eye(4), atol=1e-5)
    wide = np.asarray(I.orthogonal()(_key(), (3, 7)), np.float64)
    np.testing.assert_allclose(wide @ wide.T, np.eye(3), atol=1e-5)
    assert np.asarray(I.orthogonal()(_key(), (0, 3))).shape == (0, 3)


def test_constant_zeros_ones_and_defaults() -> None:
    k = _key()
    assert np.asarray(I.zeros(k, (2, 3))).tolist() == [[0.0] * 3] * 2
    assert I.zeros(k, (2,)).dtype == np.float32
    assert I.ones(k, (2,), jnp.bfloat16).dtype == jnp.bfloat16
    c = I.constant(-0.5)(k, (2, 2))
    assert c.dtype == np.float32 and np.asarray(c).tolist() == [[-0.5, -0.5]] * 2
    assert I.constant(3, jnp.int32)(k, (1,)).dtype == np.int32
    assert I.xavier_uniform is I.glorot_uniform and I.kaiming_normal is I.he_normal
    assert I.xavier_normal is I.glorot_normal and I.kaiming_uniform is I.he_uniform


def test_errors_match_jax() -> None:
    k = _key()
    with pytest.raises(ValueError, match="Must be at least 2D"):
        I.glorot_uniform()(k, (3,))
    with pytest.raises(ValueError, match="invalid mode"):
        I.variance_scaling(1.0, "fan_bad", "normal")(k, (2, 2))  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="invalid distribution"):
        I.variance_scaling(1.0, "fan_in", "bad")(k, (2, 2))  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="at least a 2D shape"):
        I.orthogonal()(k, (3,))
    with pytest.raises(ValueError, match="3D, 4D or 5D"):
        I.delta_orthogonal()(k, (3, 3))


def test_lamina_nn_has_initializers() -> None:
    assert lamina.nn.initializers is I
    assert "initializers" in lamina.nn.__all__
