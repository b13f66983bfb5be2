"""Stratified sampling of a fitted model (``sample(method="stratified")``, the default).

Each column is drawn given the columns it depends on; among the rows sharing those values the
new column's counts are a randomised rounding of their expectation (within one row of it),
handed out in a fresh random order. The pooled tables must follow the model (its expected
counts are the i.i.d. sampler's), siblings must stay conditionally independent (the random
order: a sampler that hands the codes out in row order, as mbi's "round" does, ties them and
is rejected), and each edge's table must be within one row per cell of its expectation.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from _stats import ALPHA, chi2_categorical

from dpkit.errors import PrivacyParameterError
from dpkit.noise import RandomSource
from dpkit.synth import Categorical
from dpkit.synth._graph import JunctionModel
from dpkit.synth._tree import TreeModel, allot
from dpkit.synth.mst import SyntheticModel

SIZES = (3, 4, 2, 3)
EDGES = ((0, 1), (1, 2), (1, 3))  # a star around column 1: 0, 2 and 3 are siblings


def _star(seed: int) -> tuple[np.ndarray, TreeModel]:
    """A distribution p(x1) p(x0|x1) p(x2|x1) p(x3|x1) and the tree model of its marginals."""
    rng = np.random.default_rng(seed)
    p1 = rng.dirichlet(np.ones(4))
    c0, c2, c3 = (rng.dirichlet(np.ones(k), size=4) for k in (3, 2, 3))
    joint = np.einsum("b,ba,bc,bd->abcd", p1, c0, c2, c3)
    nodes = [joint.sum(axis=tuple(k for k in range(4) if k != i)) for i in range(4)]
    pairs = [joint.sum(axis=tuple(k for k in range(4) if k not in e)) for e in EDGES]
    model = TreeModel(sizes=SIZES, edges=EDGES, nodes=tuple(nodes), pairs=tuple(pairs), total=1.0)
    return joint, model


class _RowOrder:
    """A broken source: every uniform is 1/2, so the rounding is fixed and each group's codes
    go to its rows in table order (mbi's "round" without its noise)."""

    def uniform(self, size: int) -> np.ndarray:
        return np.full(size, 0.5)


def _pooled(model: Any, source: Any, tables: int = 40, n: int = 1_000) -> np.ndarray:
    """The full-joint counts of ``tables`` stratified tables of ``n`` rows, added up."""
    counts = np.zeros(int(np.prod(SIZES)), dtype=np.int64)
    for _ in range(tables):
        codes = model.sample_codes(n, source, "stratified")
        counts += np.bincount(np.ravel_multi_index(codes.T, SIZES), minlength=counts.size)
    return counts


@pytest.mark.parametrize("seed", [0, 1, 2, 3])
def test_allot_gives_each_group_its_rounded_counts(seed: int) -> None:
    rng = np.random.default_rng(seed)
    probs = rng.dirichlet(np.ones(7) * 0.5, size=5)
    probs[3] = 0.0  # a group of no probability: uniform
    rows = rng.integers(0, 5, 1_234)
    codes = allot(probs, rows, RandomSource(seed=seed, insecure=True))
    for g in range(5):
        m = int((rows == g).sum())
        got = np.bincount(codes[rows == g], minlength=7)
        want = m * (probs[g] if probs[g].sum() > 0 else np.full(7, 1 / 7))
        assert got.sum() == m
        assert np.all(np.abs(got - want) < 1.0)


def test_each_edge_table_is_within_one_row_of_its_expectation() -> None:
    _, model = _star(5)
    codes = model.sample_codes(10_007, RandomSource(seed=1, insecure=True))
    root = np.bincount(codes[:, 0], minlength=3)
    assert np.all(np.abs(root - 10_007 * model.nodes[0]) < 1.0)
    for (a, b), pair in zip(model.edges, model.pairs, strict=True):
        got = np.zeros(pair.shape)
        np.add.at(got, (codes[:, a], codes[:, b]), 1)
        # the tree is drawn from column 0: the first column of every edge is its parent
        want = got.sum(axis=1, keepdims=True) * pair / pair.sum(axis=1, keepdims=True)
        assert np.all(np.abs(got - want) < 1.0)


def test_stratified_tables_follow_the_model_and_keep_siblings_independent() -> None:
    # Pearson's test (ALPHA = 1e-6) of the full joint of 40 pooled tables of 1,000 rows
    # against the model's joint. The stratified counts have the i.i.d. expectation and no
    # more variance than multinomial counts (rounding within one row, then a hypergeometric
    # matching), so the test stays at level ALPHA or below. Companion: the same sampler
    # handing each group's codes out in row order ties the siblings 0, 2 and 3 and is
    # rejected.
    joint, model = _star(2)
    counts = _pooled(model, RandomSource(seed=3, insecure=True))
    stat, crit = chi2_categorical(counts, joint.ravel(), alpha=ALPHA)
    assert stat <= crit
    broken = _pooled(model, _RowOrder())
    stat2, crit2 = chi2_categorical(broken, joint.ravel(), alpha=ALPHA)
    assert stat2 > crit2


def test_a_junction_model_is_sampled_stratified_too() -> None:
    # Cliques (0, 1) and (1, 2, 3) of a distribution p(x0, x1) p(x2, x3 | x1); the pooled
    # tables follow it (ALPHA = 1e-6); companion: row order is rejected.
    rng = np.random.default_rng(7)
    p01 = rng.dirichlet(np.ones(12)).reshape(3, 4)
    c = rng.dirichlet(np.ones(6), size=4).reshape(4, 2, 3)
    joint = np.einsum("ab,bcd->abcd", p01, c)
    model = JunctionModel(
        sizes=SIZES,
        cliques=((0, 1), (1, 2, 3)),
        parents=(None, 0),
        tables=(p01, joint.sum(axis=0)),
        total=1.0,
    )
    counts = _pooled(model, RandomSource(seed=4, insecure=True))
    stat, crit = chi2_categorical(counts, joint.ravel(), alpha=ALPHA)
    assert stat <= crit
    stat2, crit2 = chi2_categorical(_pooled(model, _RowOrder()), joint.ravel(), alpha=ALPHA)
    assert stat2 > crit2


def test_sample_takes_either_method_and_refuses_another() -> None:
    _, tree = _star(1)
    domains = {f"c{i}": Categorical(list(range(k - 1))) for i, k in enumerate(SIZES)}
    model = SyntheticModel(domains=domains, tree=tree, info={})
    for method in ("stratified", "iid"):
        out = model.sample(500, source=RandomSource(seed=1, insecure=True), method=method)
        assert len(out) == 500 and list(out.columns) == list(domains)
    assert len(model.sample(0)) == 0
    with pytest.raises(PrivacyParameterError, match="method must be one of"):
        model.sample(10, method="round")
