"""Shared pieces of the BFV tests: small contexts with their keys, random messages, fixed seeds.

Expected values are computed with numpy arithmetic mod t (slot-wise) or Python integers
(``fhe_reference``); nothing from fhe_core.bfv builds an expected value.
"""
from __future__ import annotations

import dataclasses
import functools
from dataclasses import dataclass

import numpy as np

from fhe_core import bfv, rlwe
from fhe_core.params import Params, preset_literal

SMALL = "BFVN10QP205L2D3T17Insecure"   # N = 2^10, t = 65537, three 50-bit primes
WIDE = "BFVN11QP335L4D5T20Insecure"    # N = 2^11, t = 786433 (20 bits), five 55-bit primes
TEST_PRESETS = [SMALL, WIDE]
ROTATIONS = (1, 3, -1, -7)
METHODS = ("hybrid", "linear")  # key switching


def fixed_seed(label: str) -> bytes:
    """A fixed 32-byte seed for determinism tests (tests only)."""
    return label.encode().ljust(32, b"\0")[:32]


@dataclass(frozen=True, eq=False)
class Session:
    """Everything one test needs for one parameter set: context, encoder, client and server sides."""

    ctx: bfv.BFVContext
    encoder: bfv.BatchEncoder
    encryptor: bfv.Encryptor         # public key
    sk_encryptor: bfv.Encryptor      # secret key
    decryptor: bfv.Decryptor
    evaluator: bfv.Evaluator

    @property
    def t(self) -> int:
        return self.ctx.t

    @property
    def n(self) -> int:
        return self.ctx.n

    def encrypt(self, values, *, level=None, secret=False):
        enc = self.sk_encryptor if secret else self.encryptor
        return enc.encrypt(self.encoder.encode(values), level=level)

    def decrypt(self, ct) -> np.ndarray:
        return self.encoder.decode(self.decryptor.decrypt(ct))

    def budget(self, ct) -> float:
        return self.decryptor.invariant_noise_budget(ct)


@functools.cache
def session(name: str, device: str = "cpu", seed_label: str | None = None, key_switching: str = "hybrid") -> Session:
    """A session with a relinearization key and Galois keys for ROTATIONS and the column swap, switching keys by
    ``key_switching``. With ``seed_label`` every key comes from fixed seeds (determinism tests only)."""
    literal = dataclasses.replace(preset_literal(name), key_switching=key_switching)
    ctx = bfv.BFVContext(Params.from_literal(literal, allow_insecure=True, device=device))
    seed = (lambda part: fixed_seed(f"{seed_label}/{part}")) if seed_label else (lambda part: None)
    sk = rlwe.gen_secret_key(ctx.rlwe, seed=seed("sk"))
    pk = rlwe.gen_public_key(ctx.rlwe, sk, seed=seed("pk"))
    keys = rlwe.gen_eval_keys(ctx.rlwe, sk, bfv.galois_elements(ctx.n, ROTATIONS, column_swap=True),
                              seed=seed("evk"))
    return Session(ctx, bfv.BatchEncoder(ctx), bfv.Encryptor(ctx, pk), bfv.Encryptor(ctx, sk),
                   bfv.Decryptor(ctx, sk), bfv.Evaluator(ctx, keys))


def random_values(rng: np.random.Generator, s: Session, *, signed: bool = False) -> np.ndarray:
    """N values uniform mod t, as [0, t) or centred in [-(t-1)/2, (t-1)/2]."""
    if signed:
        half = (s.t - 1) // 2
        return rng.integers(-half, half + 1, size=s.n, dtype=np.int64)
    return rng.integers(0, s.t, size=s.n, dtype=np.int64)


def mod_t(values: np.ndarray, t: int) -> np.ndarray:
    """numpy reference: values reduced to [0, t) (int64; inputs below 2^62 in magnitude)."""
    return np.mod(values, t)


def mul_mod_t(a: np.ndarray, b: np.ndarray, t: int) -> np.ndarray:
    """Slot-wise a * b mod t without int64 overflow (t < 2^31 here, so the products fit)."""
    assert t < 1 << 31
    return np.mod(np.mod(a, t) * np.mod(b, t), t)
