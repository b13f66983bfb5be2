"""Monte Carlo *estimate* of epsilon for balls-in-bins DP-SGD, with its confidence statement.

This is an estimate, never a proven guarantee: the number it returns holds with probability at
least ``confidence`` over dpkit's own random draws, not always. The proven bound of the scheme
is :func:`dpkit.accounting.batching.dpsgd_bounds` (upper and lower), reported beside it.

The pair (Chua et al., "Balls-and-Bins Sampling for DP-SGD", AISTATS 2025; the analysis of
"Scalable DP-SGD: Shuffling vs. Poisson Subsampling", NeurIPS 2024): in one epoch of ``T`` batches
the added record lands in a uniformly random batch ``j``, so in units of the clipping norm the
``T`` noisy sums are ``P = (1/T) sum_j N(e_j, s^2 I_T)`` with the record and ``Q = N(0, s^2 I_T)``
without it (all other gradients zero, which Chua et al. show is the worst case); ``E`` epochs
are independent. The privacy loss of one epoch is
``L(x) = ln( (1/T) sum_t exp((2 x_t - 1) / (2 s^2)) )`` and of the run the sum over epochs. The
profile is the larger of the two hockey-stick divergences

    delta_PQ(eps) = E_P[(1 - e^{eps - L})_+],     delta_QP(eps) = E_Q[(1 - e^{eps + L})_+],

both means of variables in ``[0, 1]``. By symmetry the record is put in batch 1 under ``P``.

Estimate: ``samples`` independent runs (each ``E * T`` Gaussian draws from dpkit's CSPRNG; the
``Q`` draw of a run is its ``P`` draw without the shift), the sample means
``m(eps)``, and for each direction the upper confidence bound of Hoeffding (1963, Theorem 1) for
the mean of ``[0, 1]`` variables: ``u(eps) = max{mu >= m : N kl(m, mu) <= ln(2 / beta)}`` with
``kl`` the Bernoulli relative entropy and ``beta = 1 - confidence``. The estimate is the smallest
``eps`` (bisection to relative ``1e-4``, taking the upper end) with both ``u(eps) <= delta``.

Confidence statement: let ``eps*`` be the true epsilon of the pair at ``delta``. The estimate is
below ``eps*`` only if at some ``eps < eps*`` with ``delta_PQ(eps) > delta`` (or the ``QP``
analogue) the bound ``u`` fell to ``delta`` or below; since ``m`` decreases in ``eps`` this
implies it did so at a fixed point just below ``eps*``, which has probability at most
``beta / 2`` per direction. So ``P(estimate >= eps*) >= confidence``.

Cost: the bound can certify ``delta`` only when ``samples >~ ln(2 / beta) / delta`` (with no
loss above ``eps`` at all, ``u = 1 - (beta/2)^{1/N}``); below that the estimate is infinite.
"""

from __future__ import annotations

import dataclasses
import math
from typing import ClassVar

import numpy as np
import numpy.typing as npt

from dpkit._numeric.validation import check_delta, check_integer, check_positive
from dpkit.accounting.batching import BatchScheme, dpsgd_bounds
from dpkit.errors import PrivacyParameterError
from dpkit.events import Neighbouring
from dpkit.noise import RandomSource, resolve_source
from dpkit.noise.samplers import gaussian

__all__ = ["MonteCarloEpsilon", "balls_in_bins_estimate", "kl_upper_confidence"]

FloatArray = npt.NDArray[np.float64]
_CHUNK = 1 << 21  # Gaussian draws held in memory at once


@dataclasses.dataclass(frozen=True)
class MonteCarloEpsilon:
    """An *estimate* of epsilon at ``delta`` (``estimate >= true`` with probability at least
    ``confidence`` over dpkit's draws), beside the scheme's proven ``upper`` and ``lower``
    bounds. ``is_guarantee`` is always False: the estimate is not a proof."""

    scheme: str
    relation: Neighbouring
    steps: int
    epochs: int
    delta: float
    estimate: float
    confidence: float
    samples: int
    upper: float
    lower: float
    is_guarantee: ClassVar[bool] = False

    def statement(self) -> str:
        """One sentence for people, with the numbers rounded."""
        return (
            f"estimated epsilon {self.estimate:.3g} at delta {self.delta:g} (Monte Carlo, "
            f"{self.samples} runs: at least the true value with probability "
            f"{self.confidence:g}; not a proof); proven upper bound {self.upper:.3g}, "
            f"lower bound {self.lower:.3g}"
        )


def _kl(p: float, q: float) -> float:
    """Bernoulli relative entropy ``kl(p, q)`` (0 log 0 = 0)."""
    out = 0.0
    if p > 0.0:
        out += p * math.log(p / q)
    if p < 1.0:
        out += (1.0 - p) * math.log((1.0 - p) / (1.0 - q))
    return out


def kl_upper_confidence(mean: float, samples: int, log_inv_beta: float) -> float:
    """``max{mu in [mean, 1] : samples * kl(mean, mu) <= log_inv_beta}`` by bisection, the upper
    end returned (so the bound is never too small); Hoeffding 1963, Theorem 1: for ``N``
    independent ``[0, 1]`` variables of mean ``mu``, ``P(mean <= mu - t) <=
    exp(-N kl(mu - t, mu))``."""
    if mean >= 1.0:
        return 1.0
    budget = log_inv_beta / samples
    lo, hi = mean, 1.0
    for _ in range(200):
        mid = 0.5 * (lo + hi)
        if mid <= lo or mid >= hi:
            break
        if _kl(mean, mid) <= budget:
            lo = mid
        else:
            hi = mid
    return hi


def _losses(sigma: float, t: int, epochs: int, samples: int, source: RandomSource) -> FloatArray:
    """Privacy losses ``L`` of ``samples`` runs drawn under Q, returned as the pair of arrays
    (losses under P, losses under Q) stacked: row 0 with the record in batch 1, row 1 without."""
    out = np.zeros((2, samples))
    inv = 1.0 / (2.0 * sigma * sigma)
    rows = max(1, _CHUNK // t)
    for start in range(0, samples, rows):
        k = min(rows, samples - start)
        for _ in range(epochs):
            x = gaussian(source, sigma=sigma, size=(k, t))
            z = (2.0 * x - 1.0) * inv  # ln of the likelihood ratio of each coordinate
            rest = z[:, 1:]
            m = np.maximum(np.max(rest, axis=1), np.maximum(z[:, 0], z[:, 0] + 2.0 * inv))
            base = np.sum(np.exp(rest - m[:, None]), axis=1)
            ln_t = math.log(t)
            q_loss = m + np.log(base + np.exp(z[:, 0] - m)) - ln_t
            p_loss = m + np.log(base + np.exp(z[:, 0] + 2.0 * inv - m)) - ln_t  # x_1 + 1
            out[0, start : start + k] += p_loss
            out[1, start : start + k] += q_loss
    return out


def balls_in_bins_estimate(
    scheme: BatchScheme,
    *,
    noise_multiplier: float,
    delta: float,
    steps: int | None = None,
    epochs: float | None = None,
    samples: int = 200_000,
    confidence: float = 0.99,
    source: RandomSource | None = None,
) -> MonteCarloEpsilon:
    """Monte Carlo estimate of epsilon of balls-in-bins DP-SGD (module docstring), with the
    proven upper and the lower bound of :func:`dpsgd_bounds` beside it.

    ``steps`` or ``epochs`` as in :func:`dpsgd_bounds`; a partial epoch counts as a whole one
    (more loss). ``source``: dpkit's CSPRNG by default (a seeded source needs
    ``insecure=True``). The estimate is infinite when ``samples`` are too few for ``delta``.
    """
    if not isinstance(scheme, BatchScheme) or scheme.name != "balls_in_bins":
        raise PrivacyParameterError(
            f"the Monte Carlo estimate is for scheme 'balls_in_bins', got {scheme!r}"
        )
    sigma = check_positive(noise_multiplier, "noise_multiplier")
    d = check_delta(delta)
    if not d > 0.0:
        raise PrivacyParameterError("the estimate needs a positive delta; give delta > 0")
    n = check_integer(samples, name="samples", minimum=100)
    conf = check_positive(confidence, "confidence")
    if not 0.0 < conf < 1.0:
        raise PrivacyParameterError(f"confidence must lie in (0, 1), got {confidence!r}")
    bounds = dpsgd_bounds(scheme, noise_multiplier=sigma, delta=d, steps=steps, epochs=epochs)
    _, charged = scheme.epochs_of(bounds.steps)
    t = scheme.steps_per_epoch
    common = {
        "scheme": scheme.name,
        "relation": scheme.relation,
        "steps": bounds.steps,
        "epochs": charged,
        "delta": d,
        "confidence": conf,
        "samples": n,
        "upper": bounds.upper,
        "lower": bounds.lower,
    }
    if charged == 0:
        return MonteCarloEpsilon(estimate=0.0, **common)  # type: ignore[arg-type]
    loss = _losses(sigma, t, charged, n, resolve_source(source))
    p_loss, q_loss = loss[0], loss[1]
    log_inv = math.log(2.0 / (1.0 - conf))

    def fits(eps: float) -> bool:
        with np.errstate(over="ignore"):
            m_pq = float(np.mean(np.maximum(0.0, -np.expm1(eps - p_loss))))
            m_qp = float(np.mean(np.maximum(0.0, -np.expm1(eps + q_loss))))
        return (
            max(kl_upper_confidence(m_pq, n, log_inv), kl_upper_confidence(m_qp, n, log_inv)) <= d
        )

    if fits(0.0):
        est = 0.0
    else:
        hi = max(1.0, 2.0 * bounds.upper) if math.isfinite(bounds.upper) else 64.0
        if not fits(hi):
            est = math.inf
        else:
            lo = 0.0
            while hi - lo > 1e-4 * hi:
                mid = 0.5 * (lo + hi)
                if fits(mid):
                    hi = mid
                else:
                    lo = mid
            est = hi
    return MonteCarloEpsilon(estimate=est, **common)  # type: ignore[arg-type]
