"""The BFV evaluator: arithmetic on ciphertexts, relinearization, rotations, modulus switching.

Ciphertexts are :class:`fhe_core.rlwe.Ciphertext` objects of a :class:`BFVContext`:
``[d+1, l+1, N]`` int64, NTT domain over Q_l, decrypting (invariant noise v) to
t/Q_l (c0 + c1 s + ... + c_d s^d) = m + v (mod t). No operation here consumes a level except
:meth:`Evaluator.mod_switch_to_next`; noise growth is stated per operation (invariant noise v,
|.| the infinity norm; the budget is -log2(2|v|), see :mod:`fhe_core.bfv.encryption`).

The evaluator holds public data only: the context and an optional :class:`rlwe.EvalKeySet`
(relinearization and Galois keys), never a secret key. It holds nothing mutable besides the
context's table caches.
"""
from __future__ import annotations

import functools

import torch

from fhe_core import ops, rlwe
from fhe_core.bfv import behz
from fhe_core.bfv.context import BFVContext
from fhe_core.bfv.encoder import Plaintext
from fhe_core.bfv.encryption import check_plaintext, plain_operand
from fhe_core.bfv.graphed import GraphedEvaluator
from fhe_core.errors import LevelMismatchError, MissingKeyError, ParameterError, ParamsMismatchError
from fhe_core.ring import shoup_constants
from fhe_core.rlwe import Ciphertext, EvalKeySet
from fhe_core.rlwe.checks import canonical_results, check_canonical, check_ciphertext, check_same_level
from fhe_core.rlwe.keys import check_switching_key
from fhe_core.rlwe import switching


def galois_elements(n: int, row_rotations=(), *, column_swap: bool = False) -> list[int]:
    """The Galois elements (keys to generate) for the given row rotations (5^r mod 2N) and,
    if asked, the column swap (2N - 1)."""
    elements = [rlwe.galois_element_for_rotation(r, n) for r in row_rotations]
    if column_swap:
        elements.append(rlwe.galois_element_for_conjugation(n))
    return list(dict.fromkeys(elements))


@functools.lru_cache(maxsize=256)
def _scalar_constants(c: int, primes: tuple[int, ...], device: str) -> tuple[torch.Tensor, torch.Tensor]:
    """c mod q_i as Shoup constants on the device, made once per (c, level): a host-to-device copy per call
    would wait for the GPU's stream."""
    return shoup_constants([c % p for p in primes], primes, device)


class Evaluator:
    """BFV homomorphic operations for one context and (optionally) one session's key set."""

    def __init__(self, ctx: BFVContext, keys: EvalKeySet | None = None):
        ctx = BFVContext.check(ctx, "Evaluator")
        if keys is not None:
            if not isinstance(keys, EvalKeySet):
                raise ParameterError(f"Evaluator: expected an EvalKeySet, got {type(keys).__name__}")
            if keys.params_id != ctx.params_id:
                raise ParamsMismatchError("Evaluator: the key set belongs to other parameters")
        self.ctx, self.keys = ctx, keys

    def graphed(self) -> GraphedEvaluator:
        """This evaluator with its multiplying, relinearizing, rotating and modulus-switching operations replayed
        from CUDA graphs captured on their first call per input shape (bit-identical results, a call close to its
        device time; CUDA only). See :mod:`fhe_core.bfv.graphed`."""
        return GraphedEvaluator(self)

    # ---- checks ------------------------------------------------------------------------------

    def _ct(self, ct: Ciphertext, op: str, degree: int | None = None) -> int:
        """Validate a ciphertext operand (params_id, device, domain, degree, shape; residues once
        per object, see :mod:`fhe_core.rlwe.checks`); its level."""
        level = check_ciphertext(self.ctx.rlwe, ct, op, degree=degree)
        check_canonical(self.ctx.rlwe, ct, level, op)
        return level

    def _pair(self, a: Ciphertext, b: Ciphertext, op: str, degree: int | None = None) -> int:
        level = self._ct(a, op, degree)
        check_same_level(level, self._ct(b, op, degree), op, "the second ciphertext")
        return level

    def _keys(self, op: str) -> EvalKeySet:
        if self.keys is None:
            raise MissingKeyError(f"{op}: this evaluator has no evaluation keys")
        return self.keys

    def _relin_key(self, op: str) -> rlwe.RelinKey:
        """The relinearization key, checked (the key switch below checks nothing)."""
        key = self._keys(op).relin_key(op)
        check_switching_key(self.ctx.rlwe, key, op)
        return key

    def _galois_key(self, element: int, op: str) -> rlwe.GaloisKey:
        """The Galois key of ``element``, checked (the key switch below checks nothing)."""
        key = self._keys(op).galois_key(element, op)
        check_switching_key(self.ctx.rlwe, key, op)
        return key

    def _moduli(self, level: int) -> torch.Tensor:
        return self.ctx.rlwe.q_at(level).moduli

    # ---- additive ------------------------------------------------------------------------------

    @canonical_results
    def add(self, a: Ciphertext, b: Ciphertext) -> Ciphertext:
        """Enc(m_a + m_b mod t); v = v_a + v_b. Same level; degrees may differ (the result has
        the larger). No keys, no level."""
        return self._combine(a, b, "add", ops.add)

    @canonical_results
    def sub(self, a: Ciphertext, b: Ciphertext) -> Ciphertext:
        """Enc(m_a - m_b mod t); v = v_a - v_b. As :meth:`add`."""
        return self._combine(a, b, "sub", ops.sub)

    def _combine(self, a: Ciphertext, b: Ciphertext, op: str, fn) -> Ciphertext:
        level = self._pair(a, b, op)
        moduli = self._moduli(level)
        if a.degree == b.degree:  # (the usual case: one op, no copy)
            return a.replace(data=fn(a.data, b.data, moduli))
        size = max(a.degree, b.degree) + 1
        out = torch.zeros((size, level + 1, self.ctx.n), dtype=torch.int64, device=self.ctx.device)
        out[:a.degree + 1] = a.data
        common = min(a.degree, b.degree) + 1
        fn(out[:common], b.data[:common], moduli, out=out[:common])
        if b.degree > a.degree:  # 0 - b or 0 + b on the extra components
            fn(out[common:], b.data[common:], moduli, out=out[common:])
        return a.replace(data=out)

    @canonical_results
    def negate(self, a: Ciphertext) -> Ciphertext:
        """Enc(-m mod t); v -> -v. No keys, no level."""
        level = self._ct(a, "negate")
        return a.replace(data=ops.neg(a.data, self._moduli(level)))

    @canonical_results
    def add_plain(self, a: Ciphertext, pt: Plaintext) -> Ciphertext:
        """Enc(m + p mod t): c0 + round(Q_l p / t); the invariant noise grows by at most
        t/(2 Q_l) (the rounding). No keys, no level."""
        return self._plain_shift(a, pt, "add_plain", ops.add)

    @canonical_results
    def sub_plain(self, a: Ciphertext, pt: Plaintext) -> Ciphertext:
        """Enc(m - p mod t): c0 - round(Q_l p / t). As :meth:`add_plain`."""
        return self._plain_shift(a, pt, "sub_plain", ops.sub)

    def _plain_shift(self, a: Ciphertext, pt: Plaintext, op: str, fn) -> Ciphertext:
        level = self._ct(a, op)
        check_plaintext(self.ctx, pt, op)
        data = a.data.clone()
        fn(data[0], plain_operand(self.ctx, pt, level, scaled=True), self._moduli(level), out=data[0])
        return a.replace(data=data)

    # ---- multiplicative ------------------------------------------------------------------------

    @canonical_results
    def multiply_plain(self, a: Ciphertext, pt: Plaintext) -> Ciphertext:
        """Enc(m p) (negacyclic product mod t, i.e. slot-wise products): every component times
        p lifted with centred coefficients; |v| grows by about N |p| <= N t/2. No keys, no level."""
        level = self._ct(a, "multiply_plain", degree=None)
        check_plaintext(self.ctx, pt, "multiply_plain")
        return a.replace(data=ops.mul(a.data, plain_operand(self.ctx, pt, level, scaled=False),
                                     self._moduli(level)))

    @canonical_results
    def multiply_scalar(self, a: Ciphertext, scalar: int) -> Ciphertext:
        """Enc(c m mod t) for an integer c (taken centred mod t: |v| grows by |[c]_t| <= t/2).
        No keys, no level."""
        if isinstance(scalar, bool) or not isinstance(scalar, int):
            raise ParameterError(f"multiply_scalar: the scalar must be an int, got {type(scalar).__name__}")
        level = self._ct(a, "multiply_scalar", degree=None)
        t = self.ctx.t
        c = scalar % t
        c = c - t if c > t // 2 else c
        q = self.ctx.rlwe.q_at(level)
        return a.replace(data=ops.mul_const(a.data, *_scalar_constants(c, q.primes, str(self.ctx.device)), q.moduli))

    @canonical_results
    def multiply(self, a: Ciphertext, b: Ciphertext) -> Ciphertext:
        """Enc(m_a m_b mod t) of degree 2 (needs :meth:`relinearize` before rotations), by the BEHZ
        RNS algorithm (:mod:`fhe_core.bfv.behz`). Noise: |v| is about t N (|v_a| + |v_b|) (the
        usual bound has further small factors), so a product costs about log2(t N) bits of budget
        (measured 25-29 bits at N = 2^10..2^15 with t = 2^16 + 1). Both operands degree 1 at the
        same level. No keys, no level."""
        level = self._pair(a, b, "multiply", degree=1)
        return a.replace(data=behz.multiply(self.ctx.behz(level), a.data, b.data))

    @canonical_results
    def relinearize(self, a: Ciphertext) -> Ciphertext:
        """Degree 2 -> degree 1 by hybrid key switching of c2 (rlwe.relinearize); adds t/Q_l times
        the key-switching noise (a few bits), invisible next to a product's noise. Needs the
        relinearization key; no level."""
        op = "relinearize"
        level = self._ct(a, op, degree=2)
        return switching.relinearize(self.ctx.rlwe, a, self._relin_key(op), level)

    @canonical_results
    def multiply_relin(self, a: Ciphertext, b: Ciphertext) -> Ciphertext:
        """:meth:`multiply` then :meth:`relinearize`. Needs the relinearization key."""
        op = "multiply_relin"
        key = self._relin_key(op)  # before any work
        level = self._pair(a, b, op, degree=1)
        product = a.replace(data=behz.multiply(self.ctx.behz(level), a.data, b.data))
        return switching.relinearize(self.ctx.rlwe, product, key, level)

    # ---- rotations -----------------------------------------------------------------------------

    @canonical_results
    def rotate_rows(self, a: Ciphertext, steps: int) -> Ciphertext:
        """Both matrix rows rotated left by ``steps`` (right if negative): column j receives
        column j + steps (mod N/2). Galois element 5^steps mod 2N; needs its key. Degree 1."""
        if isinstance(steps, bool) or not isinstance(steps, int):
            raise ParameterError(f"rotate_rows: steps must be an int, got {type(steps).__name__}")
        op = "rotate_rows"
        level = self._ct(a, op, degree=1)
        k = rlwe.galois_element_for_rotation(steps, self.ctx.n)
        if k == 1:
            return a.replace(data=a.data.clone())
        return switching.apply_galois(self.ctx.rlwe, a, k, self._galois_key(k, op), level)

    @canonical_results
    def rotate_rows_hoisted(self, a: Ciphertext, steps) -> dict[int, Ciphertext]:
        """:meth:`rotate_rows` for several step counts sharing one ModUp of c1 (hoisting,
        ``rlwe.apply_galois_hoisted``): ``{steps: ciphertext}``. Every key is checked before any
        work. Degree 1; no level."""
        op = "rotate_rows_hoisted"
        level = self._ct(a, op, degree=1)
        if isinstance(steps, (int, str, bytes)) or not hasattr(steps, "__iter__"):  # (an int would raise TypeError)
            raise ParameterError(f"{op}: steps must be an iterable of ints, got {steps!r}")
        steps = list(dict.fromkeys(steps))
        if any(isinstance(r, bool) or not isinstance(r, int) for r in steps):
            raise ParameterError(f"{op}: steps must be ints, got {steps!r}")
        elements = {r: rlwe.galois_element_for_rotation(r, self.ctx.n) for r in steps}
        keyed = {k: self._galois_key(k, op) for k in elements.values() if k != 1}
        rotated = switching.apply_galois_hoisted(self.ctx.rlwe, a, keyed, level) if keyed else {}
        return {r: rotated[k] if k != 1 else a.replace(data=a.data.clone()) for r, k in elements.items()}

    @canonical_results
    def swap_columns(self, a: Ciphertext) -> Ciphertext:
        """The two matrix rows exchanged (SEAL's rotate_columns): Galois element 2N - 1; needs its
        key. Degree 1."""
        op = "swap_columns"
        level = self._ct(a, op, degree=1)
        k = rlwe.galois_element_for_conjugation(self.ctx.n)
        return switching.apply_galois(self.ctx.rlwe, a, k, self._galois_key(k, op), level)

    # ---- modulus switching ------------------------------------------------------------------------

    @canonical_results
    def mod_switch_to_next(self, a: Ciphertext) -> Ciphertext:
        """Drop q_l: c -> round(c / q_l) over Q_{l-1}, any degree. Consumes one level; the
        invariant noise becomes v + (t/Q_{l-1}) (eps0 + eps1 s) with |eps_i| <= 1/2 (the rounding),
        so the budget drops to about log2(Q_{l-1} / t) - log2(sqrt(N)) - a few bits (worst case
        log2(Q_{l-1} / (t (1 + N)/2))); nothing is lost while it was below that. No keys."""
        level = self._ct(a, "mod_switch_to_next", degree=None)
        if level == 0:
            raise LevelMismatchError("mod_switch_to_next: the ciphertext is at level 0, no prime left to drop")
        return self._mod_switch_next(a, level)

    def _mod_switch_next(self, a: Ciphertext, level: int) -> Ciphertext:
        """:meth:`mod_switch_to_next` of a checked ciphertext at ``level`` >= 1: the same exact divide-and-round as
        CKKS rescale, the centred last limb lifted to the other primes, transformed, then (c - r) * q_l^-1."""
        tab = self.ctx.mod_switch(level)
        q_last, rest = tab.q_last.primes[0], tab.q_rest
        data = a.data.contiguous()  # (no copy but for a hand-made strided view)
        last = tab.q_last.intt(data[:, level:level + 1])                    # [d+1, 1, N] coefficients, read in place
        lift = ops.center_lift(last, q_last, rest.moduli)                   # [d+1, l, N]
        if self.ctx.plan.fused_circuit:  # the transform and (c - r) q_l^-1 in one pass, the lower limbs read in place
            out = ops.mod_down_ntt(lift, data[:, :level], 0, tab.q_last_inv, tab.q_last_inv_shoup, rest.moduli,
                                   rest.ntt_table, plan=rest.plan, out=lift)
        else:
            out = ops.sub_mul_const(data[:, :level].contiguous(), rest.ntt(lift, out=lift), tab.q_last_inv,
                                    tab.q_last_inv_shoup, rest.moduli, out=lift)
        return a.replace(data=out, level=level - 1)

    @canonical_results
    def mod_switch_to(self, a: Ciphertext, level: int) -> Ciphertext:
        """:meth:`mod_switch_to_next` until ``level`` (<= the ciphertext's level)."""
        current = self._ct(a, "mod_switch_to", degree=None)
        level = self.ctx.check_level(level, "mod_switch_to")
        if level > current:
            raise LevelMismatchError(f"mod_switch_to: cannot raise a ciphertext from level {current} to {level}")
        for from_level in range(current, level, -1):
            a = self._mod_switch_next(a, from_level)
        return a
