"""Noisy top-k benchmark: dpkit's top-k mechanisms against OpenDP's ``make_noisy_top_k`` and
report-noisy-max chains, at equal budget.

Run with ``PYTHONPATH=src .venv/bin/python benchmarks/top_k.py``. Writes the ``top-k`` section of
``docs/benchmarks.md`` and prints the same table.

Setup: N candidates whose scores are Zipf-like counts ``round(200 / (i + 1))`` (sensitivity 1,
not treated as monotone by any method), k = 5, epsilon in {1, 4} in total for the k
selections. Reported over TRIALS releases per method: how often the exact true top-k (as an
ordered list) is returned, the mean rank error (mean over positions j of ``|true rank of the
j-th returned candidate - j|``) and the median time per release. OpenDP is calibrated by
binary search on its own privacy map to the same pure epsilon.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable

import numpy as np

from _report import machine, write_section
from dpkit.mechanisms import NoisyTopK

N = 100
K = 5
TRIALS = 400
SCORES = np.round(200.0 / (np.arange(N) + 1.0))


def _opendp(eps: float) -> Callable[[], list[int]] | None:
    try:
        import opendp.prelude as dp
    except ImportError:
        return None
    dp.enable_features("contrib")

    def make(scale: float) -> object:
        return dp.m.make_noisy_top_k(
            dp.vector_domain(dp.atom_domain(T=float, nan=False)),
            dp.linf_distance(T=float),
            dp.max_divergence(),
            k=K,
            scale=scale,
        )

    scale = dp.binary_search_param(make, d_in=1.0, d_out=eps, T=float)
    m = make(scale)
    values = [float(v) for v in SCORES]
    return lambda: list(m(values))  # type: ignore[operator]


def _measure(run: Callable[[], list[int]]) -> tuple[float, float, float]:
    exact, errors, times = 0, [], []
    for _ in range(TRIALS):
        t0 = time.perf_counter()
        out = run()
        times.append(time.perf_counter() - t0)
        exact += list(out) == list(range(K))  # the scores decrease with the index
        errors.append(float(np.mean([abs(int(r) - j) for j, r in enumerate(out)])))
    return exact / TRIALS, float(np.mean(errors)), statistics.median(times)


def main() -> None:
    rows = []
    for eps in (1.0, 4.0):
        methods: dict[str, Callable[[], list[int]] | None] = {}
        for label, kwargs in (
            ("dpkit one-shot Gumbel", {"method": "gumbel"}),
            ("dpkit one-shot Laplace", {"method": "laplace"}),
            ("dpkit RNM chain (Laplace)", {"method": "peeling", "noise": "laplace"}),
            ("dpkit RNM chain (exponential)", {"method": "peeling", "noise": "exponential"}),
        ):
            m = NoisyTopK(epsilon=eps, sensitivity=1.0, k=K, **kwargs)  # type: ignore[arg-type]
            methods[label] = lambda m=m: list(m.release(SCORES))
        methods["OpenDP make_noisy_top_k"] = _opendp(eps)
        for label, run in methods.items():
            if run is None:
                rows.append(f"| {eps} | {label} | not installed | | |")
                continue
            hit, err, t = _measure(run)
            rows.append(f"| {eps} | {label} | {hit:.2f} | {err:.2f} | {t * 1e6:.0f} |")
    table = "\n".join(
        [
            "## Noisy top-k (benchmarks/top_k.py)",
            "",
            f"{N} Zipf-like counts, k = {K}, {TRIALS} releases per row, {machine()}.",
            "epsilon is the total for the k selections (pure DP, non-monotone scores).",
            "",
            "| epsilon | method | exact top-k rate | mean rank error | median time (us) |",
            "| --- | --- | --- | --- | --- |",
            *rows,
        ]
    )
    print(table)
    write_section("top-k", table)


if __name__ == "__main__":
    main()
