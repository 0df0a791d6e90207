"""Path-product tree evaluation against a direct traversal."""
import numpy as np
import pytest

from apps.xgboost.trees import class_scores, leaf_indicators, tree_values


def traverse(tests, leaves):
    node = 0
    internal = len(tests)
    while node < internal:
        node = 2 * node + 1 if tests[node] else 2 * node + 2
    return leaves[node - internal]


@pytest.mark.parametrize("depth", [1, 2, 3, 5])
def test_matches_traversal(depth):
    rng = np.random.default_rng(depth)
    tests = rng.integers(0, 2, (40, 3, 2**depth - 1))
    leaves = rng.integers(-1000, 1000, (3, 2**depth))
    values = tree_values(tests, leaves)
    for n in range(40):
        for t in range(3):
            assert values[n, t] == traverse(tests[n, t], leaves[t])
    indicators = leaf_indicators(tests)
    assert (indicators.sum(axis=-1) == 1).all()


def test_class_scores_sum_trees_of_each_class():
    values = np.arange(12).reshape(2, 6)
    scores = class_scores(values, np.array([0, 1, 2, 0, 1, 2]), 3)
    assert scores.tolist() == [[3, 5, 7], [15, 17, 19]]


def test_rejects_incomplete_tree():
    with pytest.raises(ValueError, match="complete"):
        leaf_indicators(np.zeros((1, 4), dtype=np.int64))
