"""Black-box auditing: estimate a mechanism's trade-off curve and a lower bound on its epsilon.

An audit runs the hypothesis test that f-DP is about (Dong, Roth and Su, "Gaussian differential
privacy", JRSS-B 2022): it draws outputs of ``M(D)`` and ``M(D')``, picks a test on one half of
them, and bounds that test's errors on the other half with Clopper-Pearson intervals. From the
bounds follow an epsilon lower bound at a chosen delta, a mu lower bound, and a verdict on a
claimed guarantee that says "violated" only when the confidence bound proves it.

>>> from dpkit.audit import Claim, audit
>>> result = audit(mechanism, (0.0, 1.0), samples=1_000_000,
...                claim=Claim.pure(epsilon=1.0))          # doctest: +SKIP
>>> print(result.summary())                                 # doctest: +SKIP

See ``docs/audit.md`` for the guide and :mod:`dpkit.audit.known_bad` for the corpus of broken
mechanisms the auditor is validated against.
"""

from dpkit.audit import known_bad
from dpkit.audit._audit import AuditResult, TradeoffPoint, audit, audit_ldp
from dpkit.audit._claims import Claim, as_claim
from dpkit.audit._stats import (
    clopper_pearson,
    clopper_pearson_lower,
    clopper_pearson_upper,
    epsilon_lower_bound,
    mu_lower_bound,
)
from dpkit.audit._testers import (
    BitTester,
    ClassifierTester,
    HistogramTester,
    ThresholdTester,
    default_testers,
    float_low_bits,
    float_structure,
)

__all__ = [
    "AuditResult",
    "BitTester",
    "Claim",
    "ClassifierTester",
    "HistogramTester",
    "ThresholdTester",
    "TradeoffPoint",
    "as_claim",
    "audit",
    "audit_ldp",
    "clopper_pearson",
    "clopper_pearson_lower",
    "clopper_pearson_upper",
    "default_testers",
    "epsilon_lower_bound",
    "float_low_bits",
    "float_structure",
    "known_bad",
    "mu_lower_bound",
]
