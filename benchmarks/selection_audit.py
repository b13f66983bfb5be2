"""Audit figures for the selection mechanisms on adversarial inputs (prints; writes nothing).

Run with ``PYTHONPATH=src .venv/bin/python benchmarks/selection_audit.py [samples]``.

* huge sensitivity: ``ExponentialMechanism`` / ``ReportNoisyMax`` (epsilon 1, sensitivity 1e308)
  on scores [1e308, -7e307] vs [1e308, -1.7e308]: picks of candidate 1 in 2 million draws and
  the epsilon the audit certifies at confidence 1 - 1e-6 (claim: 1);
* integers beyond 2**53: the monotone exponential mechanism (epsilon 1) on int64
  [2**53 + 1, 2**53] vs [2**53 + 2, 2**53]: exact probabilities and the certified epsilon.
"""

from __future__ import annotations

import sys

import numpy as np

from dpkit.audit import Claim, audit
from dpkit.mechanisms import ExponentialMechanism, ReportNoisyMax
from dpkit.noise import RandomSource


def main(samples: int) -> None:
    a, b = np.array([1e308, -7e307]), np.array([1e308, -1.7e308])
    mechanisms = [("ExponentialMechanism", ExponentialMechanism(epsilon=1.0, sensitivity=1e308))]
    mechanisms += [
        (f"ReportNoisyMax({n})", ReportNoisyMax(epsilon=1.0, sensitivity=1e308, noise=n))
        for n in ("laplace", "exponential", "gumbel")
    ]
    for name, m in mechanisms:
        ca = int(
            m.release_many(a, count=2_000_000, source=RandomSource(seed=1, insecure=True)).sum()
        )
        cb = int(
            m.release_many(b, count=2_000_000, source=RandomSource(seed=2, insecure=True)).sum()
        )
        r = audit(
            m,
            (a, b),
            samples=samples,
            claim=Claim.pure(epsilon=1.0),
            confidence=1 - 1e-6,
            source=RandomSource(seed="fig", insecure=True),
        )
        print(
            f"{name}, sensitivity 1e308: candidate 1 picked {ca:,} vs {cb:,} times in 2M; "
            f"certified epsilon >= {r.epsilon_lower_bound:.3f}"
        )
    em = ExponentialMechanism(epsilon=1.0, sensitivity=1.0, monotonic=True)
    ia = np.array([2**53 + 1, 2**53], dtype=np.int64)
    ib = np.array([2**53 + 2, 2**53], dtype=np.int64)
    r = audit(
        em,
        (ia, ib),
        samples=samples,
        claim=Claim.pure(epsilon=1.0),
        confidence=1 - 1e-6,
        source=RandomSource(seed="fig2", insecure=True),
    )
    print(
        f"int64 beyond 2**53: probabilities {em.probabilities(ia)} vs {em.probabilities(ib)}; "
        f"certified epsilon >= {r.epsilon_lower_bound:.3f}"
    )


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 1_000_000)
