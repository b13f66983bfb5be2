"""Privacy-loss engine benchmark: the f-DP tensor product and the PLD accountant side by side.

Run with ``.venv/bin/python benchmarks/loss_engine.py`` (``--no-write`` only prints). Writes
the ``loss_engine`` section of ``docs/benchmarks.md``.

Workloads
---------
(a) Tightness: 1000 Laplace mechanisms of ``mu = 1/sqrt(1000)`` (scale ``sqrt(1000)`` at
    sensitivity 1), ``delta(1)`` from ``fdp.self_tensor`` at its default grid, from the PLD
    accountant and from an independent mpmath Fourier inversion of the closed-form moment
    generating function (``benchmarks/shared/laplace_exact.py``).
(b) Speed: 1000 Gaussian mechanisms of ``mu = 1/sqrt(1000)`` composed numerically (the closed
    form ``G_1`` is the reference): ``fdp.tensor`` of 1000 copies of the Gaussian trade-off
    curve sampled to a piecewise-linear lower bound (``lower_piecewise_linear``, so that the
    Gaussian shortcut is not taken), ``fdp.self_tensor`` of the same curve, and the PLD
    accountant with 1000 Gaussian events at sampling rate 1 (its numeric path: the Gaussian
    closed form is bypassed). Medians over ``REPEATS`` runs (one run for ``fdp.tensor``).
"""

from __future__ import annotations

import argparse
import math
import statistics
import time
from collections.abc import Callable
from typing import Any

from _report import machine, write_section
from dpkit.accounting.pld import PldAccountant
from dpkit.events import GaussianEvent, LaplaceEvent, PoissonSampledEvent
from dpkit.fdp import gdp, laplace, self_tensor, tensor
from shared.laplace_exact import laplace_composition_delta

REPEATS = 3
N = 1000
MU = 1.0 / math.sqrt(N)


def _time(fn: Callable[[], Any], repeats: int = REPEATS) -> tuple[float, Any]:
    times, out = [], None
    for _ in range(repeats):
        t0 = time.perf_counter()
        out = fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times), out


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--no-write", action="store_true")
    args = parser.parse_args()

    exact, tail = laplace_composition_delta(MU, N, 1.0)
    t_lap, lap = _time(lambda: self_tensor(laplace(mu=MU), N).delta(1.0))

    def pld_laplace() -> float:
        acc = PldAccountant()
        acc.compose(LaplaceEvent(noise_multiplier=1.0 / MU), count=N)
        return acc.get_delta(1.0)

    t_pld_lap, pld_lap = _time(pld_laplace)
    rows_a = [
        ("exact (mpmath Fourier inversion)", exact, f"truncation <= {tail:.1e}", None),
        ("`fdp.self_tensor` (default grid)", lap, f"{lap / exact - 1:+.1e} relative", t_lap),
        ("`PldAccountant.get_delta`", pld_lap, f"{pld_lap / exact - 1:+.1e} relative", t_pld_lap),
    ]

    g_pl = gdp(MU).lower_piecewise_linear()
    t_tensor, f_t = _time(lambda: tensor(*[g_pl] * N), repeats=1)
    t_self, f_s = _time(lambda: self_tensor(g_pl, N))

    def pld_gauss() -> float:
        acc = PldAccountant()
        acc.compose(
            PoissonSampledEvent(event=GaussianEvent(noise_multiplier=1.0 / MU), sampling_rate=1.0),
            count=N,
        )
        return acc.get_delta(1.0)

    t_pld_g, d_pld_g = _time(pld_gauss)
    ref = gdp(1.0).delta(1.0)
    rows_b = [
        ("`fdp.tensor` of 1000 sampled curves", f_t.delta(1.0), t_tensor),
        ("`fdp.self_tensor` of the sampled curve", f_s.delta(1.0), t_self),
        ("`PldAccountant` (numeric path)", d_pld_g, t_pld_g),
        ("closed form `G_1`", ref, None),
    ]

    lines = [
        "## Privacy-loss engine (`benchmarks/loss_engine.py`)",
        "",
        f"Machine: {machine()}.",
        "",
        f"### (a) delta(1) of {N} Laplace mechanisms, mu = 1/sqrt({N})",
        "",
        "| method | delta(1) | vs exact | seconds |",
        "|---|---|---|---|",
    ]
    for name, val, rel, t in rows_a:
        lines.append(f"| {name} | {val:.10f} | {rel} | {'' if t is None else f'{t:.3f}'} |")
    lines += [
        "",
        f"### (b) {N} Gaussian mechanisms, mu = 1/sqrt({N}) each (exact: G_1)",
        "",
        "| method | delta(1) | seconds |",
        "|---|---|---|",
    ]
    for name, val, t in rows_b:
        lines.append(f"| {name} | {val:.10f} | {'' if t is None else f'{t:.3f}'} |")
    text = "\n".join(lines) + "\n"
    print(text)
    if not args.no_write:
        write_section("loss_engine", text)


if __name__ == "__main__":
    main()
