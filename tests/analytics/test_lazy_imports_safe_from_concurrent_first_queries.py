"""The modules dpkit now imports on first use load safely from concurrent first queries.

``dpkit.analytics`` no longer imports sqlglot, scipy.special or the DP-SGD accountants: they
load inside the first SQL query, the first interval or noise-quantile computation, or the
first read of a lazy ``dpkit.accounting`` name, some of them after a charge. A service runs
queries in threads, so in a fresh interpreter six threads released together (a barrier) each
take one such first path: an SQL query, a Gaussian mean, a quantile, a planned sum and mean,
the lazy accountant names and submodules, a Gaussian delta. None may fail (an import cycle or
a half-initialised module would show as an exception in one of them). A red-team pass over the
lazy imports ran it three times without a failure.
"""

from __future__ import annotations

import subprocess
import sys

SCRIPT = r"""
import threading
import pandas as pd
import dpkit.analytics as dpa
from dpkit.accounting import Budget

df = pd.DataFrame({"u": range(300), "v": [float(i % 50) for i in range(300)]})
errors = []
barrier = threading.Barrier(6)

def one(k):
    try:
        barrier.wait()
        gauss = dpa.Session(df, budget=Budget(epsilon=100, delta=1e-5), privacy_unit="u")
        pure = dpa.Session(df, budget=Budget(epsilon=100), privacy_unit="u")
        one_row = {"max_partitions": 1, "max_rows_per_partition": 1}
        if k == 0:
            gauss.sql("SELECT COUNT(*) AS n FROM t", epsilon=1, delta=1e-6)
        elif k == 1:
            import dpkit.accounting as acc
            assert acc.PldAccountant and acc.dpsgd_rows and acc.rdp.RdpAccountant
        elif k == 2:
            q = gauss.query().bound(**one_row).agg(m=dpa.mean("v", bounds=(0, 50)))
            q.run(epsilon=1, delta=1e-6)
        elif k == 3:
            q = pure.query().bound(**one_row).agg(q=dpa.quantile("v", 0.5, bounds=(0, 50)))
            q.run(epsilon=1)
        elif k == 4:
            agg = {"s": dpa.sum("v", bounds="auto"), "m": dpa.mean("v", bounds="auto")}
            pure.query().agg(**agg).run(epsilon=1)
        else:
            from dpkit._numeric.gaussian import _delta_scalar
            _delta_scalar(1.0, 1.0)
    except BaseException as exc:
        errors.append((k, repr(exc)))

threads = [threading.Thread(target=one, args=(k,)) for k in range(6)]
for t in threads:
    t.start()
for t in threads:
    t.join()
assert not errors, errors
"""


def test_first_uses_of_lazy_imports_from_six_threads_never_fail() -> None:
    done = subprocess.run(
        [sys.executable, "-c", SCRIPT], capture_output=True, text=True, check=False, timeout=300
    )
    assert done.returncode == 0, done.stderr[-2000:]
