"""Stress: processes and threads charging one durable budget at once (the total and three
analysts' sub-budgets interleaved, charge and reserve, fresh and stale Budget objects, two
objects on one name in one process), and processes creating one name with different
definitions at once. Counts what was released (a marker written only after ``charge``
returned) against the store and the budget.

Run:
    PYTHONPATH=src:tests/support:benchmarks/shared \
        python tools/reproducers/race_stress.py [sqlite|postgres|both]
"""

from __future__ import annotations

import os
import random
import sys
import tempfile
import threading
from collections.abc import Callable
from fractions import Fraction

from pgserver import temporary_postgres

from dpkit.accounting import Budget, Ledger
from dpkit.errors import BudgetExceededError, LedgerError
from dpkit.ledger import PostgresLedger, SqliteLedger

SIZES = (2.0**-5, 2.0**-6, 2.0**-7)  # dyadic: exact sums, so "total <= 1" is checked exactly
CAPS = {"a0": 0.25, "a1": 0.5, "a2": 0.75}


def worker(factory: Callable[[], Ledger], name: str, seed: int, markers: str, threads: int) -> None:
    rng = random.Random(seed)  # schedules only
    shared = Budget.open(factory(), name)
    fd = os.open(markers, os.O_WRONLY | os.O_APPEND | os.O_CREAT)

    def run(tid: int) -> None:
        own = shared if tid % 2 == 0 else Budget.open(factory(), name)  # stale/fresh objects
        misses = 0
        while misses < 20:
            size = rng.choice(SIZES)
            who = rng.choice(["total", "a0", "a1", "a2"])
            target = own if who == "total" else own.sub_budget(who)
            try:
                if rng.random() < 0.3:
                    with target.reserve(epsilon=size):
                        os.write(fd, f"{who} {size.hex()}\n".encode())
                    continue
                target.can_charge(epsilon=size)
                target.charge(epsilon=size)
            except BudgetExceededError as exc:
                if isinstance(exc, LedgerError):
                    print("LedgerError:", exc, flush=True)
                misses += 1
                continue
            os.write(fd, f"{who} {size.hex()}\n".encode())

    pool = [threading.Thread(target=run, args=(t,)) for t in range(threads)]
    for t in pool:
        t.start()
    for t in pool:
        t.join()
    os.close(fd)


def race(factory: Callable[[], Ledger], name: str, processes: int, threads: int) -> str:
    total = Budget(epsilon=1.0, ledger=factory(), name=name)
    for analyst, cap in CAPS.items():
        total.sub_budget(analyst, epsilon=cap)
    markers = tempfile.mktemp(prefix="dpkit-race-")
    pids = []
    for p in range(processes):
        pid = os.fork()
        if pid == 0:
            code = 1
            try:
                worker(factory, name, 1000 + p, markers, threads)
                code = 0
            finally:
                os._exit(code)
        pids.append(pid)
    codes = [os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1]) for pid in pids]
    released: dict[str, Fraction] = {"total": Fraction(0), **{a: Fraction(0) for a in CAPS}}
    count = 0
    with open(markers) as fh:
        for line in fh:
            who, size = line.split()
            released[who] += Fraction(float.fromhex(size))
            count += 1
    os.unlink(markers)
    final = Budget.open(factory(), name)
    overall = sum(released.values())
    assert codes == [0] * processes, codes
    assert overall <= 1, f"OVERSPEND: released {overall}"
    assert final.spent_epsilon_exact == overall, (final.spent_epsilon_exact, overall)
    assert len(final.history()) == count
    for analyst, cap in CAPS.items():
        assert released[analyst] <= Fraction(cap), f"{analyst} over cap: {released[analyst]}"
        assert final.sub_budget(analyst).spent[0] == float(released[analyst])
    return (
        f"{processes} processes x {threads} threads: {count} releases, released epsilon "
        f"{float(overall)} (stored {float(final.spent_epsilon_exact)}), by analyst "
        f"{ {k: float(v) for k, v in released.items()} }"
    )


def creation_race(factory: Callable[[], Ledger], name: str, processes: int) -> str:
    """Processes create ``name`` at once with different epsilons: one definition wins, the
    others must raise LedgerError; whoever charged did so under the winning definition."""
    read, write = os.pipe()
    pids = []
    for p in range(processes):
        pid = os.fork()
        if pid == 0:
            code = 1
            try:
                try:
                    b = Budget(epsilon=0.5 + p / 8, ledger=factory(), name=name)
                    b.charge(epsilon=0.5)
                    os.write(write, f"{p}\n".encode())
                except LedgerError:
                    pass
                code = 0
            finally:
                os._exit(code)
        pids.append(pid)
    os.close(write)
    for pid in pids:
        os.waitpid(pid, 0)
    with os.fdopen(read) as fh:
        winners = [int(x) for x in fh.read().split()]
    final = Budget.open(factory(), name)
    assert len(winners) == 1, winners
    assert final.budget[0] == 0.5 + winners[0] / 8
    return f"creation race: {processes} definitions, 1 won (epsilon {final.budget[0]})"


def main() -> None:
    which = sys.argv[1] if len(sys.argv) > 1 else "both"
    if which in ("sqlite", "both"):
        path = os.path.join(tempfile.mkdtemp(), "race.db")

        def sqlite_factory() -> Ledger:
            return SqliteLedger(path)

        for i in range(3):
            print("sqlite", race(sqlite_factory, f"r{i}", 4, 4), flush=True)
        print("sqlite", creation_race(sqlite_factory, "created", 6), flush=True)
    if which in ("postgres", "both"):
        with temporary_postgres() as dsn:

            def pg_factory() -> Ledger:
                return PostgresLedger(dsn)

            for i in range(3):
                print("postgres", race(pg_factory, f"r{i}", 4, 3), flush=True)
            print("postgres", creation_race(pg_factory, "created", 6), flush=True)


if __name__ == "__main__":
    main()
