"""A small XGBoost model for the service tests: 3 classes, depth 3, trained with `hist` on
synthetic data (with missing values), exported with 8 fractional bits for a tiny BFV preset."""
from __future__ import annotations

import functools

import numpy as np
import xgboost

from apps.xgboost.encoding import PublicBinning
from apps.xgboost.export import HEForest, export_booster

PRESET = "BFVN11QP335L4D5T20Insecure"  # N = 2^11, t = 786433
FEATURES, CLASSES = 6, 3


def samples(n: int, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(n, FEATURES)).astype(np.float32)
    x[rng.random(x.shape) < 0.05] = np.nan
    return x


@functools.cache
def forest() -> HEForest:
    x = samples(300, 0)
    y = (np.nan_to_num(x[:, 0]) > 0).astype(int) + (np.nan_to_num(x[:, 1]) > 0.5).astype(int)
    train = xgboost.QuantileDMatrix(x, label=y, max_bin=8)
    booster = xgboost.train({"objective": "multi:softprob", "num_class": CLASSES, "tree_method": "hist",
                             "max_depth": 3, "max_bin": 8, "seed": 0, "nthread": 1}, train, num_boost_round=3)
    return export_booster(booster, PublicBinning.from_dmatrix(train), frac_bits=8)
