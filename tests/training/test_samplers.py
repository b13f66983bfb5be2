"""Batch samplers' laws against their schemes (alpha = 1e-6 each, with companions on wrong
samplers), refusals, and the budget guard."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats

from dpkit.accounting import Budget
from dpkit.accounting.batching import BatchScheme
from dpkit.errors import BudgetExceededError, PrivacyParameterError
from dpkit.noise import RandomSource
from dpkit.training import BatchSampler, BudgetGuard

ALPHA = 1e-6
N, B = 200, 20


def src(seed: int) -> RandomSource:
    return RandomSource(seed=seed, insecure=True)


def sizes(sampler: BatchSampler) -> np.ndarray:
    return np.array([len(b) for b in sampler])


def poisson_size_law_ok(s: np.ndarray, n: int, q: float) -> bool:
    """Two-sided chi-square test of the batch-size variance and a z-test of the mean."""
    k = s.size
    var = n * q * (1 - q)
    stat = float(np.sum((s - n * q) ** 2) / var)  # ~ chi2(k) under the law
    lo, hi = stats.chi2.ppf(ALPHA / 4, k), stats.chi2.isf(ALPHA / 4, k)
    z = abs(float(s.sum()) - k * n * q) / np.sqrt(k * var)
    return bool(lo <= stat <= hi and z <= stats.norm.isf(ALPHA / 4))


def test_poisson_batch_sizes_follow_the_binomial_law() -> None:
    sch = BatchScheme(name="poisson", dataset_size=N, batch_size=B)
    assert poisson_size_law_ok(sizes(BatchSampler(sch, steps=3000, source=src(1))), N, 0.1)


def test_companion_fixed_size_batches_fail_the_poisson_law() -> None:
    wrong = BatchScheme(name="fixed_size", dataset_size=N, batch_size=B)
    assert not poisson_size_law_ok(sizes(BatchSampler(wrong, steps=3000, source=src(1))), N, 0.1)


def inclusion_uniform(sampler: BatchSampler, n: int) -> bool:
    counts = np.zeros(n)
    for b in sampler:
        assert len(set(b)) == len(b)
        counts[b] += 1
    return bool(stats.chisquare(counts).pvalue >= ALPHA)


def test_fixed_size_batches_are_uniform_subsets() -> None:
    sch = BatchScheme(name="fixed_size", dataset_size=N, batch_size=B)
    smp = BatchSampler(sch, steps=2000, source=src(2))
    assert set(sizes(smp)) == {B}
    assert inclusion_uniform(smp, N)


def test_companion_a_biased_subset_sampler_fails() -> None:
    class Biased(BatchSampler):
        def __iter__(self):  # type: ignore[no-untyped-def]
            rng = np.random.default_rng(0)
            w = np.where(np.arange(N) < N // 2, 1.5, 1.0)
            for _ in range(self.steps):
                yield sorted(rng.choice(N, size=B, replace=False, p=w / w.sum()).tolist())

    sch = BatchScheme(name="fixed_size", dataset_size=N, batch_size=B)
    assert not inclusion_uniform(Biased(sch, steps=2000, source=src(2)), N)


def position_uniform(sampler: BatchSampler, epochs: int) -> bool:
    per = sampler.scheme.steps_per_epoch
    where = np.zeros(per)
    batches = list(sampler)
    for e in range(epochs):
        epoch = batches[e * per : (e + 1) * per]
        flat = [i for b in epoch for i in b]
        assert len(flat) == len(set(flat)) == per * sampler.scheme.batch_size  # a partition
        where[[j for j, b in enumerate(epoch) if 0 in b]] += 1
    return bool(stats.chisquare(where).pvalue >= ALPHA)


def test_shuffle_places_a_record_uniformly() -> None:
    sch = BatchScheme(name="shuffle", dataset_size=N, batch_size=B)
    assert position_uniform(BatchSampler(sch, epochs=1000, source=src(3)), 1000)


def test_companion_cyclic_is_not_shuffled() -> None:
    sch = BatchScheme(name="cyclic", dataset_size=N, batch_size=B)
    assert not position_uniform(BatchSampler(sch, epochs=1000, source=src(3)), 1000)


def test_truncated_and_user_level_limits() -> None:
    sch = BatchScheme(name="truncated_poisson", dataset_size=N, batch_size=B, max_batch_size=22)
    s = sizes(BatchSampler(sch, steps=500, source=src(4)))
    assert s.max() == 22 and (s < 22).any()
    users = [i // 3 for i in range(3 * N)]  # three examples per person
    ups = BatchScheme(name="user_poisson", dataset_size=N, batch_size=B, examples_per_user=2)
    for b in BatchSampler(ups, steps=200, source=src(5), user_ids=users):
        people = [users[i] for i in b]
        assert max(np.bincount(people), default=0) <= 2


def test_refusals() -> None:
    sch = BatchScheme(name="shuffle", dataset_size=N, batch_size=B)
    smp = BatchSampler(sch, epochs=1)
    with pytest.raises(PrivacyParameterError, match="accountant assumes"):
        smp.check_scheme(BatchScheme(name="poisson", dataset_size=N, batch_size=B))
    with pytest.raises(PrivacyParameterError, match="replace"):
        BudgetGuard(Budget(epsilon=1.0, delta=1e-5, method="gdp"), smp, noise_multiplier=1.0)
    with pytest.raises(Exception, match="insecure"):
        BatchSampler(sch, epochs=1, source=RandomSource(seed=1))  # type: ignore[call-arg]


def test_budget_guard_stops_at_the_budget() -> None:
    sch = BatchScheme(name="cyclic", dataset_size=N, batch_size=B)
    smp = BatchSampler(sch, epochs=100, source=src(6))
    budget = Budget(epsilon=3.0, delta=1e-5, method="gdp", neighbouring="replace")
    guard = BudgetGuard(budget, smp, noise_multiplier=4.0)
    taken = 0
    with pytest.raises(BudgetExceededError):
        for _ in smp:
            guard.before_step()
            taken += 1
    epochs = taken // sch.steps_per_epoch
    from dpkit.accounting.batching import dpsgd_bounds

    assert dpsgd_bounds(sch, noise_multiplier=4.0, delta=1e-5, epochs=epochs).upper <= 3.0
    assert dpsgd_bounds(sch, noise_multiplier=4.0, delta=1e-5, epochs=epochs + 1).upper > 3.0


def bins_law_ok(batches: list[list[int]], n: int, t: int, epochs: int) -> bool:
    """Balls-in-bins: each epoch is a partition of all records into T batches; the sizes of an
    epoch are multinomial(n, 1/T) (Pearson's statistic, summed over independent epochs, is
    chi2(epochs (T - 1)) asymptotically; two-sided at alpha / 2) and record 0's batch is
    uniform (chi-square, alpha / 2)."""
    stat, where = 0.0, np.zeros(t)
    for e in range(epochs):
        epoch = batches[e * t : (e + 1) * t]
        flat = sorted(i for b in epoch for i in b)
        assert flat == list(range(n))  # every record exactly once per epoch
        s = np.array([len(b) for b in epoch])
        stat += float(np.sum((s - n / t) ** 2) / (n / t))
        where[[j for j, b in enumerate(epoch) if 0 in b]] += 1
    k = epochs * (t - 1)
    sizes_ok = stats.chi2.ppf(ALPHA / 4, k) <= stat <= stats.chi2.isf(ALPHA / 4, k)
    return bool(sizes_ok and stats.chisquare(where).pvalue >= ALPHA / 2)


def test_balls_in_bins_batches_follow_the_multinomial_law() -> None:
    sch = BatchScheme(name="balls_in_bins", dataset_size=N, batch_size=B)
    batches = list(BatchSampler(sch, epochs=600, source=src(8)))
    assert bins_law_ok(batches, N, sch.steps_per_epoch, 600)


def test_companion_shuffled_batches_fail_the_balls_in_bins_law() -> None:
    sch = BatchScheme(name="shuffle", dataset_size=N, batch_size=B)
    batches = list(BatchSampler(sch, epochs=600, source=src(8)))
    assert not bins_law_ok(batches, N, sch.steps_per_epoch, 600)


def test_budget_guard_charges_balls_in_bins_per_epoch() -> None:
    sch = BatchScheme(name="balls_in_bins", dataset_size=N, batch_size=B)
    smp = BatchSampler(sch, epochs=50, source=src(9))
    with pytest.raises(PrivacyParameterError, match="add_remove"):
        BudgetGuard(
            Budget(epsilon=3.0, delta=1e-5, method="gdp", neighbouring="replace"),
            smp,
            noise_multiplier=4.0,
        )
    budget = Budget(epsilon=3.0, delta=1e-5, method="gdp")
    guard = BudgetGuard(budget, smp, noise_multiplier=4.0)
    taken = 0
    with pytest.raises(BudgetExceededError):
        for _ in smp:
            guard.before_step()
            taken += 1
    assert taken % sch.steps_per_epoch == 0  # stopped at the start of an epoch
    from dpkit.accounting.batching import dpsgd_bounds

    e = taken // sch.steps_per_epoch
    assert dpsgd_bounds(sch, noise_multiplier=4.0, delta=1e-5, epochs=e).upper <= 3.0
    assert dpsgd_bounds(sch, noise_multiplier=4.0, delta=1e-5, epochs=e + 1).upper > 3.0
