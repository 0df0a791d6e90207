"""A restricted unpickler that rebuilds numpy arrays and nothing else.

`pickle` runs whatever callables a file names, so a pickle from a package is read here with an
`Unpickler` whose `find_class` admits only the three globals a protocol-2 numpy array needs
(`numpy.ndarray`, `numpy.dtype` and `multiarray._reconstruct`); any other global raises
UnsafePickleError before it is imported. Object dtypes are refused too, so the result holds
only plain numbers in containers (tuples, lists, dicts) built by pickle's own opcodes.
"""
from __future__ import annotations

import pickle
from typing import Any, BinaryIO

import numpy as np

from .errors import UnsafePickleError

try:  # numpy 2 renamed numpy.core to numpy._core; pickles may name either
    from numpy._core.multiarray import _reconstruct
except ImportError:  # pragma: no cover - numpy < 1.26
    from numpy.core.multiarray import _reconstruct


def _plain_dtype(*args: Any) -> np.dtype:
    dtype = np.dtype(*args)
    if dtype.hasobject:
        raise UnsafePickleError(f"pickle asks for an object dtype ({dtype}); refused")
    return dtype


_ALLOWED = {
    ("numpy", "ndarray"): np.ndarray,
    ("numpy", "dtype"): _plain_dtype,
    ("numpy.core.multiarray", "_reconstruct"): _reconstruct,
    ("numpy._core.multiarray", "_reconstruct"): _reconstruct,
}


class NumpyOnlyUnpickler(pickle.Unpickler):
    """Unpickler that resolves only the globals needed to rebuild numpy arrays."""

    def find_class(self, module: str, name: str) -> Any:
        try:
            return _ALLOWED[(module, name)]
        except KeyError:
            raise UnsafePickleError(
                f"pickle refers to {module}.{name}; only numpy arrays are accepted"
            ) from None

    def persistent_load(self, pid: Any) -> Any:
        raise UnsafePickleError("pickle uses persistent ids; refused")


def load_numpy_pickle(stream: BinaryIO) -> Any:
    """Unpickle `stream` (Python 2 pickles included) admitting numpy arrays only."""
    try:
        return NumpyOnlyUnpickler(stream, encoding="latin1").load()
    except UnsafePickleError:
        raise
    except (pickle.UnpicklingError, EOFError, ValueError, TypeError) as exc:
        raise UnsafePickleError(f"not a readable numpy pickle: {exc}") from exc
