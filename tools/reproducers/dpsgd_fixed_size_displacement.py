"""Attack: DP-SGD with fixed-size batches (sampling without replacement, replace-one).

Claim under attack: ``dpsgd_bounds(BatchScheme(name="fixed_size", ...))`` (and
``dpsgd_epsilon(scheme="fixed_size")``, the PLD accountant's reading of
``SampledWithoutReplacementEvent``), said to be tight, built on the symmetric pair
``(1 - q) N(0, s^2) + q N(-1, s^2)`` against ``(1 - q) N(0, s^2) + q N(1, s^2)``.

That pair is attained when every other record contributes 0, but it does not dominate. A batch
of fixed size that takes the replaced record *displaces* another one. Let every other record
contribute ``+C u`` and the replaced record ``-C u`` in D against ``+C u`` in D'. Then D' gives
``b C u`` in every batch, D gives ``(b - 2) C u`` when the record is drawn (probability q) and
``b C u`` otherwise: the pair ``(1 - q) N(0, s^2) + q N(-2, s^2)`` against ``N(0, s^2)``
(s = sigma in units of C), which is Poisson subsampling at noise multiplier ``sigma / 2``
(Zhu, Dong and Wang 2022: the replace-one pair of sampling without replacement is
``(q P + (1 - q) Q, Q)`` for the base pair (P, Q) of sensitivity 2C).

Figures: (1) exact delta (mpmath) of the displacement pair at dpkit's epsilon for one step;
(2) dp-accounting's PLD of that pair composed (its Poisson add/remove event at sigma / 2)
beside dpkit's figure; (3) a certified lower bound (Clopper-Pearson, confidence 1 - 1e-6) from
one DP-SGD step drawn through dpkit's own ``BatchSampler`` and Gaussian sampler, with the event
``noisy sum < (b - 3.5) C`` fixed in advance.

Run (repository root): PYTHONPATH=src:tests/support:benchmarks/shared python
    tools/reproducers/dpsgd_fixed_size_displacement.py
Regression test: tests/accounting/test_fixed_size_batches_account_displaced_records.py
"""

from __future__ import annotations

import math

import mpmath
import numpy as np

from dpkit.accounting.batching import BatchScheme, dpsgd_bounds
from dpkit.audit import clopper_pearson_lower, clopper_pearson_upper
from dpkit.noise import gaussian, resolve_source
from dpkit.training import BatchSampler

DELTA = 1e-5
SIDE = 1 - 1e-6 / 2  # two one-sided bounds: joint confidence 1 - 1e-6


def exact_delta(q: float, sigma: float, eps: float) -> float:
    """Exact ``delta(eps)`` (mpmath, both orders) of ``P = (1 - q) N(0, s^2) + q N(-2, s^2)``
    against ``R = N(0, s^2)``: one fixed-size step, every other record at ``+C``.

    ``P/R (x) = 1 - q + q exp(-(2x + 2) / s^2)`` decreases in x, so ``{P > E R}`` is
    ``x < x1`` and ``{R > E P}`` is ``x > x2`` (when ``1/E > 1 - q``), in closed form."""
    with mpmath.workdps(40):
        qq, s = mpmath.mpf(q), mpmath.mpf(sigma)
        e = mpmath.e ** mpmath.mpf(eps)

        def cdf(x: mpmath.mpf) -> mpmath.mpf:
            return mpmath.ncdf(x / s)

        x1 = -(s**2 * mpmath.log((e - (1 - qq)) / qq) + 2) / 2
        forward = (1 - qq) * cdf(x1) + qq * cdf(x1 + 2) - e * cdf(x1)
        backward = mpmath.mpf(0)
        if 1 / e > 1 - qq:
            x2 = -(s**2 * mpmath.log((1 / e - (1 - qq)) / qq) + 2) / 2
            backward = (1 - cdf(x2)) - e * ((1 - qq) * (1 - cdf(x2)) + qq * (1 - cdf(x2 + 2)))
        return float(max(forward, backward, 0))


def dp_accounting_epsilon(q: float, sigma: float, steps: int) -> float | None:
    try:
        import dp_accounting as dpa
        from dp_accounting.pld import pld_privacy_accountant
    except ImportError:
        return None
    acc = pld_privacy_accountant.PLDAccountant(
        neighboring_relation=dpa.NeighboringRelation.ADD_OR_REMOVE_ONE,
        value_discretization_interval=1e-4,
    )
    acc.compose(
        dpa.SelfComposedDpEvent(dpa.PoissonSampledDpEvent(q, dpa.GaussianDpEvent(sigma / 2)), steps)
    )
    return float(acc.get_epsilon(DELTA))


def one_step_audit(n: int, b: int, sigma: float, samples: int) -> tuple[float, float, float]:
    """Certified epsilon at DELTA from ``samples`` steps per dataset (record 0 replaced)."""
    sch = BatchScheme(name="fixed_size", dataset_size=n, batch_size=b)
    src = resolve_source(None)
    threshold = b - 3.5
    hits = []
    for own in (-1.0, 1.0):  # D: record 0 contributes -C, D': +C; all others +C
        sampler = BatchSampler(sch, steps=samples, source=src)
        sums = np.array(
            [own + (len(batch) - 1) if 0 in batch else float(len(batch)) for batch in sampler]
        )
        noisy = sums + gaussian(src, sigma=sigma, size=samples)
        hits.append(int(np.count_nonzero(noisy < threshold)))
    p_lo = float(clopper_pearson_lower(hits[0], samples, level=SIDE))
    q_hi = float(clopper_pearson_upper(hits[1], samples, level=SIDE))
    eps = math.log(max(p_lo - DELTA, 1e-300) / q_hi) if p_lo > DELTA else 0.0
    return max(0.0, eps), hits[0] / samples, hits[1] / samples


def main() -> None:
    print(f"fixed-size batches, replace-one, delta = {DELTA}")
    for n, b, sigma, steps in (
        (100, 10, 1.0, 1),
        (1000, 100, 1.0, 25),
        (1000, 10, 1.0, 1000),
        (60000, 256, 1.1, 2000),
    ):
        sch = BatchScheme(name="fixed_size", dataset_size=n, batch_size=b)
        got = dpsgd_bounds(sch, noise_multiplier=sigma, delta=DELTA, steps=steps, with_lower=False)
        ref = dp_accounting_epsilon(b / n, sigma, steps)
        line = f"  n={n} b={b} sigma={sigma} steps={steps}: dpkit upper {got.upper:.3f}"
        if steps == 1:
            exact = exact_delta(b / n, sigma, got.upper)
            line += f"; exact delta of the displacement pair at it {exact:.2e}"
        if ref is not None:
            line += f"; displacement pair (dp-accounting) epsilon {ref:.3f}"
        print(line)
    n, b, sigma, samples = 100, 10, 1.0, 400_000
    sch = BatchScheme(name="fixed_size", dataset_size=n, batch_size=b)
    claim = dpsgd_bounds(sch, noise_multiplier=sigma, delta=DELTA, steps=1, with_lower=False).upper
    eps, p, q = one_step_audit(n, b, sigma, samples)
    print(
        f"one step through BatchSampler + dpkit Gaussian noise, {samples} per dataset: "
        f"P_D(E) = {p:.5f}, P_D'(E) = {q:.5f}; certified epsilon >= {eps:.2f} at delta {DELTA} "
        f"against dpkit's {claim:.3f}"
    )


if __name__ == "__main__":
    main()
