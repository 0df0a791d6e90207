"""fhe_core: RNS-CKKS and RNS-BFV on CUDA kernels with a bit-identical CPU build.

Layers, each importing only the ones below it:
    ring    NTT-friendly primes, RNS bases with their device tables, basis converters
    ops     thin wrappers over torch.ops.fhe_core.* (the only caller of the C++/CUDA extension)
    csrc    the kernels: common/*.h shared math, cpu/*.cpp, cuda/*.cu, ops.cpp schemas
"""
from fhe_core.errors import FHEError, ParameterError

__all__ = ["FHEError", "ParameterError"]
__version__ = "0.1.0"
