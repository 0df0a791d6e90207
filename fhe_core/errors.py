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


class ParamsMismatchError(FHEError, ValueError):
    """Operands (ciphertexts, keys, contexts) belong to different parameter sets (params_id)."""


class LevelMismatchError(FHEError, ValueError):
    """An operand is at a level (or has a limb count) the operation cannot use."""


class DomainMismatchError(FHEError, ValueError):
    """An operand is in the wrong representation (coefficient vs NTT domain)."""


class MissingKeyError(FHEError, KeyError):
    """An evaluation key (relinearization or Galois) the operation needs is not in the key set."""

    def __str__(self) -> str:  # KeyError's str() would quote the message
        return str(self.args[0]) if self.args else ""


class DecryptionError(FHEError, ValueError):
    """A ciphertext cannot be decrypted correctly: its noise budget is exhausted (BFV), so the
    result would be wrong."""
