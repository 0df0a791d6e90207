"""The model-private encoding encrypted, on tiny insecure rings: decrypted scores equal the integer
twin's exactly (random forests of depth 2-6 with missing values, several feature counts and grids),
the public part holds only the public bounds, the operation sequence does not depend on the trees,
and the answers are flooded (their noise sits at the flooding level whatever the model).

Expected values come from the integer twin (``twin.predict_private``), itself checked against
XGBoost in test_private_twin.py; nothing from the encrypted path builds an expected value.
"""
import functools
import json

import numpy as np
import pytest

xgboost = pytest.importorskip("xgboost", reason="xgboost not installed (the iDASH tests do not need it)")

from apps.xgboost.client import ForestClient  # noqa: E402
from apps.xgboost.grid import FixedPointGrid  # noqa: E402
from apps.xgboost.plan import PRIVATE_PUBLIC_FIELDS, PlanError, PublicModel, named_params  # noqa: E402
from apps.xgboost.private_forest import export_private  # noqa: E402
from apps.xgboost.private_plan import PrivateBounds, PrivateLayout, PrivatePlan  # noqa: E402
from apps.xgboost.private_server import PrivateForestEvaluator  # noqa: E402
from apps.xgboost.twin import predict_private  # noqa: E402
from fhe_core import bfv, ops, serialize  # noqa: E402
from fhe_core.errors import LevelMismatchError  # noqa: E402
from fhe_core.rlwe import Ciphertext, EvalKeySet, PublicKey  # noqa: E402
from fhe_reference import fresh_seed  # noqa: E402

TINY = "BFVN10QP660L7D3T20Insecure"  # N = 2^10, t = 786433, eight 60-bit primes, dnum 3


@functools.cache
def trained(n_classes, depth, n_features=8, rounds=3, grid=(6, 4), rng_seed=0, frac_bits=10):
    """(private forest, booster, held-out samples with missing values) on synthetic data."""
    rng = np.random.default_rng(rng_seed + depth)
    x = rng.normal(size=(300, n_features))
    if n_classes > 2:
        y = np.digitize(x[:, 0] + x[:, 1] - x[:, 2] ** 2, np.quantile(x[:, 0], [0.3, 0.6]))
    else:
        y = (x[:, 0] + x[:, 1] ** 2 - x[:, 2] * x[:, 3] > 0.5).astype(int)
    x[rng.random(x.shape) < 0.12] = np.nan
    params = {"objective": "multi:softprob" if n_classes > 2 else "binary:logistic", "max_depth": depth,
              "tree_method": "hist", "seed": rng_seed, "nthread": 2, "colsample_bynode": 0.8}
    if n_classes > 2:
        params["num_class"] = n_classes
    booster = xgboost.train(params, xgboost.DMatrix(x[:250], label=y[:250]), num_boost_round=rounds)
    return export_private(booster, FixedPointGrid(*grid), frac_bits), booster, x[250:]


def run_private(forest, x, *, width=None, label="run", wire=True, bounds=None, preset=TINY):
    """Client -> (bytes) -> server -> (bytes) -> client: (scores, client, plan, answers)."""
    params = named_params(preset, allow_insecure=True)
    plan = PrivatePlan.build(forest, params, width=width or len(x), **(bounds or {}))
    public = PublicModel.from_json(PublicModel.private(plan.layout, preset).to_json())
    client = ForestClient(public, seed=fresh_seed(label), allow_insecure=True)
    keys, pk, cts = client.eval_keys(), client.public_key, client.encrypt(x)
    if wire:
        keys = serialize.loads(serialize.dumps(keys), params, expect=EvalKeySet)
        pk = serialize.loads(serialize.dumps(pk), params, expect=PublicKey)
        cts = serialize.loads_many(serialize.dumps_many(cts, packed=True), params, expect=Ciphertext)
    answers = PrivateForestEvaluator(params, keys, forest, pk, plan=plan).evaluate(cts)
    if wire:
        answers = serialize.loads_many(serialize.dumps_many(answers), client.params, expect=Ciphertext)
    return client.decrypt_scores(answers, len(x)), client, plan, answers


def check_exact(forest, booster, x, scores):
    cells, missing = forest.grid.index(x)
    twin = predict_private(forest, cells, missing)
    np.testing.assert_array_equal(scores, twin.scores)
    margins = booster.predict(xgboost.DMatrix(forest.grid.quantize(x)), output_margin=True).reshape(len(x), -1)
    library = margins.argmax(axis=1) if margins.shape[1] > 1 else (margins[:, 0] > 0).astype(int)
    np.testing.assert_array_equal(twin.predicted, library)


@pytest.mark.parametrize("n_classes,depth,n_features,grid,digits", [
    (3, 2, 8, (6, 4), 3), (2, 3, 40, (1, 0), 1), (2, 4, 70, (6, 4), 3), (2, 2, 20, (4, 2), 2),
    (2, 5, 12, (7, 4), 3),
    pytest.param(3, 6, 8, (6, 3), 3, marks=pytest.mark.slow),
])
def test_scores_equal_twin(n_classes, depth, n_features, grid, digits):
    forest, booster, x = trained(n_classes, depth, n_features, grid=grid)
    x = x[:12]
    scores, client, plan, answers = run_private(forest, x, label=f"exact{depth}")
    check_exact(forest, booster, x, scores)
    assert len(plan.layout.digits) == digits and plan.layout.inputs_per_digit == -(-n_features // 64)
    for answer in answers:  # one answer per batch, switched down, nothing but the scores
        assert answer.level == plan.answer_level == 0
        values = client.encoder.decode(client._decryptor.decrypt(answer))
        values[plan.layout.score_slots()] = 0
        assert not values.any()


def test_several_batches_partial_batch_and_missing_features():
    forest, booster, x = trained(3, 2)
    x = np.concatenate([x[:9], np.full((3, 8), np.nan)])  # the last samples miss every feature
    x[9, 0] = 0.3
    scores, _, plan, answers = run_private(forest, x, width=8, label="batches", wire=False)
    assert plan.layout.width == 8 and len(answers) == 2
    check_exact(forest, booster, x, scores)


def test_public_part_holds_only_the_public_bounds():
    """Two models with the same bounds publish the same fields, the listed ones only, and every
    derived quantity (level, inputs, keys) is a function of them."""
    texts, forests = [], []
    for rng_seed in (1, 2):
        forest, _, _ = trained(3, 2, rng_seed=rng_seed)
        forests.append(forest)
        plan = PrivatePlan.build(forest, named_params(TINY, allow_insecure=True), width=16, max_trees_per_class=4,
                                 max_depth=3)
        texts.append(PublicModel.private(plan.layout, TINY).to_json())
    assert not np.array_equal(forests[0].feature, forests[1].feature)   # different trees...
    assert texts[0] == texts[1]                                          # ...the same public part
    public = json.loads(texts[0])
    assert set(public) == set(PRIVATE_PUBLIC_FIELDS)
    assert (public["n_features"], public["n_classes"], public["grid"], public["max_trees_per_class"],
            public["max_depth"], public["width"]) == (8, 3, {"bits": 6, "frac_bits": 4}, 4, 3, 16)
    rebuilt = PrivateLayout.build(named_params(TINY, allow_insecure=True),
                                  PrivateBounds(8, 3, FixedPointGrid(6, 4), 4, 3), 16)
    model = PublicModel.from_json(texts[0])
    assert (model.level, model.n_inputs, model.rotation_steps) == (rebuilt.level, rebuilt.n_inputs,
                                                                   rebuilt.rotation_steps)
    for bad in ('"max_depth":3', '"width":16'):
        with pytest.raises(PlanError):
            PublicModel.from_json(texts[0].replace(bad, bad[:-1] + "0"))
    with pytest.raises(PlanError, match="exactly the fields"):
        PublicModel.from_json(texts[0].replace('"max_depth"', '"depth"'))


def _recorded_calls(monkeypatch, forest, x, bounds):
    """The evaluator's operation sequence: (op, rotation step) for every call."""
    calls = []
    for name in ("multiply_plain", "multiply_relin", "rotate_rows", "swap_columns", "add", "sub", "add_plain",
                 "negate", "mod_switch_to"):
        def recorded(self, *args, _name=name, _orig=getattr(bfv.Evaluator, name)):  # noqa: B008 (bound per name)
            calls.append((_name, args[1] if _name == "rotate_rows" else None))
            return _orig(self, *args)
        monkeypatch.setattr(bfv.Evaluator, name, recorded)
    original = ops.giant_products

    def products(babies, pts, index, moduli, *, out):
        calls.append(("giant_products", (babies.shape[0], len(pts))))
        return original(babies, pts, index, moduli, out=out)

    monkeypatch.setattr(ops, "giant_products", products)
    scores, _, plan, _ = run_private(forest, x, label="sequence", wire=False, bounds=bounds)
    monkeypatch.undo()
    return calls, scores, plan


def test_padding_makes_the_operation_sequence_model_independent(monkeypatch):
    bounds = {"max_trees_per_class": 4, "max_depth": 3}
    shallow, booster_a, x = trained(3, 2, rng_seed=3)              # depth 2, padded to 3
    deep, booster_b, _ = trained(3, 3, rounds=4, rng_seed=4)       # depth 3, more trees
    x = x[:10]
    sequence_a, scores_a, plan = _recorded_calls(monkeypatch, shallow, x, bounds)
    sequence_b, scores_b, _ = _recorded_calls(monkeypatch, deep, x, bounds)
    assert sequence_a == sequence_b
    check_exact(shallow, booster_a, x, scores_a)
    check_exact(deep, booster_b, x, scores_b)
    counts = {name: sum(1 for op, _ in sequence_a if op == name) for name in ("multiply_plain", "multiply_relin")}
    layout = plan.layout
    routing = sum(m * giants for op, (m, giants) in ((op, arg) for op, arg in sequence_a if op == "giant_products"))
    assert routing + counts["multiply_plain"] == layout.ops["multiply_plain"]
    assert counts["multiply_relin"] == layout.ops["multiply_relin"]
    assert sum(1 for op, _ in sequence_a if op in ("rotate_rows", "swap_columns")) == layout.ops["rotate"]
    with pytest.raises(PlanError, match="public bounds"):
        PrivatePlan.build(deep, named_params(TINY, allow_insecure=True), width=16, max_trees_per_class=1)


def test_answers_sit_at_the_flooding_level_for_two_models():
    budgets = []
    for depth in (2, 3):
        forest, _, x = trained(2, depth, rng_seed=5)
        _, client, plan, answers = run_private(forest, x[:8], label=f"flood{depth}")
        assert plan.layout.budget["left"] - plan.layout.budget["flooding"] >= 10   # the plan's margin
        budgets += [client.noise_budget(answer) for answer in answers]
        assert all(answer.level == plan.answer_level for answer in answers)
    assert all(plan.answer_budget <= b < bfv.FLOOD_NOISE_BITS + 1.5 for b in budgets)
    assert max(budgets) - min(budgets) < 0.5


def test_plan_and_evaluator_refuse_what_they_cannot_do():
    forest, _, x = trained(3, 2)
    params = named_params(TINY, allow_insecure=True)
    with pytest.raises(PlanError, match="plaintext modulus"):
        PrivatePlan.build(trained(3, 2, frac_bits=20)[0], params, width=8)
    with pytest.raises(PlanError, match="lanes of a row"):
        PrivatePlan.build(forest, params, width=512)
    with pytest.raises(PlanError, match="no digit split fits"):
        PrivatePlan.build(forest, named_params("BFVN11QP335L4D5T20Insecure", allow_insecure=True), width=8)
    plan = PrivatePlan.build(forest, params, width=8)
    client = ForestClient(PublicModel.private(plan.layout), seed=fresh_seed("refuse"), allow_insecure=True)
    keys, cts = client.eval_keys(), client.encrypt(x[:4])
    with pytest.raises(PlanError, match="PublicKey"):
        PrivateForestEvaluator(params, keys, forest, None, plan=plan)
    with pytest.raises(PlanError, match="Galois"):
        PrivateForestEvaluator(params, EvalKeySet(params.params_id, relin=keys.relin_key("t")), forest,
                               client.public_key, plan=plan)
    server = PrivateForestEvaluator(params, keys, forest, client.public_key, plan=plan)
    with pytest.raises(PlanError, match="multiple of"):
        server.evaluate(cts[:-1])
    with pytest.raises(LevelMismatchError):
        server.evaluate([cts[0].replace(data=cts[0].data[:, :-1], level=cts[0].level - 1)] + cts[1:])
    with pytest.raises(PlanError, match="samples"):
        client.encrypt(x[:4, :-1])
    with pytest.raises(PlanError, match="no samples"):
        client.encrypt(x[:0])


@pytest.mark.gpu
def test_private_cpu_and_cuda_bit_identical():
    """The same seeds (keys, encryption, flooding): the CPU's and the CUDA answers are the same words."""
    forest, _, x = trained(3, 3)
    seed, flood = fresh_seed("bit-identity"), fresh_seed("bit-identity/flood")
    answers = []
    for device in ("cpu", "cuda"):
        params = named_params(TINY, allow_insecure=True, device=device)
        plan = PrivatePlan.build(forest, params, width=16)
        client = ForestClient(PublicModel.private(plan.layout, TINY), device=device, seed=seed, allow_insecure=True)
        server = PrivateForestEvaluator(params, client.eval_keys(), forest, client.public_key, plan=plan)
        answers.append(server.evaluate(client.encrypt(x[:16]), seed=flood)[0].data.cpu())
    assert answers[0].equal(answers[1])


@pytest.mark.gpu
def test_graphed_private_batches_equal_eager_word_for_word():
    """The model-private evaluation replayed from a CUDA graph (GraphedBatches) gives the eager words for every
    batch, twice (capture, then replay only), and the twin's scores."""
    forest, _, x = trained(3, 3)
    params = named_params(TINY, allow_insecure=True, device="cuda")
    plan = PrivatePlan.build(forest, params, width=25)
    client = ForestClient(PublicModel.private(plan.layout, TINY), device="cuda", seed=fresh_seed("graphed-private"),
                          allow_insecure=True)
    keys, pk, cts = client.eval_keys(), client.public_key, client.encrypt(x)  # 2 batches of 25 samples
    eager, graphed = (PrivateForestEvaluator(params, keys, forest, pk, plan=plan, graphed=g) for g in (False, True))
    flood = fresh_seed("graphed-private/flood")
    want = eager.evaluate(cts, seed=flood)
    assert len(want) == 2
    for _ in range(2):
        got = graphed.evaluate(cts, seed=flood)
        assert all(g.data.equal(w.data) for g, w in zip(got, want, strict=True))
    cells, missing = forest.grid.index(x)
    np.testing.assert_array_equal(client.decrypt_scores(got, len(x)), predict_private(forest, cells, missing).scores)
