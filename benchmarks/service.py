"""The curator service under load and under kill -9: writes the "service" section of
docs/benchmarks.md.

Load: ``dpkit serve`` in its own process on a loopback port; 32 analysts (threads, one token
each) send 200 count queries each, concurrently, against one budget that runs out before the
end. Reported: overspend (total and per analyst), ledger records lost (answers without their
charge) and stray (charges without an answer), and the client-side latency of the count query
on the cached table (p50, p99).

Faults: 100 trials of start the service, send queries from 4 analysts, kill -9 it at a random
moment while charges are in flight; then reopen the ledger: overspend and answers without a
charge.

    PYTHONPATH=src python benchmarks/service.py [--analysts 32] [--queries 200] [--trials 100]
"""

from __future__ import annotations

import argparse
import os
import random
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from fractions import Fraction
from pathlib import Path
from typing import Any

from _report import machine, write_section

TOTAL = 3.0


def _reopen(url: str) -> tuple[object, list[object]]:
    from dpkit.accounting import Budget
    from dpkit.ledger import open_ledger

    b = Budget.open(open_ledger(url), name="budget")
    return b, list(b.history())


def load(tmp: Path, people: Path, analysts: int, queries: int) -> dict[str, object]:
    from dpkit.service._state import ServiceState
    from shared.service_harness import COUNT_QUERY, client, loopback_socket, wait_healthy

    url = f"sqlite:///{tmp / 'load.db'}"
    cap = 0.1
    cost = TOTAL * 1.1 / (analysts * queries)  # 10% more asked than the total holds
    st = ServiceState(url)
    tokens = {f"a{i:02d}": st.add_token(f"a{i:02d}", role="analyst", epsilon=cap, delta=1e-7)
              for i in range(analysts)}
    st.close()
    sock = loopback_socket()
    port = sock.getsockname()[1]
    sock.close()
    proc = subprocess.Popen(
        [sys.executable, "-c", "from dpkit.cli import main; main()", "serve", str(people),
         "--privacy-unit", "user_id", "--budget", f"epsilon={TOTAL},delta=1e-6", "--ledger",
         url, "--host", "127.0.0.1", "--port", str(port), "--rate", "100000",
         "--burst", "100000"], stderr=subprocess.DEVNULL)
    base = f"http://127.0.0.1:{port}"
    query = dict(COUNT_QUERY, epsilon=cost)
    try:
        wait_healthy(base, 120)

        def one(name: str) -> list[tuple[int, str | None, float]]:
            out = []
            with client(base, tokens[name]) as c:
                for _ in range(queries):
                    t0 = time.perf_counter()
                    r = c.post("/v1/query", json=query)
                    dt = time.perf_counter() - t0
                    out.append((r.status_code,
                                r.json()["query_id"] if r.status_code == 200 else None, dt))
            return out

        t0 = time.perf_counter()
        with ThreadPoolExecutor(analysts) as pool:
            rows = [x for xs in pool.map(one, tokens) for x in xs]
        wall = time.perf_counter() - t0
    finally:
        proc.terminate()
        proc.wait(30)
    budget, hist = _reopen(url)
    answered = {q for code, q, _ in rows if code == 200}
    charged = {h.metadata.get("query_id") for h in hist}  # type: ignore[attr-defined]
    ok = sorted(dt for code, _, dt in rows if code == 200)
    over = max(0.0, float(Fraction(budget.spent_epsilon_exact) - Fraction(TOTAL)))  # type: ignore[attr-defined]
    sub_over = max(0.0, *(budget.sub_budget(a).spent[0] - cap  # type: ignore[attr-defined]
                          for a in budget.sub_budgets()))  # type: ignore[attr-defined]
    return {"requests": len(rows), "answered": len(answered),
            "refused": sum(code == 403 for code, _, _ in rows),
            "other": sum(code not in (200, 403) for code, _, _ in rows),
            "overspend": over, "sub_overspend": sub_over,
            "lost": len(answered - charged), "stray": len(charged - answered),
            "p50_ms": 1e3 * statistics.median(ok), "p99_ms": 1e3 * ok[int(0.99 * (len(ok) - 1))],
            "throughput": len(rows) / wall}


def kills(tmp: Path, people: Path, trials: int) -> dict[str, object]:
    from dpkit.service._state import ServiceState
    from shared import service_process as _child
    from shared.service_harness import COUNT_QUERY
    from shared.service_harness import hammer as _hammer

    url = f"sqlite:///{tmp / 'kill.db'}"
    st = ServiceState(url)
    tokens = [st.add_token(f"k{i}", role="analyst", epsilon=1.0, delta=1e-7) for i in range(4)]
    st.close()
    config = {"data": str(people), "budget_epsilon": TOTAL, "budget_delta": 1e-6,
              "privacy_unit": "user_id", "ledger_url": url, "rate": 1e6, "burst": 10**6}
    query = dict(COUNT_QUERY, epsilon=TOTAL / (trials * 1.5))
    rng = random.Random(1)
    answered: list[str] = []
    codes: list[int] = []
    t0 = time.perf_counter()
    for _ in range(trials):
        proc, base = _child.start(config, wait=False)
        stop = threading.Event()
        first = len(answered)
        ts = [threading.Thread(target=_hammer, args=(base, t, query, stop, answered, codes))
              for t in tokens]
        for t in ts:
            t.start()
        deadline = time.monotonic() + 30
        while len(answered) == first and 403 not in codes[-4:] and time.monotonic() < deadline:
            time.sleep(0.002)
        time.sleep(rng.uniform(0.0, 0.025))
        proc.kill()
        proc.join(10)
        stop.set()
        for t in ts:
            t.join(30)
    per_trial = (time.perf_counter() - t0) / trials
    budget, hist = _reopen(url)
    charged = {h.metadata.get("query_id") for h in hist}  # type: ignore[attr-defined]
    over = max(0.0, float(Fraction(budget.spent_epsilon_exact) - Fraction(TOTAL)))  # type: ignore[attr-defined]
    return {"trials": trials, "answered": len(answered), "charges": len(hist),
            "lost": len(set(answered) - charged), "overspend": over,
            "refused": codes.count(403), "per_trial_s": per_trial}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--analysts", type=int, default=32)
    ap.add_argument("--queries", type=int, default=200)
    ap.add_argument("--trials", type=int, default=100)
    args = ap.parse_args()
    from shared.service_harness import write_people

    with tempfile.TemporaryDirectory() as d:
        tmp = Path(d)
        people = write_people(tmp / "people.parquet", rows=20_000)
        lo = load(tmp, people, args.analysts, args.queries)
        print(lo)
        ki = kills(tmp, people, args.trials)
        print(ki)
    write_section("service", render(lo, ki, args.analysts, args.queries, os.getloadavg()[0]))


def render(lo: dict[str, Any], ki: dict[str, Any], analysts: int, queries: int,
           load_average: float) -> str:
    """The markdown section from the two result dicts."""
    counts = f"{lo['requests']} / {lo['answered']} / {lo['refused']} / {lo['other']}"
    return f"""## Curator service

Machine: {machine()}. `dpkit serve` on a 20,000-row Parquet table cached in memory, SQLite
ledger, budget epsilon = {TOTAL}; the clients run on the same machine.

Load: {analysts} analysts x {queries} count queries, concurrently, each analyst capped at
epsilon 0.1, asking 10% more than the total holds. The service runs one query at a time on its
engine, so with 32 clients waiting the latency is mostly queueing (about 32 / throughput). Load
average of the machine at the end of the run: {load_average:.1f}.

| measure | value |
|---|---:|
| requests / answered / refused (budget) / other | {counts} |
| overspend: total / worst analyst | {lo['overspend']} / {lo['sub_overspend']} |
| ledger records lost / stray | {lo['lost']} / {lo['stray']} |
| latency of the cached count query: p50 / p99 | {lo['p50_ms']:.1f} ms / {lo['p99_ms']:.1f} ms |
| throughput | {lo['throughput']:.0f} requests/s |

kill -9 of the service process while 4 analysts' charges are in flight, restart, reopen the
ledger:

| measure | value |
|---|---:|
| trials | {ki['trials']} |
| answers received / charges in the ledger | {ki['answered']} / {ki['charges']} |
| answers without a charge | {ki['lost']} |
| overspend | {ki['overspend']} |
| refused (budget) | {ki['refused']} |
| time per trial | {ki['per_trial_s']:.2f} s |

Charges without an answer (`charges - answers`) are the conservative side of a crash: the
charge is written before the release is computed.

Reproduce: `PYTHONPATH=src python benchmarks/service.py`.
"""


if __name__ == "__main__":
    main()
