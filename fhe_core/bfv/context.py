"""The BFV context: one validated BFV parameter set on one device, with every table BFV needs.

It wraps an :class:`fhe_core.rlwe.RLWEContext` (keys, encryption, key switching are shared
with CKKS) and adds, per level l (modulus Q_l = q_0 ... q_l):

* the constants of the BFV scaling of a plaintext, round(Q_l m / t), exactly per limb;
* the BEHZ tables of the RNS multiplication (:mod:`fhe_core.bfv.behz`), built on first use;
* the tables of modulus switching (dropping q_l).

The context holds no key. Everything lives on ``params.device``; tables are built once.
"""
from __future__ import annotations

from dataclasses import dataclass
from math import prod

import torch

from fhe_core.errors import ParameterError, SchemeMismatchError
from fhe_core.params import Params
from fhe_core.ops import KernelPlan
from fhe_core.ring import RNSBasis, shoup_constants, words_tensor
from fhe_core.rlwe import RLWEContext


@dataclass(frozen=True, eq=False)
class ScalingTables:
    """Per-level constants of plaintext scaling (see ``encryption.scaled_message``) and the
    primes of Q_l as a ``[l+1, 1]`` column (for ``torch.remainder`` broadcasts)."""

    q: RNSBasis
    q_mod_t: torch.Tensor      # [1] Q_l mod t (the basis (t))
    q_mod_t_shoup: torch.Tensor
    t_inv: torch.Tensor        # [l+1] t^-1 mod q_i
    t_inv_shoup: torch.Tensor
    prime_column: torch.Tensor  # [l+1, 1] int64


@dataclass(frozen=True, eq=False)
class ModSwitchTables:
    """Constants of dropping q_l: round(c / q_l) from Q_l to Q_{l-1}."""

    q_last: RNSBasis           # (q_l)
    q_rest: RNSBasis           # Q_{l-1}
    q_last_inv: torch.Tensor   # [l] q_l^-1 mod q_i
    q_last_inv_shoup: torch.Tensor


class BFVContext:
    """Public BFV parameters on one device: plaintext modulus t, the q chain, special primes.

    Args:
        params: a validated ``Params`` with ``scheme == "bfv"``; its device is the context's.
        plan: the kernel plan (default: resolved for the device, N and primes; see
            :class:`fhe_core.ops.KernelPlan`), shared by every basis of the context.

    Attributes:
        params, n, t, device, params_id, max_level.
        rlwe: the :class:`RLWEContext` used for keys, encryption and key switching.
        t_basis: the RNS basis (t) with its NTT tables: the batch encoder's transform.
    """

    def __init__(self, params: Params, *, plan: KernelPlan | None = None):
        if not isinstance(params, Params):
            raise ParameterError(f"BFVContext: expected a Params, got {type(params).__name__}")
        if params.scheme != "bfv":
            raise SchemeMismatchError(f"BFVContext: these are {params.scheme.upper()} parameters ({params!r}); BFV "
                                      "needs BFV parameters (fhe_core.params.BFV_PRESETS)")
        self.params = params
        self.n = params.n
        self.t = params.plaintext_modulus
        self.rlwe = RLWEContext.from_params(params, params.device, plan=plan)
        self.device = self.rlwe.device
        self.plan = self.rlwe.plan
        self.params_id = params.params_id
        self.max_level = params.max_level
        self.t_basis = self.basis([self.t])
        self._scaling: dict[int, ScalingTables] = {}
        self._mod_switch: dict[int, ModSwitchTables] = {}
        self._behz: dict[int, object] = {}

    def __repr__(self) -> str:
        return (f"BFVContext(N=2^{self.params.log_n}, t={self.t}, L={self.max_level}, device={self.device}, "
                f"plan={self.plan})")

    def basis(self, primes) -> RNSBasis:
        """The cached basis of these primes at N on the context's device, with the context's plan."""
        return RNSBasis.get(primes, self.n, self.device).with_plan(self.plan)

    @staticmethod
    def check(ctx, op: str) -> BFVContext:
        """``ctx`` if it is a BFVContext; Params where a context belongs are a ParameterError (a
        SchemeMismatchError for CKKS ones) naming ``op``."""
        if isinstance(ctx, BFVContext):
            return ctx
        if isinstance(ctx, Params) and ctx.scheme != "bfv":
            raise SchemeMismatchError(f"{op}: got {ctx.scheme.upper()} parameters; BFV needs a BFVContext of BFV "
                                      "parameters")
        hint = " (build one with bfv.BFVContext(params))" if isinstance(ctx, Params) else ""
        raise ParameterError(f"{op}: expected a BFVContext, got {type(ctx).__name__}{hint}")

    def check_level(self, level: int, op: str) -> int:
        return self.rlwe.check_level(level, op)

    def q_modulus(self, level: int) -> int:
        """Q_l = q_0 * ... * q_l."""
        return prod(self.params.q_primes[:level + 1])

    def scaling(self, level: int) -> ScalingTables:
        """The cached :class:`ScalingTables` of ``level``."""
        level = self.check_level(level, "scaling")
        if level not in self._scaling:
            q = self.rlwe.q_at(level)
            r, r_shoup = shoup_constants([q.modulus % self.t], [self.t], self.device)
            inv, inv_shoup = shoup_constants([pow(self.t, -1, p) for p in q.primes], q.primes, self.device)
            column = words_tensor(q.primes, self.device).reshape(-1, 1)
            self._scaling[level] = ScalingTables(q, r, r_shoup, inv, inv_shoup, column)
        return self._scaling[level]

    def mod_switch(self, level: int) -> ModSwitchTables:
        """The cached :class:`ModSwitchTables` for dropping q_level (level >= 1)."""
        level = self.check_level(level, "mod_switch")
        if level < 1:
            raise ParameterError("mod_switch: level 0 has no prime left to drop")
        if level not in self._mod_switch:
            q_last = self.params.q_primes[level]
            rest = self.rlwe.q_at(level - 1)
            inv, inv_shoup = shoup_constants([pow(q_last % q, -1, q) for q in rest.primes], rest.primes,
                                             self.device)
            self._mod_switch[level] = ModSwitchTables(self.basis([q_last]), rest,
                                                      inv, inv_shoup)
        return self._mod_switch[level]

    def behz(self, level: int):
        """The cached BEHZ multiplication tables of ``level`` (:class:`fhe_core.bfv.behz.BEHZTables`)."""
        from fhe_core.bfv.behz import BEHZTables  # behz imports this module

        level = self.check_level(level, "behz")
        if level not in self._behz:
            self._behz[level] = BEHZTables.build(self, level)
        return self._behz[level]
