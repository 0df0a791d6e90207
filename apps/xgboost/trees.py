"""Evaluation of complete binary trees by products of node tests, as an encrypted circuit does.

A tree of depth D is stored in heap order: node i has children 2i+1 (left) and 2i+2 (right),
nodes 0 .. 2^D-2 are internal and the 2^D leaves are numbered left to right. Given each
node's test s (1 = go left, 0 = go right) the tree's value is

    sum over leaves l of  L_l * prod over the path to l of (s if the path goes left else 1 - s)

which uses only additions and multiplications, so it maps onto BFV/CKKS arithmetic directly.
For D = 2: s1*s2*L1 + s1*(1-s2)*L2 + (1-s1)*s3*L3 + (1-s1)*(1-s3)*L4.
"""
from __future__ import annotations

import numpy as np


def depth_of(n_internal: int) -> int:
    """D such that a complete tree of depth D has `n_internal` = 2^D - 1 internal nodes."""
    depth = int(np.log2(n_internal + 1))
    if 2**depth - 1 != n_internal:
        raise ValueError(f"{n_internal} internal nodes do not make a complete binary tree")
    return depth


def leaf_indicators(go_left: np.ndarray) -> np.ndarray:
    """`[..., 2^D - 1]` node tests (0/1) -> `[..., 2^D]` one-hot leaf indicators (same dtype)."""
    depth = depth_of(go_left.shape[-1])
    indicators = np.ones(go_left.shape[:-1] + (1,), dtype=go_left.dtype)
    for level in range(depth):
        s = go_left[..., 2**level - 1 : 2 ** (level + 1) - 1]
        pair = np.stack([indicators * s, indicators * (1 - s)], axis=-1)
        indicators = pair.reshape(go_left.shape[:-1] + (2 ** (level + 1),))
    return indicators


def tree_values(go_left: np.ndarray, leaves: np.ndarray) -> np.ndarray:
    """Node tests `[n, T, 2^D - 1]` and leaves `[T, 2^D]` -> value of each tree `[n, T]`."""
    return (leaf_indicators(go_left) * leaves).sum(axis=-1)


def class_scores(values: np.ndarray, tree_class: np.ndarray, n_classes: int) -> np.ndarray:
    """Sum the tree values `[n, T]` of each class: `[n, n_classes]` (same dtype)."""
    one_hot = (tree_class[:, None] == np.arange(n_classes)[None, :]).astype(values.dtype)
    return values @ one_hot
