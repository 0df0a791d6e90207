"""The model readers of apps.xgboost under bounded fuzzing (hypothesis; tests/fuzz_targets.py), and
the inputs that fuzzing found answered with an untyped error or a forged-size allocation."""
import io
import json
import random
import tracemalloc
import zipfile

import numpy as np
import pytest

from apps.xgboost.archive import ModelFormatError, read_archive, write_archive
from apps.xgboost.export import HEForest
from apps.xgboost.plan import IDASH_FORMAT, IdashModel, PlanError, PublicModel
from fuzz_targets import _forest, _idash_model, _public_model_corpus, forge_npy_shape, fuzz_test

test_fuzz_read_archive = fuzz_test("apps.xgboost.archive.read_archive")
test_fuzz_idash_model_from_bytes = fuzz_test("apps.xgboost.plan.IdashModel.from_bytes")
test_fuzz_he_forest_from_bytes = fuzz_test("apps.xgboost.export.HEForest.from_bytes")
test_fuzz_private_forest_from_bytes = fuzz_test("apps.xgboost.private_forest.PrivateForest.from_bytes")
test_fuzz_public_model_from_json = fuzz_test("apps.xgboost.plan.PublicModel.from_json")

ARRAYS = ("thresholds", "leaves")


def _read(data: bytes):
    return read_archive(data, "test", 1 << 30, IDASH_FORMAT, ARRAYS)


def test_a_forged_npy_shape_is_refused_before_any_allocation():
    """The .npy header of a member claims 2^40 elements; the member holds a few bytes."""
    valid = _idash_model().to_bytes()
    for seed in range(8):
        forged = forge_npy_shape(random.Random(seed), valid)
        tracemalloc.start()
        try:
            with pytest.raises(ModelFormatError, match="declares"):
                _read(forged)
            peak = tracemalloc.get_traced_memory()[1]
        finally:
            tracemalloc.stop()
        assert peak < 16 * len(forged) + (4 << 20)


def _zip(members: dict[str, bytes], compression=zipfile.ZIP_STORED) -> bytes:
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", compression) as archive:
        for name, data in members.items():
            archive.writestr(name, data)
    return out.getvalue()


def _npy(array: np.ndarray) -> bytes:
    out = io.BytesIO()
    np.save(out, array)
    return out.getvalue()


def test_zip_features_zipfile_lacks_are_a_model_format_error():
    blob = bytearray(_zip({"header.npy": _npy(np.zeros(3, np.uint8))}))
    blob[8:10] = (99).to_bytes(2, "little")            # local header: compression method 99 (AES)
    central = blob.rfind(b"PK\x01\x02")
    blob[central + 10:central + 12] = (99).to_bytes(2, "little")
    with pytest.raises(ModelFormatError, match="not an npz archive"):
        _read(bytes(blob))


@pytest.mark.parametrize("header", [np.frombuffer(("[" * 5000 + "]" * 5000).encode(), np.uint8),
                                    np.zeros(4, np.float64), np.zeros((2, 2), np.uint8)])
def test_a_hostile_header_array_is_a_model_format_error(header):
    blob = _zip({"header.npy": _npy(header), "thresholds.npy": _npy(np.zeros((1, 3), np.int64)),
                 "leaves.npy": _npy(np.zeros((1, 4), np.int64))})
    with pytest.raises(ModelFormatError, match="header"):
        _read(blob)


def test_members_that_are_not_npy_arrays_are_refused():
    blob = _zip({"header.npy": _npy(np.zeros(3, np.uint8)), "notes.txt": b"hello"})
    with pytest.raises(ModelFormatError, match="not an .npy array"):
        _read(blob)


def test_a_valid_archive_round_trips():
    header, arrays = {"format": IDASH_FORMAT, "n_classes": 3}, {"thresholds": np.eye(3, dtype=np.int64),
                                                                "leaves": np.arange(12).reshape(3, 4)}
    got_header, got = _read(write_archive(header, arrays))
    assert got_header == header and sorted(got) == sorted(arrays)
    for name in arrays:
        np.testing.assert_array_equal(got[name], arrays[name])
        assert got[name].flags.writeable


def test_zero_dimensional_arrays_are_refused():
    model = _idash_model()
    with pytest.raises(ModelFormatError, match="n_classes"):
        IdashModel.from_bytes(write_archive({"format": IDASH_FORMAT, "n_classes": 1},
                                            {"thresholds": model.thresholds, "leaves": np.asarray(5)}))
    forest = _forest()
    arrays = {name: getattr(forest, name) for name in ("feature", "threshold", "bit", "default_left", "is_padding",
                                                       "leaves", "leaves_float", "base", "base_float")}
    header = {"format": "fhe-ml/he-forest/1", "depth": forest.depth, "n_classes": forest.n_classes,
              "frac_bits": forest.frac_bits}
    blob = write_archive(header, {**arrays, "tree_class": np.asarray(0), "cuts": forest.binning.cuts,
                                  "offsets": forest.binning.offsets})
    with pytest.raises(ModelFormatError, match="shape"):
        HEForest.from_bytes(blob)


def test_a_cut_beyond_float32_is_refused():
    """1e300 as float32 is inf: a threshold no value is below; refused, not silently kept."""
    forest = _forest()
    cuts = forest.binning.cuts.astype(np.float64)
    cuts[0] = 1e300
    header = {"format": "fhe-ml/he-forest/1", "depth": forest.depth, "n_classes": forest.n_classes,
              "frac_bits": forest.frac_bits}
    arrays = {name: getattr(forest, name) for name in ("feature", "threshold", "bit", "default_left", "is_padding",
                                                       "leaves", "leaves_float", "tree_class", "base", "base_float")}
    with pytest.raises(ModelFormatError, match="finite"):
        HEForest.from_bytes(write_archive(header, {**arrays, "cuts": cuts, "offsets": forest.binning.offsets}))


def test_a_leaf_of_minus_two_to_the_63_is_refused():
    """np.abs(-2^63) is -2^63 in int64: the old bound check let it through."""
    forest = _forest()
    leaves = forest.leaves.copy()
    leaves[0, 0] = np.iinfo(np.int64).min
    header = {"format": "fhe-ml/he-forest/1", "depth": forest.depth, "n_classes": forest.n_classes,
              "frac_bits": forest.frac_bits}
    arrays = {name: getattr(forest, name) for name in ("feature", "threshold", "bit", "default_left", "is_padding",
                                                       "leaves_float", "tree_class", "base", "base_float")}
    blob = write_archive(header, {**arrays, "leaves": leaves, "cuts": forest.binning.cuts,
                                  "offsets": forest.binning.offsets})
    with pytest.raises(ModelFormatError, match="2\\^62"):
        HEForest.from_bytes(blob)
    assert HEForest.from_bytes(forest.to_bytes()).leaves.tolist() == forest.leaves.tolist()
    model = _idash_model()
    leaves = model.leaves.copy()
    leaves[1, 2] = np.iinfo(np.int64).min       # its score bound would have been negative
    with pytest.raises(ModelFormatError, match="2\\^62"):
        IdashModel.from_bytes(write_archive({"format": IDASH_FORMAT, "n_classes": model.n_classes},
                                            {"thresholds": model.thresholds, "leaves": leaves}))


def test_public_model_json_beyond_its_types_is_a_plan_error():
    thermometer = json.loads(_public_model_corpus()[0])
    cuts, offsets = thermometer["binning"]["cuts"], thermometer["binning"]["offsets"]
    for change in ({"chunks": [[0, 1e999]]}, {"binning": {"cuts": [1.0], "offsets": [0, 2 ** 70]}},
                   {"binning": {"cuts": [1e300] + cuts[1:], "offsets": offsets}}):
        with pytest.raises(PlanError):
            PublicModel.from_json(json.dumps({**thermometer, **change}))
    with pytest.raises(PlanError, match="not JSON"):
        PublicModel.from_json("[" * 5000 + "]" * 5000)
