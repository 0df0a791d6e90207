"""The numpy-only unpickler rebuilds arrays and refuses every other global before using it."""
import io
import pickle

import numpy as np
import pytest

from data.errors import UnsafePickleError
from data.safe_pickle import load_numpy_pickle


def test_reads_numpy_arrays_in_containers():
    rng = np.random.default_rng(0)
    content = ((rng.random((4, 3), dtype=np.float32), np.arange(4)),
               [np.arange(3, dtype=np.int16)], {"k": 1.5})
    out = load_numpy_pickle(io.BytesIO(pickle.dumps(content, protocol=4)))
    np.testing.assert_array_equal(out[0][0], content[0][0])
    assert out[0][0].dtype == np.float32
    np.testing.assert_array_equal(out[1][0], content[1][0])
    assert out[2] == {"k": 1.5}


class _RunsCode:
    """Unpickling this calls os.system, which would create `marker`."""

    def __init__(self, marker):
        self.marker = marker

    def __reduce__(self):
        import os

        return (os.system, (f"touch {self.marker}",))


def test_refuses_code_execution(tmp_path):
    marker = tmp_path / "pwned"
    payload = pickle.dumps(_RunsCode(marker), protocol=4)
    with pytest.raises(UnsafePickleError, match="system"):
        load_numpy_pickle(io.BytesIO(payload))
    assert not marker.exists()


@pytest.mark.parametrize("payload", [
    b"cbuiltins\neval\n(S'1+1'\ntR.",  # protocol 0 GLOBAL + REDUCE
    pickle.dumps(np.random.default_rng, protocol=4),  # a numpy global that is not allowed
    pickle.dumps(np.array([object()], dtype=object)[:0], protocol=4),  # object dtype
])
def test_refuses_other_globals_and_object_arrays(payload):
    with pytest.raises(UnsafePickleError):
        load_numpy_pickle(io.BytesIO(payload))


def test_garbage_is_a_format_error():
    with pytest.raises(UnsafePickleError, match="not a readable"):
        load_numpy_pickle(io.BytesIO(b"\x80\x02garbage"))
