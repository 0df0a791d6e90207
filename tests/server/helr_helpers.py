"""A tiny encrypted HELR session for the service tests: insecure N = 2^11 bootstrapping preset,
a small synthetic design matrix (bias column + 3-bit features in [0, 1)), fixed seeds."""
from __future__ import annotations

import functools

import numpy as np

from apps.logreg.client import HELRClient
from apps.logreg.config import HELRConfig
from apps.logreg.trainer import EncryptedHELRTrainer

SAMPLES, FEATURES = 40, 12


def fixed_seed(label: str) -> bytes:
    return label.encode().ljust(32, b"\0")[:32]


def design(seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    x = np.concatenate([np.ones((SAMPLES, 1)), rng.integers(0, 8, (SAMPLES, FEATURES - 1)) / 8], axis=1)
    y = (x[:, 1:4].sum(axis=1) + rng.normal(0, 0.3, SAMPLES) > 1.5).astype(np.int64)
    return x, y


def config(iterations: int) -> HELRConfig:
    return HELRConfig.tiny(iterations=iterations)


@functools.cache
def session():
    """(client, keys, dataset): one secret key for every test; a job's iteration count only
    changes how far the public schedule runs, not the packed blocks."""
    client = HELRClient(config(4), seed=fixed_seed("server/helr"))
    x, y = design()
    return client, client.eval_keys(), client.encrypt_dataset(x, y)


def local_run(iterations: int) -> EncryptedHELRTrainer:
    """The same training in process: what the service must reproduce bit for bit."""
    _, keys, dataset = session()
    cfg = config(iterations)
    trainer = EncryptedHELRTrainer(cfg, keys, dataset, cfg.schedule(dataset.samples))
    trainer.run()
    return trainer


def local_model(iterations: int):
    """The model the service returns (w at level 0, ``for_client``), computed in process."""
    trainer = local_run(iterations)
    return trainer.for_client(trainer.weights)
