"""Attack: a forked child reuses the parent's PostgresLedger object (its psycopg connection).

The budget copied by fork refuses to charge and says "open the ledger again in this process
(Budget.open)"; nothing stops the child from doing ``Budget.open(budget.store, name)`` with the
inherited store, whose connection (one socket, one server session) the parent still uses.
Parent and child then interleave their protocol messages on one session.

Run:
    PYTHONPATH=src:tests/support:benchmarks/shared \
        python tools/reproducers/pg_fork_shared_connection.py
"""

from __future__ import annotations

import contextlib
import os
import signal
import time

from pgserver import temporary_postgres

from dpkit.accounting import Budget
from dpkit.errors import BudgetExceededError
from dpkit.ledger import PostgresLedger

STEP = 2.0**-8  # 256 charges fit in epsilon = 1 exactly


def spend(budget: Budget, markers: str, deadline: float, who: str) -> None:
    fd = os.open(markers, os.O_WRONLY | os.O_APPEND | os.O_CREAT)
    errors: dict[str, int] = {}
    longest = 0.0
    while time.time() < deadline:
        start = time.time()
        try:
            budget.charge(epsilon=STEP)
        except BudgetExceededError as exc:
            if type(exc) is BudgetExceededError:
                break
            errors[str(exc)[:70]] = errors.get(str(exc)[:70], 0) + 1
            continue  # LedgerError: no release, try again
        finally:
            longest = max(longest, time.time() - start)
        os.write(fd, b"r\n")  # the release
    os.close(fd)
    print(f"{who}: longest charge() call {longest:.1f} s; errors {errors}", flush=True)


def main() -> None:
    with temporary_postgres() as dsn:
        store = PostgresLedger(dsn)
        budget = Budget(epsilon=1.0, ledger=store, name="people")
        markers = f"/tmp/dpkit-pgfork-{os.getpid()}.txt"
        deadline = time.time() + 20
        pid = os.fork()
        if pid == 0:  # the child, as the refusal message suggests: Budget.open(...)
            code = 0
            try:
                spend(Budget.open(store, "people"), markers, deadline, "child")
            except BaseException as exc:
                print("child:", type(exc).__name__, exc, flush=True)
                code = 1
            os._exit(code)

        def stuck(signum: int, frame: object) -> None:
            raise TimeoutError("the parent's charge has not returned for 45 s (hang)")

        signal.signal(signal.SIGALRM, stuck)
        signal.alarm(45)
        try:
            spend(budget, markers, deadline, "parent")
        except BaseException as exc:
            print("parent:", type(exc).__name__, exc, flush=True)
        finally:
            signal.alarm(0)
        time.sleep(max(0.0, deadline - time.time()) + 1)
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)  # the child we forked, if it hangs too
        _, status = os.waitpid(pid, 0)
        with open(markers) as fh:
            releases = len(fh.read().splitlines())
        os.unlink(markers)
        final = Budget.open(PostgresLedger(dsn), "people")
        print(
            f"child exit {os.waitstatus_to_exitcode(status)}; releases {releases} "
            f"(x{STEP}) = epsilon {releases * STEP}; records {len(final.history())}; "
            f"stored spent {final.spent}"
        )


if __name__ == "__main__":
    main()
