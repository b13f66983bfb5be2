"""The tree model: exact marginals by message passing, the fit, and sampling from it."""

from __future__ import annotations

import numpy as np
from _stats import ALPHA, chi2_categorical

from dpkit.noise import RandomSource
from dpkit.synth._tree import TreeModel, fit_tree, tree_order

SIZES = (3, 4, 2, 3)
EDGES = ((0, 1), (1, 2), (1, 3))  # a star around column 1


def _tree_joint(seed: int) -> np.ndarray:
    """A random distribution that factorises over EDGES: p(x1) p(x0|x1) p(x2|x1) p(x3|x1)."""
    rng = np.random.default_rng(seed)
    p1 = rng.dirichlet(np.ones(4))
    c0, c2, c3 = (rng.dirichlet(np.ones(k), size=4) for k in (3, 2, 3))
    return np.einsum("b,ba,bc,bd->abcd", p1, c0, c2, c3)


def _margins(joint: np.ndarray) -> tuple[list[np.ndarray], list[np.ndarray]]:
    d = joint.ndim
    nodes = [joint.sum(axis=tuple(k for k in range(d) if k != i)) for i in range(d)]
    pairs = [joint.sum(axis=tuple(k for k in range(d) if k not in e)) for e in EDGES]
    return nodes, pairs


def test_exact_measurements_are_recovered() -> None:
    # With noiseless measurements of a tree-factorised distribution the loss has its minimum
    # 0 at the truth, which mirror descent approaches: after its 500 steps every fitted
    # marginal is within 1e-3 of the true one (brute-force marginalisation; the companion
    # below misses by more than 1e-2).
    joint = _tree_joint(1)
    n = 10_000.0
    nodes, pairs = _margins(joint)
    model = fit_tree(SIZES, EDGES, [n * p for p in nodes], 1.0, [n * p for p in pairs], 1.0)
    assert abs(model.total - n) < 1e-6 * n
    for got, want in zip(model.nodes, nodes, strict=True):
        np.testing.assert_allclose(got, want, atol=1e-3)
    for got, want in zip(model.pairs, pairs, strict=True):
        np.testing.assert_allclose(got, want, atol=1e-3)


def test_a_wrong_structure_cannot_fit_a_dependence_it_lacks() -> None:
    # Companion: the same fit with the edge (1, 3) replaced by (0, 3) cannot match the true
    # (1, 3) dependence, so the check above can fail.
    joint = _tree_joint(1)
    nodes, _ = _margins(joint)
    edges = ((0, 1), (1, 2), (0, 3))
    pairs = [joint.sum(axis=tuple(k for k in range(4) if k not in e)) for e in edges]
    model = fit_tree(SIZES, edges, [1e4 * p for p in nodes], 1.0, [1e4 * p for p in pairs], 1.0)
    true_13 = joint.sum(axis=(0, 2))
    fitted_13 = np.einsum("ab,ad->bd", model.pairs[0], model.pairs[2] / model.nodes[0][:, None])
    assert np.abs(fitted_13 - true_13).sum() > 1e-2


def test_samples_follow_the_model() -> None:
    # Pearson's test (ALPHA = 1e-6) of 40,000 sampled rows' full joint against the model's
    # joint, p(x1) p(x0|x1) p(x2|x1) p(x3|x1) from its edge marginals.
    joint = _tree_joint(2)
    nodes, pairs = _margins(joint)
    model = TreeModel(sizes=SIZES, edges=EDGES, nodes=tuple(nodes), pairs=tuple(pairs), total=1.0)
    codes = model.sample_codes(40_000, RandomSource(seed=3, insecure=True))
    flat = np.ravel_multi_index(codes.T, SIZES)
    counts = np.bincount(flat, minlength=int(np.prod(SIZES)))
    stat, crit = chi2_categorical(counts, joint.ravel(), alpha=ALPHA)
    assert stat <= crit
    # companion: the independent model of the same margins is rejected
    indep = np.einsum("a,b,c,d->abcd", *nodes).ravel()
    stat2, crit2 = chi2_categorical(counts, indep, alpha=ALPHA)
    assert stat2 > crit2


def test_tree_order_refuses_a_graph_that_is_no_spanning_tree() -> None:
    import pytest

    with pytest.raises(ValueError):
        tree_order(3, [(0, 1), (1, 0)])
    assert tree_order(3, [(0, 2), (2, 1)]) == [(0, None), (2, 0), (1, 2)]
