"""A budget holds under one neighbouring relation and restates every charge under it.

Add/remove budgets refuse replace-one events; replace-one budgets charge add/remove events by
group privacy for two steps. References are computed independently (exact rationals, mpmath).
"""

from __future__ import annotations

import json
import math
from fractions import Fraction
from typing import Any

import mpmath
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dpkit.accounting import Budget
from dpkit.accounting._base import PrivacyAccountant
from dpkit.accounting.composition import parallel_composition
from dpkit.accounting.filters import GdpFilter, ZCdpFilter
from dpkit.accounting.pure import pure_epsilon_of
from dpkit.errors import (
    BudgetExceededError,
    PrivacyParameterError,
    SerializationError,
    UnsupportedEventError,
)
from dpkit.events import (
    ApproxDpEvent,
    ApproxZCdpEvent,
    ComposedEvent,
    DiscreteGaussianEvent,
    DiscreteLaplaceEvent,
    DpEvent,
    ExponentialMechanismEvent,
    GaussianEvent,
    LaplaceEvent,
    Neighbouring,
    PoissonSampledEvent,
    PureDpEvent,
    RandomizedResponseEvent,
    ReportNoisyMaxEvent,
    SelfComposedEvent,
    ZCdpEvent,
)
from dpkit.mechanisms import Laplace, RandomizedResponse

AR, RE = Neighbouring.ADD_REMOVE, Neighbouring.REPLACE


# ---------------------------------------------------------------- the reported attack
def test_the_repro_is_refused_by_the_default_add_remove_budget() -> None:
    lap = Laplace.from_epsilon(epsilon=0.5, sensitivity=1.0)
    rr = RandomizedResponse.from_epsilon(epsilon=0.5)
    budget = Budget(epsilon=1.001)
    assert budget.neighbouring is AR
    budget.charge(lap)
    before = (budget.spent, budget.ledger)
    with pytest.raises(UnsupportedEventError, match="replace-one"):
        budget.charge(rr)
    assert (budget.spent, budget.ledger) == before  # a refused charge changes nothing
    assert not budget.can_charge(rr)
    with pytest.raises(UnsupportedEventError):
        budget.cost_of(rr)


def test_the_repro_is_charged_by_group_privacy_under_replace() -> None:
    lap = Laplace.from_epsilon(epsilon=0.5, sensitivity=1.0)
    rr = RandomizedResponse.from_epsilon(epsilon=0.5)
    ideal = Fraction(1) / Fraction(lap.event.noise_multiplier)  # add/remove, exact
    slack = 2 * Fraction(lap.event.pmf_slack)  # per input, so not doubled by the relation
    small = Budget(epsilon=1.001, neighbouring="replace")
    small.charge(lap)
    assert small.spent_epsilon_exact == 2 * ideal + slack
    lap_eps = 2 * ideal + slack
    with pytest.raises(BudgetExceededError):
        small.charge(rr)  # 2 * 0.5 + 0.5 = 1.5 > 1.001
    enough = Budget(epsilon=1.5, neighbouring="replace")
    enough.charge(lap)
    enough.charge(rr)
    rr_eps = enough.spent_epsilon_exact - lap_eps
    # the replace-one event is charged at its own epsilon ln(p / (1 - p)), rounded up a hair
    # (at 50 digits: the two agree to 16, so the default 15 cannot order them)
    with mpmath.workdps(50):
        p = mpmath.mpf(rr.event.p_truth)
        assert mpmath.mpf(rr_eps.numerator) / rr_eps.denominator >= mpmath.log(p / (1 - p))
    assert float(rr_eps) == pytest.approx(0.5, rel=1e-9)


# ---------------------------------------------------------------- exact conversions
def _spent(event: DpEvent, **kwargs: Any) -> Budget:
    b = Budget(mode="odometer", **kwargs)
    b.charge(event)
    return b


@pytest.mark.parametrize(
    ("event", "add_remove_eps"),
    [
        (LaplaceEvent(noise_multiplier=2.0), Fraction(1, 2)),
        (LaplaceEvent(noise_multiplier=3.0), 1 / Fraction(3.0)),
        (DiscreteLaplaceEvent(scale=4.0, sensitivity=3), Fraction(3, 4)),
        (ExponentialMechanismEvent(epsilon=0.7), Fraction(0.7)),
        (ReportNoisyMaxEvent(epsilon=0.3, noise="gumbel"), Fraction(0.3)),
        (PureDpEvent(epsilon=0.1), Fraction(0.1)),
        (ApproxDpEvent(epsilon=0.25, delta=0.0), Fraction(0.25)),
    ],
)
def test_pure_group_privacy_doubles_epsilon_exactly(
    event: DpEvent, add_remove_eps: Fraction
) -> None:
    ar = _spent(event, epsilon=10.0)
    re = _spent(event, epsilon=10.0, neighbouring="replace")
    assert ar.spent_epsilon_exact == add_remove_eps
    assert re.spent_epsilon_exact == 2 * add_remove_eps


def test_a_replace_one_event_keeps_its_epsilon_under_replace() -> None:
    rr = RandomizedResponseEvent(p_truth=0.75)
    lap = LaplaceEvent(noise_multiplier=2.0, neighbouring=RE)
    rr_eps = pure_epsilon_of(rr)
    assert isinstance(rr_eps, Fraction)
    assert _spent(rr, epsilon=10.0, neighbouring="replace").spent_epsilon_exact == rr_eps
    assert _spent(lap, epsilon=10.0, neighbouring="replace").spent_epsilon_exact == Fraction(1, 2)
    # randomized response declared add/remove is charged 2 eps under replace (group privacy)
    rr_ar = RandomizedResponseEvent(p_truth=0.75, neighbouring=AR)
    assert _spent(rr_ar, epsilon=10.0, neighbouring="replace").spent_epsilon_exact == (2 * rr_eps)
    assert _spent(rr_ar, epsilon=10.0).spent_epsilon_exact == rr_eps


@pytest.mark.parametrize("eps", [0.01, 0.5, 1.0, 3.0])
@pytest.mark.parametrize("delta", [1e-9, 1e-6, 1e-3])
def test_approx_group_privacy_matches_mpmath(eps: float, delta: float) -> None:
    b = _spent(
        ApproxDpEvent(epsilon=eps, delta=delta), epsilon=20.0, delta=0.5, neighbouring="replace"
    )
    assert b.spent_epsilon_exact == 2 * Fraction(eps)
    mpmath.mp.dps = 50
    exact = (1 + mpmath.exp(mpmath.mpf(eps))) * mpmath.mpf(delta)
    got = b.spent[1]
    assert mpmath.mpf(got) >= exact  # rounded up, never below the lemma
    assert mpmath.mpf(got) <= exact * (1 + mpmath.mpf(2) ** -45)  # and within a few ulps
    # one home for the formula: parallel composition of one part under replace agrees
    assert parallel_composition(epsilons=[eps], deltas=[delta], neighbouring="replace") == (
        b.spent[0],
        got,
    )


def test_approx_group_privacy_with_a_vacuous_delta_is_non_private() -> None:
    b = _spent(
        ApproxDpEvent(epsilon=5.0, delta=0.01), epsilon=20.0, delta=0.5, neighbouring="replace"
    )
    assert b.spent[0] == math.inf  # (1 + e^5) * 0.01 > 1: no guarantee left
    f = Budget(epsilon=20.0, delta=0.5, neighbouring="replace")
    with pytest.raises(BudgetExceededError):
        f.charge(ApproxDpEvent(epsilon=5.0, delta=0.01))


def test_zcdp_group_privacy_is_four_rho() -> None:
    for ev, rho in [
        (ZCdpEvent(rho=0.01), Fraction(0.01)),
        (GaussianEvent(noise_multiplier=2.0), Fraction(1, 8)),
        (DiscreteGaussianEvent(sigma=3.0, sensitivity=1), Fraction(1, 18)),
    ]:
        ar = Budget(rho=1.0, mode="odometer")
        re = Budget(rho=1.0, mode="odometer", neighbouring="replace")
        ar.charge(ev)
        re.charge(ev)
        assert ar.spent_native is not None and re.spent_native is not None
        assert Fraction(ar.spent_native) >= rho
        assert Fraction(re.spent_native) >= 4 * rho
        assert re.spent_native <= math.nextafter(4 * float(rho), math.inf) * (1 + 2.0**-50)


def test_gdp_group_privacy_is_two_mu() -> None:
    ar = Budget(mu=2.0, mode="odometer")
    re = Budget(mu=2.0, mode="odometer", neighbouring="replace")
    ev = GaussianEvent(noise_multiplier=4.0)  # mu = 1/4 under add/remove
    ar.charge(ev)
    re.charge(ev)
    assert ar.spent_native == 0.25
    assert re.spent_native == 0.5
    # a replace-one Gaussian is read as stated
    re.charge(GaussianEvent(noise_multiplier=4.0, neighbouring=RE))
    assert re.spent_native == math.sqrt(0.25 + 0.0625)


def test_approx_zcdp_and_poisson_sampling_are_refused_under_replace() -> None:
    b = Budget(epsilon=1.0, delta=1e-6, method="zcdp", neighbouring="replace")
    with pytest.raises(UnsupportedEventError, match="approximately zCDP"):
        b.charge(ApproxZCdpEvent(rho=0.01, delta=1e-9))
    rdp = Budget(epsilon=1.0, delta=1e-6, method="rdp", neighbouring="replace")
    sampled = PoissonSampledEvent(sampling_rate=0.01, event=GaussianEvent(noise_multiplier=1.0))
    with pytest.raises(UnsupportedEventError, match="Poisson"):
        rdp.charge(sampled)
    assert rdp.ledger == ()
    Budget(epsilon=5.0, delta=1e-6, method="rdp").charge(sampled)  # fine under add/remove


def test_composite_events_are_restated_leaf_by_leaf() -> None:
    lap = LaplaceEvent(noise_multiplier=4.0)  # 0.25 add/remove
    rr = RandomizedResponseEvent(p_truth=0.75)  # ln 3, replace-one
    for ev in (
        ComposedEvent(events=(lap, rr)),
        SelfComposedEvent(event=ComposedEvent(events=(rr,)), count=2),
        PoissonSampledEvent(sampling_rate=0.5, event=rr),
    ):
        with pytest.raises(UnsupportedEventError, match="replace-one"):
            Budget(epsilon=10.0).charge(ev)
    b = _spent(
        SelfComposedEvent(event=ComposedEvent(events=(lap, rr)), count=3),
        epsilon=10.0,
        neighbouring="replace",
    )
    rr_eps = pure_epsilon_of(rr)
    assert isinstance(rr_eps, Fraction)
    assert b.spent_epsilon_exact == 3 * (Fraction(1, 2) + rr_eps)
    assert b.ledger[0][0] == SelfComposedEvent(event=ComposedEvent(events=(lap, rr)), count=3)


def test_basic_budgets_read_gaussians_after_restating() -> None:
    ev = GaussianEvent(noise_multiplier=4.0)
    re = Budget(epsilon=10.0, delta=1e-5, mode="odometer", neighbouring="replace")
    re.charge(ev)
    half = Budget(epsilon=10.0, delta=1e-5, mode="odometer")
    half.charge(GaussianEvent(noise_multiplier=2.0))
    assert re.spent == half.spent


# ---------------------------------------------------------------- the invariant
_EVENTS = st.one_of(
    st.builds(
        LaplaceEvent, noise_multiplier=st.floats(0.5, 20.0), neighbouring=st.sampled_from([AR, RE])
    ),
    st.builds(
        DiscreteLaplaceEvent,
        scale=st.floats(0.5, 20.0),
        sensitivity=st.integers(1, 4),
        neighbouring=st.sampled_from([AR, RE]),
    ),
    st.builds(
        ExponentialMechanismEvent,
        epsilon=st.floats(0.01, 2.0),
        neighbouring=st.sampled_from([AR, RE]),
    ),
    st.builds(
        RandomizedResponseEvent,
        p_truth=st.floats(0.5, 0.95),
        neighbouring=st.sampled_from([AR, RE]),
    ),
    st.builds(PureDpEvent, epsilon=st.floats(0.0, 2.0)),
)


def _reference(ev: DpEvent) -> tuple[Any, Neighbouring]:
    """The event's epsilon under its own relation, exact (mpmath at 60 digits for logs)."""
    if isinstance(ev, LaplaceEvent):
        return mpmath.mpf(1) / mpmath.mpf(ev.noise_multiplier), ev.neighbouring
    if isinstance(ev, DiscreteLaplaceEvent):
        return mpmath.mpf(ev.sensitivity) / mpmath.mpf(ev.scale), ev.neighbouring
    if isinstance(ev, ExponentialMechanismEvent):
        return mpmath.mpf(ev.epsilon), ev.neighbouring
    if isinstance(ev, RandomizedResponseEvent):
        p = mpmath.mpf(ev.p_truth)
        return mpmath.log(p / (1 - p)), ev.neighbouring
    assert isinstance(ev, PureDpEvent)
    return mpmath.mpf(ev.epsilon), AR  # black-box charges are add/remove statements


@settings(max_examples=150, deadline=None)
@given(
    events=st.lists(_EVENTS, max_size=12),
    total=st.floats(0.1, 6.0),
    relation=st.sampled_from(["add_remove", "replace"]),
)
def test_a_budget_never_accepts_more_than_its_total_under_its_relation(
    events: list[DpEvent], total: float, relation: str
) -> None:
    mpmath.mp.dps = 60
    budget = Budget(epsilon=total, neighbouring=relation)
    spent = mpmath.mpf(0)
    for ev in events:
        eps, rel = _reference(ev)
        try:
            budget.charge(ev)
        except BudgetExceededError:
            continue
        except UnsupportedEventError:
            assert relation == "add_remove" and rel is RE  # only replace-one is refused
            continue
        assert not (relation == "add_remove" and rel is RE)
        spent += 2 * eps if relation == "replace" and rel is AR else eps
        assert spent <= mpmath.mpf(total)


@settings(max_examples=100, deadline=None)
@given(
    pairs=st.lists(st.tuples(st.floats(0.0, 1.0), st.floats(0.0, 1e-3)), max_size=8),
    total_eps=st.floats(0.5, 5.0),
    total_delta=st.floats(1e-6, 1e-2),
)
def test_a_replace_budget_never_accepts_more_delta_than_group_privacy_allows(
    pairs: list[tuple[float, float]], total_eps: float, total_delta: float
) -> None:
    mpmath.mp.dps = 60
    budget = Budget(epsilon=total_eps, delta=total_delta, neighbouring="replace")
    e_sum, d_sum = mpmath.mpf(0), mpmath.mpf(0)
    for eps, delta in pairs:
        try:
            budget.charge(epsilon=eps, delta=delta)
        except BudgetExceededError:
            continue
        e_sum += 2 * mpmath.mpf(eps)
        d_sum += (1 + mpmath.exp(mpmath.mpf(eps))) * mpmath.mpf(delta)
        assert e_sum <= mpmath.mpf(total_eps) and d_sum <= mpmath.mpf(total_delta)


def test_a_sum_exactly_at_the_budget_is_accepted_under_replace() -> None:
    b = Budget(epsilon=1.0, neighbouring="replace")
    b.charge(LaplaceEvent(noise_multiplier=4.0))  # 0.5 under replace
    b.charge(LaplaceEvent(noise_multiplier=2.0, neighbouring=RE))  # 0.5
    assert b.spent == (1.0, 0.0)
    with pytest.raises(BudgetExceededError):
        b.charge(epsilon=2.0**-1074)


# ---------------------------------------------------------------- validation and state
@pytest.mark.parametrize("bad", ["replace_one", "", None, 1, 0.0, "ADD_REMOVE", ["replace"]])
def test_the_relation_is_validated(bad: Any) -> None:
    with pytest.raises(PrivacyParameterError, match="neighbouring"):
        Budget(epsilon=1.0, neighbouring=bad)


def test_the_relation_is_keyword_only_and_defaults_to_add_remove() -> None:
    assert Budget(epsilon=1.0).neighbouring is AR
    assert Budget(epsilon=1.0, neighbouring=RE).neighbouring is RE
    assert ZCdpFilter(rho=1.0).neighbouring is AR and GdpFilter(mu=1.0).neighbouring is AR
    assert "replace" in repr(Budget(epsilon=1.0, neighbouring="replace"))


def test_json_round_trip_keeps_the_relation() -> None:
    for kwargs in (
        {"epsilon": 3.0},
        {"epsilon": 3.0, "delta": 1e-6},
        {"epsilon": 3.0, "delta": 1e-6, "method": "zcdp"},
        {"mu": 2.0},
    ):
        for relation in ("add_remove", "replace"):
            b = Budget(neighbouring=relation, **kwargs)
            b.charge(
                LaplaceEvent(noise_multiplier=8.0)
                if b.kind != "gdp"
                else GaussianEvent(noise_multiplier=8.0)
            )
            data = json.loads(b.to_json())
            assert data["version"] == 4 and data["neighbouring"] == relation
            back = Budget.from_json(b.to_json())
            assert back.neighbouring is b.neighbouring
            assert back.spent == b.spent and back.ledger == b.ledger
            assert back.spent_native == b.spent_native
    data = json.loads(Budget(epsilon=1.0).to_json())
    data["neighbouring"] = "swap"
    with pytest.raises(SerializationError, match="neighbouring"):
        Budget.from_json(json.dumps(data))
    del data["neighbouring"]
    with pytest.raises(SerializationError, match="fields"):
        Budget.from_json(json.dumps(data))  # version 4 must say its relation


def test_version_3_data_loads_as_add_remove() -> None:
    data = json.loads(Budget(epsilon=2.0, delta=1e-6).to_json())
    data["version"] = 3
    del data["neighbouring"]
    data["ledger"] = [
        {
            "event": {
                "type": "laplace",
                "noise_multiplier": 2.0,
                "neighbouring": "add_remove",
                "pmf_slack": 0.0,
            },
            "count": 2,
        }
    ]
    old = Budget.from_json(json.dumps(data))
    assert old.neighbouring is AR and old.spent == (1.0, 0.0)
    # a version-3 ledger that mixed relations no longer replays
    data["ledger"].append(
        {
            "event": {
                "type": "randomized_response",
                "p_truth": 0.6,
                "categories": 2,
                "neighbouring": "replace",
            },
            "count": 1,
        }
    )
    with pytest.raises(SerializationError, match="replayed"):
        Budget.from_json(json.dumps(data))


# ---------------------------------------------------------------- analytics sessions
def test_a_session_refuses_a_replace_budget_and_keeps_add_remove_working() -> None:
    import pandas as pd

    import dpkit.analytics as dpa
    from dpkit.noise import RandomSource

    df = pd.DataFrame({"uid": [1, 2, 3, 4], "region": ["a", "b", "a", "b"]})
    budget = Budget(epsilon=1.0, neighbouring="replace")
    with pytest.raises(PrivacyParameterError, match="add/remove"):
        dpa.Session(df, privacy_unit="uid", budget=budget)
    assert budget.ledger == ()
    ok = Budget(epsilon=1.0)
    session = dpa.Session(
        df, privacy_unit="uid", budget=ok, source_of_randomness=RandomSource(seed=1, insecure=True)
    )
    (
        session.query()
        .group_by("region", keys=["a", "b"])
        .bound(max_partitions=1, max_rows_per_partition=1)
        .agg(n=dpa.count())
        .run(epsilon=0.5)
    )
    assert 0.0 < ok.spent[0] <= 0.5


def test_the_invariant_check_catches_a_budget_that_mixes_relations(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import dpkit.accounting._budget.filter as budget_module

    # the budget as it was before relations were enforced: events read as given
    monkeypatch.setattr(budget_module, "restate", lambda ev, relation: ev)
    monkeypatch.setattr(PrivacyAccountant, "_relation_clash", lambda self, ev: None)
    broken = Budget(epsilon=1.001, neighbouring="replace")
    lap, rr = LaplaceEvent(noise_multiplier=2.0), RandomizedResponseEvent(p_truth=0.6)
    broken.charge(lap)
    broken.charge(rr)  # accepted: 0.5 + 0.405 "fits"
    mpmath.mp.dps = 60
    spent = 2 * _reference(lap)[0] + _reference(rr)[0]  # what it costs under replace-one
    assert spent > mpmath.mpf(1.001)


# ---------------------------------------------------------------- interpreters on their own
def test_an_accountant_refuses_to_compose_different_relations() -> None:
    from dpkit.accounting.pure import PureDpAccountant
    from dpkit.accounting.rdp import RdpAccountant

    lap, rr = LaplaceEvent(noise_multiplier=2.0), RandomizedResponseEvent(p_truth=0.6)
    for acct in (PureDpAccountant(), RdpAccountant()):
        acct.compose(lap)
        assert not acct.supports(rr)
        with pytest.raises(UnsupportedEventError, match="do not add up"):
            acct.compose(rr)
        assert acct.ledger == ((lap, 1),)
        acct.compose(PureDpEvent(epsilon=0.1))  # black-box: composed as given
    mixed = ComposedEvent(events=(lap, rr))
    with pytest.raises(UnsupportedEventError, match="different neighbouring relations"):
        PureDpAccountant().compose(mixed)
    only_rr = PureDpAccountant()
    only_rr.compose(rr, count=2)  # one relation throughout: fine
    assert only_rr.get_epsilon(0.0) > 0.0
