"""RNS bases of Z[X]/(X^N + 1) with their precomputed, device-resident tables.

An :class:`RNSBasis` holds, on one device, every constant the kernels need for its primes:
the per-prime Barrett constants (``moduli`` [l, 4]) and the NTT twiddles with their Shoup
companions (``ntt_table`` [l, 4, N]; [l, 12, N] on CUDA). A :class:`BasisConverter` holds the
constants of the fast basis conversion between two bases. Both are built once per (primes, N, device) and cached;
prefixes of a basis (the levels of a modulus chain) are views that share the tables. A basis also carries the
kernel plan its transforms and conversions run with (:class:`fhe_core.ops.KernelPlan`; a context's bases carry the
context's plan: :meth:`RNSBasis.with_plan`, the tables shared).
"""
from __future__ import annotations

import functools
from collections.abc import Sequence
from math import prod

import numpy as np
import torch

from fhe_core import ops
from fhe_core.errors import DeviceError, ParameterError
from fhe_core.ops import TUNED, KernelPlan
from fhe_core.ring.primes import MAX_PRIME_BITS, is_prime, primitive_root_2n

MIN_LOG_N = 10
MAX_LOG_N = 17


def resolve_device(device: torch.device | str, op: str = "device") -> torch.device:
    """The concrete device: "cuda" becomes "cuda:<current index>", as on the tensors made there,
    so that device comparisons and caches see one device under one name.

    The one device check of fhe_core (parameters, contexts, bases, deserialization): DeviceError
    naming ``op`` for a malformed name, a device type other than cpu and cuda, CUDA where torch
    has no CUDA or no GPU, or a GPU index past the last one.
    """
    try:
        resolved = torch.device(device)
    except (RuntimeError, TypeError, ValueError):
        raise DeviceError(f"{op}: {device!r} is not a device name; use 'cpu', 'cuda' or 'cuda:<index>'") from None
    if resolved.type == "cpu":
        return resolved
    if resolved.type != "cuda":
        raise DeviceError(f"{op}: fhe_core runs on 'cpu' and 'cuda' devices, got {str(resolved)!r}")
    if not torch.cuda.is_available():
        raise DeviceError(f"{op}: device {str(resolved)!r} asked for, but CUDA is not available here (torch "
                          f"{'has no CUDA build' if torch.version.cuda is None else 'sees no GPU'}); use 'cpu'")
    count = torch.cuda.device_count()
    if resolved.index is None:
        return torch.device("cuda", torch.cuda.current_device())
    if resolved.index >= count:
        raise DeviceError(f"{op}: device {str(resolved)!r} asked for, but this machine has {count} GPU(s): "
                          f"cuda:0..cuda:{count - 1}")
    return resolved


def words_tensor(values: Sequence[int], device: torch.device | str = "cpu") -> torch.Tensor:
    """Unsigned 64-bit Python ints as an int64 tensor with the same bits (two's complement)."""
    return torch.from_numpy(np.array([int(v) for v in values], dtype=np.uint64).view(np.int64)).to(device)


def modulus_table(primes: Sequence[int]) -> torch.Tensor:
    """``[l, 4]`` int64 rows (q, floor(2^128/q) high word, low word, bit length) on the CPU."""
    rows = []
    for q in primes:
        ratio = (1 << 128) // q
        rows.extend((q, ratio >> 64, ratio & ((1 << 64) - 1), q.bit_length()))
    return words_tensor(rows).reshape(len(primes), 4)


def shoup_constants(values: Sequence[int], primes: Sequence[int],
                    device: torch.device | str = "cpu") -> tuple[torch.Tensor, torch.Tensor]:
    """Per-limb constants c_i mod q_i and their Shoup companions floor(c_i * 2^64 / q_i), as two
    ``[l]`` int64 tensors for :func:`fhe_core.ops.mul_const`."""
    reduced = [int(v) % q for v, q in zip(values, primes, strict=True)]
    companions = [(c << 64) // q for c, q in zip(reduced, primes)]
    return words_tensor(reduced, device), words_tensor(companions, device)


def _validate(primes: tuple[int, ...], n: int) -> None:
    if n < 2 or n & (n - 1) or not MIN_LOG_N <= n.bit_length() - 1 <= MAX_LOG_N:
        raise ParameterError(f"N must be a power of two in [2^{MIN_LOG_N}, 2^{MAX_LOG_N}], got {n}")
    if not primes:
        raise ParameterError("an RNS basis needs at least one prime")
    if len(set(primes)) != len(primes):
        raise ParameterError(f"RNS primes must be distinct, got {primes}")
    for q in primes:
        if q.bit_length() > MAX_PRIME_BITS or not is_prime(q) or (q - 1) % (2 * n):
            raise ParameterError(f"{q} is not a prime of at most {MAX_PRIME_BITS} bits with q = 1 mod 2N (N={n})")


class RNSBasis:
    """Primes q_0..q_{l-1} for Z[X]/(X^N + 1) on one device, with their tables.

    Attributes:
        primes: the primes, in limb order.
        n, log_n: ring degree.
        device: where the tables (and the polynomials using them) live.
        moduli: ``[l, 4]`` int64, see :func:`modulus_table`.
        ntt_table: ``[l, 4, N]`` int64, rows (psi^brv, Shoup, psi^-brv with N^-1 folded, Shoup); on
            CUDA ``[l, 12, N]``: then the forward and the inverse rows again as interleaved (w, Shoup)
            pairs and as FP64 pairs, which only the CUDA kernels read.
        plan: the kernels its transforms and conversions run with (``KernelPlan.on(device)``).

    Use :meth:`get` to share one instance per (primes, N, device), :meth:`with_plan` for another plan.
    """

    def __init__(self, primes: Sequence[int], n: int, device: torch.device | str = "cpu", *,
                 plan: KernelPlan = TUNED, _tables: tuple[torch.Tensor, torch.Tensor] | None = None):
        self.primes = tuple(int(q) for q in primes)
        self.n = int(n)
        self.log_n = self.n.bit_length() - 1
        self.device = resolve_device(device)
        self.plan = plan.on(self.device)
        if _tables is None:
            _validate(self.primes, self.n)
            moduli = modulus_table(self.primes)
            roots = words_tensor([primitive_root_2n(q, self.n) for q in self.primes])
            table = ops.ntt_table(moduli, roots, self.log_n, pairs=self.device.type == "cuda")
            _tables = (moduli.to(self.device), table.to(self.device))
        self.moduli, self.ntt_table = _tables

    @staticmethod
    def get(primes: Sequence[int], n: int, device: torch.device | str = "cpu") -> RNSBasis:
        """The cached basis for (primes, N, device): tables are built once and shared."""
        return _cached_basis(tuple(int(q) for q in primes), int(n), str(resolve_device(device)))

    def __len__(self) -> int:
        return len(self.primes)

    def __repr__(self) -> str:
        bits = "+".join(str(q.bit_length()) for q in self.primes)
        return f"RNSBasis(N=2^{self.log_n}, l={len(self)}, bits={bits}, device={self.device}, plan={self.plan})"

    def with_plan(self, plan: KernelPlan) -> RNSBasis:
        """This basis running with ``plan``'s kernels (the same tables, no copy)."""
        if plan.on(self.device) == self.plan:
            return self
        return RNSBasis(self.primes, self.n, self.device, plan=plan, _tables=(self.moduli, self.ntt_table))

    @property
    def modulus(self) -> int:
        """The product Q of the primes."""
        return prod(self.primes)

    def prefix(self, count: int) -> RNSBasis:
        """The sub-basis of the first ``count`` primes; its tables are views of this one's."""
        return self.rows(0, count)

    def rows(self, start: int, stop: int) -> RNSBasis:
        """The sub-basis of primes ``start .. stop-1``; its tables are views of this one's."""
        if not 0 <= start < stop <= len(self):
            raise ParameterError(f"a basis of {len(self)} primes has no row range [{start}, {stop})")
        if (start, stop) == (0, len(self)):
            return self
        return RNSBasis(self.primes[start:stop], self.n, self.device, plan=self.plan,
                        _tables=(self.moduli[start:stop], self.ntt_table[start:stop]))

    # The transforms every scheme uses, with this basis's tables and plan filled in.
    def ntt(self, a: torch.Tensor, *, skip: tuple[int, int, int] | None = None,
            out: torch.Tensor | None = None) -> torch.Tensor:
        """Forward NTT of ``[..., l, N]`` residues in this basis (``skip``: see :func:`fhe_core.ops.ntt`)."""
        return ops.ntt(a, self.moduli, self.ntt_table, skip=skip, plan=self.plan, out=out)

    def intt(self, a: torch.Tensor, *, out: torch.Tensor | None = None) -> torch.Tensor:
        """Inverse NTT of ``[..., l, N]`` residues in this basis."""
        return ops.intt(a, self.moduli, self.ntt_table, plan=self.plan, out=out)

    def to_residues(self, coefficients: Sequence[int]) -> torch.Tensor:
        """``[l, N]`` residues of an integer polynomial given by N Python ints (any sign).
        A host-side helper for encoding and tests, not a hot path."""
        if len(coefficients) != self.n:
            raise ParameterError(f"expected {self.n} coefficients, got {len(coefficients)}")
        rows = [[int(c) % q for c in coefficients] for q in self.primes]
        return torch.tensor(rows, dtype=torch.int64, device=self.device)


@functools.lru_cache(maxsize=64)
def _cached_basis(primes: tuple[int, ...], n: int, device: str) -> RNSBasis:
    return RNSBasis(primes, n, device)


class BasisConverter:
    """Constants of the fast basis conversion Conv_{Q->P} (HK20, BEHZ) from ``src`` to ``dst``.

    For x with residues x_i mod q_i, Conv returns, modulo each p_j,
        sum_i [x_i * (Q/q_i)^-1]_{q_i} * (Q/q_i) = x + u*Q,   0 <= u < l_in,
    that is x up to a small multiple of Q (the approximation the algorithm allows); with
    ``exact=True`` the multiple is computed (in double precision) so that the result is the
    centred representative of x, in (-Q/2, Q/2). Runs with the source basis's plan.

    ``scale_in`` (an integer) and ``scale_out`` (one integer per destination prime) fold constant factors into the
    conversion at no cost: it then converts [scale_in * x]_Q and multiplies the result by scale_out[j] mod p_j
    (the same words as a mul_const before and one after; BFV's multiplication folds its constants this way).
    """

    def __init__(self, src: RNSBasis, dst: RNSBasis, *, scale_in: int = 1, scale_out: Sequence[int] | None = None):
        if src.n != dst.n or src.device != dst.device:
            raise ParameterError(f"cannot convert between {src} and {dst}: N and device must match")
        if set(src.primes) & set(dst.primes):
            raise ParameterError("basis conversion needs disjoint bases")
        scale_out = [1] * len(dst) if scale_out is None else [int(s) for s in scale_out]
        if len(scale_out) != len(dst):
            raise ParameterError(f"scale_out needs one factor per destination prime ({len(dst)}), got {len(scale_out)}")
        self.src, self.dst = src, dst
        big_q = src.modulus
        qhat = [big_q // q for q in src.primes]
        qhat_inv = [pow(h % q, -1, q) * scale_in for h, q in zip(qhat, src.primes)]
        self.qhat_inv, self.qhat_inv_shoup = shoup_constants(qhat_inv, src.primes, src.device)
        qhat_mod_p = words_tensor([h * s % p for h in qhat for p, s in zip(dst.primes, scale_out)])
        qhat_mod_p = qhat_mod_p.reshape(len(src), len(dst))
        neg_q_mod_p = words_tensor([-big_q * s % p for p, s in zip(dst.primes, scale_out)])
        self.qhat_mod_p, self.neg_q_mod_p = qhat_mod_p.to(src.device), neg_q_mod_p.to(src.device)
        # the tensor-core Conv's operands (CUDA, up to 16 source primes), fast and exact conversion
        self.mma_fragments: dict[bool, torch.Tensor] = {}
        if torch.device(src.device).type == "cuda" and len(src) < 16:
            moduli = modulus_table(dst.primes)
            self.mma_fragments = {exact: ops.conv_mma_fragments(qhat_mod_p, moduli, neg_q_mod_p if exact else None)
                                  .to(src.device) for exact in (False, True)}

    @staticmethod
    def get(src: RNSBasis, dst: RNSBasis) -> BasisConverter:
        """The cached converter between two cached bases."""
        return _cached_converter(src, dst)

    def __call__(self, a: torch.Tensor, *, exact: bool = False, lazy: bool = False,
                 out: torch.Tensor | None = None) -> torch.Tensor:
        """``[..., l_src, N]`` -> ``[..., l_dst, N]`` (coefficient domain): x + u*Q, or centred x if ``exact``;
        ``lazy``: residues possibly in [0, 3p) (see :func:`fhe_core.ops.bconv`), for a forward NTT."""
        return ops.bconv(a, self.src.moduli, self.dst.moduli, self.qhat_inv, self.qhat_inv_shoup,
                         self.qhat_mod_p, self.neg_q_mod_p if exact else None, lazy=lazy,
                         fragments=self.mma_fragments.get(exact), plan=self.src.plan, out=out)


@functools.lru_cache(maxsize=256)
def _cached_converter(src: RNSBasis, dst: RNSBasis) -> BasisConverter:
    return BasisConverter(src, dst)
