"""The special DFT factorisation (L3, numpy): every radix-2 stage has at most 3 diagonals; the
product of the (merged) factors equals the dense matrix E[j, k] = xi^(k 5^j) built from its
definition (with the bit-reversed order on the coefficient side), matches the encoder's own
transform on fresh random vectors (``coefficients_to_slots`` / ``slots_to_coefficients`` and the
integer coefficients of a real encoded plaintext), for full and sparse slot counts, both
directions and every number of levels; merged factors have exactly the diagonals of their dense
product. Tolerances: 1e-12 relative (float64 round-off of log2(n) sparse stages), 2^-40 against
plaintexts encoded at scale 2^45. One homomorphic check applies a merged CoeffsToSlots factor
diagonal by diagonal (rotate, multiply by the encoded diagonal, add, rescale) to confirm that the
rotation convention matches the evaluator's: >= 2^-25 absolute [measured ~2^-33].
"""
import itertools

import numpy as np
import pytest

from fhe_core.ckks import coefficients_to_slots, slots_to_coefficients
from fhe_core.ckks.bootstrapping import dft
from fhe_core.errors import ParameterError
from fhe_core.params import ParamsLiteral

from boot_common import SecretKeySetup

SIZES = (2, 4, 16, 128, 512, 2048)


def rel_error(a, b) -> float:
    return float(np.abs(a - b).max() / np.abs(b).max())


@pytest.fixture
def rng():
    return np.random.default_rng()


@pytest.mark.parametrize("n", SIZES)
@pytest.mark.parametrize("inverse", [False, True])
def test_every_stage_has_at_most_three_diagonals(n, inverse):
    stages = dft.stages(n, inverse=inverse)
    assert len(stages) == n.bit_length() - 1
    halves = [n >> (i + 1) for i in range(len(stages))] if inverse else [1 << i for i in range(len(stages))]
    for stage, h in zip(stages, halves):
        assert len(stage) <= 3 and set(stage) <= {0, h % n, (n - h) % n}


@pytest.mark.parametrize("n", (4, 16, 128, 512))
def test_factor_products_equal_the_dense_special_dft(n):
    e = dft.special_dft_matrix(n)
    br = dft.bit_reverse_permutation(n)
    assert np.allclose(e.conj().T @ e, n * np.eye(n), atol=1e-9)   # E^-1 = E^H / n
    for levels in range(1, n.bit_length()):
        stc = dft.slots_to_coeffs_factors(n, levels)
        cts = dft.coeffs_to_slots_factors(n, levels)
        assert stc.depth == cts.depth == levels and sum(stc.stages_per_factor) == n.bit_length() - 1
        assert rel_error(stc.dense(), e[:, br]) < 1e-12                # E BitRev
        assert rel_error(cts.dense(), (e.conj().T / n)[br, :]) < 1e-12  # BitRev E^-1


@pytest.mark.parametrize("n", (2, 16, 512, 2048))
def test_factors_match_the_encoder_transform(n, rng):
    br = dft.bit_reverse_permutation(n)
    c = rng.uniform(-1, 1, 2 * n)                                      # real coefficients of m'(Y)
    u = c[:n] + 1j * c[n:]
    z = coefficients_to_slots(c)                                       # the encoder's embedding
    for levels in sorted({1, min(2, n.bit_length() - 1), n.bit_length() - 1}):
        assert rel_error(dft.slots_to_coeffs_factors(n, levels)(u[br]), z) < 1e-12
        got = dft.coeffs_to_slots_factors(n, levels)(z)[br]
        expected = slots_to_coefficients(z)
        assert rel_error(np.concatenate([got.real, got.imag]), expected) < 1e-12


@pytest.mark.parametrize("slots", (512, 32))
def test_coeffs_to_slots_recovers_encoded_plaintext_coefficients(slots, rng):
    """z -> Encoder.encode -> the plaintext's integer coefficients c at positions g k, over the
    scale; CoeffsToSlots of z gives BitRev(c_k + i c_(k+n))."""
    s = SecretKeySetup(ParamsLiteral(log_n=10, log_q=[60, 45], log_p=[61], log_default_scale=45))
    z = rng.uniform(-1, 1, slots) + 1j * rng.uniform(-1, 1, slots)
    pt = s.encoder.encode(z, slots=slots)
    coefficients = np.array(s.integers(pt.data, pt.level), dtype=np.float64) / pt.scale
    g = s.params.n // (2 * slots)
    c = coefficients[::g]
    assert not np.any(coefficients[np.arange(s.params.n) % g != 0])
    u = c[:slots] + 1j * c[slots:]
    got = dft.coeffs_to_slots_factors(slots, 2)(z)
    assert np.abs(got - u[dft.bit_reverse_permutation(slots)]).max() < 2.0 ** -40


@pytest.mark.parametrize("n, levels", [(64, 2), (64, 3), (512, 3), (1024, 4),
                                       pytest.param(2048, 4, marks=pytest.mark.slow)])
@pytest.mark.parametrize("inverse", [False, True])
def test_merged_factors_have_exactly_the_diagonals_of_their_product(n, levels, inverse):
    f = (dft.coeffs_to_slots_factors if inverse else dft.slots_to_coeffs_factors)(n, levels)
    dense = [dft.to_dense(stage, n) for stage in dft.stages(n, inverse=inverse)]
    start, rows = 0, np.arange(n)
    for factor, size in zip(f.factors, f.stages_per_factor):
        product = np.eye(n)
        for m in dense[start:start + size]:
            product = m @ product
        nonzero = {k for k in range(n) if np.abs(product[rows, (rows + k) % n]).max() > 1e-12}
        assert set(factor) == nonzero
        assert len(factor) <= 2 ** (size + 1) - 1
        count = n.bit_length() - 1
        halves = [n >> (i + 1) for i in range(count)] if inverse else [1 << i for i in range(count)]
        reachable = {sum(e * h for e, h in zip(signs, halves[start:start + size])) % n
                     for signs in itertools.product((-1, 0, 1), repeat=size)}
        assert set(factor) <= reachable
        start += size
    assert f.galois_elements(2 * n) == [pow(5, k, 4 * n) for k in f.rotation_steps()]
    print(f"n={n} levels={levels} {'CtS' if inverse else 'StC'}: rotations per factor "
          f"{[len(r) for r in f.rotations()]}, all {len(f.rotation_steps())}")


def test_scaling_is_spread_over_the_factors(rng):
    n = 64
    z = rng.normal(size=n) + 1j * rng.normal(size=n)
    plain = dft.coeffs_to_slots_factors(n, 3)
    scaled = dft.coeffs_to_slots_factors(n, 3, scaling=0.125)
    assert rel_error(scaled(z), 0.125 * plain(z)) < 1e-12
    first = [np.abs(d).max() for d in scaled.factors[0].values()]
    assert max(first) < max(np.abs(d).max() for d in plain.factors[0].values())  # every factor shares the scaling
    with pytest.raises(ParameterError):
        dft.coeffs_to_slots_factors(n, 3, scaling=0)


def test_bad_arguments_are_refused():
    with pytest.raises(ParameterError):
        dft.coeffs_to_slots_factors(48)
    with pytest.raises(ParameterError):
        dft.slots_to_coeffs_factors(64, 7)
    with pytest.raises(ParameterError):
        dft.slots_to_coeffs_factors(64, 0)


def test_a_factor_applied_homomorphically_diagonal_by_diagonal(rng):
    """sum_k rotate(ct, k) * encode(d_k), rescaled: the factor's diagonals use the evaluator's
    rotation convention (slot j receives slot j + k). A plain loop, not a BSGS transform."""
    n = 64
    factor = dft.coeffs_to_slots_factors(n, 2).factors[0]
    from fhe_core import ckks
    lit = ParamsLiteral(log_n=10, log_q=[60, 45, 45], log_p=[61, 61], log_default_scale=45)
    s = SecretKeySetup(lit, ckks.galois_elements(1 << 10, [k for k in factor if k]))
    z = rng.uniform(-1, 1, n) + 1j * rng.uniform(-1, 1, n)
    ct = s.encrypt(z, slots=n)
    ev, q = s.evaluator, float(s.params.q_primes[ct.level])
    rotated = ev.rotate_hoisted(ct, list(factor))
    acc = None
    for k, d in factor.items():
        term = ev.mul(rotated[k], s.encoder.encode(d, slots=n, level=ct.level, scale=q))
        acc = term if acc is None else ev.add(acc, term)
    out = ev.rescale(acc)
    error = np.abs(s.decrypt(out) - dft.apply(factor, z)).max()
    print(f"homomorphic factor ({len(factor)} diagonals): max error 2^{np.log2(error):.1f}")
    assert out.level == ct.level - 1 and error < 2.0 ** -25


@pytest.mark.parametrize("n, levels", [(8, 3), (16, 2), (64, 2)])
def test_packed_real_and_imaginary_parts_round_trip(n, levels, rng):
    """pack_real_imaginary on the last CtS factor: [v, v] -> [w, -i w] (w = M v), whose sum with
    its conjugate is [2 Re w, 2 Im w]; unpack_real_imaginary on the first StC factor: [a, b] ->
    [M' (a + i b), M' (a + i b)]; checked with dense 2n x 2n matrices."""
    cts, stc = dft.coeffs_to_slots_factors(n, levels), dft.slots_to_coeffs_factors(n, levels)
    v = rng.uniform(-1, 1, n) + 1j * rng.uniform(-1, 1, n)
    last = cts.factors[-1]
    packed = dft.pack_real_imaginary(last, n)
    assert sorted(packed) == sorted(last)
    w = dft.apply(last, v)
    y = dft.to_dense(packed, 2 * n) @ np.concatenate([v, v])
    assert np.allclose(y, np.concatenate([w, -1j * w]), atol=1e-12)
    assert np.allclose(y + y.conj(), np.concatenate([2 * w.real, 2 * w.imag]), atol=1e-12)
    first = stc.factors[0]
    unpacked = dft.unpack_real_imaginary(first, n)
    assert sorted(unpacked) == sorted(set(first) | {k + n for k in first})
    a, b = rng.uniform(-1, 1, n), rng.uniform(-1, 1, n)
    out = dft.to_dense(unpacked, 2 * n) @ np.concatenate([a, b])
    expected = dft.apply(first, a + 1j * b)
    assert np.allclose(out, np.concatenate([expected, expected]), atol=1e-12)
