"""Thin wrappers over ``torch.ops.fhe_core.*``: the only module that calls the extension.

Shapes and conventions (docs/ARCHITECTURE.md):
    residues    int64 tensors ``[..., l, N]`` (limb-major), canonical in ``[0, q_i)`` between ops;
    moduli      ``[l, 4]`` int64 per-prime constants (``ring.modulus_table``);
    ntt_table   ``[l, 4, N]`` int64 twiddles with Shoup companions (``ring.RNSBasis``); on CUDA
                ``[l, 12, N]``, with the same words again as (w, w') and FP64 pairs (``ntt_table(pairs=True)``).
Every op runs on the device of its inputs (CPU or CUDA) and gives bit-identical results on
both. Functional forms return new tensors; pass ``out=`` to reuse a buffer. The ops with a choice
of CUDA kernels take ``plan=`` (a :class:`KernelPlan`; default :data:`TUNED`): every choice gives
the same words.

Layer: the lowest of fhe_core (imports only fhe_core.errors and the extension fhe_core._C, which
no other module imports); ring and everything above call these wrappers.
"""
from __future__ import annotations

import torch

from fhe_core.ops import _extension  # noqa: F401  (loads the extension)
from fhe_core.ops.plan import TUNED, KernelPlan

_ops = torch.ops.fhe_core
Tensor = torch.Tensor

__all__ = [
    "cuda_built", "cpu_path", "cpu_path_supported", "set_cpu_path",
    "ntt", "intt", "intt_galois", "intt_product", "mod_down_ntt",
    "add", "sub", "neg", "mul", "mul_const", "sub_mul_const",
    "mul_add", "tensor_product", "bconv", "center_lift", "mod_up_conv", "conv_mma_fragments", "ks_inner_product",
    "ntt_inner_product",
    "automorphism_ntt", "automorphism_coeff", "sample_uniform", "sample_cbd", "sample_ternary",
    "ntt_table", "seed_words", "ks_inner_product_fused",
    "linear_combination", "giant_products", "ks_inner_product_pair", "ks_inner_product_babies",
    "KernelPlan", "TUNED",
]


def cuda_built() -> bool:
    """True when the extension was compiled with its CUDA kernels."""
    return bool(_ops.cuda_built())


def cpu_path() -> str:
    """The CPU kernels' arithmetic in this process: "ifma" (AVX-512 IFMA), "avx2" (the portable vector path:
    AVX2 + FMA) or "scalar". The best this CPU supports unless FHE_CORE_CPU_SIMD says otherwise ("0": scalar,
    "avx2": at most AVX2), read at the first kernel call. Every path gives the same words."""
    return str(_ops.cpu_path())


def cpu_path_supported() -> str:
    """The best CPU path this machine can run (whatever FHE_CORE_CPU_SIMD says)."""
    return str(_ops.cpu_path_supported())


def set_cpu_path(path: str) -> None:
    """Switches the CPU kernels to ``path`` ("ifma", "avx2" or "scalar") for the calls that start afterwards
    (tests run each path this way); RuntimeError for a path this CPU cannot run."""
    _ops.set_cpu_path(path)


def _call(op, args, out):
    return op(*args) if out is None else op.out(*args, out=out)


def ntt(a: Tensor, moduli: Tensor, table: Tensor, *, skip: tuple[int, int, int] | None = None,
        plan: KernelPlan = TUNED, out: Tensor | None = None) -> Tensor:
    """Forward negacyclic NTT of every limb.

    a: ``[..., l, N]`` coefficients -> ``[..., l, N]`` NTT domain (slot k holds the value at
    psi^(2*brv(k)+1)). N in [2^10, 2^17]. ``out`` may be ``a`` (in place).
    skip = (begin, stride, length): in batch b of ``[..., l, N]`` (flattened leading dims), limbs
    ``begin + b*stride <= i < begin + b*stride + length`` are not transformed: ``out`` keeps what it
    held there (the functional form copies a's rows). ModUp leaves each digit's own primes alone.
    ``a`` may also be a strided ``[B, l, N]`` view of contiguous ``[l, N]`` blocks (e.g. the first l
    rows of each component, ``c[:, :l]``), read in place into a new or separate ``out``.
    """
    return _call(_ops.ntt, (a, moduli, table, plan.kernel_flags, skip), out)


def intt(a: Tensor, moduli: Tensor, table: Tensor, *, skip: tuple[int, int, int] | None = None,
         plan: KernelPlan = TUNED, out: Tensor | None = None) -> Tensor:
    """Inverse of :func:`ntt` (including the 1/N factor); ``skip`` as there. ``out`` may be ``a``."""
    return _call(_ops.intt, (a, moduli, table, plan.kernel_flags, skip), out)


def mod_down_ntt(x: Tensor, c: Tensor, p_rows: int, consts: Tensor, consts_shoup: Tensor, moduli: Tensor,
                 table: Tensor, add: Tensor | None = None, *, add_galois: int = 1, plan: KernelPlan = TUNED,
                 out: Tensor | None = None) -> Tensor:
    """ModDown's tail in one pass: ``out[b] = (c[b, p_rows:] - NTT(x[b])) * consts (+ add[b])`` mod q_i.

    x: ``[B, l, N]`` coefficients (the conversion of c's P part); c: ``[B, p_rows + l, N]`` NTT
    domain over (P, Q_l); consts, consts_shoup: ``[l]`` (P^-1 mod q_i, Shoup); add: ``[B', l, N]``
    with B' <= B, added to the first B' batches (relinearization's (d0, d1), a rotation's
    sigma(c0)). On CUDA all of it happens in the NTT's last store; ``out`` may be ``x``. With
    ``add_galois`` k != 1 (odd, in [1, 2N)) it adds ``automorphism_ntt(add, moduli, k)`` instead, read
    in place by that store on CUDA (a rotation's sigma(c0) without its own pass; add contiguous).
    """
    return _call(_ops.mod_down_ntt, (x, c, p_rows, consts, consts_shoup, moduli, table, plan.kernel_flags, add,
                                     add_galois), out)


def intt_galois(a: Tensor, moduli: Tensor, table: Tensor, galois: int, *, store_permuted: bool = True,
                plan: KernelPlan = TUNED) -> tuple[Tensor, Tensor]:
    """``(intt(sigma), sigma)`` with ``sigma = automorphism_ntt(a, moduli, galois)``: a rotation's ModUp
    input. a: contiguous ``[..., l, N]`` NTT domain. On CUDA (``plan.tuned_ntt``) the inverse NTT reads
    sigma straight from ``a`` (in bit-reversed order a Galois map sends each aligned run of 8 slots onto
    another one) and stores it on the way, one pass fewer over the rows.
    ``store_permuted=False``: the caller needs only the first (it reads sigma from ``a`` itself, e.g.
    :func:`ntt_inner_product`'s ``own_galois``); the second is then unspecified where the kernel skips its store.
    """
    return _ops.intt_galois(a, moduli, table, plan.kernel_flags, galois, store_permuted)


def intt_product(a: Tensor, b: Tensor, moduli: Tensor, table: Tensor, *,
                 plan: KernelPlan = TUNED) -> tuple[Tensor, Tensor]:
    """``(intt(p), p)`` with ``p = mul(a, b, moduli)``: HMult's ModUp input (d2 = a1 b1 of the tensor product).
    a, b: contiguous ``[..., l, N]`` NTT domain, one shape. On CUDA (``plan.tuned_ntt``, 16-byte aligned) the
    inverse NTT reads a and b, transforms their products and stores them on the way: no d2 pass before it."""
    return _ops.intt_product(a, b, moduli, table, plan.kernel_flags)


def add(a: Tensor, b: Tensor, moduli: Tensor, *, out: Tensor | None = None) -> Tensor:
    """(a + b) mod q_i. ``b`` has a's shape or a trailing part of it (broadcast over leading dims)."""
    return _call(_ops.add, (a, b, moduli), out)


def sub(a: Tensor, b: Tensor, moduli: Tensor, *, out: Tensor | None = None) -> Tensor:
    """(a - b) mod q_i, with b broadcast as in :func:`add`."""
    return _call(_ops.sub, (a, b, moduli), out)


def neg(a: Tensor, moduli: Tensor, *, out: Tensor | None = None) -> Tensor:
    """(-a) mod q_i."""
    return _call(_ops.neg, (a, moduli), out)


def mul(a: Tensor, b: Tensor, moduli: Tensor, *, out: Tensor | None = None) -> Tensor:
    """(a * b) mod q_i (Barrett on the 128-bit product), b broadcast as in :func:`add`."""
    return _call(_ops.mul, (a, b, moduli), out)


def mul_const(a: Tensor, consts: Tensor, consts_shoup: Tensor, moduli: Tensor, *,
              out: Tensor | None = None) -> Tensor:
    """(a * c_i) mod q_i for one constant per limb (Shoup). consts, consts_shoup: ``[l]``; see
    :func:`fhe_core.ring.shoup_constants`."""
    return _call(_ops.mul_const, (a, consts, consts_shoup, moduli), out)


def sub_mul_const(a: Tensor, b: Tensor, consts: Tensor, consts_shoup: Tensor, moduli: Tensor, *,
                  out: Tensor | None = None) -> Tensor:
    """((a - b) * c_i) mod q_i in one pass, b broadcast as in :func:`add`: the last step of ModDown
    and rescale ((c - Conv(c_P)) * P^-1). consts, consts_shoup: ``[l]``."""
    return _call(_ops.sub_mul_const, (a, b, consts, consts_shoup, moduli), out)


def mul_add(a: Tensor, b: Tensor, c: Tensor, moduli: Tensor, *, out: Tensor | None = None) -> Tensor:
    """(a * b + c) mod q_i; b broadcast as in :func:`add`, c has a's shape."""
    return _call(_ops.mul_add, (a, b, c, moduli), out)


def tensor_product(a: Tensor, b: Tensor, moduli: Tensor, *, out: Tensor | None = None) -> Tensor:
    """The tensor product of two degree-1 ciphertexts in one pass: a, b ``[2, l, N]`` (NTT domain)
    -> ``[3, l, N]`` = (a0 b0, a0 b1 + a1 b0, a1 b1) mod q_i. ``out`` must not overlap a or b."""
    return _call(_ops.tensor_product, (a, b, moduli), out)


def bconv(a: Tensor, src_moduli: Tensor, dst_moduli: Tensor, qhat_inv: Tensor, qhat_inv_shoup: Tensor,
          qhat_mod_p: Tensor, neg_q_mod_p: Tensor | None = None, *, lazy: bool = False,
          fragments: Tensor | None = None, plan: KernelPlan = TUNED, out: Tensor | None = None) -> Tensor:
    """Basis conversion Conv_{Q->P} (HK20/BEHZ), coefficient domain.

    a: ``[..., l_in, N]`` residues of x mod Q, x in [0, Q) -> ``[..., l_out, N]`` residues of
    x + u*Q mod P for some integer 0 <= u < l_in per coefficient (fast conversion), or, with
    ``neg_q_mod_p`` (``[l_out]``, (-Q) mod p_j; l_in < 64), of the centred representative of x
    (x if x < Q/2, else x - Q): the multiple of Q is computed in double precision and
    subtracted (exact conversion; for x within ~l_in 2^-52 Q of Q/2 either representative may
    come out). Constants from :class:`fhe_core.ring.BasisConverter`. ``lazy=True``: the residues
    may be left in [0, 3 p_j) instead of [0, p_j) (for a forward NTT, which takes [0, 4 p_j) and
    returns canonical values; the CUDA kernel then skips its final corrections). ``fragments``:
    :func:`conv_mma_fragments` of this call's qhat_mod_p, dst_moduli and neg_q_mod_p, on a's device
    (the tensor-core kernel then reads them instead of building them in every block; ``plan.tensor_core_conv``).
    """
    return _call(_ops.bconv, (a, src_moduli, dst_moduli, qhat_inv, qhat_inv_shoup, qhat_mod_p, plan.kernel_flags,
                              neg_q_mod_p, lazy, fragments), out)


def mod_up_conv(coeffs: Tensor, src_moduli: Tensor, qhat_inv: Tensor, qhat_inv_shoup: Tensor,
                dst_moduli: Tensor, qhat_mod_p: Tensor, own: Tensor | None = None, *, lazy: bool = False,
                fragments: Tensor | None = None, copy_own: bool = True, plan: KernelPlan = TUNED,
                out: Tensor | None = None) -> Tensor:
    """ModUp's fast basis extension of every digit at once (HK20), coefficient domain.

    coeffs: ``[q_count, N]`` over Q_l; digit j is rows [j*alpha, (j+1)*alpha) (the last may be
    shorter). qhat_inv: ``[q_count]`` (Q_j/q_k)^-1 mod q_k within each prime's digit;
    qhat_mod_p: ``[dnum, alpha, rows]`` (Q_j/q_k) mod p_r, zero past the last digit's primes.
    Returns ``[dnum, rows, N]``: digit j extended to every prime of the destination, exactly equal
    to the input on the digit's own primes. With ``own`` (``[q_count, N]``, the input in the NTT
    domain; the destination is (P, Q) with Q's primes last), the digits' own rows are copied from it
    instead of converted: ModUp then transforms only the other rows. ``lazy``: as in :func:`bconv`
    (the converted rows may be left in [0, 3 p_r); copied rows are as given); ``fragments``: as in
    :func:`bconv` (:func:`conv_mma_fragments` of qhat_mod_p and dst_moduli). ``copy_own=False``: the own rows are
    not copied and their contents are unspecified (on CUDA they are not written at all; ``own`` only marks them):
    for a consumer that reads them from the input itself (:func:`ntt_inner_product`'s ``own``).
    """
    return _call(_ops.mod_up_conv, (coeffs, src_moduli, qhat_inv, qhat_inv_shoup, dst_moduli, qhat_mod_p,
                                    plan.kernel_flags, own, lazy, fragments, copy_own), out)


def conv_mma_fragments(qhat_mod_p: Tensor, dst_moduli: Tensor, neg_q_mod_p: Tensor | None = None) -> Tensor:
    """The tensor-core Conv's B operands for these constants, computed once (on the CPU) and returned
    on qhat_mod_p's device: int32 ``[dnum, rows, KT, 64]`` (KT = ceil(slots / 4), slots = alpha, + 1
    with neg_q_mod_p) for the ``fragments=`` argument of :func:`bconv` (qhat_mod_p ``[alpha, rows]``,
    and neg_q_mod_p for the exact conversion) and :func:`mod_up_conv` (``[dnum, alpha, rows]``).
    """
    cpu = (qhat_mod_p.cpu(), dst_moduli.cpu(), None if neg_q_mod_p is None else neg_q_mod_p.cpu())
    return _ops.conv_mma_fragments(*cpu).to(qhat_mod_p.device)


def center_lift(a: Tensor, q: int, dst_moduli: Tensor, *, out: Tensor | None = None) -> Tensor:
    """The centered representative of one limb mod q, reduced mod each destination prime.

    a: ``[..., 1, N]`` coefficients mod q (canonical) -> ``[..., l_out, N]`` with
    out[i] = (x if x <= q/2 else x - q) mod p_i: exact (no approximation), the rounding step of
    a division by q (CKKS rescale).
    """
    return _call(_ops.center_lift, (a, q, dst_moduli), out)


def ks_inner_product(digits: Tensor, key: Tensor, q_count: int, p_row: int, moduli: Tensor, *,
                     out: Tensor | None = None) -> Tensor:
    """Hybrid key-switching inner product (HK20), fused: ``[2, limbs, N]`` with
    ``out[c][i] = sum_j digits[j][i] * key[j][c][row(i)] mod q_i``.

    digits: ``[d, limbs, N]`` NTT domain over Q_l u P (q_count primes of Q, then the special
    primes); key: ``[>= d, 2, rows, N]`` over Q_L u P, whose special-prime rows start at ``p_row``
    (row(i) = i for i < q_count, p_row + i - q_count after). Each product is accumulated in 128
    bits and reduced once, so the digits and key are read once and nothing else is written.
    """
    return _call(_ops.ks_inner_product, (digits, key, q_count, p_row, moduli), out)


def ntt_inner_product(digits: Tensor, moduli: Tensor, table: Tensor, key: Tensor, q_count: int, p_row: int, *,
                      skip: tuple[int, int, int] | None = None, own: Tensor | None = None,
                      own_galois: int = 1, tensor: tuple[Tensor, Tensor] | None = None,
                      p_mod_q: Tensor | None = None, plan: KernelPlan = TUNED) -> Tensor:
    """ModUp's forward NTT and the key-switching inner product in one op:
    ``ks_inner_product(ntt(digits, skip=skip), key, q_count, p_row, moduli)``, ``[2, limbs, N]``.

    digits: contiguous ``[d, limbs, N]``, coefficients (a lazy Conv's [0, 3p) is fine) outside the skipped rows and
    NTT domain on them (ModUp's own rows); it is scratch afterwards (its contents are unspecified). On CUDA
    (``plan.tuned_ntt``) the NTT's last pass multiplies each transformed row into the key's rows as it goes, so
    the transformed digits never go to memory; elsewhere the two ops.
    ``own`` (contiguous ``[limbs - skip[0], N]``, NTT domain; needs ``skip``): the skipped rows are read from it
    instead of ``digits``, limb i from its row i - skip[0] (ModUp's input d over Q_l, whose digits' own rows
    those are: :func:`mod_up_conv` with ``copy_own=False`` need not copy them), through sigma_own_galois
    (``automorphism_ntt``) with own_galois k != 1 (a rotation's sigma_k(c1), read from c1).
    ``tensor`` = (a, b) (two contiguous degree-1 ciphertexts ``[2, limbs - skip[0], N]``, NTT domain over Q_l) with
    ``p_mod_q`` (``[limbs - skip[0]]``, P mod q_i; needs ``own``): component c's Q rows also get (P mod q_i) * t_c,
    t_0 = a0 b0, t_1 = a0 b1 + a1 b0, so that ModDown of the result is relinearize(tensor(a, b))'s. Only the CUDA
    digit-group kernel adds them (at most 4 digits, ``plan.tuned_ntt``): elsewhere an error
    (:meth:`KernelPlan.tensor_in_inner_product` says where it runs).
    """
    a, b = tensor if tensor is not None else (None, None)
    return _ops.ntt_inner_product(digits, moduli, table, key, q_count, p_row, plan.kernel_flags, skip, own, own_galois,
                                  a, b, p_mod_q)


def automorphism_ntt(a: Tensor, moduli: Tensor, galois: int, *, out: Tensor | None = None) -> Tensor:
    """X -> X^k on NTT-domain residues (an index permutation). k odd in [1, 2N); out must not alias a."""
    return _call(_ops.automorphism_ntt, (a, moduli, galois), out)


def automorphism_coeff(a: Tensor, moduli: Tensor, galois: int, *, out: Tensor | None = None) -> Tensor:
    """X -> X^k on coefficient-domain residues (a signed permutation). k odd in [1, 2N)."""
    return _call(_ops.automorphism_coeff, (a, moduli, galois), out)


def ks_inner_product_fused(digits: Tensor, key: Tensor, q_count: int, p_row: int, moduli: Tensor, *, out: Tensor,
                           galois: int = 1, add: Tensor | None = None, add_galois: int = 1,
                           accumulate: bool = False) -> Tensor:
    """:func:`ks_inner_product` with its neighbours in the same pass, into ``out``:

        out[c][i][x] = [accumulate] out[c][i][x] + sum_j digits[j][i][g(x)] * key[j][c][row(i)][x]
                       + [c == 0] add[i - (limbs - a)][h(x)]        (last a = add.shape[0] rows only)

    g, h: the NTT-domain automorphisms X -> X^galois, X -> X^add_galois (1: the identity), i.e.
    ``automorphism_ntt`` of the digits and of ``add`` without their permuted copies. out: ``[2, limbs,
    N]`` whose two ``[limbs, N]`` blocks are contiguous (they may be apart: ``buffer[:, i]``); it must
    not overlap the inputs. add: ``[a <= limbs, N]``. Returns out.
    """
    return _ops.ks_inner_product_fused(digits, key, q_count, p_row, moduli, galois, add, add_galois, accumulate,
                                       out=out)


def linear_combination(terms: list[Tensor], weights: Tensor, moduli: Tensor, *, out: Tensor,
                       constant: Tensor | None = None, constant_components: int = 1) -> Tensor:
    """out[b][i][x] = sum_k weights[k][i][x >= N/2] * terms[k][b][i][x] (+ constant[i][x >= N/2] for
    b < constant_components) mod q_i, one pass with one reduction (128-bit sum).

    terms: 1 to 16 tensors ``[B, rows_k >= limbs, N]`` with contiguous ``[rows_k, N]`` blocks (the
    first ``limbs`` rows are read: a ciphertext above the output's level needs no level-dropping
    copy); weights: ``[K, limbs, 2]`` canonical, the NTT-domain values of constants re + im X^(N/2)
    on the two halves of the NTT slots; constant: ``[limbs, 2]``; out: ``[B, limbs, N]`` contiguous,
    not overlapping the terms. Returns out.
    """
    return _ops.linear_combination(list(terms), weights, moduli, constant, constant_components, out=out)


def ks_inner_product_pair(digits_a: Tensor, digits_b: Tensor, key: Tensor, q_count: int, p_row: int, moduli: Tensor,
                          *, out: Tensor) -> Tensor:
    """:func:`ks_inner_product` of two digit sets with one key (the relinearizations of a batched
    pair), each key word read once for both: ``out[c][i] = sum_j digits_i[j] * key[j][c][row]``,
    i = a, b. out: ``[2 (component), 2 (set), limbs, N]`` contiguous. Returns out."""
    return _ops.ks_inner_product_pair(digits_a, digits_b, key, q_count, p_row, moduli, out=out)


def ks_inner_product_babies(digits: Tensor, keys: list[Tensor], galois: list[int], positions: list[int], q_count: int,
                            p_row: int, moduli: Tensor, *, out: Tensor, add: Tensor | None = None) -> Tensor:
    """Several :func:`ks_inner_product_fused` of one digit tensor in one launch (the baby steps of a
    double-hoisted linear transform): for each b, ``out[positions[b]]`` = the digits read through
    sigma_galois[b] times ``keys[b]``, plus sigma_galois[b](add) on the last add.shape[0] rows of
    component 0. keys: 1 to 16, one row count; out: ``[n, 2, limbs, N]`` contiguous. A thread computes
    every baby's output of its coefficient in turn, so the digits come from L2 after the first baby.
    Returns out."""
    return _ops.ks_inner_product_babies(digits, list(keys), list(galois), list(positions), q_count, p_row, moduli,
                                        add, out=out)


def giant_products(babies: Tensor, pts: list[Tensor], index: list[int], moduli: Tensor, *, out: Tensor) -> Tensor:
    """The plaintext products of up to 4 giant steps of a BSGS linear transform in one pass over the
    baby steps: ``out[c][g] = sum_j pts[g][index[g * n1 + j]] * babies[j][c]`` mod q_i over the baby
    positions j whose index is not -1 (each of giant g's plaintexts pairs with exactly one).

    babies: ``[n1 <= 32, 2, limbs, N]``; pts: 1 to 4 tensors ``[m_g <= 63, limbs, N]``; index: ``giants x n1`` ints;
    out: ``[2, giants, limbs, N]``, component-major, each component's ``[giants, limbs, N]`` contiguous (``buffer[:,
    g0:g1]`` of a ``[2, G, limbs, N]`` buffer). Each baby word is read once for all the giants of the call, where
    :func:`ks_inner_product` per giant reads the stack once per giant. Returns out.
    """
    return _ops.giant_products(babies, list(pts), list(index), moduli, out=out)


def seed_words(seed: bytes) -> list[int]:
    """A 32-byte ChaCha20 key as the 8 little-endian 32-bit words the kernels take."""
    if not isinstance(seed, (bytes, bytearray)) or len(seed) != 32:
        raise ValueError(f"a sampling seed must be 32 bytes, got {type(seed).__name__} of length {len(seed)}")
    return [int.from_bytes(seed[4 * i:4 * i + 4], "little") for i in range(8)]


def sample_uniform(moduli: Tensor, n: int, seed: bytes, nonce: int) -> Tensor:
    """``[l, N]`` residues uniform mod each q_i from the ChaCha20 stream (seed, nonce)."""
    return _ops.sample_uniform(moduli, n, seed_words(seed), nonce)


def sample_cbd(moduli: Tensor, n: int, seed: bytes, nonce: int, eta: int) -> Tensor:
    """One centered-binomial polynomial (variance eta/2) lifted to every limb: ``[l, N]``."""
    return _ops.sample_cbd(moduli, n, seed_words(seed), nonce, eta)


def sample_ternary(moduli: Tensor, n: int, seed: bytes, nonce: int, hamming_weight: int = 0) -> Tensor:
    """One ternary polynomial lifted to every limb: ``[l, N]``. With ``hamming_weight`` h > 0 it
    has exactly h nonzero coefficients (+-1); with 0, each coefficient is uniform in {-1, 0, 1}."""
    return _ops.sample_ternary(moduli, n, seed_words(seed), nonce, hamming_weight)


def ntt_table(moduli: Tensor, roots: Tensor, log_n: int, *, pairs: bool = False) -> Tensor:
    """NTT table, built on the CPU, for primes with primitive 2N-th roots ``roots`` ``[l]``: ``[l, 4, N]``
    (rows psi^brv, Shoup, psi^-brv with N^-1 folded, Shoup: all the CPU kernels read), or with ``pairs``
    ``[l, 12, N]``: rows 4-5 and 6-7 the forward and inverse rows again as interleaved (w, Shoup) pairs, rows 8-9
    and 10-11 as FP64 pairs (w, w / q) (what the CUDA kernels read; a CUDA table must have them)."""
    return _ops.ntt_table(moduli, roots, log_n, pairs)


# ---- shape functions for torch.compile / opcheck ---------------------------------------------

def _register_fakes() -> None:
    same_shape = lambda a, *args: torch.empty_like(a)  # noqa: E731
    for name in ("add", "sub", "neg", "mul", "mul_const", "sub_mul_const", "mul_add",
                 "automorphism_ntt", "automorphism_coeff"):
        torch.library.register_fake(f"fhe_core::{name}")(same_shape)

    @torch.library.register_fake("fhe_core::ntt")
    def _(a, moduli, table, plan, skip=None):
        return torch.empty_like(a)

    @torch.library.register_fake("fhe_core::intt")
    def _(a, moduli, table, plan, skip=None):
        return torch.empty_like(a)

    @torch.library.register_fake("fhe_core::tensor_product")
    def _(a, b, moduli):
        return a.new_empty((3, a.shape[-2], a.shape[-1]))

    @torch.library.register_fake("fhe_core::mod_down_ntt")
    def _(x, c, p_rows, consts, consts_shoup, moduli, table, plan, add=None, add_galois=1):
        return torch.empty_like(x)

    @torch.library.register_fake("fhe_core::intt_galois")
    def _(a, moduli, table, plan, galois, store_permuted=True):
        return torch.empty_like(a), torch.empty_like(a)

    @torch.library.register_fake("fhe_core::intt_product")
    def _(a, b, moduli, table, plan):
        return torch.empty_like(a), torch.empty_like(a)

    @torch.library.register_fake("fhe_core::mod_up_conv")
    def _(coeffs, src_moduli, qhat_inv, qhat_inv_shoup, dst_moduli, qhat_mod_p, plan, own=None, lazy=False,
          fragments=None, copy_own=True):
        return coeffs.new_empty((qhat_mod_p.shape[0], dst_moduli.shape[0], coeffs.shape[1]))

    @torch.library.register_fake("fhe_core::center_lift")
    def _(a, q, dst_moduli):
        return a.new_empty((*a.shape[:-2], dst_moduli.shape[0], a.shape[-1]))

    @torch.library.register_fake("fhe_core::ks_inner_product")
    def _(digits, key, q_count, p_row, moduli):
        return digits.new_empty((2, digits.shape[1], digits.shape[2]))

    @torch.library.register_fake("fhe_core::ntt_inner_product")
    def _(digits, moduli, table, key, q_count, p_row, plan, skip=None, own=None, own_galois=1, tensor_a=None,
          tensor_b=None, p_mod_q=None):
        return digits.new_empty((2, digits.shape[1], digits.shape[2]))

    @torch.library.register_fake("fhe_core::bconv")
    def _(a, src_moduli, dst_moduli, qhat_inv, qhat_inv_shoup, qhat_mod_p, plan, neg_q_mod_p=None, lazy=False,
          fragments=None):
        return a.new_empty((*a.shape[:-2], dst_moduli.shape[0], a.shape[-1]))

    def sampled(moduli, n, *args):
        return moduli.new_empty((moduli.shape[0], n))

    for name in ("sample_uniform", "sample_cbd", "sample_ternary"):
        torch.library.register_fake(f"fhe_core::{name}")(sampled)


_register_fakes()
