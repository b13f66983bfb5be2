"""Inference for a graphical model over any set of measured cliques, and sampling from it.

The model (Private-PGM: McKenna, Sheldon and Miklau 2019, "Graphical-model based estimation
and inference for differential privacy") is ``p(x) ∝ exp(sum_r theta_r(x_r))`` with one
potential per measured clique ``r`` (a set of columns). Its marginals are computed exactly on a
junction tree:

* the graph joins every two columns that share a measured clique; it is triangulated by
  eliminating, at each step, the column whose elimination adds the fewest cells (greedy
  min-weight elimination); the elimination cliques that are maximal are the junction tree's
  nodes, joined by a maximum-weight spanning tree on the sizes of their intersections, which
  has the running-intersection property (Koller and Friedman 2009, Thm. 10.4 and 10.6);
* every measured clique is held by a junction-tree clique that contains it, and sum-product
  message passing in log space gives every junction-tree clique's exact marginal.

The model's size is the number of cells of the junction-tree cliques, what AIM limits.

Estimation minimises the weighted squared loss ``L = sum_r ||N p_r - y_r||^2 / (2 sigma_r^2)``
(``N`` the estimated total) by Private-PGM's entropic mirror descent on the potentials,
``theta_r <- theta_r - alpha (N p_r - y_r) / sigma_r^2``, the step halved until the loss
decreases by at least half the linear prediction (Armijo) and doubled at the start of each
iteration; it stops after ``iterations`` steps or when ten steps together decrease the loss by
less than ``1e-7`` of it. (On a tree, :mod:`dpkit.synth._tree` solves the same problem exactly.)

Everything here is post-processing of the noisy measurements: it reads no data and spends no
privacy.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from dpkit.noise import RandomSource
from dpkit.synth._tree import pick

__all__ = ["JunctionModel", "Measurement", "fit_graph", "junction_tree", "model_cells"]

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]
Clique = tuple[int, ...]


@dataclass(frozen=True)
class Measurement:
    """Noisy counts ``y`` (shape: the clique's sizes, axes in the clique's order) of the sorted
    clique ``clique`` with Gaussian noise of standard deviation ``sigma``."""

    clique: Clique
    y: FloatArray
    sigma: float


def _prod(sizes: Sequence[int], clique: Sequence[int]) -> int:
    out = 1
    for v in clique:
        out *= sizes[v]
    return out


def junction_tree(
    sizes: Sequence[int], cliques: Sequence[Clique]
) -> tuple[list[Clique], list[int | None]]:
    """The junction tree of ``cliques`` over ``len(sizes)`` columns: its cliques (sorted
    tuples; every column is in one) and each one's parent (``None`` for the root, index 0),
    parents before children."""
    d = len(sizes)
    nbrs: dict[int, set[int]] = {v: set() for v in range(d)}
    for c in cliques:
        for a, b in itertools.combinations(c, 2):
            nbrs[a].add(b)
            nbrs[b].add(a)
    left = set(range(d))
    found: list[Clique] = []
    while left:

        def cost(v: int) -> tuple[int, int]:
            return (_prod(sizes, [v, *nbrs[v]]), v)

        v = min(left, key=cost)
        found.append(tuple(sorted([v, *nbrs[v]])))
        for a, b in itertools.combinations(nbrs[v], 2):
            nbrs[a].add(b)
            nbrs[b].add(a)
        for u in nbrs[v]:
            nbrs[u].discard(v)
        left.discard(v)
        del nbrs[v]
    maximal = [c for c in found if not any(set(c) < set(o) for o in found)]
    jt = list(dict.fromkeys(maximal))
    # maximum spanning tree on |C_i ∩ C_j| (Prim's, from clique 0), parents before children
    parent: list[int | None] = [None] * len(jt)
    order = [0]
    best = {i: (len(set(jt[0]) & set(jt[i])), 0) for i in range(1, len(jt))}
    while best:
        i = max(best, key=lambda k: (best[k][0], -k))
        parent[i] = best.pop(i)[1]
        order.append(i)
        for k in best:
            w = len(set(jt[i]) & set(jt[k]))
            if w > best[k][0]:
                best[k] = (w, i)
    new_index = {old: new for new, old in enumerate(order)}
    cl = [jt[i] for i in order]
    par = [None if parent[i] is None else new_index[parent[i]] for i in order]  # type: ignore[index]
    return cl, par


def model_cells(sizes: Sequence[int], cliques: Sequence[Clique]) -> int:
    """The cells of the junction tree of ``cliques`` (what the model holds in memory)."""
    jt, _ = junction_tree(sizes, cliques)
    return sum(_prod(sizes, c) for c in jt)


def _shape(sizes: Sequence[int], sub: Sequence[int], full: Sequence[int]) -> tuple[int, ...]:
    """The shape that broadcasts an array over ``sub`` (axes in ``sub``'s order, which follows
    ``full``'s) against one over ``full``."""
    keep = set(sub)
    return tuple(sizes[v] if v in keep else 1 for v in full)


def _axes_out(sub: Sequence[int], full: Sequence[int]) -> tuple[int, ...]:
    keep = set(sub)
    return tuple(k for k, v in enumerate(full) if v not in keep)


def _logsumexp(x: FloatArray, axes: tuple[int, ...]) -> FloatArray:
    if not axes:
        return x
    m = np.max(x, axis=axes, keepdims=True)
    m = np.where(np.isfinite(m), m, 0.0)
    out: FloatArray = np.log(np.sum(np.exp(x - m), axis=axes)) + np.squeeze(m, axis=axes)
    return out


@dataclass(frozen=True)
class JunctionModel:
    """A fitted model: its junction-tree cliques, each one's marginal (probabilities, axes in
    the clique's order), the tree's parents and the estimated total."""

    sizes: tuple[int, ...]
    cliques: tuple[Clique, ...]
    parents: tuple[int | None, ...]
    tables: tuple[FloatArray, ...]
    total: float

    def marginal(self, columns: Sequence[int]) -> FloatArray:
        """The probabilities of ``columns`` (sorted), which one clique must hold."""
        want = tuple(sorted(columns))
        for c, t in zip(self.cliques, self.tables, strict=True):
            if set(want) <= set(c):
                out: FloatArray = t.sum(axis=_axes_out(want, c))
                return out
        raise ValueError(f"no clique of the model holds the columns {want}")

    def sample_codes(self, n: int, rng: RandomSource, method: str = "stratified") -> IntArray:
        """``n`` rows of cell codes: the root clique's cells from its marginal, then each
        clique's new columns given the separator with its parent (``p(new | sep) = p(clique)
        / p(sep)``), which the running-intersection property makes exact; each step by
        :func:`~dpkit.synth._tree.pick` (``method``: ``"stratified"`` or ``"iid"``)."""
        d = len(self.sizes)
        out = np.zeros((n, d), dtype=np.int64)
        done: set[int] = set()
        for c, parent, table in zip(self.cliques, self.parents, self.tables, strict=True):
            sep = [v for v in c if v in done] if parent is not None else []
            new = [v for v in c if v not in set(sep)]
            if not new:
                continue
            perm = [c.index(v) for v in sep + new]
            t = np.transpose(table, perm).reshape(_prod(self.sizes, sep), _prod(self.sizes, new))
            rows = t.sum(axis=1, keepdims=True)
            fallback = t.sum(axis=0) / max(float(t.sum()), 1e-300)
            cond = np.where(rows > 0.0, t / np.where(rows > 0.0, rows, 1.0), fallback[None, :])
            if sep:
                sep_index = np.ravel_multi_index(
                    tuple(out[:, v] for v in sep), tuple(self.sizes[v] for v in sep)
                ).astype(np.int64)
            else:
                sep_index = np.zeros(n, dtype=np.int64)
            flat = pick(cond, sep_index, rng, method)
            cells = np.unravel_index(flat, tuple(self.sizes[v] for v in new))
            for v, col in zip(new, cells, strict=True):
                out[:, v] = col
            done.update(new)
        return out


class _Calibrator:
    """Sum-product on a fixed junction tree for potentials on the measured cliques."""

    def __init__(self, sizes: Sequence[int], cliques: Sequence[Clique]) -> None:
        self.sizes = list(sizes)
        self.jt, self.parents = junction_tree(sizes, cliques)
        self.host = {}
        for r in cliques:
            self.host[r] = next(i for i, c in enumerate(self.jt) if set(r) <= set(c))
        self.children: list[list[int]] = [[] for _ in self.jt]
        for i, p in enumerate(self.parents):
            if p is not None:
                self.children[p].append(i)

    def beliefs(self, theta: dict[Clique, FloatArray]) -> list[FloatArray]:
        """Each junction-tree clique's exact marginal (probabilities)."""
        jt, sizes = self.jt, self.sizes
        pot = [np.zeros(tuple(sizes[v] for v in c)) for c in jt]
        for r, t in theta.items():
            h = self.host[r]
            pot[h] = pot[h] + t.reshape(_shape(sizes, r, jt[h]))
        up: dict[int, FloatArray] = {}  # child -> message to its parent (over the separator)
        for i in reversed(range(len(jt))):
            p = self.parents[i]
            if p is None:
                continue
            inner = pot[i]
            for ch in self.children[i]:
                inner = inner + up[ch]
            sep = [v for v in jt[i] if v in set(jt[p])]
            msg = _logsumexp(inner, _axes_out(sep, jt[i]))
            up[i] = msg.reshape(_shape(sizes, sep, jt[p]))
        down: dict[int, FloatArray] = {}  # child -> message from its parent
        out: list[FloatArray] = [np.zeros(0)] * len(jt)
        for i in range(len(jt)):
            total = pot[i]
            for ch in self.children[i]:
                total = total + up[ch]
            if i in down:
                total = total + down[i]
            for ch in self.children[i]:
                sep = [v for v in jt[ch] if v in set(jt[i])]
                msg = _logsumexp(total - up[ch], _axes_out(sep, jt[i]))
                down[ch] = msg.reshape(_shape(sizes, sep, jt[ch]))
            b = np.exp(total - total.max())
            out[i] = b / b.sum()
        return out

    def marginal(self, beliefs: list[FloatArray], r: Clique) -> FloatArray:
        h = self.host[r]
        out: FloatArray = beliefs[h].sum(axis=_axes_out(r, self.jt[h]))
        return out


def fit_graph(
    sizes: Sequence[int],
    measurements: Sequence[Measurement],
    total: float,
    *,
    theta: dict[Clique, FloatArray] | None = None,
    iterations: int = 1000,
) -> tuple[JunctionModel, dict[Clique, FloatArray]]:
    """Fit the model to the measurements by mirror descent (module doc), starting from the
    potentials ``theta`` (a previous fit's, for a warm start); returns the model and its
    potentials."""
    cliques = list(dict.fromkeys([*(m.clique for m in measurements), *(theta or {})]))
    for v in range(len(sizes)):
        if not any(v in c for c in cliques):
            cliques.append((v,))
    cal = _Calibrator(sizes, cliques)
    th = {r: np.zeros(tuple(sizes[v] for v in r)) for r in cliques}
    for r, t in (theta or {}).items():
        if r in th:
            th[r] = t.copy()

    def loss(
        th_: dict[Clique, FloatArray],
    ) -> tuple[float, dict[Clique, FloatArray], dict[Clique, FloatArray], list[FloatArray]]:
        bel = cal.beliefs(th_)
        mu = {r: cal.marginal(bel, r) for r in cliques}
        value = 0.0
        grad = {r: np.zeros_like(mu[r]) for r in cliques}
        for m in measurements:
            res = total * mu[m.clique] - m.y
            w = 1.0 / (m.sigma * m.sigma)
            value += 0.5 * w * float(np.sum(res * res))
            grad[m.clique] = grad[m.clique] + w * res
        return value, grad, mu, bel

    cur, grad, mu, bel = loss(th)
    wsum = sum(1.0 / (m.sigma * m.sigma) for m in measurements)
    alpha = 1.0 / (total * total * wsum + 1e-300)
    history = [cur]
    for _ in range(iterations):
        alpha *= 2.0
        for _ in range(30):
            cand = {r: th[r] - alpha * grad[r] for r in cliques}
            new, grad2, mu2, bel2 = loss(cand)
            dec = sum(float(np.sum(grad[r] * total * (mu[r] - mu2[r]))) for r in cliques)
            if cur - new >= 0.5 * alpha * dec:
                break
            alpha *= 0.5
        else:
            break
        th, cur, grad, mu, bel = cand, new, grad2, mu2, bel2
        history.append(cur)
        if len(history) > 10 and history[-11] - cur <= 1e-7 * max(cur, 1e-12):
            break
    model = JunctionModel(
        sizes=tuple(sizes),
        cliques=tuple(cal.jt),
        parents=tuple(cal.parents),
        tables=tuple(bel),
        total=total,
    )
    return model, th
