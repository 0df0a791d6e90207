"""Seeds and nonces: where every random polynomial of the RLWE layer comes from.

Every key and every encryption draws its own 32-byte master seed from ``secrets.token_bytes``.
Two seeds are derived from it with BLAKE2b (keyed by the master seed, personalised):

    uniform seed   the public half: the uniform ``a`` polynomials. It may be stored with the
                   object (a key is then regenerable from (uniform seed, nonce): compression).
    secret seed    errors, ternary secrets and the ephemeral ``u`` of public-key encryption.
                   Never stored: knowing it would reveal the errors and thus the secret.

The ChaCha20 stream of a sampled polynomial is keyed by one of these seeds and selected by a
64-bit nonce laid out as ``(domain << 32) | index``:

    domain          seed     index                      polynomial
    SECRET_KEY      secret   0                          the secret s (ternary)
    KEY_UNIFORM     uniform  0 (public key) / digit j   a of the public key / of switching-key digit j
    KEY_ERROR       secret   0 (public key) / digit j   e of the public key / of switching-key digit j
    ENC_UNIFORM     uniform  0                          a of a secret-key encryption
    ENC_ERROR       secret   0, 1                       e (sk encryption); e0, e1 (pk encryption)
    ENC_EPHEMERAL   secret   0                          u of a public-key encryption
    FLOOD           secret   digit j                    the j-th mixed-radix digit of a flooding
                                                        polynomial (``bfv.flood``)

Within one object the (domain, index) pairs are distinct, and distinct objects have distinct
master seeds (2^-256 collision chance), so no (seed, nonce) pair is ever used twice. A fixed
master seed may be passed through the ``seed=`` arguments **for tests only**: the same seed
then reproduces the same object (on CPU and CUDA alike); the domains still keep the streams of
different object kinds apart if a test reuses one seed for, say, a key and an encryption.

Fixed seeds and security: a fixed seed makes the secret key (or the encryption) reproducible by
anyone who knows the seed, so contexts that meet 128-bit security refuse it (SecurityError,
:func:`seeds_for`); tiny insecure test rings take it freely. A test suite that needs reproducible
objects on a secure preset opts in explicitly by setting the environment variable
``FHE_CORE_TEST_SEEDS=1`` (e.g. ``monkeypatch.setenv`` in the test that needs it).
"""
from __future__ import annotations

import enum
import hashlib
import os
import secrets
from dataclasses import dataclass

import torch

from fhe_core import ops
from fhe_core.errors import ParameterError, SecurityError
from fhe_core.ring import RNSBasis

SEED_BYTES = 32
TEST_SEEDS_ENV = "FHE_CORE_TEST_SEEDS"  # "1": fixed seeds accepted on 128-bit parameters too (tests)


class Domain(enum.IntEnum):
    """High 32 bits of a nonce: which kind of polynomial a stream produces."""

    SECRET_KEY = 1
    KEY_UNIFORM = 2
    KEY_ERROR = 3
    ENC_UNIFORM = 4
    ENC_ERROR = 5
    ENC_EPHEMERAL = 6
    FLOOD = 7


def nonce(domain: Domain, index: int) -> int:
    """The 64-bit nonce ``(domain << 32) | index`` (index < 2^32)."""
    if not 0 <= index < 1 << 32:
        raise ParameterError(f"nonce index must be in [0, 2^32), got {index}")
    return (int(domain) << 32) | index


@dataclass(frozen=True, repr=False)
class Seeds:
    """The master seed of one object and the two seeds derived from it (see the module doc)."""

    master: bytes
    uniform: bytes
    secret: bytes

    def __repr__(self) -> str:  # never print seeds
        return "Seeds(<hidden>)"


def _derive(master: bytes, label: bytes) -> bytes:
    return hashlib.blake2b(label, key=master, digest_size=SEED_BYTES, person=b"fhe-rlwe-seed").digest()


def fresh_seeds(seed: bytes | None = None) -> Seeds:
    """Seeds from a new OS-random master seed; ``seed`` (32 bytes) fixes the master: tests only."""
    if seed is None:
        master = secrets.token_bytes(SEED_BYTES)
    elif isinstance(seed, (bytes, bytearray)) and len(seed) == SEED_BYTES:
        master = bytes(seed)
    else:
        raise ParameterError(f"a seed must be {SEED_BYTES} bytes, got {type(seed).__name__}")
    return Seeds(master, _derive(master, b"uniform"), _derive(master, b"secret"))


def seeds_for(ctx, seed: bytes | None, op: str) -> Seeds:
    """:func:`fresh_seeds` for an object of ``ctx`` (an RLWEContext); a fixed ``seed`` on a context
    that meets 128-bit security is a SecurityError naming ``op`` unless ``FHE_CORE_TEST_SEEDS=1``."""
    if seed is not None and ctx.meets_128_bits and os.environ.get(TEST_SEEDS_ENV) != "1":
        raise SecurityError(f"{op}: seed= fixes the randomness (reproducible by anyone who knows the seed) and is "
                            f"refused for 128-bit parameters; leave it out (OS randomness), or set "
                            f"{TEST_SEEDS_ENV}=1 in a test that needs reproducible objects on a secure preset")
    return fresh_seeds(seed)


def sub_seed(seed: bytes | None, label: str) -> bytes | None:
    """A distinct test seed per sub-object (e.g. one per Galois key) derived from one test seed;
    None stays None (each sub-object then draws its own OS-random seed)."""
    if seed is None:
        return None
    return hashlib.blake2b(label.encode(), key=bytes(seed), digest_size=SEED_BYTES,
                           person=b"fhe-rlwe-sub").digest()


# ---- samplers: one batched op each, NTT domain out ------------------------------------------

def uniform_ntt(basis: RNSBasis, seed: bytes, nonce_value: int) -> torch.Tensor:
    """``[l, N]`` uniform residues, read directly as NTT-domain values (uniform either way)."""
    return ops.sample_uniform(basis.moduli, basis.n, seed, nonce_value)


def error_ntt(basis: RNSBasis, seed: bytes, nonce_value: int, eta: int) -> torch.Tensor:
    """``[l, N]`` NTT domain: a centered-binomial error polynomial (variance eta/2)."""
    return basis.ntt(ops.sample_cbd(basis.moduli, basis.n, seed, nonce_value, eta))


def ternary_ntt(basis: RNSBasis, seed: bytes, nonce_value: int, hamming_weight: int = 0) -> torch.Tensor:
    """``[l, N]`` NTT domain: a ternary polynomial (exactly h nonzeros if h > 0)."""
    return basis.ntt(ops.sample_ternary(basis.moduli, basis.n, seed, nonce_value, hamming_weight))
