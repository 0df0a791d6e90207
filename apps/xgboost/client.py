"""The client half of encrypted tree-ensemble inference: keys, packing, encryption, decryption.

``ForestClient(public_model)`` generates a secret key (OS randomness unless a test seed is
given) that never leaves the object; ``eval_keys()`` gives exactly the keys the server's plan
needs; ``encrypt`` packs samples into the public layout (see ``plan``) and encrypts them at
the plan's level; ``decrypt_scores`` reads the class scores back as signed integers.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from tqdm import tqdm

from fhe_core import bfv, rlwe
from fhe_core.rlwe import Ciphertext, EvalKeySet
from fhe_core.rlwe.sampling import sub_seed

from .encoding import EncodedFeatures
from .plan import Layout, PlanError, PublicModel
from .twin import predicted_classes


@dataclass(frozen=True)
class IdashSamples:
    """iDASH samples in Magara's encoding: x0, x2 `[n, T, 3]` 0/1 int64 (per tree node)."""

    x0: np.ndarray
    x2: np.ndarray


class ForestClient:
    """Key owner and packer for one public model. ``seed`` (32 bytes): tests only."""

    def __init__(self, public_model: PublicModel, *, device="cpu", seed: bytes | None = None,
                 allow_insecure: bool = False):
        if not isinstance(public_model, PublicModel):
            raise PlanError(f"ForestClient: expected a PublicModel, got {type(public_model).__name__}")
        self.model = public_model
        self.params = public_model.params(allow_insecure=allow_insecure, device=device)
        self.ctx = bfv.BFVContext(self.params)
        self.layout: Layout = public_model.layout
        self._seed = seed
        self._sk = rlwe.gen_secret_key(self.ctx.rlwe, seed=sub_seed(seed, "sk"))
        self.encoder = bfv.BatchEncoder(self.ctx)
        # secret-key encryption: fresh ciphertexts travel seeded (c_0 and a 32-byte seed), half
        # the bytes of public-key ones, with less noise
        self._encryptor = bfv.Encryptor(self.ctx, self._sk)
        self._decryptor = bfv.Decryptor(self.ctx, self._sk)
        self._count = 0

    def eval_keys(self) -> EvalKeySet:
        """Relinearization key and the public model's Galois keys (nothing else)."""
        return rlwe.gen_eval_keys(self.ctx.rlwe, self._sk, self.model.galois_elements(self.ctx.n),
                                  relin=True, seed=sub_seed(self._seed, "evk"))

    # ---- packing -------------------------------------------------------------------------------

    def pack(self, data) -> np.ndarray:
        """Slot vectors `[batches * n_inputs, N]` int64 of the samples (no encryption)."""
        if self.model.kind == "idash":
            if not isinstance(data, IdashSamples):
                raise PlanError("ForestClient: an iDASH model takes IdashSamples(x0, x2)")
            x0, x2 = np.asarray(data.x0), np.asarray(data.x2)
            if x0.shape != x2.shape or x0.ndim != 3 or not (np.isin(x0, (0, 1)).all() and np.isin(x2, (0, 1)).all()):
                raise PlanError("ForestClient: x0 and x2 must be 0/1 arrays of one shape [n, trees, 3]")
            return self._pack_batches(len(x0), lambda rows: self._pack_idash(data, rows))
        binning = self.model.binning
        if isinstance(data, EncodedFeatures):
            encoded = data
        else:
            x = np.asarray(data, dtype=np.float64)
            if x.ndim != 2 or x.shape[1] != binning.n_features:
                raise PlanError(f"ForestClient: expected samples [n, {binning.n_features}], got {list(x.shape)}")
            encoded = binning.encode(x)
        bits, missing = np.asarray(encoded.bits), np.asarray(encoded.missing)
        if bits.ndim != 2 or bits.shape[1] != len(binning.cuts) or missing.shape != (len(bits), binning.n_features) \
                or not (np.isin(bits, (0, 1)).all() and np.isin(missing, (0, 1)).all()):
            raise PlanError(f"ForestClient: encoded features must be 0/1 bits [n, {len(binning.cuts)}] and "
                            f"missing flags [n, {binning.n_features}]")
        return self._pack_batches(len(encoded.bits), lambda rows: self._pack_bits(encoded, rows))

    def _pack_batches(self, n: int, pack_one) -> np.ndarray:
        if n < 1:
            raise PlanError("ForestClient: no samples")
        width = self.layout.width
        return np.concatenate([pack_one(slice(b, min(b + width, n))) for b in range(0, n, width)])

    def _pack_bits(self, encoded: EncodedFeatures, rows: slice) -> np.ndarray:
        layout, binning = self.layout, self.model.binning
        lanes, per_row, width = 2 * layout.lanes_per_row, layout.lanes_per_row, layout.width
        missing = encoded.missing[rows].astype(np.int64)
        feature = binning.bit_feature
        bits = encoded.bits[rows] * (1 - missing[:, feature])  # a missing feature's bits are 0
        firsts = np.array([first for first, _ in self.model.chunks], dtype=np.int64)
        counts = np.array([k for _, k in self.model.chunks], dtype=np.int64)
        chunk, lane = np.divmod(np.arange(binning.n_features), lanes)
        base = (lane // per_row) * layout.half + (lane % per_row) * width      # first slot per feature
        samples = np.arange(bits.shape[0])[:, None]
        out = np.zeros((self.model.n_inputs, self.ctx.n), dtype=np.int64)
        cut = np.arange(len(feature)) - binning.offsets[feature]
        out[(firsts[chunk[feature]] + cut)[None, :], base[feature][None, :] + samples] = bits
        out[(firsts[chunk] + counts[chunk])[None, :], base[None, :] + samples] = missing
        return out

    def _pack_idash(self, data: IdashSamples, rows: slice) -> np.ndarray:
        layout, per_class = self.layout, self.model.trees_per_class
        x0 = np.asarray(data.x0[rows], dtype=np.int64)
        u = (1 - x0) * np.asarray(data.x2[rows], dtype=np.int64)  # the client's own product
        n_trees = x0.shape[1]
        if n_trees != per_class * layout.n_classes or x0.shape[2] != 3:
            raise PlanError(f"ForestClient: expected [n, {per_class * layout.n_classes}, 3] node bits, "
                            f"got {list(x0.shape)}")
        per_group = 2 * layout.blocks
        tree = np.arange(n_trees)
        cls, j = np.divmod(tree, per_class)
        group, lane = np.divmod(j, per_group)
        row, block = np.divmod(lane, layout.blocks)
        base = row * layout.half + (block * layout.n_classes + cls) * layout.width
        out = np.zeros((self.model.n_inputs, self.ctx.n), dtype=np.int64)
        samples = np.arange(x0.shape[0])[:, None]
        for p in range(3):
            index = (group * 3 + p) * 2
            out[index[None, :], base[None, :] + samples] = x0[:, :, p]
            out[(index + 1)[None, :], base[None, :] + samples] = u[:, :, p]
        return out

    # ---- encryption ------------------------------------------------------------------------------

    def encrypt(self, data, *, progress: bool = False) -> list[Ciphertext]:
        """Ciphertexts of the samples (raw features `[n, F]` with NaN = missing, EncodedFeatures,
        or IdashSamples), ``n_inputs`` per batch of up to ``width`` samples, at the plan's level.
        ``progress``: a tqdm bar (on a terminal)."""
        out = []
        for vector in tqdm(self.pack(data), desc="encrypt", unit="ct", disable=None if progress else True):
            seed = sub_seed(self._seed, f"enc/{self._count}")
            self._count += 1
            out.append(self._encryptor.encrypt(self.encoder.encode(vector), level=self.model.level, seed=seed))
        return out

    def decrypt_scores(self, cts: list[Ciphertext], n_samples: int) -> np.ndarray:
        """Signed class scores `[n_samples, C]` int64 from the server's result ciphertexts."""
        width = self.layout.width
        if len(cts) != -(-n_samples // width):
            raise PlanError(f"ForestClient.decrypt_scores: {n_samples} samples need {-(-n_samples // width)} "
                            f"result ciphertexts, got {len(cts)}")
        slots = self.layout.score_slots()
        scores = [self.encoder.decode(self._decryptor.decrypt(ct), signed=True)[slots].T for ct in cts]
        return np.concatenate(scores)[:n_samples]

    def noise_budget(self, ct: Ciphertext) -> float:
        """Invariant noise budget left in a result (bits)."""
        return self._decryptor.invariant_noise_budget(ct)

    def predict(self, cts: list[Ciphertext], n_samples: int) -> np.ndarray:
        """Class ids `[n]`: argmax of the scores (score > 0 for a binary model)."""
        return predicted_classes(self.decrypt_scores(cts, n_samples))
