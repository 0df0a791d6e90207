"""Shared helpers of the bootstrapping tests: tiny insecure parameter literals and exact
secret-key references in Python integers (no fhe_core arithmetic in the references)."""
from __future__ import annotations

import numpy as np
import torch

from fhe_core import ckks, rlwe
from fhe_core.ckks import Decryptor, Encoder, Encryptor
from fhe_core.params import Params, ParamsLiteral
from fhe_reference import crt, fresh_rng

# N = 2^10, L = 3, sparse secret h = 32: ModRaise and SubSum (the q_0 I term needs the room of
# three 45-bit primes: |q_0 I| < 2^60 * 2^4)
RAISE = ParamsLiteral(log_n=10, log_q=[60] + [45] * 3, log_p=[61, 61], log_default_scale=45, hamming_weight=32)


def centred(x: int, q: int) -> int:
    x %= q
    return x - q if x > q // 2 else x


class SecretKeySetup:
    """Client side with the secret key: the test double that decrypts to exact integers."""

    def __init__(self, literal: ParamsLiteral, galois_elements=(), *, relin: bool = False):
        self.params = params = Params.from_literal(literal, allow_insecure=True)
        self.rng, _ = fresh_rng()
        self.ctx = ctx = ckks.rlwe_context(params)
        self.sk = rlwe.gen_secret_key(ctx)
        self.keys = rlwe.gen_eval_keys(ctx, self.sk, list(galois_elements), relin=relin)
        self.encoder, self.encryptor = Encoder(params), Encryptor(params, self.sk)
        self.decryptor = Decryptor(params, self.sk)
        self.evaluator = ckks.Evaluator(params, self.keys)

    def encrypt(self, z, *, level=None, slots=None, scale=None):
        return self.encryptor.encrypt(self.encoder.encode(z, level=level, slots=slots, scale=scale))

    def decrypt(self, ct) -> np.ndarray:
        return self.encoder.decode(self.decryptor.decrypt(ct))

    def integers(self, data: torch.Tensor, level: int) -> list[int]:
        """Centred integer coefficients of an ``[l+1, N]`` NTT-domain polynomial over Q_level
        (INTT, then CRT in Python integers)."""
        basis = self.params.q_basis(level)
        coeffs = basis.intt(data.contiguous()).cpu().tolist()
        q = basis.modulus
        return [centred(crt([row[k] for row in coeffs], list(basis.primes)), q) for k in range(self.params.n)]

    def decrypt_integers(self, ct) -> list[int]:
        """c_0 + c_1 s centred mod Q_level, as Python integers."""
        return self.integers(self.decryptor.decrypt(ct).data, ct.level)

    def secret_integers(self) -> list[int]:
        """The ternary secret's coefficients."""
        alpha = self.params.alpha
        return self.integers(self.sk.data[alpha:alpha + 1], 0)
