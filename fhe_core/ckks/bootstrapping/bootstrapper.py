"""The CKKS Bootstrapper: the circuit pieces assembled (Lattigo's ``bootstrapping.Evaluator``,
built from separate circuit evaluators; never a secret key).

``bootstrap(ct)`` runs, in the order ``"cts_first"``,

    ModRaise -> SubSum (sparse only) -> CoeffsToSlots -> Re/Im split -> EvalMod (a pair,
             or once on the packed parts) -> recombine -> SlotsToCoeffs

and in the order ``"slim"`` SlotsToCoeffs first (on the input, down to level 0), then the rest.

**EvalMod once or twice.** EvalMod is a real polynomial, so it needs the real and imaginary
parts of the CoeffsToSlots output in real slots. With full packing (n = N/2) they are N real
numbers, two ciphertexts' worth of real slots: EvalMod runs on both, as one batched
:class:`~fhe_core.ckks.bootstrapping.pair.CiphertextPair` (one launch per operation for the
two, bit for bit two separate evaluations). With sparse packing
(n <= N/4, order ``cts_first``: ``BootstrappingParameters.packs_real_and_imaginary``) they fit
the 2n slots of one ciphertext: the last CoeffsToSlots factor, evaluated on 2n slots, returns
[w, -i w] (``dft.pack_real_imaginary``), its sum with its conjugate is [Re w | Im w], EvalMod
runs **once**, and the first SlotsToCoeffs factor, on 2n slots, takes [a | b] to the n-slot
a + i b directly (``dft.unpack_real_imaginary``: twice its diagonals, no level).

Every step is also a public method. The levels are those of
:class:`~fhe_core.ckks.bootstrapping.parameters.BootstrappingParameters` (``depth``,
``min_input_level``, ``output_level``).

**Scales.** An input at scale S (within a factor 2 of the default scale Delta) decrypts to
S z. ModRaise keeps the polynomials and *declares* scale q_0, so the slots read S c / q_0 + I
(c: the message's coefficients in units of S, I: ModRaise's integer). CoeffsToSlots and
SlotsToCoeffs are linear transforms whose diagonals are encoded at the scale of the prime
their rescale divides by, so they keep the scale; CoeffsToSlots is scaled by 1/(2g) to absorb
SubSum's factor g and the 2 of the split. With ``log_message_ratio`` the input is first
multiplied by an integer k (scale k S), so that the slots read k S c / q_0 + I. EvalMod returns
(R / 2 pi) sin(2 pi y) at scale Delta with R = q_0 / (k Delta); for y = c / R' + I,
R' = q_0 / (k S), that is c R / R' = c S / Delta at scale Delta, the same plaintext as c at
scale S: the result is relabelled to scale S (free, exact). The
output's scale is therefore the input's, exactly up to float rounding of the bookkeeping
(checked to 1e-9 relative, then set to S). The message error is EvalMod's
sin(x) ~ x term (relative (2 pi c / R')^2 / 6 on the coefficients c) plus the amplified noise.
"""
from __future__ import annotations

import math
from dataclasses import replace

from fhe_core import rlwe
from fhe_core.ckks.ciphertext import Ciphertext, Decryptor, Encryptor, ScaleMismatchError, SlotMismatchError
from fhe_core.ckks.ciphertext import rlwe_context
from fhe_core.ckks.encoder import Encoder
from fhe_core.ckks.evaluator import SCALE_TOLERANCE, Evaluator
from fhe_core.ckks.lintrans import LinearTransform, default_baby_step
from fhe_core.ckks.bootstrapping.dft import Diagonals, pack_real_imaginary, unpack_real_imaginary
from fhe_core.ckks.bootstrapping.graphed import GraphedBootstrapper
from fhe_core.ckks.bootstrapping.mod1 import EvalModEvaluator
from fhe_core.ckks.bootstrapping.mod_raise import mod_raise, mod_raise_encapsulated
from fhe_core.ckks.bootstrapping.pair import CiphertextPair, PairEvaluator
from fhe_core.ckks.bootstrapping.parameters import BootstrappingParameters
from fhe_core.ckks.bootstrapping.sub_sum import sub_sum, sub_sum_galois_elements
from fhe_core.errors import LevelMismatchError, MissingKeyError, ParameterError, ParamsMismatchError
from fhe_core.ops import KernelPlan
from fhe_core.params import Params
from fhe_core.rlwe import encapsulation
from fhe_core.rlwe.checks import check_ciphertext, mark_canonical
from fhe_core.rlwe.sampling import sub_seed

MAX_SCALE_RATIO = 2.0  # the input's scale must be within this factor of the default scale


def _transforms(params: Params, factors: list[Diagonals], top: int | None,
                baby_step_factor: int) -> list[LinearTransform]:
    """One LinearTransform per DFT factor (on as many slots as its vectors have), baby step
    ``baby_step_factor`` times the default; with ``top``, factor i is encoded at level top - i
    (scale q_(top - i), the prime its rescale divides by); without, nothing is encoded."""
    out = []
    for i, f in enumerate(factors):
        slots = len(next(iter(f.values())))
        out.append(LinearTransform(params, f, level=None if top is None else top - i,
                                   baby_step=min(slots, baby_step_factor * default_baby_step(f, slots))))
    return out


def _dft_factors(bparams: BootstrappingParameters) -> tuple[list[Diagonals], list[Diagonals]]:
    """The CtS and StC factors' diagonals; with ``packs_real_and_imaginary`` the last CtS factor
    packs and the first StC factor unpacks the real and imaginary parts on 2n slots."""
    cts, stc = list(bparams.cts_factors().factors), list(bparams.stc_factors().factors)
    if bparams.packs_real_and_imaginary:
        cts[-1] = pack_real_imaginary(cts[-1], bparams.slots)
        stc[0] = unpack_real_imaginary(stc[0], bparams.slots)
    return cts, stc


def _key_elements(params: Params, slots: int, transforms: list[LinearTransform]) -> list[int]:
    """CtS + StC rotations (BSGS baby and giant steps) + SubSum + conjugation, sorted."""
    elements = set(sub_sum_galois_elements(params.n, slots))
    for t in transforms:
        elements.update(t.galois_elements())
    elements.add(rlwe.galois_element_for_conjugation(params.n))
    return sorted(elements)


def bootstrapping_galois_elements(params: Params, bparams: BootstrappingParameters) -> list[int]:
    """The Galois elements a :class:`Bootstrapper` of (params, bparams) needs, for key
    generation on the client (nothing is encoded). A relinearization key is needed too."""
    cts, stc = _dft_factors(bparams)
    transforms = _transforms(params, cts, None, bparams.baby_step_factor) + _transforms(params, stc, None,
                                                                                        bparams.baby_step_factor)
    return _key_elements(params, bparams.slots, transforms)


def gen_bootstrapping_keys(params: Params, bparams: BootstrappingParameters, sk: rlwe.SecretKey, *,
                           seed: bytes | None = None) -> rlwe.EvalKeySet:
    """Client side (the secret-key holder): every key a :class:`Bootstrapper` of (params, bparams) needs, the
    relinearization key, the Galois keys of :func:`bootstrapping_galois_elements` and, with
    ``bparams.ephemeral_weight``, the two encapsulation keys (the ephemeral secret is drawn and dropped here).
    ``seed``: tests only."""
    _check_params(params, bparams)
    ctx = rlwe_context(params)
    keys = rlwe.gen_eval_keys(ctx, sk, bootstrapping_galois_elements(params, bparams), seed=seed)
    if bparams.ephemeral_weight:
        ephemeral = rlwe.gen_ephemeral_secret(ctx, bparams.ephemeral_weight, seed=sub_seed(seed, "ephemeral"))
        for key in rlwe.gen_encapsulation_keys(ctx, sk, ephemeral, seed=sub_seed(seed, "encapsulation")):
            keys.add(key)
    return keys


def _check_params(params: Params, bparams: BootstrappingParameters) -> None:
    if not isinstance(params, Params):
        raise ParameterError(f"Bootstrapper: expected a Params, got {type(params).__name__}")
    if not isinstance(bparams, BootstrappingParameters):
        raise ParameterError(f"Bootstrapper: expected BootstrappingParameters, got {type(bparams).__name__}")
    literal = bparams.literal
    if (params.log_n, list(params.log_q), params.hamming_weight) != (literal.log_n, list(literal.log_q),
                                                                      literal.hamming_weight):
        raise ParamsMismatchError("Bootstrapper: params were not built from the bootstrapping parameters' literal "
                                  f"(log_n, log_q, h differ: {params.log_n}, {list(params.log_q)}, "
                                  f"{params.hamming_weight})")


class Bootstrapper:
    """Refreshes CKKS ciphertexts: level ``min_input_level`` in, ``output_level`` out.

    Args:
        params: built from ``bparams.literal``.
        bparams: the circuit (levels, slots, EvalMod, order).
        keys: an :class:`fhe_core.rlwe.EvalKeySet` with the relinearization key and exactly the
            Galois keys of :meth:`galois_elements` (all checked here: MissingKeyError lists every
            missing element), and with ``bparams.ephemeral_weight`` the two encapsulation keys of one
            ephemeral secret of that weight (:func:`gen_bootstrapping_keys` makes them all).
        plan: the kernel plan of its evaluator (default: resolved; see :class:`fhe_core.ops.KernelPlan`).

    Holds a ckks :class:`Evaluator`, the DFT :class:`LinearTransform`\\ s (encoded once, at their
    levels) and an :class:`EvalModEvaluator`; never a secret key. Not safe for concurrent use.
    """

    double_hoisting = True  # False: single-hoisted linear transforms (benchmarks and tests compare them)

    def __init__(self, params: Params, bparams: BootstrappingParameters, keys: rlwe.EvalKeySet, *,
                 plan: KernelPlan | None = None):
        _check_params(params, bparams)
        self.params, self.parameters = params, bparams
        self._elements = tuple(bootstrapping_galois_elements(params, bparams))
        self._check_keys(keys)
        self.evaluator = Evaluator(params, keys, plan=plan)
        self._encapsulation = self._encapsulation_keys(keys) if bparams.ephemeral_weight else None
        stc_top = bparams.min_input_level if bparams.order == "slim" else bparams.output_level + bparams.stc_depth
        cts, stc = _dft_factors(bparams)
        self._packed = bparams.packs_real_and_imaginary
        self._cts = _transforms(params, cts, bparams.max_level, bparams.baby_step_factor)
        self._stc = _transforms(params, stc, stc_top, bparams.baby_step_factor)
        # EvalMod on one ciphertext (sparse packing: the packed parts) or on a CiphertextPair (full
        # packing: the real and imaginary parts in one batch); output scale Delta, or Delta / 2
        # for bootstrap_pair (the halves of its split); built on first use
        self._eval_mod_parameters = bparams.eval_mod_parameters(params)
        self._eval_mods: dict[tuple[bool, bool], EvalModEvaluator] = {}

    def __repr__(self) -> str:
        return f"ckks.Bootstrapper({self.parameters.describe()})"

    # ---- what it needs and what it does to levels ------------------------------------------------

    @property
    def depth(self) -> int:
        """Levels the circuit consumes (CtS + EvalMod + StC)."""
        return self.parameters.depth

    @property
    def min_input_level(self) -> int:
        """The level :meth:`bootstrap` works from (higher inputs are dropped to it)."""
        return self.parameters.min_input_level

    @property
    def output_level(self) -> int:
        """The level of every :meth:`bootstrap` result."""
        return self.parameters.output_level

    def galois_elements(self) -> list[int]:
        """Every Galois element :meth:`bootstrap` uses: CtS and StC rotations (BSGS steps),
        SubSum's full-ring rotations and the conjugation (plus the relinearization key). The
        check is exact: a key of 5^(r - n) does not stand in for 5^r here."""
        return list(self._elements)

    def _check_keys(self, keys) -> None:
        if keys is not None and not isinstance(keys, rlwe.EvalKeySet):
            raise ParameterError(f"Bootstrapper: keys must be an EvalKeySet, got {type(keys).__name__}")
        missing = [e for e in self.galois_elements() if keys is None or e not in keys]
        relin = keys is not None and keys.has_relin
        if missing or not relin:
            raise MissingKeyError(f"Bootstrapper: missing Galois keys for elements {missing}"
                                  + ("" if relin else " and the relinearization key"))

    def _encapsulation_keys(self, keys: rlwe.EvalKeySet) -> tuple[rlwe.EncapsulationKey, rlwe.EncapsulationKey]:
        """The checked pair of one ephemeral secret of the parameters' weight; the small context's tables built
        here (not inside a graph capture)."""
        op = "Bootstrapper"
        pair = keys.encapsulation_keys(op)
        ctx = rlwe_context(self.params, self.evaluator.plan)
        for key, direction in zip(pair, (rlwe.DENSE_TO_SPARSE, rlwe.SPARSE_TO_DENSE)):
            rlwe.check_encapsulation_key(ctx, key, direction, op)
            if key.ephemeral_weight != self.parameters.ephemeral_weight:
                raise ParameterError(f"{op}: the {direction} key is for an ephemeral weight of {key.ephemeral_weight},"
                                     f" the parameters name {self.parameters.ephemeral_weight}")
        encapsulation.encapsulation_context(ctx).tables(0)
        return pair

    # ---- the steps -------------------------------------------------------------------------------

    def mod_raise(self, ct: Ciphertext) -> Ciphertext:
        """Level 0 -> level L, declared at scale q_0: slots read k S c / q_0 + I (exact, no key;
        with encapsulation, through the ephemeral secret: two one-digit key switches, I of its weight),
        k the integer of :meth:`BootstrappingParameters.scale_up_factor` (1 by default) the input
        is multiplied by first, which brings the message ratio down to R ~ 2^log_message_ratio."""
        k = self.parameters.scale_up_factor(self.params)
        if k > 1:
            ct = self.evaluator.mul(ct, 1, constant_scale=k)  # the integer k, scale S -> k S
        top, plan = self.parameters.max_level, self.evaluator.plan
        if self._encapsulation is not None:
            raised = mod_raise_encapsulated(self.params, ct, self._encapsulation, top, plan=plan)
        else:
            raised = mod_raise(self.params, ct, top, plan=plan)
        return mark_canonical(raised.replace(scale=float(self.params.q_primes[0])))

    def sub_sum(self, ct: Ciphertext) -> Ciphertext:
        """The trace onto the n-slot subring (message times g); a no-op for full packing.
        Consumes no level; SubSum's Galois keys."""
        return ct if self.parameters.sparse_factor == 1 else sub_sum(self.evaluator, ct)

    def coeffs_to_slots(self, ct: Ciphertext) -> tuple[Ciphertext, ...]:
        """The CtS linear transforms (``cts_depth`` levels, scale kept), then the split into real
        slots: (Re, Im) = (y + conj y, -i (y - conj y)), two ciphertexts; or, when the parameters
        pack the real and imaginary parts (sparse packing), the one 2n-slot ciphertext
        y + conj y = [Re | Im] (module docstring). Consumes ``cts_depth`` levels; CtS rotation
        keys and the conjugation key."""
        for t in self._cts[:-1]:
            ct = t.evaluate(self.evaluator, ct, double_hoisting=self.double_hoisting)
        if self._packed:
            ct = mark_canonical(ct.replace(slots=2 * ct.slots))  # the same polynomial read on 2n slots: [v | v]
        ct = self._cts[-1].evaluate(self.evaluator, ct, double_hoisting=self.double_hoisting)
        ev = self.evaluator
        conj = ev.conjugate(ct)
        if self._packed:
            return (ev.add(ct, conj),)
        if ev.plan.fused_circuit:  # written straight into one pair tensor: one pass each, no stack
            pair = CiphertextPair.buffer(ct)
            op = "coeffs_to_slots"
            re = ev.linear_combination([(ct, 1, 1.0, 1), (conj, 1, 1.0, 1)], ct.level, out=pair[:, 0], op=op)
            im = ev.linear_combination([(ct, -1j, 1.0, 1), (conj, -1j, 1.0, -1)], ct.level, out=pair[:, 1], op=op)
            return mark_canonical(re), mark_canonical(im)
        return ev.add(ct, conj), ev.mul(ev.sub(ct, conj), -1j)  # Gaussian integer: no level

    def eval_mod(self, parts: tuple[Ciphertext, ...], scale: float) -> Ciphertext:
        """EvalMod on the parts :meth:`coeffs_to_slots` returns (two: both in one batched
        :class:`~fhe_core.ckks.bootstrapping.pair.CiphertextPair`, then the recombination
        re + i im; one: the packed [Re | Im]), relabelled from Delta to ``scale`` (module
        docstring). Consumes ``eval_mod_depth`` levels; relinearization key."""
        return self._eval_mod_parts(parts, scale, half=False)

    def _eval_mod_parts(self, parts: tuple[Ciphertext, ...], scale: float, *, half: bool) -> Ciphertext:
        ev = self.evaluator
        if len(parts) == 1:
            ct = self._eval_mod_evaluator(False, half).evaluate(parts[0])
        elif ev.plan.fused_circuit:  # re + i im in one pass over the pair's halves, read in place
            re, im = self._eval_mod_evaluator(True, half).evaluate(CiphertextPair.of(*parts)).views()
            ct = ev.linear_combination([(re, 1, 1.0, 1), (im, 1j, 1.0, 1)], re.level)
        else:
            re, im = self._eval_mod_evaluator(True, half).evaluate(CiphertextPair.of(*parts)).parts()
            ct = ev.add(re, ev.mul(im, 1j))
        return mark_canonical(ct.replace(scale=ct.scale * scale / float(self.params.default_scale)))

    def _eval_mod_evaluator(self, paired: bool, half: bool) -> EvalModEvaluator:
        """EvalMod on a ciphertext or on a pair, landing on Delta or (``half``) Delta / 2."""
        if (paired, half) not in self._eval_mods:
            p = self._eval_mod_parameters
            if half:
                p = replace(p, output_scale=p.output_scale / 2)
            evaluator = PairEvaluator(self.evaluator) if paired else self.evaluator
            self._eval_mods[paired, half] = EvalModEvaluator(evaluator, p)
        return self._eval_mods[paired, half]

    def slots_to_coeffs(self, ct: Ciphertext) -> Ciphertext:
        """The StC linear transforms: ``stc_depth`` levels, scale kept; StC rotation keys. With
        packed parts the input is :meth:`eval_mod`'s 2n-slot [Re | Im] and the output has n slots."""
        packed = self._packed and ct.slots == 2 * self.parameters.slots
        for i, t in enumerate(self._stc):
            ct = t.evaluate(self.evaluator, ct, double_hoisting=self.double_hoisting)
            if i == 0 and packed:
                ct = mark_canonical(ct.replace(slots=self.parameters.slots))  # [M u | M u]: n-periodic
        return ct

    # ---- the whole circuit -----------------------------------------------------------------------

    def bootstrap(self, ct: Ciphertext) -> Ciphertext:
        """A fresh ciphertext of ct's message at :attr:`output_level`, with ct's scale.

        ct: degree 1 with ``bparams.slots`` slots, at level >= :attr:`min_input_level` (dropped to
        it first), scale S within a factor 2 of the default scale (else ScaleMismatchError:
        ``set_scale`` first). Real and imaginary parts of the slots may have an integer part
        as long as the message coefficients stay << R' = q_0 / (k S). Consumes :attr:`depth` levels
        of the raised chain; needs the keys of :meth:`galois_elements` and the relinearization
        key (checked at construction). Output scale: S (see the module docstring).
        """
        ct = self.check_input(ct, "bootstrap")
        return self._check_output(self._circuit(ct, half=False), ct.scale)

    def bootstrap_pair(self, a: Ciphertext, b: Ciphertext) -> tuple[Ciphertext, Ciphertext]:
        """Two ciphertexts of real slots refreshed by one bootstrap: X = a + i b, bootstrapped, then
        split with one conjugation, a = (X + conj X) / 2 and b = -i (X - conj X) / 2.

        a, b: as for :meth:`bootstrap`, with the same scale S (to a relative 1e-9, else
        ScaleMismatchError) and real messages (an imaginary part of a would come out in b and
        one of b, negated, in a). The halves cost nothing: this circuit's EvalMod lands on scale
        Delta / 2 instead of Delta, so the bootstrapped X is (a + i b) / 2 at scale S. Returns
        (a', b') at :attr:`output_level` with scale S. Keys and levels as :meth:`bootstrap` (the
        conjugation key is among its keys); one bootstrap and one key switch.
        """
        a, b = self.check_pair(a, b)
        ev = self.evaluator
        packed = ev.add(a, ev.mul(b, 1j))  # i b: a Gaussian integer, no level
        half = self._check_output(self._circuit(packed, half=True), a.scale / 2)
        half = mark_canonical(half.replace(scale=a.scale))  # the same data read as (a + i b) / 2 at scale S
        conj = ev.conjugate(half)
        return ev.add(half, conj), ev.mul(ev.sub(half, conj), -1j)

    def graphed(self) -> GraphedBootstrapper:
        """This bootstrapper with :meth:`bootstrap` and :meth:`bootstrap_pair` captured in a CUDA
        graph on their first call and replayed afterwards (bit-identical results, eager time close
        to the device time; CUDA only). See :mod:`~fhe_core.ckks.bootstrapping.graphed`."""
        return GraphedBootstrapper(self)

    def check_pair(self, a: Ciphertext, b: Ciphertext) -> tuple[Ciphertext, Ciphertext]:
        """:meth:`bootstrap_pair`'s entry checks (each input as :meth:`check_input`, then their scales): the two
        inputs as the circuit takes them, checked."""
        op = "bootstrap_pair"
        a, b = self.check_input(a, op), self.check_input(b, op)
        if abs(a.scale - b.scale) > SCALE_TOLERANCE * a.scale:
            raise ScaleMismatchError(f"{op}: the two scales differ: 2^{math.log2(a.scale):.6f} and "
                                     f"2^{math.log2(b.scale):.6f} (bring them to one scale first)")
        return a, b

    def _circuit(self, ct: Ciphertext, *, half: bool) -> Ciphertext:
        """The steps in the parameters' order on a checked input; the result at scale ct.scale
        (``half``: ct.scale / 2, EvalMod landing on Delta / 2)."""
        scale = ct.scale
        if self.parameters.order == "slim":
            ct = self.slots_to_coeffs(ct)
        out = self._eval_mod_parts(self.coeffs_to_slots(self.sub_sum(self.mod_raise(ct))), scale, half=half)
        return self.slots_to_coeffs(out) if self.parameters.order == "cts_first" else out

    def check_input(self, ct: Ciphertext, op: str = "bootstrap") -> Ciphertext:
        """:meth:`bootstrap`'s entry checks (a degree-1 ciphertext of these parameters and slots, at or above
        :attr:`min_input_level`, its scale near the default; errors name ``op``): the input as the circuit takes
        it, checked (dropped to :attr:`min_input_level`, a view of its first limbs)."""
        if not isinstance(ct, Ciphertext):
            raise ParameterError(f"{op}: expected a ckks.Ciphertext, got {type(ct).__name__}")
        level = check_ciphertext(rlwe_context(self.params), ct, op, degree=1)
        if ct.slots != self.parameters.slots:
            raise SlotMismatchError(f"{op}: the bootstrapper packs {self.parameters.slots} slots, the ciphertext "
                                    f"{ct.slots}")
        if level < self.min_input_level:
            raise LevelMismatchError(f"{op}: the ciphertext is at level {level}, below the minimum input level "
                                     f"{self.min_input_level}")
        ratio = ct.scale / self.params.default_scale
        if not 1 / MAX_SCALE_RATIO <= ratio <= MAX_SCALE_RATIO:
            raise ScaleMismatchError(f"{op}: the scale 2^{math.log2(ct.scale):.3f} is not within a factor "
                                     f"{MAX_SCALE_RATIO:g} of the default 2^{math.log2(self.params.default_scale):.3f}")
        return self.evaluator.drop_level(ct, self.min_input_level) if level > self.min_input_level else ct

    def _check_output(self, ct: Ciphertext, scale: float) -> Ciphertext:
        if ct.level != self.output_level or abs(ct.scale - scale) > SCALE_TOLERANCE * scale:
            raise RuntimeError(f"bootstrap: internal error: level {ct.level} (expected {self.output_level}), "
                               f"scale 2^{math.log2(ct.scale):.9f} (expected 2^{math.log2(scale):.9f})")
        return mark_canonical(ct.replace(scale=scale))


class SecretKeyBootstrapper:
    """A test double for applications, **tests only**: decrypts and re-encrypts with the secret
    key (Lattigo's ``SecretKeyBootstrapper``). It holds the secret key, so it must never be
    given to an evaluation server.

    ``bootstrap(ct)`` returns a fresh encryption of ct's decoded message at ``output_level``,
    with ct's scale and slots (the decode/encode round trip adds ~2^-40 relative float error).
    ``depth`` 0, ``min_input_level`` 0, no evaluation keys.
    """

    def __init__(self, params: Params, sk: rlwe.SecretKey, output_level: int):
        if isinstance(output_level, bool) or not isinstance(output_level, int) \
                or not 0 <= output_level <= params.max_level:
            raise LevelMismatchError(f"SecretKeyBootstrapper: output_level must be in [0, {params.max_level}], "
                                     f"got {output_level!r}")
        self.params, self.output_level = params, output_level
        self.depth, self.min_input_level = 0, 0
        self._encoder = Encoder(params)
        self._encryptor, self._decryptor = Encryptor(params, sk), Decryptor(params, sk)

    def galois_elements(self) -> list[int]:
        return []

    def bootstrap(self, ct: Ciphertext) -> Ciphertext:
        """Decrypt, decode, encode at ``output_level`` (scale and slots of ct), encrypt."""
        z = self._encoder.decode(self._decryptor.decrypt(ct))
        pt = self._encoder.encode(z, level=self.output_level, slots=ct.slots, scale=ct.scale)
        return self._encryptor.encrypt(pt)

    def bootstrap_pair(self, a: Ciphertext, b: Ciphertext) -> tuple[Ciphertext, Ciphertext]:
        """The contract of :meth:`Bootstrapper.bootstrap_pair`: fresh encryptions of the real and
        imaginary parts of X = a + i b (Re a - Im b and Re b + Im a: a and b themselves when both
        are real) at ``output_level``, with a's and b's scales."""
        x = self._encoder.decode(self._decryptor.decrypt(a)) + 1j * self._encoder.decode(self._decryptor.decrypt(b))
        return tuple(self._encryptor.encrypt(self._encoder.encode(part, level=self.output_level, slots=ct.slots,
                                                                  scale=ct.scale))
                     for part, ct in ((x.real, a), (x.imag, b)))


__all__ = ["Bootstrapper", "SecretKeyBootstrapper", "bootstrapping_galois_elements", "gen_bootstrapping_keys"]
