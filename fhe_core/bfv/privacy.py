"""Circuit privacy for BFV results: noise flooding (re-randomization with a statistical margin).

A result ciphertext c = (c0, c1) that a server computed from a client's inputs and its own private
plaintexts carries more than its message: c1 is a fixed function of the inputs' c1 and of the
server's plaintexts (a client that knows its inputs could test a guess of them), and the noise e_c
of c0 + c1 s = Delta m + e_c depends on the circuit. ``flood`` returns

    c' = c + Enc_pk(0) + (E, 0),     E uniform on the integers [-(P-1)/2, (P-1)/2] per coefficient

* c1' = c1 + (a u + e1) is pseudorandom under RLWE (u is a fresh ternary secret of the server),
  whatever c1 was;
* the noise becomes e_c + e_enc + E, with e_enc the fresh encryption's (independent of the circuit).
  For one coefficient the statistical distance between e_c + E and E is |e_c| / P, so over the N
  coefficients it is at most N |e_c|_inf / P.

With budget b (bits, |v_c| <= 2^-(b+1) for the invariant noise v_c = t e_c / Q) and P about
Q / (t 2^noise_bits), the distance is at most 2^(log2 N + noise_bits - b): it is below
2^-statistical_bits when

    b >= statistical_bits + log2 N + noise_bits + 1            (``flood_requirement``; the 1 bit
                                                                 covers P's rounding to primes)

so a plan that leaves this budget (after its own margin) gets a result whose distribution depends,
up to 2^-40, only on the message: the flooded noise sits at the *flooding level* |v| <= 2^-(noise_bits+1)
(about noise_bits bits of budget left, whatever the circuit), which a later modulus switch keeps
(its rounding is a public function of c'). Semi-honest model: the public key is honestly generated.

**Sampling E exactly.** E = X - (P-1)/2 with X uniform on [0, P), P = p_0 p_1 ... p_{m-1} a product of
primes of 30 to 60 bits, built in mixed radix X = U_0 + U_1 p_0 + U_2 p_0 p_1 + ... from independent
digits U_j uniform in [0, p_j) (the kernels' ChaCha20 sampler; its 128-bit reduction is 2^-67 from
uniform per draw). Every U_j is a canonical integer < 2^61, so X mod q_i = sum_j (U_j mod q_i)
(p_0 ... p_{j-1} mod q_i) is exact: no basis conversion near P/2, on the device, m small passes.
"""
from __future__ import annotations

import functools
import math

import torch

from fhe_core import ops, rlwe
from fhe_core.bfv.context import BFVContext
from fhe_core.errors import ParameterError
from fhe_core.ring import generate_primes, shoup_constants, words_tensor
from fhe_core.ring.basis import modulus_table
from fhe_core.rlwe import Ciphertext, PublicKey
from fhe_core.rlwe.checks import check_ciphertext, check_key, mark_canonical
from fhe_core.rlwe.sampling import Domain, nonce, seeds_for

STATISTICAL_BITS = 40
FLOOD_NOISE_BITS = 4
_MAX_RADIX_BITS, _MIN_RADIX_BITS = 60, 30


def flood_requirement(n: int, *, statistical_bits: int = STATISTICAL_BITS, noise_bits: int = FLOOD_NOISE_BITS) -> float:
    """Bits of noise budget a ciphertext must have left for :func:`flood` to hide its noise within
    2^-statistical_bits (see the module docstring)."""
    return statistical_bits + math.log2(n) + noise_bits + 1


def flood_bits(ctx: BFVContext, level: int, noise_bits: int = FLOOD_NOISE_BITS) -> int:
    """log2 of the flooding range P (rounded down): floor(log2(Q_l / t)) - noise_bits."""
    return math.floor(math.log2(ctx.q_modulus(level) / ctx.t)) - noise_bits


@functools.lru_cache(maxsize=64)
def _radices(n: int, bits: int, exclude: tuple[int, ...]) -> tuple[int, ...]:
    """Distinct primes of 30 to 60 bits whose product has ``bits`` bits (up to a hair below)."""
    count = math.ceil(bits / _MAX_RADIX_BITS)
    sizes = [bits // count + (i < bits % count) for i in range(count)]
    return tuple(generate_primes(sizes, n, exclude=exclude))


@functools.lru_cache(maxsize=64)
def _flood_constants(q_primes: tuple[int, ...], radices: tuple[int, ...], device: str):
    """The device constants of :func:`flood_polynomial` for Q_l's primes and the radices, made once (each is a
    host-to-device copy, which on a GPU waits for the stream): (the primes as a ``[l+1, 1]`` column, per radix its
    modulus table and the weight p_0 ... p_{j-1} mod q_i as Shoup constants, the centre -(P - 1)/2 mod q_i)."""
    column = words_tensor(q_primes, device).reshape(-1, 1)
    digits, weight = [], 1
    for radix in radices:
        digits.append((modulus_table([radix]).to(device), shoup_constants([weight] * len(q_primes), q_primes, device)))
        weight *= radix
    centre = words_tensor([(-((weight - 1) // 2)) % p for p in q_primes], device).reshape(-1, 1)
    return column, tuple(digits), centre


def flood_polynomial(ctx: BFVContext, level: int, seed: bytes, noise_bits: int = FLOOD_NOISE_BITS) -> torch.Tensor:
    """E (see the module docstring) as ``[l+1, N]`` int64 residues over Q_l, NTT domain. ``seed``:
    the secret seed of one flooding (never reused)."""
    bits = flood_bits(ctx, level, noise_bits)
    if bits < _MIN_RADIX_BITS:
        raise ParameterError(f"flood: Q_{level} / t leaves {bits} bits for the flooding noise; "
                             f"need >= {_MIN_RADIX_BITS}")
    q = ctx.rlwe.q_at(level)
    taken = tuple(sorted(set(ctx.params.q_primes) | set(ctx.params.p_primes) | {ctx.t}))
    primes_column, digits, centre = _flood_constants(q.primes, _radices(ctx.n, bits, taken), str(ctx.device))
    acc = torch.zeros((level + 1, ctx.n), dtype=torch.int64, device=ctx.device)
    for j, (radix_modulus, (consts, shoup)) in enumerate(digits):
        digit = ops.sample_uniform(radix_modulus, ctx.n, seed, nonce(Domain.FLOOD, j))
        ops.add(acc, ops.mul_const(torch.remainder(digit, primes_column), consts, shoup, q.moduli), q.moduli, out=acc)
    return q.ntt(torch.remainder(acc + centre, primes_column))  # acc, centre < q_i < 2^62: no overflow


def flood(ctx: BFVContext, ct: Ciphertext, public_key: PublicKey, *, noise_bits: int = FLOOD_NOISE_BITS,
          seed: bytes | None = None) -> Ciphertext:
    """c + Enc_pk(0) + (E, 0) at the ciphertext's level (degree 1): the same message, a pseudorandom
    c1 and the flooding-level noise (module docstring; the caller checks ``flood_requirement``).
    ``seed``: tests only (reproducible floods)."""
    ctx = BFVContext.check(ctx, "flood")
    check_key(public_key, (PublicKey,), ctx.params_id, "flood")
    level = check_ciphertext(ctx.rlwe, ct, "flood", degree=1)
    seeds = seeds_for(ctx.rlwe, seed, "flood")
    fresh = rlwe.encrypt_zero_pk(ctx.rlwe, public_key, level, seed=seeds.uniform if seed is not None else None)
    moduli = ctx.rlwe.q_at(level).moduli
    data = ops.add(ct.data, fresh.data, moduli)
    ops.add(data[0], flood_polynomial(ctx, level, seeds.secret, noise_bits), moduli, out=data[0])
    return mark_canonical(ct.replace(data=data))
