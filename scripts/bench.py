"""Engine benchmarks: batched NTT/INTT, element-wise ops, basis conversion, automorphism.

For every op the table gives the median time, the bytes the op must move through memory at the
least (each input read once, each output written once, twiddle tables included), the achieved
bandwidth, and its ratio to the measured device-to-device copy bandwidth.

GPU times are device times: each op is captured K times in a CUDA graph (rotating over input
sets larger than the L2 cache) and the graph is replayed; the median over replays is divided by
K. The "eager" column is the wall time of one call from Python, synchronised, for comparison;
ops that do host work (encoding, constants built on the host) cannot be captured and report
their eager time only.
CPU times are wall-clock medians, with one thread and with all threads. On CUDA the key-switching, CKKS and
bootstrapping rows also run with the reference plan ("[reference plan]": every kernel and composition with a tuned
alternative in its reference version, fhe_core.ops.KernelPlan.reference()), in the same process; the engine rows
with the reference kernels.

    python scripts/bench.py --device cuda --markdown out.md
    python scripts/bench.py --device cpu
"""
from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import statistics
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass

import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

from fhe_core import ops  # noqa: E402
from fhe_core.ops import KernelPlan  # noqa: E402
from fhe_core.ring import BasisConverter, RNSBasis, generate_primes, shoup_constants  # noqa: E402

WORD = 8
LIMBS = 30


@dataclass
class Case:
    name: str
    params: str
    bytes: int
    run: Callable[[int], object]  # run(i): one call on input set i
    reference_us: float | None = None  # a published number for the same op and size (see its suite)
    capture: bool = True  # False: time eager calls only (the call replays a CUDA graph itself)


REFERENCE = "[reference plan]"  # the label of a case run with KernelPlan.reference()


def reference_case(case: Case, run: Callable[[int], object]) -> Case:
    """``case`` again under the reference plan: ``run`` does the same work with reference kernels and compositions."""
    return Case(f"{case.name} {REFERENCE}", case.params, case.bytes, run, capture=case.capture)


def random_residues(basis: RNSBasis, prefix=()) -> torch.Tensor:
    q = basis.moduli[:, 0].view(*([1] * len(prefix)), -1, 1)
    raw = torch.randint(0, 2 ** 62, (*prefix, len(basis), basis.n), dtype=torch.int64, device=basis.device)
    return raw % q


def transform_cases(name: str, params: str, nbytes: int, basis: RNSBasis, xs, ys) -> list[Case]:
    """``basis``'s ``name`` ("ntt" or "intt") of xs[i] into ys[i], with the default kernels and the reference ones."""
    cases = []
    for plan in (basis.plan, KernelPlan.reference()):
        fn = getattr(basis.with_plan(plan), name)
        cases.append(Case(name, params, nbytes, lambda i, fn=fn: fn(xs[i], out=ys[i])))
    cases[1] = reference_case(cases[0], cases[1].run)
    return cases


def key_switch_batch_cases(device: str, n: int, sets: int) -> list[Case]:
    """INTT of [2, 11, N] and [31, N] (ModDown's and ModUp's inverse batches) and NTT of [3, 31, N] (about ModUp's
    forward batch), on N16QP1766L30D3's prime sizes (46-bit P primes, a 60-bit q_0 and 40/41-bit Q primes)."""
    cases = []
    q_bits = [60] + [41] * 15 + [40] * 15
    for op, prefix, bits, label in (("intt", (2,), [46] * 11, "2x11"), ("intt", (), q_bits, "31"),
                                    ("ntt", (3,), q_bits, "3x31")):
        limbs = len(bits)
        basis = RNSBasis.get(generate_primes(bits, n), n, device)
        xs = [random_residues(basis, prefix) for _ in range(sets)]
        ys = [torch.empty_like(x) for x in xs]
        rows = (prefix[0] if prefix else 1) * limbs
        params, nbytes = f"N=2^16, {rows} rows", 2 * rows * n * WORD + 2 * limbs * n * WORD
        for case in transform_cases(op, params, nbytes, basis, xs, ys):
            cases.append(Case(case.name.replace(op, f"{op} {label}", 1), case.params, case.bytes, case.run))
    return cases


def make_cases(device: str, sets: int) -> list[Case]:
    cases: list[Case] = []
    for log_n in (16, 17):
        n = 1 << log_n
        basis = RNSBasis.get(generate_primes([50] * LIMBS, n), n, device)
        xs = [random_residues(basis) for _ in range(sets)]
        ys = [torch.empty_like(x) for x in xs]
        data = LIMBS * n * WORD
        table = 2 * LIMBS * n * WORD  # one twiddle row + its Shoup row per direction
        for name in ("ntt", "intt"):
            cases += transform_cases(name, f"N=2^{log_n}, l={LIMBS}", 2 * data + table, basis, xs, ys)
        if log_n == 16:  # the key switch's batches: ModDown's 2 x 11 P rows, ModUp's 31 Q rows and its forward rows
            cases += key_switch_batch_cases(device, n, sets)

    n = 1 << 16
    basis = RNSBasis.get(generate_primes([50] * LIMBS, n), n, device)
    cts = [random_residues(basis, (2,)) for _ in range(sets)]
    pts = [random_residues(basis) for _ in range(sets)]
    outs = [torch.empty_like(c) for c in cts]
    ct_bytes = 2 * LIMBS * n * WORD
    pt_bytes = LIMBS * n * WORD
    m = basis.moduli
    params = f"[2, {LIMBS}, 2^16]"
    cases.append(Case("add (ct+ct)", params, 3 * ct_bytes,
                      lambda i: ops.add(cts[i], cts[(i + 1) % sets], m, out=outs[i])))
    cases.append(Case("mul (ct*ct)", params, 3 * ct_bytes,
                      lambda i: ops.mul(cts[i], cts[(i + 1) % sets], m, out=outs[i])))
    cases.append(Case("mul (ct*pt)", params + " x [30, 2^16]", 2 * ct_bytes + pt_bytes,
                      lambda i: ops.mul(cts[i], pts[i], m, out=outs[i])))
    consts = shoup_constants([3 ** 40 + k for k in range(LIMBS)], basis.primes, device)
    cases.append(Case("mul_const", params, 2 * ct_bytes,
                      lambda i: ops.mul_const(cts[i], *consts, m, out=outs[i])))
    cases.append(Case("mul_add", params, 4 * ct_bytes,
                      lambda i: ops.mul_add(cts[i], cts[(i + 1) % sets], cts[(i + 2) % sets], m, out=outs[i])))
    galois = pow(5, 3, 2 * n)
    cases.append(Case("automorphism_ntt", params, 2 * ct_bytes,
                      lambda i: ops.automorphism_ntt(cts[i], m, galois, out=outs[i])))

    # key-switching inner product at dnum = 3: digits over Q_l u P (30 + 10 limbs), key over Q_L u P
    ks_primes = generate_primes([50] * LIMBS + [60] * 10, n)
    ks_basis = RNSBasis.get(ks_primes, n, device)
    digits = [random_residues(ks_basis, (3,)) for _ in range(sets)]
    keys = [random_residues(ks_basis, (3, 2)) for _ in range(sets)]
    ks_outs = [torch.empty(2, len(ks_basis), n, dtype=torch.int64, device=device) for _ in range(sets)]
    limbs_qp = len(ks_basis) * n * WORD
    cases.append(Case("ks_inner_product", "dnum=3, 30+10 limbs, 2^16", (3 + 6 + 2) * limbs_qp,
                      lambda i: ops.ks_inner_product(digits[i], keys[i], LIMBS, LIMBS, ks_basis.moduli,
                                                     out=ks_outs[i])))

    primes = generate_primes([50] * 10 + [60] * 30, n)
    src, dst = RNSBasis.get(primes[:10], n, device), RNSBasis.get(primes[10:], n, device)
    ins = [random_residues(src) for _ in range(sets)]
    conv_outs = [torch.empty(30, n, dtype=torch.int64, device=device) for _ in range(sets)]
    cases += conversion_cases("bconv 10->30", 40 * n * WORD, src, dst, ins, conv_outs, exact=False)
    # ModDown's shape: 11 special primes -> 31, exact (centred), both components
    primes = generate_primes([46] * 11 + [41] * 31, n)
    src, dst = RNSBasis.get(primes[:11], n, device), RNSBasis.get(primes[11:], n, device)
    ins_down = [random_residues(src, (2,)) for _ in range(sets)]
    outs_down = [torch.empty(2, 31, n, dtype=torch.int64, device=device) for _ in range(sets)]
    cases += conversion_cases("bconv 11->31 exact x2", 2 * 42 * n * WORD, src, dst, ins_down, outs_down, exact=True)
    return cases


def conversion_cases(name: str, nbytes: int, src: RNSBasis, dst: RNSBasis, ins, outs, *, exact: bool) -> list[Case]:
    """Conv src -> dst of ins[i] into outs[i]: canonical and lazy, with the default kernel and the reference one."""
    cases = []
    for plan in (src.plan, KernelPlan.reference()):
        conv = BasisConverter.get(src.with_plan(plan), dst)
        for lazy in (False, True):
            run = lambda i, conv=conv, lazy=lazy: conv(ins[i], exact=exact, lazy=lazy, out=outs[i])  # noqa: E731
            case = Case(f"{name}{' lazy' if lazy else ''}", "N=2^16", nbytes, run)
            cases.append(case if plan == src.plan else reference_case(case, run))
    return cases


def make_keyswitch_cases(device: str) -> list[Case]:
    """Hybrid key switching at the N16QP1766L30D3 preset (N = 2^16, L = 30, dnum = 3, alpha = 11),
    top level, with the context's plan and the reference plan. Bytes: the minimum a fused implementation must move,
    in limb-polys of N words (ModUp 157, inner product 462 of which 252 are the key, ModDown 146; a rotation adds
    the automorphism's read and write of the first component)."""
    from fhe_core import rlwe
    from fhe_core.params import preset

    params = preset("N16QP1766L30D3", device=device)
    ctx = rlwe.RLWEContext.from_params(params, device=device)
    reference = rlwe.RLWEContext.from_params(params, device=device, plan=KernelPlan.reference())
    sk = rlwe.gen_secret_key(ctx)
    steps = [1, 2, 3, 4]
    galois = [rlwe.galois_element_for_rotation(r, params.n) for r in steps]
    keys = rlwe.gen_eval_keys(ctx, sk, galois)
    level = params.max_level
    poly = ops.sample_uniform(params.q_basis(level).moduli, params.n, b"\x07" * 32, 0)
    ct = rlwe.encrypt_sk(ctx, sk, poly, level)
    key = keys.galois_key(galois[0], "bench")
    digits = rlwe.decompose_mod_up(ctx, ct.data[1], level)
    extended = rlwe.inner_product(ctx, digits, key, level)
    limb_poly = params.n * WORD
    name = "N=2^16, L=30, dnum=3"
    cases = []
    for c in (ctx, reference):
        step_cases = [
            Case("mod_up", name, 157 * limb_poly, lambda i, c=c: rlwe.decompose_mod_up(c, ct.data[1], level)),
            Case("inner_product (fused)", name, 462 * limb_poly,
                 lambda i, c=c: rlwe.inner_product(c, digits, key, level)),
            Case("mod_down", name, 146 * limb_poly, lambda i, c=c: rlwe.mod_down(c, extended, level)),
            Case("HRotate (apply_galois)", name, (765 + 124) * limb_poly,
                 lambda i, c=c: rlwe.apply_galois(c, ct, galois[0], keys)),
            Case("hoisted rotation x4 (all 4)", name, (157 + 4 * (608 + 124)) * limb_poly,
                 lambda i, c=c: rlwe.apply_galois_hoisted(c, ct, galois, keys))]
        cases += step_cases if c is ctx else [reference_case(case, case.run) for case in step_cases]
    return cases


# Linear against hybrid key switching (issue 30): CKKS chains of a 60-bit q_0 and l 40-bit scaling primes.
LINEAR_KS_LOG_N = (14, 15, 16)
LINEAR_KS_LEVELS = (8, 16, 24, 32)
LINEAR_KS_CPU = ((14, 8), (14, 16))  # the CPU runs only these (the larger keys take GBs and minutes to make)
HYBRID_DNUMS = (2, 3, 4)             # hybrid at each of these (its best is the row to compare with)


def make_linear_keyswitch_cases(device: str) -> list[Case]:
    """Relinearization and rotation (top level, unchecked engine steps: fhe_core.rlwe.switching) with linear key
    switching (one 61-bit special prime, the paper's alpha = 1) and hybrid at dnum 2, 3, 4 (alpha = ceil((l+1) /
    dnum) special primes of 60 bits), at log N 14, 15, 16 and l = 8, 16, 24, 32 (CUDA; the CPU runs LINEAR_KS_CPU).
    Insecure above log QP's 128-bit bound (the paper's sizes; allow_insecure). The parameters column gives each key's
    bytes (one relinearization or Galois key); bytes moved: the key read once plus the ciphertext in and out."""
    import dataclasses

    from fhe_core import rlwe
    from fhe_core.params import Params, ParamsLiteral
    from fhe_core.rlwe import switching

    configs = LINEAR_KS_CPU if device == "cpu" else [(n, lv) for n in LINEAR_KS_LOG_N for lv in LINEAR_KS_LEVELS]
    cases = []
    for log_n, levels in configs:
        base = ParamsLiteral(log_n=log_n, log_q=[60] + [40] * levels, log_p=[61], log_default_scale=40)
        literals = [("linear", dataclasses.replace(base, key_switching="linear"))]
        literals += [(f"hybrid dnum={d}", dataclasses.replace(base, log_p=[60] * -(-(levels + 1) // d)))
                     for d in HYBRID_DNUMS]
        for method, literal in literals:
            params = Params.from_literal(literal, allow_insecure=True, device=device)
            ctx = rlwe.RLWEContext.from_params(params, device=device)
            sk = rlwe.gen_secret_key(ctx)
            element = rlwe.galois_element_for_rotation(1, params.n)
            keys = rlwe.gen_eval_keys(ctx, sk, [element])
            relin, galois = keys.relin_key("bench"), keys.galois_key(element, "bench")
            level = params.max_level
            poly = ops.sample_uniform(params.q_basis(level).moduli, params.n, b"\x07" * 32, 0)
            ct = rlwe.encrypt_sk(ctx, sk, poly, level)
            ct3 = ct.replace(data=torch.cat((ct.data, ct.data[1:])))
            key_bytes = relin.data.numel() * WORD
            moved = key_bytes + 5 * (level + 1) * params.n * WORD
            label = f"N=2^{log_n}, l={levels}, key {key_bytes / 2**20:.1f} MiB"
            cases += [Case(f"keyswitch-linear {method} relinearize", label, moved,
                           lambda i, c=ctx, x=ct3, k=relin, lv=level: switching.relinearize(c, x, k, lv)),
                      Case(f"keyswitch-linear {method} rotate", label, moved - (level + 1) * params.n * WORD,
                           lambda i, c=ctx, x=ct, k=galois, e=element, lv=level:
                           switching.apply_galois(c, x, e, k, lv))]
    return cases


# The reference design ("Over 100x Faster Bootstrapping", V100, N = 2^16, dnum = 3), in us.
REFERENCE_V100_US = {"HMult + relin": 2960.0, "HRotate": 2550.0, "rescale": 490.0}
# "Homomorphic Encryption on GPU" (BFV of SEAL, RTX 3060 Ti), in us, by log2 N.
REFERENCE_3060TI_US = {
    "multiply": {13: 202, 14: 768, 15: 3757},
    "relinearize": {13: 88.5, 14: 377, 15: 3150},
    "rotate_rows": {13: 103, 14: 459, 15: 3464},
}
BFV_SETS = ("BFVN13QP218L3D4T17", "BFVN14QP438L7D8T17", "BFVN15QP881L14D15T17")


def make_bfv_cases(device: str, sets=BFV_SETS, key_switching: str = "hybrid") -> list[Case]:
    """BFV at SEAL's 128-bit default sets (t = 65537), top level. Bytes: ciphertext operands read
    and the result written (key switching moves more; see the CKKS suite). ``key_switching``: the
    method the presets run with (their own primes either way)."""
    import dataclasses

    import numpy as np

    from fhe_core import bfv, rlwe
    from fhe_core.params import Params, preset_literal

    cases = []
    for name in sets:
        literal = dataclasses.replace(preset_literal(name), key_switching=key_switching)
        ctx = bfv.BFVContext(Params.from_literal(literal, device=device, allow_insecure=name.endswith("Insecure")))
        sk = rlwe.gen_secret_key(ctx.rlwe)
        keys = rlwe.gen_eval_keys(ctx.rlwe, sk, bfv.galois_elements(ctx.n, [1]))
        encoder, encryptor = bfv.BatchEncoder(ctx), bfv.Encryptor(ctx, sk)
        rng = np.random.default_rng(2)
        pa, pb = (encoder.encode(rng.integers(0, ctx.t, ctx.n)) for _ in range(2))
        ev, ca, cb = bfv.Evaluator(ctx, keys), encryptor.encrypt(pa), encryptor.encrypt(pb)
        product = ev.multiply(ca, cb)
        ct_bytes = 2 * len(ctx.params.q_primes) * ctx.n * WORD
        log_n = ctx.params.log_n
        for op, fn, moved in (
            ("add", lambda ev=ev, a=ca, b=cb: ev.add(a, b), 3 * ct_bytes),
            ("multiply_plain", lambda ev=ev, a=ca, b=pb: ev.multiply_plain(a, b), 2 * ct_bytes),
            ("multiply", lambda ev=ev, a=ca, b=cb: ev.multiply(a, b), 3.5 * ct_bytes),
            ("relinearize", lambda ev=ev, p=product: ev.relinearize(p), 2.5 * ct_bytes),
            ("multiply_relin", lambda ev=ev, a=ca, b=cb: ev.multiply_relin(a, b), 3 * ct_bytes),
            ("rotate_rows", lambda ev=ev, a=ca: ev.rotate_rows(a, 1), 2 * ct_bytes),
            ("mod_switch_to_next", lambda ev=ev, a=ca: ev.mod_switch_to_next(a), 2 * ct_bytes),
        ):
            label = name if key_switching == "hybrid" else f"{name}, {key_switching} key switching"
            cases.append(Case(f"bfv {op}", label, int(moved), lambda i, fn=fn: fn(),
                              REFERENCE_3060TI_US.get(op, {}).get(log_n)))
        if device == "cuda":  # the same calls replayed from CUDA graphs (Evaluator.graphed(): eager time only)
            graphed = ev.graphed()
            for op, fn in (("multiply", lambda g=graphed, a=ca, b=cb: g.multiply(a, b)),
                           ("relinearize", lambda g=graphed, p=product: g.relinearize(p)),
                           ("multiply_relin", lambda g=graphed, a=ca, b=cb: g.multiply_relin(a, b)),
                           ("rotate_rows", lambda g=graphed, a=ca: g.rotate_rows(a, 1)),
                           ("mod_switch_to_next", lambda g=graphed, a=ca: g.mod_switch_to_next(a))):
                cases.append(Case(f"bfv {op} (graphed)", label, 0, lambda i, fn=fn: fn(), capture=False))
    return cases


def make_bfv_linear_cases(device: str) -> list[Case]:
    """Key switching at the tree models' BFV presets (apps.xgboost.encrypted.SECURE_PRESETS: alpha = 1, so hybrid
    already has one prime per digit, the paper's baseline), by both methods."""
    sets = ("BFVN13QP218L3D4T20", "BFVN14QP438L7D8T20")
    return [case for method in ("hybrid", "linear") for case in make_bfv_cases(device, sets, method)
            if case.name in ("bfv relinearize", "bfv multiply_relin", "bfv rotate_rows")]


def make_ckks_cases(device: str) -> list[Case]:
    """CKKS at N16QP1766L30D3 (N = 2^16, 30 levels, dnum = 3), top level, full slots. Bytes: the
    ciphertext operands read and the result written (the key-switching ops add their minimum,
    see make_keyswitch_cases)."""
    import numpy as np

    from fhe_core import rlwe
    from fhe_core.ckks import Decryptor, Encoder, Encryptor, Evaluator, galois_elements, rlwe_context
    from fhe_core.params import preset

    params = preset("N16QP1766L30D3", device=device)
    ctx = rlwe_context(params)
    sk = rlwe.gen_secret_key(ctx)
    steps = [1, 2, 3, 4, 5, 6, 7, 8]
    keys = rlwe.gen_eval_keys(ctx, sk, galois_elements(params.n, steps))
    encoder, encryptor, decryptor = Encoder(params), Encryptor(params, sk), Decryptor(params, sk)
    evaluator = Evaluator(params, keys)
    rng = np.random.default_rng(1)
    z = rng.uniform(-1, 1, params.slots) + 1j * rng.uniform(-1, 1, params.slots)
    pt = encoder.encode(z)
    a, b = encryptor.encrypt(pt), encryptor.encrypt(encoder.encode(z[::-1].copy()))
    unscaled = evaluator.mul_relin(a, b)
    limbs = params.max_level + 1
    ct, limb_poly = 2 * limbs * params.n * WORD, params.n * WORD
    name = "N=2^16, L=30, dnum=3"
    reference = Evaluator(params, keys, plan=KernelPlan.reference())
    cases = [
        Case("encode", name, ct // 2, lambda i: encoder.encode(z)),
        Case("encrypt (sk)", name, ct, lambda i: encryptor.encrypt(pt)),
        Case("decrypt + decode", name, ct, lambda i: encoder.decode(decryptor.decrypt(a))),
        Case("HAdd", name, 3 * ct, lambda i: evaluator.add(a, b)),
        Case("CMult (ct x pt)", name, 2 * ct + ct // 2, lambda i: evaluator.mul(a, pt)),
    ]
    for ev in (evaluator, reference):  # the key-switching and NTT-bound ops with the reference plan too
        op_cases = [
            Case("HMult + relin", name, 3 * ct + (765 - 124) * limb_poly, lambda i, ev=ev: ev.mul_relin(a, b),
                 REFERENCE_V100_US["HMult + relin"]),
            Case("rescale", name, 2 * ct, lambda i, ev=ev: ev.rescale(unscaled), REFERENCE_V100_US["rescale"]),
            Case("HRotate", name, 2 * ct + 765 * limb_poly, lambda i, ev=ev: ev.rotate(a, 1),
                 REFERENCE_V100_US["HRotate"]),
            Case("hoisted, 8 rotations", name, 2 * ct + (157 + 8 * 732) * limb_poly,
                 lambda i, ev=ev: ev.rotate_hoisted(a, steps))]
        cases += op_cases if ev is evaluator else [reference_case(case, case.run) for case in op_cases]
    cases.append(Case("relin key generation", name, 2 * 3 * (11 + limbs) * limb_poly,
                      lambda i: rlwe.gen_relin_key(ctx, sk)))
    return cases


BOOT_REFERENCE_V100_US = 328000  # "Over 100x Faster Bootstrapping": full-slot N = 2^16 bootstrapping, V100


def count_key_switches(fn) -> tuple[int, int]:
    """(key switches, bytes of switching key they read) during fn(): every key switch (relinearize,
    rotate, hoisted rotation) goes through one of the inner products of ``fhe_core.rlwe.switching`` (the
    unchecked steps that the public ``rlwe.keyswitch`` and the evaluators call): ``inner_product``,
    ``ntt_inner_product`` (in ModUp's last NTT pass: KernelPlan.inner_product_in_mod_up) or, with the fused
    circuit (KernelPlan.fused_circuit), ``inner_product_into``, ``inner_product_babies_into`` and
    ``inner_product_pair_into`` (two key switches of a batched pair reading the key once); each reads the digits'
    rows of the key, ``[digits, 2, alpha + l + 1, N]``."""
    from fhe_core.rlwe import switching

    names = ("inner_product", "ntt_inner_product", "inner_product_into", "inner_product_pair_into",
             "inner_product_babies_into")
    originals = {name: getattr(switching, name) for name in names}
    seen = [0, 0]

    def counting(name):
        def count(ctx, digits, *args, **kwargs):  # (the pair: two key switches, one read of the key)
            switches = len(args[0]) if name == "inner_product_babies_into" else 1  # (args[0]: the keys)
            seen[0] += 2 if name == "inner_product_pair_into" else switches
            seen[1] += switches * digits.shape[0] * 2 * digits.shape[1] * digits.shape[2] * WORD
            return originals[name](ctx, digits, *args, **kwargs)
        return count

    for name in originals:
        setattr(switching, name, counting(name))
    try:
        fn()
    finally:
        for name, original in originals.items():
            setattr(switching, name, original)
    return seen[0], seen[1]


def make_sparse_boot_cases(device: str) -> list[Case]:
    """The boot suite at N16_H192_SPARSE (2^13 slots: SubSum, EvalMod once on the packed real and
    imaginary parts), without the larger-baby-step variant."""
    from fhe_core.ckks.bootstrapping import N16_H192_SPARSE

    return make_boot_cases(device, N16_H192_SPARSE, variants=False)


def make_dense_boot_cases(device: str) -> list[Case]:
    """The boot suite at N16_DENSE_FULL (a dense main secret, sparse-secret encapsulation with h' = 32, K = 16,
    EvalMod depth 9, 16 levels left), without the larger-baby-step variant."""
    from fhe_core.ckks.bootstrapping import N16_DENSE_FULL

    return make_boot_cases(device, N16_DENSE_FULL, variants=False)


def make_boot_cases(device: str, bparams=None, *, allow_insecure: bool = False, variants: bool = True) -> list[Case]:
    """CKKS bootstrapping at N16_H192_FULL (N = 2^16, 2^15 slots, h = 192, 128-bit): the whole
    ``bootstrap(ct)`` (reference: the reference design's 328 ms on a V100), each public step, and
    the variants: single-hoisted linear transforms (the DFTs before double hoisting, all else as now), two real
    ciphertexts in one ``bootstrap_pair``, the graphed bootstrapper called from Python (on CUDA;
    its eager column is the point), and the DFTs with twice the default baby step
    (``baby_step_factor=2``, its own, larger key set).
    Builds the keys of ``gen_bootstrapping_keys`` once (8.6 GB of rotation keys at dnum 7; the encapsulation
    pair too where the preset names an ephemeral weight). Prints the failure probability (ModRaise's overflow
    past K, per coefficient), the precision of one bootstrap (min/mean/max bits over all slots, inputs uniform in
    [-1, 1] and in [-8, 8]), the rotation-key memory and the key switches (count, bytes of key they read); all are
    in the params string too. Bytes, for the whole bootstrap and for each step: the input and
    output ciphertexts plus the key-switching keys read (the lower bound on traffic that matters;
    digits and intermediates are not counted).
    Far too slow on a CPU: not in the default suites, run it with ``--only boot``. ``bparams`` /
    ``allow_insecure``: another (tiny, insecure) preset, for the CPU test of this suite."""
    import dataclasses
    import math

    import numpy as np

    from fhe_core import ckks, rlwe
    from fhe_core.ckks.bootstrapping import (N16_H192_FULL, Bootstrapper, bootstrapping_galois_elements,
                                             gen_bootstrapping_keys)

    bparams = N16_H192_FULL if bparams is None else bparams
    params = bparams.params(device=device, allow_insecure=allow_insecure)
    ctx = ckks.rlwe_context(params)
    sk = rlwe.gen_secret_key(ctx)
    elements = bootstrapping_galois_elements(params, bparams)
    keys = gen_bootstrapping_keys(params, bparams, sk)
    boot = Bootstrapper(params, bparams, keys)
    encoder, encryptor, decryptor = ckks.Encoder(params), ckks.Encryptor(params, sk), ckks.Decryptor(params, sk)
    rng = np.random.default_rng(1)
    n = bparams.slots

    def bits_of(error: np.ndarray) -> tuple[float, float, float]:
        error = np.maximum(error, 2.0 ** -60)
        return -math.log2(error.max()), -math.log2(error.mean()), -math.log2(error.min())

    def encrypt(z):
        return encryptor.encrypt(encoder.encode(z, level=boot.min_input_level, slots=n))

    def precision(amplitude: float, bootstrapper=boot) -> tuple[float, float, float]:
        """(min, mean, max) bits over all slots, real and imaginary parts uniform in [-a, a]."""
        z = amplitude * (rng.uniform(-1, 1, n) + 1j * rng.uniform(-1, 1, n))
        out = bootstrapper.bootstrap(encrypt(z))
        return bits_of(np.abs(encoder.decode(decryptor.decrypt(out)) - z))

    def pair_precision() -> tuple[float, float, float]:
        """The same over both real outputs of bootstrap_pair, inputs uniform in [-1, 1]."""
        x, y = rng.uniform(-1, 1, n), rng.uniform(-1, 1, n)
        out = boot.bootstrap_pair(encrypt(x), encrypt(y))
        return bits_of(np.concatenate([np.abs(encoder.decode(decryptor.decrypt(o)) - v) for o, v in zip(out, (x, y))]))

    ct = encrypt(rng.uniform(-1, 1, n))
    ct_b = encrypt(rng.uniform(-1, 1, n))
    key_switches = count_key_switches(lambda: boot.bootstrap(ct))
    bits, bits8, bits_pair = precision(1.0), precision(8.0), pair_precision()
    limbs_qp = len(params.q_primes) + len(params.p_primes)
    key_bytes = len(elements) * params.dnum * 2 * limbs_qp * params.n * WORD
    failure = math.log2(max(bparams.failure_probability()[0], 2.0 ** -1000))
    print(f"boot: {bparams.describe()}; failure probability 2^{failure:.1f} per coefficient (K = {bparams.k:g}); "
          f"{len(elements)} Galois keys, dnum {params.dnum}, "
          f"rotation keys {key_bytes / 1e9:.1f} GB; {key_switches[0]} key switches reading "
          f"{key_switches[1] / 1e9:.1f} GB of keys; precision min {bits[0]:.2f} / mean {bits[1]:.2f} / "
          f"max {bits[2]:.2f} bits on [-1, 1], {bits8[0]:.2f} / {bits8[1]:.2f} / {bits8[2]:.2f} on [-8, 8], "
          f"bootstrap_pair (real parts) {bits_pair[0]:.2f} / {bits_pair[1]:.2f} / {bits_pair[2]:.2f}",
          flush=True)
    # the steps' inputs, computed once
    raised = boot.sub_sum(boot.mod_raise(ct))
    parts = boot.coeffs_to_slots(raised)
    modded = boot.eval_mod(parts, ct.scale)
    secret = f"h={params.hamming_weight}" + (f" (ephemeral h'={bparams.ephemeral_weight})"
                                             if bparams.ephemeral_weight else "")
    name = (f"N=2^{params.log_n} {n} slots {secret}, L={bparams.max_level}, K={bparams.k:g} fail 2^{failure:.0f}, "
            f"out level {boot.output_level}, "
            f"prec min/mean/max {bits[0]:.1f}/{bits[1]:.1f}/{bits[2]:.1f} b ([-8, 8]: "
            f"{bits8[0]:.1f}/{bits8[1]:.1f}/{bits8[2]:.1f}), "
            f"{len(elements)} keys {key_bytes / 1e9:.1f} GB, {key_switches[0]} key switches")
    ct_bytes = 2 * params.n * WORD  # per limb
    in_out = ct_bytes * (1 + boot.min_input_level) + ct_bytes * (1 + boot.output_level)
    top = ct_bytes * (1 + bparams.max_level)

    def single_hoisted(i):
        boot.double_hoisting = False
        try:
            return boot.bootstrap(ct)
        finally:
            boot.double_hoisting = True

    whole = in_out + key_switches[1]
    cases = [Case("bootstrap", name, whole, lambda i: boot.bootstrap(ct), BOOT_REFERENCE_V100_US),
             Case("bootstrap (single-hoisted DFTs)", name, in_out + count_key_switches(lambda: single_hoisted(0))[1],
                  single_hoisted),
             Case("bootstrap_pair (two real ciphertexts)",
                  f"{name}, pair prec min/mean {bits_pair[0]:.1f}/{bits_pair[1]:.1f} b",
                  2 * in_out + count_key_switches(lambda: boot.bootstrap_pair(ct, ct_b))[1],
                  lambda i: boot.bootstrap_pair(ct, ct_b))]
    if torch.device(device).type == "cuda":
        graphed = boot.graphed()
        same = torch.equal(graphed.bootstrap(ct).data, boot.bootstrap(ct).data) and torch.equal(
            graphed.bootstrap(ct_b).data, boot.bootstrap(ct_b).data)
        print(f"boot: graphed bootstrap (captured on ct, replayed on ct and ct_b) == eager bit for bit: {same}",
              flush=True)
        cases.append(Case("bootstrap (graphed, Python call)", name, whole, lambda i: graphed.bootstrap(ct),
                          capture=False))
    # the reference plan's bootstrapper (the same keys; its own encoded transforms), same run
    reference = Bootstrapper(params, bparams, keys, plan=KernelPlan.reference())
    same = torch.equal(reference.bootstrap(ct).data, boot.bootstrap(ct).data)
    print(f"boot: bootstrap with the reference plan == with the default plan bit for bit: {same}", flush=True)
    cases.append(reference_case(cases[0], lambda i: reference.bootstrap(ct)))
    steps = {  # name: (run, ciphertext bytes in and out)
        "boot: mod_raise": (lambda i: boot.mod_raise(ct), ct_bytes + top),
        "boot: coeffs_to_slots": (lambda i: boot.coeffs_to_slots(raised), 3 * top),
        "boot: eval_mod": (lambda i: boot.eval_mod(parts, ct.scale),
                           (len(parts) + 1) * ct_bytes * (1 + parts[0].level)),
        "boot: slots_to_coeffs": (lambda i: boot.slots_to_coeffs(modded),
                                  ct_bytes * (1 + modded.level) + ct_bytes * (1 + boot.output_level)),
    }
    cases += [Case(step, name, io + count_key_switches(lambda: run(0))[1], run)  # noqa: B023 (called at once)
              for step, (run, io) in steps.items()]
    reference_steps = {"boot: mod_raise": lambda i: reference.mod_raise(ct),
                       "boot: coeffs_to_slots": lambda i: reference.coeffs_to_slots(raised),
                       "boot: eval_mod": lambda i: reference.eval_mod(parts, ct.scale),
                       "boot: slots_to_coeffs": lambda i: reference.slots_to_coeffs(modded)}
    cases += [reference_case(Case(step, name, io, run), reference_steps[step]) for step, (run, io) in steps.items()]
    if len(parts) == 2:  # full packing: the batched pair against two separate evaluations
        from fhe_core.ckks.bootstrapping import EvalModEvaluator

        separate = EvalModEvaluator(boot.evaluator, bparams.eval_mod_parameters(params))
        cases.append(Case("boot: eval_mod (two separate evaluations)", name, steps["boot: eval_mod"][1]
                          + count_key_switches(lambda: [separate.evaluate(p) for p in parts])[1],
                          lambda i: [separate.evaluate(p) for p in parts]))

    if not variants:
        return cases
    wide = dataclasses.replace(bparams, baby_step_factor=2 * bparams.baby_step_factor)
    wide_elements = bootstrapping_galois_elements(params, wide)
    wide_boot = Bootstrapper(params, wide, gen_bootstrapping_keys(params, wide, sk))
    wide_switches = count_key_switches(lambda: wide_boot.bootstrap(ct))
    wide_bits = precision(1.0, wide_boot)
    wide_name = (f"baby steps x{wide.baby_step_factor}: {len(wide_elements)} keys "
                 f"{len(wide_elements) * key_bytes / len(elements) / 1e9:.1f} GB, {wide_switches[0]} key switches, "
                 f"prec min/mean {wide_bits[0]:.1f}/{wide_bits[1]:.1f} b")
    print(f"boot: {wide_name}", flush=True)
    cases += [Case("bootstrap (larger baby steps)", wide_name, in_out + wide_switches[1],
                   lambda i: wide_boot.bootstrap(ct)),
              Case("boot: coeffs_to_slots (larger baby steps)", wide_name, 3 * top,
                   lambda i: wide_boot.coeffs_to_slots(raised))]
    return cases


def copy_bandwidth(device: str) -> float:
    """Bytes read + written per second by a large device-to-device (or host) copy: the best of
    several eager copies of 2 GiB (GPU) or 256 MiB (CPU), timed with events / the wall clock."""
    size = (2 << 30) if device == "cuda" else (1 << 28)
    src = torch.empty(size // 4, dtype=torch.int32, device=device).random_()
    dst = torch.empty_like(src)
    best = float("inf")
    for _ in range(10):
        if device == "cuda":
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            dst.copy_(src)
            end.record()
            end.synchronize()
            best = min(best, start.elapsed_time(end) / 1e3)
        else:
            t0 = time.perf_counter()
            dst.copy_(src)
            best = min(best, time.perf_counter() - t0)
    return 2 * size / best


def time_op(fn: Callable[[int], object], device: str, sets: int = 1, repeats: int = 30,
            per_graph: int = 20, capture: bool = True) -> dict[str, float]:
    """Median seconds per call; on CUDA, from CUDA-graph replays (device time, unless not
    ``capture``) plus eager wall time."""
    if device != "cuda":
        for i in range(2):
            fn(i % sets)
        samples = []
        for r in range(repeats):
            t0 = time.perf_counter()
            fn(r % sets)
            samples.append(time.perf_counter() - t0)
        return {"median": statistics.median(samples)}

    for i in range(3):
        fn(i % sets)
    torch.cuda.synchronize()
    eager = []
    for r in range(repeats):
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        fn(r % sets)
        torch.cuda.synchronize()
        eager.append(time.perf_counter() - t0)
    if not capture:
        return {"median": statistics.median(eager), "eager": statistics.median(eager), "graph": False}
    try:
        samples = graph_replay_times(fn, sets, repeats, per_graph)
    except RuntimeError:  # host work inside (encoding, host-built constants): not capturable
        torch.cuda.synchronize()
        return {"median": statistics.median(eager), "eager": statistics.median(eager), "graph": False}
    return {"median": statistics.median(samples), "p90": sorted(samples)[int(0.9 * len(samples))],
            "eager": statistics.median(eager), "graph": True}


def graph_replay_times(fn: Callable[[int], object], sets: int, repeats: int, per_graph: int) -> list[float]:
    """Seconds per call from replays of a CUDA graph holding `per_graph` calls."""
    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.stream(stream), torch.cuda.graph(graph, stream=stream):
        for i in range(per_graph):
            fn(i % sets)
    torch.cuda.current_stream().wait_stream(stream)
    graph.replay()
    torch.cuda.synchronize()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    samples = []
    for _ in range(repeats):
        start.record()
        graph.replay()
        end.record()
        end.synchronize()
        samples.append(start.elapsed_time(end) / 1e3 / per_graph)
    return samples


def device_name(device: str) -> str:
    if device == "cuda":
        return torch.cuda.get_device_name()
    return f"{platform.processor() or platform.machine()}, {os.cpu_count()} logical CPUs"


# suites that run only with --only NAME (far too slow for the default run, and on a CPU)
OPT_IN_SUITES = ("boot", "boot-sparse", "boot-dense", "boot-lite", "keyswitch-linear", "bfv-linear")


def run(device: str, threads: list[int], only: str | None = None) -> dict:
    sets = 4 if device == "cuda" else 2  # 4 sets of >= 15 MB exceed the 50-60 MB L2
    copy_bw = copy_bandwidth(device)
    rows = []
    suites = {"keyswitch": make_keyswitch_cases, "ckks": make_ckks_cases, "bfv": make_bfv_cases,
              "boot": make_boot_cases, "boot-sparse": make_sparse_boot_cases, "boot-dense": make_dense_boot_cases,
              "boot-lite": lambda device: make_boot_cases(device, variants=False),  # boot without the wide keys
              "keyswitch-linear": make_linear_keyswitch_cases, "bfv-linear": make_bfv_linear_cases}
    default_suites = [name for name in suites if name not in OPT_IN_SUITES]
    if only in suites:
        cases = suites[only](device)
    else:
        cases = make_cases(device, sets) + ([c for name in default_suites for c in suites[name](device)]
                                            if not only else [])
    # a bootstrap takes ~50 ms on a GPU: 10 samples of 5-call graphs instead of 30 of 20 per case
    repeats, per_graph = (10, 5) if only in OPT_IN_SUITES else (30 if device == "cuda" else 5, 20)
    for case in cases:
        if only and only not in suites and only not in case.name:
            continue
        for nthreads in threads:
            if device == "cpu":
                torch.set_num_threads(nthreads)
            t = time_op(case.run, device, sets=sets, repeats=repeats, per_graph=per_graph, capture=case.capture)
            rows.append({"name": case.name, "params": case.params, "threads": nthreads,
                         "us": t["median"] * 1e6, "eager_us": t.get("eager", float("nan")) * 1e6,
                         "graph": t.get("graph", False), "reference_us": case.reference_us,
                         "bytes": case.bytes, "GBps": case.bytes / t["median"] / 1e9,
                         "of_copy": case.bytes / t["median"] / copy_bw})
    return {"device": device_name(device), "kind": device, "date": datetime.date.today().isoformat(),
            "torch": torch.__version__, "copy_GBps": copy_bw / 1e9, "rows": rows}


def markdown(result: dict) -> str:
    lines = [f"### {result['device']} ({result['kind']}), {result['date']}", "",
             f"torch {result['torch']}; measured copy bandwidth {result['copy_GBps']:.0f} GB/s "
             f"(bytes read + written); engine rows on 50-bit primes, scheme rows on their presets' primes.", ""]
    if result["kind"] == "cuda":
        lines += ["| op | parameters | device time (µs) | eager call (µs) | bytes moved (MB) | GB/s | of copy bw "
                  "| reference (µs) |",
                  "| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: |"]
        for r in result["rows"]:
            device_us = f"{r['us']:.1f}" if r["graph"] else "(eager only)"
            ref = f"{r['reference_us']:.0f}" if r.get("reference_us") else ""
            lines.append(f"| {r['name']} | {r['params']} | {device_us} | {r['eager_us']:.1f} | "
                         f"{r['bytes'] / 1e6:.1f} | {r['GBps']:.0f} | {100 * r['of_copy']:.0f}% | {ref} |")
    else:
        lines += ["| op | parameters | threads | time (ms) | bytes moved (MB) | GB/s | of copy bw |",
                  "| --- | --- | ---: | ---: | ---: | ---: | ---: |"]
        for r in result["rows"]:
            lines.append(f"| {r['name']} | {r['params']} | {r['threads']} | {r['us'] / 1e3:.2f} | "
                         f"{r['bytes'] / 1e6:.1f} | {r['GBps']:.1f} | {100 * r['of_copy']:.0f}% |")
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", choices=["cpu", "cuda", "all"], default="all",
                        help="cpu, cuda, or all available (default)")
    parser.add_argument("--threads", type=int, nargs="*", default=None,
                        help="CPU thread counts to measure (default: 1 and all)")
    parser.add_argument("--only", help="run only the ops whose name contains this text, or one suite: "
                                         "'keyswitch', 'ckks', 'bfv', 'boot' (bootstrapping at "
                                         "N16_H192_FULL, only with --only boot; 'boot-sparse' at N16_H192_SPARSE; "
                                         "'boot-dense' at N16_DENSE_FULL (dense secret, encapsulation); "
                                         "'boot-lite': boot without its larger-baby-step variant; "
                                         "'keyswitch-linear': linear vs hybrid key switching, issue 30; "
                                         "'bfv-linear': the same at the tree models' BFV presets) "
                                         "(references: CKKS and boot, the V100 of 'Over 100x "
                                         "Faster Bootstrapping'; BFV, the RTX 3060 Ti of 'Homomorphic Encryption "
                                         "on GPU')")
    parser.add_argument("--json", help="append one JSON line per device to this file")
    parser.add_argument("--markdown", help="write the tables to this markdown file")
    args = parser.parse_args()
    devices = ["cpu", "cuda"] if args.device == "all" else [args.device]
    devices = [d for d in devices if d == "cpu" or torch.cuda.is_available()]
    if args.device == "cuda" and not torch.cuda.is_available():
        parser.error("--device cuda needs a CUDA device")
    threads = args.threads or sorted({1, torch.get_num_threads()})
    sections = []
    for device in devices:
        result = run(device, threads if device == "cpu" else [1], args.only)
        text = markdown(result)
        print(text)
        sections.append(text)
        if args.json:
            with open(args.json, "a") as f:
                f.write(json.dumps(result) + "\n")
    if args.markdown:
        with open(args.markdown, "w") as f:
            f.write("\n".join(sections))


if __name__ == "__main__":
    main()
