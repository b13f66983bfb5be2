"""Accounting per batching scheme (dpkit.accounting.batching), against closed forms and
dp-accounting."""

from __future__ import annotations

import math

import pytest
from typer.testing import CliRunner

from dpkit import fdp
from dpkit.accounting import Budget
from dpkit.accounting.batching import BatchScheme, dpsgd_bounds
from dpkit.accounting.dpsgd import dpsgd_epsilon, dpsgd_noise_multiplier
from dpkit.accounting.pld import PldAccountant
from dpkit.cli import app
from dpkit.errors import PrivacyParameterError, UnsupportedEventError
from dpkit.events import GaussianEvent

N, B = 6000, 64


def scheme(name: str, **kw: int) -> BatchScheme:
    return BatchScheme(name=name, dataset_size=N, batch_size=B, **kw)


def test_fixed_size_matches_dp_accounting_displacement_pair() -> None:
    """A fixed-size batch that draws the replaced record displaces another one: the pair is
    dp-accounting's Poisson-subsampled Gaussian at half the noise multiplier (add/remove), not
    its replace-one pair of Poisson sampling (which assumes nothing is displaced)."""
    dpa = pytest.importorskip("dp_accounting")
    from dp_accounting.pld import privacy_loss_distribution as pld

    steps = 500
    ours = dpsgd_bounds(scheme("fixed_size"), noise_multiplier=1.0, delta=1e-5, steps=steps)
    theirs = (
        pld.from_gaussian_mechanism(
            0.5,
            sampling_prob=B / N,
            value_discretization_interval=1e-3,
            neighboring_relation=dpa.NeighboringRelation.ADD_OR_REMOVE_ONE,
        )
        .self_compose(steps)
        .get_epsilon_for_delta(1e-5)
    )
    assert ours.relation.value == "replace" and ours.upper_is_tight
    assert ours.lower <= theirs + 1e-6
    assert abs(ours.upper - theirs) < 2e-2


def test_cyclic_is_the_gaussian_closed_form_and_shuffle_sits_below() -> None:
    for sigma, epochs in ((1.0, 1), (2.0, 5)):
        mu = 2.0 * math.sqrt(epochs) / sigma
        exact = fdp.gdp(mu).epsilon(1e-5)
        cyc = dpsgd_bounds(scheme("cyclic"), noise_multiplier=sigma, delta=1e-5, epochs=epochs)
        assert cyc.upper == pytest.approx(exact, rel=1e-6)
        assert cyc.lower == pytest.approx(exact, rel=1e-6)
        shu = dpsgd_bounds(scheme("shuffle"), noise_multiplier=sigma, delta=1e-5, epochs=epochs)
        assert shu.upper == pytest.approx(exact, rel=1e-6)
        assert 0.0 <= shu.lower < shu.upper and not shu.upper_is_tight


def test_shuffle_lower_bound_grows_with_epochs() -> None:
    low = [
        dpsgd_bounds(scheme("shuffle"), noise_multiplier=0.4, delta=1e-5, epochs=e).lower
        for e in (1, 4)
    ]
    assert 0.0 < low[0] < low[1]


@pytest.mark.slow
def test_truncated_poisson() -> None:
    plain = dpsgd_bounds(scheme("poisson"), noise_multiplier=1.0, delta=1e-5, steps=300)
    far = dpsgd_bounds(
        scheme("truncated_poisson", max_batch_size=N), noise_multiplier=1.0, delta=1e-5, steps=300
    )
    assert far.truncation_mass < 1e-200
    assert far.upper == pytest.approx(plain.upper, rel=1e-6)
    near = dpsgd_bounds(
        scheme("truncated_poisson", max_batch_size=130), noise_multiplier=1.0, delta=1e-5, steps=300
    )
    assert 0.0 < near.truncation_mass < 5e-6
    assert near.lower <= plain.upper <= near.upper
    tight = dpsgd_bounds(
        scheme("truncated_poisson", max_batch_size=70), noise_multiplier=1.0, delta=1e-5, steps=300
    )
    assert tight.upper == math.inf  # the truncation mass exceeds delta / 2
    # the TV term (1 + e^eps) eta grows with eps: the answer lies inside a bounded window
    mid = dpsgd_bounds(
        scheme("truncated_poisson", max_batch_size=115), noise_multiplier=1.0, delta=1e-5, steps=300
    )
    assert plain.upper < mid.upper < math.inf
    assert mid.truncation_mass * (1 + math.exp(mid.upper)) < 1e-5


@pytest.mark.slow
def test_user_poisson_is_poisson_at_sigma_over_k() -> None:
    one = dpsgd_bounds(
        scheme("user_poisson", examples_per_user=1), noise_multiplier=1.0, delta=1e-5, steps=200
    )
    plain = dpsgd_bounds(scheme("poisson"), noise_multiplier=1.0, delta=1e-5, steps=200)
    assert one.upper == plain.upper
    three = dpsgd_bounds(
        scheme("user_poisson", examples_per_user=3), noise_multiplier=3.0, delta=1e-5, steps=200
    )
    assert three.upper == pytest.approx(plain.upper, rel=1e-9)


@pytest.mark.slow
def test_dpsgd_epsilon_and_noise_take_the_scheme() -> None:
    kw = dict(batch_size=B, dataset_size=N, delta=1e-5, epochs=2)
    eps = dpsgd_epsilon(noise_multiplier=1.2, scheme="fixed_size", **kw)
    assert (
        eps == dpsgd_bounds(scheme("fixed_size"), noise_multiplier=1.2, delta=1e-5, epochs=2).upper
    )
    sigma = dpsgd_noise_multiplier(epsilon=eps, scheme="fixed_size", **kw)
    assert dpsgd_epsilon(noise_multiplier=sigma, scheme="fixed_size", **kw) <= eps
    assert sigma == pytest.approx(1.2, rel=2e-3)
    with pytest.raises(PrivacyParameterError, match="scheme must be one of"):
        dpsgd_epsilon(noise_multiplier=1.0, scheme="balls-in-bins", **kw)
    with pytest.raises(PrivacyParameterError, match="pld"):
        dpsgd_epsilon(
            noise_multiplier=1.0, scheme="truncated_poisson", max_batch_size=80, method="rdp", **kw
        )
    # RDP accounts the other schemes' events; the exact Gaussian RDP is looser than PLD
    assert dpsgd_epsilon(noise_multiplier=1.0, scheme="shuffle", method="rdp", **kw) >= (
        dpsgd_epsilon(noise_multiplier=1.0, scheme="shuffle", **kw)
    )
    with pytest.raises(PrivacyParameterError, match="max_batch_size"):
        dpsgd_epsilon(noise_multiplier=1.0, scheme="truncated_poisson", **kw)


def test_events_compose_with_the_rest_of_accounting() -> None:
    sch = scheme("fixed_size")
    acct = PldAccountant()
    acct.compose(sch.event(1.0, 100))
    alone = acct.get_epsilon(1e-5)
    assert (
        alone
        == dpsgd_bounds(sch, noise_multiplier=1.0, delta=1e-5, steps=100, with_lower=False).upper
    )
    acct.compose(GaussianEvent(noise_multiplier=4.0, neighbouring="replace"))
    assert acct.get_epsilon(1e-5) > alone
    # a budget under the scheme's relation takes the epoch schemes' events, and refuses them
    # under the other relation
    cyc = scheme("cyclic").event(2.0, scheme("cyclic").steps_per_epoch * 3)
    budget = Budget(epsilon=50.0, delta=1e-5, method="gdp", neighbouring="replace")
    budget.charge(cyc)
    assert budget.spent[0] == pytest.approx(
        dpsgd_bounds(scheme("cyclic"), noise_multiplier=2.0, delta=1e-5, epochs=3).upper, rel=1e-3
    )
    with pytest.raises(UnsupportedEventError):
        Budget(epsilon=50.0, delta=1e-5, method="gdp").charge(cyc)


def test_cli_scheme() -> None:
    res = CliRunner().invoke(
        app,
        [
            "account",
            "dpsgd",
            "--delta",
            "1e-5",
            "--batch-size",
            "64",
            "--dataset-size",
            "6000",
            "--noise-multiplier",
            "1.0",
            "--epochs",
            "2",
            "--scheme",
            "shuffle",
        ],
    )
    assert res.exit_code == 0, res.output
    assert "replace-one" in res.output and "lower bound" in res.output
    up = dpsgd_bounds(
        scheme("shuffle"), noise_multiplier=1.0, delta=1e-5, epochs=2, with_lower=False
    ).upper
    assert f"{up:.4g}" in res.output


@pytest.mark.slow
def test_balls_in_bins_upper_is_the_add_remove_gaussian_and_lower_sits_below() -> None:
    """Proven bound: E add/remove Gaussians, mu = sqrt(E) / sigma (closed form via fdp.gdp and
    dp-accounting's PLD of E Gaussians); the largest-batch-sum lower bound is below it."""
    dpa = pytest.importorskip("dp_accounting")
    for sigma, epochs in ((1.0, 1), (2.0, 5)):
        b = dpsgd_bounds(scheme("balls_in_bins"), noise_multiplier=sigma, delta=1e-5, epochs=epochs)
        exact = fdp.gdp(math.sqrt(epochs) / sigma).epsilon(1e-5)
        assert b.relation.value == "add_remove" and not b.upper_is_tight
        assert b.upper == pytest.approx(exact, rel=1e-6) and b.upper >= exact * (1 - 1e-9)
        acct = dpa.pld.PLDAccountant(dpa.NeighboringRelation.ADD_OR_REMOVE_ONE)
        acct.compose(dpa.GaussianDpEvent(sigma), epochs)
        assert b.upper == pytest.approx(float(acct.get_epsilon(1e-5)), rel=2e-3)
        assert 0.0 < b.lower < b.upper
        assert b.steps == epochs * (N // B)


def test_balls_in_bins_lower_bound_grows_with_epochs() -> None:
    low = [
        dpsgd_bounds(scheme("balls_in_bins"), noise_multiplier=0.5, delta=1e-5, epochs=e).lower
        for e in (1, 4)
    ]
    assert 0.0 < low[0] < low[1]


def test_balls_in_bins_events_charge_a_budget() -> None:
    sch = scheme("balls_in_bins")
    ev = sch.event(2.0, sch.steps_per_epoch * 3)
    budget = Budget(epsilon=50.0, delta=1e-5, method="gdp")
    budget.charge(ev)
    assert budget.spent[0] == pytest.approx(
        dpsgd_bounds(sch, noise_multiplier=2.0, delta=1e-5, epochs=3).upper, rel=1e-3
    )
    # a replace-one budget converts it (add/remove sensitivity C is replace-one 2C): it costs more
    rep = Budget(epsilon=50.0, delta=1e-5, method="gdp", neighbouring="replace")
    rep.charge(ev)
    assert rep.spent[0] > budget.spent[0] * 1.5


def test_cli_balls_in_bins() -> None:
    args = ["account", "dpsgd", "--delta", "1e-5", "--batch-size", "64", "--dataset-size"]
    args += ["6000", "--noise-multiplier", "1.0", "--epochs", "2", "--scheme", "balls_in_bins"]
    res = CliRunner().invoke(app, args)
    assert res.exit_code == 0, res.output
    assert "add/remove" in res.output and "lower bound" in res.output
    up = dpsgd_bounds(
        scheme("balls_in_bins"), noise_multiplier=1.0, delta=1e-5, epochs=2, with_lower=False
    ).upper
    assert f"{up:.4g}" in res.output
