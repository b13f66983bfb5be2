"""Local DP: 1,000,000 users, domain 1,024, epsilon 1, Zipf values; dpkit beside its peers.

For every protocol: clients plus server wall time (median of 3 runs; the server takes reports in
batches of 131,072) and the MSE of the estimated counts over the 1,024 items, against the exact
theoretical variance averaged over the items. Peers (pure-ldp 1.2.0, multi-freq-ldpy 0.2.5) run
the shared protocols in the same process; their clients work one user at a time, so a peer whose
full run would exceed the time budget runs on a smaller Zipf population and its time is
extrapolated linearly to 1,000,000 users (marked in the table); its MSE is reported against the
theoretical variance at the n it ran. multi-freq-ldpy's estimator clips and renormalises, so its
MSE is also compared with dpkit's "normalise" post-processing on the same users.

Run: ``.venv/bin/python benchmarks/ldp.py`` (``--quick`` for a small smoke run).
"""

from __future__ import annotations

import os
import statistics
import sys
import time
import warnings
from collections.abc import Callable
from typing import Any

import numpy as np

from _report import machine, write_section
from dpkit import ldp
from dpkit.cli._ldp import zipf_population
from dpkit.noise import RandomSource

QUICK = "--quick" in sys.argv
USERS = 100_000 if QUICK else 1_000_000
D = 1024
EPS = 1.0
ZIPF = 1.1
BATCH = 1 << 17
REPEATS = 3
PEER_BUDGET = 5.0 if QUICK else 25.0  # seconds per peer run before extrapolating
MEAN_RUNS = 10 if QUICK else 100


def _population(n: int, seed: int) -> np.ndarray:
    return zipf_population(RandomSource(seed=seed, insecure=True), users=n, domain=D,
                           exponent=ZIPF)


def _theory(proto: Any, truth: np.ndarray) -> float:
    n = int(truth.sum())
    return float(np.mean([proto.variance(n, f) for f in truth / n]))


def run_dpkit(cls: type, x: np.ndarray, truth: np.ndarray) -> dict[str, Any]:
    proto = cls(epsilon=EPS, domain=D)
    src = RandomSource()  # secure, OS-keyed: the timing a deployment would see
    times, mses = [], []
    for _ in range(REPEATS):
        start = time.perf_counter()
        agg = proto.aggregator()
        for lo in range(0, x.size, BATCH):
            agg.add(proto.randomize_many(x[lo:lo + BATCH], source=src))
        est = agg.estimate()
        times.append(time.perf_counter() - start)
        mses.append(float(np.mean((est.raw_counts - truth) ** 2)))
    one = [proto.randomize(int(v)) for v in x[:2000]]  # client (stdlib) speed, one report each
    start = time.perf_counter()
    for v in x[:2000]:
        proto.randomize(int(v))
    client_us = (time.perf_counter() - start) / 2000 * 1e6
    assert len(one) == 2000
    theory = _theory(proto, truth)
    return {"name": repr(proto), "time": statistics.median(times), "mse": float(np.mean(mses)),
            "theory": theory, "client_us": client_us}


# ------------------------------------------------------------------------------------------
# peers: each returns estimated counts for items 0..D-1 from values x (0-based)
# ------------------------------------------------------------------------------------------
def _pure_ldp(client: Any, server: Any) -> Callable[[np.ndarray], np.ndarray]:
    def run(x: np.ndarray) -> np.ndarray:
        for v in x:
            server.aggregate(client.privatise(int(v) + 1))  # pure-ldp items are 1..d
        est = server.estimate_all(range(1, D + 1), suppress_warnings=True)
        return np.asarray(est, dtype=np.float64)
    return run


def _peers() -> dict[str, list[tuple[str, Callable[[], Callable[[np.ndarray], np.ndarray]]]]]:
    from multi_freq_ldpy.pure_frequency_oracles.GRR import GRR_Aggregator_MI, GRR_Client
    from multi_freq_ldpy.pure_frequency_oracles.LH import LH_Aggregator_MI, LH_Client
    from multi_freq_ldpy.pure_frequency_oracles.UE import UE_Aggregator_MI, UE_Client
    from pure_ldp.frequency_oracles.direct_encoding import DEClient, DEServer
    from pure_ldp.frequency_oracles.hadamard_response import (
        HadamardResponseClient,
        HadamardResponseServer,
    )
    from pure_ldp.frequency_oracles.local_hashing import (
        FastLHClient,
        FastLHServer,
        LHClient,
        LHServer,
    )
    from pure_ldp.frequency_oracles.unary_encoding import UEClient, UEServer

    def mfl(client: Callable[[int], Any], agg: Callable[[list[Any]], Any]
            ) -> Callable[[], Callable[[np.ndarray], np.ndarray]]:
        def make() -> Callable[[np.ndarray], np.ndarray]:
            def run(x: np.ndarray) -> np.ndarray:
                reports = [client(int(v)) for v in x]
                return np.asarray(agg(reports), dtype=np.float64) * x.size
            return run
        return make

    def hr() -> Callable[[np.ndarray], np.ndarray]:
        server = HadamardResponseServer(EPS, D)
        return _pure_ldp(HadamardResponseClient(EPS, D, server.get_hash_funcs()), server)

    def fast_lh(olh: bool) -> Callable[[], Callable[[np.ndarray], np.ndarray]]:
        def make() -> Callable[[np.ndarray], np.ndarray]:
            server = FastLHServer(EPS, D, 1000, use_olh=olh)
            return _pure_ldp(FastLHClient(EPS, D, 1000, use_olh=olh), server)
        return make

    return {
        "GRR": [
            ("pure-ldp DE", lambda: _pure_ldp(DEClient(EPS, D), DEServer(EPS, D))),
            ("multi-freq-ldpy GRR", mfl(lambda v: GRR_Client(v, D, EPS),
                                        lambda r: GRR_Aggregator_MI(r, D, EPS))),
        ],
        "SUE": [
            ("pure-ldp UE", lambda: _pure_ldp(UEClient(EPS, D), UEServer(EPS, D))),
            ("multi-freq-ldpy SUE", mfl(lambda v: UE_Client(v, D, EPS, False),
                                        lambda r: UE_Aggregator_MI(r, EPS, False))),
        ],
        "OUE": [
            ("pure-ldp UE(oue)", lambda: _pure_ldp(UEClient(EPS, D, use_oue=True),
                                                   UEServer(EPS, D, use_oue=True))),
            ("multi-freq-ldpy OUE", mfl(lambda v: UE_Client(v, D, EPS, True),
                                        lambda r: UE_Aggregator_MI(r, EPS, True))),
        ],
        "OLH": [
            ("pure-ldp LH(olh)", lambda: _pure_ldp(LHClient(EPS, D, use_olh=True),
                                                   LHServer(EPS, D, use_olh=True))),
            ("pure-ldp FastLH(olh, 1000 hashes)", fast_lh(True)),
            ("multi-freq-ldpy OLH", mfl(lambda v: LH_Client(v, D, EPS, True),
                                        lambda r: LH_Aggregator_MI(r, D, EPS, True))),
        ],
        "BLH": [
            ("pure-ldp LH", lambda: _pure_ldp(LHClient(EPS, D), LHServer(EPS, D))),
            ("pure-ldp FastLH(1000 hashes)", fast_lh(False)),
            ("multi-freq-ldpy BLH", mfl(lambda v: LH_Client(v, D, EPS, False),
                                        lambda r: LH_Aggregator_MI(r, D, EPS, False))),
        ],
        "HadamardResponse": [("pure-ldp HR", hr)],
    }


def run_peer(make: Callable[[], Callable[[np.ndarray], np.ndarray]], cls: type
             ) -> dict[str, Any]:
    """Pilot on 3,000 users, then the largest population that fits the budget.

    Also returns MSE / theory at the n that ran, and dpkit's MSE / theory on the same population
    after the "normalise" post-processing (what multi-freq-ldpy applies), over 5 runs.
    """
    pilot = _population(3000, seed=99)
    start = time.perf_counter()
    make()(pilot)
    rate = (time.perf_counter() - start) / pilot.size
    n = int(min(USERS, max(20_000, PEER_BUDGET / max(rate, 1e-9))))
    n = USERS if n >= 0.8 * USERS else n
    x = _population(n, seed=5)
    truth = np.bincount(x, minlength=D).astype(np.float64)
    run = make()
    start = time.perf_counter()
    est = run(x)
    elapsed = time.perf_counter() - start
    mse = float(np.mean((est - truth) ** 2))
    proto = cls(epsilon=EPS, domain=D)
    theory = _theory(proto, truth)
    src = RandomSource()
    norm = []
    for _ in range(5):
        agg = proto.aggregator()
        agg.add(proto.randomize_many(x, source=src))
        norm.append(float(np.mean((agg.estimate(postprocess="normalise").counts - truth) ** 2)))
    return {"n": n, "time": elapsed * USERS / n, "ratio": mse / theory,
            "dpkit_norm_ratio": float(np.mean(norm)) / theory, "extrapolated": n < USERS}


def run_mean(cls: type, t: np.ndarray) -> dict[str, Any]:
    mech = cls(epsilon=EPS)
    src = RandomSource()
    errs, times = [], []
    for _ in range(MEAN_RUNS):
        start = time.perf_counter()
        agg = mech.aggregator()
        for lo in range(0, t.size, BATCH):
            agg.add(mech.randomize_many(t[lo:lo + BATCH], source=src))
        est = agg.estimate()
        times.append(time.perf_counter() - start)
        errs.append((est.mean - float(t.mean())) ** 2)
    theory = mech.variance(t.size, float(np.mean(t * t)))
    return {"name": repr(mech), "time": statistics.median(times), "mse": float(np.mean(errs)),
            "theory": theory}


LOAD: list[float] = []


def main() -> None:
    warnings.filterwarnings("ignore")
    LOAD.append(os.getloadavg()[0])
    x = _population(USERS, seed=1)
    truth = np.bincount(x, minlength=D).astype(np.float64)
    rows = []
    for cls in (ldp.GRR, ldp.SUE, ldp.OUE, ldp.OLH, ldp.BLH, ldp.HadamardResponse):
        res = run_dpkit(cls, x, truth)
        print(f"dpkit {res['name']}: {res['time']:.2f} s, MSE/theory "
              f"{res['mse'] / res['theory']:.3f}", flush=True)
        peers = []
        for label, make in _peers()[cls.__name__]:
            pres = run_peer(make, cls)
            print(f"  {label}: {pres['time']:.1f} s (n={pres['n']:,}), MSE/theory "
                  f"{pres['ratio']:.3f}", flush=True)
            peers.append((label, pres))
        rows.append((cls.__name__, res, peers))

    t = 2.0 * x / (D - 1) - 1.0
    means = [run_mean(cls, t) for cls in (ldp.Duchi, ldp.Piecewise, ldp.Hybrid)]
    LOAD.append(os.getloadavg()[0])
    _write(rows, means)


def _fmt_time(s: float) -> str:
    return f"{s:.2f}" if s < 10 else f"{s:,.0f}"


def _write(rows: list[Any], means: list[dict[str, Any]]) -> None:
    lines = [
        "## Local DP (`benchmarks/ldp.py`)",
        "",
        f"Machine: {machine()}. Command: `.venv/bin/python benchmarks/ldp.py`"
        + (" --quick" if QUICK else "") + f". {USERS:,} users, domain {D}, epsilon {EPS:g}, "
        f"Zipf({ZIPF}) values. dpkit: secure (AES-CTR, OS-keyed) randomness, clients simulated "
        f"with `randomize_many`, server fed in batches of {BATCH:,}; time = clients + server, "
        f"median of {REPEATS}; MSE = mean over the {D} items of (estimate - true count)^2, "
        f"averaged over the {REPEATS} runs; theory = the exact variance averaged over the "
        "items. Peers run one user at a time in the same process; * = run on a smaller "
        f"population (n shown) and its time extrapolated linearly to {USERS:,} users. "
        f"Load average (1 min) at start / end: {LOAD[0]:.1f} / "
        f"{LOAD[-1]:.1f} on {os.cpu_count()} cores (the machine is shared; dpkit and its peers "
        "ran interleaved under the same load).",
        "",
        "### Frequency oracles",
        "",
        "| protocol | library | n run | clients + server (s, for 1M users) | speed-up of dpkit | "
        "MSE / theory (at n run) |",
        "| --- | --- | ---: | ---: | ---: | ---: |",
    ]
    summary = []
    for name, res, peers in rows:
        ratio = res["mse"] / res["theory"]
        lines.append(
            f"| {name} | **dpkit** `{res['name']}` | {USERS:,} | **{_fmt_time(res['time'])}** "
            f"| | **{ratio:.3f}** (MSE {res['mse']:,.0f}) |"
        )
        fastest = min((p["time"] for _, p in peers), default=float("nan"))
        for label, p in peers:
            star = "*" if p["extrapolated"] else ""
            note = ""
            if label.startswith("multi-freq-ldpy"):
                note = (f" (clipped + renormalised; dpkit with `postprocess=\"normalise\"` "
                        f"on the same users: {p['dpkit_norm_ratio']:.3f})")
            lines.append(
                f"| {name} | {label} | {p['n']:,}{star} | {_fmt_time(p['time'])}{star} | "
                f"{p['time'] / res['time']:,.0f}x | {p['ratio']:.3f}{note} |"
            )
        summary.append((name, fastest / res["time"], ratio))
    lines += [
        "",
        "Targets: >= 10x faster than the fastest peer on each shared protocol; MSE within 10% "
        "of theory.",
        "",
        "| protocol | speed-up over the fastest peer | dpkit MSE / theory | targets met |",
        "| --- | ---: | ---: | --- |",
    ]
    for name, speed, ratio in summary:
        ok = speed >= 10 and abs(ratio - 1) <= 0.10
        lines.append(f"| {name} | {speed:,.0f}x | {ratio:.3f} | {'yes' if ok else 'NO'} |")
    lines += [
        "",
        "dpkit's OLH uses the prime g nearest the optimum (g = 3 at epsilon 1, where Wang et al.'s "
        "g = 4 has a 2% smaller variance) so that its hash family is exactly universal and small "
        "enough to group reports; pure-ldp's FastLH restricts users to 1,000 hash functions. "
        "multi-freq-ldpy's estimates are clipped at 0 and renormalised, which lowers the MSE "
        "on small populations and raises it on large Zipf ones (the clipped tail's mass is "
        "taken from the head); pure-ldp's are raw and unbiased like dpkit's.",
        "",
        "Client side (`randomize`, standard library and `secrets` only), microseconds per "
        "report: "
        + ", ".join(f"{name} {res['client_us']:.1f}" for name, res, _ in rows) + ".",
        "",
        "### Mean estimation (values = Zipf ranks mapped to [-1, 1]; no peer implements these)",
        "",
        f"| mechanism | clients + server (s) | MSE of the mean ({MEAN_RUNS} runs) | theory | "
        "MSE / theory |",
        "| --- | ---: | ---: | ---: | ---: |",
    ]
    for m in means:
        lines.append(
            f"| `{m['name']}` | {m['time']:.2f} | {m['mse']:.3e} | {m['theory']:.3e} | "
            f"{m['mse'] / m['theory']:.2f} (+- {2 * (2 / MEAN_RUNS) ** 0.5:.2f}) |"
        )
    write_section("ldp", "\n".join(lines))
    print("\n".join(lines))


if __name__ == "__main__":
    main()
