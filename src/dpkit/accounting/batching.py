"""DP-SGD accounting for each way of forming batches, with the neighbouring relation it holds for.

A DP-SGD step releases ``sum_{x in batch} clip_C(grad(x)) + N(0, (sigma C)^2 I)``. How the batch
is formed decides how much privacy a run spends. Each scheme below gets the tightest *proven*
upper bound dpkit knows and a *lower bound* (a pair of datasets and a test that attain it,
for the threat model in which every noisy gradient is released), so that the gap is visible.
Both hold for the relation named in the scheme's :attr:`BatchScheme.relation`.

``poisson`` (add/remove one record)
    Every record joins each batch independently with ``q = batch_size / dataset_size``. The
    Poisson-subsampled Gaussian pair of Zhu, Dong and Wang (2022) composed by PLD; the pair is
    attained (all other gradients zero), so upper and lower differ by the grid's error only.
``truncated_poisson`` (add/remove)
    Poisson, then a batch larger than ``max_batch_size`` is cut to a uniformly random subset of
    that size. The run is within total variation ``eta = steps * P(Bin(n + 1, q) > B)`` of the
    Poisson run on every dataset (the two coincide unless some batch is cut; ``n + 1`` covers
    the larger neighbour), so ``P'(S) <= P(S) + eta <= e^eps Q(S) + delta_P + eta
    <= e^eps Q'(S) + delta_P + (1 + e^eps) eta``: the upper bound is the smallest ``eps`` with
    ``delta_P(eps) + (1 + e^eps) eta <= delta``. Conversely the Poisson run is within ``eta`` of
    the truncated one, so ``eps_P(delta + (1 + e^{eps_upper}) eta)`` (its PLD lower bound) is a
    lower bound.
``fixed_size`` (replace-one)
    Each step draws exactly ``batch_size`` records uniformly without replacement. A batch that
    draws the replaced record displaces another one, so the dominating pair of sampling without
    replacement under replace-one (Zhu, Dong and Wang 2022; Balle, Barthe and Gaboardi 2018 for
    the amplification itself) is ``(1 - q) N(0, s^2) + q N(-2, s^2)`` against ``N(0, s^2)`` and
    its reverse (``s = sigma``, in units of C): the Poisson-subsampled Gaussian pair at noise
    multiplier ``sigma / 2``, composed by PLD. It is attained: every other record's gradient is
    ``+C u`` and the replaced record's ``-C u`` against ``+C u``. (With all other gradients zero
    the symmetric pair ``(1 - q) N(0, s^2) + q N(-1, s^2)`` against ``(1 - q) N(0, s^2) +
    q N(1, s^2)`` is attained, but it is not the worst case.)
``cyclic`` (replace-one)
    The records in a fixed order, ``dataset_size // batch_size`` batches per epoch (the
    remainder is never used). A record is in exactly one batch per epoch, so ``E`` epochs are
    ``E`` Gaussian mechanisms of replace-one sensitivity ``2C``: exactly
    ``mu``-GDP with ``mu = 2 sqrt(E) / sigma`` (Dong, Roth and Su 2022, Corollary 3.3). Attained,
    so upper equals lower.
``shuffle`` (replace-one)
    A fresh uniformly random permutation each epoch, cut into batches as for ``cyclic``. Upper
    bound: the same ``2 sqrt(E) / sigma``-GDP, proven without any amplification (a record is in
    at most one batch per epoch). Lower bound: the construction of Chua et al. (ICML 2024,
    "How private are DP-SGD implementations?"): the replaced record's gradient is ``+C u``
    against ``-C u``, all others zero, so one epoch shows ``T`` batch sums of which one
    (uniformly placed) is shifted by ``+1`` against ``-1`` (in units of ``C``); the adversary
    keeps the largest batch sum, binned (post-processing, so a lower bound stays a lower
    bound), and the ``E`` independent epochs compose. Chua et al. show the true value sits
    well above the Poisson figure in practical regimes; the gap to the upper bound is open.
``user_poisson`` (add/remove one person)
    People join each batch independently with ``q = batch_size / dataset_size`` (counted in
    people), and at most ``examples_per_user`` of a chosen person's examples are used, each
    clipped to ``C``; one person moves the sum by at most ``k C``, so it is Poisson DP-SGD at
    noise multiplier ``sigma / k`` (rounded down), attained when a person's examples point the
    same way.

``balls_in_bins`` (add/remove one record)
    Each epoch has ``T = dataset_size // batch_size`` batches (bins) and every record is put in
    one of them independently and uniformly at random (Chua et al., "Balls-and-Bins Sampling
    for DP-SGD", AISTATS 2025), so batch sizes vary around ``n / T >= b``. Upper bound: a record
    is in exactly one batch per epoch, so given where the other records went, the run is a
    mixture over the record's bin ``j`` of pairs ``(P_j, Q)`` in which ``P_j`` against ``Q`` is
    ``E`` Gaussian mechanisms of add/remove sensitivity ``C``; by joint convexity of the
    hockey-stick divergence the mixture is no worse than the worst ``j``, which is exactly
    ``mu``-GDP with ``mu = sqrt(E) / sigma`` (Dong, Roth and Su 2022). This is proven but
    ignores amplification. The tight accounting of Chua et al. is a Monte Carlo *estimate*
    with a confidence statement, not a proof; dpkit computes it separately, labelled as an
    estimate, in :func:`dpkit.accounting.montecarlo.balls_in_bins_estimate`. Lower bound: the
    shuffle construction for add/remove: the added record (gradient ``+C u``, all others
    zero) shifts one uniformly chosen batch sum of the ``T`` by ``+1`` against none; the
    adversary keeps the largest batch sum, binned, and the ``E`` epochs compose. Chua et al.
    (2025) report that balls-in-bins amplifies about as well as Poisson, so the true value is
    expected near the lower bound; the gap is open.
"""

from __future__ import annotations

import dataclasses
import math
from fractions import Fraction

import numpy as np
from scipy import special

from dpkit._loss.grid import (
    Factor,
    NoFiniteBoundError,
    automatic_step,
    compose_factors,
    step_for_mode,
)
from dpkit._loss.pairs import atom_pair
from dpkit._numeric.rounding import div_down, up
from dpkit._numeric.validation import check_delta, check_integer, check_positive
from dpkit.accounting.pld import PldAccountant
from dpkit.errors import PrivacyParameterError
from dpkit.events import (
    DpEvent,
    GaussianEvent,
    Neighbouring,
    PoissonSampledEvent,
    SampledWithoutReplacementEvent,
    SelfComposedEvent,
)

__all__ = ["SCHEMES", "BatchScheme", "DpsgdBounds", "dpsgd_bounds"]

SCHEMES: tuple[str, ...] = (
    "poisson",
    "truncated_poisson",
    "fixed_size",
    "shuffle",
    "cyclic",
    "user_poisson",
    "balls_in_bins",
)
_EPOCH_SCHEMES = ("shuffle", "cyclic", "balls_in_bins")
_BINS = 2000  # bins of the largest batch sum in the shuffle lower bound


@dataclasses.dataclass(frozen=True, kw_only=True)
class BatchScheme:
    """How batches are formed; validated on construction.

    ``dataset_size`` counts records (people for ``user_poisson``); ``batch_size`` is the expected
    batch size for the Poisson schemes and the exact one otherwise. ``max_batch_size`` is
    required by ``truncated_poisson`` only, ``examples_per_user`` by ``user_poisson`` only.
    """

    name: str
    dataset_size: int
    batch_size: int
    max_batch_size: int | None = None
    examples_per_user: int | None = None

    def __post_init__(self) -> None:
        if self.name not in SCHEMES:
            raise PrivacyParameterError(f"scheme must be one of {SCHEMES}, got {self.name!r}")
        n = check_integer(self.dataset_size, name="dataset_size", minimum=1)
        b = check_integer(self.batch_size, name="batch_size", minimum=1)
        if b > n:
            raise PrivacyParameterError(
                f"batch_size ({b}) must not exceed dataset_size ({n}); lower the batch size"
            )
        object.__setattr__(self, "dataset_size", n)
        object.__setattr__(self, "batch_size", b)
        needs_max = self.name == "truncated_poisson"
        if needs_max != (self.max_batch_size is not None):
            raise PrivacyParameterError(
                "give max_batch_size with scheme 'truncated_poisson', and only with it"
            )
        if self.max_batch_size is not None:
            object.__setattr__(
                self,
                "max_batch_size",
                check_integer(self.max_batch_size, name="max_batch_size", minimum=1),
            )
        needs_k = self.name == "user_poisson"
        if needs_k != (self.examples_per_user is not None):
            raise PrivacyParameterError(
                "give examples_per_user with scheme 'user_poisson', and only with it"
            )
        if self.examples_per_user is not None:
            object.__setattr__(
                self,
                "examples_per_user",
                check_integer(self.examples_per_user, name="examples_per_user", minimum=1),
            )

    @property
    def relation(self) -> Neighbouring:
        """The neighbouring relation the bounds hold for (user_poisson: one person's data)."""
        if self.name in ("fixed_size", "shuffle", "cyclic"):
            return Neighbouring.REPLACE
        return Neighbouring.ADD_REMOVE

    @property
    def sampling_rate(self) -> float:
        """``batch_size / dataset_size`` rounded up."""
        return up(Fraction(self.batch_size, self.dataset_size))

    @property
    def steps_per_epoch(self) -> int:
        """``dataset_size // batch_size`` for the epoch schemes (the bins of balls-in-bins);
        ``ceil(n / b)`` in expectation otherwise (an epoch of the sampled schemes is ``1/q``
        steps)."""
        if self.name in _EPOCH_SCHEMES:
            return self.dataset_size // self.batch_size
        return math.ceil(Fraction(self.dataset_size, self.batch_size))

    def steps(self, epochs: float) -> int:
        """Steps of ``epochs`` epochs, rounded up: ``ceil(epochs n / b)`` for the sampled
        schemes, ``ceil(epochs) * (n // b)`` for shuffle, cyclic and balls-in-bins (a partial
        epoch is charged as a whole one)."""
        e = check_positive(epochs, "epochs")
        if self.name in _EPOCH_SCHEMES:
            return math.ceil(e) * self.steps_per_epoch
        return max(1, math.ceil(Fraction(e) * Fraction(self.dataset_size, self.batch_size)))

    def epochs_of(self, steps: int) -> tuple[int, int]:
        """``(full, charged)`` epochs of ``steps`` steps of shuffle/cyclic/balls-in-bins:
        ``floor`` for the lower bound, ``ceil`` for the upper bound."""
        t = self.steps_per_epoch
        return steps // t, -(-steps // t)

    def event(self, noise_multiplier: float, steps: int) -> DpEvent:
        """The dpkit event charged for ``steps`` steps (the upper bound; truncated Poisson adds
        its total-variation term to delta on top, see :func:`dpsgd_bounds`)."""
        sigma = check_positive(noise_multiplier, "noise_multiplier")
        n = check_integer(steps, name="steps", minimum=0)
        if self.name in ("poisson", "truncated_poisson"):
            one: DpEvent = PoissonSampledEvent(
                sampling_rate=self.sampling_rate, event=GaussianEvent(noise_multiplier=sigma)
            )
            return SelfComposedEvent(event=one, count=n)
        if self.name == "user_poisson":
            assert self.examples_per_user is not None
            m = div_down(sigma, float(self.examples_per_user))
            one = PoissonSampledEvent(
                sampling_rate=self.sampling_rate, event=GaussianEvent(noise_multiplier=m)
            )
            return SelfComposedEvent(event=one, count=n)
        half = sigma / 2.0  # replace-one sensitivity 2C: multiplier sigma / 2 (exact)
        if self.name == "fixed_size":
            one = SampledWithoutReplacementEvent(
                sample_size=self.batch_size,
                dataset_size=self.dataset_size,
                event=GaussianEvent(noise_multiplier=half, neighbouring=Neighbouring.REPLACE),
            )
            return SelfComposedEvent(event=one, count=n)
        _, charged = self.epochs_of(n)
        if self.name == "balls_in_bins":  # add/remove sensitivity C: multiplier sigma
            return SelfComposedEvent(event=GaussianEvent(noise_multiplier=sigma), count=charged)
        one = GaussianEvent(noise_multiplier=half, neighbouring=Neighbouring.REPLACE)
        return SelfComposedEvent(event=one, count=charged)

    def truncation_mass(self, steps: int) -> float:
        """``eta = steps * P(Bin(n + 1, q) > max_batch_size)``, rounded up (0 for other schemes).

        The binomial tail comes from SciPy's regularised incomplete beta function (relative
        error far below ``1e-9``); it is enlarged by ``1e-9`` relative and one smallest normal
        double before the product is rounded up.
        """
        if self.max_batch_size is None or steps == 0:
            return 0.0
        from scipy import stats  # deferred: scipy.stats costs ~0.6 s to import

        tail = float(stats.binom.sf(self.max_batch_size, self.dataset_size + 1, self.sampling_rate))
        tail = tail * (1.0 + 1e-9) + 2.0**-1022
        return min(1.0, up(Fraction(steps) * Fraction(tail)))


@dataclasses.dataclass(frozen=True)
class DpsgdBounds:
    """Epsilon of a run: a proven ``upper`` bound and a ``lower`` bound, at ``delta``.

    ``upper_is_tight`` says whether the dominating pair is attained (then ``lower`` differs from
    ``upper`` only by numerical error); otherwise the gap is a real gap in knowledge.
    ``truncation_mass`` is the total-variation term of truncated Poisson (0 otherwise).
    """

    scheme: str
    relation: Neighbouring
    steps: int
    delta: float
    upper: float
    lower: float
    upper_is_tight: bool
    truncation_mass: float = 0.0


def _pld(event: DpEvent) -> PldAccountant:
    acct = PldAccountant()
    acct.compose(event)
    return acct


def _truncated_upper(acct: PldAccountant, eta: float, delta: float) -> float:
    """Smallest eps (certified) with ``delta_P(eps) + (1 + e^eps) eta <= delta``; inf if none.

    ``delta_P`` decreases and ``(1 + e^eps) eta`` increases, both convex, so the points that
    hold form an interval: scan up from ``eps_P(delta)`` (which fails) in steps of
    ``0.02 (1 + eps)`` until one holds (inf once ``(1 + e^eps) eta`` alone exceeds delta), then
    bisect between the last failure and it."""
    if not 2.0 * eta < delta:
        return math.inf

    def ok(e: float) -> bool:
        extra = (1.0 + math.exp(min(e, 700.0))) * eta * (1.0 + 1e-12)
        return acct.get_delta(e) + extra <= delta

    if ok(0.0):
        return 0.0
    lo = hi = acct.get_epsilon(delta)
    if not math.isfinite(hi):
        return math.inf
    while not ok(hi):
        if (1.0 + math.exp(min(hi, 700.0))) * eta > delta:
            return math.inf
        lo, hi = hi, hi + 0.02 * (1.0 + hi)
    while hi - lo > 1e-6 * hi:  # bisect; hi is the certified end
        mid = 0.5 * (lo + hi)
        if ok(mid):
            hi = mid
        else:
            lo = mid
    return hi


def _max_statistic_pair(
    scheme: BatchScheme, sigma: float, shift_p: float, shift_q: float
) -> tuple[np.ndarray, np.ndarray]:
    """Bin masses of the largest of the ``T`` batch sums of one epoch under two datasets.

    The record is in batch ``t`` with probability ``b / n`` each (absent with ``r / n``, the
    unused remainder; for balls-in-bins ``1 / T`` each, never absent), its batch sum shifted by
    ``shift``; all other batch sums are
    ``N(0, sigma^2)``. CDF of the maximum: ``Phi(x/s)^(T-1) [T w Phi((x - m)/s)] + (1 - T w)
    Phi(x/s)^T`` with ``w = b / n``. Bins: ``(-inf, x_0], (x_0, x_1], ..., (x_K, inf)``.
    """
    n, b = scheme.dataset_size, scheme.batch_size
    t = n // b
    w_in = 1.0 if scheme.name == "balls_in_bins" else t * b / n
    z_lo = float(special.ndtri(1e-14 ** (1.0 / t)))
    z_hi = -float(special.ndtri(1e-14 / t))
    xs = np.linspace(sigma * z_lo - 1.0, sigma * z_hi + 1.0, _BINS + 1)

    def log_cdf(m: float) -> np.ndarray:
        base = (t - 1) * special.log_ndtr(xs / sigma)
        a = math.log(w_in) + base + special.log_ndtr((xs - m) / sigma) if w_in > 0 else None
        c = t * special.log_ndtr(xs / sigma)
        if w_in >= 1.0 or a is None:
            return np.asarray(a if a is not None else c)
        return np.asarray(np.logaddexp(a, math.log1p(-w_in) + c))

    out = []
    for m in (shift_p, shift_q):
        lc = log_cdf(m)
        cdf = np.exp(lc)
        sf = -np.expm1(lc)
        inner = np.where(cdf[1:] <= 0.5, cdf[1:] - cdf[:-1], sf[:-1] - sf[1:])
        masses = np.concatenate(([cdf[0]], np.maximum(inner, 0.0), [sf[-1]]))
        out.append(masses)
    return out[0], out[1]


def _shuffle_lower(scheme: BatchScheme, sigma: float, epochs: int, delta: float) -> float:
    """The lower bound of shuffle (shifts +1 against -1, replace-one) or balls-in-bins (+1
    against 0, add/remove) from the module docstring, by the grid's lower bound."""
    if epochs == 0:
        return 0.0
    other = 0.0 if scheme.name == "balls_in_bins" else -1.0
    p, q = _max_statistic_pair(scheme, sigma, 1.0, other)
    keep = (p > 0.0) & (q > 0.0)  # bins with no mass on one side are dropped (a sub-pair)
    p, q = p[keep], q[keep]
    loss = np.log(p) - np.log(q)
    forward = atom_pair(loss, p, 0.0)
    backward = atom_pair(-loss, q, 0.0)
    factors = {Factor(forward, backward): epochs}
    try:
        base, single_sd, width = automatic_step(factors)
        h = step_for_mode(base, single_sd, width, "tangent")
        r, a, _ = compose_factors(factors, "tangent", h)
    except NoFiniteBoundError:
        return 0.0
    eps = max(r.epsilon(delta, upper=False), a.epsilon(delta, upper=False))
    if not math.isfinite(eps):
        return 0.0
    return max(0.0, eps - 1e-9 * (1.0 + eps))  # bin masses carry double rounding: shave


def dpsgd_bounds(
    scheme: BatchScheme,
    *,
    noise_multiplier: float,
    delta: float,
    steps: int | None = None,
    epochs: float | None = None,
    with_lower: bool = True,
) -> DpsgdBounds:
    """Upper and lower epsilon at ``delta`` of a DP-SGD run under ``scheme``.

    Exactly one of ``steps`` and ``epochs`` (:meth:`BatchScheme.steps`). The upper bound is
    rounded up and proven for the scheme's relation; the lower bound is rounded down (see the
    module docstring for each scheme's argument). ``with_lower=False`` skips the lower bound
    (reported as the trivial 0), which is several times faster.
    """
    if not isinstance(scheme, BatchScheme):
        raise PrivacyParameterError(f"scheme must be a BatchScheme, got {scheme!r}")
    sigma = check_positive(noise_multiplier, "noise_multiplier")
    d = check_delta(delta)
    if (steps is None) == (epochs is None):
        raise PrivacyParameterError("give exactly one of steps and epochs")
    n = (
        scheme.steps(epochs)
        if epochs is not None
        else check_integer(steps, name="steps", minimum=0)
    )
    acct = _pld(scheme.event(sigma, n))
    eta = scheme.truncation_mass(n)
    if not with_lower:
        upper = (
            _truncated_upper(acct, eta, d)
            if scheme.name == "truncated_poisson"
            else acct.get_epsilon(d)
        )
        return DpsgdBounds(
            scheme=scheme.name,
            relation=scheme.relation,
            steps=n,
            delta=d,
            upper=upper,
            lower=0.0,
            upper_is_tight=False,
            truncation_mass=eta,
        )
    if scheme.name in _EPOCH_SCHEMES:
        upper = acct.get_epsilon(d)
        full, charged = scheme.epochs_of(n)
        if scheme.name == "cyclic":
            lower_acct = _pld(
                SelfComposedEvent(
                    event=GaussianEvent(
                        noise_multiplier=sigma / 2.0, neighbouring=Neighbouring.REPLACE
                    ),
                    count=full,
                )
            )
            lower = lower_acct.get_epsilon_bounds(d)[0]
        else:
            lower = _shuffle_lower(scheme, sigma, full, d)
        tight = scheme.name == "cyclic" and full == charged
    elif scheme.name == "truncated_poisson":
        upper = _truncated_upper(acct, eta, d)
        if math.isfinite(upper):
            d_low = d + (1.0 + math.exp(min(upper, 700.0))) * eta
            lower = acct.get_epsilon_bounds(min(d_low, 1.0))[0] if d_low < 1.0 else 0.0
        else:
            lower = 0.0
        tight = False
    else:
        lower, _, upper = acct.get_epsilon_bounds(d)
        tight = True
    return DpsgdBounds(
        scheme=scheme.name,
        relation=scheme.relation,
        steps=n,
        delta=d,
        upper=upper,
        lower=min(lower, upper),
        upper_is_tight=tight,
        truncation_mass=eta,
    )
