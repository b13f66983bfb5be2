"""Derived columns: row-level expressions as group keys and aggregated values.

* Each supported form is computed per row by DuckDB exactly as an independent Python reading
  of the same definition (the group counts of a plan grouped by the expression, each row its
  own unit, so no row is dropped by bounding).
* Special values: NaN, NULL, infinities, 64-bit overflow and text that is no number give NULL
  (or an infinity, clamped later), never an error.
* The builder: public keys from a definition (a CASE's literals, months, the years between a
  date input's bounds), partition selection otherwise; bounds derived from the definition or
  declared; refusals in the analyst's words, before any charge.
"""

from __future__ import annotations

import datetime as dt
import math
import zlib
from collections import Counter
from collections.abc import Callable
from typing import Any

import numpy as np
import pandas as pd
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import dpkit.analytics as dpa
from dpkit.accounting import Budget
from dpkit.analytics._derive import parse_derived, public_values, value_interval
from dpkit.analytics._plan import Aggregate, Bound, Derived, Measure, Plan, Source
from dpkit.analytics.engines.duckdb import DuckDBEngine
from dpkit.errors import DPKitError, PrivacyParameterError
from dpkit.noise import RandomSource

BIG = 2**63 - 1


def _table() -> pd.DataFrame:
    days = [
        dt.date(2019, 12, 31),
        dt.date(2020, 2, 29),
        None,
        dt.date(2024, 7, 15),
        dt.date(2021, 10, 1),
        dt.date(2023, 3, 5),
        dt.date(2022, 12, 31),
        dt.date(2020, 5, 4),
    ]
    return pd.DataFrame(
        {
            "d": pd.Series(days, dtype="date32[pyarrow]"),
            "price": [1.5, math.nan, -0.0, math.inf, 1e308, 2.0, None, -3.25],
            "q": pd.array([2, 3, None, BIG, -BIG, 0, 7, 1], dtype="Int64"),
            "s": [" Ab ", "x", None, "cD", "ab", "  ", "1.5e1", " -12 "],
            "dx": ["flu", "cold", None, "flu", "x", "flu", "cold", "flu"],
        }
    )


def _py(v: Any) -> Any:
    if v is None or v is pd.NA:
        return None
    if isinstance(v, float) and math.isnan(v):
        return None
    return v


def _counts(expression: str, df: pd.DataFrame | None = None) -> Counter[Any]:
    """The per-row values of ``expression`` computed by DuckDB, as a multiset."""
    eng = DuckDBEngine(hash="md5", threads=1)
    eng.register("t", _table() if df is None else df)
    plan = Plan(
        source=Source(kind="table", location="t"),
        filters=(),
        bound=Bound(privacy_unit=None, max_partitions=1, max_rows_per_partition=1, salt=3),
        aggregate=Aggregate(group_by=("k",), measures=(Measure(name="n", kind="rows"),)),
        derived=(Derived(name="k", expression=expression),),
    )
    r = eng.execute(plan)
    return Counter({k[0]: int(n) for k, n in zip(r.keys, r.values["n"], strict=True)})  # type: ignore[call-overload]


def _expected(f: Callable[[dict[str, Any]], Any]) -> Counter[Any]:
    out: Counter[Any] = Counter()
    for row in _table().to_dict("records"):
        out[f({k: _py(v) for k, v in row.items()})] += 1
    return out


def _int(v: int | None) -> int | None:
    """A 64-bit result, NULL on overflow (the TRY semantics)."""
    return v if v is None or -(2**63) <= v < 2**63 else None


def _num(x: Any) -> float | None:
    """A double result: NaN is NULL, -0.0 is 0.0."""
    if x is None or math.isnan(x):
        return None
    return x + 0.0


def _trunc_month(d: dt.date | None) -> dt.date | None:
    return None if d is None else dt.date(d.year, d.month, 1)


def _opt(f: Callable[..., Any], *xs: Any) -> Any:
    return None if any(x is None for x in xs) else f(*xs)


CASES: list[tuple[str, Callable[[dict[str, Any]], Any]]] = [
    ("year(d)", lambda r: _opt(lambda d: d.year, r["d"])),
    ("EXTRACT(month FROM d)", lambda r: _opt(lambda d: d.month, r["d"])),
    ("quarter(d)", lambda r: _opt(lambda d: (d.month - 1) // 3 + 1, r["d"])),
    ("day(d)", lambda r: _opt(lambda d: d.day, r["d"])),
    ("date_trunc('month', d)", lambda r: _trunc_month(r["d"])),
    ("date_trunc('week', d)", lambda r: _opt(lambda d: d - dt.timedelta(days=d.weekday()), r["d"])),
    ("q * 2", lambda r: _opt(lambda q: _int(q * 2), r["q"])),
    ("q + 1", lambda r: _opt(lambda q: _int(q + 1), r["q"])),
    ("-q - 2", lambda r: _opt(lambda q: _int(-q - 2), r["q"])),
    ("abs(q)", lambda r: _opt(abs, r["q"])),
    (
        "coalesce(q * 2, -1)",
        lambda r: -1 if r["q"] is None or _int(r["q"] * 2) is None else r["q"] * 2,
    ),
    (
        "price * q",
        lambda r: _opt(
            lambda p, q: _num(p * float(q)) if not (math.isinf(p) and q == 0) else None,
            r["price"],
            r["q"],
        ),
    ),
    ("price - price", lambda r: _opt(lambda p: _num(p - p), r["price"])),
    ("lower(trim(s))", lambda r: _opt(lambda s: s.strip(" ").lower(), r["s"])),
    ("upper(s)", lambda r: _opt(str.upper, r["s"])),
    ("substring(s, 2, 2)", lambda r: _opt(lambda s: s[1:3], r["s"])),
    ("length(s)", lambda r: _opt(len, r["s"])),
    ("TRY_CAST(s AS DOUBLE)", lambda r: {"1.5e1": 15.0, " -12 ": -12.0}.get(r["s"] or "")),
    ("CAST(s AS BIGINT)", lambda r: {" -12 ": -12}.get(r["s"] or "")),
    ("CAST(q AS VARCHAR)", lambda r: _opt(str, r["q"])),
    (
        "CASE WHEN dx = 'flu' THEN 1 ELSE 0 END",
        lambda r: 1 if r["dx"] == "flu" else 0,
    ),
    (
        "CASE dx WHEN 'flu' THEN 'F' WHEN 'cold' THEN 'C' END",
        lambda r: {"flu": "F", "cold": "C"}.get(r["dx"] or ""),
    ),
    (
        "CASE WHEN price > 1 AND q IS NOT NULL THEN 'big' WHEN price IS NULL THEN 'none' "
        "ELSE 'small' END",
        lambda r: (
            "none"
            if r["price"] is None
            else ("big" if r["price"] > 1 and r["q"] is not None else "small")
        ),
    ),
    ("d >= '2022-01-01'", lambda r: r["d"] is not None and r["d"] >= dt.date(2022, 1, 1)),
    (
        "dx IN ('flu', 'cold') OR s LIKE '%b%'",
        lambda r: r["dx"] in ("flu", "cold") or "b" in (r["s"] or ""),
    ),
]


@pytest.mark.parametrize(("expression", "f"), CASES, ids=[c[0] for c in CASES])
def test_each_form_matches_an_independent_reading(expression: str, f: Any) -> None:
    assert _counts(expression) == _expected(f)


def test_no_value_raises_and_overflow_is_null() -> None:
    """64-bit overflow of q * q (every q but 0, 1, 2, 3, 7), an infinity times zero, text that
    is no number: NULL, no error; a finite double overflow is an infinity."""
    got = _counts("q * q")
    assert got == Counter({4: 1, 9: 1, 0: 1, 49: 1, 1: 1, None: 3})
    assert _counts("price * 10")[math.inf] == 2  # inf * 10 and 1e308 * 10


@pytest.mark.parametrize(
    "expression",
    [
        "price / 2",
        "sum(price)",
        "row_number() OVER ()",
        "random()",
        "(SELECT 1)",
        "s + 1",
        "CAST(price AS BIGINT)",
        "year(s)",
        "hour(d)",
        "date_trunc('decade', d)",
        "substring(s, 0, 2)",
        "substring(s, q, 2)",
        "s LIKE dx",
        "CASE WHEN dx = 1 THEN 1 END",
        "CASE WHEN q THEN 1 END",
    ],
)
def test_unsupported_forms_are_refused_before_running(expression: str) -> None:
    with pytest.raises(DPKitError):
        _counts(expression)


# ------------------------------------------------------------------ definitions


def _types(name: str) -> str | None:
    return {"d": "DATE", "p": "DOUBLE", "n": "BIGINT", "s": "VARCHAR"}.get(name)


@pytest.mark.parametrize(
    ("expression", "bounds", "want"),
    [
        ("CASE WHEN s = 'flu' THEN 1 ELSE 0 END", {}, (0.0, 1.0)),
        ("p * n", {"p": (-2.0, 3.0), "n": (0, 10)}, (-20.0, 30.0)),
        ("p - n + 1", {"p": (0.0, 1.0), "n": (-5, 5)}, (-4.0, 7.0)),
        ("abs(p) * 2", {"p": (-3.0, 1.0)}, (0.0, 6.0)),
        ("month(d)", {}, (1.0, 12.0)),
        ("year(d)", {"d": ("2019-05-01", "2024-02-01")}, (2019.0, 2024.0)),
        ("p * 0.1", {"p": (0.0, 1.0)}, (0.0, 0.1)),
        ("p * n", {"p": (0.0, 1.0)}, None),
        ("length(s)", {}, None),
        ("year(d)", {}, None),
    ],
)
def test_value_interval(expression: str, bounds: Any, want: Any) -> None:
    got = value_interval(parse_derived(expression), _types, bounds)
    if want is None:
        assert got is None
        return
    assert got is not None
    assert got[0] <= want[0] and got[1] >= want[1]  # sound
    assert got[0] == pytest.approx(want[0], abs=1e-15) and got[1] == pytest.approx(want[1])


def test_value_interval_is_sound_on_random_rows() -> None:
    """Every value of ``p * n - p`` over inputs in their bounds lies in the interval."""
    rng = np.random.default_rng(5)
    b = {"p": (-1.7, 2.3), "n": (-3, 8)}
    lo, hi = value_interval(parse_derived("p * n - p"), _types, b) or (0, 0)
    p = rng.uniform(*b["p"], 20_000)
    n = rng.integers(-3, 9, 20_000)
    v = np.concatenate([p * n - p, [b["p"][1] * -3 - b["p"][1], b["p"][0] * 8 - b["p"][0]]])
    assert lo <= v.min() and v.max() <= hi


@pytest.mark.parametrize(
    ("expression", "bounds", "want"),
    [
        ("CASE WHEN s = 'a' THEN 'A' WHEN s = 'b' THEN 'B' END", {}, ("A", "B", None)),
        ("CASE WHEN s = 'a' THEN 1 ELSE 0 END", {}, (1, 0)),
        ("month(d)", {}, tuple(range(1, 13))),
        ("year(d)", {"d": ("2019-05-01", "2021-02-01")}, (2019, 2020, 2021)),
        (
            "date_trunc('quarter', d)",
            {"d": ("2020-02-01", "2020-08-01")},
            (dt.date(2020, 1, 1), dt.date(2020, 4, 1), dt.date(2020, 7, 1)),
        ),
        ("s = 'a'", {}, (False, True)),
        ("year(d)", {}, None),
        ("lower(s)", {}, None),
        ("CASE WHEN s = 'a' THEN s ELSE 'z' END", {}, None),
    ],
)
def test_public_values(expression: str, bounds: Any, want: Any) -> None:
    assert public_values(parse_derived(expression), _types, bounds) == want


# ------------------------------------------------------------------ through the builder


def _visits(n: int = 4000, seed: int = 2) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    start = dt.date(2021, 1, 1)
    return pd.DataFrame(
        {
            "pid": rng.integers(0, 1500, n),
            "day": pd.Series(
                [start + dt.timedelta(days=int(x)) for x in rng.integers(0, 3 * 365, n)],
                dtype="date32[pyarrow]",
            ),
            "dx": rng.choice(["flu", "cold", "asthma"], n),
            "price": rng.uniform(0, 50, n),
            "qty": pd.array(rng.integers(1, 5, n), dtype="Int64"),
        }
    )


def _session(df: pd.DataFrame, delta: float = 0.0) -> Any:
    return dpa.Session(
        df,
        privacy_unit="pid",
        budget=Budget(epsilon=50.0, delta=delta),
        source_of_randomness=RandomSource(seed=4, insecure=True),
    )


def test_derived_keys_come_from_the_definition() -> None:
    df = _visits()
    s = _session(df)
    q = (
        s.query()
        .derive("yr", "year(day)", inputs={"day": ("2021-01-01", "2023-12-31")})
        .derive("flu", "CASE WHEN dx = 'flu' THEN 1 ELSE 0 END")
        .group_by("yr")
        .bound(max_partitions=3, max_rows_per_partition=50)
        .agg(n=dpa.count(), flu=dpa.sum("flu"))
    )
    assert q.keys == ((2021,), (2022,), (2023,))
    out = q.run(epsilon=40.0)  # pure DP: public keys, no partition selection
    years = pd.to_datetime(df["day"].astype(str)).dt.year
    true_n = df.groupby(years).size()
    true_flu = df[df.dx == "flu"].groupby(years).size()
    for row in out.itertuples():
        assert abs(row.n - true_n[row.yr]) < 40
        assert abs(row.flu - true_flu[row.yr]) < 40
    assert s.budget.spent.epsilon == pytest.approx(40.0)


def test_derived_key_without_listed_values_uses_partition_selection() -> None:
    s = _session(_visits(), delta=1e-6)
    q = (
        s.query()
        .derive("code", "upper(substring(dx, 1, 3))")
        .group_by("code")
        .bound(max_partitions=1, max_rows_per_partition=5)
        .agg(n=dpa.count())
    )
    assert q.keys is None
    out = q.run(epsilon=10.0, delta=1e-7)
    assert set(out["code"]) == {"FLU", "COL", "AST"}


def test_derived_values_are_bounded_by_their_definition() -> None:
    df = _visits()
    s = _session(df)
    q = (
        s.query()
        .derive("rev", "price * qty", inputs={"price": (0, 50), "qty": (0, 4)})
        .bound(max_partitions=1, max_rows_per_partition=5)
        .agg(rev=dpa.mean("rev"), flu=dpa.sum("rev", bounds=(0, 100)))
    )
    stats = dict(q.stats)
    assert stats["rev"].bounds == (0.0, 200.0)
    assert stats["flu"].bounds == (0.0, 100.0)
    out = q.run(epsilon=40.0)
    assert abs(out["rev"][0] - float((df.price * df.qty.astype(float)).mean())) < 5


def test_refusals_name_the_analysts_column_and_charge_nothing() -> None:
    s = _session(_visits())
    base = s.query().bound(max_partitions=1, max_rows_per_partition=1)
    with pytest.raises(PrivacyParameterError) as e:
        base.derive("rev", "price * qty").agg(x=dpa.sum("rev"))
    assert "'rev'" in str(e.value) and "price * qty" in str(e.value)
    assert "__dpk" not in str(e.value) and "bucket_" not in str(e.value)
    with pytest.raises(PrivacyParameterError, match="not a number"):
        base.derive("c", "lower(dx)").agg(x=dpa.mean("c"))
    with pytest.raises(PrivacyParameterError, match="privacy unit"):
        base.derive("p2", "pid * 2")
    with pytest.raises(DPKitError, match="division"):
        base.derive("half", "price / 2")
    with pytest.raises(PrivacyParameterError, match="does not read"):
        base.derive("r", "price * 2", inputs={"qty": (0, 1)})
    assert s.budget.spent.epsilon == 0


def test_a_derived_date_takes_date_bounds_like_a_date_column() -> None:
    s = _session(_visits())
    q = (
        s.query()
        .derive("month", "date_trunc('month', day)")
        .bound(max_partitions=1, max_rows_per_partition=3)
        .agg(m=dpa.quantile("month", 0.5, bounds=("2021-01-01", "2023-12-31")))
    )
    got = q.run(epsilon=20.0)["m_p50"][0]
    assert isinstance(got, dt.date)
    assert dt.date(2022, 3, 1) <= got <= dt.date(2022, 10, 31)  # the middle month: mid-2022
    with pytest.raises(PrivacyParameterError, match="dates"):
        s.query().derive("m2", "date_trunc('month', day)").bound(
            max_partitions=1, max_rows_per_partition=1
        ).agg(x=dpa.quantile("m2", 0.5, bounds=(0, 10))).run(epsilon=1.0)


_TOKENS = [
    "year(",
    "month(",
    "EXTRACT(",
    "YEAR FROM",
    "date_trunc(",
    "'month'",
    "'x'",
    "substring(",
    "lower(",
    "trim(",
    "CAST(",
    "TRY_CAST(",
    "AS",
    "DOUBLE",
    "BIGINT",
    "DATE",
    "VARCHAR",
    "CASE",
    "WHEN",
    "THEN",
    "ELSE",
    "END",
    "IN",
    "(",
    ")",
    ",",
    "+",
    "-",
    "*",
    "/",
    "=",
    "<",
    "AND",
    "NOT",
    "IS",
    "NULL",
    "LIKE",
    "'%a'",
    "1",
    "0",
    "-5",
    "1e400",
    "2.5",
    "9223372036854775808",
    "day",
    "price",
    "qty",
    "dx",
    "pid",
    "coalesce(",
    "abs(",
    "length(",
    "hour(",
    "''",
    "TRUE",
    "::",
]


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.sampled_from(_TOKENS), min_size=1, max_size=9))
def test_token_soup_only_ever_raises_dpkit_errors(tokens: list[str]) -> None:
    """Any text either defines a derived column whose statement compiles, or is refused with
    a dpkit error; nothing else escapes (the check runs on the schema, before any charge)."""
    s = _SOUP_SESSION
    try:
        q = (
            s.query()
            .derive("v", " ".join(tokens))
            .group_by("v")
            .bound(max_partitions=1, max_rows_per_partition=1)
            .agg(n=dpa.count())
        )
        s.validate(q.prepare(epsilon=1.0, delta=1e-7))
    except DPKitError:
        return


_SOUP_SESSION = _session(_visits(60), delta=1e-6)


def test_nanosecond_timestamp_keys_run_without_engine_error() -> None:
    """A pandas ``datetime64[ns]`` column is DuckDB ``TIMESTAMP_NS``: its derived keys run
    (the Python-range guard once raised for every such column, after the charge)."""
    ts = [dt.datetime(2021, 1, 1, 5) + dt.timedelta(days=i % 300) for i in range(400)]
    s = _session(pd.DataFrame({"pid": range(len(ts)), "t": ts}))
    q = (
        s.query()
        .derive("yr", "year(t)", inputs={"t": ("2021-01-01", "2021-12-31")})
        .group_by("yr")
        .bound(max_partitions=1, max_rows_per_partition=1)
        .agg(n=dpa.count())
    )
    out = q.run(epsilon=40.0)
    assert list(out["yr"]) == [2021]
    assert abs(out["n"][0] - 400) < 40


def test_a_negative_zero_literal_key_is_listed_as_zero() -> None:
    """The engine turns a -0.0 result into 0.0, so the listed key is 0.0, never -0.0."""
    (key,) = public_values(
        parse_derived("CASE WHEN price > 1 THEN -0.0 ELSE 0.0 END"),
        {"price": "DOUBLE"}.get,
        {},
    )
    assert key == 0.0 and math.copysign(1.0, key) == 1.0  # type: ignore[arg-type]


# ------------------------------------------------------------------ interval soundness, at random


def _expressions() -> st.SearchStrategy[tuple[str, Callable[[Any, Any], Any]]]:
    """Random arithmetic over ``p`` (DOUBLE) and ``n`` (BIGINT): the SQL text and a reference
    evaluator with SQL's NULL rules (NULL in, NULL out; ``coalesce`` takes its first non-NULL)."""
    leaves = st.sampled_from(
        [
            ("p", lambda p, n: p),
            ("n", lambda p, n: n),
            ("2", lambda p, n: 2.0),
            ("-3", lambda p, n: -3.0),
            ("0.5", lambda p, n: 0.5),
        ]
    )

    def grow(
        children: st.SearchStrategy[tuple[str, Callable[[Any, Any], Any]]],
    ) -> st.SearchStrategy[tuple[str, Callable[[Any, Any], Any]]]:
        def binary(op: str) -> Any:
            def make(a: Any, b: Any) -> Any:
                fa, fb = a[1], b[1]

                def ev(p: Any, n: Any) -> Any:
                    x, y = fa(p, n), fb(p, n)
                    if x is None or y is None:
                        return None
                    return {"+": x + y, "-": x - y, "*": x * y}[op]

                return (f"({a[0]} {op} {b[0]})", ev)

            return st.builds(make, children, children)

        def unary_abs(a: Any) -> Any:
            f = a[1]
            return (f"abs({a[0]})", lambda p, n: None if f(p, n) is None else abs(f(p, n)))

        def coalesce(a: Any, b: Any) -> Any:
            fa, fb = a[1], b[1]
            return (
                f"coalesce({a[0]}, {b[0]})",
                lambda p, n: fa(p, n) if fa(p, n) is not None else fb(p, n),
            )

        return st.one_of(
            binary("+"),
            binary("-"),
            binary("*"),
            st.builds(unary_abs, children),
            st.builds(coalesce, children, children),
        )

    return st.recursive(leaves, grow, max_leaves=6)


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    expr=_expressions(),
    p_bounds=st.tuples(st.integers(-20, 20), st.integers(0, 30)),
    n_bounds=st.tuples(st.integers(-20, 20), st.integers(0, 30)),
)
def test_derived_interval_holds_every_value_of_random_arithmetic(
    expr: tuple[str, Callable[[Any, Any], Any]],
    p_bounds: tuple[int, int],
    n_bounds: tuple[int, int],
) -> None:
    """Soundness of the interval arithmetic on random expressions of + - * abs coalesce: every
    value at the corners, at zero and at random points of the inputs' bounds (and with either
    input NULL) lies in the derived interval."""
    text, ev = expr
    bounds = {
        "p": (p_bounds[0] / 4, (p_bounds[0] + p_bounds[1]) / 4),
        "n": (n_bounds[0], n_bounds[0] + n_bounds[1]),
    }
    got = value_interval(parse_derived(text), _types, bounds)
    if got is None:  # a constant-only or unbounded form: nothing to check
        return
    assert _outside(got, ev, bounds, seed=zlib.crc32(text.encode())) == [], (text, got)


def _outside(
    interval: tuple[float, float],
    ev: Callable[[Any, Any], Any],
    bounds: dict[str, tuple[float, float]],
    seed: int,
) -> list[tuple[Any, Any, float]]:
    """The (p, n, value) whose non-NULL value falls outside ``interval``: at the corners, at
    zero and at random points of the bounds, and with either input NULL."""
    lo, hi = interval
    rng = np.random.default_rng(seed)
    ps = [*bounds["p"], *rng.uniform(*bounds["p"], 12), None]
    ns = [*bounds["n"], *rng.integers(int(bounds["n"][0]), int(bounds["n"][1]) + 1, 12), None]
    ps += [0.0] if bounds["p"][0] <= 0.0 <= bounds["p"][1] else []
    ns += [0] if bounds["n"][0] <= 0 <= bounds["n"][1] else []
    out = []
    for p in ps:
        for n in ns:
            v = ev(p, None if n is None else float(n))
            slack_lo, slack_hi = 1e-9 * max(1.0, abs(lo)), 1e-9 * max(1.0, abs(hi))
            if v is not None and not lo - slack_lo <= v <= hi + slack_hi:
                out.append((p, n, v))
    return out


def test_interval_check_catches_a_wrong_subtraction_rule() -> None:
    """Companion: ``[a, b] - [c, d]`` taken as ``[a - c, b - d]`` (a classic slip) is caught by
    the same check on ``p - n``."""
    bounds = {"p": (-1.0, 2.0), "n": (-3.0, 4.0)}
    right = value_interval(parse_derived("p - n"), _types, bounds)
    assert right == (-5.0, 5.0)
    wrong = (-1.0 - -3.0, 2.0 - 4.0)  # (2, -2): empty, every value is outside
    ev = lambda p, n: None if p is None or n is None else p - n  # noqa: E731
    assert _outside(right, ev, bounds, seed=1) == []
    assert len(_outside(wrong, ev, bounds, seed=1)) > 0
