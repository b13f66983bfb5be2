"""One synthetic-data fit in a fresh process: reads a JSON job on stdin, prints a JSON result.

Used by ``benchmarks/synth.py`` so that every library's fit (dpkit's, SmartNoise Synth's,
OpenDP's) runs alone in its own process: the peak resident set size it reports is that fit's
(read right after the fit, imports and the loaded table included), and the peers
run in their own virtual environment (their pins clash with dpkit's).

The job (JSON object):

* ``lib``: ``"dpkit"``, ``"smartnoise"`` or ``"opendp"``; ``method``: ``"MST"`` or ``"AIM"``;
* ``path``: a Parquet file; ``columns``: ``{name: number of codes}`` for a table of integer
  codes ``0 .. k - 1``, none missing (dpkit declares each ``Categorical(codes, missing=False)``:
  the public fact, known to every library, that the table has no missing value, so dpkit's
  synthetic table models none, like SmartNoise's; every library gets the same binned columns:
  nobody spends budget on
  binning), or ``domains``: ``{name: dpkit domain dict}`` for dpkit on the raw people table;
* ``epsilon``, ``delta``; ``rho`` (the zCDP budget OpenDP is given, and dpkit's ``rho`` for
  ``(epsilon, delta)``, computed by the caller); ``privacy_unit`` and ``max_rows`` (dpkit);
  ``memory_limit`` (dpkit's DuckDB);
* ``rows``: how many synthetic rows to sample; ``out``: where to write them (Parquet); ``seed``:
  dpkit's sampling seed (default 2; the peers sample with NumPy's global generator);
  ``sampling``: dpkit's ``sample(method=...)``, ``"stratified"`` (its default) or ``"iid"``;

The result: ``fit_s`` (the fit call only: for dpkit it includes reading the Parquet file
through DuckDB; the peers are handed a table already in memory), ``cpu_s`` (the CPU time of
all the process's threads during that call, ``time.process_time``: on a shared, loaded
machine it depends less on what else runs than the wall time), ``peak_mb`` (peak RSS of the
process up to the end of the fit), ``base_mb`` (RSS after imports and loading, before the
fit) and whatever the library says about its budget (``info``).

How the peers' synthetic tables are drawn. Both peers keep their fitted model as an mbi 1.1
``MarkovRandomField`` and, by default, turn it into rows with its ``synthetic_data(method=
"round")``. That method is not a faithful sampler of the model: after the first column, each
column is drawn by stratifying the uniforms over the rows of a parent-value group *in row
order* (``u = (rank within the group + noise) / group size``). The row order is itself a
function of the columns already drawn, so every later column becomes correlated with columns
the model says it is conditionally independent of; measured here, it more than doubles their
2-way TV against the truth (about 0.20 at every epsilon), which says nothing about their
models. So the worker draws the peers' rows with mbi's own ``method="sample"``: i.i.d. rows,
each column from the model's conditional given the already-drawn columns of its clique, which
is what dpkit's ``sample(method="iid")`` does (ancestral sampling on the junction tree).
dpkit's default, ``method="stratified"``, is the stratified draw done right (the codes of each
group handed out in a fresh random order, so the model's conditional independences hold): the
benchmark gives dpkit its default and also reports dpkit's MST with i.i.d. rows, the row that
compares the fitted models with the same i.i.d. sampling error as the peers'. OpenDP's
``ContingencyTable.synthesize`` takes the method as an argument; SmartNoise's ``sample`` does
not, so its fitted model is wrapped (:class:`_IIDSampler`) and SmartNoise's own decoding
(undoing MST's compressed rare cells, the label encoder) runs unchanged on the rows.
"""

from __future__ import annotations

import json
import resource
import sys
import time
from typing import Any


def _rss_mb() -> float:
    """This process's peak resident set size so far, in MiB: ``VmHWM`` of ``/proc/self/status``
    (the high-water mark of this program's own memory map; ``ru_maxrss`` would also count the
    parent's pages from before the ``exec`` on Linux)."""
    try:
        with open("/proc/self/status", encoding="ascii") as fh:
            for line in fh:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) / 1024.0
    except OSError:
        pass
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0


def _dpkit(job: dict[str, Any]) -> tuple[Any, float, float, dict[str, Any]]:
    from dpkit.accounting import Budget
    from dpkit.analytics import Session
    from dpkit.noise import RandomSource
    from dpkit.synth import AIM, MST, Categorical
    from dpkit.synth._domain import domain_from_dict

    if "domains" in job:
        domains: dict[str, Any] = {c: domain_from_dict(d) for c, d in job["domains"].items()}
    else:
        # codes 0 .. k - 1 and no missing value: public knowledge every library gets
        domains = {c: Categorical(list(range(k)), missing=False) for c, k in job["columns"].items()}
    eps, delta = job["epsilon"], job["delta"]
    session = Session(
        job["path"],
        privacy_unit=job.get("privacy_unit"),
        budget=Budget(epsilon=eps, delta=delta, method="zcdp"),
        memory_limit=job.get("memory_limit"),
    )
    cls = MST if job["method"] == "MST" else AIM
    synth = cls(domains, max_rows=job.get("max_rows", 1))
    base = _rss_mb()
    t0, c0 = time.perf_counter(), time.process_time()
    model = synth.fit(session, epsilon=eps, delta=delta)
    took, cpu = time.perf_counter() - t0, time.process_time() - c0
    peak = _rss_mb()
    # the sampler's seed: one per run (the same seed would draw runs with the same uniforms)
    frame = model.sample(
        job["rows"],
        source=RandomSource(seed=job.get("seed", 2), insecure=True),
        method=job.get("sampling", "stratified"),
    )
    info = {"rho": model.info["rho"]}
    return frame, took, peak, {"base_mb": base, "cpu_s": cpu, **info}


class _IIDSampler:
    """An mbi ``MarkovRandomField`` whose ``synthetic_data`` always samples rows i.i.d. from the
    model (``method="sample"``), whatever method its caller asks for."""

    def __init__(self, model: Any) -> None:
        self.model = model

    def synthetic_data(self, rows: int | None = None, method: str = "sample") -> Any:
        del method  # SmartNoise asks for mbi's default, "round": see the module docstring
        return self.model.synthetic_data(rows=rows, method="sample")

    def __getattr__(self, name: str) -> Any:
        return getattr(self.model, name)


def _smartnoise(job: dict[str, Any]) -> tuple[Any, float, float, dict[str, Any]]:
    import pandas as pd
    from snsynth.aim import AIMSynthesizer
    from snsynth.mst import MSTSynthesizer
    from snsynth.utils import cdp_rho

    data = pd.read_parquet(job["path"])[list(job["columns"])]
    eps, delta = job["epsilon"], job["delta"]
    if job["method"] == "MST":
        synth: Any = MSTSynthesizer(epsilon=eps, delta=delta)
    else:  # the workload every AIM here gets: all 3-way marginals (its default is 2-way)
        synth = AIMSynthesizer(epsilon=eps, delta=delta, degree=3)
    base = _rss_mb()
    t0, c0 = time.perf_counter(), time.process_time()
    # codes as categorical columns; preprocessor_eps=0: no budget on preprocessing
    synth.fit(data, categorical_columns=list(job["columns"]), preprocessor_eps=0.0)
    took, cpu = time.perf_counter() - t0, time.process_time() - c0
    peak = _rss_mb()
    synth.synthesizer = _IIDSampler(synth.synthesizer)
    out = synth.sample(job["rows"])
    frame = pd.DataFrame(out, columns=list(job["columns"]))
    return frame, took, peak, {"base_mb": base, "cpu_s": cpu, "rho": float(cdp_rho(eps, delta))}


def _opendp(job: dict[str, Any]) -> tuple[Any, float, float, dict[str, Any]]:
    import opendp.prelude as dp
    import polars as pl

    dp.enable_features("contrib")
    cols = list(job["columns"])
    frame = pl.read_parquet(job["path"]).select(cols)
    rho = job["rho"]
    algorithm: Any = dp.mbi.MST() if job["method"] == "MST" else dp.mbi.AIM()
    keys = {c: list(range(k)) for c, k in job["columns"].items()}

    def release(budget: float) -> Any:
        context = dp.Context.compositor(
            data=frame.lazy(),
            privacy_unit=dp.unit_of(contributions=1),
            privacy_loss=dp.loss_of(rho=budget),
            split_evenly_over=1,
        )
        query = context.query().select(cols).contingency_table(keys=keys, algorithm=algorithm)
        return query.release()

    base = _rss_mb()
    t0, c0 = time.perf_counter(), time.process_time()
    for attempt in range(6):
        # OpenDP 0.16 splits rho between its steps in floating point and can refuse its own
        # select step by one unit in the last place ("insufficient budget for query:
        # 0.01480306349853894 > 0.014803063498538934" at rho 0.29606): retry k (up to 5)
        # gives it rho (1 + k 1e-12), in its favour, which moves the rounding; the fit that
        # succeeds is timed alone
        try:
            table = release(rho * (1.0 + attempt * 1e-12))
            break
        except dp.OpenDPException as exc:
            if "insufficient budget" not in str(exc) or attempt == 5:
                raise
            t0, c0 = time.perf_counter(), time.process_time()
    rho *= 1.0 + attempt * 1e-12
    took, cpu = time.perf_counter() - t0, time.process_time() - c0
    peak = _rss_mb()
    syn = table.synthesize(job["rows"], method="sample").to_pandas()
    return syn[cols], took, peak, {"base_mb": base, "cpu_s": cpu, "rho": rho}


def main() -> None:
    job = json.loads(sys.stdin.read())
    run = {"dpkit": _dpkit, "smartnoise": _smartnoise, "opendp": _opendp}[job["lib"]]
    frame, took, peak, info = run(job)
    frame.to_parquet(job["out"])
    print(json.dumps({"fit_s": took, "peak_mb": peak, **info}))


if __name__ == "__main__":
    main()
