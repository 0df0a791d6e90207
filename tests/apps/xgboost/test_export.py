"""Exported forests evaluated by the twin agree with XGBoost's own predictions."""
import numpy as np
import pytest
import xgboost

from apps.xgboost.encoding import ExportError, PublicBinning
from apps.xgboost.export import export_booster, required_plaintext_bits
from apps.xgboost.twin import predict_forest
from data.genomics import load_khan

FRAC_BITS = 16


def check_agreement(booster, train_matrix, x, n_classes):
    """Twin vs xgboost.predict(output_margin=True) on every sample of `x`."""
    binning = PublicBinning.from_dmatrix(train_matrix)
    forest = export_booster(booster, binning, FRAC_BITS)
    prediction = predict_forest(forest, binning.encode(x))
    margins = booster.predict(xgboost.DMatrix(x), output_margin=True).reshape(len(x), -1)
    per_class = np.bincount(forest.tree_class, minlength=forest.n_classes).max()
    # xgboost sums float32 leaves; the twin's float64 path differs by float32 rounding only
    np.testing.assert_allclose(prediction.margins_exact, margins, atol=1e-5, rtol=1e-5)
    # fixed point: each leaf and the base are rounded to 2^-FRAC_BITS
    bound = (per_class + 1) * 2.0 ** -(FRAC_BITS + 1)
    assert np.abs(prediction.margins - prediction.margins_exact).max() <= bound
    library = margins.argmax(axis=1) if n_classes > 1 else (margins[:, 0] > 0).astype(int)
    np.testing.assert_array_equal(prediction.predicted, library)
    assert np.abs(prediction.scores).max() < 2 ** (required_plaintext_bits(forest) - 1)
    return forest


@pytest.mark.parametrize("depth", [2, None])
def test_srbct_models(srbct_dir, depth):
    data = load_khan(srbct_dir)
    train = xgboost.DMatrix(data.x_train, label=data.y_train)
    params = {"objective": "multi:softprob", "num_class": 4, "tree_method": "hist", "seed": 0,
              "nthread": 2}
    if depth is not None:
        params["max_depth"] = depth
    booster = xgboost.train(params, train, num_boost_round=30)
    forest = check_agreement(booster, train, data.x_test, 4)
    check_agreement(booster, train, data.x_train, 4)
    assert forest.depth <= (depth or 6) and forest.leaves.shape == (120, 2**forest.depth)


def synthetic(n, n_features, n_classes, seed, missing=0.1):
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(n, n_features))
    y = (x[:, 0] + x[:, 1] ** 2 - x[:, 2] * x[:, 3] > 0.5).astype(int)
    if n_classes > 2:
        y = np.digitize(x[:, 0] + x[:, 1] - x[:, 2] ** 2, np.quantile(x[:, 0], [0.3, 0.6]))
    x[rng.random(x.shape) < missing] = np.nan
    return x, y


@pytest.mark.parametrize("objective,n_classes,depth", [
    ("multi:softprob", 3, 4), ("binary:logistic", 2, 3), ("multi:softmax", 3, 6),
])
def test_deeper_trees_with_missing_values(objective, n_classes, depth):
    x, y = synthetic(600, 8, n_classes, seed=depth)
    train = xgboost.DMatrix(x[:400], label=y[:400])
    params = {"objective": objective, "max_depth": depth, "tree_method": "hist", "seed": 1,
              "nthread": 2, "max_bin": 32}
    if n_classes > 2:
        params["num_class"] = n_classes
    booster = xgboost.train(params, train, num_boost_round=15)
    forest = check_agreement(booster, train, x[400:], n_classes if n_classes > 2 else 1)
    assert forest.depth == depth
    assert forest.is_padding.any() and not forest.is_padding.all()
    assert (forest.default_left[~forest.is_padding] == 0).any()  # both directions for NaN


def test_thermometer_bits():
    x, y = synthetic(200, 4, 2, seed=0)
    binning = PublicBinning.from_dmatrix(xgboost.QuantileDMatrix(x, label=y))
    encoded = binning.encode(x)
    for f in range(4):
        cuts = binning.cuts[binning.offsets[f] : binning.offsets[f + 1]]
        bits = encoded.bits[:, binning.offsets[f] : binning.offsets[f + 1]]
        present = ~np.isnan(x[:, f])
        expected = x[present, f].astype(np.float32)[:, None] < cuts[None, :]
        np.testing.assert_array_equal(bits[present], expected)
        assert (np.diff(bits[present], axis=1) >= 0).all()  # 0...0 1...1 along increasing cuts
        assert (bits[~present] == 0).all() and (encoded.missing[:, f] == ~present).all()


def test_threshold_outside_binning_is_refused():
    x, y = synthetic(300, 4, 2, seed=2, missing=0.0)
    train = xgboost.DMatrix(x, label=y)
    booster = xgboost.train({"objective": "binary:logistic", "max_depth": 2, "nthread": 2,
                             "tree_method": "exact"}, train, num_boost_round=3)
    coarse = PublicBinning.from_dmatrix(xgboost.QuantileDMatrix(x[:20], label=y[:20], max_bin=4))
    with pytest.raises(ExportError, match="public cuts"):
        export_booster(booster, coarse)


@pytest.mark.parametrize("lowest", [-7.5, -np.inf])  # xgboost up to 3.2, and since 3.3
def test_quantile_cut_layouts(lowest):
    """Each feature's lowest bin bound is dropped (no split uses it); an empty feature keeps no cuts."""
    indptr = np.array([0, 3, 3, 5], dtype=np.uint64)
    values = np.array([lowest, 1.0, 2.0, lowest, 7.0], dtype=np.float32)
    binning = PublicBinning.from_quantile_cut(indptr, values)
    np.testing.assert_array_equal(binning.cuts, np.array([1.0, 2.0, 7.0], dtype=np.float32))
    np.testing.assert_array_equal(binning.offsets, [0, 2, 2, 3])
    values[2] = np.inf
    with pytest.raises(ExportError, match="non-finite bin bound"):
        PublicBinning.from_quantile_cut(indptr, values)
