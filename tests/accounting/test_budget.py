"""The budget Accountant: charge-before-release, atomic refusal, threads, save/restore."""

from __future__ import annotations

import json
import math
import threading
from fractions import Fraction

import pytest

from dpkit._numeric.rounding import down
from dpkit.accounting.budget import Accountant
from dpkit.accounting.events import (
    ApproxDpEvent,
    ComposedEvent,
    GaussianEvent,
    LaplaceEvent,
    NonPrivateEvent,
    PoissonSampledEvent,
    PureDpEvent,
    event_to_dict,
)
from dpkit.errors import (
    BudgetExceededError,
    PrivacyParameterError,
    SerializationError,
    UnsupportedEventError,
)


def _snapshot(acct: Accountant) -> tuple[object, ...]:
    return (acct.spent, acct.remaining, acct.ledger, acct.to_json(), acct.spent_epsilon_exact)


def test_pure_filter_charges_exactly_and_refuses_overspending() -> None:
    acct = Accountant(epsilon=1.0)
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
    acct = Accountant(epsilon=1.0)
    for _ in range(9):
        acct.charge(epsilon=0.1)
    with pytest.raises(BudgetExceededError):
        acct.charge(epsilon=0.1)
    assert acct.spent_epsilon_exact == 9 * Fraction(0.1)


def test_refused_and_unsupported_charges_leave_state_untouched() -> None:
    acct = Accountant(epsilon=2.0)
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
    acct = Accountant(epsilon=1.0, delta=1e-5)
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
    acct = Accountant(epsilon=2.0, delta=1e-5, method="rdp")
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
        Accountant(epsilon=2.0, delta=1e-5).charge(event)


def test_odometer_records_without_refusing() -> None:
    odo = Accountant(mode="odometer")
    odo.charge(epsilon=3.0)
    odo.charge(LaplaceEvent(noise_multiplier=0.5), count=2)
    assert odo.spent == (7.0, 0.0)
    assert odo.remaining[0] == math.inf
    assert not odo.exceeded
    capped = Accountant(epsilon=1.0, mode="odometer")
    capped.charge(epsilon=3.0)
    assert capped.exceeded
    assert capped.remaining == (0.0, 0.0)
    capped.charge(NonPrivateEvent())
    assert math.isinf(capped.spent[0])
    with pytest.raises(UnsupportedEventError):
        capped.charge(GaussianEvent(noise_multiplier=1.0))  # still refuses what it cannot read


def test_can_charge_and_reserve() -> None:
    acct = Accountant(epsilon=1.0)
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
            Accountant(**kwargs)  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        Accountant(1.0)  # type: ignore[misc]


def test_json_round_trip() -> None:
    acct = Accountant(epsilon=3.0, delta=1e-6, method="rdp")
    acct.charge(GaussianEvent(noise_multiplier=4.0), count=3)
    acct.charge(LaplaceEvent(noise_multiplier=10.0))
    restored = Accountant.from_json(acct.to_json())
    assert restored.spent == acct.spent
    assert restored.ledger == acct.ledger
    assert restored.budget == acct.budget and restored.kind == "rdp"
    pure = Accountant(epsilon=1.0)
    pure.charge(epsilon=0.3)
    again = Accountant.from_json(pure.to_json())
    assert again.spent_epsilon_exact == Fraction(0.3)


def test_json_restore_refuses_bad_data() -> None:
    good = Accountant(epsilon=1.0)
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
            Accountant.from_json(text)


def test_concurrent_charges_never_overspend() -> None:
    budget = 10.0
    acct = Accountant(epsilon=budget)
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
    acct = Accountant(epsilon=1.0, delta=1e-6, method="rdp")
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
    seq = Accountant(epsilon=1.0, delta=1e-6, method="rdp")
    count = 0
    while seq.can_charge(event):
        seq.charge(event)
        count += 1
    assert n == count


def test_single_order_rdp_filter() -> None:
    acct = Accountant(epsilon=1.0, delta=1e-6, method="rdp", rdp_order=16.0)
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
    restored = Accountant.from_json(acct.to_json())
    assert restored.spent == acct.spent
    for kwargs in (
        {"epsilon": 1.0, "delta": 1e-6, "rdp_order": 8.0},  # basic method
        {"epsilon": 1.0, "rdp_order": 8.0, "method": "rdp"},  # pure budget
        {"epsilon": 1.0, "delta": 1e-6, "method": "rdp", "rdp_order": 1.0},
        {"epsilon": 1.0, "delta": 1e-6, "method": "rdp", "rdp_order": math.nan},
    ):
        with pytest.raises(PrivacyParameterError):
            Accountant(**kwargs)  # type: ignore[arg-type]
