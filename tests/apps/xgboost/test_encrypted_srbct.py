"""SRBCT (Khan 2001) encrypted: the 20 test samples' decrypted scores equal the twin's exactly and
their argmax equals xgboost's own prediction on every sample.

CI runs a model on 150 genes on a tiny insecure ring; the full 2,308-gene model at the 128-bit
preset is `slow` on the CPU and `gpu` on a device.
"""
import json
from pathlib import Path

import numpy as np
import pytest

xgboost = pytest.importorskip("xgboost", reason="xgboost not installed (the iDASH tests do not need it)")

from apps.xgboost.client import ForestClient  # noqa: E402
from apps.xgboost.encoding import PublicBinning  # noqa: E402
from apps.xgboost.export import HEForest, export_booster  # noqa: E402
from apps.xgboost.plan import MARGIN_BITS, ForestPlan, PublicModel, named_params  # noqa: E402
from apps.xgboost.server import ForestEvaluator  # noqa: E402
from apps.xgboost.twin import predict_forest  # noqa: E402
from data.genomics import load_khan  # noqa: E402
from ml.baselines import XGBoostParams, xgboost_baseline  # noqa: E402

FIXTURES = Path(__file__).with_name("fixtures")


def run_srbct(srbct_dir, preset, genes=None, device="cpu", allow_insecure=False, depth=2):
    data = load_khan(srbct_dir)
    keep = slice(None) if genes is None else np.argsort(-data.x_train.var(axis=0))[:genes]
    x_train, x_test = data.x_train[:, keep], data.x_test[:, keep]
    baseline = xgboost_baseline(x_train, data.y_train, x_test, data.y_test, 4,
                                XGBoostParams(rounds=30, max_depth=depth))
    forest = export_booster(baseline.booster, PublicBinning.from_dmatrix(baseline.train_matrix))
    return check_encrypted(forest, baseline.booster, x_test, preset, device, allow_insecure)


def check_encrypted(forest, booster, x_test, preset, device="cpu", allow_insecure=False):
    """Encrypt x_test, evaluate, decrypt: scores equal the integer twin's, argmax equals booster's."""
    binning = forest.binning
    params = named_params(preset, allow_insecure=allow_insecure, device=device)
    plan = ForestPlan.build(forest, params, width=len(x_test))
    client = ForestClient(PublicModel.from_json(plan.public_model(preset).to_json()), device=device,
                          allow_insecure=allow_insecure)
    server = ForestEvaluator(params, client.eval_keys(), forest, plan=plan)
    results = server.evaluate(client.encrypt(x_test))
    scores = client.decrypt_scores(results, len(x_test))
    np.testing.assert_array_equal(scores, predict_forest(forest, binning.encode(x_test)).scores)
    margins = booster.predict(xgboost.DMatrix(x_test), output_margin=True)
    np.testing.assert_array_equal(client.predict(results, len(x_test)), margins.argmax(axis=1))
    assert min(client.noise_budget(ct) for ct in results) >= plan.answer_budget >= MARGIN_BITS
    return plan


def test_srbct_150_genes(srbct_dir):
    plan = run_srbct(srbct_dir, "BFVN11QP335L4D5T20Insecure", genes=150, allow_insecure=True)
    assert len(plan.chunks) == 2  # 150 genes in 102 lanes per ciphertext


@pytest.mark.slow
def test_srbct_full_128_bit(srbct_dir):
    plan = run_srbct(srbct_dir, "BFVN13QP218L3D4T20")
    assert plan.n_inputs == sum(k + 1 for _, k in plan.chunks)


@pytest.mark.gpu
def test_srbct_full_gpu(srbct_dir):
    run_srbct(srbct_dir, "BFVN13QP218L3D4T20", device="cuda")


def cut_samples(binning, n, rng):
    """Samples on and between every feature's cuts, below and above them, some missing."""
    x = np.empty((n, binning.n_features), dtype=np.float32)
    for f in range(binning.n_features):
        cuts = binning.cuts[binning.offsets[f]:binning.offsets[f + 1]]
        grid = np.concatenate([[cuts[0] - 1], cuts, (cuts[:-1] + cuts[1:]) / 2, [cuts[-1] + 1]])
        x[:, f] = rng.choice(grid, n)
    x[rng.random(x.shape) < 0.1] = np.nan
    return x


@pytest.mark.parametrize("release", ["3.4.1"])
def test_model_saved_by_release(release):
    """A model trained and saved by another xgboost release (fixtures/README.md), with its cuts:
    3.3 and later list each feature's lowest bin bound as -inf, which must not reach the client."""
    fixture = json.loads((FIXTURES / f"srbct_xgboost-{release}.json").read_text())
    booster = xgboost.Booster(model_file=bytearray(json.dumps(fixture["model"]).encode()))
    binning = PublicBinning.from_quantile_cut(np.array(fixture["cut_indptr"]), np.array(fixture["cut_values"]))
    forest = HEForest.from_bytes(export_booster(booster, binning).to_bytes())
    assert np.isfinite(forest.binning.cuts).all() and len(forest.binning.cuts) < len(fixture["cut_values"])
    x = cut_samples(forest.binning, 20, np.random.default_rng(0))
    check_encrypted(forest, booster, x, "BFVN11QP335L4D5T20Insecure", allow_insecure=True)
