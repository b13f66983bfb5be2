"""A privacy budget that is charged *before* each release: a privacy filter or an odometer.

:class:`Budget` holds a budget and an interpreter accountant that turns events into privacy
spent. How an ``(epsilon, delta)`` budget reads events is its ``method``:

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

Parts. :class:`Budget` composes the modules of :mod:`dpkit.accounting._budget`: the definition
(``terms``), the reading of each accounting kind (``kinds``), what may be charged (``filter``),
the ledger-backed book and its replay (``replay``), the JSON forms (``saved``) and
:class:`SubBudget` (``subs``).

A note on exactness: ``0.1`` as a double is slightly *more* than 1/10, so ten charges of
``epsilon=0.1`` add up to more than the budget ``1.0`` and the tenth is refused. This is the
exact arithmetic of the numbers given, and it errs on the safe side. Use :meth:`Budget.split`
to get parts that are guaranteed to fit.
"""

from __future__ import annotations

import contextlib
from collections.abc import Mapping
from fractions import Fraction
from typing import Any

from dpkit._numeric.display import fmt
from dpkit._numeric.rounding import up
from dpkit._numeric.validation import check_integer
from dpkit.accounting import ledger as _ledger
from dpkit.accounting._budget import kinds, saved
from dpkit.accounting._budget.filter import check_metadata, to_event
from dpkit.accounting._budget.kinds import State
from dpkit.accounting._budget.records import ChargeCost, ChargeRecord, Share
from dpkit.accounting._budget.records import Pair as Pair  # re-exported
from dpkit.accounting._budget.records import refusal_message as refusal_message
from dpkit.accounting._budget.replay import ALL, Book, store_call
from dpkit.accounting._budget.subs import SubBudget
from dpkit.accounting._budget.terms import METHODS as _METHODS  # noqa: F401 (tests)
from dpkit.accounting._budget.terms import Terms
from dpkit.accounting._budget.terms import zcdp_share_default as zcdp_share_default
from dpkit.errors import (
    BudgetExceededError,
    PrivacyParameterError,
    SerializationError,
    UnsupportedEventError,
)
from dpkit.events import DpEvent, Neighbouring

__all__ = ["Budget", "ChargeCost", "ChargeRecord", "Share", "SubBudget"]


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
        self._terms = Terms.build(
            epsilon=epsilon,
            delta=delta,
            mode=mode,
            method=method,
            rdp_order=rdp_order,
            rho=rho,
            mu=mu,
            pmf_slack_allowance=pmf_slack_allowance,
            approx_delta_allowance=approx_delta_allowance,
            neighbouring=neighbouring,
        )
        self._book = Book(self._terms, ledger, name)
        self._book.attach()

    @property
    def _state(self) -> State:
        """The state as of the last read (one immutable snapshot)."""
        return self._book.total.state

    @property
    def _lock(self) -> Any:
        """The lock that makes check-and-update atomic (fresh in a forked child)."""
        return self._book.lock

    # ------------------------------------------------------------------ properties
    @property
    def mode(self) -> str:
        """``"filter"`` or ``"odometer"``."""
        return self._terms.mode

    @property
    def neighbouring(self) -> Neighbouring:
        """The neighbouring relation the budget holds under (``Neighbouring.ADD_REMOVE`` or
        ``Neighbouring.REPLACE``)."""
        return self._terms.neighbouring

    @property
    def kind(self) -> str:
        """How events are interpreted: ``"pure"``, ``"basic"``, ``"zcdp"``, ``"gdp"``, ``"rdp"``."""
        return self._terms.kind

    @property
    def budget(self) -> tuple[float | None, float]:
        """``(epsilon, delta)`` budget as given (epsilon ``None`` for a rho/mu budget or an
        unlimited odometer)."""
        return self._terms.epsilon, self._terms.delta

    @property
    def native_unit(self) -> str | None:
        """The budget's own unit: ``"epsilon"`` (pure), ``"rho"`` (zcdp), ``"mu"`` (gdp),
        ``None`` (basic and rdp, which have no single-number unit)."""
        return self._terms.native_unit

    @property
    def native_budget(self) -> float | None:
        """The budget in :attr:`native_unit`: epsilon, ``rho_max`` or ``mu_max`` (the latter
        two rounded down from ``(epsilon, delta)``); ``None`` when there is none."""
        if self._terms.kind == "pure":
            return self._terms.epsilon
        return self._terms.native_budget

    def zcdp_share(
        self, epsilon: float, delta: float, *, slack: float = 0.0
    ) -> tuple[float, float, float]:
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
        return self._terms.zcdp_share(epsilon, delta, slack=slack)

    @property
    def pmf_slack_allowance(self) -> float | None:
        """The total floating-point slack ``A_max`` accepted (zcdp and gdp), else ``None``."""
        return self._terms.slack_allowance

    @property
    def approx_delta_allowance(self) -> float | None:
        """The total delta ``delta_max`` of approximate-zCDP charges accepted (zcdp), else
        ``None``."""
        return self._terms.approx_allowance

    @property
    def spent_approx_delta(self) -> float | None:
        """Total delta of the approximate-zCDP charges so far (zcdp), rounded up; else ``None``."""
        exact = self.spent_delta_exact
        return None if exact is None else up(exact)

    @property
    def spent_delta_exact(self) -> Fraction | None:
        """The exact total delta of the approximate-zCDP charges (zcdp), else ``None``."""
        if self._terms.kind != "zcdp":
            return None
        return kinds.approx_delta_exact(self._state.interpreter)

    @property
    def spent(self) -> tuple[float, float]:
        """``(epsilon, delta)`` spent so far, rounded up (``inf`` after a non-private release).

        Pure and basic budgets: the exact sums. rdp, zcdp and gdp: the epsilon certified at the
        budget's delta and the delta certified at that epsilon (at most the budget's delta);
        ``(0.0, 0.0)`` before anything was charged.
        """
        return Pair(*kinds.spent_pair_of(self._state))  # one immutable snapshot: no lock

    @property
    def spent_epsilon_exact(self) -> Fraction | float:
        """The exact spent epsilon (a Fraction for pure/basic budgets), or ``math.inf``."""
        return self._state.spent_epsilon

    @property
    def spent_native(self) -> float | None:
        """Spent in :attr:`native_unit`, rounded up (``mu = sqrt(sum mu_i^2)``); else ``None``."""
        return kinds.spent_native(self._terms, self._state)

    @property
    def spent_pmf_slack(self) -> float | None:
        """Total floating-point slack charged so far (zcdp and gdp), rounded up."""
        if self._terms.kind not in ("zcdp", "gdp"):
            return None
        return up(kinds.native_exact(self._state.interpreter)[1])

    @property
    def remaining_native(self) -> float | None:
        """Still available in :attr:`native_unit`, rounded down and never negative
        (``mu``: ``sqrt(mu_max^2 - sum mu_i^2)``); ``None`` without a native budget."""
        return kinds.remaining_native(self._terms, self._state)

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
        e, d = kinds.remaining_exact(self._terms, self._state)
        return Pair(e, d, of=self.budget)

    @property
    def ledger(self) -> tuple[tuple[DpEvent, int], ...]:
        """Every accepted charge, in order, as ``(event, count)``."""
        return self._state.ledger

    @property
    def exceeded(self) -> bool:
        """Whether the spent privacy is over the budget (possible only for an odometer)."""
        return not kinds.within(self._terms, self._state)

    # ------------------------------------------------------------------ charging
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
        ev = to_event(self._terms, event, epsilon, delta)
        n = check_integer(count, name="count", minimum=0)
        meta = check_metadata(metadata)
        self._book.charge(ev, n, meta, None)

    def refresh(self) -> None:
        """Read the charges that other processes sharing the ledger have made since the last
        read (:meth:`charge`, :meth:`can_charge` and :meth:`cost_of` do this themselves;
        :attr:`spent` and :attr:`remaining` show the state as of the last read)."""
        with self._book.lock:
            self._book.sync()

    def history(self, analyst: str | None = ALL) -> list[ChargeRecord]:
        """Every recorded charge, in order, read from the ledger (``analyst="alice"``: only the
        charges of that sub-budget; ``analyst=None``: only those made on the total itself).
        A record that cannot be read raises :class:`~dpkit.errors.LedgerError`."""
        return self._book.history(analyst)

    @property
    def name(self) -> str:
        """The budget's name in its ledger."""
        return self._book.name

    @property
    def store(self) -> _ledger.Ledger:
        """The ledger store that holds the budget's records."""
        return self._book.store

    @classmethod
    def open(cls, ledger: _ledger.Ledger, name: str = "budget") -> Budget:
        """The budget stored under ``name`` in ``ledger``, its definition read from the store
        and its records replayed. Raises :class:`~dpkit.errors.LedgerError` when there is none."""
        _ledger.check_budget_name(name)
        kwargs = saved.read_definition(store_call(lambda: ledger.definition(name)), name)
        return Budget(**kwargs, ledger=ledger, name=name)

    # ------------------------------------------------------------------ sub-budgets
    def sub_budget(
        self,
        analyst: str,
        *,
        epsilon: float | None = None,
        delta: float = 0.0,
        rho: float | None = None,
        mu: float | None = None,
    ) -> SubBudget:
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
        caps = {"epsilon": epsilon, "delta": delta, "rho": rho, "mu": mu}
        if given:
            caps = self._terms.sub_terms(caps).caps()  # validates the caps
        with self._book.lock:
            self._book.define_cap(analyst, caps, given)
        return SubBudget(self, self._book, analyst)

    def sub_budgets(self) -> list[str]:
        """The analysts that have a sub-budget (as of the last read of the ledger)."""
        with self._book.lock:
            self._book.sync()
            return sorted(self._book.caps)

    def cost_of(
        self,
        event: Any = None,
        *,
        epsilon: float | None = None,
        delta: float | None = None,
        count: int = 1,
    ) -> ChargeCost:
        """What :meth:`charge` with these arguments would cost now (changes nothing).

        Raises :class:`~dpkit.errors.UnsupportedEventError` when the budget cannot read the
        event; never raises for budget reasons.
        """
        ev = to_event(self._terms, event, epsilon, delta)
        n = check_integer(count, name="count", minimum=0)
        with self._book.lock:
            self._book.sync()
            return self._book.total.cost_of(ev, n)

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
        ev = to_event(self._terms, event, epsilon, delta)
        n = check_integer(count, name="count", minimum=0)
        return self._book.can_charge(ev, n, None)

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
        return kinds.split(self._terms, self._state, k)

    # ------------------------------------------------------------------ persistence
    def to_json(self) -> str:
        """The budget, the mode and the ledger of charges as JSON (events via the allow-list)."""
        return saved.dump(self._terms, self._state.ledger)

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
        kwargs, charges = saved.parse(text)
        try:
            budget = cls(**kwargs)
        except PrivacyParameterError as exc:
            raise SerializationError(f"invalid budget: {exc}") from exc
        for ev, count in charges:
            try:
                budget.charge(ev, count=count)
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
            f"{type(self).__name__}(epsilon={self._terms.epsilon!r}, "
            f"delta={self._terms.delta!r}, mode={self._terms.mode!r}, "
            f"kind={self._terms.kind!r}, neighbouring={self._terms.neighbouring.value!r}, "
            f"spent=({fmt(e)}, {fmt(d)}))"
        )
