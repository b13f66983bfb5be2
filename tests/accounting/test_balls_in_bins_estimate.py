"""Monte Carlo estimate of balls-in-bins DP-SGD: at least the exact epsilon of the pair with the
stated confidence (alpha 1e-6, with a companion on a broken estimator), between the proven
bounds, refused where it cannot speak, never labelled a guarantee."""

from __future__ import annotations

import functools
import math

import numpy as np
import pytest
from scipy import stats

from dpkit.accounting import montecarlo
from dpkit.accounting.batching import BatchScheme
from dpkit.accounting.montecarlo import balls_in_bins_estimate, kl_upper_confidence
from dpkit.errors import InsecureRandomnessError, PrivacyParameterError
from dpkit.noise import RandomSource

ALPHA = 1e-6  # probability that the estimate falls below the exact value
SIGMA, DELTA = 1.0, 1e-2
TWO_BINS = BatchScheme(name="balls_in_bins", dataset_size=20, batch_size=10)  # T = 2


@functools.lru_cache(maxsize=4)
def exact_two_bins(sigma: float, delta: float) -> float:
    """Epsilon of P = (N(e_1) + N(e_2)) / 2 against Q = N(0, I_2) (noise sigma), one epoch.

    In the rotated coordinates u = (x1 + x2)/sqrt 2, v = (x1 - x2)/sqrt 2 the likelihood ratio
    is ``exp((u/sqrt 2 - 1/2)/sigma^2) cosh(v/(sqrt 2 sigma^2))``, increasing in u, so for each
    v the hockey-stick integral over u is closed form (normal CDFs); the v integral is a fine
    trapezoid sum (error far below the test's margins). Both directions."""
    r = 1.0 / math.sqrt(2.0)
    v = np.linspace(-10.0 * sigma - 1.0, 10.0 * sigma + 1.0, 40001)
    w = np.full_like(v, v[1] - v[0])
    w[[0, -1]] *= 0.5
    phi_q = stats.norm.pdf(v, scale=sigma)
    phi_p = 0.5 * (stats.norm.pdf(v - r, scale=sigma) + stats.norm.pdf(v + r, scale=sigma))
    a = np.abs(v * r / sigma**2)
    log_cosh = a + np.log1p(np.exp(-2.0 * a)) - math.log(2.0)

    def cut(eps: float) -> np.ndarray:  # u where the ratio equals e^eps
        return math.sqrt(2.0) * (sigma**2 * (eps - log_cosh) + 0.5)

    def d(eps: float) -> float:
        up, down = cut(eps), cut(-eps)
        pq = stats.norm.sf(up, loc=r, scale=sigma) * phi_p
        pq -= math.exp(eps) * stats.norm.sf(up, scale=sigma) * phi_q
        qp = stats.norm.cdf(down, scale=sigma) * phi_q
        qp -= math.exp(eps) * stats.norm.cdf(down, loc=r, scale=sigma) * phi_p
        return float(max(np.sum(pq * w), np.sum(qp * w)))

    lo, hi = 0.0, 10.0
    while hi - lo > 1e-7:
        mid = 0.5 * (lo + hi)
        lo, hi = (lo, mid) if d(mid) <= delta else (mid, hi)
    return hi


def estimate(samples: int = 200_000) -> montecarlo.MonteCarloEpsilon:
    return balls_in_bins_estimate(
        TWO_BINS,
        noise_multiplier=SIGMA,
        delta=DELTA,
        epochs=1,
        samples=samples,
        confidence=1.0 - ALPHA,
    )


def test_estimate_is_at_least_the_exact_epsilon_and_within_the_proven_bounds() -> None:
    exact = exact_two_bins(SIGMA, DELTA)
    r = estimate()
    # fails with probability at most ALPHA (the confidence statement)
    assert r.estimate >= exact
    assert r.lower <= exact <= r.upper
    assert r.estimate <= r.upper  # 200k runs are enough to beat the bound without amplification
    assert r.estimate <= exact + 0.35  # power: the bound is ~sqrt(ln(2/alpha) delta / N) in delta
    assert r.is_guarantee is False
    assert "not a proof" in r.statement()


def test_companion_an_estimator_that_forgets_the_record_falls_below(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    real = montecarlo._losses

    def broken(sigma: float, t: int, epochs: int, samples: int, source: RandomSource) -> np.ndarray:
        out = real(sigma, t, epochs, samples, source)
        out[0] = out[1]  # the P draw without the record's shift: P sampled as Q
        return out

    monkeypatch.setattr(montecarlo, "_losses", broken)
    assert estimate().estimate < exact_two_bins(SIGMA, DELTA)


def test_too_few_runs_for_delta_give_no_finite_estimate() -> None:
    r = balls_in_bins_estimate(
        TWO_BINS, noise_multiplier=SIGMA, delta=1e-6, epochs=1, samples=1000, confidence=0.99
    )
    assert r.estimate == math.inf
    assert math.isfinite(r.upper)


def test_seeded_source_needs_insecure_and_reproduces() -> None:
    kw = dict(noise_multiplier=SIGMA, delta=DELTA, epochs=2, samples=5000)
    a = balls_in_bins_estimate(TWO_BINS, source=RandomSource(seed=3, insecure=True), **kw)
    b = balls_in_bins_estimate(TWO_BINS, source=RandomSource(seed=3, insecure=True), **kw)
    assert a.estimate == b.estimate and a.epochs == 2
    with pytest.raises(InsecureRandomnessError):
        RandomSource(seed=3)


def test_kl_bound_is_hoeffdings() -> None:
    # no hits: u = 1 - (beta)^(1/N) solves N kl(0, u) = ln(1/beta)
    u = kl_upper_confidence(0.0, 1000, math.log(1e3))
    assert u == pytest.approx(1 - 1e-3 ** (1 / 1000), rel=1e-9)
    assert kl_upper_confidence(0.3, 10**6, 5.0) > 0.3


@pytest.mark.parametrize(
    "kw",
    [
        {"delta": 0.0},
        {"delta": math.nan},
        {"confidence": 1.0},
        {"confidence": 0.0},
        {"confidence": math.nan},
        {"samples": 10},
        {"samples": 1.5},
        {"noise_multiplier": -1.0},
    ],
)
def test_bad_parameters_are_refused(kw: dict[str, float]) -> None:
    args: dict[str, float] = dict(noise_multiplier=SIGMA, delta=DELTA, samples=1000)
    args.update(kw)
    with pytest.raises(PrivacyParameterError):
        balls_in_bins_estimate(TWO_BINS, epochs=1, **args)  # type: ignore[arg-type]


def test_other_schemes_are_refused() -> None:
    with pytest.raises(PrivacyParameterError, match="balls_in_bins"):
        balls_in_bins_estimate(
            BatchScheme(name="shuffle", dataset_size=20, batch_size=10),
            noise_multiplier=1.0,
            delta=1e-3,
            epochs=1,
        )


def test_cli_prints_the_estimate_labelled_and_refuses_it_for_other_schemes() -> None:
    from typer.testing import CliRunner

    from dpkit.cli import app

    args = ["account", "dpsgd", "--delta", "1e-3", "--batch-size", "10", "--dataset-size", "40"]
    args += ["--noise-multiplier", "1.0", "--epochs", "2", "--scheme"]
    res = CliRunner().invoke(app, [*args, "balls_in_bins", "--monte-carlo", "20000"])
    assert res.exit_code == 0, res.output
    assert "ESTIMATE" in res.output and "not a proof" in res.output
    assert "upper bound (proven)" in res.output
    bad = CliRunner().invoke(app, [*args, "shuffle", "--monte-carlo", "20000"])
    assert bad.exit_code != 0
