"""The Budget: charge-before-release, atomic refusal, threads, save/restore."""

from __future__ import annotations

import json
import math
import threading
from fractions import Fraction

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dpkit._numeric.rounding import down
from dpkit.accounting.budget import Budget
from dpkit.accounting.rdp import RdpAccountant
from dpkit.errors import (
    BudgetExceededError,
    PrivacyParameterError,
    SerializationError,
    UnsupportedEventError,
)
from dpkit.events import (
    ApproxDpEvent,
    ComposedEvent,
    GaussianEvent,
    LaplaceEvent,
    NonPrivateEvent,
    PoissonSampledEvent,
    PureDpEvent,
    event_to_dict,
)


def _snapshot(acct: Budget) -> tuple[object, ...]:
    return (acct.spent, acct.remaining, acct.ledger, acct.to_json(), acct.spent_epsilon_exact)


def test_pure_filter_charges_exactly_and_refuses_overspending() -> None:
    acct = Budget(epsilon=1.0)
    assert acct.kind == "pure"
    acct.charge(epsilon=0.25)
    acct.charge(LaplaceEvent(noise_multiplier=4.0), count=2)
    assert acct.spent_epsilon_exact == Fraction(3, 4)
    assert acct.spent == (0.75, 0.0)
    assert acct.remaining == (0.25, 0.0)
    before = _snapshot(acct)
    with pytest.raises(BudgetExceededError):
        acct.charge(epsilon=0.3)
    assert _snapshot(acct) == before  # a refused charge leaves everything as it was
    acct.charge(epsilon=0.25)  # exactly the rest fits
    assert acct.remaining == (0.0, 0.0)
    with pytest.raises(BudgetExceededError):
        acct.charge(PureDpEvent(epsilon=2.0**-1074))


def test_doubles_are_charged_exactly() -> None:
    # The double 0.1 is slightly more than 1/10: ten of them exceed 1.0 (safe side).
    acct = Budget(epsilon=1.0)
    for _ in range(9):
        acct.charge(epsilon=0.1)
    with pytest.raises(BudgetExceededError):
        acct.charge(epsilon=0.1)
    assert acct.spent_epsilon_exact == 9 * Fraction(0.1)


def test_refused_and_unsupported_charges_leave_state_untouched() -> None:
    acct = Budget(epsilon=2.0)
    acct.charge(epsilon=0.5)
    before = _snapshot(acct)
    with pytest.raises(UnsupportedEventError):
        acct.charge(GaussianEvent(noise_multiplier=1.0))  # no pure-DP reading of Gaussian noise
    with pytest.raises(UnsupportedEventError):
        acct.charge(ApproxDpEvent(epsilon=0.1, delta=1e-9))  # pure budget
    with pytest.raises(UnsupportedEventError):
        acct.charge(
            ComposedEvent(events=(PureDpEvent(epsilon=0.1), GaussianEvent(noise_multiplier=1.0)))
        )
    with pytest.raises(BudgetExceededError):
        acct.charge(NonPrivateEvent())
    with pytest.raises(PrivacyParameterError):
        acct.charge(epsilon=math.nan)
    with pytest.raises(PrivacyParameterError):
        acct.charge(epsilon=-0.1)
    with pytest.raises(PrivacyParameterError):
        acct.charge(PureDpEvent(epsilon=0.1), epsilon=0.1)
    with pytest.raises(PrivacyParameterError):
        acct.charge(epsilon=0.1, count=-1)
    with pytest.raises(PrivacyParameterError):
        acct.charge()
    assert _snapshot(acct) == before


def test_approx_filter_checks_both_parameters() -> None:
    acct = Budget(epsilon=1.0, delta=1e-5)
    assert acct.kind == "basic"
    acct.charge(epsilon=0.5, delta=4e-6)
    acct.charge(epsilon=0.25, delta=4e-6)
    with pytest.raises(BudgetExceededError):
        acct.charge(epsilon=0.01, delta=4e-6)  # delta would overflow
    with pytest.raises(BudgetExceededError):
        acct.charge(epsilon=0.5)  # epsilon would overflow
    spent_e, spent_d = acct.spent
    assert spent_e == 0.75 and spent_d >= 8e-6
    rem_e, rem_d = acct.remaining
    assert rem_e == 0.25
    assert rem_d == down(Fraction(1e-5) - 2 * Fraction(4e-6))  # exact difference, rounded down


def test_rdp_filter_accepts_gaussian_and_stays_within_budget() -> None:
    acct = Budget(epsilon=2.0, delta=1e-5, method="rdp")
    assert acct.kind == "rdp"
    event = PoissonSampledEvent(sampling_rate=0.01, event=GaussianEvent(noise_multiplier=1.0))
    accepted = 0
    while True:
        try:
            acct.charge(event, count=250)
        except BudgetExceededError:
            break
        accepted += 250
    assert accepted > 0
    spent_e, spent_d = acct.spent
    assert spent_e <= 2.0 and 0.0 < spent_d <= 1e-5
    with pytest.raises(UnsupportedEventError):
        acct.charge(epsilon=0.01, delta=1e-9)  # RDP cannot read a black-box (eps, delta) pair
    # A budget in basic mode reads the Gaussian through its privacy profile instead; it still
    # refuses a subsampled Gaussian (no exact (epsilon, delta) reading).
    with pytest.raises(UnsupportedEventError):
        Budget(epsilon=2.0, delta=1e-5).charge(event)


def test_odometer_records_without_refusing() -> None:
    odo = Budget(mode="odometer")
    odo.charge(epsilon=3.0)
    odo.charge(LaplaceEvent(noise_multiplier=0.5), count=2)
    assert odo.spent == (7.0, 0.0)
    assert odo.remaining[0] == math.inf
    assert not odo.exceeded
    capped = Budget(epsilon=1.0, mode="odometer")
    capped.charge(epsilon=3.0)
    assert capped.exceeded
    assert capped.remaining == (0.0, 0.0)
    capped.charge(NonPrivateEvent())
    assert math.isinf(capped.spent[0])
    with pytest.raises(UnsupportedEventError):
        capped.charge(GaussianEvent(noise_multiplier=1.0))  # still refuses what it cannot read


def test_can_charge_and_reserve() -> None:
    acct = Budget(epsilon=1.0)
    assert acct.can_charge(epsilon=1.0)
    assert not acct.can_charge(epsilon=1.5)
    assert not acct.can_charge(GaussianEvent(noise_multiplier=1.0))
    assert acct.spent == (0.0, 0.0)
    ran = []
    with acct.reserve(epsilon=0.5):
        ran.append(1)
    assert ran == [1] and acct.spent == (0.5, 0.0)
    with pytest.raises(BudgetExceededError), acct.reserve(epsilon=0.75):
        ran.append(2)  # never runs: the charge is refused first
    assert ran == [1]
    with pytest.raises(RuntimeError), acct.reserve(epsilon=0.25):
        raise RuntimeError("release failed")
    assert acct.spent == (0.75, 0.0)  # no refund: a failed release may have leaked


def test_constructor_validation() -> None:
    for kwargs in (
        {},  # a filter needs a budget
        {"epsilon": math.nan},
        {"epsilon": -1.0},
        {"epsilon": math.inf},
        {"epsilon": 1.0, "delta": 1.0},
        {"epsilon": 1.0, "mode": "fliter"},
        {"epsilon": 1.0, "method": "pld"},
        {"epsilon": True},
    ):
        with pytest.raises(PrivacyParameterError):
            Budget(**kwargs)  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        Budget(1.0)  # type: ignore[misc]


def test_json_round_trip() -> None:
    acct = Budget(epsilon=3.0, delta=1e-6, method="rdp")
    acct.charge(GaussianEvent(noise_multiplier=4.0), count=3)
    acct.charge(LaplaceEvent(noise_multiplier=10.0))
    restored = Budget.from_json(acct.to_json())
    assert restored.spent == acct.spent
    assert restored.ledger == acct.ledger
    assert restored.budget == acct.budget and restored.kind == "rdp"
    pure = Budget(epsilon=1.0)
    pure.charge(epsilon=0.3)
    again = Budget.from_json(pure.to_json())
    assert again.spent_epsilon_exact == Fraction(0.3)


def test_json_restore_refuses_bad_data() -> None:
    good = Budget(epsilon=1.0)
    good.charge(epsilon=0.5)
    data = json.loads(good.to_json())

    def variant(**changes: object) -> str:
        d = json.loads(json.dumps(data))
        d.update(changes)
        return json.dumps(d)

    bad_texts = [
        "not json",
        json.dumps([1, 2]),
        variant(format="other"),
        variant(version=99),
        variant(extra=1),
        variant(ledger="x"),
        variant(ledger=[{"event": {"type": "os.system", "command": "true"}, "count": 1}]),
        variant(ledger=[{"event": {"type": "pure_dp", "epsilon": 0.5, "x": 1}, "count": 1}]),
        variant(ledger=[{"event": event_to_dict(PureDpEvent(epsilon=2.0)), "count": 1}]),
        variant(ledger=[{"event": event_to_dict(PureDpEvent(epsilon=0.1)), "count": -3}]),
        variant(ledger=[{"event": event_to_dict(PureDpEvent(epsilon=0.1))}]),
        variant(epsilon=-1.0),
        variant(mode="x"),
    ]
    for text in bad_texts:
        with pytest.raises(SerializationError):
            Budget.from_json(text)


def test_concurrent_charges_never_overspend() -> None:
    budget = 10.0
    acct = Budget(epsilon=budget)
    eps = 1 / 64  # exact in binary: exactly 640 charges fit
    accepted = []
    refused = []
    lock = threading.Lock()
    start = threading.Barrier(16)

    def worker() -> None:
        start.wait()
        ok = bad = 0
        for _ in range(60):
            try:
                acct.charge(epsilon=eps)
                ok += 1
            except BudgetExceededError:
                bad += 1
        with lock:
            accepted.append(ok)
            refused.append(bad)

    threads = [threading.Thread(target=worker) for _ in range(16)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sum(accepted) == 640
    assert sum(refused) == 16 * 60 - 640
    assert acct.spent_epsilon_exact == Fraction(budget)
    assert len(acct.ledger) == 640


def test_concurrent_rdp_charges_never_overspend() -> None:
    acct = Budget(epsilon=1.0, delta=1e-6, method="rdp")
    event = GaussianEvent(noise_multiplier=8.0)
    results: list[bool] = []
    lock = threading.Lock()

    def worker() -> None:
        for _ in range(20):
            try:
                acct.charge(event)
                ok = True
            except BudgetExceededError:
                ok = False
            with lock:
                results.append(ok)

    threads = [threading.Thread(target=worker) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    n = sum(results)
    assert acct.spent[0] <= 1.0
    assert len(acct.ledger) == n
    # Exactly as many as a sequential filter accepts.
    seq = Budget(epsilon=1.0, delta=1e-6, method="rdp")
    count = 0
    while seq.can_charge(event):
        seq.charge(event)
        count += 1
    assert n == count


def test_single_order_rdp_filter() -> None:
    acct = Budget(epsilon=1.0, delta=1e-6, method="rdp", rdp_order=16.0)
    event = GaussianEvent(noise_multiplier=10.0)
    n = 0
    while acct.can_charge(event):
        acct.charge(event)
        n += 1
    # Feldman-Zrnic filter at order a: keep going while n * a / (2 s^2) <= B(a), where B(a)
    # is the RDP budget whose conversion at delta gives epsilon = 1.
    a, s = 16.0, 10.0
    budget_rdp = 1.0 - math.log1p(-1 / a) + (math.log(1e-6) + math.log(a)) / (a - 1)
    assert n == math.floor(budget_rdp / (a / (2 * s * s)))
    restored = Budget.from_json(acct.to_json())
    assert restored.spent == acct.spent
    for kwargs in (
        {"epsilon": 1.0, "delta": 1e-6, "rdp_order": 8.0},  # basic method
        {"epsilon": 1.0, "rdp_order": 8.0, "method": "rdp"},  # pure budget
        {"epsilon": 1.0, "delta": 1e-6, "method": "rdp", "rdp_order": 1.0},
        {"epsilon": 1.0, "delta": 1e-6, "method": "rdp", "rdp_order": math.nan},
    ):
        with pytest.raises(PrivacyParameterError):
            Budget(**kwargs)  # type: ignore[arg-type]


# ---------------------------------------------------------------------- budgets and mechanisms
def test_budget_is_the_public_name() -> None:
    import dpkit
    from dpkit.accounting import Budget as ReExported

    assert ReExported is Budget is dpkit.Budget
    assert repr(Budget(epsilon=1.0)).startswith("Budget(")


def test_charge_takes_a_mechanism_directly() -> None:
    from dpkit.mechanisms import Gaussian, Laplace

    lap = Laplace.from_epsilon(epsilon=0.5, sensitivity=1.0)
    budget = Budget(epsilon=2.0)
    assert budget.can_charge(lap)
    budget.charge(lap)
    with budget.reserve(lap):
        pass
    assert budget.ledger == ((lap.event, 1), (lap.event, 1))
    assert budget.cost_of(lap).epsilon == budget.cost_of(lap.event).epsilon
    gauss = Gaussian.from_mu(mu=0.5, sensitivity=1.0)
    with pytest.raises(UnsupportedEventError):
        budget.charge(gauss)  # a pure budget cannot read Gaussian noise
    with pytest.raises(UnsupportedEventError):
        budget.charge(object())


def test_bare_number_is_refused_with_a_hint() -> None:
    import numpy as np

    budget = Budget(epsilon=1.0)
    for bare in (0.5, 1, np.float64(0.5), Fraction(1, 2), True, "0.5"):
        with pytest.raises(PrivacyParameterError, match="epsilon="):
            budget.charge(bare)
        with pytest.raises(PrivacyParameterError, match="epsilon="):
            budget.can_charge(bare)
        with pytest.raises(PrivacyParameterError, match="epsilon="), budget.reserve(bare):
            pass
    assert budget.spent == (0.0, 0.0)


@pytest.mark.parametrize("k", [2, 3])
@pytest.mark.parametrize("delta", [0.0, 1e-6])
def test_k_parts_of_e_over_k_fit(k: int, delta: float) -> None:
    # The double e/k (0.5, 0.333...) times k is at most e, compared exactly.
    budget = Budget(epsilon=1.0, delta=delta)
    for _ in range(k):
        budget.charge(PureDpEvent(epsilon=1.0 / k))
    assert budget.spent_epsilon_exact <= 1
    assert not budget.can_charge(PureDpEvent(epsilon=2.0**-52))


@settings(max_examples=200, deadline=None)
@given(
    e=st.floats(min_value=1e-6, max_value=100.0, allow_nan=False),
    d=st.sampled_from([0.0, 1e-9, 3e-7]),
    k=st.integers(1, 50),
)
def test_split_parts_always_fit(e: float, d: float, k: int) -> None:
    budget = Budget(epsilon=e, delta=d)
    share = budget.split(k)
    assert share.epsilon is not None and share.delta is not None
    assert k * Fraction(share.epsilon) <= Fraction(e)
    assert k * Fraction(share.delta) <= Fraction(d)
    for _ in range(k):
        budget.charge(epsilon=share.epsilon, delta=share.delta)
    # rounded down by at most one ulp per part: almost nothing is wasted
    assert Fraction(e) - budget.spent_epsilon_exact <= k * Fraction(math.ulp(share.epsilon))


def test_split_validation_and_rdp() -> None:
    with pytest.raises(PrivacyParameterError):
        Budget(epsilon=1.0).split(0)
    with pytest.raises(PrivacyParameterError):
        Budget(epsilon=1.0).split(2.0)  # type: ignore[arg-type]
    with pytest.raises(PrivacyParameterError):
        Budget(epsilon=1.0, delta=1e-6, method="rdp").split(2)
    half = Budget(epsilon=1.0)
    half.charge(epsilon=0.5)
    assert half.split(2).epsilon == 0.25  # of what remains


def test_basic_budget_reads_a_gaussian_through_its_profile() -> None:
    from dpkit.accounting.approx import gaussian_pair
    from dpkit.accounting.gdp import gdp_delta

    ev = GaussianEvent(noise_multiplier=4.0, pmf_slack=2.0**-20)
    budget = Budget(epsilon=3.0, delta=1e-6)
    budget.charge(epsilon=0.5, delta=4e-7)
    cost = budget.cost_of(ev)
    pair = gaussian_pair(ev, 6e-7)  # the delta still available
    assert pair is not None
    assert (cost.epsilon, cost.delta) == (pair.epsilon, pair.delta)
    # the pair is certified by the exact profile with the slack: e^a delta_mu(eps - 2a)
    assert gdp_delta(0.25, 2.0**-20, pair.epsilon) <= 6e-7
    assert gdp_delta(0.25, 2.0**-20, pair.epsilon * (1 - 1e-9)) > 6e-7
    budget.charge(ev)
    assert budget.remaining[1] == 0.0
    with pytest.raises(BudgetExceededError):
        budget.charge(ev)  # no delta left: no finite epsilon
    budget.charge(epsilon=0.25)  # pure charges still fit
    restored = Budget.from_json(budget.to_json())
    assert restored.spent == budget.spent


def test_rdp_budget_reports_a_positive_delta() -> None:
    # Very little noise-free information: epsilon 0 is certified at the budget's delta (total
    # variation bound); the spent delta used to be reported as 0 although delta(0) > 0.
    tiny = Budget(epsilon=1.0, delta=1e-5, method="rdp")
    tiny.charge(GaussianEvent(noise_multiplier=1e6), count=3)
    interp0 = RdpAccountant().compose(GaussianEvent(noise_multiplier=1e6), 3)
    assert interp0.get_epsilon(1e-5) == 0.0
    assert tiny.spent == (0.0, interp0.get_delta(0.0))
    assert 1e-6 < tiny.spent[1] <= 1e-5
    budget = Budget(epsilon=1.0, delta=1e-5, method="rdp")
    budget.charge(GaussianEvent(noise_multiplier=2000.0), count=3)
    eps, dlt = budget.spent
    # previously (0.0, 0.0); now the certificate at the budget's delta
    assert dlt > 0.0 and dlt <= 1e-5
    interp = RdpAccountant().compose(GaussianEvent(noise_multiplier=2000.0), 3)
    assert eps == interp.get_epsilon(1e-5)
    assert dlt == min(interp.get_delta(eps), 1e-5)
    big = Budget(epsilon=5.0, delta=1e-5, method="rdp")
    big.charge(GaussianEvent(noise_multiplier=1.0))
    assert 0.0 < big.spent[1] <= 1e-5 and big.spent[0] > 1.0


def test_refused_charge_says_what_it_would_have_cost() -> None:
    budget = Budget(epsilon=1.0)
    budget.charge(epsilon=0.75)
    with pytest.raises(
        BudgetExceededError,
        match=r"^This charge needs epsilon 0\.5 but "
        r"only epsilon 0\.25 is left",
    ):
        budget.charge(LaplaceEvent(noise_multiplier=2.0))
    assert budget.spent == (0.75, 0.0)
    cost = budget.cost_of(LaplaceEvent(noise_multiplier=2.0), count=2)
    assert cost.native == 1.0 and cost.unit == "epsilon" and cost.spent_after == (1.75, 0.0)
    assert budget.spent == (0.75, 0.0)


def test_version_one_json_is_still_read() -> None:
    old = json.dumps(
        {
            "format": "dpkit.budget",
            "version": 1,
            "epsilon": 1.0,
            "delta": 0.0,
            "mode": "filter",
            "method": "basic",
            "rdp_order": None,
            "ledger": [{"event": event_to_dict(PureDpEvent(epsilon=0.5)), "count": 1}],
        }
    )
    assert Budget.from_json(old).spent == (0.5, 0.0)
