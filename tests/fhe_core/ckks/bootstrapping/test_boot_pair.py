"""EvalMod on the real and imaginary parts of a full-slot bootstrap as one batched
CiphertextPair: bit for bit the two separate evaluations (CPU, tiny insecure preset)."""
from __future__ import annotations

import numpy as np
import pytest
import torch

from fhe_core import ckks, rlwe
from fhe_core.ckks.bootstrapping import TINY_N10_FULL, Bootstrapper, EvalModEvaluator, bootstrapping_galois_elements
from fhe_core.ckks.bootstrapping.pair import CiphertextPair, PairEvaluator
from fhe_core.errors import ParameterError
from fhe_reference import fresh_rng


@pytest.fixture(scope="module")
def setup():
    params = TINY_N10_FULL.params(allow_insecure=True)
    ctx = ckks.rlwe_context(params)
    sk = rlwe.gen_secret_key(ctx)
    keys = rlwe.gen_eval_keys(ctx, sk, bootstrapping_galois_elements(params, TINY_N10_FULL))
    boot = Bootstrapper(params, TINY_N10_FULL, keys)
    rng, _ = fresh_rng()
    n = TINY_N10_FULL.slots
    z = rng.uniform(-1, 1, n) + 1j * rng.uniform(-1, 1, n)
    ct = ckks.Encryptor(params, sk).encrypt(ckks.Encoder(params).encode(z, level=0, slots=n))
    return boot, boot.coeffs_to_slots(boot.mod_raise(ct))


def test_the_pair_evaluates_eval_mod_bit_for_bit_as_two_ciphertexts(setup):
    boot, (real, imag) = setup
    parameters = TINY_N10_FULL.eval_mod_parameters(boot.params)
    single = EvalModEvaluator(boot.evaluator, parameters)
    paired = EvalModEvaluator(PairEvaluator(boot.evaluator), parameters).evaluate(CiphertextPair.of(real, imag))
    for got, part in zip(paired.parts(), (real, imag)):
        expected = single.evaluate(part)
        assert (got.level, got.scale, got.slots) == (expected.level, expected.scale, expected.slots)
        assert torch.equal(got.data, expected.data)


def test_pair_operations_match_the_evaluator(setup):
    """Each PairEvaluator operation against the Evaluator's on each ciphertext."""
    boot, (real, imag) = setup
    ev, pev = boot.evaluator, PairEvaluator(boot.evaluator)
    pair = CiphertextPair.of(real, imag)
    q = float(boot.params.q_primes[real.level])
    checks = {
        "add constant": (pev.add(pair, 0.75 - 0.5j), lambda c: ev.add(c, 0.75 - 0.5j)),
        "sub constant": (pev.sub(pair, 3.0), lambda c: ev.sub(c, 3.0)),
        "mul constant": (pev.mul(pair, 0.3, constant_scale=q), lambda c: ev.mul(c, 0.3, constant_scale=q)),
        "rescale": (pev.rescale(pair), ev.rescale),
        "drop_level": (pev.drop_level(pair, real.level - 2), lambda c: ev.drop_level(c, real.level - 2)),
        "tensor": (pev.tensor(pair, pair), lambda c: ev.tensor(c, c)),
        "mul_relin": (pev.mul_relin(pair, pair), lambda c: ev.mul_relin(c, c)),
        "add pair": (pev.add(pair, pair), lambda c: ev.add(c, c)),
    }
    for name, (got, op) in checks.items():
        for part, original in zip(got.parts(), (real, imag)):
            expected = op(original)
            assert (part.level, part.scale, part.degree) == (expected.level, expected.scale, expected.degree), name
            assert torch.equal(part.data, expected.data), name


def test_a_pair_needs_matching_ciphertexts(setup):
    boot, (real, imag) = setup
    with pytest.raises(ParameterError, match="CiphertextPair"):
        CiphertextPair.of(real, boot.evaluator.drop_level(imag, imag.level - 1))
    with pytest.raises(ParameterError, match="CiphertextPair"):
        CiphertextPair.of(real, imag.replace(scale=imag.scale * (1 + 1e-6)))
    pev = PairEvaluator(boot.evaluator)
    with pytest.raises(ParameterError, match="relinearize: expected a degree-2 pair"):
        pev.relinearize(CiphertextPair.of(real, imag))
    assert np.isclose(CiphertextPair.of(real, imag).scale, real.scale)


def test_a_pair_wraps_the_halves_of_one_buffer_without_a_copy(setup):
    """CiphertextPair.of views the buffer whose halves [:, 0] and [:, 1] the two ciphertexts are (in that order,
    every limb); any other two tensors are stacked into a new one. Either way the halves equal the inputs."""
    real, imag = setup[1]
    buffer = CiphertextPair.buffer(real)
    buffer[:, 0].copy_(real.data)
    buffer[:, 1].copy_(imag.data)
    halves = real.replace(data=buffer[:, 0]), imag.replace(data=buffer[:, 1])
    pair = CiphertextPair.of(*halves)
    assert pair.data.data_ptr() == buffer.data_ptr() and pair.data.shape == buffer.shape
    assert torch.equal(pair.data[:, 0], real.data) and torch.equal(pair.data[:, 1], imag.data)
    top = real.level  # one limb dropped from each half: strided views, not the halves of a pair tensor
    dropped = [ct.replace(data=ct.data[:, :top], level=top - 1) for ct in halves]
    for a, b in [halves[::-1], (halves[0], imag), dropped]:
        stacked = CiphertextPair.of(a, b)
        assert stacked.data.data_ptr() != buffer.data_ptr()
        assert torch.equal(stacked.data[:, 0], a.data) and torch.equal(stacked.data[:, 1], b.data)
