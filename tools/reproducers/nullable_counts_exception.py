"""Attack 2/3: a data-dependent exception in PartitionSelection, GaussianPartitionSelection and
BinnedQuantile when counts come as a pandas nullable integer column.

``np.asarray`` of a pandas ``Int64`` column is ``int64`` when no value is missing and ``float64``
when one is: the count validators (``_integer_counts`` in partition_selection.py, ``_bin_counts``
in quantile.py) decide by the dtype *after* that conversion, so the release raises exactly when
some key's count is missing (e.g. a key with no rows after a left join / reindex over public
keys), and succeeds on the neighbour where that key has one unit. The selection mechanisms
handle the same input by dtype (a missing value counts as NaN).

Certificate: ``dpkit.audit.audit`` on the output "raised / released", neighbouring inputs
``[3, <NA>]`` (key 2 has no unit) and ``[3, 1]`` (one unit added to key 2), confidence 1 - 1e-6,
claimed (1, 1e-6)-DP.
Run: PYTHONPATH=src python tools/reproducers/nullable_counts_exception.py
"""

from __future__ import annotations

from typing import Any

import pandas as pd

from dpkit.audit import Claim, audit
from dpkit.errors import PrivacyParameterError
from dpkit.mechanisms import BinnedQuantile, GaussianPartitionSelection, PartitionSelection


def main() -> None:
    mechs: list[tuple[str, Any]] = [
        ("PartitionSelection", PartitionSelection(epsilon=1.0, delta=1e-6)),
        (
            "GaussianPartitionSelection",
            GaussianPartitionSelection.from_epsilon_delta(epsilon=1.0, delta=1e-6),
        ),
        (
            "BinnedQuantile",
            BinnedQuantile.from_epsilon(epsilon=1.0, quantiles=0.5, edges=[0.0, 1.0, 2.0]),
        ),
    ]
    d = pd.array([3, None], dtype="Int64")
    d_prime = pd.array([3, 1], dtype="Int64")
    for name, mech in mechs:

        def observe(x: Any, mech: Any = mech) -> int:
            try:
                mech.release(x)
            except PrivacyParameterError:
                return 1
            return 0

        res = audit(
            observe,
            pair=(d, d_prime),
            samples=20_000,
            confidence=1 - 1e-6,
            claim=Claim.approx(epsilon=1.0, delta=1e-6),
        )
        print(
            f"{name}: epsilon >= {res.epsilon_lower_bound:.3f} at delta 1e-6 "
            f"(confidence 1-1e-6), violated={res.violated}"
        )


if __name__ == "__main__":
    main()
