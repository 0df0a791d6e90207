"""Named parameter sets, named by their content: N{log_n}QP{log2 QP}L{levels}D{dnum}[H{h}][Insecure].

Every set uses 40-bit scaling primes (scale 2^40: about 20 bits of precision after a
multiplication at N = 2^16) and a first prime 16-20 bits larger, which bounds the magnitude of
decrypted level-0 messages (|m| < 2^(log q_0 - 41)). The special primes satisfy HK20: their
product P exceeds the product of each key-switching digit of alpha = len(log_p) q-primes, so
key switching adds little noise. The secure sets meet 128 bits by ``security.py``; the
``Insecure`` ones are tiny rings for tests and need ``allow_insecure=True``.
"""
from __future__ import annotations

import copy

import torch

from fhe_core.errors import ParameterError
from fhe_core.params.literal import ParamsLiteral
from fhe_core.params.params import Params
from fhe_core.params.security import meets_128_bits
from fhe_core.ring.basis import resolve_device

PRESETS: dict[str, ParamsLiteral] = {
    # Leveled N=2^14: 8 levels of 40 bits above a 56-bit q_0 (16 bits for the integer part
    # of a level-0 message), one 61-bit special prime (alpha = 1, so dnum = 9 digits of one
    # prime, each smaller than P). log2 QP = 437 <= 438.
    "N14QP437L8D9": ParamsLiteral(log_n=14, log_q=[56] + [40] * 8, log_p=[61], log_default_scale=40),
    # Leveled N=2^15: 16 levels of 40 bits above a 60-bit q_0, three 60-bit special primes
    # (alpha = 3, dnum = 6; a digit is at most 60+40+40 = 140 bits < P = 180 bits).
    # log2 QP = 880 <= 881.
    "N15QP880L16D6": ParamsLiteral(log_n=15, log_q=[60] + [40] * 16, log_p=[60] * 3, log_default_scale=40),
    # The benchmark set (docs/ARCHITECTURE.md, "Tests and benchmarks"), N=2^16, dnum=3: 30 levels of 40 bits above a
    # 60-bit q_0 (31 primes), alpha = ceil(31/3) = 11 special primes of 46 bits: P = 2^506 exceeds
    # the largest digit (60 + 10*40 = 460 bits) and log2 QP = 1260 + 506 = 1766 <= 1772.
    "N16QP1766L30D3": ParamsLiteral(log_n=16, log_q=[60] + [40] * 30, log_p=[46] * 11,
                                    log_default_scale=40, dnum=3),
    # Tiny insecure rings for tests: the same 60/40-bit chain, short. N=2^10 with one special
    # prime (dnum = 4); N=2^11 and N=2^12 with dnum = 3, to exercise multi-prime digits.
    "N10QP241L3D4Insecure": ParamsLiteral(log_n=10, log_q=[60, 40, 40, 40], log_p=[61], log_default_scale=40),
    "N11QP342L4D3Insecure": ParamsLiteral(log_n=11, log_q=[60] + [40] * 4, log_p=[61] * 2,
                                          log_default_scale=40, dnum=3),
    "N12QP483L6D3Insecure": ParamsLiteral(log_n=12, log_q=[60] + [40] * 6, log_p=[61] * 3,
                                          log_default_scale=40, dnum=3),
}


# BFV sets, named BFV<CKKS-style name>T<bits of t>. The secure ones are SEAL's 128-bit defaults
# (CoeffModulus::BFVDefault: N=2^13 {43,43,44,44,44}, 2^14 {48,48,48,49*6}, 2^15 {55*15,56}),
# with SEAL's split: the last prime is the single special prime of key switching (alpha = 1,
# dnum = L + 1; P is about the size of each q prime, so key switching adds about
# dnum * eta * N, far below the noise budget). The primes are the largest of each size that are
# 1 mod 2N, as SEAL takes them. t = 65537 = 2^16 + 1 is prime and 1 mod 2^17 (batching up to
# N = 2^16). The Insecure sets are tiny rings for tests; one uses a 20-bit t = 3 * 2^18 + 1.
BFV_PRESETS: dict[str, ParamsLiteral] = {
    "BFVN13QP218L3D4T17": ParamsLiteral(log_n=13, log_q=[43, 43, 44, 44], log_p=[44], log_default_scale=0,
                                        scheme="bfv", plaintext_modulus=65537),
    "BFVN14QP438L7D8T17": ParamsLiteral(log_n=14, log_q=[48] * 3 + [49] * 5, log_p=[49], log_default_scale=0,
                                        scheme="bfv", plaintext_modulus=65537),
    "BFVN15QP881L14D15T17": ParamsLiteral(log_n=15, log_q=[55] * 15, log_p=[56],
                                          log_default_scale=0, scheme="bfv", plaintext_modulus=65537),
    # Tree-ensemble inference (apps.xgboost): the same chains with the 20-bit prime
    # t = 786433 = 3 * 2^18 + 1 (1 mod 2^18, batching up to N = 2^17), so exact fixed-point class
    # scores up to (t - 1)/2 = 393,216 fit (the iDASH 2020 model's worst case is 228,995).
    "BFVN13QP218L3D4T20": ParamsLiteral(log_n=13, log_q=[43, 43, 44, 44], log_p=[44], log_default_scale=0,
                                        scheme="bfv", plaintext_modulus=786433),
    "BFVN14QP438L7D8T20": ParamsLiteral(log_n=14, log_q=[48] * 3 + [49] * 5, log_p=[49], log_default_scale=0,
                                        scheme="bfv", plaintext_modulus=786433),
    # Model-private tree inference (apps.xgboost.private_plan) needs ~250-320 bits of circuit plus 55 of
    # flooding: tiny rings with eight 60-bit primes and three special primes (dnum = 3).
    "BFVN10QP660L7D3T20Insecure": ParamsLiteral(log_n=10, log_q=[60] * 8, log_p=[60] * 3, log_default_scale=0,
                                                scheme="bfv", plaintext_modulus=786433, dnum=3),
    "BFVN12QP660L7D3T20Insecure": ParamsLiteral(log_n=12, log_q=[60] * 8, log_p=[60] * 3, log_default_scale=0,
                                                scheme="bfv", plaintext_modulus=786433, dnum=3),
    "BFVN10QP205L2D3T17Insecure": ParamsLiteral(log_n=10, log_q=[50] * 3, log_p=[55], log_default_scale=0,
                                                scheme="bfv", plaintext_modulus=65537),
    "BFVN11QP335L4D5T20Insecure": ParamsLiteral(log_n=11, log_q=[55] * 5, log_p=[60], log_default_scale=0,
                                                scheme="bfv", plaintext_modulus=786433),
}


def preset_literal(name: str) -> ParamsLiteral:
    """A fresh copy of the named preset's literal, CKKS (PRESETS) or BFV (BFV_PRESETS); both
    dicts should be treated as read-only."""
    for table in (PRESETS, BFV_PRESETS):
        if name in table:
            return copy.deepcopy(table[name])
    raise ParameterError(f"unknown preset {name!r}; known: {sorted(PRESETS) + sorted(BFV_PRESETS)}")


def preset(name: str, *, allow_insecure: bool = False, device: torch.device | str = "cpu") -> Params:
    """``Params.from_literal(preset_literal(name), ...)``: the ``Insecure`` presets need
    ``allow_insecure=True``."""
    literal = preset_literal(name)
    return Params.from_literal(literal, allow_insecure=allow_insecure, device=resolve_device(device, "preset"))


def content_name(params: Params) -> str:
    """The preset naming rule applied to ``params`` (tests check every preset's name)."""
    name = f"N{params.log_n}QP{round(params.log_qp)}L{params.max_level}D{params.dnum}"
    if params.hamming_weight:
        name += f"H{params.hamming_weight}"
    if params.scheme == "bfv":
        name = f"BFV{name}T{params.plaintext_modulus.bit_length()}"
    secure = meets_128_bits(params.log_n, params.log_qp, params.hamming_weight, params.error_eta)
    return name + ("" if secure else "Insecure")


__all__ = ["PRESETS", "BFV_PRESETS", "preset", "preset_literal", "content_name"]
