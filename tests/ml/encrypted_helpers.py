"""A tiny CKKS client + evaluator for the tests of the encrypted building blocks in ml/
(N = 2^11, 1024 slots, 40-bit levels, allow_insecure)."""
from __future__ import annotations

import numpy as np

from fhe_core import ckks, rlwe
from fhe_core.params import preset

PRESET = "N11QP342L4D3Insecure"  # N = 2^11, L = 4, scale 2^40


class TinyCkks:
    """Secret key, keys for ``steps`` (and relinearization), encoder/encryptor/decryptor and an
    evaluator that holds the evaluation keys only."""

    def __init__(self, steps=(), device: str = "cpu"):
        self.params = preset(PRESET, allow_insecure=True, device=device)
        ctx = ckks.rlwe_context(self.params)
        self.sk = rlwe.gen_secret_key(ctx)
        self.keys = rlwe.gen_eval_keys(ctx, self.sk, ckks.galois_elements(self.params.n, steps))
        self.encoder = ckks.Encoder(self.params)
        self.encryptor, self.decryptor = ckks.Encryptor(self.params, self.sk), ckks.Decryptor(self.params, self.sk)
        self.evaluator = ckks.Evaluator(self.params, self.keys)

    @property
    def slots(self) -> int:
        return self.params.slots

    def encrypt(self, values, level: int | None = None):
        return self.encryptor.encrypt(self.encoder.encode(np.asarray(values), level=level))

    def decrypt(self, ct) -> np.ndarray:
        return self.encoder.decode(self.decryptor.decrypt(ct))
