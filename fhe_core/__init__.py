"""fhe_core: RNS-CKKS and RNS-BFV on CUDA kernels with a bit-identical CPU build.

Layers, each importing only the ones below it (errors -> ops -> ring -> params -> rlwe ->
ckks, bfv -> serialize; ckks and bfv do not import each other; tests/test_layers.py enforces it):
    serialize  versioned, checked binary records of every object (reads rlwe, ckks, params, ring)
    distributed  exact modular all-reduce, broadcast and gather of ciphertexts and plaintexts over
               torch.distributed (NCCL, gloo), and a spawn launcher; beside serialize
    ckks       encoder, evaluator, linear transforms, polynomials, bootstrapping
    bfv        batch encoder, BEHZ evaluator
    rlwe       context, keys, sampling, encryption, hybrid key switching, automorphisms
    params     literals -> validated, frozen Params with a params_id; presets; security table
    ring       NTT-friendly primes, RNS bases with their device tables, basis converters
    ops        thin wrappers over torch.ops.fhe_core.* (the only importer of the extension _C)
    errors     the FHEError hierarchy, imported by every layer
    csrc       the kernels: common/*.h shared math, ops/ (schemas and torch glue), cpu/, cuda/
``fhe_core.demo`` (the engine demo) sits on top. Nothing in fhe_core imports the packages built on
it: fhe_core -> data -> ml -> apps -> server (see ``ml``, ``apps`` and ``server``).
"""
from fhe_core.errors import FHEError, ParameterError

__all__ = ["FHEError", "ParameterError"]
__version__ = "0.1.0"
