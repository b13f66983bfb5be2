"""dpkit: differential privacy with secure, floating-point-safe noise and tight accounting.

Importing dpkit is light: numpy, scipy and cryptography only. Engines (duckdb, pyspark) and
plotting (matplotlib) are imported lazily by the modules that need them.
"""

from dpkit import errors
from dpkit.errors import (
    BudgetExceededError,
    DPKitError,
    PrivacyParameterError,
    UnsupportedEventError,
)
from dpkit.noise import RandomSource

__version__ = "0.1.0"

__all__ = [
    "BudgetExceededError",
    "DPKitError",
    "PrivacyParameterError",
    "RandomSource",
    "UnsupportedEventError",
    "__version__",
    "errors",
]
