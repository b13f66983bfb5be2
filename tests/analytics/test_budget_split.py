"""A query's budget split over its statistics' measures (``pool_split``) and the counts and
sums released from a mean's own noisy count and centred sum (``_pools``)."""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import dpkit.analytics as dpa
from dpkit.accounting import Budget
from dpkit.analytics._plan import EngineResult
from dpkit.analytics._pricing import MEAN_SPREAD, _price_stat_at, pool_split, price
from dpkit.analytics._release import assemble
from dpkit.noise import RandomSource


def _price(stats: dict[str, dpa.Statistic], mode: str = "pure", eps: float = 1.0) -> object:
    return price(
        stats,
        mode=mode,  # type: ignore[arg-type]
        epsilon=eps,
        delta=0.0 if mode == "pure" else 1e-6,
        max_partitions=1,
        max_rows_per_partition=1,
        select_partitions=False,
    )


def _objective(
    pure: bool, lo: float, hi: float, w: tuple[float, float, float], f_t: float
) -> float:
    """The stated objective, written out independently of the module: weighted relative
    variances of mean (by h), sum (by n M) and count (by n) at r^2 = h^2 / 3."""
    w_m, w_s, w_c = w
    total = w_m + w_s + w_c

    def g(e: float) -> float:
        return 2.0 / e**2 if pure else 0.5 / e

    gt, gn = g(total * f_t), g(total * (1.0 - f_t))
    h, c = (hi - lo) / 2.0, (hi + lo) / 2.0
    big = max(abs(lo), abs(hi))
    mean = (h * h * gt + (h * h / 3.0) * gn) / (h * h)
    sm = (h * h * gt + c * c * gn) / (big * big)
    return w_m * mean + w_s * sm + w_c * gn


@settings(max_examples=200, deadline=None)
@given(
    pure=st.booleans(),
    lo=st.floats(-1e6, 1e6),
    width=st.floats(1e-3, 1e6),
    w=st.tuples(st.floats(0.05, 20), st.floats(0, 20), st.floats(0, 20)),
)
def test_split_minimises_the_stated_objective(
    pure: bool, lo: float, width: float, w: tuple[float, float, float]
) -> None:
    hi = lo + width
    f_n, f_t = pool_split(pure, "mean", lo, hi, *w)
    assert f_n + f_t == 1 and f_n > 0 and f_t > 0  # exact: the parts add up to the share
    best = _objective(pure, lo, hi, w, float(f_t))
    # no better split on a fine grid (the objective is convex in f_t), nor the equal one
    for f in [*np.linspace(0.01, 0.99, 99), 0.5]:
        assert best <= _objective(pure, lo, hi, w, float(f)) * (1 + 1e-9)


def test_mean_alone_split_closed_form() -> None:
    # a_T = 1, a_N = 1/3: e_T / e_N = 3^(1/3) (Laplace), rho_T / rho_N = 3^(1/2) (Gaussian)
    for pure, ratio in ((True, 3 ** (1 / 3)), (False, 3**0.5)):
        f_n, f_t = pool_split(pure, "mean", 0.0, 10.0, 1.0)
        assert float(f_t / f_n) == pytest.approx(ratio, rel=1e-9)


def test_variance_alone_split_closed_form() -> None:
    """a_N = kappa^2 + 11/45, a_T = 4/3, a_Q = (1 - kappa)^2 (the sum of squares centred at
    kappa h^2: 1/5 with Laplace, 1/2 with Gaussian noise): shares proportional to a^(1/3)
    (Laplace) or a^(1/2) (Gaussian), written out here from the constants, not read from the
    module."""
    for pure, power, kappa in ((True, 1.0 / 3.0, 0.2), (False, 0.5, 0.5)):
        a = (kappa**2 + 11.0 / 45.0, 4.0 / 3.0, (1.0 - kappa) ** 2)
        fr = pool_split(pure, "variance", 0.0, 10.0, 1.0)
        assert sum(fr) == 1 and all(isinstance(f, Fraction) and f > 0 for f in fr)
        want = [x**power / sum(y**power for y in a) for x in a]
        assert [float(f) for f in fr] == pytest.approx(want, rel=1e-9)
        assert pool_split(pure, "std", 0.0, 10.0, 1.0) == fr  # the same noisy parts


@pytest.mark.parametrize("mode", ["pure", "zcdp"])
def test_split_spends_the_same_total_as_equal_parts(mode: str) -> None:
    """The split changes how the share is divided, never its total: the query is charged
    what the equal split charged (both within a relative 1e-6 of the whole epsilon or rho,
    never above)."""
    stats = {"m": dpa.mean("x", bounds=(0.0, 500_000.0))}
    pr = _price(stats, mode)
    got = pr.charged()  # type: ignore[attr-defined]
    key = "epsilon" if mode == "pure" else "rho"
    whole = 1.0 if mode == "pure" else pr.rho  # type: ignore[attr-defined]
    assert whole * (1 - 1e-6) <= got[key] <= whole
    f_n, f_t = pool_split(mode == "pure", "mean", 0.0, 500_000.0, 1.0)
    assert f_n != f_t  # the split is not the equal one


@pytest.mark.parametrize("mode", ["pure", "zcdp"])
def test_mean_error_at_the_reference_point_falls(mode: str) -> None:
    """The mean's leading-order noise variance ``Var(Z_T) + r^2 Var(Z_N)`` (``r^2 = h^2 / 3``),
    from the noises actually priced, is below the equal split's (which is computed here by
    hand from the same share)."""
    pr = _price({"m": dpa.mean("x", bounds=(0.0, 100.0))}, mode)
    mn, ms = pr.stats[0].measures  # type: ignore[attr-defined]
    h = (ms.measure.upper - ms.measure.lower) / 2.0
    new = (mn.noise.std * 1.0) ** 2 * MEAN_SPREAD * h * h + (ms.noise.std * ms.step) ** 2
    # equal parts: N's and T's shares both half the total; each variance scales as
    # 1/share^2 (Laplace) or 1/share (Gaussian)
    f_n, f_t = pool_split(mode == "pure", "mean", 0.0, 100.0, 1.0)
    p = 2 if mode == "pure" else 1
    vn = mn.noise.std**2 * float(f_n * 2) ** p
    vt = (ms.noise.std * ms.step) ** 2 * float(f_t * 2) ** p
    old = vn * MEAN_SPREAD * h * h + vt
    assert new < 0.95 * old, (new, old)


def test_count_of_the_column_is_the_means_count() -> None:
    stats = {
        "n": dpa.count("x"),
        "s": dpa.sum("x", bounds=(0.0, 100.0)),
        "m": dpa.mean("x", bounds=(0.0, 100.0)),
    }
    pr = _price(stats)
    sp = {s.name: s for s in pr.stats}  # type: ignore[attr-defined]
    assert sp["n"].shared_with == "m" and sp["s"].shared_with == "m"
    assert [m.kind for m in pr.measures] == ["values", "sum"]  # type: ignore[attr-defined]
    assert pr.charged()["epsilon"] <= 1.0  # type: ignore[attr-defined]
    # the pool has all three weights: N gets more than a third of the budget
    assert (
        sp["m"].measures[0].noise.scale
        < _price({"n": dpa.count("x")}, eps=1 / 3).stats[0].measures[0].noise.scale
    )  # type: ignore[attr-defined]
    # rows and another column's values are not the mean's N
    for other in (dpa.count(), dpa.count("y")):
        pr2 = _price({"n": other, "m": dpa.mean("x", bounds=(0.0, 100.0))})
        assert all(s.shared_with is None for s in pr2.stats)  # type: ignore[attr-defined]


def test_count_sum_and_mean_released_together_agree() -> None:
    """Post-processing of one noisy (N, T): mean = sum / count wherever the mean is not
    clamped, and the count's value is the one N the mean and the sum used."""
    stats = {
        "n": dpa.count("x"),
        "s": dpa.sum("x", bounds=(0.0, 100.0)),
        "m": dpa.mean("x", bounds=(0.0, 100.0)),
    }
    pr = _price(stats, eps=2.0)
    vals = [3.0, 70.0, 99.5, 12.25] * 50
    res: dict[str, tuple[object, ...]] = {}
    for m in pr.measures:  # type: ignore[attr-defined]
        if m.kind == "values":
            res[m.name] = (len(vals),)
        else:
            res[m.name] = (sum(math.floor(x * 2**m.frac_bits) for x in vals),)
    src = RandomSource(seed=3, insecure=True)
    for _ in range(20):
        out = assemble(
            pr,
            EngineResult(keys=((),), values=res),
            group_by=(),
            public_keys=None,
            alpha=0.05,  # type: ignore[arg-type]
            source=src,
        )
        n, s, m = out["n"].iloc[0], out["s"].iloc[0], out["m"].iloc[0]
        assert m == pytest.approx(s / n, rel=1e-12)


def test_count_of_a_column_counts_its_values_end_to_end() -> None:
    x = np.arange(300, dtype=float)
    x[::3] = np.nan  # 100 NULLs
    df = pd.DataFrame({"uid": np.arange(300), "x": x})
    s = dpa.Session(
        df,
        privacy_unit="uid",
        budget=Budget(epsilon=1e9),
        source_of_randomness=RandomSource(seed=1, insecure=True),
    )
    q = s.query().bound(max_partitions=1, max_rows_per_partition=1)
    out = q.agg(n=dpa.count("x"), r=dpa.count(), m=dpa.mean("x", bounds=(0, 300))).run(epsilon=1e5)
    assert abs(out["n"].iloc[0] - 200) <= 2 and abs(out["r"].iloc[0] - 300) <= 2
    assert abs(out["m"].iloc[0] - np.nanmean(x)) < 1.0


def _var_objective(
    pure: bool, lo: float, hi: float, w: tuple[float, float, float], fr: tuple[float, ...]
) -> float:
    """The variance pool's stated objective, written out independently of the module."""
    w_v, w_s, w_c = w
    total = w_v + w_s + w_c

    def g(e: float) -> float:
        return 2.0 / e**2 if pure else 0.5 / e

    gn, gt, gq = (g(total * f) for f in fr)
    h, c = (hi - lo) / 2.0, (hi + lo) / 2.0
    big = max(abs(lo), abs(hi))
    kappa = 0.2 if pure else 0.5
    var = (1.0 - kappa) ** 2 * gq + 4.0 / 3.0 * gt + (kappa**2 + 11.0 / 45.0) * gn
    sm = (h * h * gt + c * c * gn) / (big * big)
    return w_v * var + w_s * sm + w_c * gn


@settings(max_examples=100, deadline=None)
@given(
    pure=st.booleans(),
    lo=st.floats(-1e6, 1e6),
    width=st.floats(1e-3, 1e6),
    w=st.tuples(st.floats(0.05, 20), st.floats(0, 20), st.floats(0, 20)),
)
def test_variance_split_minimises_the_stated_objective(
    pure: bool, lo: float, width: float, w: tuple[float, float, float]
) -> None:
    hi = lo + width
    fr = pool_split(pure, "variance", lo, hi, *w)
    assert len(fr) == 3 and sum(fr) == 1 and all(f >= Fraction(1, 100) for f in fr)
    best = _var_objective(pure, lo, hi, w, tuple(float(f) for f in fr))
    # no better split on a grid of the simplex (convex objective), nor equal thirds
    grid = np.linspace(0.02, 0.96, 48)
    for a in grid:
        for b in grid:
            if a + b < 0.99:
                other = (1.0 - a - b, a, b)
                assert best <= _var_objective(pure, lo, hi, w, other) * (1 + 1e-9)
    assert best <= _var_objective(pure, lo, hi, w, (1 / 3, 1 / 3, 1 / 3)) * (1 + 1e-9)


def test_variance_leading_order_error_matches_a_simulation() -> None:
    """The objective's variance line (``Z_Q - 2 r Z_T - (v - r^2) Z_N``, divided by ``n``)
    against the plug-in estimate ``Q'/N' - (T'/N')^2`` with simulated noises: the empirical
    variance of the estimate agrees within 5% (200,000 draws: the sampling error of a
    variance is about 0.3%, the Taylor remainder at these noise sizes below 1%)."""
    rng = np.random.default_rng(7)
    n, r, v = 10_000.0, 0.3, 0.2  # mean's distance from the centre, variance (h = 1)
    t, q = n * r, n * (v + r * r)
    sd_n, sd_t, sd_q = 30.0, 20.0, 25.0
    m = 200_000
    nn = n + rng.normal(0.0, sd_n, m)
    tt = t + rng.normal(0.0, sd_t, m)
    qq = q + rng.normal(0.0, sd_q, m)
    est = qq / nn - (tt / nn) ** 2
    formula = (sd_q**2 + 4 * r * r * sd_t**2 + (v - r * r) ** 2 * sd_n**2) / n**2
    assert float(np.var(est)) == pytest.approx(formula, rel=0.05)
    # a companion: dropping the cross term 2 r Z_T would be caught
    wrong = (sd_q**2 + (v - r * r) ** 2 * sd_n**2) / n**2
    assert float(np.var(est)) != pytest.approx(wrong, rel=0.05)
    # the centred sum of squares (h = 1, centre 1/2): Q rebuilt as Q_c' + N' / 2, so Q's
    # noise is Z_c + Z_N / 2 and the count's coefficient becomes 1/2 - v + r^2
    qc = q - n / 2.0 + rng.normal(0.0, sd_q, m)
    est_c = (qc + nn / 2.0) / nn - (tt / nn) ** 2
    centred = (sd_q**2 + 4 * r * r * sd_t**2 + (0.5 - v + r * r) ** 2 * sd_n**2) / n**2
    assert float(np.var(est_c)) == pytest.approx(centred, rel=0.05)
    assert float(np.var(est_c)) != pytest.approx(formula, rel=0.05)  # the uncentred line


@pytest.mark.parametrize("mode", ["pure", "zcdp"])
def test_variance_error_at_the_reference_point_falls(mode: str) -> None:
    """The variance's leading-order noise variance at the reference point, from the noises
    actually priced, is below equal thirds' with the uncentred sum of squares (computed by
    hand from the same share: each noise's variance rescaled to a third, the squares' by
    ``1 / (1 - kappa)^2`` for their sensitivity h^2 instead of ``(1 - kappa) h^2``), and the
    query is charged no more than before."""
    pr = _price({"v": dpa.variance("x", bounds=(0.0, 100.0))}, mode)
    sp = pr.stats[0]  # type: ignore[attr-defined]
    pair = None
    if mode == "pure":  # a pure variance alone takes the complementary pair: the three
        # measures it replaces priced directly, the pair checked against them below
        pair = sp
        sp = _price_stat_at("v", sp.stat, "pure", sp.epsilon, 1, 1, None, piloting=False)
    mn, ms, mq = sp.measures
    h = 50.0
    var_n = mn.noise.std**2
    var_t = (ms.noise.std * ms.step) ** 2
    var_q = (mq.noise.std * mq.step) ** 2

    kappa = 0.2 if mode == "pure" else 0.5
    new = var_q / h**4 + 4.0 / 3.0 * var_t / h**2 + (kappa**2 + 11.0 / 45.0) * var_n
    fr = sp.split
    p = 2 if mode == "pure" else 1
    vn, vt, vq = (x * (3.0 * f) ** p for x, f in zip((var_n, var_t, var_q), fr, strict=True))
    # uncentred: the squares' sensitivity h^2 instead of (1 - kappa) h^2
    vq = vq / (1.0 - kappa) ** 2
    old = vq / h**4 + 4.0 / 3.0 * vt / h**2 + 11.0 / 45.0 * vn
    assert new < 0.85 * old, (new, old)
    if pair is not None:
        # the pair's noise a Z_A + b Z_B with E[a^2 + b^2] = h^2 (k^2 + 4 r^2) / (2 h^4) at the
        # reference point (kappa 1/2: E[k^2] = 1/4 + 11/45, E[4 r^2] = 4/3 h^2)
        cp, mq_p = pair.complement, pair.measures[2]
        var_p = (cp.noise.std * cp.step) ** 2
        var_qp = (mq_p.noise.std * mq_p.step) ** 2
        pair_err = var_qp / h**4 + (0.25 + 11.0 / 45.0 + 4.0 / 3.0) / 2.0 * var_p / h**2
        assert pair_err < 0.6 * new, (pair_err, new)  # 20.4 against 36.0 at the reference
    got = pr.charged()  # type: ignore[attr-defined]
    key = "epsilon" if mode == "pure" else "rho"
    whole = 1.0 if mode == "pure" else pr.rho  # type: ignore[attr-defined]
    assert got[key] <= whole
