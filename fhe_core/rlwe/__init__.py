"""The scheme-generic RLWE layer: context and tables, keys, encryption, hybrid or linear key switching.

Built on an explicit :class:`RLWEContext` (N, the q chain, the special primes P, the secret and
error distributions, a params_id). CKKS and BFV build on it: their ciphertexts subclass
:class:`Ciphertext`. :func:`key_switch`, :func:`relinearize`, :func:`apply_galois` and
:func:`apply_galois_hoisted` (``keyswitch``) check their inputs and take an :class:`EvalKeySet`;
``encapsulation`` holds the keys and steps of sparse-secret encapsulation (bootstrapping);
the steps under them take inputs already checked (``switching``, which runs ``linear_switching`` for a context
with ``key_switching="linear"``): the scheme evaluators, the linear transforms and the bootstrapping circuit call
those after their own entry checks.

Conventions: polynomials are int64 ``[l+1, N]`` residues over Q_l in the NTT domain; the
extended basis QP_l puts the alpha special primes first (``context`` explains why); keys are
generated at the top level and used at every level through prefix views. Randomness: one
OS-random seed per key and encryption, one nonce per sampled polynomial (``sampling``).

Layer: imports params, ring and ops; ckks and bfv build on it, serialize reads its objects.
"""
from fhe_core.rlwe.ciphertext import Ciphertext
from fhe_core.rlwe.context import LevelTables, RLWEContext
from fhe_core.rlwe.encryption import decrypt, encrypt_pk, encrypt_sk, encrypt_zero_pk, sk_encryption_uniform
from fhe_core.rlwe.galois import (
    galois_compose,
    galois_element_for_conjugation,
    galois_element_for_rotation,
    galois_inverse,
    rotation_for_galois_element,
)
from fhe_core.rlwe.encapsulation import (
    check_encapsulation_key,
    encapsulation_key_uniform,
    gen_encapsulation_keys,
    gen_ephemeral_secret,
)
from fhe_core.rlwe.keys import (
    DENSE_TO_SPARSE,
    SPARSE_TO_DENSE,
    EncapsulationKey,
    EvalKeySet,
    GaloisKey,
    PublicKey,
    RelinKey,
    SecretKey,
    SwitchingKey,
    gen_eval_keys,
    gen_galois_key,
    gen_public_key,
    gen_relin_key,
    gen_secret_key,
    gen_switching_key,
    switching_key_uniform,
)
from fhe_core.rlwe.keyswitch import (
    apply_galois,
    apply_galois_hoisted,
    decompose_mod_up,
    inner_product,
    key_switch,
    mod_down,
    relinearize,
)

__all__ = [
    "Ciphertext", "LevelTables", "RLWEContext",
    "decrypt", "encrypt_pk", "encrypt_sk", "encrypt_zero_pk", "sk_encryption_uniform",
    "galois_compose", "galois_element_for_conjugation", "galois_element_for_rotation", "galois_inverse",
    "rotation_for_galois_element",
    "check_encapsulation_key", "encapsulation_key_uniform", "gen_encapsulation_keys", "gen_ephemeral_secret",
    "DENSE_TO_SPARSE", "SPARSE_TO_DENSE", "EncapsulationKey",
    "EvalKeySet", "GaloisKey", "PublicKey", "RelinKey", "SecretKey", "SwitchingKey",
    "gen_eval_keys", "gen_galois_key", "gen_public_key", "gen_relin_key", "gen_secret_key",
    "gen_switching_key", "switching_key_uniform",
    "apply_galois", "apply_galois_hoisted", "decompose_mod_up", "inner_product", "key_switch", "mod_down",
    "relinearize",
]
