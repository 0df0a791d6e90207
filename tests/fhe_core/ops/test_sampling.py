"""ChaCha20 samplers: exact agreement with a Python ChaCha20 reference, determinism per
(seed, nonce), and distribution checks. Runs on CPU and CUDA."""
import os

import numpy as np
import pytest
import torch

from fhe_core import ops
from fhe_core.ring import RNSBasis, generate_primes
from scipy.stats import chi2

from fhe_reference import DEVICES, chacha20_block, chacha20_words, fixed_weight_ternary

N = 1 << 10
PRIMES = generate_primes([61, 45, 30], N)

# RFC 8439 section 2.3.2: key 00..1f, 32-bit counter 1, nonce 00:00:00:09:00:00:00:4a:00:00:00:00.
# In our layout (64-bit counter in words 12-13, 64-bit nonce in 14-15) that is:
RFC_KEY = bytes(range(32))
RFC_COUNTER = 1 | (0x09000000 << 32)
RFC_NONCE = 0x4A000000
RFC_BLOCK = [0xE4E7F110, 0x15593BD1, 0x1FDD0F50, 0xC47120A3, 0xC7F4D1C7, 0x0368C033, 0x9AAA2204, 0x4E6CD4C3,
             0x466482D2, 0x09AA9F07, 0x05D7C214, 0xA2028BD9, 0xD19C12B5, 0xB94E16DE, 0xE883D0CB, 0x4E3C50A2]


def test_reference_chacha20_matches_rfc8439():
    assert chacha20_block(RFC_KEY, RFC_COUNTER, RFC_NONCE) == RFC_BLOCK


def _centered(t: torch.Tensor, q: int) -> np.ndarray:
    v = t.cpu().numpy().astype(np.int64)
    return np.where(v > q // 2, v - q, v)


@pytest.mark.parametrize("device", DEVICES)
def test_uniform_matches_reference_stream(device):
    """Element e of the flattened [l, N] output is the 128-bit word group 4e..4e+3 mod q."""
    seed, nonce = os.urandom(32), int.from_bytes(os.urandom(7), "little")
    basis = RNSBasis.get(PRIMES, N, device)
    got = ops.sample_uniform(basis.moduli, N, seed, nonce).cpu().tolist()
    words = chacha20_words(seed, nonce, 4 * N * len(PRIMES))
    for limb, q in enumerate(PRIMES):
        for i in range(N):
            w = words[4 * (limb * N + i): 4 * (limb * N + i) + 4]
            value = w[0] | w[1] << 32 | w[2] << 64 | w[3] << 96
            assert got[limb][i] == value % q, f"limb {limb}, coefficient {i}"


@pytest.mark.parametrize("device", DEVICES)
def test_small_samplers_match_reference_stream(device):
    """CBD and uniform ternary: coefficient i uses words 2i, 2i+1; the same value in every limb."""
    seed, nonce, eta = os.urandom(32), 7, 21
    basis = RNSBasis.get(PRIMES, N, device)
    words = chacha20_words(seed, nonce, 2 * N)
    cbd = ops.sample_cbd(basis.moduli, N, seed, nonce, eta)
    ternary = ops.sample_ternary(basis.moduli, N, seed, nonce, 0)
    mask = (1 << eta) - 1
    expected_cbd = [bin(words[2 * i] & mask).count("1") - bin(words[2 * i + 1] & mask).count("1") for i in range(N)]
    expected_ternary = [(words[2 * i] | words[2 * i + 1] << 32) % 3 - 1 for i in range(N)]
    for limb, q in enumerate(PRIMES):
        assert _centered(cbd[limb], q).tolist() == expected_cbd
        assert _centered(ternary[limb], q).tolist() == expected_ternary


@pytest.mark.parametrize("device", DEVICES)
def test_sampling_is_deterministic_per_seed_and_nonce(device):
    basis = RNSBasis.get(PRIMES, N, device)
    seed = os.urandom(32)
    for sampler in (lambda s, n: ops.sample_uniform(basis.moduli, N, s, n),
                    lambda s, n: ops.sample_cbd(basis.moduli, N, s, n, 21),
                    lambda s, n: ops.sample_ternary(basis.moduli, N, s, n, 64)):
        first = sampler(seed, 3)
        assert torch.equal(first, sampler(seed, 3))
        assert not torch.equal(first, sampler(seed, 4))
        assert not torch.equal(first, sampler(os.urandom(32), 3))


@pytest.mark.parametrize("device", DEVICES)
def test_uniform_residues_pass_chi_square(device):
    """64 equal-width buckets per prime over 2^16 samples: the chi-square statistic (63 degrees of
    freedom) must stay below 120, which a uniform source exceeds with probability < 1e-5."""
    n = 1 << 16
    basis = RNSBasis.get(generate_primes([61, 40, 30], n), n, device)
    samples = ops.sample_uniform(basis.moduli, n, os.urandom(32), 0).cpu()
    for limb, q in enumerate(basis.primes):
        values = samples[limb].numpy().astype(np.float64)
        assert values.min() >= 0 and values.max() < q
        counts = np.bincount(np.minimum((values / q * 64).astype(np.int64), 63), minlength=64)
        expected = n / 64
        chi2 = float(((counts - expected) ** 2 / expected).sum())
        assert chi2 < 120.0, f"chi-square {chi2:.1f} for q of {q.bit_length()} bits"


@pytest.mark.parametrize("device", DEVICES)
def test_centered_binomial_moments(device):
    """eta = 21: mean 0, variance 10.5, support [-21, 21]. With 2^17 samples the mean's standard
    error is 0.009 and the variance's 0.04: bounds of 6 standard errors."""
    n = 1 << 17
    basis = RNSBasis.get(generate_primes([50, 40], n), n, device)
    e = ops.sample_cbd(basis.moduli, n, os.urandom(32), 1, 21)
    values = _centered(e[0], basis.primes[0])
    assert np.array_equal(values, _centered(e[1], basis.primes[1])), "limbs disagree"
    assert np.abs(values).max() <= 21
    assert abs(values.mean()) < 6 * 0.009
    assert abs(values.var() - 10.5) < 6 * 0.04


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("n,weight", [(N, 1), (N, 64), (N, 192), (N, N // 2), (N, N), (1 << 16, 192)])
def test_fixed_weight_ternary_matches_reference_stream(device, n, weight):
    """Bit for bit against Floyd's algorithm on the Python ChaCha20 stream, the same in every limb;
    also at the 128-bit bootstrapping presets' N = 2^16, h = 192."""
    seed, nonce = os.urandom(32), int.from_bytes(os.urandom(7), "little")
    basis = RNSBasis.get(generate_primes([61, 45, 30], n), n, device)
    s = ops.sample_ternary(basis.moduli, n, seed, nonce, weight)
    expected = fixed_weight_ternary(seed, nonce, n, weight)
    assert sum(map(abs, expected)) == weight
    for limb, q in enumerate(basis.primes):
        assert _centered(s[limb], q).tolist() == expected, f"limb {limb}"


# Positions and signs of fixed-weight secrets: SECRETS draws of weight H at N = 1024 give counts
# over the 2N cells (position, sign), each expected SECRETS * H / 2N = 6.25 times. Within one
# secret the positions are drawn without replacement, which only lowers the cells' variance (by
# the factor 1 - H/N), so the chi-square statistic of a uniform sampler is at most chi-square
# with 2N - 1 degrees of freedom: the bound below is exceeded with probability < 1e-6.
SECRETS, H = 200, 64
CHI2_BOUND = float(chi2.isf(1e-6, 2 * N - 1))


def _position_sign_chi2(secrets: np.ndarray) -> float:
    """Chi-square statistic of [secrets, N] ternary rows over the cells (position, sign)."""
    counts = np.concatenate([(secrets == 1).sum(axis=0), (secrets == -1).sum(axis=0)])
    expected = np.count_nonzero(secrets) / (2 * secrets.shape[1])
    return float(((counts - expected) ** 2 / expected).sum())


def test_position_sign_chi2_rejects_a_sampler_that_misses_a_quarter_of_positions():
    """The statistic has power: a sampler whose support never reaches 256 of the 1,024 positions
    (each reachable one then busier by a third, its busiest cell near the old max-hits bound) fails."""
    rng = np.random.default_rng()
    reachable = rng.permutation(N)[: 3 * N // 4]
    secrets = np.zeros((SECRETS, N), dtype=np.int64)
    for row in secrets:
        row[rng.choice(reachable, H, replace=False)] = rng.choice([-1, 1], H)
    assert _position_sign_chi2(secrets) > CHI2_BOUND


@pytest.mark.parametrize("device", DEVICES)
def test_fixed_weight_positions_and_signs_are_uniform(device):
    basis = RNSBasis.get(PRIMES[:1], N, device)
    secrets = np.stack([_centered(ops.sample_ternary(basis.moduli, N, os.urandom(32), nonce, H)[0], PRIMES[0])
                        for nonce in range(SECRETS)])
    assert _position_sign_chi2(secrets) < CHI2_BOUND, f"bound {CHI2_BOUND:.0f}"


def test_seed_must_be_32_bytes():
    with pytest.raises(ValueError, match="32 bytes"):
        ops.seed_words(b"short")
