"""The kernel plan: which implementation each step of the engine runs, chosen once per context.

Every step with a tuned implementation keeps exactly one alternative, its reference: the simplest correct kernel or
composition of ops. The tests compare the two bit for bit, ``scripts/bench.py`` times them side by side, and
docs/performance.md records what each tuned path bought and which variants were retired. A :class:`KernelPlan`
names each choice; a context resolves its plan once from its device, ring degree and primes
(:meth:`KernelPlan.resolve`) and hands it down: the scheme layers ask it the questions below, the ops pass its
:attr:`~KernelPlan.kernel_flags` to the extension, whose launchers read them from each op's argument struct. Nothing
of it is process-wide state, so contexts with different plans can run side by side, from several threads.

Not a plan choice: programmatic dependent launch (CUDA graphs of kernels that start in their predecessor's tail,
compute capability 9.0 and later) changes no result and is always on where the device has it;
``FHE_CORE_PDL=0`` in the environment at process start turns it off (for profiles that time each kernel alone).

Layer: part of fhe_core.ops (the lowest layer; every layer above asks its context's plan).
"""
from __future__ import annotations

import dataclasses
from collections.abc import Iterable

import torch

# The largest prime (bits) whose forward butterflies run on the FP64 pipe: values stay below 2^50
# (cuda/ntt_math.cuh). The inverse's limit is 41 bits; the kernels choose per prime, the plan only whether any prime
# of a context gains.
FP64_FORWARD_MAX_BITS = 46
# Below N = 2^15 the fused NTT and inner product's grid is too small to hide its long blocks: BFV at N = 2^13 / 2^14
# measured 13-14% slower with it (relinearize, rotate_rows; H200, 2026-11-24), at 2^15 2% faster.
INNER_PRODUCT_IN_MOD_UP_MIN_N = 1 << 15
# The most digits the fused inner product's digit-group kernel takes (cuda/keyswitch.cu, kMaxDigitGroups): only that
# kernel adds HMult's tensor terms.
DIGIT_GROUPS_MAX = 4
# The extension's flag bits (csrc/plan.h).
_TUNED_NTT, _FP64_BUTTERFLIES, _TENSOR_CORE_CONV = 1, 2, 4


@dataclasses.dataclass(frozen=True)
class KernelPlan:
    """The implementation of every step with a choice: True runs the tuned path, False the reference.

    The kernels (CUDA; the CPU build has one implementation of each op, and ignores these):

    * ``tuned_ntt``: the tuned NTT kernels (16-byte row accesses, (w, w') twiddle pairs, butterflies without
      reductions where the prime leaves room, the row length compiled in at N = 2^16), and the passes they absorb:
      a rotation's automorphism read inside the transforms (``ops.intt_galois``, ``ops.mod_down_ntt``'s
      ``add_galois``), HMult's d2 inside ModUp's inverse (``ops.intt_product``), the key-switching inner product in
      ModUp's last forward pass (``ops.ntt_inner_product``). Reference: the two-kernel transform, and those ops as
      plain passes.
    * ``fp64_butterflies``: with ``tuned_ntt``, the butterflies of primes below 2^46 (forward) / 2^41 (inverse) on
      the FP64 pipe. Reference: the integer butterflies (every prime above those limits takes them in every plan).
    * ``tensor_core_conv``: the basis conversion as a byte-sliced integer matrix product on the tensor cores (sm_80
      and later). Reference: a 128-bit multiply-accumulate per term.

    The compositions (the scheme layers):

    * ``mod_up_in_one_launch``: ModUp as one Conv of every digit and one NTT that skips the digits' own rows.
      Reference: digit by digit (the CPU's path: one-row transforms would cost it its row-parallel loop).
    * ``inner_product_in_mod_up``: the inner product in ModUp's last forward NTT pass, and with it HMult's tensor
      terms (:meth:`tensor_in_inner_product`). Reference: the NTT, then ``ops.ks_inner_product``; HMult's tensor
      product as its own pass before the key switch.
    * ``fused_circuit``: the bootstrapping circuit's fused passes (rescale in the NTT's store, linear combinations in
      one pass, the baby steps' and a pair's inner products sharing their reads, the giant steps' products and
      ModDowns batched). Reference: the composed ops.
    """

    tuned_ntt: bool = True
    fp64_butterflies: bool = True
    tensor_core_conv: bool = True
    mod_up_in_one_launch: bool = True
    inner_product_in_mod_up: bool = True
    fused_circuit: bool = True

    @classmethod
    def resolve(cls, device: torch.device | str, n: int, primes: Iterable[int]) -> KernelPlan:
        """The plan of a context on ``device`` with ring degree ``n`` and these primes (Q and P): every tuned path
        that can run there and gains. On the CPU only the compositions that pay on a CPU (the fused circuit)."""
        device = torch.device(device)
        cuda = device.type == "cuda"
        major = torch.cuda.get_device_capability(device)[0] if cuda else 0
        smallest = min(int(q) for q in primes)
        return cls(fp64_butterflies=smallest.bit_length() <= FP64_FORWARD_MAX_BITS,
                   tensor_core_conv=major >= 8,
                   mod_up_in_one_launch=cuda,
                   inner_product_in_mod_up=cuda and n >= INNER_PRODUCT_IN_MOD_UP_MIN_N).on(device)

    @classmethod
    def reference(cls) -> KernelPlan:
        """Every step's reference path (on any device)."""
        return cls(**{field.name: False for field in dataclasses.fields(cls)})

    def on(self, device: torch.device | str) -> KernelPlan:
        """This plan as it runs on ``device``: on the CPU without the kernel choices (its ops have one implementation,
        so a CPU plan never asks for what only the CUDA kernels do, e.g. :meth:`tensor_in_inner_product`)."""
        if torch.device(device).type == "cuda":
            return self
        return self.replace(tuned_ntt=False, fp64_butterflies=False, tensor_core_conv=False)

    def replace(self, **changes: bool) -> KernelPlan:
        """This plan with some choices changed (``plan.replace(fused_circuit=False)``)."""
        return dataclasses.replace(self, **changes)

    @property
    def kernel_flags(self) -> int:
        """The kernel choices as the extension's flag bits (``int plan`` of the ops that have a choice)."""
        return ((_TUNED_NTT if self.tuned_ntt else 0) | (_FP64_BUTTERFLIES if self.fp64_butterflies else 0)
                | (_TENSOR_CORE_CONV if self.tensor_core_conv else 0))

    def tensor_in_inner_product(self, digits: int) -> bool:
        """Whether HMult's tensor terms go into the fused inner product (``ops.ntt_inner_product``'s ``tensor``): its
        digit-group kernel adds them for at most :data:`DIGIT_GROUPS_MAX` digits (the CUDA build, ``tuned_ntt``).
        Else the tensor product runs as its own pass before the key switch."""
        return self.inner_product_in_mod_up and self.tuned_ntt and digits <= DIGIT_GROUPS_MAX


TUNED = KernelPlan()
"""Every tuned path, what an op runs when it is given no plan (on the CPU: its one implementation)."""

__all__ = ["KernelPlan", "TUNED", "FP64_FORWARD_MAX_BITS", "INNER_PRODUCT_IN_MOD_UP_MIN_N", "DIGIT_GROUPS_MAX"]
