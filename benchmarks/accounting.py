"""Accounting benchmark: dpkit's accountants against dp-accounting, prv-accountant and Opacus.

Run with ``make bench`` (or ``.venv/bin/python benchmarks/accounting.py``). Writes the
``accounting`` section of ``docs/benchmarks.md`` and prints the same tables.

Workloads
---------
(a) DP-SGD: Poisson sampling rate ``q = 256/60000``, noise multiplier 1.1, 60 epochs, delta 1e-5.
    Steps = ``60 * 60000 // 256 = 14062`` (integer division of 14062.5, the convention of the
    task; ``dpkit account dpsgd --epochs`` instead rounds up to 14063 to never under-count).
(b) 1,000 Laplace releases of epsilon 0.01 each (scale 100 at sensitivity 1), delta 1e-6.

Every accountant is built from scratch inside the timed function (composition and query), at
its default settings except prv-accountant, which has none: it gets ``eps_error = 0.01`` and
``delta_error = delta / 1000`` (its documented "typical" values). Times are medians over
``REPEATS`` runs (fewer for slow ones). Opacus is used only if it is importable (it needs torch);
Opacus has no Laplace accountant.
"""

from __future__ import annotations

import math
import statistics
import sys
import time
import traceback
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).parent))
from _report import machine, write_section
from dpkit.accounting.composition import (
    advanced_composition,
    basic_composition,
    optimal_composition,
)
from dpkit.accounting.pld import PldAccountant
from dpkit.accounting.rdp import RdpAccountant
from dpkit.events import GaussianEvent, LaplaceEvent, PoissonSampledEvent

REPEATS = 5
Q, SIGMA, STEPS, DELTA_A = 256 / 60000, 1.1, 60 * 60000 // 256, 1e-5
EPS_L, COUNT_L, DELTA_B = 0.01, 1000, 1e-6


@dataclass
class Result:
    library: str
    method: str
    kind: str
    epsilon: float | str
    seconds: float | None
    note: str = ""


def _median_time(fn: Callable[[], Any], repeats: int) -> tuple[Any, float]:
    times = []
    value: Any = None
    for _ in range(repeats):
        t0 = time.perf_counter()
        value = fn()
        times.append(time.perf_counter() - t0)
    return value, statistics.median(times)


def _run(out: list[Result], library: str, method: str, kind: str, fn: Callable[[], Any],
         repeats: int = REPEATS, note: str = "") -> Any:
    try:
        value, sec = _median_time(fn, repeats)
    except Exception as exc:  # a peer failing must not stop the benchmark
        traceback.print_exc()
        out.append(Result(library, method, kind, f"failed: {type(exc).__name__}", None, note))
        return None
    eps = value[2] if isinstance(value, tuple) else value
    if isinstance(value, tuple):
        note = (note + " " if note else "") + (
            f"(lower {value[0]:.5f}, estimate {value[1]:.5f})")
    out.append(Result(library, method, kind, float(eps), sec, note))
    return value


# ---------------------------------------------------------------------------- (a) DP-SGD
def dpsgd() -> tuple[list[Result], dict[str, Any]]:
    out: list[Result] = []
    ev = PoissonSampledEvent(sampling_rate=Q, event=GaussianEvent(noise_multiplier=SIGMA))

    def pld() -> float:
        return PldAccountant().compose(ev, STEPS).get_epsilon(DELTA_A)

    def pld_bounds() -> tuple[float, float, float]:
        acct = PldAccountant()
        acct.compose(ev, STEPS)
        return acct.get_epsilon_bounds(DELTA_A)

    ours = _run(out, "dpkit", "PLD (get_epsilon)", "upper bound", pld)
    _run(out, "dpkit", "PLD (get_epsilon_bounds)", "upper bound", pld_bounds)
    _run(out, "dpkit", "RDP", "upper bound",
         lambda: RdpAccountant().compose(ev, STEPS).get_epsilon(DELTA_A))

    def gdp() -> float:
        from dpkit import fdp
        from dpkit.accounting.gdp import dpsgd_gdp_mu

        mu = dpsgd_gdp_mu(sampling_rate=Q, noise_multiplier=SIGMA, steps=STEPS)
        return fdp.gdp(mu).epsilon(DELTA_A)

    _run(out, "dpkit", "GDP CLT", "estimate", gdp)

    from dp_accounting import dp_event
    from dp_accounting import pld as dpa_pld
    from dp_accounting import rdp as dpa_rdp

    dev = dp_event.SelfComposedDpEvent(
        dp_event.PoissonSampledDpEvent(Q, dp_event.GaussianDpEvent(SIGMA)), STEPS)

    def dpa_p() -> float:
        a = dpa_pld.PLDAccountant()
        a.compose(dev)
        return float(a.get_epsilon(DELTA_A))

    def dpa_r() -> float:
        a = dpa_rdp.RdpAccountant()
        a.compose(dev)
        return float(a.get_epsilon(DELTA_A))

    theirs = _run(out, "dp-accounting 0.6.0", "PLD (default)", "upper bound", dpa_p)
    _run(out, "dp-accounting 0.6.0", "RDP (default)", "upper bound", dpa_r)

    from prv_accountant import PoissonSubsampledGaussianMechanism, PRVAccountant

    def prv() -> tuple[float, float, float]:
        acc = PRVAccountant(
            prvs=PoissonSubsampledGaussianMechanism(noise_multiplier=SIGMA,
                                                    sampling_probability=Q),
            max_self_compositions=STEPS, eps_error=0.01, delta_error=DELTA_A / 1000)
        lo, est, up = acc.compute_epsilon(delta=DELTA_A, num_self_compositions=STEPS)
        return (float(lo), float(est), float(up))

    prv_val = _run(out, "prv-accountant 0.2.0", "PRV (eps_error 0.01)", "upper bound", prv,
                   repeats=3)

    try:
        import opacus
        from opacus.accountants import PRVAccountant as OPrv
        from opacus.accountants import RDPAccountant as ORdp
    except ImportError:
        out.append(Result("Opacus", "-", "-", "not installed", None))
    else:
        ver = getattr(opacus, "__version__", "?")

        def o_rdp() -> float:
            a = ORdp()
            a.history = [(SIGMA, Q, STEPS)]
            return float(a.get_epsilon(DELTA_A))

        def o_prv() -> float:
            a = OPrv()
            a.history = [(SIGMA, Q, STEPS)]
            return float(a.get_epsilon(DELTA_A))

        _run(out, f"Opacus {ver}", "RDP", "upper bound", o_rdp)
        _run(out, f"Opacus {ver}", "PRV (default eps_error 0.01)", "upper bound", o_prv,
             repeats=3)

    facts = {"ours": ours, "dpa_pld": theirs, "prv": prv_val}
    return out, facts


# ---------------------------------------------------------------------------- (b) Laplace
def laplace() -> list[Result]:
    out: list[Result] = []
    ev = LaplaceEvent(noise_multiplier=1.0 / EPS_L)

    def pld_bounds() -> tuple[float, float, float]:
        acct = PldAccountant()
        acct.compose(ev, COUNT_L)
        return acct.get_epsilon_bounds(DELTA_B)

    _run(out, "dpkit", "PLD (get_epsilon)", "upper bound",
         lambda: PldAccountant().compose(ev, COUNT_L).get_epsilon(DELTA_B))
    _run(out, "dpkit", "PLD (get_epsilon_bounds)", "upper bound", pld_bounds)
    _run(out, "dpkit", "RDP", "upper bound",
         lambda: RdpAccountant().compose(ev, COUNT_L).get_epsilon(DELTA_B))

    def gdp() -> float:
        from dpkit.accounting.gdp import GdpAccountant

        return GdpAccountant().compose(ev, COUNT_L).get_epsilon(DELTA_B)

    _run(out, "dpkit", "GDP CLT", "estimate", gdp)
    _run(out, "dpkit", "basic composition", "upper bound",
         lambda: basic_composition(epsilons=[EPS_L] * COUNT_L)[0])
    _run(out, "dpkit", "advanced composition (delta_slack = delta)", "upper bound",
         lambda: advanced_composition(epsilon=EPS_L, count=COUNT_L, delta_slack=DELTA_B))
    _run(out, "dpkit", "optimal composition (KOV, any eps-DP)", "upper bound",
         lambda: optimal_composition(epsilon=EPS_L, count=COUNT_L, delta=DELTA_B))

    from dp_accounting import dp_event
    from dp_accounting import pld as dpa_pld
    from dp_accounting import rdp as dpa_rdp

    dev = dp_event.SelfComposedDpEvent(dp_event.LaplaceDpEvent(1.0 / EPS_L), COUNT_L)

    def dpa_p() -> float:
        a = dpa_pld.PLDAccountant()
        a.compose(dev)
        return float(a.get_epsilon(DELTA_B))

    def dpa_r() -> float:
        a = dpa_rdp.RdpAccountant()
        a.compose(dev)
        return float(a.get_epsilon(DELTA_B))

    _run(out, "dp-accounting 0.6.0", "PLD (default)", "upper bound", dpa_p)
    _run(out, "dp-accounting 0.6.0", "RDP (default)", "upper bound", dpa_r)

    from prv_accountant import PRVAccountant
    from prv_accountant.privacy_random_variables import LaplaceMechanism

    def prv() -> tuple[float, float, float]:
        acc = PRVAccountant(prvs=LaplaceMechanism(mu=EPS_L), max_self_compositions=COUNT_L,
                            eps_error=0.01, delta_error=DELTA_B / 1000)
        lo, est, up = acc.compute_epsilon(delta=DELTA_B, num_self_compositions=COUNT_L)
        return (float(lo), float(est), float(up))

    _run(out, "prv-accountant 0.2.0", "PRV (eps_error 0.01)", "upper bound", prv, repeats=3)
    out.append(Result("Opacus", "-", "-", "n/a", None, "no Laplace accountant"))
    return out


def _table(rows: list[Result]) -> str:
    lines = ["| library | method | kind | epsilon | time (ms) | note |",
             "| --- | --- | --- | ---: | ---: | --- |"]
    for r in rows:
        eps = f"{r.epsilon:.5f}" if isinstance(r.epsilon, float) else r.epsilon
        sec = f"{1000 * r.seconds:.1f}" if r.seconds is not None else "-"
        lines.append(f"| {r.library} | {r.method} | {r.kind} | {eps} | {sec} | {r.note} |")
    return "\n".join(lines)


def extremes() -> str:
    """(c) Extreme parameters: answer, time and peak traced memory of one query each."""
    import tracemalloc

    from dpkit.accounting.rdp import dpsgd_rdp_epsilon
    from dpkit.events import PureDpEvent

    cases: list[tuple[str, Callable[[], Any]]] = [
        ("PLD, Laplace(b=1e-6), epsilon at 1e-6",
         lambda: PldAccountant().compose(LaplaceEvent(noise_multiplier=1e-6)).get_epsilon(1e-6)),
        ("PLD, Gaussian(sigma=1e-3), epsilon at 1e-6",
         lambda: PldAccountant().compose(GaussianEvent(noise_multiplier=1e-3)).get_epsilon(1e-6)),
        ("PLD, Laplace(1e-6) + Gaussian(1) (grid), epsilon at 1e-6",
         lambda: PldAccountant().compose(LaplaceEvent(noise_multiplier=1e-6))
         .compose(GaussianEvent(noise_multiplier=1.0))
         .get_epsilon(1e-6)),
        ("PLD, 10^6 x PureDp(700), epsilon at 0.999999",
         lambda: PldAccountant().compose(PureDpEvent(epsilon=700.0), 10**6).get_epsilon(0.999999)),
        ("PLD, 1000 x Gaussian(0.8), delta at 0",
         lambda: PldAccountant().compose(GaussianEvent(noise_multiplier=0.8), 1000).get_delta(0.0)),
        ("optimal_composition(0.01, count=10^6, delta=1e-6)",
         lambda: optimal_composition(epsilon=0.01, count=10**6, delta=1e-6)),
        ("RDP DP-SGD q=256/60000, sigma 0.7, 3516 steps, delta 1e-5",
         lambda: dpsgd_rdp_epsilon(sampling_rate=256 / 60000, noise_multiplier=0.7,
                                   steps=3516, delta=1e-5)),
    ]
    lines = ["| case | answer | time (ms) | peak memory (MB) |", "| --- | --- | --- | --- |"]
    from dpkit.accounting import rdp

    def cold() -> None:  # the RDP terms are cached per (q, sigma, order)
        rdp._sampled_gaussian_frac.cache_clear()
        rdp._sampled_gaussian_int.cache_clear()

    for name, fn in cases:
        cold()
        t0 = time.perf_counter()
        val = fn()
        sec = time.perf_counter() - t0
        cold()
        tracemalloc.start()  # a second run: tracemalloc slows numpy-heavy code down
        fn()
        peak = tracemalloc.get_traced_memory()[1] / 1e6
        tracemalloc.stop()
        lines.append(f"| {name} | {val:.10g} | {1000 * sec:.1f} | {peak:.1f} |")
    return "\n".join(lines)


def main() -> None:
    a_rows, facts = dpsgd()
    b_rows = laplace()
    ours, dpa, prv = facts["ours"], facts["dpa_pld"], facts["prv"]
    dpa_time = next(r.seconds for r in a_rows if r.library.startswith("dp-accounting")
                    and r.method.startswith("PLD"))
    our_time = next(r.seconds for r in a_rows if r.method == "PLD (get_epsilon)")
    checks = []
    if ours is not None and prv is not None:
        checks.append(f"dpkit PLD upper bound {ours:.5f} >= prv-accountant lower bound "
                      f"{prv[0]:.5f}: {'yes' if ours >= prv[0] else 'NO'}")
        checks.append(f"|dpkit PLD - prv-accountant estimate| = {abs(ours - prv[1]):.5f} "
                      f"(target < 0.005): {'yes' if abs(ours - prv[1]) < 0.005 else 'NO'}")
    if our_time is not None and dpa_time is not None and dpa is not None:
        checks.append(f"time: dpkit PLD {1000 * our_time:.1f} ms vs dp-accounting PLD "
                      f"{1000 * dpa_time:.1f} ms: "
                      f"{'faster' if our_time < dpa_time else 'NOT faster'}")
    md = "\n".join([
        "## Accounting",
        "",
        f"Machine: {machine()}. Medians of {REPEATS} runs (3 for prv-accountant / Opacus PRV);"
        " every run builds the accountant, composes and queries. `kind` is what the library"
        " guarantees; the GDP central limit theorem is an estimate that can be optimistic.",
        "",
        f"### (a) DP-SGD: q = 256/60000, sigma = {SIGMA}, 60 epochs = {STEPS} steps "
        f"(60 * 60000 // 256), delta = {DELTA_A:g}",
        "",
        _table(a_rows),
        "",
        *[f"- {c}" for c in checks],
        "",
        f"### (b) {COUNT_L} Laplace releases, epsilon = {EPS_L} each, delta = {DELTA_B:g}",
        "",
        _table(b_rows),
        "",
        "The optimal composition theorem (Kairouz, Oh and Viswanath) is exact for the worst "
        "eps-DP mechanism, so it sits slightly above the Laplace mechanism's own PLD.",
        "",
        "### (c) Extreme parameters (closed forms, bounded grids)",
        "",
        "Time of one query each (single cold run) and its peak traced memory (tracemalloc, a "
        "second run).",
        "",
        extremes(),
    ])
    print(md)
    write_section("accounting", md)
    if not math.isfinite(ours if ours is not None else math.nan):
        sys.exit(1)


if __name__ == "__main__":
    main()
