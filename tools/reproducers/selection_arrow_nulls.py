"""Attack 1: integer scores in a polars / pyarrow column with a null are rounded to doubles.

``selection._ratios`` sends every non-pandas array-like through ``np.asarray``. A polars
``Int64`` Series or a pyarrow ``int64`` (Chunked)Array that contains a null converts to
``float64`` (null -> NaN), so integer scores above 2**53 are rounded *by dpkit* before the exact
difference is formed; without a null the same column takes the exact int64 path (the path
depends on the data, and rounding to doubles is not 1-Lipschitz). Neighbouring scores
``[2**60 + 128, 2**60, null]`` and ``[2**60 + 129, 2**60, null]`` (one score moved by 1 =
the sensitivity) round to ``[2**60, 2**60]`` (ties to even) and ``[2**60 + 256, 2**60]``.

Certificates (epsilon = 1, sensitivity 1):
* exact: ``ExponentialMechanism.probabilities`` (the law the sampler follows) on both inputs;
* statistical: ``dpkit.audit.audit`` of ``ExponentialMechanism.release`` (Gumbel sampler) and
  ``ReportNoisyMax(noise="laplace")``, confidence 1 - 1e-6.
Run: PYTHONPATH=src python tools/reproducers/selection_arrow_nulls.py
"""

from __future__ import annotations

from typing import Any

import numpy as np
import polars as pl
import pyarrow as pa

from dpkit.audit import Claim, audit
from dpkit.mechanisms import ExponentialMechanism, ReportNoisyMax

B = 2**60


def main() -> None:
    em = ExponentialMechanism(epsilon=1.0, sensitivity=1.0)
    rnm = ReportNoisyMax(epsilon=1.0, sensitivity=1.0, noise="laplace")
    for name, make in [
        ("polars", lambda v: pl.Series(v, dtype=pl.Int64)),
        ("pyarrow", lambda v: pa.array(v, type=pa.int64())),
    ]:
        d: Any = make([B + 128, B, None])
        d2: Any = make([B + 129, B, None])
        p, q = em.probabilities(d), em.probabilities(d2)
        print(
            f"{name}: exact law P(candidate 1) = {p[1]:.3g} vs {q[1]:.3g}: "
            f"epsilon = {float(np.log(p[1] / q[1])):.2f} (claimed 1)"
        )
        for label, mech in (("exponential mechanism", em), ("RNM laplace", rnm)):

            def draw(x: Any, size: int, mech: Any = mech) -> Any:
                return mech.release_many(x, count=size)

            r = audit(
                draw,
                pair=(d, d2),
                samples=40_000,
                vectorized=True,
                confidence=1 - 1e-6,
                claim=Claim.pure(epsilon=1.0),
            )
            print(
                f"  {label}: epsilon >= {r.epsilon_lower_bound:.2f} (confidence 1-1e-6), "
                f"violated={r.violated}"
            )


if __name__ == "__main__":
    main()
