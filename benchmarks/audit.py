"""Benchmark of ``dpkit.audit``: tester throughput, power curves, known-bad detection rates.

Writes the ``audit`` section of docs/benchmarks.md. Run: ``.venv/bin/python benchmarks/audit.py``
(``--quick`` for a smaller run). There is no peer to compare with in-process: Google's
dp-auditorium is not on PyPI and needs TensorFlow and JAX.
"""

from __future__ import annotations

import argparse
import statistics
import time
from typing import Any

import numpy as np

from _report import machine, write_section
from dpkit import mechanisms as mech
from dpkit.audit import (
    Claim,
    ClassifierTester,
    HistogramTester,
    ThresholdTester,
    audit,
    float_structure,
    known_bad,
)
from dpkit.noise import RandomSource


def _median_time(fn: Any, repeats: int) -> float:
    times = []
    for _ in range(repeats):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return statistics.median(times)


def tester_throughput(n: int, repeats: int) -> list[tuple[str, int, float]]:
    """Samples per second through fit + counting (both sides), per tester."""
    src = RandomSource()
    lap = mech.Laplace.from_epsilon(epsilon=1.0, sensitivity=1.0)
    a, b = lap.release(np.zeros(n), source=src), lap.release(np.ones(n), source=src)
    ia, ib = src.integers(64, n), src.integers(64, n)
    va = src.uniform((n // 10, 8))
    vb = src.uniform((n // 10, 8)) + 0.01
    cases = [
        ("threshold (floats)", ThresholdTester(), a, b),
        ("histogram (64 categories)", HistogramTester(), ia, ib),
        ("histogram[float_structure]", HistogramTester(feature=float_structure), a, b),
        ("classifier[logistic] (8-dim)", ClassifierTester(), va, vb),
    ]
    rows = []
    for name, tester, x, y in cases:

        def run(t: Any = tester, x: Any = x, y: Any = y) -> None:
            fitted = t.fit(x, y)
            fitted.counts(x)
            fitted.counts(y)

        sec = _median_time(run, repeats)
        rows.append((name, int(2 * len(x)), 2 * len(x) / sec))
    return rows


def end_to_end(samples: int, repeats: int) -> tuple[float, float]:
    """Seconds and epsilon bound of the whole Laplace audit (sampling included)."""
    lap = mech.Laplace.from_epsilon(epsilon=1.0, sensitivity=1.0)
    claim = Claim.pure(epsilon=lap.epsilon)
    results = []
    times = []
    for _ in range(repeats):
        t = time.perf_counter()
        r = audit(lap, (0.0, 1.0), samples=samples, claim=claim, confidence=0.95)
        times.append(time.perf_counter() - t)
        results.append(r.epsilon_lower_bound)
    return statistics.median(times), statistics.median(results)


def power_curve(sizes: list[int], repeats: int) -> list[tuple[str, int, float, float, float]]:
    """(mechanism, samples, median bound, median bound / truth, median seconds)."""
    lap = mech.Laplace.from_epsilon(epsilon=1.0, sensitivity=1.0)
    gau = mech.Gaussian.from_epsilon_delta(epsilon=1.0, delta=1e-5, sensitivity=1.0)
    rows = []
    for n in sizes:
        reps = repeats if n <= 1_000_000 else 1
        for name, m, claim, kind in (
            ("Laplace eps=1 (epsilon bound)", lap, Claim.pure(epsilon=lap.epsilon), "eps"),
            (
                "Gaussian (1, 1e-5) (epsilon bound at 1e-5)",
                gau,
                Claim.approx(epsilon=1.0, delta=1e-5),
                "eps",
            ),
            (f"Gaussian (1, 1e-5) (mu bound, mu = {gau.mu:.4f})", gau, Claim.gdp(mu=gau.mu), "mu"),
        ):
            bounds, secs = [], []
            for _ in range(reps):
                t = time.perf_counter()
                r = audit(m, (0.0, 1.0), samples=n, claim=claim, confidence=0.95)
                secs.append(time.perf_counter() - t)
                bounds.append(r.mu_lower_bound if kind == "mu" else r.epsilon_lower_bound)
            truth = gau.mu if kind == "mu" else 1.0
            med = statistics.median(bounds)
            rows.append((name, n, med, med / truth, statistics.median(secs)))
    return rows


def detection(runs: int, samples: int, confidence: float) -> list[tuple[str, int, int, float]]:
    """How often each known-bad mechanism is reported violated."""
    rows = []
    for entry in known_bad.corpus(epsilon=1.0):
        hits = 0
        bounds = []
        for _ in range(runs):
            r = audit(
                entry.mechanism,
                entry.pair,
                samples=samples,
                claim=entry.claim,
                confidence=confidence,
            )
            hits += int(r.violated)
            bounds.append(r.mu_lower_bound if entry.claim.kind == "gdp" else r.epsilon_lower_bound)
        rows.append((entry.name, hits, runs, statistics.median(bounds)))
    return rows


def self_audit() -> list[tuple[str, str, int, float, float]]:
    """(name, claim, samples, bound, bound / claim) for dpkit's mechanisms and LDP protocols."""
    from dpkit import ldp
    from dpkit.audit import audit_ldp

    u = np.array([0.0] + [1.0] * 9)
    v = np.array([1.0] + [0.0] * 9)
    rows = []
    cases: list[tuple[str, Any, Any, int]] = [
        ("Laplace", mech.Laplace.from_epsilon(epsilon=1.0, sensitivity=1.0), (0.0, 1.0), 1_000_000),
        (
            "DiscreteLaplace",
            mech.DiscreteLaplace.from_epsilon(epsilon=1.0, sensitivity=1),
            (0, 1),
            1_000_000,
        ),
        (
            "RandomizedResponse",
            mech.RandomizedResponse.from_epsilon(epsilon=1.0),
            (0, 1),
            1_000_000,
        ),
        (
            "ExponentialMechanism (10 candidates)",
            mech.ExponentialMechanism(epsilon=1.0, sensitivity=1.0),
            (u, v),
            200_000,
        ),
        (
            "ReportNoisyMax laplace (10)",
            mech.ReportNoisyMax(epsilon=1.0, sensitivity=1.0),
            (u, v),
            200_000,
        ),
    ]
    for name, m, pair, n in cases:
        r = audit(m, pair, samples=n, claim=Claim.pure(epsilon=m.epsilon))
        rows.append(
            (name, r.claim.label if r.claim else "", n, r.epsilon_lower_bound, r.ratio or 0.0)
        )
    g = mech.Gaussian.from_mu(mu=1.0, sensitivity=1.0)
    r = audit(g, (0.0, 1.0), samples=1_000_000, claim=Claim.gdp(mu=g.mu))
    rows.append(
        ("Gaussian (mu bound)", f"{g.mu:.4g}-GDP", 1_000_000, r.mu_lower_bound, r.ratio or 0.0)
    )
    protocols = [
        ldp.RandomizedResponse(epsilon=1.0),
        ldp.GRR(epsilon=1.0, domain=4),
        ldp.SUE(epsilon=1.0, domain=4),
        ldp.OUE(epsilon=1.0, domain=4),
        ldp.OLH(epsilon=1.0, domain=4),
        ldp.BLH(epsilon=1.0, domain=4),
        ldp.HadamardResponse(epsilon=1.0, domain=4),
        ldp.Duchi(epsilon=1.0),
        ldp.Piecewise(epsilon=1.0),
        ldp.Hybrid(epsilon=1.0),
    ]
    for p in protocols:
        r = audit_ldp(p, samples=500_000)
        rows.append(
            (
                f"ldp.{type(p).__name__} (all pairs)",
                r.claim.label if r.claim else "",
                500_000,
                r.epsilon_lower_bound,
                r.ratio or 0.0,
            )
        )
    return rows


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--quick", action="store_true", help="small sizes, few repeats")
    args = parser.parse_args()
    quick = args.quick
    sizes = [10**5, 10**6] if quick else [10**5, 10**6, 10**7]
    reps = 1 if quick else 5

    thr = tester_throughput(10**6, 3)
    e2e_t, e2e_b = end_to_end(10**6, reps)
    curve = power_curve(sizes, reps)
    runs = 20 if quick else 100
    det = detection(runs, 100_000, 0.95)
    det_strict = detection(max(runs // 5, 5), 100_000, 1 - 1e-6)
    selfa = self_audit()

    out = [
        "## Audit (`benchmarks/audit.py`)",
        "",
        f"Machine: {machine()}. Command: `.venv/bin/python benchmarks/audit.py`"
        f"{' --quick' if quick else ''}. Secure (OS-keyed) randomness; bounds at 95% "
        "confidence unless stated. No in-process peer: Google's dp-auditorium is not on "
        "PyPI and needs TensorFlow and JAX.",
        "",
        "### Throughput of the testers (fit on both sides, then count every candidate event)",
        "",
        "| tester | outputs | outputs/s |",
        "| --- | ---: | ---: |",
    ]
    for name, n, rate in thr:
        out.append(f"| {name} | {n:,} | {rate:,.0f} |")
    out += [
        "",
        f"End to end, dpkit Laplace at epsilon 1 with 10^6 samples per side (sampling, "
        f"split, selection, evaluation): **{e2e_t:.2f} s**, epsilon lower bound "
        f"**{e2e_b:.4f}** (median of {reps}; target: >= 0.95 in < 10 s).",
        "",
        "### Power curve (median over repeats; 10^7: one run)",
        "",
        "| mechanism | samples per side | lower bound | bound / truth | seconds |",
        "| --- | ---: | ---: | ---: | ---: |",
    ]
    for name, n, med, ratio, sec in curve:
        out.append(f"| {name} | {n:,} | {med:.4f} | {ratio:.3f} | {sec:.2f} |")
    out += [
        "",
        "The Gaussian's epsilon at delta = 1e-5 lives in the far tail (events of "
        "probability ~1e-5), which 10^7 samples only start to reach; its mu bound shows "
        "the same audit is close to tight in the f-DP view.",
        "",
        "### Known-bad corpus: detection rate (100,000 samples per side)",
        "",
        "| mechanism | detected (95%) | detected (1 - 1e-6) | median lower bound |",
        "| --- | ---: | ---: | ---: |",
    ]
    for (name, hits, n_runs, med), (_, hits2, runs2, _) in zip(det, det_strict, strict=True):
        out.append(f"| {name} | {hits}/{n_runs} | {hits2}/{runs2} | {med:.3f} |")
    out += [
        "",
        "Bounds are epsilon lower bounds (mu for the GDP entry); every claim is 1.",
        "",
        "### Self-audit: how close the audit gets to dpkit's own claims (95%)",
        "",
        "| mechanism | claim | samples per input | lower bound | bound / claim |",
        "| --- | --- | ---: | ---: | ---: |",
    ]
    for name, label, n, bound, ratio in selfa:
        out.append(f"| {name} | {label} | {n:,} | {bound:.4f} | {ratio:.3f} |")
    out += [
        "",
        "The pass/fail version (alpha = 1e-6, no audit above its claim) is "
        "`tests/statistical/test_self_audit.py`.",
    ]
    text = "\n".join(out)
    print(text)
    write_section("audit", text)


if __name__ == "__main__":
    main()
