"""Exact marginals of a session's table, measured by its engine under one contribution bound.

One statement (:func:`dpkit.analytics.marginals.marginal_counts`) counts every 2-way marginal
(and so every 1-way marginal) of the modelled columns in the session's engine: every privacy
unit keeps at most ``max_rows`` of its rows (chosen by the plan's secret salted hash of the
unit's own rows, never by file order), and every marginal counts those same kept rows, so the
marginals are consistent with one another and with one bounded table. A row's cell is computed
by integer arithmetic on each column's category or bin index. Only the cell counts (exact
integers, ``sum over pairs |A| |B|`` of them) leave the engine.

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

from dpkit.analytics.marginals import BinPart, CategoryPart, MarginalCounts, marginal_counts
from dpkit.synth._domain import Categorical, ColumnDomain, Date

__all__ = [
    "clique_statement",
    "marginal_statement",
    "pairs_of",
    "read_cliques",
    "read_marginals",
]

IntArray = npt.NDArray[np.int64]


def pairs_of(columns: list[str]) -> list[tuple[int, int]]:
    """Every pair ``(i, j)``, ``i < j``, of column indices, in a fixed order."""
    return list(itertools.combinations(range(len(columns)), 2))


def _part(column: str, dom: ColumnDomain) -> CategoryPart | BinPart:
    if isinstance(dom, Categorical):
        return CategoryPart(column, dom.values)
    if isinstance(dom, Date):
        return BinPart(column, dom.edges, dom.time_kind or "")
    return BinPart(column, dom.edges)


def marginal_statement(
    session: Any, domains: Mapping[str, ColumnDomain], max_rows: int
) -> MarginalCounts:
    """The checked statement counting every 2-way marginal of ``domains`` (reads no row).

    Pair ``(A, B)``'s cell ``a * |B| + b`` counts the kept rows with code ``a`` in ``A`` and
    ``b`` in ``B`` (the codes of :mod:`dpkit.synth._domain`, the missing cell last)."""
    cols = list(domains)
    parts = [_part(c, domains[c]) for c in cols]
    return marginal_counts(
        session, [(parts[i], parts[j]) for i, j in pairs_of(cols)], max_rows=max_rows
    )


def read_marginals(
    counts: list[tuple[int, ...]], domains: Mapping[str, ColumnDomain]
) -> dict[tuple[int, int], IntArray]:
    """``{(i, j): counts}`` with ``counts`` of shape ``(|A|, |B|)``."""
    cols = list(domains)
    sizes = [domains[c].size for c in cols]
    return {
        (i, j): np.asarray(flat, dtype=np.int64).reshape(sizes[i], sizes[j])
        for (i, j), flat in zip(pairs_of(cols), counts, strict=True)
    }


def clique_statement(
    session: Any,
    domains: Mapping[str, ColumnDomain],
    cliques: list[tuple[int, ...]],
    max_rows: int,
) -> MarginalCounts:
    """The checked statement counting the marginal of every clique (sorted column indices) of
    ``domains``, like :func:`marginal_statement` for marginals of any width (reads no row)."""
    cols = list(domains)
    parts = [_part(c, domains[c]) for c in cols]
    return marginal_counts(session, [[parts[i] for i in c] for c in cliques], max_rows=max_rows)


def read_cliques(
    counts: list[tuple[int, ...]],
    domains: Mapping[str, ColumnDomain],
    cliques: list[tuple[int, ...]],
) -> dict[tuple[int, ...], IntArray]:
    """``{clique: counts}`` with ``counts`` shaped by the clique's column sizes."""
    sizes = [d.size for d in domains.values()]
    return {
        c: np.asarray(flat, dtype=np.int64).reshape([sizes[i] for i in c])
        for c, flat in zip(cliques, counts, strict=True)
    }
