"""Synthetic data: dpkit's MST on a census-like people table, fit time and marginal error.

A generated table of people (``--rows`` rows, one to four rows per person) with categorical and
numeric columns that depend on one another (a chain region -> education -> occupation ->
income and age -> marital status -> household size, among others). dpkit fits MST on a
session with person-level bounding (``--max-rows`` rows per person) at each epsilon (delta
1e-6, zCDP), samples as many rows as the bounded table holds, and reports the fit time and
the mean total-variation distance of all 2-way and 3-way marginals of the synthetic table
from those of the true table (on the declared cells; numeric columns binned as declared).

Inference cross-check (``--mbi-python PATH``, a Python with ``mbi==2.0.0`` installed, which
brings JAX): the same noisy measurements of one fit are given to mbi's ``MirrorDescent``
(Private-PGM's estimator) and to dpkit's tree estimator; the largest difference between their
fitted marginals and both fits' losses are printed. Peers' whole MST pipelines (OpenDP,
SmartNoise Synth; one row per person) are not run yet.

    PYTHONPATH=src python benchmarks/synth.py --rows 200000 --epsilons 1
    PYTHONPATH=src python benchmarks/synth.py --rows 50000 --epsilons 1 \
        --mbi-python /tmp/mbi/bin/python
"""

from __future__ import annotations

import argparse
import itertools
import json
import subprocess
import tempfile
import time
from typing import Any

import numpy as np
import pandas as pd

from _report import machine, write_section
from dpkit.accounting import Budget
from dpkit.analytics import Session
from dpkit.noise import RandomSource
from dpkit.synth import MST, Categorical, Numeric

REGIONS = ["north", "south", "east", "west", "centre", "islands"]
EDU = ["none", "primary", "secondary", "vocational", "bachelor", "master", "doctorate"]
OCC = ["manual", "clerical", "service", "technical", "professional", "manager", "unemployed"]
MARITAL = ["single", "married", "divorced", "widowed"]
TENURE = ["owner", "mortgage", "renter", "social"]


def people(rows: int, seed: int = 0) -> pd.DataFrame:
    """A census-like table: about ``rows`` rows, one to four per person (yearly records)."""
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
            "uid": uid,
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


def codes(frame: pd.DataFrame) -> pd.DataFrame:
    """Each declared column as its cell code (missing last), for comparing marginals."""
    out = {}
    for c, dom in DOMAINS.items():
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

    def spy(sizes: Any, edges: Any, y1: Any, s1: float, y2: Any, s2: float, **kw: Any) -> Any:
        kept.update(
            sizes=list(sizes),
            edges=[list(e) for e in edges],
            sigma_1=s1,
            sigma_2=s2,
            y_nodes=[y.tolist() for y in y1],
            y_pairs=[y.tolist() for y in y2],
        )
        return fit_tree(sizes, edges, y1, s1, y2, s2, **kw)

    mst_module.fit_tree = spy  # type: ignore[assignment]
    try:
        model = MST(DOMAINS, max_rows=max_rows).fit(session, rho=session.budget.remaining_native)
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


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--rows", type=int, default=1_000_000)
    ap.add_argument("--epsilons", type=float, nargs="+", default=[0.5, 1.0, 2.0, 4.0])
    ap.add_argument("--max-rows", type=int, default=2)
    ap.add_argument("--memory-limit", default="1GB")
    ap.add_argument("--path", default="/tmp/dpkit-synth-people.parquet")
    ap.add_argument("--mbi-python", default=None)
    ap.add_argument("--write", action="store_true", help="write docs/benchmarks.md's section")
    args = ap.parse_args()
    frame = people(args.rows)
    frame.to_parquet(args.path)
    # the true table the model describes: each person's rows bounded like the fit bounds them
    bounded = frame.groupby("uid").head(args.max_rows)
    true = codes(bounded)
    lines = [
        "## Synthetic data: MST with person-level bounding (`benchmarks/synth.py`)",
        "",
        f"A generated census-like table: {len(frame):,} rows, {frame.uid.nunique():,} people "
        f"(one to four rows each), {len(DOMAINS)} modelled columns ({MST(DOMAINS).cells:,} cells "
        f"in all 2-way marginals), Parquet, DuckDB with memory_limit={args.memory_limit}; "
        f"{args.max_rows} rows kept per person; delta 1e-6, zCDP. TV: mean total-variation "
        "distance of all 2-way (3-way) marginals of a synthetic table of the bounded table's "
        "size from the bounded table's; the last column is a table whose columns are "
        f"independent. Fit time includes the engine's statement (one per fit). {machine()}.",
        "",
        "| epsilon | fit s | 2-way TV | 3-way TV | independent 2-way TV |",
        "| --- | --- | --- | --- | --- |",
    ]
    print("\n".join(lines))
    rng = np.random.default_rng(1)
    indep = true.apply(lambda c: rng.permutation(c.to_numpy()))
    base = marginal_tv(true, indep, 2)
    for eps in args.epsilons:
        budget = Budget(epsilon=eps, delta=1e-6, method="zcdp")
        session = Session(
            args.path, privacy_unit="uid", budget=budget, memory_limit=args.memory_limit
        )
        t0 = time.perf_counter()
        model = MST(DOMAINS, max_rows=args.max_rows).fit(session, epsilon=eps, delta=1e-6)
        fit = time.perf_counter() - t0
        syn = codes(model.sample(len(bounded), source=RandomSource(seed=2, insecure=True)))
        row = (
            f"| {eps} | {fit:.1f} | {marginal_tv(true, syn, 2):.4f} | "
            f"{marginal_tv(true, syn, 3):.4f} | {base:.4f} |"
        )
        print(row)
        lines.append(row)
    if args.mbi_python:
        budget = Budget(rho=1.0)
        session = Session(args.path, privacy_unit="uid", budget=budget)
        lines += ["", mbi_check(session, args.mbi_python, args.max_rows)]
    if args.write:
        write_section("synth", "\n".join(lines))


if __name__ == "__main__":
    main()
