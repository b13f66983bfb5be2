"""Ledger throughput and crash trials; writes the "ledger" section of docs/benchmarks.md.

Charges per second of a budget on each store (in memory, SQLite, PostgreSQL): one process
charging alone, then several processes (each with its own connection) charging one budget at
once, on the total and on per-analyst sub-budgets. Then SIGKILL trials: a forked process charges
in a loop and writes a marker after each accepted charge (its "release"); it is killed at a random
moment; a fresh process replays the ledger and counts overspend (spent above the total) and lost
records (a marker without its record). PostgreSQL runs in a throw-away server started here
(``benchmarks/shared/pgserver.py``), with the default ``fsync=on``.

Usage: ``python benchmarks/ledger.py [--quick]``
"""

from __future__ import annotations

import argparse
import os
import random
import signal
import struct
import tempfile
import threading
import time
from collections.abc import Callable
from fractions import Fraction
from pathlib import Path

from _report import machine, write_section
from dpkit.accounting import Budget, Ledger, MemoryLedger
from dpkit.errors import BudgetExceededError
from dpkit.ledger import PostgresLedger, SqliteLedger
from shared.pgserver import temporary_postgres

Factory = Callable[[], Ledger]
STEP = 2.0**-20  # tiny charges: the budget never runs out while timing


def _single(factory: Factory, n: int) -> float:
    budget = Budget(epsilon=1.0, ledger=factory(), name=f"single-{random.getrandbits(32)}")
    start = time.perf_counter()
    for i in range(n):
        budget.charge(epsilon=STEP, metadata={"i": i})
    return n / (time.perf_counter() - start)


def _forked(workers: int, body: Callable[[int], int]) -> list[int]:
    pipes, pids = [], []
    for i in range(workers):
        r, w = os.pipe()
        pid = os.fork()
        if pid == 0:  # the worker
            code = 1
            try:
                os.close(r)
                os.write(w, struct.pack("<q", body(i)))
                code = 0
            finally:
                os._exit(code)
        os.close(w)
        pipes.append(r)
        pids.append(pid)
    out = []
    for r, pid in zip(pipes, pids, strict=True):
        data = os.read(r, 8)
        os.close(r)
        os.waitpid(pid, 0)
        out.append(struct.unpack("<q", data)[0])
    return out


def _contended(factory: Factory, workers: int, n: int, analysts: bool) -> float:
    name = f"race-{random.getrandbits(32)}"
    total = Budget(epsilon=1.0, ledger=factory(), name=name)
    for i in range(workers):
        total.sub_budget(f"a{i}", epsilon=0.5)

    def body(i: int) -> int:
        budget = Budget.open(factory(), name)
        target = budget.sub_budget(f"a{i}") if analysts else budget
        t0 = time.time()
        for _ in range(n):
            target.charge(epsilon=STEP)
        return int((time.time() - t0) * 1e6)

    start = time.perf_counter()
    _forked(workers, body)
    wall = time.perf_counter() - start
    final = Budget.open(factory(), name)
    assert len(final.history()) == workers * n
    return workers * n / wall


def _memory_threads(workers: int, n: int) -> float:
    budget = Budget(epsilon=1.0, ledger=MemoryLedger(), name="threads")

    def work() -> None:
        for _ in range(n):
            budget.charge(epsilon=STEP)

    threads = [threading.Thread(target=work) for _ in range(workers)]
    start = time.perf_counter()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return workers * n / (time.perf_counter() - start)


def _kill_trials(factory: Factory, trials: int, markers: Path) -> dict[str, int]:
    name = f"kill-{random.getrandbits(32)}"
    step = 2.0**-12
    Budget(epsilon=1.0, ledger=factory(), name=name)
    rng = random.Random(7)  # schedules kills only
    for _ in range(trials):
        ready_r, ready_w = os.pipe()
        pid = os.fork()
        if pid == 0:
            try:
                os.close(ready_r)
                budget = Budget.open(factory(), name)
                fd = os.open(markers, os.O_WRONLY | os.O_APPEND | os.O_CREAT)
                os.write(ready_w, b"r")
                for i in range(10**6):
                    tag = f"{os.getpid()}-{i}"
                    try:
                        budget.charge(epsilon=step, metadata={"tag": tag})
                    except BudgetExceededError:
                        continue
                    os.write(fd, f"{tag}\n".encode())
            finally:
                os._exit(0)
        os.close(ready_w)
        os.read(ready_r, 1)
        os.close(ready_r)
        time.sleep(rng.uniform(0.0, 0.02))
        os.kill(pid, signal.SIGKILL)
        os.waitpid(pid, 0)
    budget = Budget.open(factory(), name)
    tags = [h.metadata["tag"] for h in budget.history()]
    released = markers.read_text().split() if markers.exists() else []
    spent = budget.spent_epsilon_exact
    return {
        "trials": trials,
        "records": len(tags),
        "releases": len(released),
        "charged, killed before release": len(tags) - len(released),
        "overspend": int(spent > 1),
        "lost records": len(set(released) - set(tags)),
        "duplicated records": len(tags) - len(set(tags)),
        "spent equals records": int(spent == Fraction(len(tags)) * Fraction(step)),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--quick", action="store_true", help="fewer charges and trials")
    args = parser.parse_args()
    n_single = {"memory": 5000, "sqlite": 1000, "postgres": 1000}
    n_each, trials = 250, 100
    if args.quick:
        n_single = {k: v // 10 for k, v in n_single.items()}
        n_each, trials = 25, 10
    rows: list[str] = []
    kills: list[tuple[str, dict[str, int]]] = []
    with tempfile.TemporaryDirectory() as tmp, temporary_postgres() as dsn:
        db = Path(tmp) / "bench.db"
        stores: dict[str, Factory] = {
            "memory": MemoryLedger,
            "sqlite": lambda: SqliteLedger(db),
            "postgres": lambda: PostgresLedger(dsn),
        }
        for label, factory in stores.items():
            single = _single(factory, n_single[label])
            if label == "memory":
                total = _memory_threads(4, n_each * 4)
                subs = float("nan")
                how = "4 threads, one budget"
            else:
                total = _contended(factory, 4, n_each, analysts=False)
                subs = _contended(factory, 4, n_each, analysts=True)
                how = "4 processes, one connection each"
            rows.append(
                f"| {label} | {single:,.0f} | {total:,.0f} | "
                f"{'-' if subs != subs else f'{subs:,.0f}'} | {how} |"
            )
            print(rows[-1], flush=True)
        for label in ("sqlite", "postgres"):
            counts = _kill_trials(stores[label], trials, Path(tmp) / f"{label}.markers")
            kills.append((label, counts))
            print(label, counts, flush=True)
    keys = list(kills[0][1])
    md = [
        "## Ledger (`benchmarks/ledger.py`)",
        "",
        f"Machine: {machine()} (shared with other jobs: read the figures as orders of "
        "magnitude). Charges per second of `Budget.charge` with the record written before it "
        "returns (SQLite: WAL, `synchronous=FULL`; PostgreSQL 15 local, `fsync=on`).",
        "",
        "| store | one process | contended, on the total | contended, 4 analysts' "
        "sub-budgets | contention |",
        "|---|---|---|---|---|",
        *rows,
        "",
        f"SIGKILL trials ({trials} per store): a forked process charges 2^-12 at a time against "
        "epsilon = 1 and writes a marker after each accepted charge; it is killed at a random "
        "moment within 20 ms; the ledger is then replayed by a fresh process.",
        "",
        "| store | " + " | ".join(keys) + " |",
        "|---|" + "---|" * len(keys),
        *(f"| {label} | " + " | ".join(str(c[k]) for k in keys) + " |" for label, c in kills),
    ]
    write_section("ledger", "\n".join(md))


if __name__ == "__main__":
    main()
