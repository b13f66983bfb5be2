"""Private synthetic data from a session's table.

``MST(columns={...}, max_rows=...).fit(session, epsilon=..., delta=...)`` (or ``AIM``, which
chooses its marginals adaptively for a workload) measures the table's
marginals through the session's engine (with its privacy unit and one contribution bound),
charges the session's zCDP budget once (numeric and date columns without public edges are
binned privately inside that charge), and returns a :class:`SyntheticModel` that samples
synthetic tables of any size and can be saved and loaded without spending anything.
Importing this package does not import DuckDB or pandas.
"""

from dpkit.synth._domain import Categorical, Date, Numeric
from dpkit.synth.aim import AIM, AIMPlan
from dpkit.synth.mst import MST, MSTPlan, SyntheticModel

__all__ = [
    "AIM",
    "MST",
    "AIMPlan",
    "Categorical",
    "Date",
    "MSTPlan",
    "Numeric",
    "SyntheticModel",
]
