"""The exception hierarchy of fhe_core: everything it raises on purpose derives from FHEError."""


class FHEError(Exception):
    """Root of every error fhe_core raises deliberately."""


class ParameterError(FHEError, ValueError):
    """Parameters (primes, ring degree, bases) are invalid or inconsistent."""


class ExtensionNotBuiltError(FHEError, ImportError):
    """The C++/CUDA extension fhe_core._C is missing or was built without a needed backend."""


class SecurityError(ParameterError):
    """Parameters fall short of the required security level (128 bits) and were not allowed
    explicitly with ``allow_insecure=True``."""


class EncodingError(FHEError, ValueError):
    """A message cannot be encoded or decoded as asked (length, level, scale, non-finite values)."""
