"""Encrypted tree inference sharded across gloo ranks (apps.xgboost.sharded): 3 batches of 20
samples (2 ranks: 2 on rank 0, 1 on rank 1; 4 and 8 ranks, marked slow: one batch each or none)
give, in order, answers that decrypt to the one-process scores and the integer twin's (each answer
is flooded afresh, so the words differ), at the plan's answer level and the flooding level; a
request of partial batches is refused."""
import numpy as np
import pytest

xgboost = pytest.importorskip("xgboost", reason="xgboost not installed")

from apps.xgboost.client import ForestClient  # noqa: E402
from apps.xgboost.plan import ForestPlan, PlanError, PublicModel, named_params  # noqa: E402
from apps.xgboost.server import ForestEvaluator  # noqa: E402
from apps.xgboost.sharded import evaluate_sharded  # noqa: E402
from apps.xgboost.twin import predict_forest  # noqa: E402
from fhe_core import distributed, serialize  # noqa: E402
from fhe_core.bfv import FLOOD_NOISE_BITS  # noqa: E402
from fhe_core.rlwe import Ciphertext, EvalKeySet, PublicKey  # noqa: E402
from test_encrypted_forest import WIDE, trained  # noqa: E402

WIDTH, SAMPLES = 20, 60
SEED = b"apps.xgboost.sharded tests".ljust(32, b"\0")  # test-only: fixed keys and encryptions


def evaluate_on_rank(rank: int, world: int, forest, keys: bytes, public_key: bytes, upload: bytes) -> bytes | None:
    """This rank's evaluator (the same keys and model as one process) and its share of the batches."""
    params = named_params(WIDE, allow_insecure=True)
    plan = ForestPlan.build(forest, params, width=WIDTH)
    evaluator = ForestEvaluator(params, serialize.loads(keys, params, expect=EvalKeySet), forest, plan=plan,
                                public_key=serialize.loads(public_key, params, expect=PublicKey))
    cts = serialize.loads_many(upload, params, expect=Ciphertext)
    scores = evaluate_sharded(evaluator, cts, dst=world - 1)
    return None if scores is None else serialize.dumps_many(scores)


@pytest.fixture(scope="module")
def request_and_answer():
    forest, _, x = trained("multi:softprob", 3, 2)
    params = named_params(WIDE, allow_insecure=True)
    plan = ForestPlan.build(forest, params, width=WIDTH)
    client = ForestClient(PublicModel.from_json(plan.public_model(WIDE).to_json()), seed=SEED, allow_insecure=True)
    keys, cts = client.eval_keys(), client.encrypt(x[:SAMPLES])
    assert len(cts) == 3 * plan.n_inputs
    evaluator = ForestEvaluator(params, keys, forest, plan=plan, public_key=client.public_key)
    return dict(forest=forest, x=x[:SAMPLES], client=client, keys=keys, evaluator=evaluator, cts=cts,
                answer=evaluator.evaluate(cts))


@pytest.mark.parametrize("world", [2, pytest.param(4, marks=pytest.mark.slow), pytest.param(8, marks=pytest.mark.slow)])
def test_ranks_score_as_one(request_and_answer, world):
    """2 ranks share the 3 batches 2 + 1; with 4 and 8 (issue 32's counts, on gloo) some ranks hold none."""
    r = request_and_answer
    client, x, plan = r["client"], r["x"], r["evaluator"].plan
    *others, last = distributed.spawn(evaluate_on_rank, world, r["forest"], serialize.dumps(r["keys"]),
                                      serialize.dumps(client.public_key), serialize.dumps_many(r["cts"]),
                                      timeout_s=600)
    assert others == [None] * (world - 1)
    answers = serialize.loads_many(last, client.params, expect=Ciphertext)
    assert len(answers) == 3 and all(ct.level == plan.answer_level for ct in answers)
    assert all(plan.answer_budget <= client.noise_budget(ct) < FLOOD_NOISE_BITS + 1.5 for ct in answers)
    scores = client.decrypt_scores(answers, len(x))
    assert np.array_equal(scores, client.decrypt_scores(r["answer"], len(x)))  # in batch order
    assert np.array_equal(scores, predict_forest(r["forest"], r["forest"].binning.encode(x)).scores)


@pytest.mark.parametrize("cut", [1, None])
def test_a_partial_batch_is_refused_before_any_collective(request_and_answer, cut):
    """Refused from the count alone (every rank sees the same list), so no process group is needed."""
    evaluator, cts = request_and_answer["evaluator"], request_and_answer["cts"]
    per_batch = evaluator.plan.n_inputs
    with pytest.raises(PlanError, match=f"expected a non-empty list of whole batches of {per_batch} ciphertexts"):
        evaluate_sharded(evaluator, cts[:-cut] if cut else [])
