"""Inference for a tree-structured model from noisy marginals, and sampling from it.

The model is a distribution over the columns that factorises over a spanning tree (what MST
selects): ``p(x) = p(x_root) prod_(parent, child) p(x_child | x_parent)``. It is described by
its node and edge marginals; on a tree every set of non-negative node and edge tables that
agree on their shared columns (the local polytope) is the set of marginals of exactly one such
distribution (the junction-tree theorem, Wainwright and Jordan 2008, Prop. 2.1 and Sec. 4.1).

Estimation solves Private-PGM's problem (McKenna, Sheldon and Miklau 2019, "Graphical-model
based estimation and inference for differential privacy", eq. 3) exactly instead of by mirror
descent: minimise

    L(n, P) = sum_i ||n_i - y_i||^2 / (2 sigma_1^2) + sum_k ||P_k - Y_k||^2 / (2 sigma_2^2)

over node counts ``n_i`` and edge counts ``P_k >= 0`` with ``P_k 1 = n_a``, ``P_k^T 1 = n_b``
for edge ``k = (a, b)`` and ``1^T n_root = N`` (``N`` the estimated total; a node cell may
carry its own ``sigma_c``, then its squared error is divided by ``2 sigma_c^2``). This is a strictly
convex quadratic programme; its Lagrange dual is smooth and separable:

    P_k(lambda) = max(0, Y_k - sigma_2^2 (lambda_ka 1^T + 1 lambda_kb^T)),
    n_i(lambda) = y_i + sigma_1^2 (sum_(k at i) lambda_ki - nu [i = root]),

and its gradient is the constraints' residual (``P_k 1 - n_a``, ...). The dual is maximised by
L-BFGS until the residual is below ``1e-9 N``; strong duality gives the primal minimiser. The
fitted counts are then factorised as above (the conditionals of the edges along the tree from
the root), which gives a distribution whose marginals are the minimiser's.

Everything here is post-processing of the noisy measurements: it reads no data and spends no
privacy."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from dpkit.noise import RandomSource

__all__ = [
    "SAMPLING",
    "TreeModel",
    "allot",
    "check_sampling",
    "draw",
    "estimate_total",
    "fit_tree",
    "pick",
    "simplex",
    "tree_order",
]

#: How a model's rows are drawn: ``"stratified"`` (:func:`allot`, the default) or ``"iid"``
#: (:func:`draw`).
SAMPLING = ("stratified", "iid")

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]


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


def estimate_total(
    ys: Sequence[FloatArray], sigmas: Sequence[float | FloatArray], floor: float = 1.0
) -> float:
    """The inverse-variance weighted mean of the measurements' totals (the total of a vector
    of cells with noise ``sigma_c`` has variance ``sum_c sigma_c^2``: ``k sigma^2`` for ``k``
    cells of one ``sigma``), at least ``floor``."""
    w = np.array([1.0 / _total_variance(y, s) for y, s in zip(ys, sigmas, strict=True)])
    t = np.array([float(y.sum()) for y in ys])
    return float(max(floor, float(np.sum(w * t) / np.sum(w))))


def _total_variance(y: FloatArray, sigma: float | FloatArray) -> float:
    """The variance of ``y.sum()`` for independent noise of standard deviation ``sigma`` (one
    for all cells, or one per cell)."""
    s = np.broadcast_to(np.asarray(sigma, dtype=np.float64), y.shape)
    return float(np.sum(s * s))


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

    def sample_codes(self, n: int, rng: RandomSource, method: str = "stratified") -> IntArray:
        """``n`` rows of cell codes (shape ``(n, d)``) drawn from the model: the root from its
        marginal, then each column given its parent, ``p(x_c | x_p) = p(x_p, x_c) / p(x_p)``,
        by :func:`pick` (``method``: ``"stratified"`` or ``"iid"``)."""
        d = len(self.sizes)
        out = np.zeros((n, d), dtype=np.int64)
        order = tree_order(d, self.edges)
        where = {(a, b): k for k, (a, b) in enumerate(self.edges)}
        for node, parent in order:
            if parent is None:
                root = self.nodes[node][None, :]
                out[:, node] = pick(root, np.zeros(n, dtype=np.int64), rng, method)
                continue
            k = where.get((parent, node))
            joint = self.pairs[k] if k is not None else self.pairs[where[(node, parent)]].T
            cond = joint / np.maximum(joint.sum(axis=1, keepdims=True), 1e-300)
            empty = joint.sum(axis=1) <= 0.0
            cond[empty] = self.nodes[node]  # a parent value of probability 0 is never drawn
            out[:, node] = pick(cond, out[:, parent], rng, method)
        return out


def check_sampling(method: object) -> str:
    """The sampling ``method``, one of :data:`SAMPLING`."""
    if method not in SAMPLING:
        from dpkit.errors import PrivacyParameterError

        raise PrivacyParameterError(f"method must be one of {SAMPLING}, got {method!r}")
    return str(method)


def pick(probs: FloatArray, rows: IntArray, rng: RandomSource, method: str) -> IntArray:
    """For each ``r`` in ``rows`` a code with the law ``probs[r]`` (each row of ``probs`` a
    distribution): :func:`allot` for ``"stratified"``, :func:`draw` (i.i.d.) for ``"iid"``."""
    if method == "iid":
        return draw(np.cumsum(probs, axis=1), rows, rng)
    return allot(probs, rows, rng)


def allot(probs: FloatArray, rows: IntArray, rng: RandomSource) -> IntArray:
    """Codes for the rows of each group, stratified: of the ``m_g`` rows whose group ``rows``
    is ``g``, exactly ``c_gx`` get code ``x``, the counts ``c_g`` a randomised rounding of
    ``m_g probs[g]`` that keeps their sum ``m_g``, the codes handed to the group's rows in a
    uniformly random order.

    The rounding is systematic sampling on the fractional parts (Madow 1949, "On the theory
    of systematic sampling, II"): ``e_gx = m_g probs[g, x]``, ``c_gx = floor(e_gx)`` plus 1
    when a point ``u_g + j`` (``u_g`` uniform on ``[0, 1)``, ``j = 0 .. r_g - 1``,
    ``r_g = m_g - sum_x floor(e_gx)``) falls in cell ``x``'s stretch of the cumulated
    fractional parts, an event of probability ``e_gx - floor(e_gx)``; so ``E[c_gx] = m_g
    probs[g, x]`` exactly and ``|c_gx - m_g probs[g, x]| < 1``. Each row's code therefore
    has the law ``probs[g]``, as with :func:`draw`, and given the earlier columns the expected
    count of every cell of every marginal is the i.i.d. sampler's, but the table's counts
    vary far less around it: on a tree each edge's sampled 2-way table is within one row per
    cell of the parent's sampled counts times the model's conditional. The random order,
    fresh for every column, is what keeps two columns drawn given the same parent
    conditionally independent; mbi's ``synthetic_data(method="round")`` orders the group's
    rows by their position in the table instead, which ties sibling columns together.
    Post-processing of the fitted model: it reads no data."""
    size = probs.shape[1]
    m = np.bincount(rows, minlength=probs.shape[0]).astype(np.float64)
    p = np.clip(np.asarray(probs, dtype=np.float64), 0.0, None)
    totals = p.sum(axis=1, keepdims=True)
    p = np.where(totals > 0.0, p / np.where(totals > 0.0, totals, 1.0), 1.0 / size)
    expected = m[:, None] * p
    floors = np.floor(expected)
    extra = m - floors.sum(axis=1)  # r_g: whole, 0 <= r_g < size up to rounding
    frac = expected - floors
    fsum = frac.sum(axis=1, keepdims=True)
    # the fractional parts scaled to sum to r_g exactly (a rounding-level change)
    frac = np.where(fsum > 0.0, frac * (extra[:, None] / np.where(fsum > 0.0, fsum, 1.0)), p)
    cum = np.cumsum(frac, axis=1)
    cum[:, -1] = extra
    u = rng.uniform(probs.shape[0])[:, None]
    hits = np.floor(cum - u) - np.floor(np.concatenate([np.zeros_like(u), cum[:, :-1]], 1) - u)
    counts = (floors + np.maximum(hits, 0.0)).astype(np.int64)
    # a guard against floating-point rounding: every group gets exactly its m_g codes
    short = m.astype(np.int64) - counts.sum(axis=1)
    counts[np.arange(counts.shape[0]), np.argmax(counts, axis=1)] += short
    # rows grouped by g, in a uniformly random order inside each group
    order = np.lexsort((rng.uniform(rows.size), rows))
    codes = np.repeat(np.tile(np.arange(size, dtype=np.int64), probs.shape[0]), counts.ravel())
    out = np.empty(rows.size, dtype=np.int64)
    out[order] = codes
    return out


def draw(cdfs: FloatArray, rows: IntArray, rng: RandomSource) -> IntArray:
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
    sigma_nodes: float | Sequence[FloatArray],
    y_pairs: Sequence[FloatArray],
    sigma_pairs: float,
    *,
    iterations: int = 2000,
) -> TreeModel:
    """Fit the tree model to noisy node and edge marginals: the minimiser of the weighted
    squared loss over the scaled marginal polytope (module doc), then its factorisation.

    ``sigma_nodes``: the node measurements' noise, one for all cells or an array per node
    (one per cell: a cell that sums ``m`` noisy counts of ``sigma`` has ``sqrt(m) sigma``), and
    each cell's squared error is weighted by ``1 / sigma_c^2``. ``iterations`` bounds the
    L-BFGS iterations on the dual (it stops earlier once the marginals agree to ``1e-9`` of
    the total)."""
    d = len(sizes)
    order = tree_order(d, edges)
    s_nodes: list[float | FloatArray] = (
        [float(sigma_nodes)] * len(y_nodes)
        if isinstance(sigma_nodes, (int, float))
        else [np.asarray(s, dtype=np.float64) for s in sigma_nodes]
    )
    total = estimate_total([*y_nodes, *y_pairs], [*s_nodes, *[sigma_pairs] * len(y_pairs)])
    nodes, pairs = _tree_qp(sizes, edges, y_nodes, s_nodes, y_pairs, sigma_pairs, total, iterations)
    out_nodes, out_pairs = _factorise(sizes, edges, order, nodes, pairs)
    return TreeModel(
        sizes=tuple(sizes),
        edges=tuple(edges),
        nodes=tuple(out_nodes),
        pairs=tuple(out_pairs),
        total=total,
    )


def _factorise(
    sizes: Sequence[int],
    edges: Sequence[tuple[int, int]],
    order: Sequence[tuple[int, int | None]],
    nodes: Sequence[FloatArray],
    pairs: Sequence[FloatArray],
) -> tuple[list[FloatArray], list[FloatArray]]:
    """The tree distribution ``p(root) prod p(child | parent)`` built from the fitted counts
    (the junction-tree factorisation), and its exact node and edge marginals.

    At the optimum the counts are consistent and this returns them divided by the total; the
    few ``1e-9`` of disagreement the solver leaves are resolved in favour of the edges."""
    where = {(a, b): k for k, (a, b) in enumerate(edges)}
    out_nodes: list[FloatArray] = [np.zeros(s) for s in sizes]
    out_pairs: list[FloatArray] = [np.zeros((sizes[a], sizes[b])) for a, b in edges]
    for node, parent in order:
        if parent is None:
            out_nodes[node] = simplex(nodes[node])
            continue
        k = where.get((parent, node))
        joint = pairs[k] if k is not None else pairs[where[(node, parent)]].T
        rows = joint.sum(axis=1, keepdims=True)
        fallback = simplex(nodes[node])
        cond = np.where(rows > 0.0, joint / np.where(rows > 0.0, rows, 1.0), fallback[None, :])
        pair = out_nodes[parent][:, None] * cond
        out_nodes[node] = pair.sum(axis=0)
        if k is not None:
            out_pairs[k] = pair
        else:
            out_pairs[where[(node, parent)]] = pair.T
    return out_nodes, out_pairs


def simplex(y: FloatArray) -> FloatArray:
    """Counts as probabilities: negatives clipped to 0, uniform if nothing is left."""
    p = np.clip(y, 0.0, None)
    s = float(p.sum())
    out: FloatArray = p / s if s > 0 else np.full(y.size, 1.0 / y.size)
    return out


def _tree_qp(
    sizes: Sequence[int],
    edges: Sequence[tuple[int, int]],
    y_nodes: Sequence[FloatArray],
    sigma_nodes: Sequence[float | FloatArray],
    y_pairs: Sequence[FloatArray],
    sigma_pairs: float,
    total: float,
    iterations: int,
) -> tuple[list[FloatArray], list[FloatArray]]:
    """The counts ``(n_i, P_k)`` minimising the loss over the scaled local polytope, by
    L-BFGS on the Lagrange dual (module doc); returns them before the final factorisation.

    A node cell of weight ``w_c = 1 / sigma_c^2`` has ``n_c = y_c + (sum of its multipliers) /
    w_c`` (the module doc's formula, cell by cell)."""
    ys = [np.asarray(y, dtype=np.float64) for y in y_nodes]
    wns = [
        np.broadcast_to(1.0 / np.asarray(s, dtype=np.float64) ** 2, y.shape)
        for y, s in zip(ys, sigma_nodes, strict=True)
    ]
    we = 1.0 / sigma_pairs**2
    yp = [np.asarray(y, dtype=np.float64) for y in y_pairs]
    # the dual vector: for each edge (a, b) a multiplier per cell of a then of b, then nu
    offsets = []
    at = 0
    for a, b in edges:
        offsets.append((at, at + sizes[a], at + sizes[a] + sizes[b]))
        at += sizes[a] + sizes[b]
    n_dual = at + 1

    def primal(lam: FloatArray) -> tuple[list[FloatArray], list[FloatArray]]:
        into = [np.zeros(s) for s in sizes]
        pairs = []
        for (a, b), (i, j, k), y in zip(edges, offsets, yp, strict=True):
            la, lb = lam[i:j], lam[j:k]
            into[a] += la
            into[b] += lb
            pairs.append(np.maximum(y - (la[:, None] + lb[None, :]) / we, 0.0))
        into[0][:] -= lam[-1]
        nodes = [y + t / wn for y, t, wn in zip(ys, into, wns, strict=True)]
        return nodes, pairs

    def negdual(lam: FloatArray) -> tuple[float, FloatArray]:
        nodes, pairs = primal(lam)
        value = 0.5 * sum(
            float(np.sum(wn * (n - y) ** 2)) for n, y, wn in zip(nodes, ys, wns, strict=True)
        )
        value += 0.5 * we * sum(float(np.sum((p - y) ** 2)) for p, y in zip(pairs, yp, strict=True))
        grad = np.empty(n_dual)
        for (a, b), (i, j, k), p in zip(edges, offsets, pairs, strict=True):
            grad[i:j] = p.sum(axis=1) - nodes[a]
            grad[j:k] = p.sum(axis=0) - nodes[b]
        grad[-1] = nodes[0].sum() - total
        value += float(lam @ grad)
        return -value, -grad

    from scipy.optimize import minimize

    scale = max(total, 1.0)
    res = minimize(
        negdual,
        np.zeros(n_dual),
        jac=True,
        method="L-BFGS-B",
        options={
            "maxiter": iterations,
            "maxcor": 30,
            "ftol": 0.0,
            "gtol": 1e-9 * scale,
            "maxfun": 4 * iterations,
        },
    )
    return primal(np.asarray(res.x, dtype=np.float64))
