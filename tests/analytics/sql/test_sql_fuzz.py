"""Parser robustness: garbage and near-miss SQL never raise anything but a dpkit error, and a
refused query never spends (hypothesis)."""

from __future__ import annotations

from typing import Any

import yaml
from _sql_corpus import CORPUS, METADATA_YAML, people, public_tables
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import dpkit.analytics as dpa
from dpkit.accounting import Budget
from dpkit.errors import DPKitError

META = yaml.safe_load(METADATA_YAML)
DATA = people(n_units=30)
PUBLIC = public_tables()
SETTINGS = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])

TOKENS = [
    "SELECT",
    "FROM",
    "WHERE",
    "GROUP BY",
    "HAVING",
    "ORDER BY",
    "LIMIT",
    "OFFSET",
    "JOIN",
    "LEFT JOIN",
    "RIGHT JOIN",
    "CROSS JOIN",
    "ON",
    "AS",
    "AND",
    "OR",
    "NOT",
    "IN",
    "IS",
    "NULL",
    "CASE",
    "WHEN",
    "THEN",
    "ELSE",
    "END",
    "OVER",
    "PARTITION BY",
    "DISTINCT",
    "UNION",
    "WITH",
    "WITHIN GROUP",
    "FILTER",
    "people",
    "regions",
    "orders",
    "p",
    "r",
    "t",
    "user_id",
    "region",
    "income",
    "age",
    "score",
    "visits",
    "plan",
    "rid",
    "id",
    "country",
    "population",
    "COUNT(*)",
    "COUNT",
    "SUM",
    "AVG",
    "MEDIAN",
    "STDDEV",
    "VARIANCE",
    "PERCENTILE_CONT",
    "QUANTILE_CONT",
    "MAX",
    "MIN",
    "ROW_NUMBER()",
    "lower",
    "my_udf",
    "read_parquet",
    "(",
    ")",
    ",",
    ".",
    "*",
    "/",
    "+",
    "-",
    "=",
    "<",
    ">=",
    "<>",
    "'north'",
    "'x''y'",
    "0",
    "1",
    "0.5",
    "1e308",
    "-1",
    "[0.25, 0.75]",
    ";",
    "--",
    "/*",
    "*/",
    '"',
    "'",
    "\\",
    "\u00e9",
    "\x00",
    "DESC",
    "ASC",
    "NULLS FIRST",
    "1/0",
    "CAST(age AS INT)",
    "TRY_CAST(",
    "?",
    "$1",
    ":x",
]


def _session(delta: bool) -> Any:
    budget = Budget(epsilon=5.0, delta=1e-3, method="basic") if delta else Budget(epsilon=5.0)
    return dpa.Session(DATA, privacy_unit="user_id", budget=budget)


SESSIONS = {False: _session(False), True: _session(True)}


def _check(text: str, delta: bool) -> None:
    s = SESSIONS[delta]
    before = s.budget.spent_epsilon_exact
    try:
        s.sql(
            text, epsilon=0.01, delta=1e-7 if delta else None, metadata=META, public_tables=PUBLIC
        )
    except DPKitError:
        assert s.budget.spent_epsilon_exact == before  # refused: nothing spent
    else:
        assert s.budget.spent_epsilon_exact > before  # answered: it was charged


@SETTINGS
@given(st.text(max_size=200), st.booleans())
def test_random_text_only_raises_dpkit_errors(text: str, delta: bool) -> None:
    _check(text, delta)


@SETTINGS
@given(st.lists(st.sampled_from(TOKENS), min_size=1, max_size=25), st.booleans())
def test_token_soup_only_raises_dpkit_errors(tokens: list[str], delta: bool) -> None:
    _check(" ".join(tokens), delta)


@SETTINGS
@given(st.sampled_from(sorted(CORPUS)), st.data(), st.booleans())
def test_near_miss_corpus_queries_only_raise_dpkit_errors(
    name: str, data: Any, delta: bool
) -> None:
    """A corpus query with a few tokens deleted, replaced or inserted."""
    words = CORPUS[name].sql.split()
    for _ in range(data.draw(st.integers(1, 3))):
        i = data.draw(st.integers(0, len(words)))
        op = data.draw(st.sampled_from(["delete", "replace", "insert"]))
        tok = data.draw(st.sampled_from(TOKENS))
        if op == "delete" and i < len(words):
            del words[i]
        elif op == "replace" and i < len(words):
            words[i] = tok
        else:
            words.insert(i, tok)
    _check(" ".join(words), delta)
