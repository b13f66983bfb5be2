"""DP-SGD accounting: epsilon of a training run, and the noise needed for a target epsilon.

DP-SGD with Poisson sampling is ``steps`` compositions of the Poisson-subsampled Gaussian
mechanism ``M(D) = sum_{x in batch} clip(grad(x)) + N(0, (sigma C)^2 I)`` with sampling rate
``q``; per step the dominating pairs under add/remove neighbours are
``((1 - q) N(0, s^2) + q N(1, s^2), N(0, s^2))`` and the reverse mixture pair, with ``s`` the
noise multiplier (Abadi et al. 2016; the dominating pairs of Poisson subsampling of Zhu, Dong
and Wang 2022).

Methods:

* ``"pld"`` (default): :class:`~dpkit.accounting.pld.PldAccountant`, a numeric privacy-loss
  distribution with pessimistic discretisation. An **upper bound**, tight to about 1e-4 in
  epsilon for typical runs (error analysis in :mod:`dpkit.accounting.pld`).
* ``"rdp"``: Renyi DP (Mironov, Talwar and Zhang 2019) converted with Balle et al. 2020,
  Theorem 21. An **upper bound**, usually looser than PLD.
* ``"gdp-clt"``: the central limit theorem of Dong, Roth and Su (2022, Section 5) as used by
  Bu, Dong, Long and Su (2020): the run is approximately ``mu``-GDP with
  ``mu = q sqrt(steps (e^{1/s^2} - 1))`` (:func:`dpkit.accounting.gdp.dpsgd_gdp_mu`), and
  ``epsilon`` is read off the ``mu``-GDP curve. An **estimate, not a bound**: the CLT can be
  optimistic (it underestimates epsilon when ``q`` is not small or ``steps`` not large).
"""

from __future__ import annotations

import math
from typing import Literal

from dpkit._numeric.validation import (
    check_delta,
    check_epsilon,
    check_integer,
    check_positive,
    check_probability,
)
from dpkit.accounting.events import GaussianEvent, PoissonSampledEvent
from dpkit.accounting.pld import PldAccountant
from dpkit.errors import PrivacyParameterError

__all__ = ["METHODS", "dpsgd_epsilon", "dpsgd_noise_multiplier"]

Method = Literal["pld", "rdp", "gdp-clt"]
METHODS: tuple[str, ...] = ("pld", "rdp", "gdp-clt")

_SIGMA_MIN = 1e-2
_SIGMA_MAX = 1e4


def _check_method(method: str) -> str:
    if method not in METHODS:
        raise PrivacyParameterError(f"method must be one of {METHODS}, got {method!r}")
    return method


def _epsilon(q: float, sigma: float, steps: int, delta: float, method: str) -> float:
    if steps == 0 or q == 0.0:
        return 0.0
    if method == "pld":
        acct = PldAccountant()
        acct.compose(PoissonSampledEvent(sampling_rate=q, event=GaussianEvent(sigma)), steps)
        return acct.get_epsilon(delta)
    if method == "rdp":
        from dpkit.accounting.rdp import dpsgd_rdp_epsilon

        return dpsgd_rdp_epsilon(
            sampling_rate=q, noise_multiplier=sigma, steps=steps, delta=delta
        )
    from dpkit import fdp
    from dpkit.accounting.gdp import dpsgd_gdp_mu

    if sigma < 0.03 or steps > 2**900:  # e^{1/sigma^2} or the step count beyond doubles
        return math.inf
    mu = dpsgd_gdp_mu(sampling_rate=q, noise_multiplier=sigma, steps=steps)
    if not math.isfinite(mu):
        return math.inf
    return fdp.gdp(mu).epsilon(delta)


def dpsgd_epsilon(
    *,
    sampling_rate: float,
    noise_multiplier: float,
    steps: int,
    delta: float,
    method: Method = "pld",
) -> float:
    """Epsilon at ``delta`` after ``steps`` Poisson-sampled Gaussian steps (add/remove).

    ``"pld"`` and ``"rdp"`` return upper bounds (rounded up); ``"gdp-clt"`` returns a CLT
    *estimate* that can be optimistic (see the module docstring). Example: ``q = 256/60000``,
    ``sigma = 1.1``, 60 epochs = ``round(60 * 60000 / 256) = 14062`` steps, ``delta = 1e-5``
    gives about 2.3817 by PLD.
    """
    q = check_probability(sampling_rate, name="sampling_rate")
    sigma = check_positive("noise_multiplier", noise_multiplier)
    n = check_integer(steps, name="steps", minimum=0)
    d = check_delta(delta)
    return _epsilon(q, sigma, n, d, _check_method(method))


def _safe_eps(q: float, sigma: float, steps: int, delta: float, method: str) -> float:
    """Epsilon, with failures of the numeric accountants (grids too large) read as infinity."""
    try:
        return _epsilon(q, sigma, steps, delta, method)
    except (PrivacyParameterError, OverflowError, MemoryError):
        return math.inf


def dpsgd_noise_multiplier(
    *,
    sampling_rate: float,
    steps: int,
    epsilon: float,
    delta: float,
    method: Method = "pld",
    rtol: float = 1e-3,
) -> float:
    """The smallest noise multiplier (to relative precision ``rtol``) with epsilon <= target.

    Epsilon decreases in the noise multiplier; a bracket ``lo < hi`` with ``eps(lo) > epsilon
    >= eps(hi)`` is found by doubling/halving, then bisected (geometrically) until
    ``hi / lo <= 1 + rtol``. The returned value is always ``hi``, the *safe* end, and it is
    re-checked (``eps(hi) <= epsilon``) before it is returned. With ``method="gdp-clt"`` the
    result inherits the CLT's possible optimism. Raises ``PrivacyParameterError`` when no noise
    multiplier up to 1e4 reaches the target (e.g. ``delta = 0``).
    """
    q = check_probability(sampling_rate, name="sampling_rate")
    n = check_integer(steps, name="steps", minimum=0)
    target = check_epsilon(epsilon)
    d = check_delta(delta)
    tol = check_positive("rtol", rtol)
    m = _check_method(method)
    if n == 0 or q == 0.0:
        return _SIGMA_MIN
    if d == 0.0:
        raise PrivacyParameterError(
            "the subsampled Gaussian mechanism is never (epsilon, 0)-DP: delta must be positive"
        )

    def ok(s: float) -> bool:
        return _safe_eps(q, s, n, d, m) <= target

    hi = 1.0
    if ok(hi):
        lo = hi / 2.0
        while ok(lo):
            hi = lo
            if lo <= _SIGMA_MIN:
                return hi
            lo = lo / 2.0
    else:
        lo = hi
        hi = 2.0
        while not ok(hi):
            lo = hi
            hi *= 2.0
            if hi > _SIGMA_MAX:
                raise PrivacyParameterError(
                    f"no noise multiplier up to {_SIGMA_MAX} gives epsilon <= {target} at "
                    f"delta = {d} with method {m!r}"
                )
    while hi / lo > 1.0 + tol:
        mid = math.sqrt(lo * hi)
        if ok(mid):
            hi = mid
        else:
            lo = mid
    if not ok(hi):  # pragma: no cover - hi was only ever set to values that passed
        raise PrivacyParameterError("calibration failed its final check")
    return hi
