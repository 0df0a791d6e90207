"""iDASH 2020 workload loader: shapes and values stated in the shared README."""
import numpy as np
import pytest

from data.errors import DataNotFoundError
from data.idash import load_idash


def test_workload_shapes_and_values(shared_dir):
    w = load_idash(shared_dir("idash2020_sabanci_xgb"))
    assert w.thresholds.shape == (1408, 3) and w.leaves.shape == (1408, 4)
    assert w.x0.shape == w.x2.shape == (99, 1408, 3)
    assert w.labels[:6].tolist() == [0, 5, 6, 0, 4, 10]
    assert w.thresholds[0].tolist() == [1, 0, 0]
    assert w.leaves[0].tolist() == [4819, 11403, -316, 4871]
    # integer leaves are the float leaves x 10^4 truncated toward zero
    np.testing.assert_array_equal(w.leaves, np.trunc(w.leaves_float * 1e4).astype(np.int64))
    assert not (w.x0 & w.x2).any()  # never both low and high


def test_missing_directory(tmp_path):
    with pytest.raises(DataNotFoundError, match="encodedTree_BFV"):
        load_idash(tmp_path / "nope")
