"""The curator service under load and under kill -9: writes the "service" section of
docs/benchmarks.md.

Load: ``dpkit serve`` in its own process on a loopback port; 32 analysts (threads, one token
each) send 200 count queries each, concurrently, against one budget that runs out before the
end. Reported: overspend (total and per analyst), ledger records lost (answers without their
charge) and stray (charges without an answer), and the client-side latency of the count query
on the cached table (p50, p99).

Floor, side by side in the same run and under the same load: a FastAPI app served the same way
(uvicorn, one process, its thread pool) that answers each request with the same aggregate, the
very statement the service runs for the count (per-unit bounding included) on the same cached
table and DuckDB settings, a cursor per thread, with no noise, no budget and no query log: one
durable SQLite insert (WAL, ``synchronous=FULL``) per request. A second floor runs a bare
``count(*)`` instead (what bounding costs).

Faults: 100 trials of start the service, send queries from 4 analysts, kill -9 it at a random
moment while charges are in flight; then reopen the ledger: overspend and answers without a
charge.

    PYTHONPATH=src python benchmarks/service.py [--analysts 32] [--queries 200] [--trials 100]
"""

from __future__ import annotations

import argparse
import os
import random
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from fractions import Fraction
from pathlib import Path
from typing import Any

from fastapi import Request

from _report import machine, write_section

TOTAL = 3.0


def _reopen(url: str) -> tuple[object, list[object]]:
    from dpkit.accounting import Budget
    from dpkit.ledger import open_ledger

    b = Budget.open(open_ledger(url), name="budget")
    return b, list(b.history())


def _drive(
    base: str, tokens: dict[str, str], query: dict[str, Any], queries: int
) -> tuple[list[tuple[int, str | None, float, float]], float]:
    """Each analyst (a thread) sends ``queries`` requests one after another; returns rows
    ``(status, query id, latency, finish time)`` and the start time."""
    from shared.service_harness import client

    t_start = time.perf_counter()

    def one(name: str) -> list[tuple[int, str | None, float, float]]:
        out = []
        with client(base, tokens[name]) as c:
            for _ in range(queries):
                t0 = time.perf_counter()
                r = c.post("/v1/query", json=query)
                t1 = time.perf_counter()
                qid = r.json().get("query_id") if r.status_code == 200 else None
                out.append((r.status_code, qid, t1 - t0, t1))
        return out

    with ThreadPoolExecutor(len(tokens)) as pool:
        rows = [x for xs in pool.map(one, tokens) for x in xs]
    return rows, t_start


def _latency(rows: list[tuple[int, str | None, float, float]], t_start: float) -> dict[str, float]:
    ok = sorted(dt for code, _, dt, _ in rows if code == 200)
    last_ok = max(t for code, _, _, t in rows if code == 200)
    wall = max(t for *_, t in rows) - t_start
    return {
        "p50_ms": 1e3 * statistics.median(ok),
        "p99_ms": 1e3 * ok[int(0.99 * (len(ok) - 1))],
        "throughput": len(rows) / wall,
        "answered_per_s": len(ok) / (last_ok - t_start),
    }


def _start(argv: list[str]) -> subprocess.Popen[bytes]:
    return subprocess.Popen([sys.executable, *argv], stderr=subprocess.DEVNULL)


def load(tmp: Path, people: Path, analysts: int, queries: int) -> dict[str, object]:
    from dpkit.service._state import ServiceState
    from shared.service_harness import COUNT_QUERY, loopback_socket, wait_healthy

    url = f"sqlite:///{tmp / 'load.db'}"
    cap = 0.1
    cost = TOTAL * 1.1 / (analysts * queries)  # 10% more asked than the total holds
    st = ServiceState(url)
    tokens = {
        f"a{i:02d}": st.add_token(f"a{i:02d}", role="analyst", epsilon=cap, delta=1e-7)
        for i in range(analysts)
    }
    st.close()
    sock = loopback_socket()
    port = sock.getsockname()[1]
    sock.close()
    proc = _start(
        [
            "-c",
            "from dpkit.cli import main; main()",
            "serve",
            str(people),
            "--privacy-unit",
            "user_id",
            "--budget",
            f"epsilon={TOTAL},delta=1e-6",
            "--ledger",
            url,
            "--host",
            "127.0.0.1",
            "--port",
            str(port),
            "--rate",
            "100000",
            "--burst",
            "100000",
        ]
    )
    base = f"http://127.0.0.1:{port}"
    query = dict(COUNT_QUERY, epsilon=cost)
    try:
        wait_healthy(base, 120)
        rows, t_start = _drive(base, tokens, query, queries)
    finally:
        proc.terminate()
        proc.wait(30)
    budget, hist = _reopen(url)
    answered = {q for code, q, *_ in rows if code == 200}
    charged = {h.metadata.get("query_id") for h in hist}  # type: ignore[attr-defined]
    over = max(0.0, float(Fraction(budget.spent_epsilon_exact) - Fraction(TOTAL)))  # type: ignore[attr-defined]
    sub_over = max(
        0.0,
        *(
            budget.sub_budget(a).spent[0] - cap  # type: ignore[attr-defined]
            for a in budget.sub_budgets()
        ),
    )  # type: ignore[attr-defined]
    return {
        "requests": len(rows),
        "answered": len(answered),
        "refused": sum(code == 403 for code, *_ in rows),
        "other": sum(code not in (200, 403) for code, *_ in rows),
        "overspend": over,
        "sub_overspend": sub_over,
        "lost": len(answered - charged),
        "stray": len(charged - answered),
        **_latency(rows, t_start),
    }


# ---------------------------------------------------------------------- the floor
def _bounded_count_sql(table: Any) -> tuple[str, str]:
    """The statement dpkit runs for the benchmark's count query on ``table`` (the bounding
    included), and the name it reads the table under."""
    import dpkit.analytics as dpa
    from dpkit.accounting import Budget
    from shared.service_harness import COUNT_QUERY

    bound = COUNT_QUERY["builder"]["bound"]
    session = dpa.Session(table, privacy_unit="user_id", budget=Budget(epsilon=1.0, delta=1e-6))
    q = session.query().bound(**bound).agg(n=dpa.count())
    plan = q.prepare(epsilon=0.01, delta=1e-9).plan
    return session.engine.compile(plan).sql, plan.source.location


def floor_app(people: Path, ledger: Path, tokens: list[str], plain: bool) -> Any:
    """The floor: the same aggregate from the same cached table, no noise, one durable
    SQLite insert per request (see the module doc)."""
    import duckdb
    import pyarrow.parquet as pq
    from fastapi import FastAPI, HTTPException

    from dpkit.service.app import BodyLimit

    table = pq.read_table(people)
    sql, name = _bounded_count_sql(table)
    if plain:
        sql = f'SELECT count(*) FROM "{name}"'
    con = duckdb.connect(":memory:")
    con.execute("SET enable_progress_bar = false")
    con.execute("SET preserve_insertion_order = false")
    local = threading.local()
    lock = threading.Lock()
    known = set(tokens)

    def connections() -> tuple[Any, Any]:
        if getattr(local, "cursor", None) is None:
            with lock:
                local.cursor = con.cursor()
                local.cursor.register(name, table)
            db = sqlite3.connect(ledger, timeout=30.0, isolation_level=None)
            db.execute("PRAGMA journal_mode=WAL")
            db.execute("PRAGMA synchronous=FULL")
            db.execute("CREATE TABLE IF NOT EXISTS answers (id TEXT, time REAL, n INTEGER)")
            local.db = db
        return local.cursor, local.db

    app = FastAPI()

    @app.get("/healthz")
    def healthz() -> dict[str, str]:
        return {"status": "ok"}

    @app.post("/v1/query")
    def query(body: dict[str, Any], request: Request) -> dict[str, Any]:
        if request.headers.get("authorization", "")[7:] not in known:
            raise HTTPException(status_code=401)
        cursor, db = connections()
        n = int(cursor.execute(sql).fetchall()[0][0])
        qid = uuid.uuid4().hex
        db.execute("INSERT INTO answers VALUES (?, ?, ?)", (qid, time.time(), n))
        return {"query_id": qid, "n": n}

    app.add_middleware(BodyLimit, limit=10 * 1024 * 1024)
    return app


def floor(tmp: Path, people: Path, analysts: int, queries: int, plain: bool) -> dict[str, object]:
    from shared.service_harness import COUNT_QUERY, loopback_socket, wait_healthy

    tokens = {f"f{i:02d}": f"floor-token-{i}" for i in range(analysts)}
    ledger = tmp / ("plain.db" if plain else "floor.db")
    sock = loopback_socket()
    port = sock.getsockname()[1]
    sock.close()
    proc = _start(
        [
            __file__,
            "--serve-floor",
            str(people),
            str(ledger),
            str(port),
            "plain" if plain else "bounded",
            ",".join(tokens.values()),
        ]
    )
    base = f"http://127.0.0.1:{port}"
    try:
        wait_healthy(base, 120)
        rows, t_start = _drive(base, tokens, dict(COUNT_QUERY), queries)
    finally:
        proc.terminate()
        proc.wait(30)
    with sqlite3.connect(ledger) as db:
        stored = {r[0] for r in db.execute("SELECT id FROM answers")}
    answered = {q for code, q, *_ in rows if code == 200}
    return {
        "requests": len(rows),
        "answered": len(answered),
        "lost": len(answered - stored),
        **_latency(rows, t_start),
    }


def _serve_floor(argv: list[str]) -> None:
    import uvicorn

    people, ledger, port, kind, tokens = argv
    app = floor_app(Path(people), Path(ledger), tokens.split(","), kind == "plain")
    uvicorn.run(app, host="127.0.0.1", port=int(port), log_level="warning")


def kills(tmp: Path, people: Path, trials: int) -> dict[str, object]:
    from dpkit.service._state import ServiceState
    from shared import service_process as _child
    from shared.service_harness import COUNT_QUERY
    from shared.service_harness import hammer as _hammer

    url = f"sqlite:///{tmp / 'kill.db'}"
    st = ServiceState(url)
    tokens = [st.add_token(f"k{i}", role="analyst", epsilon=1.0, delta=1e-7) for i in range(4)]
    st.close()
    config = {
        "data": str(people),
        "budget_epsilon": TOTAL,
        "budget_delta": 1e-6,
        "privacy_unit": "user_id",
        "ledger_url": url,
        "rate": 1e6,
        "burst": 10**6,
    }
    query = dict(COUNT_QUERY, epsilon=TOTAL / (trials * 1.5))
    rng = random.Random(1)
    answered: list[str] = []
    codes: list[int] = []
    t0 = time.perf_counter()
    for _ in range(trials):
        proc, base = _child.start(config, wait=False)
        stop = threading.Event()
        first = len(answered)
        ts = [
            threading.Thread(target=_hammer, args=(base, t, query, stop, answered, codes))
            for t in tokens
        ]
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
    return {
        "trials": trials,
        "answered": len(answered),
        "charges": len(hist),
        "lost": len(set(answered) - charged),
        "overspend": over,
        "refused": codes.count(403),
        "per_trial_s": per_trial,
    }


def main() -> None:
    if sys.argv[1:2] == ["--serve-floor"]:
        _serve_floor(sys.argv[2:])
        return
    ap = argparse.ArgumentParser()
    ap.add_argument("--analysts", type=int, default=32)
    ap.add_argument("--queries", type=int, default=200)
    ap.add_argument(
        "--trials", type=int, default=100, help="kill -9 trials (0: the load runs only, no docs)"
    )
    args = ap.parse_args()
    from shared.service_harness import write_people

    load_before = os.getloadavg()[0]
    with tempfile.TemporaryDirectory() as d:
        tmp = Path(d)
        people = write_people(tmp / "people.parquet", rows=20_000)
        fl = floor(tmp, people, args.analysts, args.queries, plain=False)
        print("floor", fl)
        lo = load(tmp, people, args.analysts, args.queries)
        print("service", lo)
        pl = floor(tmp, people, args.analysts, args.queries, plain=True)
        print("plain count", pl)
        load_after = os.getloadavg()[0]
        ratio = fl["answered_per_s"] / lo["answered_per_s"]
        print(f"floor / service answers per second: {ratio:.3f}")
        if args.trials == 0:  # load only: nothing is written
            return
        ki = kills(tmp, people, args.trials)
        print(ki)
    write_section(
        "service", render(lo, fl, pl, ki, args.analysts, args.queries, (load_before, load_after))
    )


def render(
    lo: dict[str, Any],
    fl: dict[str, Any],
    pl: dict[str, Any],
    ki: dict[str, Any],
    analysts: int,
    queries: int,
    load_average: tuple[float, float],
) -> str:
    """The markdown section from the result dicts."""
    counts = f"{lo['requests']} / {lo['answered']} / {lo['refused']} / {lo['other']}"
    ratio = fl["answered_per_s"] / lo["answered_per_s"]

    def row(label: str, key: str, fmt: str) -> str:
        return f"| {label} | " + " | ".join(fmt.format(r[key]) for r in (lo, fl, pl)) + " |"

    return f"""## Curator service

Machine: {machine()}. `dpkit serve` on a 20,000-row Parquet table cached in memory, SQLite
ledger, budget epsilon = {TOTAL}; the clients run on the same machine. Load average (1 min)
before / after the load runs: {load_average[0]:.1f} / {load_average[1]:.1f} (the machine was
shared with other work: figures are relative, compare the columns).

Load: {analysts} analysts x {queries} count queries, concurrently, each analyst capped at
epsilon 0.1, asking 10% more than the total holds. The service runs requests in parallel
threads; the DuckDB engine gives each thread its own cursor, a statement is compiled once per
query shape (the secret salt written into it per release) and bound by DuckDB once; charges
are checked one after another in the budget, and the charges that queued up meanwhile are
written together (group commit: one transaction, one `synchronous=FULL` disk sync), with the
query log's rows waiting at that moment (a query's `pending` row is always in its charge's
transaction); the query log's other rows are group-committed the same way, and an answer is
sent after its `answered` row is committed. At most eight queries per core are worked on at
once; the others wait in arrival order.

Floor, same run, same clients: the same FastAPI app setup and server answering with the same
aggregate (the statement the service runs for this count, bounding included) from the same
cached table, no noise, one durable SQLite insert per request; and a bare `count(*)`.

| measure | service | floor (same statement) | floor (bare count) |
|---|---:|---:|---:|
{row("answers per second", "answered_per_s", "{:.1f}")}
{row("requests per second (refusals included)", "throughput", "{:.1f}")}
{row("latency p50", "p50_ms", "{:.0f} ms")}
{row("latency p99", "p99_ms", "{:.0f} ms")}

Floor / service answers per second: {ratio:.2f}.

| service under load | value |
|---|---:|
| requests / answered / refused (budget) / other | {counts} |
| overspend: total / worst analyst | {lo["overspend"]} / {lo["sub_overspend"]} |
| ledger records lost / stray | {lo["lost"]} / {lo["stray"]} |

kill -9 of the service process while 4 analysts' charges are in flight, restart, reopen the
ledger:

| measure | value |
|---|---:|
| trials | {ki["trials"]} |
| answers received / charges in the ledger | {ki["answered"]} / {ki["charges"]} |
| answers without a charge | {ki["lost"]} |
| overspend | {ki["overspend"]} |
| refused (budget) | {ki["refused"]} |
| time per trial | {ki["per_trial_s"]:.2f} s |

Charges without an answer (`charges - answers`) are the conservative side of a crash: the
charge is written before the release is computed.

Reproduce: `PYTHONPATH=src python benchmarks/service.py --analysts {analysts} --queries {queries}
--trials {ki["trials"]}`.
"""


if __name__ == "__main__":
    main()
