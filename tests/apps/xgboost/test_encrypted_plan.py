"""The plan's pieces in the clear: path schedules against trees.tree_values, forms against the
twin's node tests, the public model's JSON, and the forest's bytes."""
import dataclasses
import io
import json
import math
import types

import numpy as np
import pytest

xgboost = pytest.importorskip("xgboost", reason="xgboost not installed (the iDASH tests do not need it)")

from apps.xgboost.encoding import PublicBinning  # noqa: E402
from apps.xgboost.export import HEForest, ModelFormatError, export_booster  # noqa: E402
from apps.xgboost.plan import (  # noqa: E402
    ForestPlan, NoiseModel, PathSchedule, PlanError, PublicModel, flooded_answer_level, named_params, tree_value,
    unmove,
)
from fhe_core.bfv import FLOOD_NOISE_BITS  # noqa: E402
from apps.xgboost.trees import tree_values  # noqa: E402
from apps.xgboost.twin import node_tests  # noqa: E402


class ClearAlgebra:
    """tree_value's operations on int64 arrays `[n, T]`: node tests and leaves given directly."""

    def __init__(self, tests, leaves):
        self.tests, self.leaves = tests, leaves  # [n, T, 2^D - 1], [T, 2^D]
        self.products = 0

    def depth1(self, group, node):
        first = self.tests.shape[-1] // 2
        left, right = self.leaves[:, 2 * (node - first)], self.leaves[:, 2 * (node - first) + 1]
        return right + self.tests[..., node] * (left - right)

    def test(self, group, node):
        return self.tests[..., node]

    def mul(self, a, b, final):
        self.products += 1
        return a * b

    def add(self, a, b):
        return a + b

    def sub(self, a, b):
        return a - b

    def one_minus(self, a):
        return 1 - a


@pytest.mark.parametrize("depth,mult_depth,products", [(1, 0, 0), (2, 1, 1), (3, 2, 3), (4, 2, 9), (5, 3, 17),
                                                       (6, 3, 37)])
def test_path_schedule_matches_tree_values(depth, mult_depth, products):
    rng = np.random.default_rng(depth)
    tests = rng.integers(0, 2, (30, 5, 2**depth - 1))
    leaves = rng.integers(-1000, 1000, (5, 2**depth))
    schedule = PathSchedule.for_depth(depth)
    alg = ClearAlgebra(tests, leaves)
    np.testing.assert_array_equal(tree_value(alg, schedule, 0), tree_values(tests, leaves))
    assert (schedule.mult_depth, schedule.products, alg.products) == (mult_depth, products, products)


def small_forest(depth=3, seed=0):
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(200, 5))
    x[rng.random(x.shape) < 0.1] = np.nan
    y = (x[:, 0] - x[:, 1] ** 2 > 0).astype(int)
    train = xgboost.DMatrix(x, label=y)
    booster = xgboost.train({"objective": "binary:logistic", "max_depth": depth, "tree_method": "hist",
                             "nthread": 2, "max_bin": 8}, train, num_boost_round=3)
    return export_booster(booster, PublicBinning.from_dmatrix(train), 10), x


def test_forms_give_the_twins_node_tests():
    """A test form evaluated on the packed slot vectors equals the twin's node tests."""
    from apps.xgboost.client import ForestClient

    forest, x = small_forest()
    params = named_params("BFVN11QP335L4D5T20Insecure", allow_insecure=True)
    plan = ForestPlan.build(forest, params, width=16)
    packed = ForestClient(plan.public_model(), seed=b"f" * 32, allow_insecure=True).pack(x[:16])
    tests = node_tests(forest, forest.binning.encode(x[:16]))  # [n, T, nodes]
    t, layout = params.plaintext_modulus, plan.layout
    seen = 0
    for (g, p, kind), form in plan.forms.items():
        if kind != "test" or form.is_plain:
            continue
        value = form.const.copy()
        for (r, swap), by_source in form.terms.items():
            moved = sum(coef * packed[k] for k, coef in by_source.items())
            matrix = np.roll(moved.reshape(2, -1), -r, axis=1)
            value = value + (matrix[::-1] if swap else matrix).reshape(-1)
        value %= t
        for tree, (group, row, block, cls) in plan.placement.items():
            if group == g and not forest.is_padding[tree, p]:
                slots = layout.lane_slots(row, layout.tree_column(block, cls))
                np.testing.assert_array_equal(value[slots][:16], tests[:, tree, p])
                seen += 1
    assert seen == (~forest.is_padding).sum()


def test_unmove_inverts_a_move():
    values = np.arange(16)
    for move in [(3, False), (5, True), (0, True)]:
        back = unmove(values, move)
        r, swap = move
        moved = np.roll((back.reshape(2, -1)[::-1] if swap else back.reshape(2, -1)), -r, axis=1)
        np.testing.assert_array_equal(moved.reshape(-1), values)


def test_public_model_json_round_trip_and_errors():
    forest, _ = small_forest()
    plan = ForestPlan.build(forest, named_params("BFVN11QP335L4D5T20Insecure", allow_insecure=True), width=16)
    public = plan.public_model("BFVN11QP335L4D5T20Insecure")
    again = PublicModel.from_json(public.to_json())
    assert again.to_json() == public.to_json()
    np.testing.assert_array_equal(again.binning.cuts, forest.binning.cuts)
    assert again.params(allow_insecure=True).params_id == plan.params.params_id
    for bad in ["not json", "[]", public.to_json().replace('"version":1', '"version":2'),
                public.to_json().replace('"kind":"thermometer"', '"kind":"other"')]:
        with pytest.raises(PlanError):
            PublicModel.from_json(bad)
    offsets = [int(o) for o in forest.binning.offsets]
    for bad_offsets in (offsets[:-1], offsets[::-1], offsets[:1], [offsets]):
        text = public.to_json().replace(f'"offsets":{offsets}'.replace(" ", ""), f'"offsets":{bad_offsets}')
        assert text != public.to_json()
        with pytest.raises(PlanError, match="offsets"):
            PublicModel.from_json(text)
    for binning in ({"cuts": [1.0]}, [1], {"cuts": ["a"], "offsets": [0, 1]},
                    {"cuts": [1.0], "offsets": [[0], [1, 2]]}):
        with pytest.raises(PlanError, match="binning"):
            PublicModel.from_json(json.dumps(json.loads(public.to_json()) | {"binning": binning}))


def test_forest_bytes_round_trip_and_validation():
    forest, _ = small_forest(depth=4)
    again = HEForest.from_bytes(forest.to_bytes())
    for name in ("feature", "bit", "default_left", "is_padding", "leaves", "tree_class", "base"):
        np.testing.assert_array_equal(getattr(again, name), getattr(forest, name))
    np.testing.assert_array_equal(again.threshold, forest.threshold)
    np.testing.assert_array_equal(again.binning.cuts, forest.binning.cuts)
    assert (again.depth, again.n_classes, again.frac_bits) == (forest.depth, forest.n_classes, forest.frac_bits)
    with pytest.raises(ModelFormatError, match="npz"):
        HEForest.from_bytes(b"garbage")
    with pytest.raises(ModelFormatError, match="max_bytes"):
        HEForest.from_bytes(forest.to_bytes(), max_bytes=100)
    bomb = io.BytesIO()  # 1 KB compressed, 100 MB inflated
    np.savez_compressed(bomb, header=np.zeros(100_000_000, dtype=np.uint8))
    with pytest.raises(ModelFormatError, match="arrays take"):
        HEForest.from_bytes(bomb.getvalue(), max_bytes=1 << 20)

    tree, node = np.argwhere(~forest.is_padding)[0]
    wrong_bit = forest.bit.copy()
    wrong_bit[tree, node] = np.flatnonzero(forest.binning.bit_feature != forest.feature[tree, node])[0]
    with pytest.raises(ModelFormatError, match="bit"):
        HEForest.from_bytes(dataclasses.replace(forest, bit=wrong_bit).to_bytes())
    with pytest.raises(ModelFormatError, match="leaves"):
        HEForest.from_bytes(dataclasses.replace(forest, leaves=forest.leaves[:, :-1]).to_bytes())
    for offsets in (forest.binning.offsets[:-1], forest.binning.offsets[::-1], forest.binning.offsets[:1]):
        binning = PublicBinning(forest.binning.cuts, offsets)
        with pytest.raises(ModelFormatError, match="offsets"):
            HEForest.from_bytes(dataclasses.replace(forest, binning=binning).to_bytes())


@pytest.mark.parametrize("first_prime_bits,expected", [(60, 0), (36, 1), (30, 1)])
def test_flooded_answers_go_to_the_lowest_level_that_decrypts_them(first_prime_bits, expected):
    """The switch's worst-case rounding may cost at most one bit of the flooding level: a first
    prime too small for that keeps the answer one level up; the budget stated is the bound's."""
    t, log_n = 786433, 14
    params = types.SimpleNamespace(plaintext_modulus=t, log_n=log_n, q_primes=[2**first_prime_bits - 1, 2**55 - 1,
                                                                               2**55 - 1])
    level, budget = flooded_answer_level(params, 2, budget_left=80.0)
    assert level == expected
    noise = NoiseModel(math.log2(t), log_n)
    switched = noise.switched(math.log2(params.q_primes[0]) if level == 0 else
                              sum(math.log2(q) for q in params.q_primes[:2]))
    assert switched >= FLOOD_NOISE_BITS
    assert budget == pytest.approx(-math.log2(2.0**-FLOOD_NOISE_BITS + 2.0**-80 + 2.0**-switched))
    assert FLOOD_NOISE_BITS - 1 <= budget <= FLOOD_NOISE_BITS
    # an answer computed at level 0 stays there, at the flooding level
    assert flooded_answer_level(params, 0, 80.0) == (0, pytest.approx(FLOOD_NOISE_BITS, abs=1e-9))
