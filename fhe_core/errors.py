"""The exception hierarchy of fhe_core: everything it raises on purpose derives from FHEError."""


class FHEError(Exception):
    """Root of every error fhe_core raises deliberately."""


class ParameterError(FHEError, ValueError):
    """Parameters (primes, ring degree, bases) are invalid or inconsistent."""


class ExtensionNotBuiltError(FHEError, ImportError):
    """The C++/CUDA extension fhe_core._C is missing or was built without a needed backend."""
