"""Attack: the curator service (``dpkit serve``) on a loopback server started here.

Each section sends a few bounded requests to an in-process service on 127.0.0.1 and prints
what happened. Regression tests: tests/service/test_service_requests_checked_before_charge.py.

1. Public-key cartesian product (availability). ``group_by.keys`` is a dict of lists whose
   cartesian product the builder materialises before checking its 2**24 limit: a few kB of
   JSON cost seconds of CPU and hundreds of MB on the free ``/v1/summarize``.
2. Unbounded list parameters (availability). Histogram ``edges``/``categories`` and
   ``quantiles`` have no length limit: a 5 kB query with 1000 edges keeps a worker busy for
   about half a minute, and the time grows with the square of the length (250 edges:
   2 s), so 20 000 edges (130 kB) would take hours. The time is spent after the charge, in
   ``frame_to_json`` (src/dpkit/service/_spec.py: 3.3 s of a 250-edge answer whose analytics
   run takes 0.4 s), likely pandas deep-copying ``attrs`` (per-column release metadata) on
   every column access of the wide frame.
3. epsilon = 1e300: an unhandled OverflowError (500) in the pricing.
4. Aggregate names ``n`` and ``n_low``: the interval column of one and the estimate of the
   other collide; the answer silently loses a column.
5. Lax types: ``"epsilon": true`` is read as 1.0, strings as numbers.
6. Curator logout: the page cookie is the curator token and stays valid after logout.

Run: PYTHONPATH=src:tests/support:benchmarks/shared python tools/reproducers/service_attacks.py
"""

from __future__ import annotations

import json
import resource
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import httpx
from service_fixtures import start_service
from service_harness import COUNT_QUERY, bearer, serve_in_thread, write_people

BOUND = {"max_partitions": 1, "max_rows_per_partition": 2}


def rss_mb() -> int:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss // 1024


def query(agg: dict[str, Any], **builder: Any) -> dict[str, Any]:
    return {"builder": {"bound": BOUND, "agg": agg, **builder}, "epsilon": 0.01, "delta": 1e-9}


def main() -> None:
    tmp = Path(tempfile.mkdtemp())
    people = write_people(tmp / "people.parquet")
    app, _url, tokens = start_service(tmp, people, analysts={"alice": 2.0, "bob": 1.0})
    charges = lambda: len(app.state.curator.total.history())  # noqa: E731
    with serve_in_thread(app) as base:
        alice = httpx.Client(base_url=base, headers=bearer(tokens["alice"]), timeout=300)

        print("1. public-key product on /v1/summarize (free)")
        for n in (20, 50, 100, 300):
            keys = {
                "region": [f"r{i}" for i in range(n)],
                "age": list(range(n)),
                "income": [float(i) for i in range(n)],
            }
            body = query(
                {"n": {"kind": "count"}},
                group_by={"columns": ["region", "age", "income"], "keys": keys},
            )
            size = len(json.dumps(body))
            t = time.monotonic()
            r = alice.post("/v1/summarize", json=body)
            print(
                f"   {n}^3 = {n**3:>9} keys, body {size:>5} B: {r.status_code} in "
                f"{time.monotonic() - t:5.2f} s, process max RSS {rss_mb()} MB"
            )

        print("2. long lists: time of one histogram query (other analysts meanwhile)")
        for m in (250, 1_000):
            body = query({"h": {"kind": "histogram", "column": "income", "edges": list(range(m))}})
            done: dict[str, Any] = {}

            def slow(body: dict[str, Any] = body, done: dict[str, Any] = done) -> None:
                t0 = time.monotonic()
                done["code"] = alice.post("/v1/query", json=body).status_code
                done["s"] = time.monotonic() - t0

            th = threading.Thread(target=slow)
            th.start()
            time.sleep(0.5)
            t = time.monotonic()
            with httpx.Client(base_url=base, headers=bearer(tokens["bob"]), timeout=300) as b:
                code = b.post("/v1/query", json=COUNT_QUERY).status_code
            waited = time.monotonic() - t
            th.join()
            print(
                f"   {m} edges ({len(json.dumps(body))} B): {done['code']} in "
                f"{done['s']:.1f} s; bob's 1-row count meanwhile: {code} after "
                f"{waited:.1f} s"
            )

        print("3. epsilon = 1e300")
        for path in ("/v1/summarize", "/v1/query"):
            before = charges()
            with httpx.Client(base_url=base, headers=bearer(tokens["alice"]), timeout=60) as c:
                r = c.post(path, json={**COUNT_QUERY, "epsilon": 1e300})
            print(f"   {path}: {r.status_code} {r.text[:40]!r}, charges {charges() - before}")

        print("4. aggregates n and n_low")
        r = alice.post(
            "/v1/query", json=query({"n": {"kind": "count"}, "n_low": {"kind": "count"}})
        )
        if r.status_code == 200:
            res = r.json()["result"]
            print(f"   {r.status_code}: columns {res['columns']} row {res['rows'][0]}")
        else:
            print(f"   {r.status_code}: {r.text[:90]!r}")

        print("5. lax types on /v1/summarize")
        for name, patch in (
            ("epsilon true", {"epsilon": True}),
            ("epsilon '0.01'", {"epsilon": "0.01"}),
            ("delta '1e-9'", {"delta": "1e-9"}),
        ):
            r = alice.post("/v1/summarize", json={**COUNT_QUERY, **patch})
            cost = r.json().get("summary", {}).get("release", {}).get("epsilon")
            print(f"   {name}: {r.status_code}, priced at epsilon {cost}")

        print("6. curator logout")
        with httpx.Client(base_url=base, timeout=30) as c:
            c.post("/curator/login", data={"token": tokens["curator"]})
            cookie = c.cookies.get("dpkit_curator")
            c.post("/curator/logout")
        r = httpx.get(base + "/curator/status", headers={"Cookie": f"dpkit_curator={cookie}"})
        print(
            f"   cookie is the token: {cookie == tokens['curator']}; after logout "
            f"/curator/status answers {r.status_code}"
        )
        alice.close()


if __name__ == "__main__":
    main()
