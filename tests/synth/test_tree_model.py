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
    # 0 at the truth: every fitted marginal is within 1e-6 of the true one (brute-force
    # marginalisation; the companion below misses by more than 1e-2).
    joint = _tree_joint(1)
    n = 10_000.0
    nodes, pairs = _margins(joint)
    model = fit_tree(SIZES, EDGES, [n * p for p in nodes], 1.0, [n * p for p in pairs], 1.0)
    assert abs(model.total - n) < 1e-6 * n
    for got, want in zip(model.nodes, nodes, strict=True):
        np.testing.assert_allclose(got, want, atol=1e-6)
    for got, want in zip(model.pairs, pairs, strict=True):
        np.testing.assert_allclose(got, want, atol=1e-6)


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


def _primal_reference(
    sizes: tuple[int, ...],
    edges: tuple[tuple[int, int], ...],
    y1: list[np.ndarray],
    s1: float,
    y2: list[np.ndarray],
    s2: float,
    total: float,
) -> tuple[float, np.ndarray]:
    """The same quadratic programme solved independently: scipy's SLSQP directly on the
    full joint table ``q >= 0`` (all cells, not the tree's marginals), ``sum q = total``."""
    from scipy.optimize import minimize

    d = len(sizes)

    def marg(q: np.ndarray, keep: tuple[int, ...]) -> np.ndarray:
        return q.reshape(sizes).sum(axis=tuple(k for k in range(d) if k not in keep))

    def loss(q: np.ndarray) -> float:
        out = sum(np.sum((marg(q, (i,)) - y) ** 2) for i, y in enumerate(y1)) / (2 * s1**2)
        out += sum(np.sum((marg(q, e) - y) ** 2) for e, y in zip(edges, y2, strict=True)) / (
            2 * s2**2
        )
        return float(out)

    cells = int(np.prod(sizes))
    res = minimize(
        loss,
        np.full(cells, total / cells),
        method="SLSQP",
        bounds=[(0.0, None)] * cells,
        constraints=[{"type": "eq", "fun": lambda q: q.sum() - total}],
        options={"maxiter": 2_000, "ftol": 1e-14},
    )
    assert res.success
    return loss(res.x), res.x.reshape(sizes)


def _fitted_loss(
    model: TreeModel, y1: list[np.ndarray], s1: float, y2: list[np.ndarray], s2: float
) -> float:
    t = model.total
    out = sum(np.sum((t * p - y) ** 2) for p, y in zip(model.nodes, y1, strict=True)) / (2 * s1**2)
    out += sum(np.sum((t * p - y) ** 2) for p, y in zip(model.pairs, y2, strict=True)) / (2 * s2**2)
    return float(out)


def test_fit_matches_an_independent_solution_of_the_same_problem() -> None:
    # Noisy measurements (some negative cells, so the bounds bind) of a small chain 2-3-2; the
    # minimum over all joint tables equals the minimum over the tree's marginals (every joint's
    # marginals are consistent, and every consistent set is some joint's). The fitted loss
    # matches scipy's to 1e-6 relative and the edge marginals agree to 1e-3 of the total.
    # Companion: the same solver stopped after 2 iterations is caught by the first check.
    sizes, edges = (2, 3, 2), ((0, 1), (1, 2))
    rng = np.random.default_rng(4)
    joint = rng.dirichlet(np.ones(12) * 0.2).reshape(sizes)
    n, s1, s2 = 300.0, 6.0, 5.0
    y1 = [
        n * joint.sum(axis=tuple(k for k in range(3) if k != i)) + rng.normal(0, s1, s)
        for i, s in enumerate(sizes)
    ]
    y2 = [
        n * joint.sum(axis=tuple(k for k in range(3) if k not in e))
        + rng.normal(0, s2, (sizes[e[0]], sizes[e[1]]))
        for e in edges
    ]
    assert min(float(y.min()) for y in y2) < 0  # the non-negativity constraints matter
    model = fit_tree(sizes, edges, y1, s1, y2, s2)
    t = model.total
    mine = _fitted_loss(model, y1, s1, y2, s2)
    ref, q = _primal_reference(sizes, edges, y1, s1, y2, s2, t)
    assert mine <= ref * (1 + 1e-6) + 1e-9
    assert mine >= ref * (1 - 1e-4)  # scipy's is a minimum too: neither is far below
    early = fit_tree(sizes, edges, y1, s1, y2, s2, iterations=2)
    worse = _fitted_loss(early, y1, s1, y2, s2)
    assert worse > ref * (1 + 1e-3)
    for p, e in zip(model.pairs, edges, strict=True):
        want = q.sum(axis=tuple(k for k in range(3) if k not in e)) / t
        np.testing.assert_allclose(p, want, atol=1e-3)
