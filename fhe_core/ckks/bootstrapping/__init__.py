"""CKKS bootstrapping, built from separately testable circuit pieces (Lattigo's layout):

* :func:`mod_raise` (``mod_raise``): a level-0 ciphertext lifted to the full chain; decrypts to
  m + q_0 I with a small integer polynomial I; :func:`mod_raise_encapsulated` the same through a sparse
  ephemeral secret (sparse-secret encapsulation: a dense main secret, I of the ephemeral weight).
* :func:`sub_sum` (``sub_sum``): for sparse packing, the trace onto the n-slot subring (message
  times g = N/(2n)).
* :mod:`~fhe_core.ckks.bootstrapping.dft` (``dft``): the special DFT factored into radix-2
  diagonal stages and merged into a configurable number of levels, for CoeffsToSlots (E^-1) and
  SlotsToCoeffs (E); plaintext side, evaluated by the BSGS ``LinearTransform``.
* :class:`EvalModParameters` / :class:`EvalModEvaluator` (``mod1``): the scaled-cosine EvalMod
  with double-angle steps, removing q_0 I.

* :class:`BootstrappingParameters` (``parameters``): the chain and the pieces' settings, with
  ``depth``, ``min_input_level`` and ``output_level`` derived from the pieces; tiny insecure presets.
* :class:`Bootstrapper` (``bootstrapper``): ModRaise -> SubSum -> CoeffsToSlots -> EvalMod
  -> SlotsToCoeffs (or SlotsToCoeffs first, the slim order), keys checked at construction;
  :class:`SecretKeyBootstrapper`, a decrypt/re-encrypt test double (tests only).
  ``bootstrap_pair`` refreshes two real ciphertexts with one bootstrap.
* ``pair``: :class:`~fhe_core.ckks.bootstrapping.pair.CiphertextPair` and ``PairEvaluator``, two
  ciphertexts through one circuit (the full-slot EvalMod's real and imaginary parts).
* :class:`GraphedBootstrapper` (``graphed``, from ``Bootstrapper.graphed()``): the same calls
  replayed from a CUDA graph captured on first use.

Apart from the test double, none of these objects holds a secret key.
"""
from fhe_core.ckks.bootstrapping import dft
from fhe_core.ckks.bootstrapping.dft import DFTFactors, coeffs_to_slots_factors, slots_to_coeffs_factors
from fhe_core.ckks.bootstrapping.mod1 import EvalModEvaluator, EvalModParameters
from fhe_core.ckks.bootstrapping.mod_raise import mod_raise, mod_raise_encapsulated
from fhe_core.ckks.bootstrapping.sub_sum import sub_sum, sub_sum_galois_elements, sub_sum_steps
from fhe_core.ckks.bootstrapping.parameters import (TINY_N10_DENSE, TINY_N10_FULL, TINY_N10_SLIM, TINY_N10_SPARSE,
                                                    TINY_N11_FULL, N16_DENSE_FULL, N16_H192_FULL, N16_H192_SPARSE,
                                                    BootstrappingParameters, overflow_probability)
from fhe_core.ckks.bootstrapping.bootstrapper import (Bootstrapper, SecretKeyBootstrapper,
                                                      bootstrapping_galois_elements, gen_bootstrapping_keys)
from fhe_core.ckks.bootstrapping.graphed import GraphedBootstrapper

__all__ = ["dft", "DFTFactors", "coeffs_to_slots_factors", "slots_to_coeffs_factors", "EvalModEvaluator",
           "EvalModParameters", "mod_raise", "mod_raise_encapsulated", "sub_sum", "sub_sum_galois_elements",
           "sub_sum_steps",
           "BootstrappingParameters", "TINY_N10_FULL", "TINY_N10_SPARSE", "TINY_N10_SLIM", "TINY_N11_FULL",
           "TINY_N10_DENSE", "N16_H192_FULL", "N16_H192_SPARSE", "N16_DENSE_FULL", "overflow_probability",
           "Bootstrapper", "SecretKeyBootstrapper", "bootstrapping_galois_elements", "gen_bootstrapping_keys",
           "GraphedBootstrapper"]
