"""SRBCT and NCI60 loaders: shapes and label counts from the shared READMEs; the islp layouts
(directory, wheel, installed package) on small files written here, so they run without the copies."""
import gzip
import io
import zipfile

import numpy as np
import pytest

from data.errors import DataNotFoundError
from data.genomics import KHAN_CLASSES, KHAN_GENES, NCI60_SHAPE, load_khan, load_nci60


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


def test_nci60_from_directory(shared_dir):
    x, labels = load_nci60(shared_dir("nci60"))
    assert x.shape == (64, 6830) and x.dtype == np.float64
    names, counts = np.unique(labels, return_counts=True)
    counts = dict(zip(names.tolist(), counts.tolist()))
    assert counts["NSCLC"] == 9 and counts["RENAL"] == 9 and counts["MELANOMA"] == 8
    assert len(counts) == 14 and sum(counts.values()) == 64


def islp_files(rng: np.random.Generator) -> tuple[dict[str, bytes], dict[str, np.ndarray]]:
    """ISLP/data/ files as islp 0.6.0 ships them, on random values: Khan_* as R's write.csv writes
    them (a quoted header "V1".."V2308" or "x", then one row per sample; classes coded 1..4),
    NCI60data.npy (float64 [64, 6830]), NCI60labs.csv (header label, quoted names). Returns the
    files by name and the arrays the loaders should return."""
    arrays, files = {}, {}
    for split, n in (("train", 6), ("test", 4)):
        x = np.round(rng.normal(size=(n, KHAN_GENES)), 7)
        codes = rng.permutation(np.arange(n) % 4 + 1)  # every class present
        header = ",".join(f'"V{i + 1}"' for i in range(KHAN_GENES))
        files[f"Khan_x{split}.csv"] = "\n".join([header, *(",".join(map(repr, row)) for row in x.tolist())]) + "\n"
        files[f"Khan_y{split}.csv"] = '"x"\n' + "".join(f"{c}\n" for c in codes)
        arrays[f"x_{split}"], arrays[f"y_{split}"] = x, codes - 1
    arrays["nci60"] = rng.normal(size=NCI60_SHAPE)
    arrays["nci60_labels"] = rng.choice(["CNS", "RENAL", "MCF7A-repro"], size=NCI60_SHAPE[0])
    files["NCI60labs.csv"] = "label\n" + "".join(f'"{name}"\n' for name in arrays["nci60_labels"])
    npy = io.BytesIO()
    np.save(npy, arrays["nci60"])
    files = {name: text.encode() for name, text in files.items()}
    files["NCI60data.npy"] = npy.getvalue()
    return files, arrays


@pytest.mark.parametrize("layout", ["directory", "wheel", "installed"])
def test_islp_layouts(layout, tmp_path, installed_package):
    """A directory of the files (the x CSVs gzipped, as in the shared copy), a wheel as
    `pip download --no-deps islp==0.6.0` saves it (read as a zip), or islp installed (no path)."""
    files, expected = islp_files(np.random.default_rng(5))
    if layout == "directory":
        path = tmp_path / "islp"
        path.mkdir()
        for name, body in files.items():
            if name.startswith("Khan_x"):
                name, body = f"{name}.gz", gzip.compress(body)
            (path / name).write_bytes(body)
    elif layout == "wheel":
        path = tmp_path / "islp-0.6.0-py3-none-any.whl"
        with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as zf:
            for name, body in files.items():
                zf.writestr(f"ISLP/data/{name}", body)
    else:
        path = None
        installed_package("islp", {f"ISLP/data/{name}": body for name, body in files.items()})
    khan = load_khan(path)
    for key in ("x_train", "y_train", "x_test", "y_test"):
        np.testing.assert_array_equal(getattr(khan, key), expected[key], err_msg=key)
    assert khan.classes == KHAN_CLASSES
    x, labels = load_nci60(path)
    np.testing.assert_array_equal(x, expected["nci60"])
    assert labels.tolist() == expected["nci60_labels"].tolist()


def test_errors_say_what_to_do(tmp_path):
    with pytest.raises(DataNotFoundError, match="Khan_xtrain.csv"):
        load_khan(tmp_path)
    with pytest.raises(DataNotFoundError, match="pip download --no-deps islp"):
        load_khan(tmp_path / "missing.whl")
