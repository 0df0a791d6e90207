"""The evaluator's fused passes (KernelPlan.fused_circuit): Evaluator.linear_combination against the products and
additions it replaces, and the fused rescale against the composed one (the reference plan's), residue for residue and
scale for scale (CPU; the gpu marker repeats them on CUDA)."""
import numpy as np
import pytest
import torch

from fhe_core import ckks, rlwe
from fhe_core.ckks import Decryptor, Encoder, Encryptor, Evaluator
from fhe_core.errors import LevelMismatchError, ParameterError
from fhe_core.params import preset
from fhe_reference import DEVICES, fresh_rng

PRESET = "N12QP483L6D3Insecure"


class Setup:
    def __init__(self, device: str):
        self.params = params = preset(PRESET, allow_insecure=True, device=device)
        self.rng, _ = fresh_rng()
        ctx = ckks.rlwe_context(params)
        sk = rlwe.gen_secret_key(ctx)
        self.keys = rlwe.gen_eval_keys(ctx, sk, [])
        self.evaluator = Evaluator(params, self.keys)
        self.encoder, self.encryptor, self.decryptor = Encoder(params), Encryptor(params, sk), Decryptor(params, sk)

    def encrypt(self, level: int):
        z = self.rng.uniform(-1, 1, self.params.slots) + 1j * self.rng.uniform(-1, 1, self.params.slots)
        return z, self.encryptor.encrypt(self.encoder.encode(z, level=level))


@pytest.fixture(scope="module", params=DEVICES)
def s(request) -> Setup:
    return Setup(request.param)


def _composed(ev, terms, level, constant):
    """What linear_combination replaces: level drops, constant products, additions and subtractions."""
    out = None
    for ct, value, constant_scale, sign in terms:
        if ct.level > level:
            ct = ev.drop_level(ct, level)
        term = ev.mul(ct, value, constant_scale=constant_scale)
        out = term if out is None else (ev.add(out, term) if sign > 0 else ev.sub(out, term))
    if constant is not None:
        out = ev.add(out, constant[0]) if constant[1] > 0 else ev.sub(out, constant[0])
    return out


def test_linear_combination_equals_products_and_additions(s):
    ev = s.evaluator
    (z1, a), (z2, b), (z3, c) = s.encrypt(5), s.encrypt(4), s.encrypt(6)
    target = a.scale * float(s.params.q_primes[3])  # every term at this scale, at level 3 (b, c read in place)
    terms = [(a, 0.75 - 0.5j, target / a.scale, 1), (b, 2.0, target / b.scale, -1), (c, -1.25, target / c.scale, 1)]
    cases = [(terms, None), (terms, (0.3 + 0.1j, 1)), (terms, (1.0, -1)), ([(b, 2, 1.0, 1)], (1.0, -1)),
             ([(b, 2, 1.0, 1), (c, 1.0, b.scale / c.scale, -1)], None)]
    for case_terms, constant in cases:
        level = min(3, min(t[0].level for t in case_terms))
        fused = ev.linear_combination(case_terms, level, constant)
        composed = _composed(ev, case_terms, level, constant)
        assert torch.equal(fused.data, composed.data)
        assert (fused.level, fused.scale, fused.slots) == (composed.level, composed.scale, composed.slots)
    out = s.encoder.decode(s.decryptor.decrypt(ev.rescale(ev.linear_combination(terms, 3, (0.3 + 0.1j, 1)))))
    assert np.abs(out - ((0.75 - 0.5j) * z1 - 2 * z2 - 1.25 * z3 + 0.3 + 0.1j)).max() < 2.0 ** -20


def test_linear_combination_checks_its_terms(s):
    ev = s.evaluator
    _, a = s.encrypt(3)
    with pytest.raises(ParameterError, match="the first \\+1"):
        ev.linear_combination([(a, 1.0, 2.0 ** 20, -1)], 3)
    with pytest.raises(ParameterError, match="1 to 16 terms"):
        ev.linear_combination([(a, 1.0, 2.0 ** 20, 1)] * 17, 3)
    with pytest.raises(LevelMismatchError, match="target level"):
        ev.linear_combination([(a, 1.0, 2.0 ** 20, 1)], 4)
    with pytest.raises(ckks.ScaleMismatchError, match="linear_combination: scales differ"):
        ev.linear_combination([(a, 1.0, 2.0 ** 20, 1), (a, 1.0, 2.0 ** 21, 1)], 3)


@pytest.mark.parametrize("degree", [1, 2])
def test_fused_rescale_equals_the_composed_one(s, degree):
    ev = s.evaluator
    reference = Evaluator(s.params, s.keys, plan=ev.plan.replace(fused_circuit=False))
    assert ev.plan.fused_circuit
    _, a = s.encrypt(4)
    ct = ev.tensor(a, a) if degree == 2 else a
    composed = reference.rescale(ct)
    fused = ev.rescale(ct)
    assert torch.equal(fused.data, composed.data) and fused.data.is_contiguous()
    assert (fused.level, fused.scale) == (composed.level, composed.scale)
