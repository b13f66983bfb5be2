"""The audit: sample, choose one test on the selection half, bound its errors on the other half.

Procedure (Ding et al., "Detecting violations of differential privacy", CCS 2018; Jagielski,
Ullman and Oprea, "Auditing differentially private machine learning", NeurIPS 2020; Lu et al.,
"A general framework for auditing differentially private machine learning", NeurIPS 2022)
-----------------------------------------------------------------------------------------
1. For every distinct input x among the candidate pairs, draw ``samples`` independent outputs of
   M(x). A random permutation drawn from the :class:`~dpkit.noise.RandomSource` splits each
   input's outputs into a *selection* half (``floor(samples / 2)``), itself cut into a *fit*
   quarter and a *screen* quarter, and an *evaluation* half.
2. On the selection halves only, every tester proposes events S for every pair (x, x') from the
   fit quarters, in two orientations each: the test rejecting "M(x)" on S has errors
   ``(alpha, beta) = (P_x(S), P_x'(S^c))``, the one rejecting on S^c has ``(P_x(S^c),
   P_x'(S))``. The screen quarters estimate these errors honestly (a tester that ranks
   categories by their observed ratio would otherwise grade its own homework); the audit turns
   each estimate into the Clopper-Pearson upper bounds the evaluation half would give (first a
   Bonferroni-level upper bound over the family on the screen quarter, against the winner's
   curse, then the bound at the evaluation sample size) and scores them with the objective: the
   epsilon lower bound at the target delta, the mu lower bound for a mu-GDP claim, or the margin
   below the claimed curve for a general trade-off claim. The single best (pair, tester, event,
   orientation) is kept.
3. On the evaluation halves, which played no part in the choice, the audit counts the chosen
   event and computes one-sided Clopper-Pearson upper bounds ``alpha_u`` and ``beta_u`` at level
   ``1 - g/2`` each (g = 1 - confidence). By the union bound both hold together with probability
   at least ``1 - g``. Exactly one test is evaluated, so no further multiple-testing correction is
   needed however many pairs, testers and events were screened in step 2.
4. From ``(alpha_u, beta_u)``: ``epsilon >= max(ln((1 - delta - alpha_u) / beta_u),
   ln((1 - delta - beta_u) / alpha_u))`` (Kairouz, Oh and Viswanath, ICML 2015, Theorem 2.1) and
   ``mu >= -Phi^{-1}(alpha_u) - Phi^{-1}(beta_u)`` (Dong, Roth and Su, JRSS-B 2022), each with
   confidence ``1 - g``. A claim f is reported "violated" only when ``beta_u < f(alpha_u)`` or
   ``alpha_u < f(beta_u)``, i.e. only when the confidence bound proves it.

The empirical trade-off curve (for plots) evaluates up to ``curve_points`` events of the chosen
family on the evaluation half (each in the orientation with ``alpha + beta <= 1``); its
Clopper-Pearson rectangles use level ``1 - g / (4 m)`` per bound for m events (two bounds for
each of the two probabilities of each event), so all rectangles hold simultaneously with
probability at least ``1 - g``.
"""

from __future__ import annotations

import itertools
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt
from scipy import special

from dpkit._numeric.validation import check_delta, check_integer, check_probability
from dpkit.audit._claims import Claim, as_claim
from dpkit.audit._sampling import as_draw
from dpkit.audit._stats import (
    clopper_pearson_lower,
    clopper_pearson_upper,
    epsilon_lower_bound,
    mu_lower_bound,
)
from dpkit.audit._testers import FittedEvents, Tester, default_testers
from dpkit.errors import PrivacyParameterError
from dpkit.noise import RandomSource, resolve_source

__all__ = ["AuditResult", "TradeoffPoint", "audit", "audit_ldp"]

FloatArray = npt.NDArray[np.float64]
Progress = Callable[[int, int], None]


@dataclass(frozen=True, kw_only=True)
class TradeoffPoint:
    """One test's errors: estimates and Clopper-Pearson bounds (``alpha = P_x(S)``, ``beta =
    P_x'(S^c)``)."""

    alpha: float
    beta: float
    alpha_lower: float
    alpha_upper: float
    beta_lower: float
    beta_upper: float


@dataclass(frozen=True)
class AuditResult:
    """What an audit proves, with its confidence.

    ``epsilon_lower_bound`` and ``mu_lower_bound`` hold with probability at least ``confidence``
    (over the audit's own sampling) for every (epsilon, ``delta``)-DP or mu-GDP guarantee the
    mechanism could satisfy. ``violated`` is True only when the bounds contradict ``claim``.
    """

    epsilon_lower_bound: float
    delta: float
    mu_lower_bound: float
    confidence: float
    violated: bool
    claim: Claim | None
    point: TradeoffPoint
    curve: tuple[TradeoffPoint, ...]
    pair: tuple[Any, Any]
    tester: str
    event: str
    samples: int
    selection_score: float
    seconds: float

    @property
    def verdict(self) -> str:
        """``"violated"``, ``"no violation found"`` or ``"no claim"``."""
        if self.claim is None:
            return "no claim"
        return "violated" if self.violated else "no violation found"

    @property
    def ratio(self) -> float | None:
        """Lower bound over claim: epsilon for (epsilon, delta) claims, mu for mu-GDP claims."""
        if self.claim is None:
            return None
        if self.claim.kind == "gdp" and self.claim.mu:
            return self.mu_lower_bound / self.claim.mu
        if self.claim.kind == "epsilon_delta" and self.claim.epsilon:
            return self.epsilon_lower_bound / self.claim.epsilon
        return None

    def summary(self) -> str:
        """A few lines in plain words."""
        p = self.point
        lines = [
            f"epsilon >= {self.epsilon_lower_bound:.4f} at delta = {self.delta:g} and "
            f"mu >= {self.mu_lower_bound:.4f}, with confidence {self.confidence:g}",
            f"test: {self.tester}, {self.event}; inputs {self.pair[0]!r} vs {self.pair[1]!r}",
            f"errors: alpha = {p.alpha:.6g} (<= {p.alpha_upper:.6g}), beta = {p.beta:.6g} "
            f"(<= {p.beta_upper:.6g}); {self.samples} samples per input, {self.seconds:.2f} s",
        ]
        if self.claim is not None:
            ratio = self.ratio
            extra = "" if ratio is None else f" (lower bound / claim = {ratio:.3f})"
            lines.append(f"claim {self.claim.label}: {self.verdict}{extra}")
        return "\n".join(lines)

    def plot(self, path: Any = None, *, ax: Any = None) -> Any:
        """Plot the empirical trade-off points and bounds against the claimed curve.

        matplotlib is imported here, not at module import. Returns the figure; saves it when
        ``path`` is given.
        """
        from dpkit.audit._plot import plot_result

        return plot_result(self, path=path, ax=ax)


# ---------------------------------------------------------------------------------------------
def _predicted_upper(k: FloatArray, n: float, level: float) -> FloatArray:
    """Clopper-Pearson upper bound for a (possibly fractional) predicted count k out of n."""
    k = np.clip(k, 0.0, n)
    full = k >= n
    out = special.betaincinv(k + 1.0, np.where(full, 1.0, n - k), level)
    return np.asarray(np.where(full, 1.0, out), dtype=np.float64)


def _key(x: Any) -> str:
    arr = np.asarray(x)
    if arr.dtype == object:
        return repr(x)
    return f"{arr.dtype.str}{arr.shape}{arr.tobytes().hex()}"


def _draw_all(
    draw: Callable[[Any, int, RandomSource], Any],
    inputs: Sequence[Any],
    samples: int,
    src: RandomSource,
    batch: int,
    progress: Progress | None,
) -> list[Any]:
    total = len(inputs) * samples
    done = 0
    out: list[Any] = []
    for x in inputs:
        parts: list[Any] = []
        left = samples
        while left > 0:
            k = min(batch, left)
            got = draw(x, k, src)
            arr = np.asarray(got) if not isinstance(got, np.ndarray) else got
            if arr.shape[:1] != (k,):
                raise ValueError(
                    f"the mechanism returned {arr.shape[:1]} outputs for a batch of {k}"
                )
            parts.append(arr)
            left -= k
            done += k
            if progress is not None:
                progress(done, total)
        out.append(parts[0] if len(parts) == 1 else np.concatenate(parts))
    return out


@dataclass
class _Choice:
    score: float
    fitted: FittedEvents
    index: int
    complement: bool
    pair: tuple[int, int]
    tester: str


def audit(
    mechanism: Any,
    pair: tuple[Any, Any] | None = None,
    *,
    pairs: Iterable[tuple[Any, Any]] | None = None,
    samples: int,
    claim: Any = None,
    delta: float | None = None,
    confidence: float = 0.95,
    testers: Sequence[Tester] | None = None,
    source: RandomSource | None = None,
    vectorized: bool = False,
    progress: Progress | None = None,
    batch: int = 1 << 17,
    curve_points: int = 64,
) -> AuditResult:
    """Audit ``mechanism`` on a pair of neighbouring inputs (or the best of several pairs).

    Parameters
    ----------
    mechanism:
        Anything :func:`dpkit.audit._sampling.as_draw` accepts: a dpkit mechanism (``release``),
        a local-DP client (``randomize_many``), an object with ``sample(x, size, *, source)``, or
        a callable ``f(x)`` (``f(x, size)`` with ``vectorized=True``).
    pair, pairs:
        One pair ``(x, x')`` of neighbouring inputs, or an iterable of candidate pairs (the
        audit picks the most revealing one on the selection half).
    samples:
        Outputs drawn per distinct input (half select the test, half evaluate it).
    claim:
        ``Claim.pure(epsilon=)``, ``Claim.approx(epsilon=, delta=)``, ``Claim.gdp(mu=)``,
        ``Claim.tradeoff(f)`` or any trade-off callable (e.g. a ``dpkit.fdp`` object).
    delta:
        The delta of the epsilon lower bound; defaults to the claim's delta (0 otherwise).
    confidence:
        Joint confidence ``1 - g`` of the bounds and of a "violated" verdict.
    testers:
        Testers to screen; by default chosen from the output type (see ``default_testers``).
    source:
        The :class:`~dpkit.noise.RandomSource` for the mechanism's noise (when it takes one)
        and for the audit's own random split; the secure default when omitted.
    """
    samples = check_integer(samples, name="samples", minimum=4)
    confidence = check_probability(confidence, name="confidence", open_low=True, open_high=True)
    claim_obj = as_claim(claim)
    if delta is None:
        delta = claim_obj.delta if claim_obj is not None else 0.0
    delta = check_delta(delta)
    batch = check_integer(batch, name="batch", minimum=1)
    curve_points = check_integer(curve_points, name="curve_points", minimum=1)
    if (pair is None) == (pairs is None):
        raise PrivacyParameterError("give exactly one of pair=(x, x') and pairs=[...]")
    pair_list = [tuple(pair)] if pair is not None else [tuple(p) for p in pairs or ()]
    if not pair_list or any(len(p) != 2 for p in pair_list):
        raise PrivacyParameterError("each pair must be two inputs (x, x')")
    src = resolve_source(source)
    start = time.perf_counter()

    # distinct inputs, in order of first appearance
    keys: dict[str, int] = {}
    inputs: list[Any] = []
    index_pairs: list[tuple[int, int]] = []
    for x, y in pair_list:
        ids = []
        for v in (x, y):
            k = _key(v)
            if k not in keys:
                keys[k] = len(inputs)
                inputs.append(v)
            ids.append(keys[k])
        index_pairs.append((ids[0], ids[1]))

    draw = as_draw(mechanism, vectorized=vectorized)
    outputs = _draw_all(draw, inputs, samples, src, batch, progress)

    # random split (the audit's own randomness comes from the RandomSource too):
    # fit quarter | screen quarter | evaluation half
    n_sel = samples // 2
    n_fit = n_sel // 2
    n_screen = n_sel - n_fit
    n_eval = samples - n_sel
    fit: list[Any] = []
    scr: list[Any] = []
    ev: list[Any] = []
    for out in outputs:
        # uniformly random disjoint subsets of the prescribed sizes: partition i.i.d. random
        # keys around their n_fit-th and n_sel-th order statistics (O(n), no full sort)
        perm = np.argpartition(src.words(samples), (n_fit, n_sel) if n_fit else n_sel)
        fit.append(out[perm[:n_fit]])
        scr.append(out[perm[n_fit:n_sel]])
        ev.append(out[perm[n_sel:]])

    g = 1.0 - confidence
    level = 1.0 - g / 2.0

    def objective(au: FloatArray, bu: FloatArray) -> FloatArray:
        if claim_obj is not None:
            return claim_obj.score(au, bu)
        return epsilon_lower_bound(au, bu, delta=delta)

    best: _Choice | None = None
    for i, j in index_pairs:
        for tester in testers if testers is not None else default_testers(fit[i]):
            fitted = tester.fit(fit[i], fit[j])
            if fitted is None or fitted.size == 0:
                continue
            # Screening on data the tester did not see (a histogram ranks categories by their
            # ratio, so its own data would flatter it), at a Bonferroni level over the family's
            # 2 m one-sided bounds, so a large family cannot win through its noisiest event.
            screen = 1.0 - g / (4.0 * fitted.size)
            pa = fitted.counts(scr[i]) / n_screen
            pb = fitted.counts(scr[j]) / n_screen
            for complement in (False, True):
                # errors of the test rejecting "M(x)" on S (or on S^c when complement)
                alpha_hat = (1.0 - pa) if complement else pa
                beta_hat = pb if complement else (1.0 - pb)
                au = _predicted_upper(
                    _predicted_upper(alpha_hat * n_screen, n_screen, screen) * n_eval, n_eval, level
                )
                bu = _predicted_upper(
                    _predicted_upper(beta_hat * n_screen, n_screen, screen) * n_eval, n_eval, level
                )
                scores = objective(au, bu)
                idx = int(np.argmax(scores))
                score = float(scores[idx])
                if best is None or score > best.score:
                    best = _Choice(score, fitted, idx, complement, (i, j), tester.name)
    if best is None:
        raise ValueError("no tester applies to these outputs; pass testers= explicitly")

    # evaluation half: exactly one test
    i, j = best.pair
    ca = best.fitted.counts(ev[i])
    cb = best.fitted.counts(ev[j])
    point = _point(int(ca[best.index]), int(cb[best.index]), n_eval, best.complement, level)
    eps_lb = float(epsilon_lower_bound(point.alpha_upper, point.beta_upper, delta=delta))
    mu_lb = float(mu_lower_bound(point.alpha_upper, point.beta_upper))
    violated = bool(
        claim_obj is not None and claim_obj.refuted_by(point.alpha_upper, point.beta_upper)
    )

    # descriptive curve with simultaneous rectangles
    m = best.fitted.size
    chosen = np.unique(np.linspace(0, m - 1, min(m, curve_points)).astype(np.int64))
    curve_level = 1.0 - g / (4.0 * chosen.size)
    # of the two orientations of each event keep the one at least as good as a random guess
    curve = tuple(
        _point(int(ca[t]), int(cb[t]), n_eval, bool(ca[t] > cb[t]), curve_level) for t in chosen
    )
    event = best.fitted.describe(best.index)
    if best.complement:
        event = f"complement of [{event}]"
    return AuditResult(
        epsilon_lower_bound=eps_lb,
        delta=delta,
        mu_lower_bound=mu_lb,
        confidence=confidence,
        violated=violated,
        claim=claim_obj,
        point=point,
        curve=curve,
        pair=(inputs[i], inputs[j]),
        tester=best.tester,
        event=event,
        samples=samples,
        selection_score=best.score,
        seconds=time.perf_counter() - start,
    )


def _point(count_a: int, count_b: int, n: int, complement: bool, level: float) -> TradeoffPoint:
    """Errors of the test rejecting "M(x)" on S (or S^c): alpha from side A, beta from side B.

    Each of the four bounds is one-sided at ``level``.
    """
    k_alpha = n - count_a if complement else count_a
    k_beta = count_b if complement else n - count_b
    return TradeoffPoint(
        alpha=k_alpha / n,
        beta=k_beta / n,
        alpha_lower=float(clopper_pearson_lower(k_alpha, n, level=level)),
        alpha_upper=float(clopper_pearson_upper(k_alpha, n, level=level)),
        beta_lower=float(clopper_pearson_lower(k_beta, n, level=level)),
        beta_upper=float(clopper_pearson_upper(k_beta, n, level=level)),
    )


def _default_domain(protocol: Any) -> Any:
    """A categorical protocol's labels (or size), or ``(-1, 0, 1)`` for a mean mechanism."""
    labels = getattr(protocol, "labels", None)
    if isinstance(labels, (tuple, list)) and len(labels) >= 2:
        return labels
    size = getattr(protocol, "d", None)
    if isinstance(size, int) and size >= 2:
        return size
    from dpkit.ldp import MeanMechanism  # lazy: the audit core does not need dpkit.ldp

    if isinstance(protocol, MeanMechanism):
        # inputs in [-1, 1]; the extremes are the worst pair of the mean mechanisms
        return (-1.0, 0.0, 1.0)
    return getattr(protocol, "domain", None)


def audit_ldp(
    protocol: Any,
    *,
    samples: int,
    domain: Any = None,
    claim: Any = None,
    confidence: float = 0.95,
    testers: Sequence[Tester] | None = None,
    source: RandomSource | None = None,
    progress: Progress | None = None,
) -> AuditResult:
    """Audit a local randomizer over every pair of inputs of a small domain.

    ``domain`` is an int d (inputs 0..d-1) or a sequence of inputs; by default the protocol's
    ``labels`` (a :mod:`dpkit.ldp` frequency oracle), or ``(-1, 0, 1)`` for a
    :class:`dpkit.ldp.MeanMechanism`, or its ``domain`` attribute. The claim defaults to
    ``Claim.pure(epsilon=protocol.epsilon)``. All ``d (d - 1) / 2`` unordered pairs are
    screened on the selection half (both orientations of every event cover both orders of a
    pair) and the single most revealing test is evaluated on the held-out half, so the
    confidence needs no Bonferroni factor for the number of pairs.
    """
    if domain is None:
        domain = _default_domain(protocol)
    if domain is None:
        raise PrivacyParameterError("audit_ldp needs domain= (an int d or a sequence of inputs)")
    if isinstance(domain, (int, np.integer)) and not isinstance(domain, bool):
        values: list[Any] = list(range(check_integer(domain, name="domain", minimum=2)))
    else:
        values = list(domain)
    if len(values) < 2:
        raise PrivacyParameterError("the domain needs at least two inputs")
    if claim is None and getattr(protocol, "epsilon", None) is not None:
        claim = Claim.pure(epsilon=protocol.epsilon)
    return audit(
        protocol,
        pairs=list(itertools.combinations(values, 2)),
        samples=samples,
        claim=claim,
        confidence=confidence,
        testers=testers,
        source=source,
        progress=progress,
    )
