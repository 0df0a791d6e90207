"""The client half of encrypted HELR training: the only code that holds the secret key.

It generates the secret key and exactly the evaluation keys training needs (relinearization,
the layout's rotations, the bootstrapping keys: :func:`apps.logreg.trainer.required_galois_elements`),
packs z = y x block by block along the public schedule and encrypts it, and decrypts the
trained model (w is replicated for every sample; the client averages the copies).
"""
from __future__ import annotations

import os

import numpy as np
from tqdm.auto import tqdm

from fhe_core import ckks, rlwe, serialize
from fhe_core.ckks import Ciphertext
from fhe_core.errors import ParameterError
from fhe_core.rlwe.sampling import sub_seed

from .config import HELRConfig
from .dataset import EncryptedDataset
from .schedule import MiniBatchSchedule
from .trainer import read_checkpoint, required_galois_elements
from .twin import signed_rows

MAX_ABS_FEATURE = 1.0  # the design matrix is scaled to [0, 1) (x / levels) with a bias column of 1s


class HELRClient:
    """Keys, encryption and decryption for one training session.

    Args:
        config: the training settings (its preset fixes the parameters).
        device: where keys and ciphertexts live ("cpu" or "cuda").
        seed: 32 bytes, tests only: fixes the secret key, the evaluation keys and every
            encryption's randomness. Default: the OS CSPRNG.
    """

    def __init__(self, config: HELRConfig, *, device: str = "cpu", seed: bytes | None = None):
        if not isinstance(config, HELRConfig):
            raise ParameterError(f"HELRClient: expected a HELRConfig, got {type(config).__name__}")
        self.config = config
        self.params = config.bootstrapping_parameters.params(device=device, allow_insecure=config.allow_insecure)
        self._seed = seed
        self._ctx = ckks.rlwe_context(self.params)
        self._sk = rlwe.gen_secret_key(self._ctx, seed=sub_seed(seed, "helr/secret"))
        self._encoder = ckks.Encoder(self.params)
        self._encryptor = ckks.Encryptor(self.params, self._sk)
        self._decryptor = ckks.Decryptor(self.params, self._sk)
        self._keys: rlwe.EvalKeySet | None = None
        self.features: int | None = None

    def __repr__(self) -> str:
        return f"HELRClient({self.config.bootstrapping}, device={self.params.device})"

    def galois_elements(self) -> list[int]:
        return required_galois_elements(self.config, self.params)

    def eval_keys(self) -> rlwe.EvalKeySet:
        """Relinearization key + the Galois keys of :meth:`galois_elements` (generated once)."""
        if self._keys is None:
            self._keys = rlwe.gen_eval_keys(self._ctx, self._sk, self.galois_elements(),
                                            seed=sub_seed(self._seed, "helr/eval-keys"))
        return self._keys

    def write_eval_keys(self, path: str | os.PathLike, *, progress: bool = False) -> int:
        """The keys of :meth:`eval_keys`, written to ``path`` one at a time (bytes written):
        the 128-bit set is about 10 GB in memory, the file under half of that (seed-compressed,
        residues at their primes' widths), and memory holds two keys (one packed and written while
        the next is made). Upload the file with ``ServiceClient.register_keys(path, ...)``.
        With a test seed the file holds exactly the keys :meth:`eval_keys` returns.
        ``progress``: a bar counting the keys (minutes on a CPU at 128 bits)."""
        keys_seed = sub_seed(self._seed, "helr/eval-keys")
        elements = sorted(set(self.galois_elements()))

        def one_at_a_time(bar):
            yield rlwe.gen_relin_key(self._ctx, self._sk, seed=sub_seed(keys_seed, "relin"))
            for k in elements:
                bar.update()
                yield rlwe.gen_galois_key(self._ctx, self._sk, k, seed=sub_seed(keys_seed, f"galois/{k}"))
            bar.update()

        with tqdm(total=len(elements) + 1, desc="evaluation keys", unit="key", disable=not progress) as bar:
            return serialize.dump_eval_keys(one_at_a_time(bar), path, self.params, packed=True)

    def encrypt_dataset(self, x: np.ndarray, y: np.ndarray,
                        schedule: MiniBatchSchedule | None = None) -> EncryptedDataset:
        """Encrypt mu z = mu y x (``x``: the ``[n, d]`` design matrix of the twin, bias column
        first, entries in [-1, 1]; ``y``: 0/1 labels; mu = ``config.cubic.mu``, public) block by
        block along ``schedule`` (default ``config.schedule(n)``), feature-major
        (:class:`ml.packing.ColumnMajorLayout`), at the bootstrapping output level and the
        default scale."""
        x, y = self._check_data(x, y)
        schedule = self.config.schedule(len(x)) if schedule is None else schedule
        if len(schedule.permutation) != len(x) or schedule.batch_size != self.config.batch_size:
            raise ParameterError(f"encrypt_dataset: the schedule is for {len(schedule.permutation)} rows in batches "
                                 f"of {schedule.batch_size}; got {len(x)} rows and batch {self.config.batch_size}")
        z = signed_rows(x, y) * self.config.cubic.mu  # mu z: z . v is then T = mu t (trainer docstring)
        layout, per_block = self.config.layout, self.config.ciphertexts_per_batch
        level = self.config.bootstrapping_parameters.output_level
        blocks = []
        for b in range(schedule.n_blocks):
            vectors = layout.pack(z[schedule.block_rows(b)], per_block)
            blocks.append(tuple(self._encrypt(vec, level, f"helr/data/{b}/{i}") for i, vec in enumerate(vectors)))
        self.features = x.shape[1]
        return EncryptedDataset(tuple(blocks), len(x), x.shape[1], self.config.batch_size)

    def _check_data(self, x, y) -> tuple[np.ndarray, np.ndarray]:
        x, y = np.asarray(x, dtype=np.float64), np.asarray(y)
        if x.ndim != 2 or len(x) == 0 or x.shape[1] > self.config.columns:
            raise ParameterError(f"encrypt_dataset: x must be [n >= 1, d <= {self.config.columns}], got {x.shape}")
        if y.shape != (len(x),) or not np.isin(y, (0, 1)).all():
            raise ParameterError(f"encrypt_dataset: y must be [{len(x)}] labels in {{0, 1}}")
        if not np.isfinite(x).all() or np.abs(x).max() > MAX_ABS_FEATURE:
            raise ParameterError("encrypt_dataset: x must be finite with entries in [-1, 1] (scale the features "
                                 "as the twin does: design_matrix(features, levels))")
        return x, y

    def _encrypt(self, values: np.ndarray, level: int, label: str) -> Ciphertext:
        pt = self._encoder.encode(values, level=level, slots=self.config.layout.slots)
        return self._encryptor.encrypt(pt, seed=sub_seed(self._seed, label))

    def encrypt_features(self, x: np.ndarray) -> list[Ciphertext]:
        """Test samples for encrypted scoring (:meth:`EncryptedHELRTrainer.score`): the ``[n, d]``
        design matrix, feature-major, ceil(n / rows) ciphertexts at the bootstrapping output level."""
        x, _ = self._check_data(x, np.zeros(len(np.asarray(x)), dtype=np.int64))
        level = self.config.bootstrapping_parameters.output_level
        return [self._encrypt(vec, level, f"helr/score/{i}") for i, vec in enumerate(self.config.layout.pack(x))]

    def decrypt_margins(self, cts: list[Ciphertext], samples: int) -> np.ndarray:
        """The ``[samples]`` margins x_i . w of :meth:`EncryptedHELRTrainer.score`'s output (each
        sample's copies averaged)."""
        layout = self.config.layout
        vectors = np.stack([self._encoder.decode(self._decryptor.decrypt(ct)).real for ct in cts])
        return layout.unpack(vectors, samples, layout.columns).mean(axis=1)

    # ---- decryption --------------------------------------------------------------------------------

    def decrypt_weights(self, ct: Ciphertext, features: int | None = None) -> np.ndarray:
        """The ``[features]`` float64 vector (w or v; w[0] is the bias) of a replicated
        ciphertext: the real parts, averaged over the rows."""
        count = features if features is not None else self.features
        if count is None:
            raise ParameterError("decrypt_weights: pass features (no dataset was encrypted by this client)")
        slots = self._encoder.decode(self._decryptor.decrypt(ct))
        return self.config.layout.row_mean(slots.real, count)

    def decrypt_checkpoint(self, data: bytes, features: int | None = None) -> tuple[int, np.ndarray, np.ndarray]:
        """(iteration, w, v) of a trainer checkpoint."""
        iteration, w, v = read_checkpoint(data, self.params)
        return iteration, self.decrypt_weights(w, features), self.decrypt_weights(v, features)
