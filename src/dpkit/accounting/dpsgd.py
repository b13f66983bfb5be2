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

Schedules: give the sampling rate either as ``sampling_rate`` or as ``batch_size`` and
``dataset_size`` (``q = batch_size / dataset_size``, the expected batch size of Poisson
sampling over the dataset size), and the length either as ``steps`` or as ``epochs``. An epoch
is ``1/q`` steps in expectation, and the number of steps is rounded **up**,
``steps = ceil(epochs / q)`` (never fewer steps than the run makes): computed exactly as
``ceil(epochs * dataset_size / batch_size)`` from sizes, and from a floating-point
``sampling_rate`` with a relative ``1e-9`` forgiven so that the representation error of ``q``
does not add a step (``epochs = 7``, ``q = 0.7`` gives 10). The command line
``dpkit account dpsgd`` uses the same rule (:func:`dpsgd_schedule`).

Batching schemes: ``scheme="poisson"`` (the default) is the analysis above. Other values
(``"truncated_poisson"``, ``"fixed_size"``, ``"shuffle"``, ``"cyclic"``, ``"user_poisson"``,
``"balls_in_bins"``) are
accounted by :mod:`dpkit.accounting.batching` with the PLD method, or with ``"rdp"`` (all but
``"truncated_poisson"``: the RDP accountant on the same event; for ``"fixed_size"`` the bound of
Wang, Balle and Kasiviswanathan 2019, Theorem 9, see :mod:`dpkit.accounting.rdp`, which is
proven but looser than PLD, 1.5 to 6 times its epsilon in the benchmarks); they need
``batch_size`` and ``dataset_size`` (and ``max_batch_size`` / ``examples_per_user`` where the
scheme has one), return the proven *upper* bound for the scheme's neighbouring relation, and
:func:`dpkit.accounting.batching.dpsgd_bounds` gives the lower bound beside it.
"""

from __future__ import annotations

import functools
import math
from fractions import Fraction
from typing import Literal

from dpkit._numeric.rounding import up
from dpkit._numeric.search import SearchError, search
from dpkit._numeric.validation import (
    check_delta,
    check_epsilon,
    check_integer,
    check_positive,
    check_probability,
)
from dpkit.accounting.batching import BatchScheme, dpsgd_bounds
from dpkit.accounting.pld import PldAccountant
from dpkit.errors import PrivacyParameterError
from dpkit.events import GaussianEvent, PoissonSampledEvent

__all__ = ["METHODS", "dpsgd_epsilon", "dpsgd_noise_multiplier", "dpsgd_schedule"]

Method = Literal["pld", "rdp", "gdp-clt"]
METHODS: tuple[str, ...] = ("pld", "rdp", "gdp-clt")

_SIGMA_MIN = 1e-2
_SIGMA_MAX = 1e4


def _check_method(method: str) -> str:
    if method not in METHODS:
        raise PrivacyParameterError(f"method must be one of {METHODS}, got {method!r}")
    return method


def dpsgd_schedule(
    *,
    sampling_rate: float | None = None,
    batch_size: int | None = None,
    dataset_size: int | None = None,
    steps: int | None = None,
    epochs: float | None = None,
) -> tuple[float, int]:
    """``(sampling_rate, steps)`` of a DP-SGD run, validated (see the module docstring).

    Exactly one of ``sampling_rate`` and the pair ``(batch_size, dataset_size)``, and exactly
    one of ``steps`` and ``epochs``. ``q = batch_size / dataset_size`` is rounded up to a double
    (more privacy spent); ``steps = ceil(epochs / q)``.
    """
    sizes = (batch_size, dataset_size)
    if sampling_rate is not None and any(v is not None for v in sizes):
        raise PrivacyParameterError(
            "give either sampling_rate or batch_size and dataset_size, not both"
        )
    exact_q: Fraction | None = None
    if sampling_rate is not None:
        q = check_probability(sampling_rate, name="sampling_rate")
    elif batch_size is not None and dataset_size is not None:
        b = check_integer(batch_size, name="batch_size", minimum=1)
        n = check_integer(dataset_size, name="dataset_size", minimum=1)
        if b > n:
            raise PrivacyParameterError(f"batch_size ({b}) must not exceed dataset_size ({n})")
        exact_q = Fraction(b, n)
        q = up(exact_q)
    else:
        raise PrivacyParameterError("give sampling_rate, or both batch_size and dataset_size")
    if (steps is None) == (epochs is None):
        raise PrivacyParameterError("give exactly one of steps and epochs")
    if steps is not None:
        return q, check_integer(steps, name="steps", minimum=0)
    e = check_positive(epochs, "epochs")
    if q == 0.0:
        raise PrivacyParameterError("epochs need a positive sampling_rate (an epoch is 1/q steps)")
    if exact_q is not None:
        count = math.ceil(Fraction(e) / exact_q)
    else:
        ratio = Fraction(e) / Fraction(q)
        count = math.ceil(ratio * (1 - Fraction(1, 10**9)))
    return q, max(1, count)


def _scheme(
    scheme: str,
    method: str,
    batch_size: int | None,
    dataset_size: int | None,
    max_batch_size: int | None,
    examples_per_user: int | None,
    sampling_rate: float | None,
) -> BatchScheme | None:
    """The :class:`BatchScheme` for a non-Poisson scheme (None for plain Poisson)."""
    if scheme == "poisson" and max_batch_size is None and examples_per_user is None:
        return None
    if method != "pld" and (method != "rdp" or scheme == "truncated_poisson"):
        raise PrivacyParameterError(
            f"scheme {scheme!r} is accounted with method 'pld' (or 'rdp', except for "
            f"'truncated_poisson'), got {method!r}; use method='pld'"
        )
    if sampling_rate is not None or batch_size is None or dataset_size is None:
        raise PrivacyParameterError(
            f"scheme {scheme!r} needs batch_size and dataset_size (not sampling_rate)"
        )
    return BatchScheme(
        name=scheme,
        dataset_size=dataset_size,
        batch_size=batch_size,
        max_batch_size=max_batch_size,
        examples_per_user=examples_per_user,
    )


def _scheme_epsilon(sch: BatchScheme, sigma: float, delta: float, steps: int, method: str) -> float:
    """Proven upper bound of a run under ``sch``: PLD (:func:`dpsgd_bounds`) or, with
    ``method="rdp"``, the RDP accountant on the same event (:meth:`BatchScheme.event`)."""
    if method == "rdp":
        from dpkit.accounting.rdp import RdpAccountant

        acct = RdpAccountant()
        acct.compose(sch.event(sigma, steps))
        return acct.get_epsilon(check_delta(delta))
    return dpsgd_bounds(
        sch, noise_multiplier=sigma, delta=delta, steps=steps, with_lower=False
    ).upper


def _scheme_steps(sch: BatchScheme, steps: int | None, epochs: float | None) -> int:
    if (steps is None) == (epochs is None):
        raise PrivacyParameterError("give exactly one of steps and epochs")
    if epochs is not None:
        return sch.steps(epochs)
    return check_integer(steps, name="steps", minimum=0)


def _epsilon(q: float, sigma: float, steps: int, delta: float, method: str) -> float:
    if steps == 0 or q == 0.0:
        return 0.0
    if method == "pld":
        acct = PldAccountant()
        acct.compose(
            PoissonSampledEvent(sampling_rate=q, event=GaussianEvent(noise_multiplier=sigma)), steps
        )
        return acct.get_epsilon(delta)
    if method == "rdp":
        from dpkit.accounting.rdp import dpsgd_rdp_epsilon

        return dpsgd_rdp_epsilon(sampling_rate=q, noise_multiplier=sigma, steps=steps, delta=delta)
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
    noise_multiplier: float,
    delta: float,
    sampling_rate: float | None = None,
    steps: int | None = None,
    epochs: float | None = None,
    batch_size: int | None = None,
    dataset_size: int | None = None,
    method: Method = "pld",
    scheme: str = "poisson",
    max_batch_size: int | None = None,
    examples_per_user: int | None = None,
) -> float:
    """Epsilon at ``delta`` after a run of Poisson-sampled Gaussian steps (add/remove).

    With another ``scheme`` (module docstring), the proven upper bound of
    :func:`dpkit.accounting.batching.dpsgd_bounds` for that scheme and its relation.

    The schedule is ``sampling_rate`` or ``batch_size``/``dataset_size``, and ``steps`` or
    ``epochs`` (:func:`dpsgd_schedule`: ``steps = ceil(epochs / q)``). ``"pld"`` and ``"rdp"``
    return upper bounds (rounded up); ``"gdp-clt"`` returns a CLT *estimate* that can be
    optimistic (see the module docstring). Example: ``batch_size=256``, ``dataset_size=60000``,
    ``epochs=60`` is ``ceil(14062.5) = 14063`` steps at ``q = 256/60000``; with ``sigma = 1.1``
    and ``delta = 1e-5`` it gives about 2.38 by PLD.
    """
    sch = _scheme(
        scheme, method, batch_size, dataset_size, max_batch_size, examples_per_user, sampling_rate
    )
    if sch is not None:
        return _scheme_epsilon(
            sch,
            check_positive(noise_multiplier, "noise_multiplier"),
            delta,
            _scheme_steps(sch, steps, epochs),
            _check_method(method),
        )
    q, n = dpsgd_schedule(
        sampling_rate=sampling_rate,
        batch_size=batch_size,
        dataset_size=dataset_size,
        steps=steps,
        epochs=epochs,
    )
    sigma = check_positive(noise_multiplier, "noise_multiplier")
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
    epsilon: float,
    delta: float,
    sampling_rate: float | None = None,
    steps: int | None = None,
    epochs: float | None = None,
    batch_size: int | None = None,
    dataset_size: int | None = None,
    method: Method = "pld",
    rtol: float = 1e-3,
    scheme: str = "poisson",
    max_batch_size: int | None = None,
    examples_per_user: int | None = None,
) -> float:
    """The smallest noise multiplier (to relative precision ``rtol``) with epsilon <= target.

    Epsilon decreases in the noise multiplier; a bracket ``lo < hi`` with ``eps(lo) > epsilon
    >= eps(hi)`` is found by doubling/halving from 1 (down to 1e-2, up to 1e4), then bisected by
    :func:`dpkit._numeric.search.search` until ``hi - lo <= rtol * hi``. The returned value is
    always ``hi``, the *safe* end: ``eps(hi) <= epsilon`` was evaluated there. With
    ``method="gdp-clt"`` the result inherits the CLT's possible optimism. Raises
    ``PrivacyParameterError`` when no noise multiplier up to 1e4 reaches the target (e.g.
    ``delta = 0``). The schedule and ``scheme`` are given as in :func:`dpsgd_epsilon`.
    """
    target = check_epsilon(epsilon)
    d = check_delta(delta)
    tol = check_positive(rtol, "rtol")
    m = _check_method(method)
    sch = _scheme(
        scheme, m, batch_size, dataset_size, max_batch_size, examples_per_user, sampling_rate
    )
    if sch is not None:
        n = _scheme_steps(sch, steps, epochs)
        q = sch.sampling_rate

        def eps_of(s: float) -> float:
            try:
                return _scheme_epsilon(sch, s, d, n, m)
            except (PrivacyParameterError, OverflowError, MemoryError):
                return math.inf
    else:
        q, n = dpsgd_schedule(
            sampling_rate=sampling_rate,
            batch_size=batch_size,
            dataset_size=dataset_size,
            steps=steps,
            epochs=epochs,
        )

        def eps_of(s: float) -> float:
            return _safe_eps(q, s, n, d, m)

    if n == 0 or q == 0.0:
        return _SIGMA_MIN
    if d == 0.0:
        raise PrivacyParameterError(
            "the subsampled Gaussian mechanism is never (epsilon, 0)-DP: delta must be positive"
        )

    @functools.lru_cache(maxsize=8)  # each evaluation is a whole accounting run
    def ok(s: float) -> bool:
        return eps_of(s) <= target

    what = "DP-SGD noise search"
    if ok(1.0):  # halve lo until it fails; once a lo <= _SIGMA_MIN holds, return it
        return search(
            ok, 0.5, 1.0, holds="above", expand="down", limit=_SIGMA_MIN / 2.0, rtol=tol, what=what
        )
    try:
        return search(
            ok, 1.0, 2.0, holds="above", expand="up", limit=_SIGMA_MAX, rtol=tol, what=what
        )
    except SearchError:
        raise PrivacyParameterError(
            f"no noise multiplier up to {_SIGMA_MAX} gives epsilon <= {target} at "
            f"delta = {d} with method {m!r}"
        ) from None
