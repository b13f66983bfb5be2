"""Does any release raise, or change its conversion, depending on whether a value is missing?

For every mechanism ``release`` in dpkit.mechanisms and typed columns with and without a null
(polars, pyarrow, pandas ``Int64`` / ``Float64`` / ``int64[pyarrow]`` and Python lists with
``None``), prints the pairs where the outcome "released / refused" differs between
``[3, 2, 1]`` and ``[3, <null>, 1]`` (a data-dependent exception: epsilon infinite), and for
the integer columns whether ``2**53 + 1`` survives exactly (compared with the same release of
the plain int64 array under the same seeded source).
Run: PYTHONPATH=src python tools/reproducers/typed_columns_all_releases.py
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pandas as pd
import polars as pl
import pyarrow as pa

from dpkit.errors import PrivacyParameterError
from dpkit.mechanisms import (
    BinnedQuantile,
    DiscreteGaussian,
    DiscreteLaplace,
    ExponentialMechanism,
    Gaussian,
    GaussianPartitionSelection,
    Laplace,
    PartitionSelection,
    RandomizedResponse,
    ReportNoisyMax,
)
from dpkit.noise import RandomSource

COLUMNS: dict[str, Callable[[list[Any]], Any]] = {
    "polars Int64": lambda v: pl.Series(v, dtype=pl.Int64),
    "pyarrow int64": lambda v: pa.array(v, type=pa.int64()),
    "pandas Int64": lambda v: pd.Series(v, dtype="Int64"),
    "pandas int64[pyarrow]": lambda v: pd.Series(v, dtype="int64[pyarrow]"),
    "polars Float64": lambda v: pl.Series(v, dtype=pl.Float64),
    "pandas Float64": lambda v: pd.Series(v, dtype="Float64"),
    "list": list,
}
MECHS: dict[str, Any] = {
    "Laplace": Laplace.from_epsilon(epsilon=1.0, sensitivity=2.0**20),
    "Gaussian": Gaussian.from_mu(mu=1.0, sensitivity=1.0),
    "DiscreteLaplace": DiscreteLaplace.from_epsilon(epsilon=1.0, sensitivity=1),
    "DiscreteGaussian": DiscreteGaussian.from_sigma(sigma=2.0, sensitivity=1),
    "RandomizedResponse": RandomizedResponse.from_epsilon(epsilon=1.0),
    "ExponentialMechanism": ExponentialMechanism(epsilon=1.0, sensitivity=1.0),
    "ReportNoisyMax": ReportNoisyMax(epsilon=1.0, sensitivity=1.0),
    "PartitionSelection": PartitionSelection(epsilon=1.0, delta=1e-6),
    "GaussianPartitionSelection": GaussianPartitionSelection.from_epsilon_delta(
        epsilon=1.0, delta=1e-6
    ),
    "BinnedQuantile": BinnedQuantile.from_epsilon(
        epsilon=1.0, quantiles=0.5, edges=[0.0, 1.0, 2.0, 3.0]
    ),
}


def _outcome(mech: Any, x: Any) -> str:
    try:
        mech.release(x, source=RandomSource(seed=1, insecure=True))
    except PrivacyParameterError:
        return "refused"
    return "released"


def main() -> None:
    bad = 0
    total = 0
    for mname, mech in MECHS.items():
        for cname, make in COLUMNS.items():
            total += 1
            a, b = _outcome(mech, make([3, 2, 1])), _outcome(mech, make([3, None, 1]))
            if a != b:
                bad += 1
                print(f"  {mname} / {cname}: without null {a}, with null {b}")
    print(f"decision depends on a null: {bad} of {total} (mechanism, column) pairs")
    lap = MECHS["Laplace"]
    big = [2**62 + 1, None]
    for cname in ("polars Int64", "pyarrow int64", "pandas Int64"):
        try:
            got = np.asarray(
                lap.release(COLUMNS[cname](big), source=RandomSource(seed=2, insecure=True))
            )
        except PrivacyParameterError as exc:
            print(f"  Laplace / {cname} with a null: refused ({str(exc)[:50]}...)")
            continue
        ref = lap.release(
            np.array([2**62 + 1, 0], dtype=np.int64), source=RandomSource(seed=2, insecure=True)
        )
        print(
            f"  Laplace / {cname} with a null: same as the exact int64 path: "
            f"{bool(np.array_equal(got, ref))}"
        )


if __name__ == "__main__":
    main()
