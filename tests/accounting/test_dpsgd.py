"""Tests of dpsgd_epsilon / dpsgd_noise_multiplier."""

from __future__ import annotations

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dpkit.accounting.dpsgd import dpsgd_epsilon, dpsgd_noise_multiplier
from dpkit.errors import PrivacyParameterError

Q, SIGMA, STEPS, DELTA = 0.02, 1.0, 200, 1e-5


def test_pld_against_prv_accountant() -> None:
    from prv_accountant import PoissonSubsampledGaussianMechanism, PRVAccountant

    ours = dpsgd_epsilon(sampling_rate=Q, noise_multiplier=SIGMA, steps=STEPS, delta=DELTA)
    prv = PRVAccountant(
        prvs=PoissonSubsampledGaussianMechanism(noise_multiplier=SIGMA, sampling_probability=Q),
        max_self_compositions=STEPS,
        eps_error=0.01,
        delta_error=1e-9,
    )
    lo, est, _ = prv.compute_epsilon(delta=DELTA, num_self_compositions=STEPS)
    assert ours >= lo
    assert abs(ours - est) < 0.01


def test_methods_ordered() -> None:
    pld = dpsgd_epsilon(sampling_rate=Q, noise_multiplier=SIGMA, steps=STEPS, delta=DELTA)
    rdp = dpsgd_epsilon(
        sampling_rate=Q, noise_multiplier=SIGMA, steps=STEPS, delta=DELTA, method="rdp"
    )
    assert pld <= rdp  # both upper bounds; PLD is the tight one
    assert rdp < 1.5 * pld


def test_gdp_clt_estimate_is_close() -> None:
    pld = dpsgd_epsilon(sampling_rate=Q, noise_multiplier=SIGMA, steps=STEPS, delta=DELTA)
    clt = dpsgd_epsilon(
        sampling_rate=Q, noise_multiplier=SIGMA, steps=STEPS, delta=DELTA, method="gdp-clt"
    )
    assert 0.0 < clt < math.inf
    assert abs(clt - pld) < 0.5 * pld  # an estimate, can be on either side


def test_zero_steps_and_zero_rate() -> None:
    assert dpsgd_epsilon(sampling_rate=Q, noise_multiplier=SIGMA, steps=0, delta=DELTA) == 0.0
    assert dpsgd_epsilon(sampling_rate=0.0, noise_multiplier=SIGMA, steps=9, delta=DELTA) == 0.0


@pytest.mark.parametrize(
    "kwargs",
    [
        {"sampling_rate": 1.5},
        {"sampling_rate": math.nan},
        {"noise_multiplier": 0.0},
        {"noise_multiplier": -1.0},
        {"steps": 2.5},
        {"steps": -1},
        {"steps": True},
        {"delta": 1.0},
        {"delta": math.nan},
        {"method": "moments"},
    ],
)
def test_validation(kwargs: dict[str, object]) -> None:
    args: dict[str, object] = {
        "sampling_rate": Q,
        "noise_multiplier": SIGMA,
        "steps": STEPS,
        "delta": DELTA,
    }
    args.update(kwargs)
    with pytest.raises(PrivacyParameterError):
        dpsgd_epsilon(**args)  # type: ignore[arg-type]


def test_noise_multiplier_is_safe_and_tight() -> None:
    target = 2.0
    s = dpsgd_noise_multiplier(sampling_rate=Q, steps=STEPS, epsilon=target, delta=DELTA, rtol=5e-3)
    assert dpsgd_epsilon(sampling_rate=Q, noise_multiplier=s, steps=STEPS, delta=DELTA) <= target
    below = s / 1.006
    assert dpsgd_epsilon(sampling_rate=Q, noise_multiplier=below, steps=STEPS, delta=DELTA) > target


def test_noise_multiplier_rdp() -> None:
    s = dpsgd_noise_multiplier(
        sampling_rate=Q, steps=STEPS, epsilon=2.0, delta=DELTA, method="rdp", rtol=1e-2
    )
    eps = dpsgd_epsilon(sampling_rate=Q, noise_multiplier=s, steps=STEPS, delta=DELTA, method="rdp")
    assert eps <= 2.0
    s_pld = dpsgd_noise_multiplier(
        sampling_rate=Q, steps=STEPS, epsilon=2.0, delta=DELTA, rtol=1e-2
    )
    assert s_pld <= s * 1.02


def test_noise_multiplier_refuses_impossible_target() -> None:
    with pytest.raises(PrivacyParameterError):
        dpsgd_noise_multiplier(sampling_rate=Q, steps=STEPS, epsilon=1.0, delta=0.0)
    with pytest.raises(PrivacyParameterError):
        dpsgd_noise_multiplier(sampling_rate=Q, steps=STEPS, epsilon=-1.0, delta=DELTA)


@pytest.mark.slow
@settings(max_examples=6, deadline=None)
@given(steps=st.integers(min_value=1, max_value=120))
def test_pld_epsilon_monotone_in_steps(steps: int) -> None:
    a = dpsgd_epsilon(sampling_rate=0.01, noise_multiplier=1.0, steps=steps, delta=DELTA)
    b = dpsgd_epsilon(sampling_rate=0.01, noise_multiplier=1.0, steps=steps + 7, delta=DELTA)
    assert b >= a * (1 - 1e-4)


@pytest.mark.slow
@settings(max_examples=6, deadline=None)
@given(sigma=st.floats(min_value=0.7, max_value=5.0), factor=st.floats(1.05, 2.0))
def test_pld_epsilon_monotone_in_inverse_noise(sigma: float, factor: float) -> None:
    a = dpsgd_epsilon(sampling_rate=0.01, noise_multiplier=sigma, steps=50, delta=DELTA)
    b = dpsgd_epsilon(sampling_rate=0.01, noise_multiplier=sigma * factor, steps=50, delta=DELTA)
    assert b <= a * (1 + 1e-4)


# ----------------------------------------------------------------------------- schedules
@pytest.mark.slow
def test_epochs_and_sizes_give_the_same_run_as_steps() -> None:
    # Regression: dpsgd_epsilon took steps only. Epochs are rounded UP: 60 epochs of batch 256
    # over 60000 records is ceil(14062.5) = 14063 steps (exactly, from the integer sizes).
    from dpkit.accounting.dpsgd import dpsgd_schedule

    assert dpsgd_schedule(batch_size=256, dataset_size=60000, epochs=60) == (256 / 60000, 14063)
    q, n = dpsgd_schedule(batch_size=3, dataset_size=10, epochs=1)
    assert n == 4 and q == math.nextafter(0.3, 1.0)  # 3/10 rounded up (the double 0.3 is below)
    assert dpsgd_schedule(sampling_rate=0.7, epochs=7) == (0.7, 10)  # 0.7 is not exact
    assert dpsgd_schedule(sampling_rate=0.05, steps=17) == (0.05, 17)
    a = dpsgd_epsilon(
        batch_size=256,
        dataset_size=60000,
        epochs=60,
        noise_multiplier=1.1,
        delta=DELTA,
        method="rdp",
    )
    b = dpsgd_epsilon(
        sampling_rate=256 / 60000, steps=14063, noise_multiplier=1.1, delta=DELTA, method="rdp"
    )
    assert a == b
    s = dpsgd_noise_multiplier(
        batch_size=256,
        dataset_size=60000,
        epochs=2,
        epsilon=2.0,
        delta=DELTA,
        method="rdp",
        rtol=1e-2,
    )
    assert s == dpsgd_noise_multiplier(
        sampling_rate=256 / 60000, steps=469, epsilon=2.0, delta=DELTA, method="rdp", rtol=1e-2
    )


def test_cli_and_library_agree_on_steps() -> None:
    from dpkit.accounting.dpsgd import dpsgd_schedule
    from dpkit.cli._account import steps_from_epochs

    for epochs, q in ((60, 256 / 60000), (2, 0.5), (1, 0.3), (7, 0.7), (2.5, 0.013)):
        assert steps_from_epochs(epochs, q) == dpsgd_schedule(sampling_rate=q, epochs=epochs)[1]


@pytest.mark.parametrize(
    "kwargs",
    [
        {"batch_size": 0, "dataset_size": 10, "epochs": 1},
        {"batch_size": 11, "dataset_size": 10, "epochs": 1},
        {"batch_size": 2.0, "dataset_size": 10, "epochs": 1},
        {"batch_size": 2, "dataset_size": True, "epochs": 1},
        {"batch_size": 2, "epochs": 1},  # dataset_size missing
        {"sampling_rate": 0.1, "batch_size": 2, "dataset_size": 10, "epochs": 1},  # both
        {"sampling_rate": 0.1, "epochs": 1, "steps": 10},  # both
        {"sampling_rate": 0.1},  # neither steps nor epochs
        {"sampling_rate": 0.1, "epochs": math.nan},
        {"sampling_rate": 0.1, "epochs": -1.0},
        {"sampling_rate": 0.1, "epochs": math.inf},
        {"sampling_rate": 0.0, "epochs": 1.0},
    ],
)
def test_schedule_validation(kwargs: dict[str, object]) -> None:
    with pytest.raises(PrivacyParameterError):
        dpsgd_epsilon(noise_multiplier=1.0, delta=DELTA, **kwargs)  # type: ignore[arg-type]
    with pytest.raises(PrivacyParameterError):
        dpsgd_noise_multiplier(epsilon=1.0, delta=DELTA, **kwargs)  # type: ignore[arg-type]
