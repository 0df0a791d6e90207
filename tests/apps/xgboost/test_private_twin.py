"""The model-private encoding in the clear: the public grid, the export that rounds thresholds onto
it, and the integer twin, checked against XGBoost's own predictions on the grid-quantized features."""
import numpy as np
import pytest

xgboost = pytest.importorskip("xgboost", reason="xgboost not installed (the iDASH tests do not need it)")

from apps.xgboost.archive import ModelFormatError  # noqa: E402
from apps.xgboost.grid import FixedPointGrid, GridError  # noqa: E402
from apps.xgboost.private_forest import PrivateForest, export_private  # noqa: E402
from apps.xgboost.twin import predict_private  # noqa: E402
from data.genomics import load_khan  # noqa: E402

FRAC_BITS = 16
SRBCT_GRID = FixedPointGrid(6, 2)  # 64 cells of 1/4 over [-8, 8): SRBCT's log-ratios lie in [-6, 3.5]


def check_agreement(booster, forest, x):
    """Twin on the grid cells vs xgboost.predict(output_margin=True) on the quantized features."""
    cells, missing = forest.grid.index(x)
    prediction = predict_private(forest, cells, missing)
    margins = booster.predict(xgboost.DMatrix(forest.grid.quantize(x)), output_margin=True).reshape(len(x), -1)
    np.testing.assert_allclose(prediction.margins_exact, margins, atol=1e-5, rtol=1e-5)
    per_class = np.bincount(forest.tree_class, minlength=forest.n_classes).max()
    assert np.abs(prediction.margins - prediction.margins_exact).max() <= (per_class + 1) * 2.0 ** -(FRAC_BITS + 1)
    library = margins.argmax(axis=1) if margins.shape[1] > 1 else (margins[:, 0] > 0).astype(int)
    np.testing.assert_array_equal(prediction.predicted, library)
    return prediction


def test_grid_cells_thresholds_and_digits():
    grid = FixedPointGrid(6, 2)
    assert (grid.size, grid.low, grid.step) == (64, -8.0, 0.25)
    rng = np.random.default_rng(0)
    x = np.concatenate([rng.normal(scale=4, size=(50, 7)), [[-np.inf, np.inf, -8, 7.99, 8, -9, np.nan]]])
    x[rng.random(x.shape) < 0.1] = np.nan
    cells, missing = grid.index(x)
    np.testing.assert_array_equal(missing, np.isnan(x))
    assert cells.min() >= 0 and cells.max() <= 63 and list(cells[-1, :6]) == [0, 63, 0, 63, 63, 0]
    present = ~missing
    assert (np.abs(grid.quantize(x)[present] - np.clip(x[present], -8, 8)) <= 0.125 + 1e-9).all()
    thresholds = np.concatenate([rng.normal(scale=5, size=200), grid.values[::7], [-100.0, 100.0]]).astype(np.float32)
    k = grid.threshold_index(thresholds)
    assert k.min() == 0 and k.max() == 64
    q = np.arange(64)
    # XGBoost's test on the quantized value is the integer test on the cell, for every cell and threshold
    np.testing.assert_array_equal(grid.values[q][:, None] < thresholds[None, :], q[:, None] < k[None, :])
    for count, widths in ((1, (6,)), (2, (3, 3)), (3, (2, 2, 2)), (4, (2, 2, 1, 1))):
        assert grid.digit_bits(count) == widths
        digits = grid.digits(cells, missing, count)
        weights = np.cumsum((0,) + widths[:0:-1])[::-1]  # the shift of each digit, most significant first
        np.testing.assert_array_equal((digits << weights[:, None, None]).sum(axis=0)[present], cells[present])
        assert (digits[0][missing] == 1 << widths[0]).all() and (digits[1:][:, missing] == 0).all()
        assert (digits[0][present] < 1 << widths[0]).all()


def test_grid_refuses_bad_settings():
    for bits, frac in ((0, 2), (17, 0), (4, 40), (True, 2), (4.0, 2)):
        with pytest.raises(GridError):
            FixedPointGrid(bits, frac)
    with pytest.raises(GridError, match="bits, frac_bits"):
        FixedPointGrid.from_dict({"bits": 6})
    with pytest.raises(GridError, match="samples"):
        FixedPointGrid(6, 2).index(np.zeros(3))


def test_srbct_on_the_grid(srbct_dir):
    data = load_khan(srbct_dir)
    train = xgboost.DMatrix(data.x_train, label=data.y_train)
    booster = xgboost.train({"objective": "multi:softprob", "num_class": 4, "tree_method": "hist", "seed": 0,
                             "nthread": 2, "max_depth": 2}, train, num_boost_round=30)
    forest = export_private(booster, SRBCT_GRID, FRAC_BITS)
    prediction = check_agreement(booster, forest, data.x_test)
    check_agreement(booster, forest, data.x_train)
    assert forest.leaves.shape == (120, 4) and forest.n_features == 2308
    assert 0 < forest.trees_per_class <= 32  # the private plan's per-class bound for SRBCT
    # the quantization's cost, measured on the raw features: no test sample changes class here
    raw = booster.predict(xgboost.DMatrix(data.x_test), output_margin=True).argmax(axis=1)
    assert (prediction.predicted == raw).mean() == 1.0


@pytest.mark.parametrize("objective,n_classes,depth", [
    ("multi:softprob", 3, 2), ("binary:logistic", 2, 3), ("multi:softmax", 3, 4), ("binary:logistic", 2, 6),
])
def test_deep_trees_with_missing_values(objective, n_classes, depth):
    rng = np.random.default_rng(depth)
    x = rng.normal(size=(500, 8))
    y = (x[:, 0] + x[:, 1] ** 2 - x[:, 2] * x[:, 3] > 0.5).astype(int)
    if n_classes > 2:
        y = np.digitize(x[:, 0] + x[:, 1] - x[:, 2] ** 2, np.quantile(x[:, 0], [0.3, 0.6]))
    x[rng.random(x.shape) < 0.1] = np.nan
    params = {"objective": objective, "max_depth": depth, "tree_method": "hist", "seed": 1, "nthread": 2}
    if n_classes > 2:
        params["num_class"] = n_classes
    booster = xgboost.train(params, xgboost.DMatrix(x[:400], label=y[:400]), num_boost_round=12)
    forest = export_private(booster, FixedPointGrid(8, 5), FRAC_BITS)
    check_agreement(booster, forest, x[400:])
    assert forest.depth == depth and forest.is_padding.any() and (forest.default_left[~forest.is_padding] == 0).any()
    k = forest.threshold_index[~forest.is_padding]
    assert 0 <= k.min() and k.max() <= 256 and len(np.unique(k)) > 10


def test_bytes_round_trip_and_validation():
    rng = np.random.default_rng(3)
    x, y = rng.normal(size=(200, 5)), rng.integers(0, 2, 200)
    booster = xgboost.train({"objective": "binary:logistic", "max_depth": 3, "nthread": 2},
                            xgboost.DMatrix(x, label=y), num_boost_round=4)
    forest = export_private(booster, FixedPointGrid(7, 4))
    back = PrivateForest.from_bytes(forest.to_bytes())
    assert back.grid == forest.grid and back.n_features == 5
    for name in ("feature", "threshold_index", "default_left", "is_padding", "leaves", "tree_class", "base"):
        np.testing.assert_array_equal(getattr(back, name), getattr(forest, name))
    bad = PrivateForest(**{**forest.__dict__, "threshold_index": forest.threshold_index + 1000})
    with pytest.raises(ModelFormatError, match="threshold index"):
        PrivateForest.from_bytes(bad.to_bytes())
    bad = PrivateForest(**{**forest.__dict__, "feature": forest.feature + 5})
    with pytest.raises(ModelFormatError, match="feature"):
        PrivateForest.from_bytes(bad.to_bytes())
    with pytest.raises(ModelFormatError):
        PrivateForest.from_bytes(b"not an archive")
