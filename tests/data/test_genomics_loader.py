"""SRBCT and NCI60 loaders: shapes and label counts from the shared READMEs; wheel reading."""
import gzip
import zipfile

import numpy as np
import pytest

from data.errors import DataNotFoundError
from data.genomics import KHAN_CLASSES, load_khan, load_nci60


def check_khan(data):
    assert data.x_train.shape == (63, 2308) and data.x_test.shape == (20, 2308)
    assert np.bincount(data.y_train).tolist() == [8, 23, 12, 20]
    assert np.bincount(data.y_test).tolist() == [3, 6, 6, 5]
    assert data.classes == KHAN_CLASSES
    assert -7 < data.x_train.min() < -5 and 3 < data.x_train.max() < 4


def test_khan_from_directory(shared_dir):
    data = load_khan(shared_dir("srbct_khan2001"))
    check_khan(data)
    assert data.x_train[0, :3].tolist() == [0.7733437, -2.438405, -0.4825622]


def islp_data_files(shared_dir) -> dict[str, bytes]:
    """The islp package's data files (ISLP/data/*, uncompressed) built from the shared copies."""
    files = {}
    for folder in ("srbct_khan2001", "nci60"):
        for path in shared_dir(folder).iterdir():
            if path.suffix in (".csv", ".gz"):
                body = path.read_bytes()
                name = path.name
                if name.endswith(".gz"):
                    body, name = gzip.decompress(body), name[:-3]
                files[f"ISLP/data/{name}"] = body
    return files


def test_khan_and_nci60_from_a_wheel(tmp_path, shared_dir):
    """A zip laid out like the islp wheel (ISLP/data/*) built from the shared copies."""
    wheel = tmp_path / "islp-0.6.0-py3-none-any.whl"
    with zipfile.ZipFile(wheel, "w") as zf:
        for name, body in islp_data_files(shared_dir).items():
            zf.writestr(name, body)
    from_wheel = load_khan(wheel)
    check_khan(from_wheel)
    np.testing.assert_array_equal(from_wheel.x_test, load_khan(shared_dir("srbct_khan2001")).x_test)
    x, labels = load_nci60(wheel)
    assert x.shape == (64, 6830)


def test_nci60_from_directory(shared_dir):
    x, labels = load_nci60(shared_dir("nci60"))
    assert x.shape == (64, 6830) and x.dtype == np.float64
    names, counts = np.unique(labels, return_counts=True)
    counts = dict(zip(names.tolist(), counts.tolist()))
    assert counts["NSCLC"] == 9 and counts["RENAL"] == 9 and counts["MELANOMA"] == 8
    assert len(counts) == 14 and sum(counts.values()) == 64


def test_installed_islp_package(shared_dir, installed_package):
    """With no path, the data files of the installed islp package are read (a stand-in laid out
    as pip installs the wheel)."""
    installed_package("islp", islp_data_files(shared_dir))
    from_package = load_khan()
    check_khan(from_package)
    np.testing.assert_array_equal(from_package.x_train, load_khan(shared_dir("srbct_khan2001")).x_train)


def test_errors_say_what_to_do(tmp_path):
    with pytest.raises(DataNotFoundError, match="Khan_xtrain.csv"):
        load_khan(tmp_path)
    with pytest.raises(DataNotFoundError, match="pip download --no-deps islp"):
        load_khan(tmp_path / "missing.whl")
