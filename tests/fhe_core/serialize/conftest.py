"""Small worlds for the serialization tests: tiny insecure presets, keys, messages, ciphertexts."""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pytest
import torch

from fhe_core import ops, rlwe
from fhe_core.ckks import Encoder, Plaintext
from fhe_core.params import Params, preset


@dataclass
class World:
    params: Params
    ctx: rlwe.RLWEContext
    encoder: Encoder
    sk: rlwe.SecretKey
    pk: rlwe.PublicKey
    keys: rlwe.EvalKeySet
    z: np.ndarray
    pt: Plaintext
    ct: rlwe.Ciphertext

    @property
    def rotate_one(self) -> int:
        return rlwe.galois_element_for_rotation(1, self.params.n)

    def degree_two(self, other: rlwe.Ciphertext) -> rlwe.Ciphertext:
        """The tensor product (c0 d0, c0 d1 + c1 d0, c1 d1) of ct and other, by the elementwise ops."""
        q = self.ctx.q_at(self.ct.level).moduli
        (c0, c1), (d0, d1) = self.ct.data, other.data
        middle = ops.add(ops.mul(c0, d1, q), ops.mul(c1, d0, q), q)
        return rlwe.Ciphertext(data=torch.stack((ops.mul(c0, d0, q), middle, ops.mul(c1, d1, q))),
                               level=self.ct.level, params_id=self.params.params_id)


def make_world(name: str) -> World:
    params = preset(name, allow_insecure=True)
    ctx = rlwe.RLWEContext.from_params(params)
    sk = rlwe.gen_secret_key(ctx)
    galois = [rlwe.galois_element_for_rotation(1, params.n), rlwe.galois_element_for_conjugation(params.n)]
    keys = rlwe.gen_eval_keys(ctx, sk, galois)
    encoder = Encoder(params)
    rng = np.random.default_rng()
    z = rng.uniform(-1, 1, params.slots) + 1j * rng.uniform(-1, 1, params.slots)
    pt = encoder.encode(z)
    ct = rlwe.encrypt_sk(ctx, sk, pt.data, pt.level)
    return World(params, ctx, encoder, sk, rlwe.gen_public_key(ctx, sk), keys, z, pt, ct)


@pytest.fixture(scope="session")
def world() -> World:
    """N = 2^10, L = 3, alpha = 1, dnum = 4."""
    return make_world("N10QP241L3D4Insecure")


@pytest.fixture(scope="session")
def world11() -> World:
    """N = 2^11, L = 4, alpha = 2, dnum = 3 (multi-prime digits, truncated last digit)."""
    return make_world("N11QP342L4D3Insecure")
