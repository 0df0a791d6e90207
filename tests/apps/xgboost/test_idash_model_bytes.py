"""IdashModel.to_bytes / from_bytes: the served form of the iDASH model, validated on load."""
import io

import numpy as np
import pytest

from apps.xgboost.archive import ModelFormatError
from apps.xgboost.plan import IdashModel
from data.idash import load_idash


@pytest.fixture(scope="module")
def model(idash_dir):
    return IdashModel.from_workload(load_idash(idash_dir))


def test_round_trip(model):
    back = IdashModel.from_bytes(model.to_bytes())
    assert back.n_classes == model.n_classes
    assert np.array_equal(back.thresholds, model.thresholds) and np.array_equal(back.leaves, model.leaves)


def _archive(**arrays) -> bytes:
    buffer = io.BytesIO()
    np.savez(buffer, **arrays)
    return buffer.getvalue()


def test_bad_archives_are_refused(model):
    header = np.frombuffer(b'{"format": "fhe-ml/idash-model/1", "n_classes": 11}', dtype=np.uint8)
    bad_thresholds = model.thresholds.copy()
    bad_thresholds[0, 0] = 2
    for data in (b"", b"garbage", model.to_bytes()[:100],
                 _archive(header=header, thresholds=bad_thresholds, leaves=model.leaves),
                 _archive(header=header, thresholds=model.thresholds[:-1], leaves=model.leaves),
                 _archive(header=header, thresholds=model.thresholds, leaves=model.leaves.astype(np.float64)),
                 _archive(header=np.frombuffer(b"{}", dtype=np.uint8), thresholds=model.thresholds,
                          leaves=model.leaves),
                 *(_archive(header=np.frombuffer(b'{"format": "fhe-ml/idash-model/1", "n_classes": %s}' % n,
                                                 dtype=np.uint8), thresholds=model.thresholds, leaves=model.leaves)
                   for n in (b"0", b"true", b"3", b"11.0"))):  # 1408 trees: 3 classes do not divide them
        with pytest.raises(ModelFormatError):
            IdashModel.from_bytes(data)
    with pytest.raises(ModelFormatError, match="max_bytes"):
        IdashModel.from_bytes(model.to_bytes(), max_bytes=1000)
