"""Noise benchmark: dpkit's secure lattice Laplace/Gaussian and its exponential mechanism against
numpy (the insecure floor), OpenDP, diffprivlib and python-dp, in one process.

Run with ``make bench`` (or ``.venv/bin/python benchmarks/noise.py``). Writes the ``noise``
section of ``docs/benchmarks.md`` and prints the same table.

What is timed
-------------
* 10 million Laplace releases (epsilon = 1, L1 sensitivity 1) and 10 million Gaussian releases
  ((1, 1e-6)-DP, L2 sensitivity 1, analytic calibration where the library has it) of a float64
  vector. dpkit: ``Laplace.from_epsilon(...).release(x)`` with the default secure source (AES-CTR
  keyed from the OS, lattice output). numpy: ``x + default_rng().laplace/normal(...)`` (insecure,
  not floating-point safe: the floor). Peers that are much slower are timed on a smaller n and
  extrapolated linearly to 10 million (the table says so): OpenDP ``make_laplace``/
  ``make_gaussian`` over a vector domain; diffprivlib and python-dp, one value per call.
* The exponential mechanism over 100,000 candidates, 1,000 independent draws (epsilon = 1,
  sensitivity 1). numpy: Gumbel arg-max in blocks of 8 rows. OpenDP: ``make_noisy_max`` with the
  zCDP output measure (Gumbel noise, i.e. the exponential mechanism), and diffprivlib's
  ``Exponential`` (constructed once, then one ``randomise`` per draw): both timed on fewer draws
  and extrapolated to 1,000.

Times are medians over REPEATS runs (fewer for the slow peers).
"""

from __future__ import annotations

import statistics
import sys
import time
import traceback
import warnings
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from _report import machine, write_section

N = 10_000_000
N_CANDIDATES = 100_000
N_DRAWS = 1_000
EPSILON = 1.0
DELTA = 1e-6
REPEATS = 5
SLOW_REPEATS = 3


@dataclass
class Row:
    task: str
    impl: str
    measured: int  # values (or draws) actually timed
    seconds: float | None  # median time for ``measured``
    target: int  # what the task asks for (10M values / 1000 draws)
    per_unit: int = 1  # candidate scores per draw (1 for noise rows)
    note: str = ""

    @property
    def extrapolated(self) -> bool:
        return self.measured < self.target

    @property
    def total(self) -> float | None:
        return None if self.seconds is None else self.seconds * self.target / self.measured

    @property
    def throughput(self) -> float | None:
        """Millions of values (noise) or of candidate scores (selection) per second."""
        if self.seconds is None:
            return None
        return self.measured * self.per_unit / self.seconds / 1e6


def median_time(fn: Callable[[], Any], repeats: int) -> float:
    fn()  # warm-up (imports, caches, thread pools)
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def paired_median_times(fns: list[Callable[[], Any]], repeats: int) -> list[float]:
    """Median times of several functions run round-robin (A B A B ...), so that a change in the
    machine's load during the run affects each of them alike."""
    for fn in fns:
        fn()  # warm-up
    times: list[list[float]] = [[] for _ in fns]
    for _ in range(repeats):
        for i, fn in enumerate(fns):
            t0 = time.perf_counter()
            fn()
            times[i].append(time.perf_counter() - t0)
    return [statistics.median(t) for t in times]


def attempt(
    task: str,
    impl: str,
    target: int,
    measured: int,
    build: Callable[[], Callable[[], Any]],
    repeats: int,
    per_unit: int = 1,
    note: str = "",
) -> Row:
    """Time ``build()()``; a peer that fails to import or run is reported as unavailable."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            fn = build()
            secs = median_time(fn, repeats)
        return Row(task, impl, measured, secs, target, per_unit, note)
    except Exception as exc:  # report, never crash the whole benchmark
        reason = f"unavailable: {type(exc).__name__}: {str(exc).splitlines()[0][:120]}"
        traceback.print_exc(file=sys.stderr)
        return Row(task, impl, measured, None, target, per_unit, reason)


# ---------------------------------------------------------------------------------------------
# Laplace and Gaussian
# ---------------------------------------------------------------------------------------------
def noise_rows() -> list[Row]:
    from dpkit.mechanisms import Gaussian, Laplace

    x = np.linspace(-100.0, 100.0, N)
    lap = Laplace.from_epsilon(epsilon=EPSILON, sensitivity=1.0)
    gau = Gaussian.from_epsilon_delta(epsilon=EPSILON, delta=DELTA, sensitivity=1.0)
    b, sigma = lap.scale, gau.sigma
    rows: list[Row] = []

    # numpy (insecure floor) and dpkit (secure, lattice), timed round-robin
    rng = np.random.default_rng()
    floor = "insecure, not floating-point safe (floor)"
    t_np_l, t_dp_l, t_np_g, t_dp_g = paired_median_times(
        [
            lambda: x + rng.laplace(0.0, b, N),
            lambda: lap.release(x),
            lambda: x + rng.normal(0.0, sigma, N),
            lambda: gau.release(x),
        ],
        REPEATS,
    )
    rows += [
        Row("Laplace", "numpy default_rng().laplace", N, t_np_l, N, note=floor),
        Row("Gaussian", "numpy default_rng().normal", N, t_np_g, N, note=floor),
        Row(
            "Laplace",
            "dpkit Laplace.release",
            N,
            t_dp_l,
            N,
            note=f"AES-CTR CSPRNG, lattice 2^{int(np.log2(lap.granularity))}",
        ),
        Row(
            "Gaussian",
            "dpkit Gaussian.release",
            N,
            t_dp_g,
            N,
            note=f"AES-CTR CSPRNG, lattice 2^{int(np.log2(gau.granularity))}",
        ),
    ]

    # OpenDP: vector measurements (slow: measured on a smaller n)
    def opendp(kind: str, n: int) -> Callable[[], Any]:
        import opendp.prelude as dp

        dp.enable_features("contrib")
        dom = dp.vector_domain(dp.atom_domain(T=float, nan=False))
        if kind == "laplace":
            meas = dp.m.make_laplace(dom, dp.l1_distance(T=float), scale=b)
        else:
            meas = dp.m.make_gaussian(dom, dp.l2_distance(T=float), scale=sigma)
        data = x[:n].tolist()
        return lambda: meas(data)

    n_odp = 50_000
    rows.append(
        attempt(
            "Laplace",
            "OpenDP make_laplace (vector)",
            N,
            n_odp,
            lambda: opendp("laplace", n_odp),
            SLOW_REPEATS,
        )
    )
    n_odp_g = 20_000
    rows.append(
        attempt(
            "Gaussian",
            "OpenDP make_gaussian (vector)",
            N,
            n_odp_g,
            lambda: opendp("gaussian", n_odp_g),
            SLOW_REPEATS,
        )
    )

    # diffprivlib: one value per randomise call
    def diffprivlib(kind: str, n: int) -> Callable[[], Any]:
        from diffprivlib.mechanisms import GaussianAnalytic
        from diffprivlib.mechanisms import Laplace as DLaplace

        mech: Any = (
            DLaplace(epsilon=EPSILON, sensitivity=1.0)
            if kind == "laplace"
            else GaussianAnalytic(epsilon=EPSILON, delta=DELTA, sensitivity=1.0)
        )
        data = x[:n].tolist()
        return lambda: [mech.randomise(v) for v in data]

    n_loop = 50_000
    rows.append(
        attempt(
            "Laplace",
            "diffprivlib Laplace.randomise (loop)",
            N,
            n_loop,
            lambda: diffprivlib("laplace", n_loop),
            SLOW_REPEATS,
        )
    )
    rows.append(
        attempt(
            "Gaussian",
            "diffprivlib GaussianAnalytic.randomise (loop)",
            N,
            n_loop,
            lambda: diffprivlib("gaussian", n_loop),
            SLOW_REPEATS,
        )
    )

    # python-dp (PyDP): one value per add_noise call
    def pydp(kind: str, n: int) -> Callable[[], Any]:
        from pydp.algorithms.numerical_mechanisms import GaussianMechanism, LaplaceMechanism

        mech: Any = (
            LaplaceMechanism(EPSILON, 1.0)
            if kind == "laplace"
            else GaussianMechanism(EPSILON, DELTA, 1.0)
        )
        data = x[:n].tolist()
        return lambda: [mech.add_noise(v) for v in data]

    n_pydp = 100_000
    rows.append(
        attempt(
            "Laplace",
            "python-dp LaplaceMechanism.add_noise (loop)",
            N,
            n_pydp,
            lambda: pydp("laplace", n_pydp),
            SLOW_REPEATS,
        )
    )
    rows.append(
        attempt(
            "Gaussian",
            "python-dp GaussianMechanism.add_noise (loop)",
            N,
            n_pydp,
            lambda: pydp("gaussian", n_pydp),
            SLOW_REPEATS,
        )
    )
    return rows


# ---------------------------------------------------------------------------------------------
# Exponential mechanism
# ---------------------------------------------------------------------------------------------
def selection_rows() -> list[Row]:
    from dpkit.mechanisms import ExponentialMechanism

    scores = np.random.default_rng(2026).normal(0.0, 10.0, N_CANDIDATES)
    em = ExponentialMechanism(epsilon=EPSILON, sensitivity=1.0)
    factor = EPSILON / 2.0  # exp(epsilon u / (2 Delta))
    rows: list[Row] = []
    rng = np.random.default_rng()

    def numpy_gumbel() -> np.ndarray:
        z = scores * factor
        out = np.empty(N_DRAWS, dtype=np.int64)
        for start in range(0, N_DRAWS, 8):
            rows_ = min(8, N_DRAWS - start)
            noisy = rng.gumbel(size=(rows_, N_CANDIDATES))
            noisy += z
            out[start : start + rows_] = np.argmax(noisy, axis=1)
        return out

    t_np, t_dp = paired_median_times(
        [numpy_gumbel, lambda: em.release_many(scores, count=N_DRAWS)], SLOW_REPEATS
    )
    rows += [
        Row(
            "Exponential mechanism",
            "numpy Gumbel arg-max",
            N_DRAWS,
            t_np,
            N_DRAWS,
            N_CANDIDATES,
            note="insecure (floor)",
        ),
        Row(
            "Exponential mechanism",
            "dpkit ExponentialMechanism.release_many",
            N_DRAWS,
            t_dp,
            N_DRAWS,
            N_CANDIDATES,
            note="AES-CTR CSPRNG, Gumbel-max",
        ),
    ]

    def opendp_noisy_max(draws: int) -> Callable[[], Any]:
        import opendp.prelude as dp

        dp.enable_features("contrib")
        meas = dp.m.make_noisy_max(
            dp.vector_domain(dp.atom_domain(T=float, nan=False)),
            dp.linf_distance(T=float),
            dp.zero_concentrated_divergence(),
            scale=1.0 / factor,
        )
        data = scores.tolist()
        return lambda: [meas(data) for _ in range(draws)]

    n_odp = 20
    rows.append(
        attempt(
            "Exponential mechanism",
            "OpenDP make_noisy_max (Gumbel, zCDP measure)",
            N_DRAWS,
            n_odp,
            lambda: opendp_noisy_max(n_odp),
            SLOW_REPEATS,
            N_CANDIDATES,
        )
    )

    def diffprivlib_exponential(draws: int) -> Callable[[], Any]:
        from diffprivlib.mechanisms import Exponential

        mech = Exponential(epsilon=EPSILON, sensitivity=1.0, utility=scores.tolist())
        return lambda: [mech.randomise() for _ in range(draws)]

    n_dpl = 50
    rows.append(
        attempt(
            "Exponential mechanism",
            "diffprivlib Exponential.randomise",
            N_DRAWS,
            n_dpl,
            lambda: diffprivlib_exponential(n_dpl),
            SLOW_REPEATS,
            N_CANDIDATES,
            note="constructed once, outside the timing",
        )
    )
    return rows


# ---------------------------------------------------------------------------------------------
# Report
# ---------------------------------------------------------------------------------------------
def _fmt_seconds(s: float | None) -> str:
    if s is None:
        return "-"
    return f"{s:.3g}"


def table(rows: list[Row]) -> tuple[str, dict[str, float]]:
    floors = {r.task: r.throughput for r in rows if r.impl.startswith("numpy") and r.throughput}
    lines = [
        "| task | implementation | timed n | median time for timed n (s) | time for the task (s) "
        "| throughput (M/s) | ratio to numpy | notes |",
        "| --- | --- | ---: | ---: | ---: | ---: | ---: | --- |",
    ]
    ratios: dict[str, float] = {}
    for r in rows:
        floor = floors.get(r.task)
        ratio = (r.throughput / floor) if (r.throughput and floor) else None
        if r.impl.startswith("dpkit") and ratio is not None:
            ratios[r.task] = ratio
        note = r.note
        if r.extrapolated and r.seconds is not None:
            note = (f"{note}; " if note else "") + (
                f"measured on {r.measured:,} and extrapolated linearly to {r.target:,}"
            )
        lines.append(
            f"| {r.task} | {r.impl} | {r.measured:,} | {_fmt_seconds(r.seconds)} | "
            f"{_fmt_seconds(r.total)}{' (extrap.)' if r.extrapolated and r.total else ''} | "
            f"{'-' if r.throughput is None else f'{r.throughput:.3g}'} | "
            f"{'-' if ratio is None else f'{ratio:.3g}x'} | {note} |"
        )
    return "\n".join(lines), ratios


def _load() -> str:
    import os

    try:
        return ", ".join(f"{v:.1f}" for v in os.getloadavg())
    except OSError:  # pragma: no cover - not on Linux
        return "unknown"


def main() -> None:
    t0 = time.perf_counter()
    rows = noise_rows() + selection_rows()
    body, ratios = table(rows)
    lap, gau, em = (
        ratios.get("Laplace"),
        ratios.get("Gaussian"),
        ratios.get("Exponential mechanism"),
    )

    def verdict(value: float | None, need: float) -> str:
        if value is None:
            return "not measured"
        return f"{value:.2f}x of numpy: {'met' if value >= need else 'NOT met'}"

    from importlib import metadata

    versions = []
    for dist in ("numpy", "opendp", "diffprivlib", "python-dp"):
        try:
            versions.append(f"{dist} {metadata.version(dist)}")
        except metadata.PackageNotFoundError:
            versions.append(f"{dist} not installed")
    md = "\n".join(
        [
            "## Noise and selection (`benchmarks/noise.py`)",
            "",
            f"Machine: {machine()}. Versions: {', '.join(versions)}. "
            f"Medians of {REPEATS} runs (3 for the exponential mechanism and the slow peers); "
            "dpkit "
            "and numpy are timed round-robin so that load changes hit both alike. "
            "Laplace: epsilon = 1, sensitivity 1; Gaussian: (1, 1e-6)-DP, analytic calibration "
            "(diffprivlib `GaussianAnalytic`; python-dp's own calibration). Throughput is millions "
            "of released values per second (noise) or millions of candidate scores per second "
            f"(exponential mechanism, {N_CANDIDATES:,} candidates x {N_DRAWS:,} draws). "
            "dpkit splits large releases over two threads (numpy releases the GIL); numpy's "
            "generator calls and the peers run on one. The machine is shared: see the load average "
            "at the end.",
            "",
            body,
            "",
            "Targets: dpkit secure Laplace and Gaussian at >= 0.5x numpy's throughput; the "
            "exponential mechanism within 2x of numpy's arg-max (>= 0.5x its throughput).",
            f"- Laplace: {verdict(lap, 0.5)}",
            f"- Gaussian: {verdict(gau, 0.5)}",
            f"- Exponential mechanism: {verdict(em, 0.5)}",
            "",
            f"Whole benchmark run: {time.perf_counter() - t0:.0f} s; load average at the end: "
            f"{_load()}.",
        ]
    )
    write_section("noise", md)
    print(md)


if __name__ == "__main__":
    main()
