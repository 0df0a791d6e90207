"""The exception hierarchy of fhe_core: everything it raises on purpose derives from FHEError."""


class FHEError(Exception):
    """Root of every error fhe_core raises deliberately."""


class ParameterError(FHEError, ValueError):
    """Parameters (primes, ring degree, bases) are invalid or inconsistent."""


class DeviceError(FHEError, ValueError):
    """A device is unknown, not one fhe_core runs on (it runs on "cpu" and "cuda[:i]"), or not
    present on this machine (no CUDA build or GPU, or a GPU index past the last)."""


class SchemeMismatchError(ParameterError):
    """An object of one scheme (CKKS, BFV) was given parameters of the other."""


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


class ScaleMismatchError(FHEError, ValueError):
    """CKKS operands of an addition (or a plaintext and a ciphertext) have different scales."""


class SlotMismatchError(FHEError, ValueError):
    """CKKS operands pack different numbers of slots."""


class ScaleOverflowError(FHEError, ValueError):
    """A CKKS result's scale leaves no room for its message below the modulus of its level, so it
    could not be decrypted: rescale earlier, or work at a higher level."""


class ResidueError(FHEError, ValueError):
    """A tensor holds a residue that is not canonical: it is negative or >= the prime of its limb
    (hand-built or corrupted data)."""


# ---- serialization (fhe_core.serialize) ---------------------------------------------------------

class SerializationError(FHEError, ValueError):
    """A serialized object cannot be written or read; the subclasses say which check failed."""


class SizeLimitError(SerializationError):
    """The input, or a length it declares, exceeds the caller's ``max_bytes`` (or a format limit)."""


class TruncatedError(SerializationError):
    """The input is shorter than its header or its declared lengths (this includes empty input)."""


class TrailingDataError(SerializationError):
    """The input is longer than its declared lengths: bytes follow the object."""


class BadMagicError(SerializationError):
    """The input does not start with the fhe_core magic bytes: it is not a serialized object."""


class UnsupportedVersionError(SerializationError):
    """The format version is not one this build reads."""


class WrongKindError(SerializationError):
    """The object kind is unknown, or is not the kind the caller expects."""


class ChecksumError(SerializationError):
    """The BLAKE2b checksum does not match: the bytes were corrupted or altered."""


class SerializedParamsMismatchError(SerializationError, ParamsMismatchError):
    """The object belongs to another parameter set than the one given (params_id), or a
    serialized parameter literal does not hash to the params_id it claims."""


class MetadataError(SerializationError):
    """The metadata block is malformed: not JSON, missing or unknown fields, wrong types."""


class ShapeError(SerializationError):
    """Declared shapes are inconsistent with the parameters (N, limb counts, dnum, alpha) or with
    the payload length."""


class SerializedSecurityError(SerializationError, SecurityError):
    """A serialized parameter record falls short of 128-bit security and was not allowed with
    ``allow_insecure=True``: both a SerializationError (bad input) and a SecurityError."""


class ResidueRangeError(SerializationError, ResidueError):
    """A residue is not canonical: it is >= the prime of its limb."""


class DecryptionError(FHEError, ValueError):
    """A ciphertext cannot be decrypted correctly: its noise budget is exhausted (BFV), so the
    result would be wrong."""


class UnsupportedMethodError(FHEError, NotImplementedError):
    """A step that exists for one key-switching method only, asked of a context of the other (e.g. the hybrid
    ModUp of the double-hoisted linear transforms under linear key switching)."""


class CollectiveError(FHEError, ValueError):
    """A collective over ranks (``fhe_core.distributed``) cannot run as asked: the ranks passed
    objects that differ in kind, level, scale or shape, a tensor is on a device the process group's
    backend cannot reach, or replicas that must be identical are not."""
