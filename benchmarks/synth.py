"""Synthetic data: dpkit's MST and AIM beside SmartNoise Synth's and OpenDP's, and a 10M-row fit.

A generated table of people (``--rows`` rows, one to four rows per person) with categorical and
numeric columns that depend on one another (a chain region -> education -> occupation ->
income and age -> marital status -> household size, among others), binned into the cells of
``DOMAINS``. Error: the mean total-variation distance of all 2-way and 3-way marginals of a
synthetic table (as many rows as the true one) from the true table's, on the cells.

Comparison (section ``synth``), at each epsilon (delta 1e-6) and on the SAME one-row-per-person
table (each person's first row), given to everyone as integer codes of the same bins so no one
spends budget on binning, with the public fact that it has no missing value (dpkit declares
``Categorical(codes, missing=False)``; SmartNoise models no missing cell, OpenDP adds a null
key): dpkit's MST and AIM (a session with ``privacy_unit=None``),
SmartNoise Synth 1.0.8's ``MSTSynthesizer`` and ``AIMSynthesizer`` and OpenDP's
``dp.mbi.MST`` / ``dp.mbi.AIM`` (contingency tables, through ``mbi``); plus dpkit's MST with
person-level bounding (``--max-rows`` rows per person) on the multi-row table, scored against
the bounded table. Every fit runs alone in a fresh process (`the benchmark's `synth_worker.py``,
JSON on stdin), which reports the fit time and its peak resident memory; the peers run in their
own environment (``--peers-python``, ``make .venv-synthpeers/bin/python``).

10M rows (section ``synth-big``, ``--big-rows 10000000``): the people table written to Parquet
in chunks, dpkit's MST with person-level bounding under DuckDB ``memory_limit`` (1 GB), fit
time and the fitting process's peak RSS.

Inference cross-check (``--mbi-python PATH``, a Python with ``mbi==2.0.0``): the same noisy
measurements of one fit given to mbi's ``MirrorDescent`` and to dpkit's tree estimator.

    PYTHONPATH=src python benchmarks/synth.py --rows 1000000 \
        --peers-python .venv-synthpeers/bin/python --big-rows 10000000 --write
    PYTHONPATH=src python benchmarks/synth.py --rows 20000 --epsilons 1 --aim-epsilons
    PYTHONPATH=src nice -n 10 python benchmarks/synth.py --rows 100000 \
        --aim-epsilons 0.5 1 2 4 --peer-aim-epsilons 1 --jobs 3 \
        --peers-python .venv-synthpeers/bin/python --write   # docs/benchmarks.md, 2026-11-29

``--runs N`` fits every library, method and epsilon N times (fresh noise each) and reports the
means, the TVs with their standard errors: one fit's TV varies by a few percent from run to run,
as much as the libraries differ, so a single run cannot rank them.

``--results PATH`` (default ``synth-results.json`` beside ``--path``): a JSON file where each
finished fit's row (rho, times, peak memory, TVs) is stored as soon as the fit ends, keyed by
epsilon, library, method, table and run index. ``--reuse``: the fits already in that file are not
run again (nor is an existing ``--path`` file rewritten: the scores must compare the same table),
and the table is built from the file's rows plus the new ones; so a run cut short is finished by
the same command with ``--reuse``:

    PYTHONPATH=src nice -n 10 python benchmarks/synth.py --rows 100000 \
        --aim-epsilons 0.5 1 2 4 --peer-aim-epsilons 1 --runs 3 --jobs 2 \
        --peers-python .venv-synthpeers/bin/python --reuse --write
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor, as_completed
from typing import Any

import numpy as np
import pandas as pd

from _report import machine, write_section
from dpkit.accounting import Budget
from dpkit.analytics import Session
from dpkit.synth import MST, Categorical, Numeric

REGIONS = ["north", "south", "east", "west", "centre", "islands"]
EDU = ["none", "primary", "secondary", "vocational", "bachelor", "master", "doctorate"]
OCC = ["manual", "clerical", "service", "technical", "professional", "manager", "unemployed"]
MARITAL = ["single", "married", "divorced", "widowed"]
TENURE = ["owner", "mortgage", "renter", "social"]


def people(rows: int, seed: int = 0, first_uid: int = 0) -> pd.DataFrame:
    """A census-like table: about ``rows`` rows, one to four per person (yearly records);
    person ids from ``first_uid``."""
    rng = np.random.default_rng(seed)
    n_people = max(1, rows // 2)
    per = rng.integers(1, 5, n_people)
    uid = np.repeat(np.arange(n_people), per)[:rows]
    n = uid.size
    p_region = rng.dirichlet(np.ones(len(REGIONS)) * 3)
    region = rng.choice(len(REGIONS), n_people, p=p_region)[uid]
    age = np.clip(rng.normal(44, 18, n_people), 16, 99)[uid]
    sex = rng.choice(["F", "M"], n_people)[uid]
    edu_shift = region * 0.25 + (age < 35) * 0.8
    edu = np.clip(np.round(rng.normal(2.5 + edu_shift, 1.3)), 0, len(EDU) - 1).astype(int)
    occ = np.clip(np.round(edu * 0.8 + rng.normal(0, 1.2, n)), 0, len(OCC) - 1).astype(int)
    occ = np.where(rng.random(n) < 0.06, len(OCC) - 1, occ)
    income = np.exp(rng.normal(9.6 + 0.18 * occ + 0.1 * edu, 0.5))
    income = np.where(occ == len(OCC) - 1, income * 0.2, income)
    marital = np.clip(np.round((age - 20) / 18 + rng.normal(0, 0.7, n)), 0, 3).astype(int)
    household = np.clip(np.round(1 + (marital == 1) * 1.5 + rng.poisson(0.8, n)), 1, 9)
    tenure = np.clip(np.round(2.5 - income / 40_000 + rng.normal(0, 0.8, n)), 0, 3).astype(int)
    hours = np.clip(rng.normal(38 - (occ == len(OCC) - 1) * 30, 8, n), 0, 80)
    return pd.DataFrame(
        {
            "uid": uid + first_uid,
            "region": np.array(REGIONS)[region],
            "sex": sex,
            "age": age,
            "education": np.array(EDU)[edu],
            "occupation": np.array(OCC)[occ],
            "income": income,
            "marital": np.array(MARITAL)[marital],
            "household": household.astype(float),
            "tenure": np.array(TENURE)[tenure],
            "hours": hours,
        }
    )


DOMAINS: dict[str, Any] = {
    "region": Categorical(REGIONS),
    "sex": Categorical(["F", "M"]),
    "age": Numeric(0, 100, 10),
    "education": Categorical(EDU),
    "occupation": Categorical(OCC),
    "income": Numeric(0, 200_000, 10),
    "marital": Categorical(MARITAL),
    "household": Numeric(0.5, 9.5, 9),
    "tenure": Categorical(TENURE),
    "hours": Numeric(0, 80, 8),
}


def codes(frame: pd.DataFrame, domains: dict[str, Any] | None = None) -> pd.DataFrame:
    """Each declared column as its cell code (missing last), for comparing marginals."""
    out = {}
    for c, dom in (domains or DOMAINS).items():
        if isinstance(dom, Categorical):
            idx = {v: i for i, v in enumerate(dom.values)}
            out[c] = frame[c].map(lambda v, idx=idx, k=dom.size - 1: idx.get(v, k)).astype(int)
        else:
            x = np.clip(frame[c].to_numpy(dtype=float), dom.lower, dom.upper)
            b = np.minimum(((x - dom.lower) / (dom.upper - dom.lower) * dom.bins), dom.bins - 1)
            out[c] = np.where(np.isnan(x), dom.size - 1, np.floor(np.nan_to_num(b))).astype(int)
    return pd.DataFrame(out)


def marginal_tv(true: pd.DataFrame, syn: pd.DataFrame, k: int) -> float:
    """Mean total-variation distance over all k-way marginals (cell codes)."""
    out = []
    for cols in itertools.combinations(DOMAINS, k):
        a = true.groupby(list(cols)).size() / len(true)
        b = syn.groupby(list(cols)).size() / len(syn)
        both = pd.concat([a, b], axis=1).fillna(0.0)
        out.append(0.5 * float((both[0] - both[1]).abs().sum()))
    return float(np.mean(out))


_MBI = r"""
import json, sys
import numpy as np
import jax
jax.config.update("jax_enable_x64", True)
import mbi
data = json.load(open(sys.argv[1]))
names = [f"c{i}" for i in range(len(data["sizes"]))]
dom = mbi.Domain(names, data["sizes"])
ms = [mbi.LinearMeasurement(np.array(y), (names[i],), stddev=data["sigma_1"])
      for i, y in enumerate(data["y_nodes"])]
ms += [mbi.LinearMeasurement(np.array(y).ravel(), (names[a], names[b]), stddev=data["sigma_2"])
       for (a, b), y in zip(data["edges"], data["y_pairs"])]
model = mbi.estimation.MirrorDescent().estimate(dom, ms, known_total=data["total"], iters=3000)
out = {"nodes": [np.asarray(model.project([n]).datavector()).tolist() for n in names],
       "pairs": [np.asarray(model.project([names[a], names[b]]).datavector()).tolist()
                 for a, b in data["edges"]]}
json.dump(out, open(sys.argv[2], "w"))
"""


def loss(nodes: Any, pairs: Any, data: dict[str, Any]) -> float:
    """Private-PGM's weighted squared loss of fitted counts against the measurements."""
    t = data["total"]
    out = sum(
        float(np.sum((t * np.ravel(p) - np.ravel(y)) ** 2)) / data["sigma_1"] ** 2
        for p, y in zip(nodes, data["y_nodes"], strict=True)
    )
    out += sum(
        float(np.sum((t * np.ravel(p) - np.ravel(y)) ** 2)) / data["sigma_2"] ** 2
        for p, y in zip(pairs, data["y_pairs"], strict=True)
    )
    return 0.5 * out


def mbi_check(session: Session, python: str, max_rows: int) -> str:
    """Fit once, keep the noisy measurements, fit them again with mbi; compare."""
    from dpkit.synth import mst as mst_module
    from dpkit.synth._tree import fit_tree

    kept: dict[str, Any] = {}
    original = mst_module.fit_tree

    def spy(sizes: Any, edges: Any, y1: Any, s1: Any, y2: Any, s2: float, **kw: Any) -> Any:
        kept.update(
            sizes=list(sizes),
            edges=[list(e) for e in edges],
            sigma_1=max(float(np.max(s)) for s in s1),  # one for all cells: not compressed
            sigma_2=s2,
            y_nodes=[y.tolist() for y in y1],
            y_pairs=[y.tolist() for y in y2],
        )
        return fit_tree(sizes, edges, y1, s1, y2, s2, **kw)

    mst_module.fit_tree = spy  # type: ignore[assignment]
    try:
        model = MST(DOMAINS, max_rows=max_rows, compress=False).fit(
            session, rho=session.budget.remaining_native
        )
    finally:
        mst_module.fit_tree = original  # type: ignore[assignment]
    kept["total"] = model.tree.total
    with tempfile.TemporaryDirectory() as tmp:
        inp, out = f"{tmp}/in.json", f"{tmp}/out.json"
        with open(inp, "w") as fh:
            json.dump(kept, fh)
        t0 = time.perf_counter()
        subprocess.run([python, "-c", _MBI, inp, out], check=True)
        took = time.perf_counter() - t0
        with open(out) as fh:
            theirs = json.load(fh)
    t = model.tree.total
    diff = max(
        float(np.max(np.abs(np.ravel(a) * t - np.ravel(b))))
        for a, b in zip(
            [*model.tree.nodes, *model.tree.pairs],
            [*theirs["nodes"], *theirs["pairs"]],
            strict=True,
        )
    )
    mine = loss(model.tree.nodes, model.tree.pairs, kept)
    other = loss(
        [np.array(n) / t for n in theirs["nodes"]], [np.array(p) / t for p in theirs["pairs"]], kept
    )
    line = (
        "Inference cross-check on the same noisy measurements (rho 1): mbi 2.0 "
        f"`MirrorDescent` (3000 iterations, {took:.0f} s with JAX's start) against dpkit's "
        f"tree estimator (500 iterations): largest cell difference {diff:.1f} rows of "
        f"{t:,.0f}; weighted squared loss dpkit {mine:.1f}, mbi {other:.1f}."
    )
    print(line)
    return line


HERE = os.path.dirname(os.path.abspath(__file__))
WORKER = os.path.join(HERE, "shared", "synth_worker.py")
SRC = os.path.join(os.path.dirname(HERE), "src")
#: The binned columns as integer codes (the missing code left out: the table has none). dpkit
#: is told so with ``missing=False`` (public knowledge, given to every library: SmartNoise
#: models no missing cell either), so its synthetic table has no missing value.
CODE_SIZES = {c: d.size - 1 for c, d in DOMAINS.items()}
CODE_DOMAINS: dict[str, Any] = {
    c: Categorical(list(range(k)), missing=False) for c, k in CODE_SIZES.items()
}


def run_worker(python: str, job: dict[str, Any]) -> tuple[dict[str, Any], pd.DataFrame | None]:
    """One fit in a fresh process; its result and synthetic table (``None`` if it failed)."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([SRC, env.get("PYTHONPATH", "")]).rstrip(os.pathsep)
    proc = subprocess.run(
        [python, WORKER], input=json.dumps(job), capture_output=True, text=True, env=env
    )
    if proc.returncode != 0:
        lines = [ln.strip() for ln in proc.stderr.strip().splitlines() if ln.strip()]
        said = [ln for ln in lines if "Error" in ln or "Exception" in ln or "insufficient" in ln]
        tail = (said or lines)[-1:]
        print(f"  {job['lib']} {job['method']} failed: {' '.join(tail)}", flush=True)
        return {"error": " ".join(tail)[:200]}, None
    result = json.loads(proc.stdout.strip().splitlines()[-1])
    return result, pd.read_parquet(job["out"])


def rho_of(eps: float, delta: float) -> float:
    """dpkit's zCDP budget for an ``(epsilon, delta)`` share (what dpkit spends and OpenDP gets)."""
    return float(Budget(epsilon=eps, delta=delta, method="zcdp").zcdp_share(eps, delta)[0])


Key = tuple[float, str, str, str, int]  # epsilon, library, method, table, run index
FIELDS = ("rho", "fit_s", "cpu_s", "peak_mb", "tv2", "tv3")  # a stored fit's row (a ``Run``)


def load_results(path: str, rows: int) -> dict[Key, Run]:
    """The fits stored in a ``--results`` file (none if it does not exist); it must be of a
    table of the same ``--rows``."""
    if not os.path.exists(path):
        return {}
    with open(path) as fh:
        data = json.load(fh)
    if data["rows"] != rows:
        raise SystemExit(f"{path} holds fits of a {data['rows']}-row table, not {rows}")
    out: dict[Key, Run] = {}
    for f in data["fits"]:
        key = (float(f["epsilon"]), f["lib"], f["method"], f["table"], int(f["run"]))
        out[key] = tuple(float(f[k]) for k in FIELDS)  # type: ignore[assignment]
    return out


def save_results(path: str, rows: int, fits: dict[Key, Run]) -> None:
    """All fits so far to the ``--results`` file (written whole, then renamed over the old)."""
    keys = ("epsilon", "lib", "method", "table", "run")
    data = {
        "rows": rows,
        "fits": [
            dict(zip(keys + FIELDS, (*key, *run), strict=True)) for key, run in sorted(fits.items())
        ],
    }
    with open(f"{path}.tmp", "w") as fh:
        json.dump(data, fh, indent=1)
    os.replace(f"{path}.tmp", path)


def compare(args: argparse.Namespace, frame: pd.DataFrame, tmp: str) -> list[str]:
    """The comparison section: every library on the one-row table, dpkit also person-level."""
    one = frame.groupby("uid").head(1)
    true_one = codes(one)
    one_path = os.path.join(tmp, "one-row-codes.parquet")
    true_one.to_parquet(one_path)
    bounded = frame.groupby("uid").head(args.max_rows)
    true_multi = codes(bounded)
    rng = np.random.default_rng(1)
    indep = true_one.apply(lambda c: rng.permutation(c.to_numpy()))
    load0 = os.getloadavg()[0]
    indep_tv = marginal_tv(true_one, indep, 2)

    def header(load1: float) -> list[str]:
        return _header(args, frame, indep_tv, load0, load1)

    configs: list[tuple[str, str, str]] = [("dpkit", "MST", "multi")]
    for method in ("MST", "AIM"):
        configs += [("dpkit", method, "one")]
        if method == "MST":  # the same fit with i.i.d. rows, as the peers' are drawn
            configs += [("dpkit", method, "one-iid")]
        if args.peers_python:
            configs += [("smartnoise", method, "one"), ("opendp", method, "one")]
    peer_aim = args.aim_epsilons if args.peer_aim_epsilons is None else args.peer_aim_epsilons
    plan: list[tuple[float, str, str, str, pd.DataFrame, str, dict[str, Any]]] = []
    for eps in args.epsilons:
        for lib, method, data in configs:
            if method == "AIM" and eps not in (args.aim_epsilons if lib == "dpkit" else peer_aim):
                continue
            job: dict[str, Any] = {
                "lib": lib,
                "method": method,
                "epsilon": eps,
                "delta": DELTA,
                "rho": rho_of(eps, DELTA),
                "memory_limit": args.memory_limit,
            }
            if data == "multi":
                truth = true_multi
                job.update(
                    path=args.path,
                    domains={c: d.to_dict() for c, d in DOMAINS.items()},
                    privacy_unit="uid",
                    max_rows=args.max_rows,
                    rows=len(bounded),
                )
            else:
                truth = true_one
                job.update(path=one_path, columns=CODE_SIZES, rows=len(one))
                if data == "one-iid":
                    job.update(sampling="iid")
            python = sys.executable if lib == "dpkit" else args.peers_python
            plan.append((eps, lib, method, data, truth, python, job))
    # each configuration --runs times, each run a fresh fit in its own process (fresh noise);
    # with --reuse, the runs already in the results file are taken from it, not run again
    fits = load_results(args.results, args.rows) if args.reuse else {}

    def key(i: int, r: int) -> Key:
        return (*plan[i][:4], r)

    tasks = [(i, r) for i in range(len(plan)) for r in range(args.runs) if key(i, r) not in fits]
    done: dict[int, list[Run]] = {
        i: [run for k, run in sorted(fits.items()) if k[:4] == plan[i][:4]]
        for i in range(len(plan))
    }
    failed: dict[int, str] = {}
    rows: dict[int, str] = {}
    scores: dict[int, Score] = {}
    for i in range(len(plan)):
        if done[i]:
            rows[i], score = table_row(args, plan[i][:4], done[i], None)
            if score is not None:
                scores[i] = score
    # --jobs fits at a time, each alone in its process; run by run (every configuration's first
    # run before any second one), the peers' AIM (the longest) last within a run, so a run cut
    # short has the rest; each fit stored in the results file as it ends, each row rewritten
    # as its runs come in, in the plan's order
    tasks.sort(key=lambda t: (t[1], plan[t[0]][2] == "AIM" and plan[t[0]][1] != "dpkit"))
    print(f"{len(fits)} fits from {args.results}, {len(tasks)} to run", flush=True)
    with ThreadPoolExecutor(max_workers=args.jobs) as pool:
        futures = {}
        for i, r in tasks:
            job = dict(plan[i][6], out=os.path.join(tmp, f"syn-{i}-{r}.parquet"), seed=2 + r)
            futures[pool.submit(run_worker, plan[i][5], job)] = (i, r)
        for future in as_completed(futures):
            i, r = futures[future]
            eps, lib, method, data, truth, _, _ = plan[i]
            res, syn = future.result()
            if syn is None:
                failed[i] = str(res["error"])
            else:
                syn_codes = codes(syn, DOMAINS if data == "multi" else CODE_DOMAINS)
                tv2, tv3 = marginal_tv(truth, syn_codes, 2), marginal_tv(truth, syn_codes, 3)
                run = (res["rho"], res["fit_s"], res["cpu_s"], res["peak_mb"], tv2, tv3)
                done[i].append(run)
                fits[key(i, r)] = run
                save_results(args.results, args.rows, fits)
            rows[i], score = table_row(args, plan[i][:4], done[i], failed.get(i))
            if score is not None:
                scores[i] = score
            print(rows[i], flush=True)
            if args.write:  # the section so far: a run cut short still leaves its rows
                write_section("synth", "\n".join(section(header, rows, scores)))
    return section(header, rows, scores)


Run = tuple[float, float, float, float, float, float]  # rho, fit s, CPU s, peak MB, 2-way, 3-way
Score = tuple[float, str, str, float, float, float, float]  # eps, lib, method, s, CPU s, TVs


def mean_se(values: list[float], digits: int = 4) -> str:
    """The mean of the runs, with its standard error (``s / sqrt(n)``) when there are two or
    more."""
    v = np.asarray(values, dtype=np.float64)
    if v.size < 2:
        return f"{v.mean():.{digits}f}"
    se = float(v.std(ddof=1)) / np.sqrt(v.size)
    return f"{v.mean():.{digits}f} ± {se:.{digits}f}"


def table_row(
    args: argparse.Namespace,
    what: tuple[float, str, str, str],
    runs: list[Run],
    error: str | None,
) -> tuple[str, Score | None]:
    """One configuration's row: the means over its runs (TV with standard errors), and its
    score for the targets (one-row table only)."""
    eps, lib, method, data = what
    name = {"dpkit": "dpkit", "smartnoise": "SmartNoise Synth", "opendp": "OpenDP"}[lib]
    table = {"one": "one row per person", "one-iid": "one row per person, i.i.d. rows"}.get(
        data, f"{args.max_rows} rows per person"
    )
    if not runs:
        return f"| {eps:g} | {name} {method} | {table} | failed: {error} |||||||", None
    rho, fit, cpu, peak, tv2, tv3 = (list(c) for c in zip(*runs, strict=True))
    note = f" ({len(runs)} of {args.runs}; failed: {error})" if error else ""
    row = (
        f"| {eps:g} | {name} {method} | {table} | {len(runs)}{note} | {np.mean(rho):.4f} | "
        f"{np.mean(fit):.1f} | {np.mean(cpu):.1f} | {np.mean(peak):,.0f} | "
        f"{mean_se(tv2)} | {mean_se(tv3)} |"
    )
    if data != "one":
        return row, None
    f, c, t2, t3 = (float(np.mean(x)) for x in (fit, cpu, tv2, tv3))
    return row, (eps, lib, method, f, c, t2, t3)


def section(header: Any, rows: dict[int, str], scores: dict[int, Score]) -> list[str]:
    """The comparison section from the rows in so far (in the plan's order)."""
    lines: list[str] = header(os.getloadavg()[0]) + [rows[i] for i in sorted(rows)]
    return lines + targets([scores[i] for i in sorted(scores)])


def targets(scores: list[Score]) -> list[str]:
    """The issue's targets on the one-row table, per epsilon and method: dpkit's TV against the
    best peer's (2-way and 3-way, means over the runs) and its fit time (wall and CPU) against
    the fastest peer's."""
    out = []
    for eps, method in dict.fromkeys((e, m) for e, _, m, *_ in scores):
        mine = [s for s in scores if s[:3] == (eps, "dpkit", method)]
        peers = [s for s in scores if s[0] == eps and s[2] == method and s[1] != "dpkit"]
        if not mine or not peers:
            continue
        _, _, _, fit, cpu, tv2, tv3 = mine[0]
        best2, best3 = min(p[5] for p in peers), min(p[6] for p in peers)
        fast, fast_cpu = min(p[3] for p in peers), min(p[4] for p in peers)
        error = "met" if tv2 <= best2 and tv3 <= best3 else "not met"
        speed = "met" if fit < fast and cpu < fast_cpu else "not met"
        out.append(
            f"| {eps:g} | {method} | {tv2:.4f} / {best2:.4f} | {tv3:.4f} / {best3:.4f} | "
            f"{error} | {fit:.1f} / {fast:.1f} | {cpu:.1f} / {fast_cpu:.1f} | {speed} |"
        )
    if not out:
        return []
    return [
        "",
        "Targets on the one-row table, dpkit / the best peer, means over the runs (error: no "
        "worse in 2-way and 3-way TV; speed: a faster fit in wall and CPU time):",
        "",
        "| epsilon | method | 2-way TV | 3-way TV | error | fit s | CPU s | speed |",
        "| ---: | --- | ---: | ---: | --- | ---: | ---: | --- |",
        *out,
    ]


def _header(
    args: argparse.Namespace, frame: pd.DataFrame, indep_tv: float, load0: float, load1: float
) -> list[str]:
    aim_eps = ", ".join(f"{e:g}" for e in args.epsilons if e in args.aim_epsilons) or "none"
    peer_aim = args.aim_epsilons if args.peer_aim_epsilons is None else args.peer_aim_epsilons
    peer_eps = ", ".join(f"{e:g}" for e in args.epsilons if e in peer_aim) or "none"
    aim_eps = aim_eps if peer_eps == aim_eps else f"{aim_eps} (the peers' at {peer_eps} only)"
    jobs = (
        f" {args.jobs} fits ran at a time (each in its own process), so each fit shared the "
        "machine with another one too."
        if args.jobs > 1
        else ""
    )
    return [
        "## Synthetic data: MST and AIM beside SmartNoise Synth and OpenDP (`benchmarks/synth.py`)",
        "",
        f"A generated census-like table: {len(frame):,} rows, {frame.uid.nunique():,} people "
        f"(one to four rows each), {len(DOMAINS)} modelled columns ({MST(DOMAINS).cells:,} "
        "cells in all 2-way marginals with dpkit's missing cells), binned into the same cells "
        "for everyone. *One row per person*: each person's first row, given to every library "
        "as integer codes of the bins (no budget spent on binning), with the public fact "
        "that it has no missing value (dpkit: `Categorical(codes, missing=False)`; SmartNoise "
        "models no missing cell; OpenDP adds a null key). *"
        f"{args.max_rows} rows per person*: dpkit on the multi-row Parquet file with "
        f"person-level bounding ({args.max_rows} rows kept per person, scored against the "
        "bounded table). TV: mean total-variation distance of all 2-way (3-way) marginals of "
        "a synthetic table of the true table's size from the true table's (a table of "
        f"independent columns scores {indep_tv:.4f} in 2-way TV). "
        f"delta {DELTA:g}; AIM at epsilon {aim_eps}. Synthetic tables: dpkit's with its "
        "default `sample(method='stratified')` (each column drawn given the columns it depends "
        "on, the rows sharing those values getting the new column's values in numbers within "
        "one row of the model's expectation, in a fresh random order); the row *i.i.d. rows* "
        "is the same dpkit MST fit sampled with `method='iid'`, which compares the fitted "
        "models alone. The peers' tables are i.i.d. rows, through mbi's "
        "`synthetic_data(method='sample')`, not its default `'round'`, whose stratified draw "
        "follows the row order and so adds dependencies the model does not have (about 0.2 in "
        "2-way TV here, whatever the epsilon; the benchmark's `synth_worker.py` explains). "
        f"Runs: each library, method and epsilon fitted {args.runs} time(s) (fewer where the "
        "runs column says so), each fit in a fresh process with fresh noise; the row gives the "
        "means over its runs, TV as mean ± standard error (the runs' standard deviation over "
        "the square root of their number). "
        "rho: the zCDP budget the fit spends. Fit s: the fit call in a fresh process (dpkit's "
        "includes reading the Parquet file through DuckDB; the peers get a table already in "
        "memory); CPU s: the CPU time of all that process's threads during the fit call (less "
        "sensitive to the machine's load than the wall time); peak MB: that process's peak RSS "
        "(imports and the loaded table included). "
        f"{machine()}; the machine is shared and loaded (load average {load0:.1f} at the "
        f"start, {load1:.1f} at the end), so times are under load.{jobs}",
        "",
        "How each is set up. dpkit: a session with `Budget(epsilon, delta, method='zcdp')`, "
        "the fit takes the `(epsilon, delta)` share, which it converts to rho (rounded down, "
        "with a slack for floating point); MST spends rho/3 on 1-way marginals, rho/3 on "
        "selecting the tree, rho/3 on the 2-way marginals, rare 1-way cells compressed as in "
        "the paper (merged when their noisy count is below 3 sigma, shared back in proportion "
        "to their clipped noisy counts; dropped when that count is <= 0), exact tree fit; "
        "AIM: 16 d rounds, "
        "0.9 of each round on measuring, all 3-way marginals as workload, model-size limit "
        "80 MB. SmartNoise Synth: `MSTSynthesizer(epsilon, delta)` / "
        "`AIMSynthesizer(epsilon, delta, degree=3)` (its default workload is 2-way), "
        "`fit(codes, categorical_columns=all, preprocessor_eps=0)`; its preprocessor is a "
        "label encoder per column that reads the distinct codes from the data without spending "
        "budget; it converts `(epsilon, delta)` to rho with OpenDP's zCDP-to-approximate-DP "
        "conversion (slightly more rho than dpkit's); MST: the same thirds, mbi 1.1's mirror "
        "descent (5,000 iterations) with the true row count as known total, and it compresses "
        "rare 1-way cells; AIM: as the paper. OpenDP (0.16, `opendp[mbi]`): "
        "`Context.compositor(privacy_unit=unit_of(contributions=1), "
        "privacy_loss=loss_of(rho=dpkit's rho))`, `contingency_table(keys=the codes, "
        "algorithm=dp.mbi.MST() / dp.mbi.AIM())`; keys for every column, so no budget on key "
        "discovery, and a null key added per column; it spends half of rho on all 1-way "
        "marginals first, then MST/AIM split the rest 0.9 measuring / 0.1 selecting; "
        "mirror descent from mbi.",
        "",
        "| epsilon | library | table | runs | rho | fit s | CPU s | peak MB | 2-way TV "
        "| 3-way TV |",
        "| --- | --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]


def write_people(path: str, rows: int, chunk: int = 1_000_000) -> tuple[int, int]:
    """The people table of ``rows`` rows written to Parquet chunk by chunk (each chunk its own
    people); returns the rows and people written."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    writer = None
    done = people_n = 0
    try:
        for k, start in enumerate(range(0, rows, chunk)):
            part = people(min(chunk, rows - start), seed=100 + k, first_uid=people_n)
            people_n += int(part.uid.nunique())
            done += len(part)
            t = pa.Table.from_pandas(part, preserve_index=False)
            if writer is None:
                writer = pq.ParquetWriter(path, t.schema)
            writer.write_table(t)
    finally:
        if writer is not None:
            writer.close()
    return done, people_n


def big(args: argparse.Namespace, tmp: str) -> list[str]:
    """The person-level MST fit on a ``--big-rows`` Parquet file under the memory limit."""
    path = os.path.join(tmp, "people-big.parquet")
    t0 = time.perf_counter()
    n_rows, n_people = write_people(path, args.big_rows)
    gen = time.perf_counter() - t0
    print(f"wrote {n_rows:,} rows ({n_people:,} people) in {gen:.0f} s", flush=True)
    load0 = os.getloadavg()[0]
    job = {
        "lib": "dpkit",
        "method": "MST",
        "path": path,
        "domains": {c: d.to_dict() for c, d in DOMAINS.items()},
        "privacy_unit": "uid",
        "max_rows": args.max_rows,
        "epsilon": 1.0,
        "delta": DELTA,
        "memory_limit": args.memory_limit,
        "rows": 100_000,
        "out": os.path.join(tmp, "syn-big.parquet"),
    }
    res, syn = run_worker(sys.executable, job)
    load1 = os.getloadavg()[0]
    size = os.path.getsize(path) / 2**20
    if syn is None:
        result = f"The fit failed: {res['error']}"
    else:
        result = (
            f"Fit {res['fit_s']:.1f} s (one engine statement counting all 2-way marginals, "
            f"then selection, measurement and the tree fit), peak RSS of the fitting process "
            f"{res['peak_mb']:,.0f} MB ({res['base_mb']:,.0f} MB after imports); a 100,000-row "
            "synthetic table sampled from it. DuckDB's memory_limit bounds its own buffers, not "
            f"the process: the fit grew the process by {res['peak_mb'] - res['base_mb']:,.0f} "
            "MB, about the limit, on top of the interpreter and its libraries (DuckDB, NumPy, "
            "pandas, PyArrow), so the process peaks near the limit plus those."
        )
    lines = [
        "## Synthetic data: a 10M-row person-level fit (`benchmarks/synth.py --big-rows`)",
        "",
        f"dpkit's MST at epsilon 1, delta {DELTA:g}, on a Parquet file of {n_rows:,} rows "
        f"({n_people:,} people, {size:,.0f} MiB) with person-level bounding ({args.max_rows} "
        f"rows per person), DuckDB memory_limit={args.memory_limit}. {result} {machine()}; "
        f"shared machine under load (load average {load0:.1f} before the fit, {load1:.1f} "
        "after).",
    ]
    print("\n".join(lines))
    return lines


DELTA = 1e-6


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--rows", type=int, default=1_000_000)
    ap.add_argument("--epsilons", type=float, nargs="+", default=[0.5, 1.0, 2.0, 4.0])
    ap.add_argument(
        "--aim-epsilons", type=float, nargs="*", default=[1.0], help="AIM's (none: no AIM)"
    )
    ap.add_argument(
        "--peer-aim-epsilons",
        type=float,
        nargs="*",
        default=None,
        help="the peers' AIM epsilons (default: --aim-epsilons)",
    )
    ap.add_argument("--jobs", type=int, default=1, help="fits run at the same time")
    ap.add_argument(
        "--runs",
        type=int,
        default=1,
        help="fits of each library, method and epsilon (the table shows mean ± s.e.)",
    )
    ap.add_argument("--max-rows", type=int, default=2)
    ap.add_argument("--memory-limit", default="1GB")
    ap.add_argument("--path", default="/tmp/dpkit-synth-people.parquet")
    ap.add_argument("--peers-python", default=None, help="a Python with the peers installed")
    ap.add_argument("--big-rows", type=int, default=0, help="also the fit on this many rows")
    ap.add_argument("--no-compare", action="store_true", help="only the --big-rows fit")
    ap.add_argument("--mbi-python", default=None)
    ap.add_argument("--write", action="store_true", help="write docs/benchmarks.md's sections")
    ap.add_argument("--results", default=None, help="the fits' JSON file (default: beside --path)")
    ap.add_argument(
        "--reuse", action="store_true", help="take the fits in --results, run only the rest"
    )
    args = ap.parse_args()
    if args.results is None:
        args.results = os.path.join(os.path.dirname(args.path), "synth-results.json")
    with tempfile.TemporaryDirectory() as tmp:
        if not args.no_compare:
            frame = people(args.rows)  # deterministic (seed 0): the same table every time
            if not (args.reuse and os.path.exists(args.path)):
                frame.to_parquet(args.path)
            lines = compare(args, frame, tmp)
            if args.mbi_python:
                session = Session(args.path, privacy_unit="uid", budget=Budget(rho=1.0))
                lines += ["", mbi_check(session, args.mbi_python, args.max_rows)]
            if args.write:
                write_section("synth", "\n".join(lines))
        if args.big_rows:
            lines = big(args, tmp)
            if args.write:
                write_section("synth-big", "\n".join(lines))


if __name__ == "__main__":
    main()
