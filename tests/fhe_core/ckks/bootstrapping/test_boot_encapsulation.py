"""Bootstrapping with sparse-secret encapsulation: a dense (uniform ternary) main secret, ModRaise through an
ephemeral secret of weight h' = 32 (TINY_N10_DENSE, CPU, insecure), against numpy; its overflow against a
plain ModRaise of the dense secret; the refused keys; the 128-bit preset's two security checks; the failure
probability against an independent computation.

Tolerance: TINY_N10_DENSE is held to the minimum TINY_N10_FULL (the same chain with a sparse h = 32 main
secret) is held to in test_boot_bootstrapper, 20 bits on [-1, 1], and to a mean half a bit lower, 23.5 bits.
Measured on this CPU (2026-11-28, 6 fresh keys each): TINY_N10_DENSE min 21.81-22.15, mean 24.71-24.80;
TINY_N10_FULL min 21.87-22.15, mean 25.40-25.48. The worst slot is the same; the mean loses 0.7 bit because
the rounding noise of every rescale and key switch after ModRaise grows with |s|_1 (~683 for the dense
secret against 32), not from the encapsulation's two key switches (their noise is far below q_0 / R).
"""
from __future__ import annotations

import dataclasses
import math

import numpy as np
import pytest
import torch

from fhe_core import ckks, rlwe
from fhe_core.ckks.bootstrapping import (N16_DENSE_FULL, N16_H192_FULL, TINY_N10_DENSE, Bootstrapper, mod_raise,
                                         mod_raise_encapsulated, overflow_probability)
from fhe_core.ckks.bootstrapping.bootstrapper import gen_bootstrapping_keys
from fhe_core.errors import MissingKeyError, ParameterError, SecurityError
from fhe_core.params import ParamsLiteral
from fhe_reference import crt, fresh_rng

WEIGHT = TINY_N10_DENSE.ephemeral_weight


class Client:
    """The secret-key side: a dense secret, every bootstrapping key, encryption, decryption."""

    def __init__(self, device: str = "cpu", seed: bytes | None = None):
        self.params = params = TINY_N10_DENSE.params(device=device, allow_insecure=True)
        self.ctx = ckks.rlwe_context(params)
        self.sk = rlwe.gen_secret_key(self.ctx, seed=seed)
        self.keys = gen_bootstrapping_keys(params, TINY_N10_DENSE, self.sk, seed=seed)
        self.encoder = ckks.Encoder(params)
        self.encryptor, self.decryptor = ckks.Encryptor(params, self.sk), ckks.Decryptor(params, self.sk)
        self.rng, _ = fresh_rng()

    def message(self) -> np.ndarray:
        n = TINY_N10_DENSE.slots
        return self.rng.uniform(-1, 1, n) + 1j * self.rng.uniform(-1, 1, n)

    def encrypt(self, z, level: int = 0, seed: bytes | None = None):
        return self.encryptor.encrypt(self.encoder.encode(z, level=level, slots=TINY_N10_DENSE.slots), seed=seed)

    def overflow(self, ct) -> int:
        """max |I| of a raised ciphertext: its decryption c_0 + c_1 s (exact CRT) divided by q_0, rounded."""
        basis = self.params.q_basis(ct.level)
        rows = basis.intt(self.decryptor.decrypt(ct).data).tolist()
        big_q, q0 = basis.modulus, self.params.q_primes[0]
        values = ((crt([row[k] for row in rows], list(basis.primes)) + big_q // 2) % big_q - big_q // 2
                  for k in range(self.params.n))
        return max(abs(round(v / q0)) for v in values)


@pytest.fixture(scope="module")
def client():
    return Client()


@pytest.fixture(scope="module")
def boot(client):
    return Bootstrapper(client.params, TINY_N10_DENSE, client.keys)


def _precision(out: np.ndarray, z: np.ndarray) -> tuple[float, float]:
    error = np.maximum(np.abs(out - z), 2.0 ** -60)
    return -math.log2(error.max()), -math.log2(error.mean())


def test_bootstrap_with_a_dense_secret_against_numpy(client, boot):
    z = client.message()
    ct = client.encrypt(z)
    out = boot.bootstrap(ct)
    assert (out.level, out.scale, out.slots) == (TINY_N10_DENSE.output_level, ct.scale, ct.slots)
    worst, mean = _precision(client.encoder.decode(client.decryptor.decrypt(out)), z)
    print(f"TINY_N10_DENSE (h' = {WEIGHT}): min {worst:.2f}, mean {mean:.2f} bits")
    assert worst >= 20 and mean >= 23.5


def test_the_overflow_is_the_ephemeral_secrets(client):
    """Encapsulated, |I| <= K - 1 = 15 (here ~6); ModRaise of the dense secret itself gives sums of ~683 uniforms
    (sigma 7.5), max |I| over 1024 coefficients ~25, past the interval EvalMod approximates."""
    ct = client.encrypt(client.message())
    pair = client.keys.encapsulation_keys("test")
    encapsulated = client.overflow(mod_raise_encapsulated(client.params, ct, pair))
    plain = client.overflow(mod_raise(client.params, ct))
    print(f"max |I|: encapsulated {encapsulated}, plain ModRaise of the dense secret {plain}")
    assert encapsulated <= (WEIGHT + 1) // 2 and encapsulated < TINY_N10_DENSE.k <= plain


def test_keys_that_do_not_fit_are_refused(client):
    p, keys = client.params, client.keys
    galois = [keys.galois_key(k, "t") for k in keys.galois_elements]
    to_sparse, to_dense = keys.encapsulation_keys("t")
    without = rlwe.EvalKeySet(p.params_id, relin=keys.relin_key("t"), galois=galois)
    with pytest.raises(MissingKeyError, match="no dense_to_sparse encapsulation key"):
        Bootstrapper(p, TINY_N10_DENSE, without)
    other = rlwe.gen_encapsulation_keys(client.ctx, client.sk, rlwe.gen_ephemeral_secret(client.ctx, WEIGHT))
    mixed = rlwe.EvalKeySet(p.params_id, relin=keys.relin_key("t"), galois=galois,
                            encapsulation=[to_sparse, other[1]])
    with pytest.raises(ParameterError, match="different ephemeral secrets"):
        Bootstrapper(p, TINY_N10_DENSE, mixed)
    heavier = rlwe.gen_encapsulation_keys(client.ctx, client.sk, rlwe.gen_ephemeral_secret(client.ctx, 2 * WEIGHT))
    wrong_weight = rlwe.EvalKeySet(p.params_id, relin=keys.relin_key("t"), galois=galois, encapsulation=heavier)
    with pytest.raises(ParameterError, match="ephemeral weight of 64"):
        Bootstrapper(p, TINY_N10_DENSE, wrong_weight)
    with pytest.raises(ParameterError, match="expected the dense_to_sparse"):
        mod_raise_encapsulated(p, client.encrypt(client.message()), (to_dense, to_sparse))


def test_the_dense_preset_passes_both_security_checks():
    params = N16_DENSE_FULL.params()  # no allow_insecure: both checks run
    assert params.hamming_weight == 0 and params.log_qp <= 1772
    assert math.log2(params.q_primes[0]) + math.log2(params.p_primes[0]) <= 121
    assert N16_DENSE_FULL.output_level == 16 > N16_H192_FULL.output_level == 9
    literal = N16_DENSE_FULL.literal
    for bad in (dict(ephemeral_weight=16),  # an ephemeral secret sparser than the bound assumes
                dict(literal=dataclasses.replace(literal, log_q=[61] + literal.log_q[1:]),  # q_0 p_0: 122 bits
                     log_message_ratio=None),
                dict(literal=dataclasses.replace(literal, log_q=literal.log_q + [40]))):  # QP past 1772
        with pytest.raises(SecurityError):
            dataclasses.replace(N16_DENSE_FULL, **bad).params()


def test_parameters_check_the_ephemeral_weight():
    for bad in (-1, 1.5, True, (1 << 10) + 1):
        with pytest.raises(ParameterError, match="ephemeral_weight"):
            dataclasses.replace(TINY_N10_DENSE, ephemeral_weight=bad)


def test_overflow_probability_against_independent_computations():
    # two uniforms: a triangular density, P(|S| >= 1/2) = 2 * (1/2) (1/2)^2 = 1/4
    assert overflow_probability(1, 1) == 0.25
    # h + 1 uniforms cannot exceed (h + 1) / 2
    assert overflow_probability(30, 16) == 0.0
    # a K between integers fails from |I| = ceil(K) on: K = 1.5 and K = 2 alike
    assert overflow_probability(8, 1.5) == overflow_probability(8, 2) < overflow_probability(8, 1)
    # a moderate tail against a Monte Carlo estimate (10^6 sums of 33 uniforms; K = 6: |S| >= 5.5, 3.3 sigma)
    rng = np.random.default_rng(7)
    sums = (rng.random((1_000_000, WEIGHT + 1), dtype=np.float32) - 0.5).sum(axis=1)
    sampled = float(np.mean(np.abs(sums) >= 5.5))
    exact = overflow_probability(WEIGHT, 6)
    assert abs(sampled - exact) <= 5 * math.sqrt(exact / 1e6)
    # the normal approximation past the exact range agrees with the exact tail at its edge
    edge = overflow_probability(1023, 32), overflow_probability(1024, 32)
    assert abs(math.log2(edge[0]) - math.log2(edge[1])) < 0.5
    # the presets: 2^-121.7 per coefficient (K = 16, h' = 32) against 2^-49.3 (K = 32, h = 192)
    assert math.log2(N16_DENSE_FULL.failure_probability()[0]) < -120
    assert math.log2(N16_H192_FULL.failure_probability()[0]) > -50


# ---- GPU (for the lead) ----------------------------------------------------------------------------

@pytest.mark.gpu
def test_encapsulated_bootstrap_on_cuda_equals_the_cpu_bit_for_bit_eager_and_graphed():
    seed = bytes(range(32))
    results = []
    for device in ("cpu", "cuda"):
        client = Client(device, seed=seed)
        z = np.linspace(-1, 1, TINY_N10_DENSE.slots) * (1 + 0.5j)
        ct = client.encrypt(z, seed=seed)
        boot = Bootstrapper(client.params, TINY_N10_DENSE, client.keys)
        out = boot.bootstrap(ct)
        results.append(out.data.cpu())
        if device == "cuda":
            graphed = boot.graphed()
            assert torch.equal(graphed.bootstrap(ct).data, out.data)  # captured
            assert torch.equal(graphed.bootstrap(ct).data, out.data)  # replayed
            assert _precision(client.encoder.decode(client.decryptor.decrypt(out)), z)[0] >= 20
    assert torch.equal(*results)


def test_literal_without_encapsulation_is_unchanged():
    """ephemeral_weight defaults to 0: the existing presets keep their ModRaise (and their literal)."""
    assert N16_H192_FULL.ephemeral_weight == 0 and isinstance(N16_H192_FULL.literal, ParamsLiteral)
