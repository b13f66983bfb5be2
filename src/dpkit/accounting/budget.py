"""A privacy budget that is charged *before* each release: a privacy filter or an odometer.

:class:`Budget` holds a
budget and an interpreter accountant that turns events into privacy spent. How an
``(epsilon, delta)`` budget reads events is its ``method``:

* ``delta == 0``: pure budget, :class:`~dpkit.accounting.pure.PureDpAccountant`; the spent
  epsilon is an exact :class:`fractions.Fraction` (the sum of the doubles charged), compared
  exactly with the budget;
* ``method="basic"`` (default): :class:`~dpkit.accounting.approx.ApproxDpAccountant`, exact sums
  of epsilons and of deltas (basic composition). A Gaussian event is read through its exact
  privacy profile: it is charged the pair ``(eps(delta_i), delta_i)`` with ``delta_i`` the
  delta still available (split evenly over ``count``), see
  :func:`~dpkit.accounting.approx.gaussian_pair`;
* ``method="zcdp"``: approximate zCDP (Bun and Steinke 2016, Definition 8.1). The budget's delta
  is split once into an allowance ``delta_max`` for delta-approximate events
  (``approx_delta_allowance``, default ``delta / 2``: private partition selection, black-box
  ``(epsilon, delta)`` releases) and the rest, and is converted once to the largest ``rho_max``
  (rounded down) with ``eps(rho_max, delta - delta_max) <= epsilon``. Events are charged as
  ``(rho, delta)`` (:mod:`dpkit.accounting.zcdp`); ``sum rho <= rho_max`` and
  ``sum delta <= delta_max`` are checked exactly in rationals. Then ``delta_total(epsilon) <=
  delta_rho_max(epsilon) + delta_max <= delta``;
* ``method="gdp"``: likewise in mu-Gaussian DP: the largest ``mu`` (rounded down) whose exact
  Gaussian privacy profile is within ``(epsilon, delta)``; only exactly Gaussian events are
  accepted and ``sum mu_i^2 <= mu^2`` is checked exactly;
* ``method="rdp"``: :class:`~dpkit.accounting.rdp.RdpAccountant`; the spent epsilon is the
  RDP conversion at the budget's delta, rounded up. With ``rdp_order=alpha`` it uses that
  single order and nothing else.

A budget can also be given directly in zCDP (``Budget(rho=...)``) or in Gaussian DP
(``Budget(mu=...)``); :class:`~dpkit.accounting.filters.ZCdpFilter` and
:class:`~dpkit.accounting.filters.GdpFilter` are these budgets under their own names.

Floating-point pmf slack (``zcdp`` and ``gdp``). The Gaussian samplers state that their pmf is
within ``exp(+-a)`` of the ideal one. The ideal mechanisms are charged in rho (or mu); the slacks
add up to ``A`` and are capped by a fixed allowance ``A_max`` (``pmf_slack_allowance``, default
``2**-12 * min(1, epsilon)``, room for 256 Gaussian releases at ``a = 2**-20``). The budget's rho
(mu) is computed at ``(epsilon - 2 A_max, delta e^{-A_max})``, so that the actual interaction
satisfies ``delta(epsilon) <= e^{A_max} delta_ideal(epsilon - 2 A_max) <= delta``.

Modes. ``"filter"`` refuses, with :class:`~dpkit.errors.BudgetExceededError`, any charge after
which the spent privacy would exceed the budget: the caller must charge first and release only
if the charge succeeded. ``"odometer"`` never refuses for budget reasons: it records every
charge and reports what was spent.

Adaptively chosen privacy parameters (a filter lets the analyst pick each release's parameters
after seeing earlier results):

* basic composition (pure and ``"basic"`` budgets) stays valid (Rogers, Roth, Ullman and Vadhan
  2016, "Privacy odometers and filters");
* ``"zcdp"``: a filter that stops before the total rho exceeds a fixed ``rho_max`` is
  ``rho_max``-zCDP (Whitehouse, Ramdas, Rogers and Wu 2023, "Fully-adaptive composition in
  differential privacy"; equivalently, at every order alpha it is the Renyi filter of Feldman and
  Zrnic 2021, Theorem 3.1, with budget ``alpha rho_max``);
* ``"gdp"``: a filter that stops before ``sum mu_i^2`` exceeds a fixed ``mu_max^2`` is
  ``mu_max``-GDP (Smith and Thakurta 2022, "Fully adaptive composition for Gaussian differential
  privacy");
* ``"rdp"`` with ``rdp_order=alpha``: the single-order Renyi filter of Feldman and Zrnic (2021,
  Theorem 3.1). The default ``"rdp"`` rule (best order of a grid, combined with the pure-DP sum)
  is exact for a schedule fixed in advance only; do not rely on it for adaptively chosen
  parameters.

  The delta part of approximate-zCDP charges stays valid too, with ``delta_max`` fixed: couple
  the interaction with the one that always draws from the ``P`` parts (see
  :mod:`dpkit.accounting.zcdp`); the weight of the ``P`` path is ``prod (1 - delta_i) >= 1 -
  delta_max`` on every history, so ``M(x)(S) <= (1 - delta_max) nu(S) + delta_max`` and
  ``M(x')(S) >= (1 - delta_max) nu'(S)``, and the ``P``-path interaction ``nu`` is a zCDP
  filter with ``rho_max``. A rule that traded rho against delta along the way (stopping when
  ``eps(rho, delta - sum delta_i)`` reaches epsilon) would have no such fixed split, which is
  why the split is fixed at construction.

Neighbouring relation. A budget counts privacy under one relation, ``neighbouring=
"add_remove"`` (the default: one record added or removed) or ``"replace"`` (one record replaced
by another), and restates every event under it before charging
(:mod:`dpkit.accounting._relations`): under an add/remove budget an event stated under
replace-one (randomized response, by default) is refused, since a replace-one guarantee says
nothing about adding a record; under a replace-one budget an add/remove event is charged by
group privacy for two steps (a replacement is a removal plus an addition): ``epsilon -> 2
epsilon``, ``delta -> (1 + e^epsilon) delta``, ``rho -> 4 rho``, ``mu -> 2 mu`` (noise events
exactly, with the noise multiplier halved or the sensitivity doubled). Black-box charges
(``charge(epsilon=...)``, ``PureDpEvent``, ``ApproxDpEvent``, ``ZCdpEvent``) are add/remove
statements. Guarantees under different relations are never added up.

In every filter the thresholds (epsilon, delta, rho_max, mu_max, A_max, delta_max) are fixed
when the budget is built; they never depend on what was charged.

Safety rules kept here: every check runs on a *copy* of the state; the state changes in one
assignment after every check has passed, so a refused or failing charge leaves the budget
exactly as it was; a lock makes check-and-update atomic across threads; state is saved and
restored as JSON through the event allow-list (:func:`~dpkit.events.event_to_dict`),
never by importing names found in the data.

Storage. The state is the replay of the records in the budget's ledger
(:mod:`dpkit.accounting.ledger`; :class:`~dpkit.accounting.ledger.MemoryLedger` by default,
durable stores in :mod:`dpkit.ledger`). An accepted charge is appended by compare-and-append
before :meth:`Budget.charge` returns: if another writer appended first, the budget replays its
records, checks again and retries, so writers in several processes never overspend together.
Per-analyst :class:`SubBudget` records sit in the same sequence, so one append covers the
analyst's cap and the total. Every record is read back through the replay's own reader before
it is written (a charge whose record would not replay is refused), and the replay checks each
record's stored ``spent_after`` against the state it recomputes (a consistency check that
detects edited costs; whoever can write to the store is still trusted).

A note on exactness: ``0.1`` as a double is slightly *more* than 1/10, so ten charges of
``epsilon=0.1`` add up to more than the budget ``1.0`` and the tenth is refused. This is the
exact arithmetic of the numbers given, and it errs on the safe side. Use :meth:`Budget.split`
to get parts that are guaranteed to fit.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import json
import math
import numbers
import os
import threading
import time
import weakref
from collections.abc import Callable, Mapping
from fractions import Fraction
from typing import Any, TypeVar

from dpkit._numeric.display import fmt, left
from dpkit._numeric.rounding import down, up
from dpkit._numeric.validation import (
    check_delta,
    check_epsilon,
    check_integer,
    check_mu,
    check_nonnegative,
    check_positive,
)
from dpkit.accounting import ledger as _ledger
from dpkit.accounting._base import PrivacyAccountant
from dpkit.accounting._relations import restate
from dpkit.accounting.approx import ApproxDpAccountant, gaussian_pair
from dpkit.accounting.pure import PureDpAccountant
from dpkit.errors import (
    BudgetExceededError,
    BudgetUnavailableError,
    LedgerError,
    PrivacyParameterError,
    SerializationError,
    UnsupportedEventError,
)
from dpkit.events import (
    ApproxDpEvent,
    DpEvent,
    GaussianEvent,
    Neighbouring,
    NonPrivateEvent,
    PureDpEvent,
    as_neighbouring,
    event_from_dict,
    event_to_dict,
)

__all__ = ["Budget", "ChargeCost", "ChargeRecord", "Share", "SubBudget"]

_FORMAT = "dpkit.budget"

# Every live budget, so that a forked child can disable its copies (see ``_disable_in_child``).
_LIVE_BUDGETS: weakref.WeakSet[Budget] = weakref.WeakSet()


def _disable_in_child() -> None:
    """``os.register_at_fork`` child handler: fresh locks, and no charges on copied budgets.

    ``fork`` copies the budget's lock in whatever state it had: if another thread was charging,
    the child's first charge would wait forever. It also copies the spent total: parent and child
    could then each spend the whole remaining budget, and the two releases together would exceed
    it. The child's copy therefore gets a fresh lock and refuses every charge with
    :class:`~dpkit.errors.BudgetUnavailableError` (reading what was spent still works).
    """
    for budget in list(_LIVE_BUDGETS):
        budget._lock = threading.Lock()
        budget._forked = True


if hasattr(os, "register_at_fork"):  # POSIX; Windows has no fork
    os.register_at_fork(after_in_child=_disable_in_child)
_VERSION = 4
_MODES = ("filter", "odometer")
_METHODS = ("basic", "rdp", "zcdp", "gdp")
#: Relative headroom left by :meth:`Budget.split` in rho and mu for the mechanisms' own rounding.
_SPLIT_HEADROOM = Fraction(1) - Fraction(2) ** -40
_DEFAULT_SLACK = 2.0**-12


def zcdp_share_default(epsilon: float, delta: float, *,
                       slack: float = 0.0) -> tuple[float, float, float]:
    """:meth:`Budget.zcdp_share` with the default proportions of a zcdp budget:
    ``A = max(slack, 2**-12 min(1, epsilon))`` and ``approx_delta = delta / 2`` (rounded
    down); the same as ``Budget(epsilon=epsilon, delta=delta, method="zcdp")`` keeps."""
    eps = check_epsilon(epsilon)
    dl = check_delta(delta, allow_zero=False)
    a = max(_DEFAULT_SLACK * min(1.0, eps), check_nonnegative(slack, "slack"))
    return _share(eps, dl, down(Fraction(dl) / 2), a)


def _share(eps: float, dl: float, approx: float, a: float) -> tuple[float, float, float]:
    """rho converted at ``delta - approx``; the approximate delta granted is ``approx (1 -
    2**-40)``, so that ``k`` shares of ``fl(delta / k)`` (each up to ``2**-53`` above the exact
    ``delta / k``) add up to at most the budget's ``delta_max``."""
    if not Fraction(eps) - 2 * Fraction(a) > 0:
        raise PrivacyParameterError(
            f"epsilon={eps!r} is too small for a floating-point slack of {a!r}"
        )
    return (_native_for("zcdp", eps, dl, approx, a),
            down(Fraction(approx) * (1 - Fraction(1, 2**40))), a)


def _native_for(kind: str, eps: float, delta: float, approx_delta: float, a: float) -> float:
    """The largest rho (``kind="zcdp"``) or mu (``"gdp"``), rounded down, of an ``(eps, delta)``
    budget that keeps ``approx_delta`` for approximate events and ``a`` of floating-point
    slack: converted at ``(eps - 2 a, (delta - approx_delta) e^-a)``, each rounded down (the
    relative 2**-50 covers the rounding of exp and of the product)."""
    eff_eps = down(Fraction(eps) - 2 * Fraction(a))
    conv_delta = delta
    if approx_delta:
        conv_delta = down(Fraction(delta) - Fraction(approx_delta))
    eff_delta = conv_delta * math.exp(-a) * (1.0 - 2.0**-50)
    if kind == "zcdp":
        from dpkit.accounting.zcdp import zcdp_rho_for

        rho: float = zcdp_rho_for(eff_eps, eff_delta)
        return rho
    from dpkit.accounting.gdp import gdp_mu_for

    mu: float = gdp_mu_for(eff_eps, eff_delta)
    return mu
#: Compare-and-append attempts before a charge gives up. Each lost attempt is another writer's
#: accepted record (a conflict that shows no newer record fails at once), so the ledger always
#: moves on; after a few losses in a row the writer pauses briefly (randomised, at most
#: ``_MAX_PAUSE`` seconds) so that it is not starved by faster writers.
_MAX_ATTEMPTS = 1000
_MAX_PAUSE = 0.05
#: Relative difference allowed between a record's stored ``spent_after`` and its replay: the
#: conversions (zCDP, GDP, RDP, the Gaussian pair of a basic budget) use floating-point
#: functions whose last bits may differ between machines sharing one ledger.
_REPLAY_TOLERANCE = 1e-9
#: Largest metadata (as JSON text) stored with one charge.
_MAX_METADATA = 65_536

_T = TypeVar("_T")
_ALL: Any = object()  # history(): every analyst


def _store_call(call: Callable[[], _T]) -> _T:
    """Run a store operation; any failure of the store becomes a :class:`LedgerError` (the
    stores raise it themselves; this also catches what a third-party store might raise)."""
    try:
        return call()
    except LedgerError:
        raise
    except (OSError, RuntimeError, ValueError, TypeError, AttributeError) as exc:
        raise LedgerError(f"the ledger store failed; nothing was charged: {exc!r}") from exc


def _pause(attempt: int) -> None:
    """Back off after ``attempt`` compare-and-append losses in a row (none for the first 3):
    a random pause up to ``min(_MAX_PAUSE, 2**-10 * 2**(attempt - 3))`` seconds. The randomness
    only spreads writers in time; it plays no privacy role."""
    if attempt >= 3:
        cap = min(_MAX_PAUSE, 2.0 ** (min(attempt, 20) - 13))
        fraction = int.from_bytes(os.urandom(2), "big") / 65536.0  # uniform in [0, 1)
        time.sleep(fraction * cap)


@dataclasses.dataclass(frozen=True)
class _Charge:
    """A charge record's payload, read as the replay reads it."""

    event: DpEvent
    count: int
    metadata: dict[str, Any]
    spent_after: tuple[float, float]
    analyst_spent_after: tuple[float, float] | None


def _spent_pair(value: Any, what: str) -> tuple[float, float]:
    if not isinstance(value, list) or len(value) != 2 or not all(
        isinstance(v, (int, float)) and not isinstance(v, bool) for v in value
    ):
        raise ValueError(f"{what} must be a list of two numbers, got {value!r}")
    return float(value[0]), float(value[1])


def _decode_charge(payload: str, analyst: str | None) -> _Charge:
    """Read the payload of a charge record: the one reader used by the replay, by
    :meth:`Budget.history` and, before anything is written, by :meth:`Budget.charge` (so an
    accepted record always replays). Raises ValueError (SerializationError), TypeError,
    KeyError or RecursionError on anything malformed."""
    body = json.loads(payload)
    if not isinstance(body, dict):
        raise ValueError(f"a charge record is a JSON object, got {type(body).__name__}")
    event = event_from_dict(body["event"])
    count = body["count"]
    if type(count) is not int or count < 0:
        raise ValueError(f"count must be an int >= 0, got {count!r}")
    metadata = body["metadata"]
    if not isinstance(metadata, dict):
        raise ValueError(f"metadata must be a JSON object, got {metadata!r}")
    spent = _spent_pair(body["spent_after"], "spent_after")
    sub = body.get("analyst_spent_after")
    if (analyst is None) != (sub is None):
        raise ValueError("analyst_spent_after goes with an analyst's charge, and only there")
    sub_spent = None if sub is None else _spent_pair(sub, "analyst_spent_after")
    return _Charge(event, count, metadata, spent, sub_spent)


#: What a malformed payload raises from :func:`_decode_charge` or the replay of its event.
_UNREADABLE = (KeyError, TypeError, ValueError, RecursionError, UnsupportedEventError)


def _spent_pair_of(state: _State) -> tuple[float, float]:
    """The ``spent_after`` a record stores for ``state``: (epsilon, delta) rounded up."""
    return up(state.spent_epsilon), min(up(state.spent_delta), 1.0)


def _agree(stored: tuple[float, float], replayed: tuple[float, float]) -> bool:
    """Whether a stored ``spent_after`` matches the replay (relative ``_REPLAY_TOLERANCE``)."""
    for a, b in zip(stored, replayed, strict=True):
        if a == b:
            continue
        if not (math.isfinite(a) and math.isfinite(b)):
            return False
        if abs(a - b) > _REPLAY_TOLERANCE * max(abs(a), abs(b)):
            return False
    return True


def _check_metadata(metadata: Mapping[str, Any] | None) -> dict[str, Any]:
    """Metadata stored with a charge: a JSON object (str keys, finite numbers) of at most
    64 KiB, returned as a fresh dict (a later change to the caller's object changes nothing)."""
    if metadata is None:
        return {}
    if not isinstance(metadata, Mapping) or not all(isinstance(k, str) for k in metadata):
        raise PrivacyParameterError(f"metadata must be a mapping with str keys, got {metadata!r}")
    try:
        text = json.dumps(dict(metadata), allow_nan=False, sort_keys=True)
    except (TypeError, ValueError, RecursionError) as exc:
        raise PrivacyParameterError(f"metadata must be JSON data: {exc}") from exc
    if len(text) > _MAX_METADATA:
        raise PrivacyParameterError(f"metadata is {len(text)} characters, over {_MAX_METADATA}")
    loaded: dict[str, Any] = json.loads(text)
    return loaded


def _new_interpreter(kind: str, rdp_order: float | None) -> PrivacyAccountant:
    if kind == "pure":
        return PureDpAccountant()
    if kind == "basic":
        return ApproxDpAccountant()
    if kind == "zcdp":
        from dpkit.accounting.zcdp import ZCdpAccountant

        return ZCdpAccountant()
    if kind == "gdp":
        from dpkit.accounting.gdp import ExactGdpAccountant

        return ExactGdpAccountant()
    from dpkit.accounting.rdp import RdpAccountant

    if rdp_order is None:
        return RdpAccountant()
    return RdpAccountant(orders=(rdp_order,), combine_bounds=False)


def _approx_delta_exact(acct: PrivacyAccountant) -> Fraction:
    """Total delta of the approximate-zCDP charges of a zCDP interpreter (0 otherwise)."""
    from dpkit.accounting.zcdp import ZCdpAccountant

    if isinstance(acct, ZCdpAccountant):
        return acct.delta_exact
    return Fraction(0)


def _native_exact(acct: PrivacyAccountant) -> tuple[Fraction | float, Fraction]:
    """(rho or mu^2, pmf slack) of a zCDP / exact-GDP interpreter, exact."""
    from dpkit.accounting.gdp import ExactGdpAccountant
    from dpkit.accounting.zcdp import ZCdpAccountant

    if isinstance(acct, ZCdpAccountant):
        return acct.rho_exact, acct.slack_exact
    if isinstance(acct, ExactGdpAccountant):
        return acct.mu_squared_exact, acct.slack_exact
    raise TypeError(f"{type(acct).__name__} has no native unit")  # pragma: no cover


@dataclasses.dataclass(frozen=True)
class _State:
    """Everything that changes when a charge is accepted (replaced as a whole, never mutated)."""

    interpreter: PrivacyAccountant
    ledger: tuple[tuple[DpEvent, int], ...]
    spent_epsilon: Fraction | float  # exact for basic/pure, else rounded up; inf: non-private
    spent_delta: Fraction


class Pair(tuple[float, float]):
    """An ``(epsilon, delta)`` pair that prints rounded: ``(epsilon=1, delta=1e-07)``.

    A plain tuple of the exact doubles otherwise (``pair[0]``, unpacking, ``==`` with a
    tuple); ``.epsilon``/``.delta`` name its parts. A remaining pair knows its total
    (``of``) and shows a residue at most :data:`dpkit._numeric.display.TINY` of it as 0.
    """

    _of: tuple[float | None, float] | None

    def __new__(cls, epsilon: float, delta: float, *,
                of: tuple[float | None, float] | None = None) -> Pair:
        out = super().__new__(cls, (epsilon, delta))
        out._of = of
        return out

    @property
    def epsilon(self) -> float:
        return self[0]

    @property
    def delta(self) -> float:
        return self[1]

    def __repr__(self) -> str:
        e, d = self
        if self._of is not None:
            return f"(epsilon={fmt(left(e, self._of[0]))}, delta={fmt(left(d, self._of[1]))})"
        return f"(epsilon={fmt(e)}, delta={fmt(d)})"

    __str__ = __repr__

    def __reduce__(self) -> Any:
        return (tuple, (tuple(self),))


def _amounts(pairs: list[tuple[str, float]]) -> str:
    return " and ".join(f"{name} {fmt(value)}" for name, value in pairs)


def refusal_message(what: str, need: list[tuple[str, float]], left_now: list[tuple[str, float]],
                    total: list[tuple[str, float]], fix: str, analyst: str | None = None,
                    note: str = "") -> str:
    """The first sentence of a budget refusal, in rounded numbers: ``This query needs epsilon
    0.5 but only epsilon 0.3 is left of the budget of epsilon 1; ask for less or use a larger
    budget.`` ``need``/``left_now``/``total`` are ``(name, value)`` lists; a remaining value
    at most ``TINY`` of its total is shown as 0; ``note`` follows the total (e.g. its
    ``(epsilon, delta)`` when the budget counts in rho)."""
    totals = dict(total)
    shown = [(name, left(value, totals.get(name))) for name, value in left_now]
    verb = "is" if len(shown) == 1 else "are"
    owner = "the budget" if analyst is None else f"the budget of analyst {analyst!r}"
    return (f"This {what} needs {_amounts(need)} but only {_amounts(shown)} {verb} left of "
            f"{owner}, {_amounts(total)}{note}; {fix}.")


@dataclasses.dataclass(frozen=True)
class ChargeCost:
    """What one charge costs, as the budget reads it (see :meth:`Budget.cost_of`).

    ``epsilon``/``delta``: the charge on its own as an (epsilon, delta) guarantee: the pair
    charged (pure and basic budgets), or the conversion at the budget's delta (zcdp, gdp, rdp),
    rounded up. ``native``: the cost in the budget's own unit (``unit``: ``"epsilon"`` for a
    pure budget, ``"rho"`` for zcdp, ``"mu"`` for gdp, the charge's own mu; ``None`` for basic
    and rdp). ``pmf_slack``: the floating-point slack the charge adds (zcdp, gdp).
    ``spent_after``: the budget's :attr:`Budget.spent` if the charge were accepted.
    """

    epsilon: float
    delta: float
    native: float | None
    unit: str | None
    pmf_slack: float
    spent_after: tuple[float, float]

    def __str__(self) -> str:
        native = "" if self.unit is None else f"{self.unit}={self.native!r}, "
        return f"{native}(epsilon={self.epsilon!r}, delta={self.delta!r})"


@dataclasses.dataclass(frozen=True, kw_only=True)
class ChargeRecord:
    """One charge as the ledger keeps it (see :meth:`Budget.history`).

    ``seq``: its place in the ledger (from 1); ``time``: when it was written (UNIX seconds,
    UTC); ``analyst``: the sub-budget charged (``None``: the total itself); ``event`` and
    ``count``: what was charged; ``metadata``: what the caller attached (a query, a summary);
    ``spent_after``: the total's ``(epsilon, delta)`` spent after it, rounded up.
    """

    seq: int
    time: float
    analyst: str | None
    event: DpEvent
    count: int
    metadata: dict[str, Any]
    spent_after: tuple[float, ...]


@dataclasses.dataclass(frozen=True)
class Share:
    """One of k equal parts of a budget's remaining privacy (see :meth:`Budget.split`).

    Fields that do not apply to the budget's method are ``None``. ``rho`` and ``mu`` describe
    Gaussian noise (``mu = sqrt(2 rho)``); ``pmf_slack`` is the floating-point slack one part
    may use.
    """

    epsilon: float | None
    delta: float | None
    rho: float | None
    mu: float | None
    pmf_slack: float | None


class Budget:
    """A privacy budget charged before each release (filter) or a record of spending (odometer).

    Parameters (keyword-only)
    -------------------------
    epsilon:
        The epsilon budget (> 0). Required in ``"filter"`` mode unless ``rho`` or ``mu`` is
        given; optional (``None``: no limit, report only) in ``"odometer"`` mode.
    delta:
        The delta budget, in [0, 1). ``0`` makes a pure budget. With ``rho``/``mu`` it is only
        the delta at which :attr:`spent` reports epsilon.
    mode:
        ``"filter"`` (refuse overspending) or ``"odometer"`` (record and report).
    method:
        ``"basic"``, ``"zcdp"``, ``"gdp"`` or ``"rdp"``: how an ``(epsilon, delta)`` budget
        reads events (see the module docstring); ignored for a pure budget.
    rdp_order:
        With ``method="rdp"``: use this single Renyi order (> 1) and only the RDP conversion,
        the filter proven valid for adaptively chosen parameters (Feldman and Zrnic 2021).
    rho, mu:
        A budget given directly in zCDP (``rho > 0``) or Gaussian DP (``mu > 0``) instead of
        ``epsilon``.
    pmf_slack_allowance:
        ``zcdp``/``gdp`` only: the total floating-point slack ``A_max`` the budget accepts
        (default ``2**-12 * min(1, epsilon)``, or ``2**-12`` for a ``rho``/``mu`` budget).
    approx_delta_allowance:
        ``zcdp`` only: the total delta ``delta_max`` that delta-approximately zCDP charges
        (partition selection, black-box ``(epsilon, delta)`` releases) may use. Default
        ``delta / 2`` (rounded down) for an ``(epsilon, delta)`` budget, and 0 for a ``rho``
        budget. Must be below delta for an ``(epsilon, delta)`` budget; ``0`` gives the whole
        delta to the conversion of rho (largest ``rho_max``) and refuses approximate charges.
    neighbouring:
        The neighbouring relation the budget holds under: ``"add_remove"`` (default) or
        ``"replace"``. Events stated under the other relation are converted by group privacy
        (add/remove events on a replace budget) or refused (replace-one events on an
        add/remove budget); see the module docstring.

    Examples
    --------
    >>> budget = Budget(epsilon=1.0)
    >>> budget.charge(epsilon=0.25)
    >>> budget.spent
    (0.25, 0.0)
    """

    def __init__(
        self,
        *,
        epsilon: float | None = None,
        delta: float = 0.0,
        mode: str = "filter",
        method: str = "basic",
        rdp_order: float | None = None,
        rho: float | None = None,
        mu: float | None = None,
        pmf_slack_allowance: float | None = None,
        approx_delta_allowance: float | None = None,
        neighbouring: str | Neighbouring = Neighbouring.ADD_REMOVE,
        ledger: _ledger.Ledger | None = None,
        name: str = "budget",
    ) -> None:
        self._neighbouring = as_neighbouring(neighbouring)
        if mode not in _MODES:
            raise PrivacyParameterError(f"mode must be 'filter' or 'odometer', got {mode!r}")
        if method not in _METHODS:
            raise PrivacyParameterError(
                f"method must be 'basic', 'zcdp', 'gdp' or 'rdp', got {method!r}"
            )
        if sum(x is not None for x in (epsilon, rho, mu)) > 1:
            raise PrivacyParameterError("give only one of epsilon, rho and mu")
        self._mode = mode
        self._method = method
        self._budget_delta = check_delta(delta)
        self._budget_epsilon: float | None = None
        self._given_rho: float | None = None
        self._given_mu: float | None = None
        if rho is not None:
            self._given_rho = check_positive(rho, "rho")
            if method not in ("basic", "zcdp"):
                raise PrivacyParameterError("a rho budget uses method='zcdp'")
            self._kind = "zcdp"
        elif mu is not None:
            self._given_mu = check_mu(mu)
            if method not in ("basic", "gdp"):
                raise PrivacyParameterError("a mu budget uses method='gdp'")
            self._kind = "gdp"
        else:
            if epsilon is None:
                if mode == "filter":
                    raise PrivacyParameterError("a filter needs an epsilon (or rho, or mu) budget")
            else:
                self._budget_epsilon = check_epsilon(epsilon)
            if self._budget_delta == 0.0:
                if method in ("zcdp", "gdp"):
                    raise PrivacyParameterError(
                        f"method={method!r} needs delta > 0 (or a rho/mu budget)"
                    )
                self._kind = "pure"
            else:
                self._kind = method
        if rdp_order is None:
            self._rdp_order: float | None = None
        else:
            if self._kind != "rdp":
                raise PrivacyParameterError("rdp_order needs method='rdp' and delta > 0")
            self._rdp_order = check_positive(rdp_order, "rdp_order")
            if not 1.0 < self._rdp_order <= 1e6:
                raise PrivacyParameterError(f"rdp_order must lie in (1, 1e6], got {rdp_order!r}")
        self._slack_allowance: float | None = None
        self._native_budget: float | None = None  # rho_max or mu_max
        self._approx_allowance: float | None = None  # delta_max (zcdp)
        if self._kind == "zcdp":
            self._setup_approx(approx_delta_allowance)
        elif approx_delta_allowance is not None:
            raise PrivacyParameterError("approx_delta_allowance applies to method 'zcdp' only")
        if self._kind in ("zcdp", "gdp"):
            self._setup_native(pmf_slack_allowance)
        elif pmf_slack_allowance is not None:
            raise PrivacyParameterError("pmf_slack_allowance applies to method 'zcdp'/'gdp' only")
        self._lock = threading.Lock()
        self._forked = False
        _LIVE_BUDGETS.add(self)
        self._state = _State(
            interpreter=_new_interpreter(self._kind, self._rdp_order),
            ledger=(),
            spent_epsilon=Fraction(0),
            spent_delta=Fraction(0),
        )
        self._attach(ledger, name)

    def _attach(self, ledger: _ledger.Ledger | None, name: str) -> None:
        """Store the definition under ``name`` (or check it against the stored one), then
        replay every stored record."""
        if ledger is not None and not isinstance(ledger, _ledger.Ledger):
            raise LedgerError(f"ledger must be a Ledger store, got {ledger!r}")
        self._store: _ledger.Ledger = _ledger.MemoryLedger() if ledger is None else ledger
        self._durable = ledger is not None and not isinstance(ledger, _ledger.MemoryLedger)
        self._name = _ledger.check_budget_name(name)
        self._seq = 0  # the last record replayed into self._state
        self._subs: dict[str, Budget] = {}
        mine = json.dumps(self._definition(), sort_keys=True)
        stored = _store_call(lambda: self._store.define(self._name, mine))
        if stored != mine:
            raise LedgerError(
                f"the ledger already holds a budget named {self._name!r} with another "
                f"definition: stored {stored}, given {mine}; open it with Budget.open() or "
                "use another name"
            )
        with self._lock:
            self._sync()

    def _definition(self) -> dict[str, Any]:
        """What the budget is (everything :meth:`to_json` saves except the charges)."""
        return {
            "format": _FORMAT,
            "version": _VERSION,
            "epsilon": self._budget_epsilon,
            "delta": self._budget_delta,
            "mode": self._mode,
            "method": self._method,
            "rdp_order": self._rdp_order,
            "rho": self._given_rho,
            "mu": self._given_mu,
            "pmf_slack_allowance": self._slack_allowance,
            "approx_delta_allowance": self._approx_allowance,
            "neighbouring": self._neighbouring.value,
        }

    def _setup_approx(self, allowance: float | None) -> None:
        """``delta_max``: validated, default ``down(delta / 2)`` (0 for a rho budget)."""
        has_eps_budget = self._given_rho is None and self._budget_epsilon is not None
        if allowance is None:
            value = down(Fraction(self._budget_delta) / 2) if has_eps_budget else 0.0
        else:
            value = check_delta(allowance, name="approx_delta_allowance")
            if has_eps_budget and not value < self._budget_delta:
                raise PrivacyParameterError(
                    f"approx_delta_allowance={value!r} must be below the budget's delta "
                    f"{self._budget_delta!r} (the rest converts rho)"
                )
        self._approx_allowance = value

    def _setup_native(self, allowance: float | None) -> None:
        eps = self._budget_epsilon
        if allowance is None:
            a_max = _DEFAULT_SLACK * (1.0 if eps is None else min(1.0, eps))
        else:
            a_max = check_nonnegative(allowance, "pmf_slack_allowance")
        self._slack_allowance = a_max
        if self._given_rho is not None:
            self._native_budget = self._given_rho
            return
        if self._given_mu is not None:
            self._native_budget = self._given_mu
            return
        if eps is None:  # an odometer without an epsilon cap: no native budget
            return
        if not Fraction(eps) - 2 * Fraction(a_max) > 0:
            raise PrivacyParameterError(
                f"pmf_slack_allowance={a_max!r} leaves no epsilon (needs 2 * allowance < epsilon)"
            )
        self._native_budget = _native_for(self._kind, eps, self._budget_delta,
                                          self._approx_allowance or 0.0, a_max)
        if not self._native_budget > 0.0:
            raise PrivacyParameterError(
                f"the budget (epsilon={eps!r}, delta={self._budget_delta!r}) is too small for "
                f"method={self._kind!r}"
            )

    # ------------------------------------------------------------------ properties
    @property
    def mode(self) -> str:
        """``"filter"`` or ``"odometer"``."""
        return self._mode

    @property
    def neighbouring(self) -> Neighbouring:
        """The neighbouring relation the budget holds under (``Neighbouring.ADD_REMOVE`` or
        ``Neighbouring.REPLACE``)."""
        return self._neighbouring

    @property
    def kind(self) -> str:
        """How events are interpreted: ``"pure"``, ``"basic"``, ``"zcdp"``, ``"gdp"``, ``"rdp"``."""
        return self._kind

    @property
    def budget(self) -> tuple[float | None, float]:
        """``(epsilon, delta)`` budget as given (epsilon ``None`` for a rho/mu budget or an
        unlimited odometer)."""
        return self._budget_epsilon, self._budget_delta

    @property
    def native_unit(self) -> str | None:
        """The budget's own unit: ``"epsilon"`` (pure), ``"rho"`` (zcdp), ``"mu"`` (gdp),
        ``None`` (basic and rdp, which have no single-number unit)."""
        return {"pure": "epsilon", "zcdp": "rho", "gdp": "mu"}.get(self._kind)

    @property
    def native_budget(self) -> float | None:
        """The budget in :attr:`native_unit`: epsilon, ``rho_max`` or ``mu_max`` (the latter
        two rounded down from ``(epsilon, delta)``); ``None`` when there is none."""
        if self._kind == "pure":
            return self._budget_epsilon
        return self._native_budget

    def zcdp_share(self, epsilon: float, delta: float, *,
                   slack: float = 0.0) -> tuple[float, float, float]:
        """What an ``(epsilon, delta)`` share of this zcdp budget may spend, in the budget's own
        currency: ``(rho, approx_delta, pmf_slack)``.

        The share is converted by the rule that made the budget's ``rho_max``, with the
        budget's proportions (``eps_B, delta_B, A_max, delta_max``): the slack reserved for
        calibration is ``A = max(slack, A_max epsilon / eps_B)``, the delta kept for
        approximate events ``d = delta delta_max / delta_B``, both rounded down, and ``rho`` is
        the largest (rounded down) with ``e^A delta_rho(epsilon - 2 A) + d <= delta``. The
        approximate delta granted is ``d (1 - 2**-40)``, rounded down. At the budget's own
        ``(eps_B, delta_B)`` (and ``slack <= A_max``) ``rho`` is exactly ``rho_max``, so one
        release can spend the whole budget; ``k`` shares of ``(eps_B / k, delta_B / k)`` grant
        at most ``delta_max`` together and, ``rho`` growing faster than linearly in epsilon,
        less than ``rho_max``. The budget still checks every charge exactly: this only prices,
        it never grants.

        A budget given in rho (no epsilon) uses the default proportions ``A = 2**-12 min(1,
        epsilon)`` and ``approx_delta = delta / 2``.
        """
        if self._kind != "zcdp":
            raise PrivacyParameterError(f"zcdp_share needs a zcdp budget, not {self._kind!r}")
        b_eps = self._budget_epsilon
        if b_eps is None or not self._budget_delta > 0.0:
            return zcdp_share_default(epsilon, delta, slack=slack)
        eps = check_epsilon(epsilon)
        dl = check_delta(delta, allow_zero=False)
        a = down(Fraction(self._slack_allowance or 0.0) * Fraction(eps) / Fraction(b_eps))
        approx = down(Fraction(dl) * Fraction(self._approx_allowance or 0.0)
                      / Fraction(self._budget_delta))
        return _share(eps, dl, approx, max(a, check_nonnegative(slack, "slack")))

    @property
    def pmf_slack_allowance(self) -> float | None:
        """The total floating-point slack ``A_max`` accepted (zcdp and gdp), else ``None``."""
        return self._slack_allowance

    @property
    def approx_delta_allowance(self) -> float | None:
        """The total delta ``delta_max`` of approximate-zCDP charges accepted (zcdp), else
        ``None``."""
        return self._approx_allowance

    @property
    def spent_approx_delta(self) -> float | None:
        """Total delta of the approximate-zCDP charges so far (zcdp), rounded up; else ``None``."""
        if self._kind != "zcdp":
            return None
        return up(_approx_delta_exact(self._state.interpreter))

    @property
    def spent_delta_exact(self) -> Fraction | None:
        """The exact total delta of the approximate-zCDP charges (zcdp), else ``None``."""
        if self._kind != "zcdp":
            return None
        return _approx_delta_exact(self._state.interpreter)

    @property
    def spent(self) -> tuple[float, float]:
        """``(epsilon, delta)`` spent so far, rounded up (``inf`` after a non-private release).

        Pure and basic budgets: the exact sums. rdp, zcdp and gdp: the epsilon certified at the
        budget's delta and the delta certified at that epsilon (at most the budget's delta);
        ``(0.0, 0.0)`` before anything was charged.
        """
        state = self._state  # one read of an immutable snapshot: consistent without the lock
        return Pair(up(state.spent_epsilon), min(up(state.spent_delta), 1.0))

    @property
    def spent_epsilon_exact(self) -> Fraction | float:
        """The exact spent epsilon (a Fraction for pure/basic budgets), or ``math.inf``."""
        return self._state.spent_epsilon

    @property
    def spent_native(self) -> float | None:
        """Spent in :attr:`native_unit`, rounded up (``mu = sqrt(sum mu_i^2)``); else ``None``."""
        state = self._state
        if self._kind == "pure":
            return up(state.spent_epsilon)
        if self._kind not in ("zcdp", "gdp"):
            return None
        value, _ = _native_exact(state.interpreter)
        if isinstance(value, float):
            return math.inf
        if self._kind == "zcdp":
            return up(value)
        from dpkit._numeric.rounding import sqrt_up

        return sqrt_up(value)

    @property
    def spent_pmf_slack(self) -> float | None:
        """Total floating-point slack charged so far (zcdp and gdp), rounded up."""
        if self._kind not in ("zcdp", "gdp"):
            return None
        return up(_native_exact(self._state.interpreter)[1])

    @property
    def remaining_native(self) -> float | None:
        """Still available in :attr:`native_unit`, rounded down and never negative
        (``mu``: ``sqrt(mu_max^2 - sum mu_i^2)``); ``None`` without a native budget."""
        state = self._state
        if self._kind == "pure":
            return self.remaining[0]
        if self._kind not in ("zcdp", "gdp") or self._native_budget is None:
            return None
        value, _ = _native_exact(state.interpreter)
        if isinstance(value, float):
            return 0.0
        total = Fraction(self._native_budget)
        if self._kind == "zcdp":
            return max(down(total - value), 0.0)
        from dpkit._numeric.rounding import sqrt_down

        return sqrt_down(max(total * total - value, Fraction(0)))

    @property
    def remaining(self) -> tuple[float, float]:
        """``(epsilon, delta)`` still available, rounded down and never negative.

        ``(inf, ...)`` for an odometer without a budget. For zcdp and gdp budgets (whose
        remaining privacy is not a difference of epsilons): the epsilon at which the remaining
        rho (mu) alone, without slack, is certified at the budget's delta, and that delta
        (``(0.0, 0.0)`` once the native budget is used up); for zcdp the conversion uses the
        budget's delta minus the approximate-delta allowance. Use :attr:`remaining_native` and
        :meth:`split` to plan releases. Printed rounded, a residue at most ``1e-9`` of the
        total as 0 (the values themselves are exact).
        """
        e, d = self._remaining_exact()
        return Pair(e, d, of=(self._budget_epsilon, self._budget_delta))

    def _remaining_exact(self) -> tuple[float, float]:
        state = self._state
        if self._kind in ("zcdp", "gdp"):
            return self._remaining_converted(state)
        if self._budget_epsilon is None:
            return math.inf, max(down(Fraction(self._budget_delta) - state.spent_delta), 0.0)
        if isinstance(state.spent_epsilon, float):
            rem_e = 0.0 if math.isinf(state.spent_epsilon) else down(
                Fraction(self._budget_epsilon) - Fraction(state.spent_epsilon)
            )
        else:
            rem_e = down(Fraction(self._budget_epsilon) - state.spent_epsilon)
        rem_d = down(Fraction(self._budget_delta) - state.spent_delta)
        return max(rem_e, 0.0), max(rem_d, 0.0)

    def _remaining_converted(self, state: _State) -> tuple[float, float]:
        rem = self.remaining_native
        if rem is None:
            return math.inf, self._budget_delta
        if rem == 0.0 or self._budget_delta == 0.0:
            return 0.0, 0.0
        if self._kind == "zcdp":
            from dpkit.accounting.zcdp import zcdp_epsilon

            # the remaining rho converts within the part of delta left to the conversion
            conv = self._budget_delta
            if self._approx_allowance and self._approx_allowance < conv:
                conv = down(Fraction(conv) - Fraction(self._approx_allowance))
            eps = zcdp_epsilon(rem, conv)
        else:
            from dpkit.accounting.gdp import gdp_epsilon

            eps = gdp_epsilon(rem, 0.0, self._budget_delta)
        return eps, self._budget_delta

    @property
    def ledger(self) -> tuple[tuple[DpEvent, int], ...]:
        """Every accepted charge, in order, as ``(event, count)``."""
        return self._state.ledger

    @property
    def exceeded(self) -> bool:
        """Whether the spent privacy is over the budget (possible only for an odometer)."""
        return not self._within(self._state)

    # ------------------------------------------------------------------ charging
    def _to_event(self, event: Any, epsilon: float | None, delta: float | None) -> DpEvent:
        """The event a charge stands for (see :meth:`_calibrated_pair` for a Gaussian mechanism
        calibrated to an (epsilon, delta) pair, charged to a basic budget)."""
        if event is not None:
            if isinstance(event, (numbers.Number, str)) or type(event).__module__ == "numpy":
                raise PrivacyParameterError(
                    f"charge() got the bare value {event!r}: to charge a black-box release pass "
                    f"charge(epsilon={event!r}) (and delta=...), or pass an event or a mechanism"
                )
            if epsilon is not None or delta is not None:
                raise PrivacyParameterError("charge either an event or epsilon/delta, not both")
            if isinstance(event, DpEvent):
                return event
            inner = getattr(event, "event", None)
            if isinstance(inner, DpEvent):  # a mechanism: charge what it declares
                return self._calibrated_pair(event, inner)
            raise UnsupportedEventError(
                f"not a DpEvent or a mechanism with an .event: {event!r}"
            )
        if epsilon is None:
            raise PrivacyParameterError("charge needs an event, a mechanism or an epsilon")
        eps = check_epsilon(epsilon, allow_zero=True)
        d = 0.0 if delta is None else check_delta(delta)
        if d == 0.0:
            return PureDpEvent(epsilon=eps)
        return ApproxDpEvent(epsilon=eps, delta=d)

    def _calibrated_pair(self, mechanism: Any, inner: DpEvent) -> DpEvent:
        """A Gaussian mechanism calibrated to ``(epsilon, delta)``, charged to a basic budget,
        is charged as its ``(epsilon', delta')`` pair at ``delta' = delta (1 - 2**-45)``
        (:func:`~dpkit.accounting.approx.gaussian_pair`: the smallest certified epsilon', at
        most the epsilon it was calibrated to, whose headroom is 2**-40 of delta). A bare
        Gaussian event (or one from ``from_mu``/``from_sigma``) is read at the delta the budget
        has left instead (:meth:`_interpretable`), so the first Gaussian would take all of it.

        The pair is what the ledger records, so a replay charges the same. The 2**-45 keeps k
        pairs of ``delta / k`` (each rounded to a double) within ``delta`` for k up to 2**7
        and more, as the epsilon constructors' 2**-40 does for epsilon."""
        target = getattr(mechanism, "calibrated_delta", None)
        if (self._kind != "basic" or not isinstance(inner, GaussianEvent)
                or not isinstance(target, float) or inner.neighbouring != self._neighbouring):
            return inner
        pair = gaussian_pair(inner, target * (1.0 - 2.0**-45))
        return inner if pair is None else pair

    def _interpretable(self, ev: DpEvent, n: int, state: _State) -> DpEvent:
        """The event the interpreter composes for ``ev`` (``n`` times) in this state."""
        if self._kind == "basic" and isinstance(ev, GaussianEvent):
            if n == 0:
                return ApproxDpEvent(epsilon=0.0, delta=0.0)
            rem = Fraction(self._budget_delta) - state.spent_delta
            share = max(down(rem / n), 0.0)
            pair = gaussian_pair(ev, share)
            return NonPrivateEvent() if pair is None else pair
        return ev

    def _spent_of(self, interpreter: PrivacyAccountant, nonempty: bool) -> tuple[Any, Fraction]:
        if isinstance(interpreter, PureDpAccountant):
            return interpreter.epsilon_exact, Fraction(0)
        if isinstance(interpreter, ApproxDpAccountant):
            return interpreter.totals_exact
        if not nonempty:
            return Fraction(0), Fraction(0)
        if self._kind in ("zcdp", "gdp"):
            value, slack = _native_exact(interpreter)
            if isinstance(value, float):
                return math.inf, Fraction(self._budget_delta)
            if value == 0 and slack == 0 and _approx_delta_exact(interpreter) == 0:
                return Fraction(0), Fraction(0)
        if self._budget_delta == 0.0:  # a rho/mu budget without a reporting delta
            eps = interpreter.get_epsilon(0.0)
        else:
            eps = interpreter.get_epsilon(self._budget_delta)
        if math.isinf(eps):
            return math.inf, Fraction(self._budget_delta)
        if self._kind in ("zcdp", "gdp") and self._budget_epsilon is not None and (
            self._native_within(interpreter)
        ):
            # rho <= rho_max (mu <= mu_max) and A <= A_max: (epsilon, delta) is certified by
            # the budget's own calibration, which may be a hair tighter than a fresh conversion.
            eps = min(eps, self._budget_epsilon)
        d = interpreter.get_delta(eps)
        return Fraction(eps), min(Fraction(d), Fraction(self._budget_delta))

    def _native_within(self, interpreter: PrivacyAccountant) -> bool:
        if self._native_budget is None:
            return True
        value, slack = _native_exact(interpreter)
        if isinstance(value, float):
            return False
        total = Fraction(self._native_budget)
        if self._kind == "gdp":
            total = total * total
        assert self._slack_allowance is not None
        if self._kind == "zcdp":
            assert self._approx_allowance is not None
            if not _approx_delta_exact(interpreter) <= Fraction(self._approx_allowance):
                return False
        return value <= total and slack <= Fraction(self._slack_allowance)

    def _within(self, state: _State) -> bool:
        if self._kind in ("zcdp", "gdp"):
            return self._native_within(state.interpreter)
        if self._budget_epsilon is None:
            return True
        e = state.spent_epsilon
        if isinstance(e, float):  # only ever math.inf
            return False
        return e <= Fraction(self._budget_epsilon) and state.spent_delta <= Fraction(
            self._budget_delta
        )

    def _trial(self, ev: DpEvent, n: int) -> tuple[_State, DpEvent]:
        """The state after charging ``ev`` x ``n`` and the event the interpreter read (call
        with the lock held; nothing changes)."""
        old = self._state
        # restated under the budget's relation (may raise UnsupportedEventError); the ledger
        # keeps the event as given, so a replay restates it again
        used = self._interpretable(restate(ev, self._neighbouring), n, old)
        trial = old.interpreter.clone()
        trial.compose(used, n)  # may raise UnsupportedEventError; only the copy is touched
        spent_e, spent_d = self._spent_of(trial, nonempty=True)
        new = _State(
            interpreter=trial,
            ledger=(*old.ledger, (ev, n)),
            spent_epsilon=spent_e,
            spent_delta=spent_d,
        )
        return new, used

    def _cost_after(self, used: DpEvent, n: int, new: _State) -> ChargeCost:
        spent_after = (up(new.spent_epsilon), min(up(new.spent_delta), 1.0))
        return self._cost(used, n, spent_after)

    def _cost(self, used: DpEvent, n: int, spent_after: tuple[float, float]) -> ChargeCost:
        alone = _new_interpreter(self._kind, self._rdp_order)
        alone.compose(used, n)
        native: float | None = None
        slack = 0.0
        e_exact, d_exact = self._spent_of(alone, nonempty=True)
        eps, dlt = up(e_exact), min(up(d_exact), 1.0)
        if self._kind == "pure":
            native = eps
        elif self._kind in ("zcdp", "gdp"):
            value, a = _native_exact(alone)
            slack = up(a)
            if isinstance(value, float):
                native = math.inf
            elif self._kind == "zcdp":
                native = up(value)
            else:
                from dpkit._numeric.rounding import sqrt_up

                native = sqrt_up(value)
        return ChargeCost(eps, dlt, native, self.native_unit, slack, spent_after)

    def charge(
        self,
        event: Any = None,
        *,
        epsilon: float | None = None,
        delta: float | None = None,
        count: int = 1,
        metadata: Mapping[str, Any] | None = None,
    ) -> None:
        """Charge an event, a mechanism (its ``.event``) or a black-box ``epsilon``/``delta``.

        Call this BEFORE making the release, and release only if it returns. In filter mode it
        raises :class:`~dpkit.errors.BudgetExceededError` (saying what the charge would have
        cost) when the charge would take the spent privacy past the budget; an event the
        interpreter cannot read exactly raises :class:`~dpkit.errors.UnsupportedEventError`.
        In both cases nothing changes. A bare number (``charge(0.5)``) is refused: write
        ``charge(epsilon=0.5)``.

        The accepted charge is written to the budget's ledger (with ``metadata``, a JSON object
        such as ``{"query": ...}``, shown by :meth:`history`) before this returns; if the store
        fails, :class:`~dpkit.errors.LedgerError` is raised and nothing was charged.
        """
        ev = self._to_event(event, epsilon, delta)
        n = check_integer(count, name="count", minimum=0)
        meta = _check_metadata(metadata)
        with self._lock:
            self._commit(ev, n, meta, None)

    def _refuse_if_forked(self) -> None:
        if self._forked:
            if self._durable:
                raise BudgetUnavailableError(
                    "this budget was copied into a forked process, where its ledger "
                    "connection must not be used; open the ledger again in this process "
                    "(Budget.open); nothing was charged"
                )
            raise BudgetUnavailableError(
                "this in-memory budget was copied into a forked process, where charging "
                "it could spend the same privacy twice; charge it in the process that "
                "created it; nothing was charged"
            )

    def _commit(self, ev: DpEvent, n: int, meta: dict[str, Any],
                sub_name: str | None) -> None:
        """Check the charge against the total (and the sub-budget ``sub_name``) and append its
        record by compare-and-append; on a conflict, replay what the other writer added and
        check again (call with the lock held). The state changes only after the store
        accepted the record: an exception from the store (or an interrupt) leaves it as it
        was, and a record that was committed all the same is read by the next replay."""
        self._refuse_if_forked()
        lost = False
        for attempt in range(_MAX_ATTEMPTS):
            read = self._sync()
            if lost and read == 0:
                raise LedgerError(
                    f"the ledger store refused record {self._seq + 1} of {self._name!r} as a "
                    "conflict but holds no newer record: the store is damaged (its records and "
                    "its sequence counter disagree); nothing was charged"
                )
            old = self._state
            new, used = self._trial(ev, n)
            if self._mode == "filter" and not self._within(new):
                cost = self._cost_after(used, n, new)
                raise self._refusal(ev, n, cost, old, new, None)
            sub_new: _State | None = None
            sub = None
            body: dict[str, Any] = {"event": self._event_data(ev), "count": n,
                                    "metadata": meta, "spent_after": list(_spent_pair_of(new))}
            if sub_name is not None:
                sub = self._subs[sub_name]
                sub_new, sub_used = sub._trial(ev, n)
                if not sub._within(sub_new):
                    cost = sub._cost_after(sub_used, n, sub_new)
                    raise sub._refusal(ev, n, cost, sub._state, sub_new, sub_name)
                body["analyst_spent_after"] = list(_spent_pair_of(sub_new))
            payload = json.dumps(body, sort_keys=True)
            self._check_replays(payload, ev, n, sub_name)
            record = _ledger.LedgerRecord(seq=self._seq + 1, time=time.time(), kind="charge",
                                          analyst=sub_name, payload=payload)
            if _store_call(functools.partial(self._store.append, self._name, record)):
                self._state = new  # the only state changes
                if sub is not None and sub_new is not None:
                    sub._state = sub_new
                self._seq = record.seq
                return
            lost = True
            _pause(attempt)
        raise LedgerError(
            f"gave up after {_MAX_ATTEMPTS} attempts lost to other writers; nothing was charged"
        )

    @staticmethod
    def _event_data(ev: DpEvent) -> dict[str, Any]:
        """The event as stored (the allow-list of :func:`event_to_dict`)."""
        try:
            return event_to_dict(ev)
        except (SerializationError, RecursionError) as exc:
            raise UnsupportedEventError(
                f"a {type(ev).__name__} cannot be recorded in the ledger ({exc}); "
                "nothing was charged"
            ) from exc

    def _check_replays(self, payload: str, ev: DpEvent, n: int, sub_name: str | None) -> None:
        """Refuse, before anything is written, a record that the replay would not read back
        as this very charge (an event nested deeper than the replay restores, say): one
        accepted record must never make the ledger unreadable for every later reader."""
        try:
            stored = _decode_charge(payload, sub_name)
        except _UNREADABLE as exc:
            raise UnsupportedEventError(
                f"the record of this {type(ev).__name__} charge could not be replayed from "
                f"the ledger ({type(exc).__name__}: {exc}); nothing was charged"
            ) from exc
        if stored.event != ev or stored.count != n:
            raise UnsupportedEventError(
                f"the record of this {type(ev).__name__} charge would be replayed as another "
                "event; nothing was charged"
            )

    def _sync(self) -> int:
        """Replay the records other writers appended since the last one read (lock held);
        return how many were read."""
        if self._forked:
            return 0  # a forked copy must not use the parent's store connection
        records = _store_call(lambda: self._store.read(self._name, self._seq))
        for record in records:
            self._apply(record)
        return len(records)

    def _apply(self, record: _ledger.LedgerRecord) -> None:
        """Replay one stored record, as it was checked when written (no budget check again: a
        record over the budget, which only a damaged store could hold, stays counted,
        conservatively, and the budget reports :attr:`exceeded`). The ``spent_after`` (and
        ``analyst_spent_after``) stored in a charge record must agree with the replayed state
        (relative ``_REPLAY_TOLERANCE``), else LedgerError: a record whose cost was edited after
        it was written is detected, not silently counted at its new cost."""
        if record.seq != self._seq + 1:
            raise LedgerError(
                f"ledger of {self._name!r} skips from record {self._seq} to {record.seq}"
            )
        try:
            if record.kind == "sub_budget":
                body = json.loads(record.payload)
                if record.analyst is None or not isinstance(body, dict):
                    raise ValueError("a sub-budget record names its analyst and definition")
                if record.analyst in self._subs:
                    raise LedgerError(f"sub-budget {record.analyst!r} is defined twice")
                self._subs[record.analyst] = self._make_sub(body["definition"])
            else:
                charge = _decode_charge(record.payload, record.analyst)
                new, _ = self._trial(charge.event, charge.count)
                self._verify(record, "spent_after", charge.spent_after, _spent_pair_of(new))
                sub = sub_new = None
                if record.analyst is not None:
                    sub = self._subs[record.analyst]
                    sub_new, _ = sub._trial(charge.event, charge.count)
                    assert charge.analyst_spent_after is not None
                    self._verify(record, "analyst_spent_after", charge.analyst_spent_after,
                                 _spent_pair_of(sub_new))
                self._state = new
                if sub is not None and sub_new is not None:
                    sub._state = sub_new
        except (*_UNREADABLE, AssertionError) as exc:
            raise LedgerError(
                f"record {record.seq} of budget {self._name!r} cannot be replayed: {exc!r}"
            ) from exc
        self._seq = record.seq

    def _verify(self, record: _ledger.LedgerRecord, field: str, stored: tuple[float, float],
                replayed: tuple[float, float]) -> None:
        if not _agree(stored, replayed):
            raise LedgerError(
                f"record {record.seq} of budget {self._name!r} stores {field}={list(stored)} "
                f"but its replay gives {list(replayed)}: the ledger was changed after it was "
                "written; refusing to replay it"
            )

    def refresh(self) -> None:
        """Read the charges that other processes sharing the ledger have made since the last
        read (:meth:`charge`, :meth:`can_charge` and :meth:`cost_of` do this themselves;
        :attr:`spent` and :attr:`remaining` show the state as of the last read)."""
        with self._lock:
            self._sync()

    def history(self, analyst: str | None = _ALL) -> list[ChargeRecord]:
        """Every recorded charge, in order, read from the ledger (``analyst="alice"``: only the
        charges of that sub-budget; ``analyst=None``: only those made on the total itself).
        A record that cannot be read raises :class:`~dpkit.errors.LedgerError`."""
        with self._lock:
            self._sync()
            records = _store_call(lambda: self._store.read(self._name, 0))
        out = []
        for record in records:
            if record.kind != "charge" or (analyst is not _ALL and record.analyst != analyst):
                continue
            try:
                charge = _decode_charge(record.payload, record.analyst)
            except _UNREADABLE as exc:
                raise LedgerError(
                    f"record {record.seq} of budget {self._name!r} cannot be read: {exc!r}"
                ) from exc
            out.append(ChargeRecord(
                seq=record.seq, time=record.time, analyst=record.analyst,
                event=charge.event, count=charge.count, metadata=charge.metadata,
                spent_after=charge.spent_after,
            ))
        return out

    @property
    def name(self) -> str:
        """The budget's name in its ledger."""
        return self._name

    @property
    def store(self) -> _ledger.Ledger:
        """The ledger store that holds the budget's records."""
        return self._store

    @classmethod
    def open(cls, ledger: _ledger.Ledger, name: str = "budget") -> Budget:
        """The budget stored under ``name`` in ``ledger``, its definition read from the store
        and its records replayed. Raises :class:`~dpkit.errors.LedgerError` when there is none."""
        _ledger.check_budget_name(name)
        text = _store_call(lambda: ledger.definition(name))
        if text is None:
            raise LedgerError(f"the ledger holds no budget named {name!r}")
        try:
            data = json.loads(text)
            kwargs = {k: data[k] for k in ("epsilon", "delta", "mode", "method", "rdp_order",
                                           "rho", "mu", "pmf_slack_allowance",
                                           "approx_delta_allowance", "neighbouring")}
            if data["format"] != _FORMAT or data["version"] != _VERSION:
                raise ValueError(f"format {data['format']!r} version {data['version']!r}")
        except (ValueError, KeyError, TypeError) as exc:
            raise LedgerError(f"stored definition of {name!r} is unreadable: {exc!r}") from exc
        if kwargs["rho"] is not None or kwargs["mu"] is not None:
            kwargs["epsilon"] = None
        budget = Budget(**kwargs, ledger=ledger, name=name)
        return budget

    # ------------------------------------------------------------------ sub-budgets
    def _make_sub(self, definition: Mapping[str, Any]) -> Budget:
        keys = {"epsilon", "delta", "rho", "mu"}
        if not isinstance(definition, Mapping) or set(definition) != keys:
            raise LedgerError(f"a sub-budget definition has the fields {sorted(keys)}")
        method = self._kind if self._kind in _METHODS else "basic"
        if definition["rho"] is not None:
            method = "zcdp"
        elif definition["mu"] is not None:
            method = "gdp"
        order = self._rdp_order if method == "rdp" and definition["delta"] else None
        try:
            return Budget(**definition, method=method, rdp_order=order,
                          neighbouring=self._neighbouring)
        except PrivacyParameterError as exc:
            raise PrivacyParameterError(f"sub-budget caps {dict(definition)}: {exc}") from exc

    def sub_budget(self, analyst: str, *, epsilon: float | None = None, delta: float = 0.0,
                   rho: float | None = None, mu: float | None = None) -> SubBudget:
        """A sub-budget of this budget for ``analyst``: its charges are checked against its own
        cap (``epsilon``/``delta``, or ``rho``/``mu``, read with this budget's method and
        neighbouring relation) AND against this budget's total, and written as one record, so
        the total is never exceeded however analysts interleave. The caps of all sub-budgets may
        add up to more than the total (the total still holds).

        With caps: creates the sub-budget (stored in the ledger) or reopens it if the stored caps
        are the same; different caps raise :class:`~dpkit.errors.LedgerError`. Without caps:
        reopens an existing one.
        """
        _ledger.check_budget_name(analyst, "analyst")
        given = epsilon is not None or rho is not None or mu is not None
        definition = {"epsilon": epsilon, "delta": delta, "rho": rho, "mu": mu}
        if given:
            candidate = self._make_sub(definition)  # validates the caps
            definition = {"epsilon": candidate._budget_epsilon, "delta": candidate._budget_delta,
                          "rho": candidate._given_rho, "mu": candidate._given_mu}
        with self._lock:
            self._refuse_if_forked()
            lost = False
            for attempt in range(_MAX_ATTEMPTS):
                if self._sync() == 0 and lost:
                    raise LedgerError(
                        f"the ledger store refused record {self._seq + 1} of {self._name!r} "
                        "as a conflict but holds no newer record: the store is damaged"
                    )
                if analyst in self._subs:
                    sub = self._subs[analyst]
                    stored = {"epsilon": sub._budget_epsilon, "delta": sub._budget_delta,
                              "rho": sub._given_rho, "mu": sub._given_mu}
                    if given and stored != definition:
                        raise LedgerError(
                            f"sub-budget {analyst!r} exists with caps {stored}, not {definition}"
                        )
                    return SubBudget(self, analyst)
                if not given:
                    raise LedgerError(f"no sub-budget {analyst!r}: give its caps to create it")
                record = _ledger.LedgerRecord(
                    seq=self._seq + 1, time=time.time(), kind="sub_budget", analyst=analyst,
                    payload=json.dumps({"definition": definition}, sort_keys=True),
                )
                if _store_call(functools.partial(self._store.append, self._name, record)):
                    self._apply(record)
                    return SubBudget(self, analyst)
                lost = True
                _pause(attempt)
        raise LedgerError(  # pragma: no cover - needs _MAX_ATTEMPTS lost races in a row
            f"gave up after {_MAX_ATTEMPTS} attempts lost to other writers"
        )

    def sub_budgets(self) -> list[str]:
        """The analysts that have a sub-budget (as of the last read of the ledger)."""
        with self._lock:
            self._sync()
            return sorted(self._subs)

    def cost_of(self, event: Any = None, *, epsilon: float | None = None,
                delta: float | None = None, count: int = 1) -> ChargeCost:
        """What :meth:`charge` with these arguments would cost now (changes nothing).

        Raises :class:`~dpkit.errors.UnsupportedEventError` when the budget cannot read the
        event; never raises for budget reasons.
        """
        ev = self._to_event(event, epsilon, delta)
        n = check_integer(count, name="count", minimum=0)
        with self._lock:
            self._sync()
            new, used = self._trial(ev, n)
            return self._cost_after(used, n, new)

    def _refusal(self, ev: DpEvent, n: int, cost: ChargeCost, old: _State, new: _State,
                 analyst: str | None) -> BudgetExceededError:
        """The refusal of a charge that does not fit: one rounded sentence first (what the
        charge needs, what is left, the total, the fix), the exact figures as attributes.

        Pure and basic budgets speak in ``(epsilon, delta)`` (delta only when the charge or
        the budget has some); zCDP and GDP budgets in their own unit (``rho``, ``mu``), which
        is what they compare."""
        note = ""
        if self._kind in ("zcdp", "gdp") and self._native_budget is not None:
            unit = self.native_unit or "rho"
            note = f" (epsilon {fmt(self._budget_epsilon)}, delta {fmt(self._budget_delta)})"
            need, left_now, total = [], [], []
            value_new, slack_new = _native_exact(new.interpreter)
            _, slack_old = _native_exact(old.interpreter)
            cap = Fraction(self._native_budget) ** (2 if self._kind == "gdp" else 1)
            if isinstance(value_new, float) or value_new > cap:
                rem_native = self.remaining_native
                need.append((unit, cost.native if cost.native is not None else math.inf))
                left_now.append((unit, rem_native if rem_native is not None else 0.0))
                total.append((unit, self._native_budget))
            if self._kind == "zcdp" and self._approx_allowance is not None:
                a_new = _approx_delta_exact(new.interpreter)
                a_old = _approx_delta_exact(old.interpreter)
                if a_new > Fraction(self._approx_allowance):
                    need.append(("approximate delta", up(a_new - a_old)))
                    left_now.append(("approximate delta", max(
                        down(Fraction(self._approx_allowance) - a_old), 0.0)))
                    total.append(("approximate delta", self._approx_allowance))
            if self._slack_allowance is not None and slack_new > Fraction(self._slack_allowance):
                need.append(("pmf slack", up(slack_new - slack_old)))
                left_now.append(("pmf slack", max(
                    down(Fraction(self._slack_allowance) - slack_old), 0.0)))
                total.append(("pmf slack", self._slack_allowance))
            if not need:  # pragma: no cover - _within refused for one of the reasons above
                need = [(unit, cost.native if cost.native is not None else math.inf)]
                left_now = [(unit, self.remaining_native or 0.0)]
                total = [(unit, self._native_budget)]
        else:
            with_delta = cost.delta > 0.0 or self._budget_delta > 0.0
            remaining = self.remaining
            need = [("epsilon", cost.epsilon)]
            left_now = [("epsilon", remaining[0])]
            total = [("epsilon", self._budget_epsilon if self._budget_epsilon is not None
                      else math.inf)]
            if with_delta:
                need.append(("delta", cost.delta))
                left_now.append(("delta", remaining[1]))
                total.append(("delta", self._budget_delta))
        first = refusal_message("charge", need, left_now, total,
                                "charge less or use a larger budget", analyst, note)
        details = (f"charging {ev!r} x{n} would cost {cost} and take the spent privacy to "
                   f"{self._describe(new)}, over the budget {self._describe_budget()}; "
                   f"already spent {self._describe(old)}")
        out = BudgetExceededError(
            f"{first} Nothing was charged.", event=ev, count=n, requested=cost,
            remaining=self._remaining_exact(),
            spent=(up(old.spent_epsilon), min(up(old.spent_delta), 1.0)),
            budget=(self._budget_epsilon, self._budget_delta), details=details)
        # the sentence's parts, for a caller that restates it (a query: "This query needs")
        out.sentence_parts = (need, left_now, total, analyst, note)
        return out

    def _describe(self, state: _State) -> str:
        text = f"(epsilon={up(state.spent_epsilon)!r}, delta={up(state.spent_delta)!r})"
        if self._kind in ("zcdp", "gdp"):
            value, slack = _native_exact(state.interpreter)
            if self._kind == "zcdp":
                text += (f", rho={up(value)!r}, "
                         f"approximate delta={up(_approx_delta_exact(state.interpreter))!r}")
            else:
                text += f", mu^2={up(value)!r}"
            text += f", pmf slack={up(slack)!r}"
        return text

    def _describe_budget(self) -> str:
        text = f"(epsilon={self._budget_epsilon!r}, delta={self._budget_delta!r})"
        if self._kind in ("zcdp", "gdp"):
            unit = "rho" if self._kind == "zcdp" else "mu"
            text += (f", {unit}_max={self._native_budget!r}, "
                     f"pmf slack allowance={self._slack_allowance!r}")
            if self._kind == "zcdp":
                text += f", approximate delta allowance={self._approx_allowance!r}"
        if self._neighbouring is Neighbouring.REPLACE:
            text += " under replace-one neighbours"
        return text

    def can_charge(
        self,
        event: Any = None,
        *,
        epsilon: float | None = None,
        delta: float | None = None,
        count: int = 1,
    ) -> bool:
        """Whether :meth:`charge` would accept this charge now (changes nothing).

        With several threads, another charge may land between this answer and a later
        :meth:`charge`: only the return of :meth:`charge` itself authorises a release.
        """
        ev = self._to_event(event, epsilon, delta)
        n = check_integer(count, name="count", minimum=0)
        with self._lock:
            if self._forked:
                return False
            self._sync()
            try:
                probe, _ = self._trial(ev, n)
            except UnsupportedEventError:
                return False
            return self._mode == "odometer" or self._within(probe)

    def reserve(
        self,
        event: Any = None,
        *,
        epsilon: float | None = None,
        delta: float | None = None,
        count: int = 1,
        metadata: Mapping[str, Any] | None = None,
    ) -> contextlib.AbstractContextManager[Budget]:
        """Charge now, exactly as :meth:`charge` (before this returns), and return a context
        manager for the release.

        ``with budget.reserve(mechanism): value = mechanism.release(data)``. The charge happens
        at the call, with or without ``with``: ``budget.reserve(epsilon=1.0)`` alone charges
        (or raises, and then the block never runs). The charge is never refunded, even if the
        block raises: a release that failed half-way may already have revealed something.
        """
        self.charge(event, epsilon=epsilon, delta=delta, count=count, metadata=metadata)
        return contextlib.nullcontext(self)

    # ------------------------------------------------------------------ splitting
    def split(self, k: int) -> Share:
        """One of ``k`` equal parts of the *remaining* budget, rounded down so k of them fit.

        * pure: ``epsilon = down(remaining / k)``; basic: the same for epsilon and delta. The
          exact sum of k such parts never exceeds what remains, so k mechanisms calibrated to
          a part (and charging at most it) are all accepted.
        * zcdp: ``rho = down(remaining_rho / k)``; gdp: ``mu = sqrt_down(remaining_mu^2 / k)``;
          both also give the other (``mu = sqrt(2 rho)``) for calibrating Gaussian noise, and
          leave a relative ``2**-40`` of headroom for the mechanisms' own rounding of sigma.
          ``pmf_slack`` is the remaining slack allowance divided by k; for zcdp, ``delta`` is
          the remaining approximate-delta allowance divided by k (rounded down).
        * rdp: refused (an RDP budget has no additive unit to divide).
        """
        parts = check_integer(k, name="k", minimum=1)
        state = self._state
        if self._kind == "rdp":
            raise PrivacyParameterError("split() is not available for method='rdp'")
        if self._kind in ("pure", "basic"):
            if self._budget_epsilon is None:
                raise PrivacyParameterError("split() needs an epsilon budget")
            spent_e = state.spent_epsilon
            if isinstance(spent_e, float):
                rem_e = Fraction(0)
            else:
                rem_e = max(Fraction(self._budget_epsilon) - spent_e, Fraction(0))
            rem_d = max(Fraction(self._budget_delta) - state.spent_delta, Fraction(0))
            return Share(epsilon=down(rem_e / parts), delta=down(rem_d / parts), rho=None,
                         mu=None, pmf_slack=None)
        from dpkit._numeric.rounding import sqrt_down

        if self._native_budget is None:
            raise PrivacyParameterError("split() needs a budget")
        value, slack = _native_exact(state.interpreter)
        assert self._slack_allowance is not None
        rem_slack = max(Fraction(self._slack_allowance) - slack, Fraction(0))
        if isinstance(value, float):
            return Share(None, None, 0.0, 0.0, 0.0)
        total = Fraction(self._native_budget)
        delta_part: float | None = None
        if self._kind == "zcdp":
            rho_part = max(total - value, Fraction(0)) / parts * _SPLIT_HEADROOM
            assert self._approx_allowance is not None
            rem_d = Fraction(self._approx_allowance) - _approx_delta_exact(state.interpreter)
            delta_part = down(max(rem_d, Fraction(0)) / parts)
        else:
            rho_part = max(total * total - value, Fraction(0)) / parts * _SPLIT_HEADROOM / 2
        return Share(epsilon=None, delta=delta_part, rho=down(rho_part),
                     mu=sqrt_down(2 * rho_part), pmf_slack=down(rem_slack / parts))

    # ------------------------------------------------------------------ persistence
    def to_json(self) -> str:
        """The budget, the mode and the ledger of charges as JSON (events via the allow-list)."""
        state = self._state
        data = {
            **self._definition(),
            "ledger": [{"event": event_to_dict(e), "count": n} for e, n in state.ledger],
        }
        return json.dumps(data, sort_keys=True)

    @classmethod
    def from_json(cls, text: str) -> Budget:
        """Rebuild a budget saved by :meth:`to_json` by replaying its ledger.

        Raises :class:`~dpkit.errors.SerializationError` for malformed data, unknown event types
        (only the allow-list is consulted), or a ledger that a filter would not have accepted.
        Version-1 data (saved before zcdp/gdp budgets existed), version-2 data (before
        approximate zCDP: its zcdp budgets had no approximate-delta allowance, and keep none)
        and version-3 data (before the neighbouring relation was recorded: add/remove, the only
        relation budgets had) are read too.
        """
        try:
            data = json.loads(text)
        except (json.JSONDecodeError, TypeError, RecursionError) as exc:
            raise SerializationError(f"not JSON: {exc}") from exc
        if not isinstance(data, dict) or data.get("format") != _FORMAT:
            raise SerializationError("not a saved dpkit budget")
        version = data.get("version")
        base = {"format", "version", "epsilon", "delta", "mode", "method", "rdp_order", "ledger"}
        if version == 1:
            expected = base
        elif version == 2:
            expected = base | {"rho", "mu", "pmf_slack_allowance"}
        elif version == 3:
            expected = base | {"rho", "mu", "pmf_slack_allowance", "approx_delta_allowance"}
        elif version == _VERSION:
            expected = base | {"rho", "mu", "pmf_slack_allowance", "approx_delta_allowance",
                               "neighbouring"}
        else:
            raise SerializationError(f"unsupported budget version {version!r}")
        if set(data) != expected:
            raise SerializationError(f"budget fields must be {sorted(expected)}")
        ledger = data["ledger"]
        if not isinstance(ledger, list):
            raise SerializationError("'ledger' must be a list")
        kwargs: dict[str, Any] = {
            "epsilon": data["epsilon"],
            "delta": data["delta"],
            "mode": data["mode"],
            "method": data["method"],
            "rdp_order": data["rdp_order"],
        }
        if version in (2, 3, _VERSION):
            kwargs["rho"] = data["rho"]
            kwargs["mu"] = data["mu"]
            kwargs["pmf_slack_allowance"] = data["pmf_slack_allowance"]
        if version in (3, _VERSION):
            kwargs["approx_delta_allowance"] = data["approx_delta_allowance"]
        if version == _VERSION:
            relation = data["neighbouring"]
            if relation not in ("add_remove", "replace"):
                raise SerializationError(
                    f"'neighbouring' must be 'add_remove' or 'replace', got {relation!r}"
                )
            if relation == "replace":  # add_remove is the default (and the only relation of
                kwargs["neighbouring"] = relation  # subclasses such as the zCDP/GDP filters)
        elif version == 2 and data["method"] == "zcdp" and (
            data["rho"] is not None or data["delta"] not in (0, 0.0)
        ):
            kwargs["approx_delta_allowance"] = 0.0
        if not isinstance(kwargs["mode"], str) or not isinstance(kwargs["method"], str):
            raise SerializationError("'mode' and 'method' must be strings")
        try:
            budget = cls(**kwargs)
        except PrivacyParameterError as exc:
            raise SerializationError(f"invalid budget: {exc}") from exc
        for item in ledger:
            if not isinstance(item, dict) or set(item) != {"event", "count"}:
                raise SerializationError(f"ledger entries are {{event, count}}, got {item!r}")
            ev = event_from_dict(item["event"])
            try:
                budget.charge(ev, count=item["count"])
            except (BudgetExceededError, UnsupportedEventError, PrivacyParameterError) as exc:
                raise SerializationError(f"saved ledger cannot be replayed: {exc}") from exc
        return budget

    def __copy__(self) -> Budget:
        """Refused: a shallow copy would share the spent total at the moment of copying and
        then spend the rest twice (once through each object). Use :meth:`to_json` /
        :meth:`from_json` to save and restore a budget explicitly."""
        raise TypeError(
            "a Budget cannot be copied: two copies could each spend what remains; "
            "save and restore it with to_json()/from_json() instead"
        )

    def __repr__(self) -> str:
        e, d = self.spent
        return (
            f"{type(self).__name__}(epsilon={self._budget_epsilon!r}, "
            f"delta={self._budget_delta!r}, mode={self._mode!r}, kind={self._kind!r}, "
            f"neighbouring={self._neighbouring.value!r}, spent=({fmt(e)}, {fmt(d)}))"
        )



class SubBudget:
    """An analyst's share of a :class:`Budget` (made by :meth:`Budget.sub_budget`).

    It has the budget's ``charge``/``can_charge``/``cost_of``/``reserve``/``spent``/``remaining``
    API. A charge is accepted only if it fits both the analyst's cap and the parent's total, and
    is recorded as one ledger record under the parent, so no interleaving of analysts (threads
    or processes) can exceed the total.
    """

    def __init__(self, parent: Budget, analyst: str) -> None:
        self._parent = parent
        self._analyst = analyst

    @property
    def analyst(self) -> str:
        """The analyst's name (the sub-budget's name in the ledger)."""
        return self._analyst

    @property
    def parent(self) -> Budget:
        """The budget whose total this sub-budget draws on."""
        return self._parent

    def _own(self) -> Budget:
        return self._parent._subs[self._analyst]

    @property
    def budget(self) -> tuple[float | None, float]:
        """The analyst's own cap, ``(epsilon, delta)`` as given."""
        return self._own().budget

    @property
    def spent(self) -> tuple[float, float]:
        """What the analyst has spent, read like :attr:`Budget.spent` (as of the last read)."""
        return self._own().spent

    @property
    def remaining(self) -> tuple[float, float]:
        """What the analyst may still spend: the smaller, component by component, of what
        remains of the own cap and of the total (each rounded down)."""
        own = self._own().remaining
        total = self._parent.remaining
        return Pair(min(own[0], total[0]), min(own[1], total[1]), of=self.budget)

    def charge(self, event: Any = None, *, epsilon: float | None = None,
               delta: float | None = None, count: int = 1,
               metadata: Mapping[str, Any] | None = None) -> None:
        """Charge the analyst's cap and the total at once (see :meth:`Budget.charge`); refused
        with :class:`~dpkit.errors.BudgetExceededError` if either would be exceeded."""
        parent = self._parent
        ev = parent._to_event(event, epsilon, delta)
        n = check_integer(count, name="count", minimum=0)
        meta = _check_metadata(metadata)
        with parent._lock:
            parent._commit(ev, n, meta, self._analyst)

    def can_charge(self, event: Any = None, *, epsilon: float | None = None,
                   delta: float | None = None, count: int = 1) -> bool:
        """Whether :meth:`charge` would accept this charge now (changes nothing)."""
        parent = self._parent
        ev = parent._to_event(event, epsilon, delta)
        n = check_integer(count, name="count", minimum=0)
        with parent._lock:
            if parent._forked:
                return False
            parent._sync()
            own = self._own()
            try:
                total, _ = parent._trial(ev, n)
                mine, _ = own._trial(ev, n)
            except UnsupportedEventError:
                return False
            return own._within(mine) and (parent._mode == "odometer" or parent._within(total))

    def cost_of(self, event: Any = None, *, epsilon: float | None = None,
                delta: float | None = None, count: int = 1) -> ChargeCost:
        """What the charge would cost, read by the analyst's own cap (changes nothing)."""
        parent = self._parent
        ev = parent._to_event(event, epsilon, delta)
        n = check_integer(count, name="count", minimum=0)
        with parent._lock:
            parent._sync()
            own = self._own()
            new, used = own._trial(ev, n)
            return own._cost_after(used, n, new)

    def reserve(self, event: Any = None, *, epsilon: float | None = None,
                delta: float | None = None, count: int = 1,
                metadata: Mapping[str, Any] | None = None,
                ) -> contextlib.AbstractContextManager[SubBudget]:
        """Charge now (see :meth:`Budget.reserve`: at the call, with or without ``with``) and
        return a context manager for the release (never refunded)."""
        self.charge(event, epsilon=epsilon, delta=delta, count=count, metadata=metadata)
        return contextlib.nullcontext(self)

    def refresh(self) -> None:
        """Read what other writers appended to the ledger (see :meth:`Budget.refresh`)."""
        self._parent.refresh()

    def history(self) -> list[ChargeRecord]:
        """The analyst's charges, in order."""
        return self._parent.history(analyst=self._analyst)

    def __repr__(self) -> str:
        e, d = self.spent
        return (f"SubBudget(analyst={self._analyst!r}, budget={self.budget!r}, "
                f"spent=({fmt(e)}, {fmt(d)}), parent={self._parent.name!r})")
