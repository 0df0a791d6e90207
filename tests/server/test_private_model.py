"""The model-private kind through the service: ``python -m server add-model --encoding private``
registers a PrivateForest under public bounds, the public part a client reads holds only those
bounds, a client scores encrypted samples through a real uvicorn server (tiny insecure BFV) and the
decrypted scores equal the integer twin's exactly; a key set without the public key is refused."""
from __future__ import annotations

import json

import numpy as np
import pytest

xgboost = pytest.importorskip("xgboost")

from apps.xgboost.grid import FixedPointGrid  # noqa: E402
from apps.xgboost.plan import PRIVATE_PUBLIC_FIELDS, named_params  # noqa: E402
from apps.xgboost.private_forest import export_private  # noqa: E402
from apps.xgboost.twin import predict_private  # noqa: E402
from server.__main__ import main as admin_main  # noqa: E402
from server.client import APIError  # noqa: E402
from server.client_cli import main as client_main  # noqa: E402

PRESET = "BFVN10QP660L7D3T20Insecure"
FEATURES = 10


def private_forest(seed=0):
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(300, FEATURES))
    y = np.digitize(x[:, 0] + x[:, 1] - x[:, 2] ** 2, [-0.5, 0.5])
    x[rng.random(x.shape) < 0.1] = np.nan
    booster = xgboost.train({"objective": "multi:softprob", "num_class": 3, "max_depth": 2, "nthread": 1, "seed": 0},
                            xgboost.DMatrix(x[:250], label=y[:250]), num_boost_round=2)
    return export_private(booster, FixedPointGrid(5, 3), frac_bits=10), x[250:]


def test_private_model_through_the_service(live_server, tmp_path, capsys):
    forest, x = private_forest()
    path = tmp_path / "private.npz"
    path.write_bytes(forest.to_bytes())
    data = ["--data-dir", str(live_server.settings.data_dir), "--allow-insecure"]
    assert admin_main(["add-model", "secret-trees", "--model", str(path), "--preset", PRESET, "--encoding", "private",
                       "--max-trees-per-class", "4", "--max-depth", "3", "--width", "8", *data]) == 0
    assert "(private)" in capsys.readouterr().out
    with live_server.client() as api:
        row = api.model("secret-trees")
        assert row["kind"] == "private" and set(row["public"]) == set(PRIVATE_PUBLIC_FIELDS)
        assert (row["public"]["max_trees_per_class"], row["public"]["max_depth"]) == (4, 3)
        client = api.forest_client("secret-trees", seed=b"private".ljust(32, b"\0"), allow_insecure=True)
        bare = api.register_keys(client.eval_keys(), client.params)  # no public key: nothing to flood with
        with pytest.raises(APIError) as err:
            api.predict_scores("secret-trees", bare, client, x[:8])
        assert err.value.status == 422 and "public" in err.value.detail
        keyset = api.register_keys(client.eval_keys(), client.params, public_key=client.public_key)
        scores = api.predict_scores("secret-trees", keyset, client, x[:12])  # two batches of 8
    cells, missing = forest.grid.index(x[:12])
    np.testing.assert_array_equal(scores, predict_private(forest, cells, missing).scores)
    # the client's command line: its own keys, one request, the decrypted classes
    np.save(tmp_path / "x.npy", x[:5])
    argv = ["--url", live_server.url, "--token", live_server.tokens["alice"], "--allow-insecure", "--quiet",
            "predict", "secret-trees", "--x", str(tmp_path / "x.npy")]
    assert client_main(argv) == 0
    printed = json.loads(capsys.readouterr().out)
    assert printed["classes"] == predict_private(forest, cells[:5], missing[:5]).predicted.tolist()


def test_private_bounds_are_checked_at_registration(live_server):
    forest, _ = private_forest(seed=1)
    params = named_params(PRESET, allow_insecure=True)
    with live_server.client("admin") as admin:
        for bounds, error in (({"max_trees_per_class": 1}, "PlanError"), ({"max_depth": 1}, "PlanError")):
            with pytest.raises(APIError) as err:
                admin.add_model("too-small", forest.to_bytes(), params, kind="private", **bounds)
            assert (err.value.status, err.value.error) == (422, error) and "bounds" in err.value.detail
        with pytest.raises(APIError) as err:  # bounds belong to the private kind
            admin.add_model("thermo", forest.to_bytes(), params, max_depth=3)
        assert err.value.status == 422
