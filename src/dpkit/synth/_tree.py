"""Inference for a tree-structured model from noisy marginals, and sampling from it.

The model is a Markov random field over the columns whose cliques are the columns and the
edges of a spanning tree (what MST selects): ``p(x) ∝ exp(sum_i theta_i(x_i) + sum_(a,b)
theta_ab(x_a, x_b))``. Its marginals are computed exactly by sum-product message passing on
the tree, in log space.

Estimation follows Private-PGM (McKenna, Sheldon and Miklau 2019, "Graphical-model based
estimation and inference for differential privacy", Algorithm 1): minimise the weighted squared
distance ``L(mu) = sum_c ||mu_c - y_c||^2 / (2 sigma_c^2)`` between the model's marginals
``mu_c = N p_c`` (``N`` the estimated total) and the noisy measurements ``y_c`` over the
marginal polytope, by entropic mirror descent on the potentials: ``theta <- theta - alpha
grad L(mu(theta))``, with the step halved until the loss decreases enough (Armijo rule) and
doubled at the start of each iteration. On a tree the marginal polytope is the local one, so
the marginals computed are those of a real distribution, which is what is sampled.

Everything here is post-processing of the noisy measurements: it reads no data and spends no
privacy.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from dpkit.noise import RandomSource

__all__ = ["TreeModel", "estimate_total", "fit_tree", "tree_order"]

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]


def _logsumexp(x: FloatArray, axis: int) -> FloatArray:
    m = np.max(x, axis=axis, keepdims=True)
    m = np.where(np.isfinite(m), m, 0.0)
    out: FloatArray = np.log(np.sum(np.exp(x - m), axis=axis)) + np.squeeze(m, axis=axis)
    return out


def tree_order(d: int, edges: Sequence[tuple[int, int]]) -> list[tuple[int, int | None]]:
    """``(node, parent)`` in breadth-first order from node 0 (the root has parent None).

    ``edges`` must form a spanning tree of the ``d`` nodes."""
    nbrs: dict[int, list[int]] = {i: [] for i in range(d)}
    for a, b in edges:
        nbrs[a].append(b)
        nbrs[b].append(a)
    order: list[tuple[int, int | None]] = [(0, None)]
    seen = {0}
    k = 0
    while k < len(order):
        node = order[k][0]
        for n in sorted(nbrs[node]):
            if n not in seen:
                seen.add(n)
                order.append((n, node))
        k += 1
    if len(order) != d or len(edges) != d - 1:
        raise ValueError("the edges do not form a spanning tree")
    return order


def _marginals(
    sizes: Sequence[int],
    edges: Sequence[tuple[int, int]],
    order: Sequence[tuple[int, int | None]],
    theta_n: Sequence[FloatArray],
    theta_e: Sequence[FloatArray],
) -> tuple[list[FloatArray], list[FloatArray]]:
    """Exact node and edge marginals (probabilities) of the tree model, by sum-product."""
    d = len(sizes)
    edge_of: dict[tuple[int, int], tuple[int, bool]] = {}
    for k, (a, b) in enumerate(edges):
        edge_of[(a, b)] = (k, False)
        edge_of[(b, a)] = (k, True)

    def pair(u: int, v: int) -> FloatArray:
        """theta of the edge as an array indexed [x_u, x_v]."""
        k, flipped = edge_of[(u, v)]
        t = theta_e[k]
        return t.T if flipped else t

    msg: dict[tuple[int, int], FloatArray] = {}  # (from, to) -> log message over x_to
    children: dict[int, list[int]] = {i: [] for i in range(d)}
    for node, parent in order:
        if parent is not None:
            children[parent].append(node)
    for node, parent in reversed(order):  # upward
        if parent is None:
            continue
        inner = theta_n[node].copy()
        for c in children[node]:
            inner = inner + msg[(c, node)]
        msg[(node, parent)] = _logsumexp(pair(node, parent) + inner[:, None], axis=0)
    for node, parent in order:  # downward
        for c in children[node]:
            inner = theta_n[node].copy()
            if parent is not None:
                inner = inner + msg[(parent, node)]
            for c2 in children[node]:
                if c2 != c:
                    inner = inner + msg[(c2, node)]
            msg[(node, c)] = _logsumexp(pair(node, c) + inner[:, None], axis=0)

    total_in = [theta_n[u].copy() for u in range(d)]
    for (_, t), m in msg.items():
        total_in[t] = total_in[t] + m

    def incoming(u: int, but: int | None) -> FloatArray:
        """theta_u plus the messages into u, except the one from ``but``."""
        return total_in[u] if but is None else total_in[u] - msg[(but, u)]

    nodes = []
    for i in range(d):
        belief = incoming(i, None)
        belief = np.exp(belief - belief.max())
        nodes.append(belief / belief.sum())
    pairs = []
    for k, (a, b) in enumerate(edges):
        logp = theta_e[k] + incoming(a, b)[:, None] + incoming(b, a)[None, :]
        p = np.exp(logp - logp.max())
        pairs.append(p / p.sum())
    return nodes, pairs


def estimate_total(ys: Sequence[FloatArray], sigmas: Sequence[float], floor: float = 1.0) -> float:
    """The inverse-variance weighted mean of the measurements' totals (each total of a vector
    of ``k`` cells with noise ``sigma`` has variance ``k sigma^2``), at least ``floor``."""
    w = np.array([1.0 / (y.size * s * s) for y, s in zip(ys, sigmas, strict=True)])
    t = np.array([float(y.sum()) for y in ys])
    return float(max(floor, float(np.sum(w * t) / np.sum(w))))


@dataclass(frozen=True)
class TreeModel:
    """A fitted tree model: its node and edge marginals (probabilities) and the sampling order.

    ``nodes[i]`` sums to 1 over column ``i``'s cells; ``pairs[k]`` is the joint of edge
    ``edges[k] = (a, b)`` indexed ``[x_a, x_b]``; ``total`` is the estimated number of rows.
    """

    sizes: tuple[int, ...]
    edges: tuple[tuple[int, int], ...]
    nodes: tuple[FloatArray, ...]
    pairs: tuple[FloatArray, ...]
    total: float

    def sample_codes(self, n: int, rng: RandomSource) -> IntArray:
        """``n`` rows of cell codes (shape ``(n, d)``) drawn from the model: the root from its
        marginal, then each column given its parent, ``p(x_c | x_p) = p(x_p, x_c) / p(x_p)``."""
        d = len(self.sizes)
        out = np.zeros((n, d), dtype=np.int64)
        order = tree_order(d, self.edges)
        where = {(a, b): k for k, (a, b) in enumerate(self.edges)}
        for node, parent in order:
            if parent is None:
                cdf = np.cumsum(self.nodes[node])
                out[:, node] = _draw(cdf[None, :], np.zeros(n, dtype=np.int64), rng)
                continue
            k = where.get((parent, node))
            joint = self.pairs[k] if k is not None else self.pairs[where[(node, parent)]].T
            cond = joint / np.maximum(joint.sum(axis=1, keepdims=True), 1e-300)
            empty = joint.sum(axis=1) <= 0.0
            cond[empty] = self.nodes[node]  # a parent value of probability 0 is never drawn
            out[:, node] = _draw(np.cumsum(cond, axis=1), out[:, parent], rng)
        return out


def _draw(cdfs: FloatArray, rows: IntArray, rng: RandomSource) -> IntArray:
    """For each ``r`` in ``rows`` the index drawn from the distribution whose cumulative sums
    are ``cdfs[r]`` (inverse transform of a uniform)."""
    n = rows.size
    out = np.empty(n, dtype=np.int64)
    size = cdfs.shape[1]
    for start in range(0, n, 1 << 18):
        r = rows[start : start + (1 << 18)]
        c = cdfs[r]
        u = rng.uniform(r.size)[:, None] * c[:, -1:]
        out[start : start + r.size] = np.minimum((c <= u).sum(axis=1), size - 1)
    return out


def fit_tree(
    sizes: Sequence[int],
    edges: Sequence[tuple[int, int]],
    y_nodes: Sequence[FloatArray],
    sigma_nodes: float,
    y_pairs: Sequence[FloatArray],
    sigma_pairs: float,
    *,
    iterations: int = 500,
) -> TreeModel:
    """Fit the tree model to noisy node and edge marginals by mirror descent (module doc)."""
    d = len(sizes)
    order = tree_order(d, edges)
    total = estimate_total(
        [*y_nodes, *y_pairs], [sigma_nodes] * len(y_nodes) + [sigma_pairs] * len(y_pairs)
    )
    theta_n = [np.zeros(s) for s in sizes]
    theta_e = [np.zeros((sizes[a], sizes[b])) for a, b in edges]
    wn, we = 1.0 / sigma_nodes**2, 1.0 / sigma_pairs**2

    def loss(
        th_n: list[FloatArray], th_e: list[FloatArray]
    ) -> tuple[float, list[FloatArray], list[FloatArray], list[FloatArray], list[FloatArray]]:
        pn, pe = _marginals(sizes, edges, order, th_n, th_e)
        rn = [total * p - y for p, y in zip(pn, y_nodes, strict=True)]
        re = [total * p - y for p, y in zip(pe, y_pairs, strict=True)]
        value = 0.5 * (
            wn * sum(float(r @ r) for r in rn) + we * sum(float(np.sum(r * r)) for r in re)
        )
        gn = [wn * r for r in rn]
        ge = [we * r for r in re]
        return value, gn, ge, pn, pe

    cur, gn, ge, pn, pe = loss(theta_n, theta_e)
    alpha = 1.0 / (total * total * (wn + we) + 1e-300)
    for _ in range(iterations):
        alpha *= 2.0
        for _ in range(30):
            tn = [t - alpha * g for t, g in zip(theta_n, gn, strict=True)]
            te = [t - alpha * g for t, g in zip(theta_e, ge, strict=True)]
            new, gn2, ge2, pn2, pe2 = loss(tn, te)
            # sufficient decrease: L(mu) - L(mu') >= alpha/2 <grad, mu - mu'> (Private-PGM)
            dec = sum(float(g @ (total * (p - q))) for g, p, q in zip(gn, pn, pn2, strict=True))
            dec += sum(
                float(np.sum(g * (total * (p - q)))) for g, p, q in zip(ge, pe, pe2, strict=True)
            )
            if cur - new >= 0.5 * alpha * dec:
                break
            alpha *= 0.5
        theta_n, theta_e = tn, te
        cur, gn, ge, pn, pe = new, gn2, ge2, pn2, pe2
    return TreeModel(
        sizes=tuple(sizes),
        edges=tuple(edges),
        nodes=tuple(pn),
        pairs=tuple(pe),
        total=total,
    )
