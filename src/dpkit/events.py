"""Events: frozen, serialisable records that describe a release for accountants to interpret.

An event says *what was released* (which mechanism, which parameters, which neighbouring
relation), never how much privacy it cost: that is the accountants' job, and an accountant that
cannot interpret an event exactly refuses it (:class:`~dpkit.errors.UnsupportedEventError`).

Noise-adding events carry ``pmf_slack`` ``a >= 0``: the mechanism's actual output pmf is within a
factor ``exp(+-a)`` of the ideal mechanism the other fields describe (dpkit's floating-point-safe
samplers state this bound). A mechanism with slack ``a`` satisfies, for every epsilon,
``delta_actual(eps) <= exp(a) * delta_ideal(eps - 2a)``, and after k-fold composition
``delta_actual(eps) <= exp(k a) * delta_ideal(eps - 2 k a)``; pure-DP accountants add ``2a``.

Serialisation goes through :func:`event_to_dict` / :func:`event_from_dict`, which only know the
classes in the allow-list ``EVENT_TYPES``: no module is ever imported by name from the data.

The module also holds the pure-DP reading of one event, :func:`pure_epsilon_of` (with
:func:`subsampled_epsilon`; the table of events is in :mod:`dpkit.accounting.pure`): mechanisms
calibrate their noise against it and the pure, approximate, zCDP and Renyi accountants read
events through it, so it sits below both. It depends only on ``dpkit._numeric`` and
``dpkit.errors``.
"""

from __future__ import annotations

import dataclasses
import json
import math
from enum import Enum
from fractions import Fraction
from typing import Any, ClassVar

from dpkit._numeric.rounding import float_up, up
from dpkit._numeric.validation import (
    check_delta,
    check_epsilon,
    check_integer,
    check_nonnegative,
    check_positive,
    check_probability,
)
from dpkit.errors import PrivacyParameterError, SerializationError

__all__ = [
    "EVENT_TYPES",
    "MAX_EVENT_DEPTH",
    "ApproxDpEvent",
    "ApproxZCdpEvent",
    "ComposedEvent",
    "Cost",
    "DiscreteGaussianEvent",
    "DiscreteLaplaceEvent",
    "DpEvent",
    "ExponentialMechanismEvent",
    "GaussianEvent",
    "GaussianSparseVectorEvent",
    "LaplaceEvent",
    "Neighbouring",
    "NoOpEvent",
    "NonPrivateEvent",
    "PoissonSampledEvent",
    "PureDpEvent",
    "RandomizedResponseEvent",
    "ReportNoisyMaxEvent",
    "SampledWithoutReplacementEvent",
    "SelfComposedEvent",
    "ZCdpEvent",
    "as_neighbouring",
    "declares_add_remove",
    "event_from_dict",
    "event_from_json",
    "event_to_dict",
    "event_to_json",
    "pure_epsilon_of",
    "randomized_response_epsilon",
    "subsampled_epsilon",
]


class Neighbouring(str, Enum):
    """Which datasets count as neighbours.

    ``ADD_REMOVE``: D' is D with one record added or removed (symmetric difference 1).
    ``REPLACE``: D' is D with one record replaced by another (same size).
    """

    ADD_REMOVE = "add_remove"
    REPLACE = "replace"


def as_neighbouring(value: Any) -> Neighbouring:
    """Coerce ``"add_remove"``/``"replace"`` (or a Neighbouring) to Neighbouring; refuse others."""
    try:
        return Neighbouring(value)
    except ValueError as exc:
        raise PrivacyParameterError(
            f"neighbouring must be 'add_remove' or 'replace', got {value!r}"
        ) from exc


@dataclasses.dataclass(frozen=True, kw_only=True)
class DpEvent:
    """Base class of all events."""

    type_name: ClassVar[str] = "event"


@dataclasses.dataclass(frozen=True, kw_only=True)
class NoOpEvent(DpEvent):
    """Nothing was released: costs nothing."""

    type_name: ClassVar[str] = "noop"


@dataclasses.dataclass(frozen=True, kw_only=True)
class NonPrivateEvent(DpEvent):
    """Something was released without privacy: costs infinity."""

    type_name: ClassVar[str] = "non_private"


@dataclasses.dataclass(frozen=True, kw_only=True)
class PureDpEvent(DpEvent):
    """A black-box epsilon-DP release."""

    epsilon: float
    type_name: ClassVar[str] = "pure_dp"

    def __post_init__(self) -> None:
        object.__setattr__(self, "epsilon", check_epsilon(self.epsilon, allow_zero=True))


@dataclasses.dataclass(frozen=True, kw_only=True)
class ApproxDpEvent(DpEvent):
    """A black-box (epsilon, delta)-DP release."""

    epsilon: float
    delta: float
    type_name: ClassVar[str] = "approx_dp"

    def __post_init__(self) -> None:
        object.__setattr__(self, "epsilon", check_epsilon(self.epsilon, allow_zero=True))
        object.__setattr__(self, "delta", check_delta(self.delta))


@dataclasses.dataclass(frozen=True, kw_only=True)
class _NoiseEvent(DpEvent):
    noise_multiplier: float
    neighbouring: Neighbouring = Neighbouring.ADD_REMOVE
    pmf_slack: float = 0.0

    def __post_init__(self) -> None:
        object.__setattr__(
            self, "noise_multiplier", check_positive(self.noise_multiplier, "noise_multiplier")
        )
        object.__setattr__(self, "neighbouring", as_neighbouring(self.neighbouring))
        object.__setattr__(self, "pmf_slack", check_nonnegative(self.pmf_slack, "pmf_slack"))


@dataclasses.dataclass(frozen=True, kw_only=True)
class LaplaceEvent(_NoiseEvent):
    """Laplace noise of scale ``noise_multiplier * sensitivity`` on a query of that L1 sensitivity.

    The ideal mechanism is ``1 / noise_multiplier``-DP (Dwork and Roth, Theorem 3.6).
    """

    type_name: ClassVar[str] = "laplace"


@dataclasses.dataclass(frozen=True, kw_only=True)
class GaussianEvent(_NoiseEvent):
    """Gaussian noise of std ``noise_multiplier * sensitivity`` for that L2 sensitivity.

    The ideal mechanism is ``1 / noise_multiplier``-GDP (Dong, Roth and Su 2022, Theorem 2.7).
    """

    type_name: ClassVar[str] = "gaussian"


@dataclasses.dataclass(frozen=True, kw_only=True)
class DiscreteLaplaceEvent(DpEvent):
    """Discrete Laplace ``P(k) ∝ exp(-|k| / scale)`` on an integer query of sensitivity Delta.

    Ideal privacy: ``epsilon = sensitivity / scale``.
    """

    scale: float
    sensitivity: int
    neighbouring: Neighbouring = Neighbouring.ADD_REMOVE
    pmf_slack: float = 0.0
    type_name: ClassVar[str] = "discrete_laplace"

    def __post_init__(self) -> None:
        object.__setattr__(self, "scale", check_positive(self.scale, "scale"))
        object.__setattr__(
            self, "sensitivity", check_integer(self.sensitivity, name="sensitivity", minimum=1)
        )
        object.__setattr__(self, "neighbouring", as_neighbouring(self.neighbouring))
        object.__setattr__(self, "pmf_slack", check_nonnegative(self.pmf_slack, "pmf_slack"))


@dataclasses.dataclass(frozen=True, kw_only=True)
class DiscreteGaussianEvent(DpEvent):
    """Discrete Gaussian ``P(k) ∝ exp(-k^2 / (2 sigma^2))`` on an integer query.

    Ideal privacy: Canonne, Kamath and Steinke (2020), Theorem 7 (exact delta(epsilon)).
    """

    sigma: float
    sensitivity: int
    neighbouring: Neighbouring = Neighbouring.ADD_REMOVE
    pmf_slack: float = 0.0
    type_name: ClassVar[str] = "discrete_gaussian"

    def __post_init__(self) -> None:
        object.__setattr__(self, "sigma", check_positive(self.sigma, "sigma"))
        object.__setattr__(
            self, "sensitivity", check_integer(self.sensitivity, name="sensitivity", minimum=1)
        )
        object.__setattr__(self, "neighbouring", as_neighbouring(self.neighbouring))
        object.__setattr__(self, "pmf_slack", check_nonnegative(self.pmf_slack, "pmf_slack"))


@dataclasses.dataclass(frozen=True, kw_only=True)
class ExponentialMechanismEvent(DpEvent):
    """The exponential mechanism, epsilon-DP (Dwork and Roth, Theorem 3.10).

    It is also epsilon-bounded-range (Durfee and Rogers 2019), hence ``epsilon^2 / 8``-zCDP
    (Cesar and Rogers 2021): the zCDP and Renyi accountants charge that.
    """

    epsilon: float
    neighbouring: Neighbouring = Neighbouring.ADD_REMOVE
    pmf_slack: float = 0.0
    type_name: ClassVar[str] = "exponential_mechanism"

    def __post_init__(self) -> None:
        object.__setattr__(self, "epsilon", check_epsilon(self.epsilon))
        object.__setattr__(self, "neighbouring", as_neighbouring(self.neighbouring))
        object.__setattr__(self, "pmf_slack", check_nonnegative(self.pmf_slack, "pmf_slack"))


@dataclasses.dataclass(frozen=True, kw_only=True)
class ReportNoisyMaxEvent(DpEvent):
    """Report Noisy Max with ``noise`` in {"laplace", "exponential", "gumbel"}: epsilon-DP."""

    epsilon: float
    noise: str = "laplace"
    neighbouring: Neighbouring = Neighbouring.ADD_REMOVE
    pmf_slack: float = 0.0
    type_name: ClassVar[str] = "report_noisy_max"

    def __post_init__(self) -> None:
        object.__setattr__(self, "epsilon", check_epsilon(self.epsilon))
        if self.noise not in ("laplace", "exponential", "gumbel"):
            raise PrivacyParameterError(
                f"noise must be 'laplace', 'exponential' or 'gumbel', got {self.noise!r}"
            )
        object.__setattr__(self, "neighbouring", as_neighbouring(self.neighbouring))
        object.__setattr__(self, "pmf_slack", check_nonnegative(self.pmf_slack, "pmf_slack"))


@dataclasses.dataclass(frozen=True, kw_only=True)
class RandomizedResponseEvent(DpEvent):
    """k-ary randomized response keeping the true value with probability ``p_truth``.

    Otherwise it reports one of the ``categories - 1`` other values uniformly, so
    ``epsilon = ln(p_truth (k - 1) / (1 - p_truth))``; binary: ``ln(p / (1 - p))``.
    Requires ``p_truth >= 1/k`` (below that, relabel the outputs).
    """

    p_truth: float
    categories: int = 2
    neighbouring: Neighbouring = Neighbouring.REPLACE
    type_name: ClassVar[str] = "randomized_response"

    def __post_init__(self) -> None:
        object.__setattr__(
            self, "categories", check_integer(self.categories, name="categories", minimum=2)
        )
        p = check_probability(self.p_truth, name="p_truth")
        if not Fraction(p) * self.categories >= 1:  # exact: categories may exceed 2**53
            raise PrivacyParameterError(
                f"p_truth must be at least 1/categories = {1 / self.categories}, got {p!r}"
            )
        object.__setattr__(self, "p_truth", p)
        object.__setattr__(self, "neighbouring", as_neighbouring(self.neighbouring))

    @property
    def epsilon(self) -> float:
        """``ln(p (k - 1) / (1 - p))`` (infinite when p = 1), rounded up: a certified bound
        from :func:`randomized_response_epsilon`."""
        return randomized_response_epsilon(self.p_truth, self.categories)


def randomized_response_epsilon(p_truth: float, categories: int) -> float:
    """``ln(p (k - 1) / (1 - p))`` for k-ary randomized response, rounded up (infinite at p = 1).

    dpkit's one implementation of this formula (mechanisms, local DP and every accountant use
    it). The ratio is formed exactly in rationals; its logarithm is evaluated with 60 significant
    digits (``Decimal.ln`` is correctly rounded, and the decimal division before it errs by at
    most one unit in the 60th digit), widened by ``1e-57 (1 + |ln|)``, which covers both, and
    rounded up to a double. The result is a certified upper bound and is the smallest double
    above the exact value unless that value lies within about ``1e-57`` of a double.
    """
    from decimal import Decimal, localcontext

    p = Fraction(p_truth)
    if p == 1:
        return math.inf
    ratio = p * (categories - 1) / (1 - p)
    if not ratio > 1:
        return 0.0
    with localcontext() as ctx:
        ctx.prec = 60
        log = (Decimal(ratio.numerator) / Decimal(ratio.denominator)).ln()
    exact_log = Fraction(log)
    return up(exact_log + Fraction(1, 10**57) * (1 + abs(exact_log)))


@dataclasses.dataclass(frozen=True, kw_only=True)
class ComposedEvent(DpEvent):
    """Sequential composition of several events (in order)."""

    events: tuple[DpEvent, ...]
    type_name: ClassVar[str] = "composed"

    def __post_init__(self) -> None:
        events = tuple(self.events)
        for e in events:
            if not isinstance(e, DpEvent):
                raise PrivacyParameterError(f"events must be DpEvents, got {e!r}")
        object.__setattr__(self, "events", events)


@dataclasses.dataclass(frozen=True, kw_only=True)
class SelfComposedEvent(DpEvent):
    """``count`` independent repetitions of ``event``."""

    event: DpEvent
    count: int
    type_name: ClassVar[str] = "self_composed"

    def __post_init__(self) -> None:
        if not isinstance(self.event, DpEvent):
            raise PrivacyParameterError(f"event must be a DpEvent, got {self.event!r}")
        object.__setattr__(self, "count", check_integer(self.count, name="count", minimum=0))


@dataclasses.dataclass(frozen=True, kw_only=True)
class PoissonSampledEvent(DpEvent):
    """``event`` applied to a Poisson subsample: each record kept independently with ``rate``."""

    sampling_rate: float
    event: DpEvent
    type_name: ClassVar[str] = "poisson_sampled"

    def __post_init__(self) -> None:
        object.__setattr__(
            self, "sampling_rate", check_probability(self.sampling_rate, name="sampling_rate")
        )
        if not isinstance(self.event, DpEvent):
            raise PrivacyParameterError(f"event must be a DpEvent, got {self.event!r}")


@dataclasses.dataclass(frozen=True, kw_only=True)
class SampledWithoutReplacementEvent(DpEvent):
    """``event`` applied to a batch of exactly ``sample_size`` of ``dataset_size`` records, drawn
    uniformly without replacement (a fixed-size batch).

    Analysed under replace-one neighbours only (the batch size reveals the dataset size, so
    add/remove is not meaningful for a fixed size): the inner event must state
    ``neighbouring="replace"``. The PLD accountant reads a Gaussian inner event through the
    dominating pair of sampling without replacement of Zhu, Dong and Wang (2022), the RDP
    accountant through Wang, Balle and Kasiviswanathan (2019, Theorem 9); other accountants
    refuse it.
    """

    sample_size: int
    dataset_size: int
    event: DpEvent
    type_name: ClassVar[str] = "sampled_without_replacement"

    def __post_init__(self) -> None:
        n = check_integer(self.dataset_size, name="dataset_size", minimum=1)
        b = check_integer(self.sample_size, name="sample_size", minimum=0)
        if b > n:
            raise PrivacyParameterError(
                f"sample_size ({b}) must not exceed dataset_size ({n}); lower the batch size"
            )
        object.__setattr__(self, "dataset_size", n)
        object.__setattr__(self, "sample_size", b)
        if not isinstance(self.event, DpEvent):
            raise PrivacyParameterError(f"event must be a DpEvent, got {self.event!r}")


EVENT_TYPES: dict[str, type[DpEvent]] = {
    cls.type_name: cls
    for cls in (
        NoOpEvent,
        NonPrivateEvent,
        PureDpEvent,
        ApproxDpEvent,
        LaplaceEvent,
        GaussianEvent,
        DiscreteLaplaceEvent,
        DiscreteGaussianEvent,
        ExponentialMechanismEvent,
        ReportNoisyMaxEvent,
        RandomizedResponseEvent,
        ComposedEvent,
        SelfComposedEvent,
        PoissonSampledEvent,
        SampledWithoutReplacementEvent,
    )
}


@dataclasses.dataclass(frozen=True, kw_only=True)
class ZCdpEvent(DpEvent):
    """A black-box ``rho``-zCDP release (zero-concentrated DP, Bun and Steinke 2016, Def. 1.1).

    The release satisfies ``D_alpha(M(D) || M(D')) <= rho * alpha`` for every Renyi order
    ``alpha > 1`` and every pair of neighbours. Read by the zCDP accountant and the
    ``method="zcdp"`` budgets; other accountants refuse it.
    """

    rho: float
    type_name: ClassVar[str] = "zcdp"

    def __post_init__(self) -> None:
        object.__setattr__(self, "rho", check_nonnegative(self.rho, "rho"))


EVENT_TYPES[ZCdpEvent.type_name] = ZCdpEvent


@dataclasses.dataclass(frozen=True, kw_only=True)
class ApproxZCdpEvent(DpEvent):
    """A black-box ``delta``-approximately ``rho``-zCDP release (Bun and Steinke 2016, Def. 8.1).

    For every pair of neighbours ``x, x'`` the output laws split as ``M(x) = (1 - delta) P +
    delta Q`` and ``M(x') = (1 - delta) P' + delta Q'`` with ``D_alpha(P || P') <= rho alpha``
    and ``D_alpha(P' || P) <= rho alpha`` for every ``alpha > 1`` (equivalently: events of
    probability at least ``1 - delta`` on both sides, conditioned on which the release is
    ``rho``-zCDP). ``pmf_slack`` is the floating-point slack of the sampler behind the ``P``
    part, as on the noise events. Composition adds ``rho``, ``delta`` and the slack. Read by the
    zCDP accountant and ``method="zcdp"`` budgets; every other accountant refuses it.
    """

    rho: float
    delta: float
    pmf_slack: float = 0.0
    type_name: ClassVar[str] = "approx_zcdp"

    def __post_init__(self) -> None:
        object.__setattr__(self, "rho", check_nonnegative(self.rho, "rho"))
        object.__setattr__(self, "delta", check_delta(self.delta))
        object.__setattr__(self, "pmf_slack", check_nonnegative(self.pmf_slack, "pmf_slack"))


EVENT_TYPES[ApproxZCdpEvent.type_name] = ApproxZCdpEvent


@dataclasses.dataclass(frozen=True, kw_only=True)
class GaussianSparseVectorEvent(DpEvent):
    """The Gaussian sparse vector technique: ``max_positives`` AboveThreshold runs in sequence,
    each over at most ``max_queries`` queries of sensitivity Delta.

    Threshold noise of std ``threshold_multiplier * Delta``, query noise of std
    ``query_multiplier * Delta`` (Gaussian, or the discrete Gaussian on a lattice, whose Renyi
    divergence under integer shifts is at most the Gaussian one: Canonne, Kamath and Steinke
    2020, Proposition 5). One AboveThreshold run over at most k queries is
    ``(alpha, alpha / s1^2 + 2 alpha / s2^2 + ln(k) / (alpha - 1))``-RDP for every alpha > 1
    (Zhu and Wang 2020, "Improving sparse vector technique with Renyi differential privacy",
    NeurIPS, Theorem 8, with ``sigma_1 = s1 Delta`` and ``sigma_2 = s2 Delta``); the c runs
    compose (Mironov 2017, Proposition 1), so the event's RDP curve is
    ``c (a alpha + L / (alpha - 1))`` with ``a = 1/s1^2 + 2/s2^2`` (:attr:`quadratic`) and
    ``L = ln k`` (:attr:`log_term`). Read by the Renyi accountant (that curve) and the zCDP
    accountant (:attr:`zcdp_rho`); pure and approximate accountants refuse it.
    """

    threshold_multiplier: float
    query_multiplier: float
    max_queries: int
    max_positives: int = 1
    neighbouring: Neighbouring = Neighbouring.ADD_REMOVE
    type_name: ClassVar[str] = "gaussian_sparse_vector"

    def __post_init__(self) -> None:
        object.__setattr__(
            self,
            "threshold_multiplier",
            check_positive(self.threshold_multiplier, "threshold_multiplier"),
        )
        object.__setattr__(
            self, "query_multiplier", check_positive(self.query_multiplier, "query_multiplier")
        )
        object.__setattr__(
            self, "max_queries", check_integer(self.max_queries, name="max_queries", minimum=1)
        )
        object.__setattr__(
            self,
            "max_positives",
            check_integer(self.max_positives, name="max_positives", minimum=1),
        )
        object.__setattr__(self, "neighbouring", as_neighbouring(self.neighbouring))

    @property
    def quadratic(self) -> Fraction:
        """``a = 1 / s1^2 + 2 / s2^2`` of one run, exactly (the Renyi curve's slope)."""
        s1 = Fraction(self.threshold_multiplier)
        s2 = Fraction(self.query_multiplier)
        return 1 / (s1 * s1) + 2 / (s2 * s2)

    @property
    def log_term(self) -> float:
        """``L = ln(max_queries)`` of one run, rounded up (0 for a single query)."""
        if self.max_queries == 1:
            return 0.0
        return float_up(math.log(self.max_queries) * (1.0 + 2.0**-50))

    @property
    def zcdp_rho(self) -> Fraction:
        """A rho with ``D_alpha <= rho alpha`` for every alpha > 1, for all ``c`` runs.

        Renyi divergence does not decrease with the order, so one run's curve
        ``a alpha + L / (alpha - 1)`` is at most its minimum over orders ``>= alpha``: the
        constant ``a + 2 sqrt(a L)`` below ``alpha* = 1 + sqrt(L / a)``, and ``a alpha +
        sqrt(a L)`` above it; both are at most ``(a + 2 sqrt(a L)) alpha``. So each run is
        ``(a + 2 sqrt(a L))``-zCDP and the c runs ``c (a + 2 sqrt(a L))``-zCDP (exact when
        ``max_queries = 1``; otherwise the square root is rounded up).
        """
        a = self.quadratic
        c = self.max_positives
        if self.max_queries == 1:
            return c * a
        root = float_up(math.sqrt(up(a) * self.log_term))
        return c * (a + 2 * Fraction(root))


EVENT_TYPES[GaussianSparseVectorEvent.type_name] = GaussianSparseVectorEvent


def event_to_dict(event: DpEvent) -> dict[str, Any]:
    """A JSON-ready dict: ``{"type": name, **fields}`` with nested events serialised too."""
    if not isinstance(event, DpEvent) or EVENT_TYPES.get(event.type_name) is not type(event):
        raise SerializationError(f"not a serialisable dpkit event: {event!r}")
    out: dict[str, Any] = {"type": event.type_name}
    for f in dataclasses.fields(event):
        value = getattr(event, f.name)
        if isinstance(value, DpEvent):
            value = event_to_dict(value)
        elif isinstance(value, tuple):
            value = [event_to_dict(v) for v in value]
        elif isinstance(value, Enum):
            value = value.value
        out[f.name] = value
    return out


#: Deepest nesting of composed / self-composed / sampled events that :func:`event_from_dict`
#: restores; deeper data is refused (it would exhaust the interpreter's recursion limit).
MAX_EVENT_DEPTH = 100


def event_from_dict(data: Any) -> DpEvent:
    """Rebuild an event from :func:`event_to_dict` output, through the allow-list only.

    Nesting deeper than :data:`MAX_EVENT_DEPTH` is refused with a
    :class:`~dpkit.errors.SerializationError`.
    """
    return _event_from_dict(data, 0)


def _event_from_dict(data: Any, depth: int) -> DpEvent:
    if depth > MAX_EVENT_DEPTH:
        raise SerializationError(
            f"events nested deeper than {MAX_EVENT_DEPTH} levels are not restored"
        )
    if not isinstance(data, dict) or not isinstance(data.get("type"), str):
        raise SerializationError(f"an event must be a dict with a 'type' string, got {data!r}")
    cls = EVENT_TYPES.get(data["type"])
    if cls is None:
        raise SerializationError(f"unknown event type {data['type']!r}")
    names = {f.name for f in dataclasses.fields(cls)}
    extra = set(data) - names - {"type"}
    if extra:
        raise SerializationError(f"unexpected fields for {data['type']!r}: {sorted(extra)}")
    kwargs: dict[str, Any] = {}
    for name in names:
        if name not in data:
            continue
        value = data[name]
        if name == "event":
            value = _event_from_dict(value, depth + 1)
        elif name == "events":
            if not isinstance(value, list):
                raise SerializationError("'events' must be a list")
            value = tuple(_event_from_dict(v, depth + 1) for v in value)
        kwargs[name] = value
    try:
        return cls(**kwargs)
    except (TypeError, PrivacyParameterError) as exc:
        raise SerializationError(f"invalid {data['type']!r} event: {exc}") from exc


def event_to_json(event: DpEvent) -> str:
    """JSON text of an event."""
    return json.dumps(event_to_dict(event), sort_keys=True)


def event_from_json(text: str) -> DpEvent:
    """Parse JSON text produced by :func:`event_to_json` (allow-list only)."""
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise SerializationError(f"not JSON: {exc}") from exc
    except RecursionError as exc:  # the JSON parser's own limit on nesting
        raise SerializationError(
            f"events nested deeper than {MAX_EVENT_DEPTH} levels are not restored"
        ) from exc
    return event_from_dict(data)


# --- The pure-DP reading of one event --------------------------------------------------------
# It sits with the vocabulary because mechanisms calibrate against it (they must be charged
# exactly what they report, see dpkit.mechanisms._calibration) and the pure, approximate,
# zCDP and Renyi accountants read events through it: one home below both.

#: A cost is an exact rational, or ``math.inf`` (a non-private release).
Cost = Fraction | float


def subsampled_epsilon(epsilon: float, sampling_rate: float) -> float:
    """``ln(1 + q (exp(eps) - 1))``, rounded up: eps-DP under Poisson subsampling with rate q.

    Li, Qardaji and Su (2012), Theorem 1; Balle, Barthe and Gaboardi (2018), Theorem 8 (add/remove
    neighbouring). ``q = 0`` costs nothing; ``eps = inf`` stays infinite when ``q > 0``.
    """
    q = sampling_rate
    if q == 0.0 or epsilon == 0.0:
        return 0.0
    if math.isinf(epsilon):
        return math.inf
    if q == 1.0:
        return epsilon
    if epsilon <= 700.0:
        val = math.log1p(q * math.expm1(epsilon))
    else:  # exp(eps) overflows: ln(q e^eps + 1 - q) = eps + ln(q + (1 - q) e^-eps)
        val = epsilon + math.log(q + (1.0 - q) * math.exp(-epsilon))
    return min(float_up(val), epsilon)


def declares_add_remove(event: DpEvent) -> bool:
    """Whether every leaf of ``event`` states the add/remove neighbouring relation."""
    if isinstance(event, ComposedEvent):
        return all(declares_add_remove(e) for e in event.events)
    if isinstance(event, SelfComposedEvent):
        return declares_add_remove(event.event)
    if isinstance(event, (NoOpEvent, NonPrivateEvent)):
        return True
    return getattr(event, "neighbouring", None) is Neighbouring.ADD_REMOVE


def _rr_epsilon(p_truth: float, categories: int) -> Cost:
    """``ln(p (k - 1) / (1 - p))`` rounded up (:func:`randomized_response_epsilon`), as a cost."""
    eps = randomized_response_epsilon(p_truth, categories)
    return math.inf if math.isinf(eps) else Fraction(eps)


def _slack(event: DpEvent) -> Fraction:
    return 2 * Fraction(getattr(event, "pmf_slack", 0.0))


def pure_epsilon_of(event: DpEvent) -> Cost | None:
    """The pure-DP epsilon of ONE occurrence of ``event`` (exact), or ``None`` if not pure DP.

    Includes ``2 * pmf_slack``. Returns ``math.inf`` for a non-private release. Composite events
    are summed; see the module docstring for the table of events.
    """
    if isinstance(event, NoOpEvent):
        return Fraction(0)
    if isinstance(event, NonPrivateEvent):
        return math.inf
    if isinstance(event, LaplaceEvent):
        return 1 / Fraction(event.noise_multiplier) + _slack(event)
    if isinstance(event, DiscreteLaplaceEvent):
        return Fraction(event.sensitivity) / Fraction(event.scale) + _slack(event)
    if isinstance(event, (ExponentialMechanismEvent, ReportNoisyMaxEvent)):
        return Fraction(event.epsilon) + _slack(event)
    if isinstance(event, PureDpEvent):
        return Fraction(event.epsilon)
    if isinstance(event, ApproxDpEvent):
        return Fraction(event.epsilon) if event.delta == 0.0 else None
    if isinstance(event, RandomizedResponseEvent):
        return _rr_epsilon(event.p_truth, event.categories)
    if isinstance(event, (ComposedEvent, SelfComposedEvent)):
        parts: list[tuple[DpEvent, int]]
        if isinstance(event, ComposedEvent):
            parts = [(e, 1) for e in event.events]
        else:
            parts = [(event.event, event.count)]
        total: Cost = Fraction(0)
        for inner, n in parts:
            c = pure_epsilon_of(inner)
            if c is None:
                return None
            if n == 0:
                continue
            if isinstance(c, float) or isinstance(total, float):
                total = math.inf
            else:
                total += n * c
        return total
    if isinstance(event, PoissonSampledEvent):
        if not declares_add_remove(event.event):
            return None  # amplification is proven here for add/remove neighbours only
        inner_cost = pure_epsilon_of(event.event)
        if inner_cost is None:
            return None
        if event.sampling_rate == 0.0:
            return Fraction(0)
        if isinstance(inner_cost, float):
            return math.inf
        return Fraction(subsampled_epsilon(up(inner_cost), event.sampling_rate))
    return None
