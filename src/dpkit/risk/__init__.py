"""Risk in plain terms: what a release lets an attacker do.

:func:`of` reads a guarantee (a mechanism, an event, a list of events, a budget, a session, a
query result, a trade-off curve, or a bare ``epsilon``/``mu``/``rho``) and returns a
:class:`Risk` whose figures are **upper bounds**, rounded up, on what any attacker achieves:

* :meth:`Risk.tpr` / :meth:`Risk.max_tpr`: the largest true-positive rate of a membership test
  at a given false-positive rate (the trade-off curve, Dong, Roth and Su 2022);
  :meth:`Risk.low_fpr_rates` at 10%, 1%, ... 1e-6; :meth:`Risk.advantage`;
* :meth:`Risk.posterior`: the highest belief reachable from a prior;
* :meth:`Risk.reconstruction`: an informed attacker's chance to reconstruct a record (Hayes,
  Mahloujifar and Balle 2023);
* :meth:`Risk.group`: the same for k people together (group privacy).

:func:`report` writes the one-page privacy report of a budget or session (HTML, Markdown and a
JSON twin).
"""

from dpkit.risk._curve import Guarantee, curve_of_events, guarantee_of
from dpkit.risk._report import PrivacyReport, report
from dpkit.risk._risk import LOW_FPRS, Posterior, Risk, of, percent

__all__ = [
    "LOW_FPRS",
    "Guarantee",
    "Posterior",
    "PrivacyReport",
    "Risk",
    "curve_of_events",
    "guarantee_of",
    "of",
    "percent",
    "report",
]
