"""RNS-BFV: exact arithmetic on vectors of N integers mod a prime t (batching), on CPU and CUDA.

Built on :mod:`fhe_core.rlwe` (keys, encryption, hybrid key switching are shared with CKKS):

    BFVContext      validated BFV ``Params`` -> RLWE context, t's NTT tables, per-level tables
    BatchEncoder    N integers mod t (a 2 x N/2 matrix, as SEAL) <-> Plaintext (coefficients mod t)
    Encryptor       round(Q_l m / t) (Delta m + a rounding fix), through rlwe.encrypt_pk / encrypt_sk
    Decryptor       exact round(t/Q [c0 + c1 s]_Q) mod t, invariant noise budget, DecryptionError
    Evaluator       add/sub/negate, plaintext and scalar products, BEHZ ct-ct multiplication,
                    relinearization, row rotations (hoisted too), column swap, modulus switching;
                    ``graphed()``: the same from CUDA graphs (GraphedEvaluator, device speed from Python)
    flood           circuit privacy: re-randomization with noise flooding (a stated 40-bit margin)

Keys: ``rlwe.gen_secret_key`` / ``gen_public_key`` / ``gen_eval_keys(ctx.rlwe, sk,
bfv.galois_elements(n, rotations, column_swap=True))``.

Layer: imports rlwe, params, ring and ops, never ckks.
"""
from fhe_core.bfv.context import BFVContext
from fhe_core.bfv.encoder import BatchEncoder, Plaintext, slot_permutation
from fhe_core.bfv.encryption import MIN_BUDGET_BITS, Decryptor, Encryptor
from fhe_core.bfv.evaluator import Evaluator, galois_elements
from fhe_core.bfv.privacy import FLOOD_NOISE_BITS, STATISTICAL_BITS, flood, flood_requirement

__all__ = ["BFVContext", "BatchEncoder", "Plaintext", "slot_permutation", "Decryptor", "Encryptor",
           "MIN_BUDGET_BITS", "Evaluator", "galois_elements", "FLOOD_NOISE_BITS", "STATISTICAL_BITS", "flood",
           "flood_requirement"]
