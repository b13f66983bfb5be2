"""Accountants refuse to mix neighbouring relations without walking their whole history.

Every charge asks whether the new event states a neighbouring relation other than the one
stated by the events composed so far. The answer must stay the same (a clash is refused, also
on a clone that a budget tries a charge on) while the work per charge stays constant: a
service that has answered thousands of queries must not rescan them all at each charge.
"""

from __future__ import annotations

import pytest

import dpkit.accounting._base as base
from dpkit.accounting import ApproxDpAccountant, PureDpAccountant, RdpAccountant
from dpkit.errors import UnsupportedEventError
from dpkit.events import LaplaceEvent, Neighbouring, PureDpEvent

ACCOUNTANTS = [PureDpAccountant, ApproxDpAccountant, RdpAccountant]
LAP_AR = LaplaceEvent(noise_multiplier=50.0, neighbouring=Neighbouring.ADD_REMOVE)
LAP_RE = LaplaceEvent(noise_multiplier=50.0, neighbouring=Neighbouring.REPLACE)


def _counting(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    calls = [0]
    real = base.stated_relations

    def counted(event: object) -> frozenset[Neighbouring]:
        calls[0] += 1
        return real(event)  # type: ignore[arg-type]

    monkeypatch.setattr(base, "stated_relations", counted)
    return calls


@pytest.mark.parametrize("cls", ACCOUNTANTS)
def test_a_charge_after_a_long_history_reads_a_constant_number_of_events(
    cls: type, monkeypatch: pytest.MonkeyPatch
) -> None:
    acc = cls()
    for _ in range(400):
        acc.compose(PureDpEvent(epsilon=1e-4))  # states no relation
    acc.compose(LAP_AR)  # the first relation comes after 400 events that state none
    calls = _counting(monkeypatch)
    for _ in range(3):
        trial = acc.clone()
        trial.compose(LAP_AR)
        acc.compose(LAP_AR)
    # walking the history would read 400+ events per charge
    assert calls[0] <= 30


@pytest.mark.parametrize("cls", ACCOUNTANTS)
def test_a_clash_is_refused_after_events_without_a_relation_and_on_clones(cls: type) -> None:
    acc = cls()
    for _ in range(5):
        acc.compose(PureDpEvent(epsilon=1e-4))
    acc.compose(LAP_AR)
    acc.compose(PureDpEvent(epsilon=1e-4))
    for a in (acc, acc.clone(), acc.clone().clone()):
        with pytest.raises(UnsupportedEventError, match="neighbours"):
            a.compose(LAP_RE)
        assert not a.supports(LAP_RE)
        assert a.supports(LAP_AR)


@pytest.mark.parametrize("cls", ACCOUNTANTS)
def test_the_first_stated_relation_is_the_one_kept(cls: type) -> None:
    acc = cls()
    acc.compose(PureDpEvent(epsilon=1e-4))
    clone = acc.clone()  # scanned before any relation was stated
    clone.compose(LAP_RE)
    with pytest.raises(UnsupportedEventError):
        clone.compose(LAP_AR)
    acc.compose(LAP_AR)  # the original is untouched by its clone's history
    with pytest.raises(UnsupportedEventError):
        acc.compose(LAP_RE)
