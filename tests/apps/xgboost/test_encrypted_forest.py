"""Encrypted forest inference on tiny insecure rings: decrypted scores equal the twin's exactly.

Expected values come from the integer twin (apps.xgboost.twin), which is checked against
xgboost itself in test_export.py; nothing from the encrypted path builds an expected value.
"""
import dataclasses
import functools

import numpy as np
import pytest

xgboost = pytest.importorskip("xgboost", reason="xgboost not installed (the iDASH tests do not need it)")

from apps.xgboost.client import ForestClient  # noqa: E402
from forest_helpers import check_budgets  # noqa: E402
from apps.xgboost.encoding import EncodedFeatures, PublicBinning  # noqa: E402
from apps.xgboost.export import export_booster  # noqa: E402
from apps.xgboost.plan import MARGIN_BITS, ForestPlan, PlanError, PublicModel, named_params  # noqa: E402
from apps.xgboost.server import ForestEvaluator  # noqa: E402
from apps.xgboost.twin import predict_forest  # noqa: E402
from fhe_reference import fresh_seed  # noqa: E402
from object_lifetime import assert_freed_when_dropped  # noqa: E402
from fhe_core import serialize  # noqa: E402
from fhe_core.errors import LevelMismatchError, ParamsMismatchError, ResidueError  # noqa: E402
from fhe_core.rlwe import Ciphertext, EvalKeySet, PublicKey  # noqa: E402

WIDE = "BFVN11QP335L4D5T20Insecure"   # N = 2^11, t = 786433, five 55-bit primes
SMALL = "BFVN10QP205L2D3T17Insecure"  # N = 2^10, t = 65537, three 50-bit primes


def synthetic(n, n_features, n_classes, rng_seed, missing=0.15):
    rng = np.random.default_rng(rng_seed)
    x = rng.normal(size=(n, n_features))
    if n_classes > 2:
        y = np.digitize(x[:, 0] + x[:, 1] - x[:, 2] ** 2, np.quantile(x[:, 0], [0.3, 0.6]))
    else:
        y = (x[:, 0] + x[:, 1] ** 2 - x[:, 2] * x[:, 3] > 0.5).astype(int)
    x[rng.random(x.shape) < missing] = np.nan
    return x, y


@functools.cache
def trained(objective, n_classes, depth, rounds=4, frac_bits=12):
    """(forest, booster, held-out samples) of a small model trained on synthetic data."""
    x, y = synthetic(260, 6, n_classes, rng_seed=depth)
    train = xgboost.DMatrix(x[:200], label=y[:200])
    params = {"objective": objective, "max_depth": depth, "tree_method": "hist", "seed": 1, "nthread": 2,
              "max_bin": 16}
    if n_classes > 2:
        params["num_class"] = n_classes
    booster = xgboost.train(params, train, num_boost_round=rounds)
    return export_booster(booster, PublicBinning.from_dmatrix(train), frac_bits), booster, x[200:]


def run_encrypted(forest, x, preset=WIDE, width=None, label="run", wire=True):
    """Client -> (bytes) -> server -> (bytes) -> client; returns (scores, client, plan, results)."""
    params = named_params(preset, allow_insecure=True)
    plan = ForestPlan.build(forest, params, width=width or len(x))
    public = PublicModel.from_json(plan.public_model(preset).to_json())
    client = ForestClient(public, seed=fresh_seed(label), allow_insecure=True)
    keys, pk, cts = client.eval_keys(), client.public_key, client.encrypt(x)
    if wire:
        keys = serialize.loads(serialize.dumps(keys), params, expect=EvalKeySet)
        pk = serialize.loads(serialize.dumps(pk), params, expect=PublicKey)
        cts = serialize.loads_many(serialize.dumps_many(cts), params, expect=Ciphertext)
    server = ForestEvaluator(params, keys, forest, public_key=pk, plan=plan)
    results = server.evaluate(cts)
    check_budgets(client, server, cts, results)
    if wire:
        results = serialize.loads_many(serialize.dumps_many(results), client.params, expect=Ciphertext)
    return client.decrypt_scores(results, len(x)), client, plan, results


@pytest.mark.parametrize("objective,n_classes,depth,frac_bits,preset", [
    ("multi:softprob", 3, 2, 12, WIDE), ("binary:logistic", 2, 1, 12, WIDE), ("multi:softmax", 3, 3, 12, WIDE),
    ("binary:logistic", 2, 4, 12, WIDE), ("binary:logistic", 2, 1, 8, SMALL),  # SMALL: a few bits to spare
    pytest.param("multi:softprob", 3, 6, 10, WIDE, marks=pytest.mark.slow),
])
def test_scores_equal_twin(objective, n_classes, depth, frac_bits, preset):
    forest, booster, x = trained(objective, n_classes, depth, frac_bits=frac_bits)
    x = x[:24] if preset == WIDE else x[:8]
    scores, client, plan, results = run_encrypted(forest, x, preset, label=f"{objective}{depth}{preset}")
    twin = predict_forest(forest, forest.binning.encode(x))
    np.testing.assert_array_equal(scores, twin.scores)
    np.testing.assert_array_equal(client.predict(results, len(x)), twin.predicted)
    library = booster.predict(xgboost.DMatrix(x), output_margin=True).reshape(len(x), -1)
    expected = library.argmax(axis=1) if library.shape[1] > 1 else (library[:, 0] > 0).astype(int)
    np.testing.assert_array_equal(client.predict(results, len(x)), expected)
    assert forest.depth == depth and np.isnan(x).any()  # missing values went through


def test_several_batches_and_partial_batch():
    forest, _, x = trained("multi:softprob", 3, 2)
    scores, _, plan, results = run_encrypted(forest, x[:23], width=10, label="batches", wire=False)
    assert len(results) == 3 and plan.layout.width == 10
    np.testing.assert_array_equal(scores, predict_forest(forest, forest.binning.encode(x[:23])).scores)


def test_missing_values_follow_default_direction():
    forest, _, x = trained("multi:softprob", 3, 2)
    x = np.full((6, 6), np.nan)
    x[1:, 0] = np.linspace(-2, 2, 5)  # one feature present, the rest missing
    scores, *_ = run_encrypted(forest, x, label="missing", wire=False)
    np.testing.assert_array_equal(scores, predict_forest(forest, forest.binning.encode(x)).scores)


def test_public_model_says_nothing_about_the_trees():
    """Two models on the same binning publish the same client information."""
    x, y = synthetic(260, 6, 3, rng_seed=7)
    cuts = xgboost.QuantileDMatrix(x[:200], label=y[:200], max_bin=16)
    binning = PublicBinning.from_dmatrix(cuts)
    texts, forests = [], []
    for label_seed in (1, 2):
        labels = np.random.default_rng(label_seed).permutation(y[:200])
        train = xgboost.QuantileDMatrix(x[:200], label=labels, max_bin=16, ref=cuts)
        booster = xgboost.train({"objective": "multi:softprob", "num_class": 3, "max_depth": 2,
                                 "tree_method": "hist", "nthread": 2, "max_bin": 16}, train, num_boost_round=3)
        forest = export_booster(booster, binning)
        forests.append(forest)
        plan = ForestPlan.build(forest, named_params(WIDE, allow_insecure=True), width=16)
        texts.append(plan.public_model(WIDE).to_json())
    assert not np.array_equal(forests[0].bit, forests[1].bit)  # different trees...
    assert texts[0] == texts[1]                                # ...the same public model


def test_plan_refuses_what_it_cannot_evaluate_exactly():
    forest, _, _ = trained("multi:softprob", 3, 2, frac_bits=12)
    with pytest.raises(PlanError, match="plaintext modulus"):
        ForestPlan.build(trained("multi:softprob", 3, 2, frac_bits=20)[0], named_params(WIDE, allow_insecure=True))
    with pytest.raises(PlanError, match="width"):
        ForestPlan.build(forest, named_params(WIDE, allow_insecure=True), width=1024 // 3 + 1)
    stumps = dataclasses.replace(forest, is_padding=np.ones_like(forest.is_padding))
    with pytest.raises(PlanError, match="single leaf"):
        ForestPlan.build(stumps, named_params(WIDE, allow_insecure=True))
    deep, _, _ = trained("binary:logistic", 2, 5, frac_bits=8)  # products of depth 3
    with pytest.raises(PlanError, match="noise budget"):
        ForestPlan.build(deep, named_params(SMALL, allow_insecure=True), width=8)


def test_plan_states_depth_keys_and_budget():
    forest, _, _ = trained("binary:logistic", 2, 4)
    plan = ForestPlan.build(forest, named_params(WIDE, allow_insecure=True), width=16)
    assert (plan.depth, plan.schedule.mult_depth, plan.schedule.products) == (4, 2, 9)
    assert plan.budget_needed > 0 and plan.fresh_budget - plan.budget_needed - plan.flooding >= MARGIN_BITS
    assert plan.rotation_steps == [1 << i for i in range(10)] and plan.column_swap
    assert plan.ops["multiply"] == 9 * plan.n_groups


def test_evaluator_checks_its_inputs():
    forest, _, x = trained("multi:softprob", 3, 2)
    params = named_params(WIDE, allow_insecure=True)
    plan = ForestPlan.build(forest, params, width=8)
    client = ForestClient(plan.public_model(), seed=fresh_seed("checks"), allow_insecure=True)
    keys = client.eval_keys()
    server = ForestEvaluator(params, keys, forest, public_key=client.public_key, plan=plan)
    cts = client.encrypt(x[:8])
    with pytest.raises(PlanError, match="multiple of"):
        server.evaluate(cts[:-1])
    with pytest.raises(PlanError, match="non-empty"):
        server.evaluate([])
    with pytest.raises(LevelMismatchError, match="level"):
        server.evaluate([cts[0].replace(data=cts[0].data[:, :-1], level=cts[0].level - 1)] + cts[1:])
    with pytest.raises(ParamsMismatchError):
        server.evaluate([cts[0].replace(params_id="0" * 64)] + cts[1:])
    bad = cts[1].replace(data=cts[1].data.clone())
    bad.data[1, 0, 3] = -1  # every input's residues checked up front, one sync for all (check_canonical_all)
    with pytest.raises(ResidueError, match=r"^ForestEvaluator.evaluate: input 1 has a residue outside"):
        server.evaluate([cts[0], bad] + cts[2:])
    with pytest.raises(PlanError, match="Galois"):
        ForestEvaluator(params, EvalKeySet(params.params_id, relin=keys.relin_key("test")), forest,
                        public_key=client.public_key, plan=plan)
    with pytest.raises(PlanError, match="PublicKey"):
        ForestEvaluator(params, keys, forest, public_key=None, plan=plan)


@pytest.mark.parametrize("objective,n_classes,depth", [("multi:softprob", 3, 2), ("multi:softmax", 3, 4)])
def test_stacked_and_per_group_paths_agree_word_for_word(objective, n_classes, depth):
    """All groups at once (the default) and group by group through the evaluator: same ciphertext."""
    forest, _, x = trained(objective, n_classes, depth)
    params = named_params(WIDE, allow_insecure=True)
    plan = ForestPlan.build(forest, params, width=300)  # one block per row: several groups
    assert plan.n_groups > 1
    client = ForestClient(plan.public_model(), seed=fresh_seed("paths"), allow_insecure=True)
    keys, cts = client.eval_keys(), client.encrypt(x[:30])
    pk, flood = client.public_key, fresh_seed("flood")
    stacked = ForestEvaluator(params, keys, forest, public_key=pk, plan=plan).evaluate(cts, seed=flood)
    per_group = ForestEvaluator(params, keys, forest, public_key=pk, plan=plan, stacked=False).evaluate(cts, seed=flood)
    assert stacked[0].data.equal(per_group[0].data)
    twin = predict_forest(forest, forest.binning.encode(x[:30])).scores
    np.testing.assert_array_equal(client.decrypt_scores(stacked, 30), twin)


@pytest.mark.parametrize("depth", [2, 3])
def test_plan_counts_the_operations_the_evaluator_runs(depth, monkeypatch):
    """plan.ops (per batch) against the evaluator's calls on the per-group path."""
    from fhe_core import bfv

    forest, _, x = trained("multi:softprob", 3, depth)
    params = named_params(WIDE, allow_insecure=True)
    plan = ForestPlan.build(forest, params, width=16)
    client = ForestClient(plan.public_model(), seed=fresh_seed("count"), allow_insecure=True)
    server = ForestEvaluator(params, client.eval_keys(), forest, public_key=client.public_key, plan=plan,
                             stacked=False)
    calls = {name: 0 for name in ("multiply_plain", "multiply", "relinearize", "rotate_rows", "swap_columns",
                                  "mod_switch_to")}
    for name in calls:
        def counted(self, *args, _name=name, _orig=getattr(bfv.Evaluator, name)):  # noqa: B008 (bound per name)
            calls[_name] += 1
            return _orig(self, *args)
        monkeypatch.setattr(bfv.Evaluator, name, counted)
    server.evaluate(client.encrypt(x[:16]))
    assert calls["rotate_rows"] + calls["swap_columns"] == plan.ops["rotate"]
    for name in ("multiply_plain", "multiply", "relinearize"):
        assert calls[name] == plan.ops.get(name, 0), name
    assert calls["mod_switch_to"] == 1 and plan.ops["mod_switch"] == plan.level  # the answer to level 0


def test_client_checks_its_inputs():
    forest, _, x = trained("multi:softprob", 3, 2)
    plan = ForestPlan.build(forest, named_params(WIDE, allow_insecure=True), width=8)
    client = ForestClient(plan.public_model(), seed=fresh_seed("client"), allow_insecure=True)
    with pytest.raises(PlanError, match="samples"):
        client.encrypt(x[:4, :-1])
    with pytest.raises(PlanError, match="no samples"):
        client.encrypt(x[:0])
    not_bits = EncodedFeatures(np.full((4, len(forest.binning.cuts)), 2), np.zeros((4, 6), dtype=np.int64))
    with pytest.raises(PlanError, match="0/1"):
        client.encrypt(not_bits)
    with pytest.raises(PlanError, match="result ciphertexts"):
        client.decrypt_scores([], 4)
    with pytest.raises(PlanError, match="chunks"):
        PublicModel.from_json(plan.public_model().to_json().replace('"n_inputs":', '"n_inputs":1'))
    with pytest.raises(PlanError, match="width"):
        PublicModel.from_json(plan.public_model().to_json().replace('"width":8', '"width":0'))


def test_a_dropped_evaluator_is_freed_at_once():
    """No reference cycle: on a GPU an evaluator holds the model's plaintexts (GBs in the model-private
    mode), which must go with it when the service drops the model, not at a later garbage collection."""
    forest, _, x = trained("multi:softprob", 3, 2)
    params = named_params(WIDE, allow_insecure=True)
    plan = ForestPlan.build(forest, params, width=8)
    client = ForestClient(plan.public_model(), seed=fresh_seed("freed"), allow_insecure=True)

    def used():
        server = ForestEvaluator(params, client.eval_keys(), forest, public_key=client.public_key, plan=plan)
        server.evaluate(client.encrypt(x[:8]))
        return server

    assert_freed_when_dropped(used)


def test_graphed_evaluation_needs_a_cuda_device():
    forest, _, _ = trained("multi:softprob", 3, 2)
    params = named_params(WIDE, allow_insecure=True)
    plan = ForestPlan.build(forest, params, width=8)
    client = ForestClient(plan.public_model(), seed=fresh_seed("graphed-cpu"), allow_insecure=True)
    with pytest.raises(PlanError, match="graphed=True needs a CUDA device"):
        ForestEvaluator(params, client.eval_keys(), forest, public_key=client.public_key, plan=plan, graphed=True)


@pytest.mark.gpu
@pytest.mark.parametrize("stacked", [True, False])
def test_graphed_batches_equal_eager_word_for_word_and_check_every_input(stacked):
    """Batches replayed from a CUDA graph (captured on the first, GraphedBatches) give the eager evaluation's
    words, batch after batch and call after call; the scores equal the twin's; a corrupted input is refused in
    the graphed path too (its residue check runs outside the graph)."""
    forest, _, x = trained("multi:softprob", 3, 3)
    params = named_params(WIDE, allow_insecure=True, device="cuda")
    plan = ForestPlan.build(forest, params, width=20)
    client = ForestClient(plan.public_model(), device="cuda", seed=fresh_seed("graphed"), allow_insecure=True)
    keys, pk, cts = client.eval_keys(), client.public_key, client.encrypt(x[:60])  # 3 batches of plan.n_inputs
    servers = [ForestEvaluator(params, keys, forest, public_key=pk, plan=plan, stacked=stacked, graphed=graphed)
               for graphed in (False, True)]
    flood = fresh_seed("graphed/flood")
    eager = servers[0].evaluate(cts, seed=flood)
    assert len(eager) == 3
    for _ in range(2):  # the capture, then replays only
        replayed = servers[1].evaluate(cts, seed=flood)
        assert all(r.data.equal(e.data) for r, e in zip(replayed, eager, strict=True))
    np.testing.assert_array_equal(client.decrypt_scores(replayed, 60),
                                  predict_forest(forest, forest.binning.encode(x[:60])).scores)
    bad = cts[0].replace(data=cts[0].data.clone())
    bad.data[0, 0, 0] = -1
    with pytest.raises(ResidueError, match="ForestEvaluator.evaluate"):
        servers[1].evaluate([bad] + cts[1:plan.n_inputs])
