"""The analyst corpus: every query is answered with intervals or refused with a precise reason.

Answered queries charge exactly the epsilon (and delta) asked for and release one row per
public key (or per selected group); refused ones raise :class:`SqlError` naming the clause and
the reason, and leave the budget untouched (checked on the budget's exact spent epsilon).
"""

from __future__ import annotations

from fractions import Fraction
from typing import Any

import pytest
import yaml
from _sql_corpus import (
    CORPUS,
    METADATA_YAML,
    Answer,
    answered,
    people,
    public_tables,
    refused,
)

import dpkit.analytics as dpa
from dpkit.accounting import Budget
from dpkit.analytics.sqlquery import SqlError
from dpkit.errors import DPKitError

META = yaml.safe_load(METADATA_YAML)
PUBLIC = public_tables()
DATA = people()


def _session(delta: bool) -> Any:
    budget = Budget(epsilon=100.0, delta=1e-2, method="basic") if delta else Budget(epsilon=100.0)
    return dpa.Session(DATA, privacy_unit="user_id", budget=budget)


def test_the_corpus_is_large_and_mixed() -> None:
    assert len(CORPUS) >= 40
    assert len(answered()) >= 25
    assert len(refused()) >= 15


@pytest.mark.parametrize("name", sorted(answered()))
def test_answered_query_releases_with_intervals_and_spends_what_it_asked(name: str) -> None:
    entry = answered()[name]
    s = _session(entry.delta)
    delta = 1e-5 if entry.delta else None
    frame = s.sql(entry.sql, epsilon=0.5, delta=delta, metadata=META, public_tables=PUBLIC)
    info = frame.attrs["dpkit"]
    assert info["requested"]["epsilon"] == 0.5
    # what attrs report as charged is what the budget spent
    assert (info["epsilon"], info["delta"]) == s.budget.spent
    # shares are rounded down: the charge is at most what was asked, and close to it
    assert (
        Fraction(1, 2) * (1 - Fraction(1, 10**9)) <= s.budget.spent_epsilon_exact <= Fraction(1, 2)
    )
    if entry.delta:
        assert 0 < s.budget.spent[1] <= 1e-5
    sq = s.sql_query(entry.sql, metadata=META, public_tables=PUBLIC)
    stats = [o for o in sq.translation.outputs if o.kind == "stat"]
    for o in stats:
        st = dict(sq.query.stats)[o.source]
        if st.kind == "quantile":
            assert any(c == o.name or c.startswith(o.name + "_p") for c in frame.columns)
        else:  # every other released value carries its interval, which contains it
            assert {o.name, f"{o.name}_low", f"{o.name}_high"} <= set(frame.columns)
            assert (frame[f"{o.name}_low"] <= frame[f"{o.name}_high"]).all()
    if sq.translation.limit is not None:
        assert len(frame) <= sq.translation.limit


@pytest.mark.parametrize("name", sorted(refused()))
def test_refused_query_names_the_clause_and_the_reason_and_spends_nothing(name: str) -> None:
    entry = refused()[name]
    for delta in (False, True):
        s = _session(delta)
        with pytest.raises(SqlError) as info:
            s.sql(
                entry.sql,
                epsilon=1.0,
                delta=1e-5 if delta else None,
                metadata=META,
                public_tables=PUBLIC,
            )
        assert info.value.clause == entry.clause, str(info.value)
        assert entry.reason in info.value.reason, str(info.value)
        assert "nothing was spent" in str(info.value)
        assert s.budget.spent_epsilon_exact == 0
        assert s.budget.spent == (0.0, 0.0)


def test_a_refusal_after_translation_still_spends_nothing() -> None:
    """Partition selection asked of a pure budget fails in pricing, before the charge."""
    s = _session(False)
    with pytest.raises(DPKitError, match="delta"):
        s.sql(
            "SELECT device, COUNT(*) AS n FROM people GROUP BY device", epsilon=1.0, metadata=META
        )
    assert s.budget.spent_epsilon_exact == 0


def test_answers_follow_having_order_and_limit_on_released_rows() -> None:
    s = _session(False)
    frame = s.sql(CORPUS["top_regions"].sql, epsilon=50.0, metadata=META)
    assert len(frame) <= 2
    assert list(frame["n"]) == sorted(frame["n"], reverse=True)
    assert (frame["n"] > 5).all()
    paged = s.sql(CORPUS["income_total_paged"].sql, epsilon=1.0, metadata=META)
    assert len(paged) == 3  # 4 public regions, OFFSET 1
    assert list(paged["total"]) == sorted(paged["total"], reverse=True)


def test_corpus_answers_are_the_entries_marked_answered() -> None:
    for name, entry in CORPUS.items():
        assert isinstance(entry, Answer) == (name in answered())
