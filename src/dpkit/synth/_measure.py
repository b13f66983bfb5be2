"""Exact marginals of a session's table, measured by its engine under one contribution bound.

One statement computes every 2-way marginal (and so every 1-way marginal) of the modelled
columns: each pair of columns gets a derived cell column (a bucket of public SQL conditions,
see :mod:`dpkit.synth._domain`) and a histogram over its cells, all in the global group. The
engine bounds each person's contribution once for the whole statement: every privacy unit
keeps at most ``max_rows`` of its rows (chosen by the plan's secret salted hash of the unit's
own rows, never by file order), and every marginal counts those same kept rows, so the
marginals are consistent with one another and with one bounded table. Only the cell counts
(exact integers, ``sum over pairs |A| |B|`` of them) leave the engine.

Sensitivity. Adding or removing one person adds or removes at most ``max_rows`` kept rows,
each in one cell of each marginal, so every marginal vector changes by at most ``max_rows`` in
L1 and in L2 norm (the L2 worst case puts all of them in one cell). With
``privacy_unit=None`` each row is its own unit and the bound is one row.
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping
from typing import Any

import numpy as np
import numpy.typing as npt

from dpkit.analytics import histogram
from dpkit.synth._domain import ColumnDomain

__all__ = ["marginal_query", "pairs_of", "read_marginals"]

IntArray = npt.NDArray[np.int64]


def pairs_of(columns: list[str]) -> list[tuple[int, int]]:
    """Every pair ``(i, j)``, ``i < j``, of column indices, in a fixed order."""
    return list(itertools.combinations(range(len(columns)), 2))


def _bucket_name(i: int, j: int) -> str:
    return f"__dpkit_synth_{i}_{j}"


def marginal_query(session: Any, domains: Mapping[str, ColumnDomain], max_rows: int) -> Any:
    """The prepared query whose exact result holds every 2-way marginal of ``domains``.

    Pair ``(A, B)``'s cell ``a * |B| + b`` counts the kept rows with code ``a`` in ``A`` and
    ``b`` in ``B``; its bucket's cases are the products of the two columns' conditions, and
    its default is the last cell (one of the two is missing). Prepared with a fresh secret salt
    (the pricing of the prepared query is not used: the caller charges its own event)."""
    cols = list(domains)
    doms = [domains[c] for c in cols]
    q = session.query()
    aggs = {}
    for i, j in pairs_of(cols):
        a, b = doms[i], doms[j]
        ca, cb = a.cases(cols[i]), b.cases(cols[j])
        nb = b.size
        cases: list[tuple[str, int]] = []
        for pa, ia in ca:
            for pb, ib in cb:
                cases.append((f"({pa}) AND ({pb})", ia * nb + ib))
            cases.append((f"({pa})", ia * nb + nb - 1))  # B missing
        for pb, ib in cb:
            cases.append((f"({pb})", (a.size - 1) * nb + ib))  # A missing
        name = _bucket_name(i, j)
        q = q.bucket(name, cases, default=a.size * nb - 1)
        # Integer cells counted as bins of width 1 around each integer: the engine finds a
        # row's bin by arithmetic (uniform edges), not by one comparison per cell.
        aggs[name] = histogram(name, edges=[k - 0.5 for k in range(a.size * nb + 1)])
    q = q.bound(max_partitions=1, max_rows_per_partition=max_rows).agg(**aggs)
    # The query's own pricing is never charged; any valid (epsilon, delta) builds its plan.
    delta = 1e-9 if session.mode != "pure" else None
    return q.prepare(epsilon=1.0, delta=delta)


def read_marginals(
    result: Any, domains: Mapping[str, ColumnDomain]
) -> dict[tuple[int, int], IntArray]:
    """``{(i, j): counts}`` with ``counts`` of shape ``(|A|, |B|)`` from the engine's result
    (zeros when the bounded table has no row)."""
    cols = list(domains)
    sizes = [domains[c].size for c in cols]
    out: dict[tuple[int, int], IntArray] = {}
    for i, j in pairs_of(cols):
        name = _bucket_name(i, j)
        cells = sizes[i] * sizes[j]
        found = [v for k, v in result.values.items() if k == name or k.startswith(name + ":")]
        if len(result.keys) and found:
            flat = np.asarray([int(x) for x in found[0][0]], dtype=np.int64)
        else:
            flat = np.zeros(cells, dtype=np.int64)
        out[(i, j)] = flat.reshape(sizes[i], sizes[j])
    return out
