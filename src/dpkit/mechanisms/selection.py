"""Selection mechanisms: the exponential mechanism and Report Noisy Max.

Three noise distributions for "add noise to every score, report the arg-max" give three
*different* mechanisms (all epsilon-DP):

* Gumbel noise of scale ``2 Delta / epsilon`` gives exactly the exponential mechanism
  ``P(r) ∝ exp(epsilon u(r) / (2 Delta))`` (the Gumbel-max trick; Dwork and Roth, Def. 3.4).
* One-sided exponential noise of the same scale gives the *permute-and-flip* mechanism, not the
  exponential mechanism (McKenna and Sheldon 2020; Ding, Kifer et al. 2021). It is sometimes
  stated that the two coincide; they do not. With two candidates whose scores differ by
  d and lambda = 2 Delta / epsilon: the exponential mechanism picks the better one with probability
  ``1 / (1 + exp(-d / lambda))``, exponential-noise noisy max with ``1 - exp(-d / lambda) / 2``
  (at d = lambda: 0.731 vs 0.816). See docs/mechanisms.md and tests/statistical.
* Laplace noise of scale ``2 Delta / epsilon`` (``Delta / epsilon`` for monotone scores, e.g.
  counts) gives Report Noisy Max (Dwork and Roth, Claim 3.9).

For monotone utilities (every score moves in the same direction between neighbours) the factor 2
drops (``monotonic=True``).

Scores
------
NaN is treated as -inf (never chosen unless every score is NaN or -inf, in which case the first
candidate is returned); +inf as the largest finite double; finite scores are clamped to
``[-MAX, MAX]`` (MAX the largest double). Clamping is 1-Lipschitz, so it never increases the
sensitivity. What is accepted is decided by type, never by value: numpy float (up to 64 bits),
integer and bool arrays, and sequences or object arrays of Python ``int``/``float``/``bool``,
:class:`fractions.Fraction` and numpy integer or floating scalars (``longdouble`` included),
and typed columns read by their *declared* dtype (pandas nullable or arrow dtypes, polars and
pyarrow columns: :func:`dpkit._numeric.values.read_column`; integer columns stay exact
integers). Missing values are NaN scores, decided by type: a null in a typed column, and
``None`` or ``pandas.NA`` in a sequence or object array.
``Decimal``, complex, strings and other objects (and columns of a non-numeric declared dtype)
are refused with a :class:`~dpkit.errors.PrivacyParameterError` naming ``scores``.

Floating-point accounting
-------------------------
The arg-max sees ``z_i = g (u_i - M) / Delta`` in units of the noise scale, with ``M`` the largest
score and ``g = (epsilon - 2 SLACK) / c`` rounded down (c = 2, or 1 when monotonic). The
difference ``u_i - M`` is formed *exactly* and rounded once: for doubles as ``fl(u_i - M)``, or as
``2 fl(u_i/2 - M/2)`` where that difference exceeds the largest double (the halves are exact
there); for integers beyond ``2**53`` (numpy int64/uint64, Python ints), ``longdouble`` and
``Fraction`` in exact integer or rational arithmetic before the single rounding. Nothing is ever
scaled before the shift or multiplied by an overflowing ``c Delta``: the division by ``Delta``
and the product with ``g`` are two more roundings. So ``z_i`` is within a relative
``3.01 * 2**-53`` of its exact value, except that an overflow gives ``-inf`` (only when
``|z_i| > MAX 2**-38``) and an underflow an absolute error below ``2**-51``.

Outside an event of probability below ``2**-1000`` every noise value lies in ``[-746, 746]``
(the samplers draw ``-ln V`` with V a full-precision uniform, ``V >= 2**-1075``), so only
candidates with ``z_i >= -1492`` can win; for them the errors above are at most
``1492 * 3.01 * 2**-53 < 2**-40.8``. Adding the noise sampler's error (a few ulps of numbers
below 746: ``< 2**-41.4``) and the rounding of the noisy sum (``< 2**-42``), each noisy score is
within ``eta < 2**-39`` of its exact value. Shifting every score by at most ``eta`` multiplies
each selection probability by at most ``e^(2 eta)`` (moving one score by t moves its winning
probability by a factor ``e^|t|`` at most, for Laplace, exponential and Gumbel noise of unit
scale), so the released probabilities are within ``e^(+-SLACK)``, ``SLACK = 2**-38``, of those
of the exact mechanism with factor g. This is charged by scaling with ``epsilon - 2 SLACK``:
the guarantee stays ``epsilon`` (rounded towards the safe side throughout).

Calibration. Both mechanisms run at, and state in their event, ``epsilon' =
calibrated_epsilon(epsilon)``, the largest double at most ``epsilon (1 - 2**-40)`` (the rule of
every calibration in :mod:`dpkit.mechanisms`): ``k`` mechanisms built with ``epsilon = fl(e /
k)`` fit a budget of ``e``. The ``epsilon`` field keeps the value asked for; ``g`` above is
computed from ``epsilon'``.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

import numpy as np
import numpy.typing as npt

from dpkit._numeric.rounding import down, float_up, up
from dpkit._numeric.validation import (
    check_delta,
    check_epsilon,
    check_integer,
    check_nonnegative,
    check_probability,
    check_sensitivity,
)
from dpkit._numeric.values import is_missing_type, read_column
from dpkit.errors import PrivacyParameterError
from dpkit.events import (
    ApproxDpEvent,
    DpEvent,
    ExponentialMechanismEvent,
    Neighbouring,
    PureDpEvent,
    ReportNoisyMaxEvent,
    SelfComposedEvent,
    as_neighbouring,
)
from dpkit.mechanisms._calibration import calibrated_delta, calibrated_epsilon
from dpkit.noise import RandomSource, exponential_and_sign, exponential_two_tailed, resolve_source

__all__ = ["ExponentialMechanism", "NoisyTopK", "ReportNoisyMax"]

SELECTION_SLACK = 2.0**-38
_MAX = float(np.finfo(np.float64).max)
_MAX_INT = int(_MAX)
_BLOCK = 1 << 14  # noise values per block of draws (cache-resident)
_LOW32 = np.int64(0xFFFFFFFF)
_TWO32 = 2.0**32
_EXACT_SCALARS = (int, float, Fraction, np.integer, np.floating, np.bool_)


_NOISES = ("laplace", "exponential", "gumbel")
_NO_NOISE = object()  # _set_common's "no noise field" (None is an invalid noise, refused)


def _check_noise(noise: object) -> None:
    """Refuse a noise name other than "laplace", "exponential" or "gumbel" (both mechanisms)."""
    if noise not in _NOISES:
        raise PrivacyParameterError(
            f"noise must be 'laplace', 'exponential' or 'gumbel', got {noise!r}"
        )


def _set_common(
    obj: object,
    epsilon: float,
    sensitivity: float,
    monotonic: bool,
    neighbouring: str | Neighbouring,
    noise: object = _NO_NOISE,
) -> None:
    """Validate and set the parameters the selection mechanisms share (frozen dataclasses):
    epsilon, sensitivity, monotonic, neighbouring and, for the noisy-max family, noise."""
    if noise is not _NO_NOISE:
        _check_noise(noise)
        object.__setattr__(obj, "noise", noise)
    eps = check_epsilon(epsilon)
    if not eps > 4 * SELECTION_SLACK:
        raise PrivacyParameterError(f"epsilon must exceed 2**-36, got {epsilon!r}")
    if not isinstance(monotonic, bool):
        raise PrivacyParameterError(f"monotonic must be a bool, got {monotonic!r}")
    object.__setattr__(obj, "epsilon", eps)
    object.__setattr__(obj, "sensitivity", check_sensitivity(sensitivity))
    object.__setattr__(obj, "monotonic", monotonic)
    object.__setattr__(obj, "neighbouring", as_neighbouring(neighbouring))


def _gain_of(mech: ExponentialMechanism | ReportNoisyMax) -> float:
    """:func:`_gain` at the mechanism's calibrated epsilon (module docstring, Calibration)."""
    return _gain(calibrated_epsilon(mech.epsilon), mech.monotonic)


def _gain(epsilon: float, monotonic: bool) -> float:
    """``(epsilon - 2 SLACK) / c`` rounded down (c = 1 or 2; a power of two, so exact)."""
    c = 1.0 if monotonic else 2.0
    return math.nextafter(epsilon - 2 * SELECTION_SLACK, 0.0) / c


def _refuse(what: str) -> PrivacyParameterError:
    return PrivacyParameterError(
        f"scores must be real numbers (float, int, bool, Fraction or numpy real arrays); got "
        f"{what}. Convert them explicitly (float() rounds, so round before computing scores)"
    )


def _float_ratios(u: npt.NDArray[np.float64], sensitivity: float) -> npt.NDArray[np.float64]:
    """``(u - M) / Delta`` for doubles (NaN -> -inf, +inf -> MAX), overflow-free; see module."""
    u = np.where(np.isnan(u), -np.inf, u)
    np.minimum(u, _MAX, out=u)
    finite = np.isfinite(u)
    top = float(u[finite].max()) if finite.any() else 0.0
    with np.errstate(over="ignore", invalid="ignore", under="ignore"):
        d = u - top  # exact or one rounding; -inf for u = -inf or on overflow
        r = d / sensitivity
        wide = np.isinf(d) & finite
        if wide.any():  # |u - M| > MAX: the halves are exact (both are large), one rounding
            r[wide] = ((u[wide] * 0.5 - top * 0.5) / sensitivity) * 2.0
    return np.asarray(r, dtype=np.float64)


def _int_ratios(
    v: npt.NDArray[Any], sensitivity: float, missing: npt.NDArray[np.bool_] | None = None
) -> npt.NDArray[np.float64]:
    """``(v - max v) / Delta`` for numpy integers: the difference exact, rounded once.

    ``v = a 2**32 + b`` with ``0 <= b < 2**32``; ``(a - a_M) 2**32`` and ``b - b_M`` are exact
    doubles (below 2**65 and 2**32), so their sum is the exact difference rounded once.
    Entries marked ``missing`` (nulls of a typed column) are NaN scores: ``-inf``, never the max.
    """
    if missing is not None and missing.any():
        out = np.full(v.size, -np.inf)
        present = ~missing
        if present.any():
            out[present] = _int_ratios(v[present], sensitivity)
        return out
    if v.dtype == np.uint64:
        a = (v >> np.uint64(32)).astype(np.int64)
        b = (v & np.uint64(0xFFFFFFFF)).astype(np.int64)
    else:
        w = v.astype(np.int64)
        a, b = w >> np.int64(32), w & _LOW32
    i = int(np.argmax(v))
    d = (a - a[i]).astype(np.float64) * _TWO32 + (b - b[i]).astype(np.float64)
    with np.errstate(under="ignore"):
        return np.asarray(d / sensitivity, dtype=np.float64)


def _exact_value(x: Any) -> int | Fraction | float:
    """An exact int or Fraction for a finite number; ``nan``/``+-inf`` stay floats."""
    if isinstance(x, (bool, np.bool_)):
        return int(x)
    if isinstance(x, (int, np.integer)):
        return int(x)
    if isinstance(x, Fraction):
        return x
    if not np.isfinite(x):  # float or numpy floating (longdouble included)
        return float("nan") if np.isnan(x) else float(np.sign(x)) * math.inf
    n, d = x.as_integer_ratio()
    return Fraction(int(n), int(d))


def _object_ratios(items: npt.NDArray[Any], sensitivity: float) -> npt.NDArray[np.float64]:
    """``(u - M) / Delta`` in exact rational arithmetic, one rounding of the difference."""
    vals: list[int | Fraction | None] = []
    for x in items:
        e = _exact_value(x)
        if isinstance(e, float):  # nan -> excluded, +inf -> MAX, -inf -> excluded
            vals.append(_MAX_INT if e > 0 else None)
        else:
            vals.append(min(max(e, -_MAX_INT), _MAX_INT))  # 1-Lipschitz clamp
    present = [e for e in vals if e is not None]
    top = max(present) if present else 0
    n = len(vals)
    diff = np.full(n, -np.inf)  # the difference rounded once, where it is a finite double
    half = np.zeros(n)  # the half difference rounded once, where the difference is not
    wide = np.zeros(n, dtype=np.bool_)
    for k, v in enumerate(vals):
        if v is None:
            continue
        d = v - top  # exact, in [-2 MAX, 0]
        if d >= -_MAX_INT:
            diff[k] = float(d)  # correctly rounded, no overflow: |d| <= MAX
        else:
            wide[k] = True
            half[k] = float(Fraction(d) / 2)  # |d / 2| <= MAX
    with np.errstate(over="ignore", under="ignore"):
        r = diff / sensitivity
        r[wide] = (half[wide] / sensitivity) * 2.0
    return np.asarray(r, dtype=np.float64)


def _ratios(scores: Any, sensitivity: float) -> npt.NDArray[np.float64]:
    """``(u_i - max u) / Delta`` per candidate, by the scores' type (module docstring)."""
    col = read_column(scores)
    if col is not None:
        # a typed column (pandas nullable / arrow dtype, polars, pyarrow): by its declared
        # dtype, a null is a NaN score; never through np.asarray, whose result (int64, or
        # float64 rounding integers beyond 2**53) depends on whether a value is missing
        if col.data is None:
            raise _refuse(f"a column of declared dtype {col.declared}")
        data, missing = col.data.reshape(-1), col.missing.reshape(-1)
        if data.size == 0:
            raise PrivacyParameterError("scores must contain at least one candidate")
        if col.kind == "float":
            return _float_ratios(data.astype(np.float64), sensitivity)  # nulls are NaN
        return _int_ratios(data, sensitivity, missing)
    if isinstance(scores, np.ndarray) or (
        hasattr(scores, "__array__") and not isinstance(scores, (list, tuple))
    ):
        arr = np.asarray(scores)
    else:
        arr = np.asarray(scores, dtype=object)
    arr = arr.reshape(-1)
    if arr.size == 0:
        raise PrivacyParameterError("scores must contain at least one candidate")
    kind = arr.dtype.kind
    if kind == "f" and arr.dtype.itemsize <= 8:
        return _float_ratios(arr.astype(np.float64), sensitivity)
    if kind in "biu":
        return _int_ratios(arr, sensitivity)
    if kind == "f":  # longdouble
        return _object_ratios(arr.astype(object), sensitivity)
    if kind != "O":
        raise _refuse(f"an array of dtype {arr.dtype}")
    types = {type(x) for x in arr}
    if any(is_missing_type(t) for t in types):  # None / pandas.NA: a NaN score (by type)
        filled = np.empty(arr.size, dtype=object)
        filled[:] = [math.nan if is_missing_type(type(x)) else x for x in arr]
        arr = filled
        types = {type(x) for x in arr}
    bad = [t for t in types if not issubclass(t, _EXACT_SCALARS)]
    if bad:
        raise _refuse(", ".join(sorted(t.__name__ for t in bad)))
    if all(
        issubclass(t, float) or (issubclass(t, np.floating) and np.dtype(t).itemsize <= 8)
        for t in types
    ):
        return _float_ratios(arr.astype(np.float64), sensitivity)
    if all(issubclass(t, (int, np.integer)) for t in types):
        ints = [int(x) for x in arr]  # Python ints: exact comparisons whatever the mix
        if min(ints) >= -(2**63) and max(ints) < 2**63:  # the same exact result, vectorised
            return _int_ratios(np.array(ints, dtype=np.int64), sensitivity)
    return _object_ratios(arr, sensitivity)


def _scaled_scores(scores: Any, sensitivity: float, gain: float) -> npt.NDArray[np.float64]:
    """``z = gain (u - max u) / Delta`` in noise units, never NaN, never raising on values."""
    r = _ratios(scores, sensitivity)
    with np.errstate(over="ignore", under="ignore", invalid="ignore"):
        z = r * gain
    return np.where(np.isnan(z), -np.inf, z)


def _noisy_argmax(
    z: npt.NDArray[np.float64],
    count: int,
    noise: Callable[[int], npt.NDArray[np.float64]],
    parallel: bool = True,
) -> npt.NDArray[np.int64]:
    """``count`` arg-maxes of ``z + noise``, in blocks of about ``_BLOCK`` noise values.

    Blocks are processed on two threads when ``parallel``; seeded sources pass
    ``parallel=False`` so the keystream order, hence the result, is fixed.
    """
    n = z.size
    out = np.empty(count, dtype=np.int64)
    if n == 1:
        out[:] = 0
        return out
    rows_per_block = max(1, _BLOCK // n)

    def work(start: int) -> None:
        stop = min(start + rows_per_block, count)
        rows = stop - start
        noisy = noise(rows * n).reshape(rows, n)
        noisy += z
        out[start:stop] = np.argmax(noisy, axis=1)

    starts = range(0, count, rows_per_block)
    if parallel and count * n > (1 << 18):
        with ThreadPoolExecutor(max_workers=2) as pool:
            list(pool.map(work, starts))
    else:
        for s in starts:
            work(s)
    return out


_MAX_DRAWS = 2**32


def _select(
    scores: Any,
    count: int,
    source: RandomSource | None,
    sensitivity: float,
    gain: float,
    noise: str,
) -> npt.NDArray[np.int64]:
    """``count`` arg-maxes of ``gain (scores - max) / Delta + noise`` with unit-scale noise.

    ``count`` is at most ``2**32`` per call (the output is one int64 array; larger requests
    are refused up front instead of failing while allocating)."""
    k = check_integer(count, name="count", minimum=0, maximum=_MAX_DRAWS)
    src = resolve_source(source)
    z = _scaled_scores(scores, sensitivity, gain)

    def draw(m: int) -> npt.NDArray[np.float64]:
        if noise == "gumbel":
            return -np.log(exponential_two_tailed(src, m))
        if noise == "exponential":
            return exponential_two_tailed(src, m)
        e, sign = exponential_and_sign(src, m)
        return np.where(sign, -e, e)

    return _noisy_argmax(z, k, draw, parallel=src.secure)


def _softmax(z: npt.NDArray[np.float64]) -> npt.NDArray[np.float64]:
    """``exp(z) / sum exp(z)`` for ``max z = 0`` (the law of the arg-max with Gumbel noise)."""
    w = np.exp(z)
    total = w.sum()
    return w / total if total > 0 else np.full(z.size, 1.0 / z.size)


def _permute_and_flip(z: npt.NDArray[np.float64]) -> npt.NDArray[np.float64]:
    """The law of the arg-max of ``z + Exp(1)`` noise (permute-and-flip), for ``max z = 0``.

    With ``p_j = exp(z_j)`` (p = 1 for the best candidate), permute-and-flip visits candidates in
    a uniformly random order and stops at j with probability p_j (McKenna and Sheldon, NeurIPS
    2020, Algorithm 1). Give each candidate an independent uniform arrival time; j is chosen at
    time t when every earlier candidate refused, so

        P(j) = p_j * integral_0^1 prod_{k != j} (1 - p_k t) dt

    (the same integral follows from the noise form: substitute ``t = exp(-x)`` in
    ``P(j) = int e^{-(x - z_j)} prod_{k != j} (1 - e^{-(x - z_k)})_+ dx``). The integrand is a
    polynomial of degree n' - 1, n' the number of candidates with ``p > 0``, so Gauss-Legendre
    quadrature with ``ceil(n'/2)`` nodes is exact; the products are sums of logarithms of
    numbers in (0, 1] (no cancellation), so the result is accurate to a few ulps times n'.
    Cost O(n'^2) time, O(n') memory per block of nodes.
    """
    from scipy.special import roots_legendre

    out = np.zeros(z.size)
    live = np.flatnonzero(np.exp(z) > 0)
    if live.size == 0:  # every score is NaN or -inf: the first candidate (ties go to it)
        out[0] = 1.0
        return out
    p = np.exp(z[live])
    n = p.size
    if n == 1:
        out[live] = 1.0
        return out
    nodes, weights = roots_legendre((n + 1) // 2)
    t = 0.5 * (nodes + 1.0)
    w = 0.5 * weights
    acc = np.zeros(n)
    step = max(1, (1 << 16) // n)
    for s in range(0, t.size, step):
        logs = np.log1p(-np.outer(p, t[s : s + step]))  # (n, k), all finite: t < 1
        before = np.zeros_like(logs)  # sum over k < j (exclusive running sums: no cancellation)
        np.cumsum(logs[:-1], axis=0, out=before[1:])
        after = np.zeros_like(logs)  # sum over k > j
        np.cumsum(logs[:0:-1], axis=0, out=after[-2::-1])
        acc += np.exp(before + after) @ w[s : s + step]
    probs = p * acc
    out[live] = probs / probs.sum()  # sums to 1 up to rounding; renormalised
    return out


@dataclass(frozen=True, kw_only=True)
class ExponentialMechanism:
    """Pick candidate r with probability ``∝ exp(epsilon u(r) / (2 Delta))`` (Dwork-Roth Def. 3.4).

    ``epsilon / Delta`` instead of ``epsilon / (2 Delta)`` when ``monotonic=True``. epsilon-DP
    (Theorem 3.10). Sampled as the arg-max of ``u(r) * factor + Gumbel(0, 1)``.
    """

    epsilon: float
    sensitivity: float
    monotonic: bool = False
    neighbouring: Neighbouring = Neighbouring.ADD_REMOVE

    def __init__(
        self,
        *,
        epsilon: float,
        sensitivity: float,
        monotonic: bool = False,
        neighbouring: str | Neighbouring = Neighbouring.ADD_REMOVE,
    ) -> None:
        _set_common(self, epsilon, sensitivity, monotonic, neighbouring)

    @property
    def factor(self) -> float:
        """Score multiplier ``(epsilon - 2 slack) / (c Delta)``, c = 1 or 2, rounded down.

        For display: releases never form it (it can underflow for huge sensitivities); they
        divide the shifted scores by Delta and multiply by ``(epsilon - 2 slack) / c``.
        """
        with np.errstate(under="ignore"):
            return math.nextafter(_gain_of(self) / self.sensitivity, 0.0)

    @property
    def event(self) -> ExponentialMechanismEvent:
        return ExponentialMechanismEvent(
            epsilon=calibrated_epsilon(self.epsilon), neighbouring=self.neighbouring, pmf_slack=0.0
        )

    def probabilities(
        self, scores: Sequence[float] | npt.NDArray[np.float64]
    ) -> npt.NDArray[np.float64]:
        """The selection probabilities: ``softmax(z)`` for the scaled scores z the sampler uses.

        ``z_i = g (u_i - max u) / Delta`` (module docstring); the release follows this law up
        to the relative ``e^(+-SLACK)`` charged in epsilon.
        """
        return _softmax(_scaled_scores(scores, self.sensitivity, _gain_of(self)))

    def release(self, scores: Any, *, source: RandomSource | None = None) -> int:
        """Index of the selected candidate."""
        return int(self.release_many(scores, count=1, source=source)[0])

    def release_many(
        self, scores: Any, *, count: int, source: RandomSource | None = None
    ) -> npt.NDArray[np.int64]:
        """``count`` independent selections (each is a separate epsilon-DP release).

        Gumbel-max: the arg-max of ``factor * u + Gumbel(0, 1)`` has exactly the exponential
        mechanism's law.
        """
        return _select(scores, count, source, self.sensitivity, _gain_of(self), "gumbel")

    def utility_gap(self, *, n_candidates: int, t: float) -> float:
        """Dwork-Roth Theorem 3.11 for the law released: ``P[u(out) <= OPT - gap] <= e^-t``.

        The exact mechanism with score multiplier ``g / Delta`` puts at most ``n e^(-g gap /
        Delta)`` below ``OPT - gap`` (the theorem's proof), and the released law is within
        ``e^SLACK`` of it (module docstring), so ``gap = Delta (ln n + t + SLACK) / g`` with the
        gain actually used, ``g = (epsilon' - 2 SLACK) / c`` (c = 2, 1 when monotonic; about
        ``c Delta / epsilon' (ln n + t)``). Rounded up (a larger gap is the safe statement);
        ``inf`` beyond the double range.
        """
        n = check_integer(n_candidates, name="n_candidates", minimum=1)
        tt = check_nonnegative(t, "t")
        logs = (math.log(n) + tt + SELECTION_SLACK) * (1 + 2.0**-50)  # two roundings covered
        if not math.isfinite(logs):
            return math.inf
        return up(Fraction(self.sensitivity) * Fraction(logs) / Fraction(_gain_of(self)))

    def utility_gap_at(self, *, n_candidates: int, alpha: float) -> float:
        """The gap exceeded with probability at most ``alpha`` (t = ln(1/alpha))."""
        a = check_probability(alpha, name="alpha", open_low=True)
        return self.utility_gap(n_candidates=n_candidates, t=-math.log(a))


@dataclass(frozen=True, kw_only=True)
class ReportNoisyMax:
    """Arg-max of scores plus i.i.d. noise: ``noise`` is "laplace", "exponential" or "gumbel".

    Noise scale ``c Delta / epsilon`` with c = 2 (c = 1 when ``monotonic=True``). All three are
    epsilon-DP (Dwork and Roth, Claim 3.9 for Laplace; McKenna and Sheldon 2020 for exponential
    noise, which equals permute-and-flip; Gumbel noise equals the exponential mechanism). They are
    different distributions: see the module docstring.
    """

    epsilon: float
    sensitivity: float
    noise: str = "laplace"
    monotonic: bool = False
    neighbouring: Neighbouring = Neighbouring.ADD_REMOVE

    def __init__(
        self,
        *,
        epsilon: float,
        sensitivity: float,
        noise: str = "laplace",
        monotonic: bool = False,
        neighbouring: str | Neighbouring = Neighbouring.ADD_REMOVE,
    ) -> None:
        _set_common(self, epsilon, sensitivity, monotonic, neighbouring, noise)

    @property
    def scale(self) -> float:
        """Noise scale ``c Delta / (epsilon - 2 slack)``, rounded up (``inf`` past the largest
        double). For display: releases divide by Delta and multiply by the gain instead."""
        with np.errstate(over="ignore"):
            return math.nextafter(self.sensitivity / _gain_of(self), math.inf)

    @property
    def event(self) -> ReportNoisyMaxEvent:
        return ReportNoisyMaxEvent(
            epsilon=calibrated_epsilon(self.epsilon),
            noise=self.noise,
            neighbouring=self.neighbouring,
            pmf_slack=0.0,
        )

    def release(self, scores: Any, *, source: RandomSource | None = None) -> int:
        """Index of the candidate with the largest noisy score."""
        return int(self.release_many(scores, count=1, source=source)[0])

    def release_many(
        self, scores: Any, *, count: int, source: RandomSource | None = None
    ) -> npt.NDArray[np.int64]:
        """``count`` independent releases."""
        return _select(scores, count, source, self.sensitivity, _gain_of(self), self.noise)

    def probabilities(
        self, scores: Sequence[float] | npt.NDArray[np.float64]
    ) -> npt.NDArray[np.float64]:
        """The selection probabilities for the scaled scores z the sampler uses.

        ``noise="gumbel"``: ``softmax(z)`` (the exponential mechanism). ``noise="exponential"``:
        the permute-and-flip law ``P(j) = p_j int_0^1 prod_{k != j} (1 - p_k t) dt`` with
        ``p_j = exp(z_j)`` (McKenna and Sheldon 2020), evaluated exactly by Gauss-Legendre
        quadrature (the integrand is a polynomial). ``noise="laplace"`` has no closed form and
        raises :class:`~dpkit.errors.PrivacyParameterError`. The release follows this law up
        to the relative ``e^(+-SLACK)`` charged in epsilon.
        """
        if self.noise == "laplace":
            raise PrivacyParameterError(
                "noise='laplace' has no closed-form selection law; probabilities are available "
                "for noise='gumbel' and noise='exponential'"
            )
        z = _scaled_scores(scores, self.sensitivity, _gain_of(self))
        return _softmax(z) if self.noise == "gumbel" else _permute_and_flip(z)


_TOP_K_METHODS = ("gumbel", "laplace", "peeling")
# Qiao, Su and Zhang 2021, Theorem 2.2 holds for epsilon <= 0.2, delta <= 0.05 and m >= 2
# candidates (NoisyTopK docstring); outside that range the pure calibration applies.
_QSZ_MAX_EPSILON = 0.2
_QSZ_MAX_DELTA = 0.05


@dataclass(frozen=True, kw_only=True)
class NoisyTopK:
    """The ``k`` candidates with the largest noisy scores, in order; epsilon-DP in total.

    ``method``:

    * ``"gumbel"``: one pass of Gumbel noise of scale ``c k Delta / epsilon``; the ordered
      output has exactly the law of ``k`` peeled exponential mechanisms at ``epsilon / k`` each
      (Durfee and Rogers 2019, Lemma 4.2), ``P(i_1..i_k) = prod_j exp(z_{i_j}) /
      sum_{r not in i_1..i_{j-1}} exp(z_r)`` (:meth:`probability_of`). Its event is ``k``
      exponential-mechanism events, which the zCDP and Renyi accountants read as bounded-range
      (Cesar and Rogers 2021: ``k (epsilon / k)^2 / 8 = epsilon^2 / (8 k)``-zCDP), so zCDP and
      RDP budgets charge less than ``epsilon`` at a chosen delta.
    * ``"laplace"``: one pass of Laplace noise of scale ``2 k Delta / epsilon`` (``k Delta /
      epsilon`` monotone), epsilon-DP (Ding, Wang, Zhang and Kifer 2021, Noisy Top-K). With
      ``delta > 0`` and the public number of candidates ``n_candidates = m``, the one-shot
      Laplace mechanism of Qiao, Su and Zhang 2021 ("Oneshot differentially private top-k
      selection", ICML, Theorem 2.2): Laplace noise of scale ``8 Delta sqrt(k ln(m / delta)) /
      epsilon`` on every score, top k released, ``(epsilon, delta)``-DP. It grows like
      ``sqrt(k)`` instead of ``k``, so it is used only where it is the smaller scale (about
      ``k > 16 ln(m / delta)``, ``64 ln(m / delta)`` monotone: e.g. k above 331 for m = 1000
      and delta = 1e-6) and only where the theorem holds, ``epsilon <= 0.2``, ``delta <= 0.05``
      and ``m >= 2``; otherwise the pure scale above is used and the event stays pure
      (:attr:`approximate` says which). Releases with more than ``n_candidates`` scores are
      refused (fewer are fine: ``ln(m' / delta)`` only shrinks).
    * ``"peeling"``: ``k`` rounds of :class:`ReportNoisyMax` at ``epsilon / k`` with ``noise``,
      each removing the winner (composition of ``k`` events).

    Floating point: the one-shot passes use the gain ``(epsilon' - 2 k SLACK) / (c k)``,
    rounded down (``epsilon'`` the calibrated epsilon): each of the ``k`` ordered selections is
    within ``e^(+-SLACK)`` of exact as in the module docstring. The approximate one-shot
    Laplace pass uses the gain ``(epsilon' - 2 k SLACK) / (8 sqrt(k ln(m / delta_g)))`` rounded
    down, with ``delta_g = delta' (1 - 2 k SLACK)`` rounded down (``delta'`` the calibrated
    delta): an output law within ``e^(+-k SLACK)`` of the exact mechanism's, which is
    ``(epsilon' - 2 k SLACK, delta_g)``-DP, is ``(epsilon', delta')``-DP because
    ``e^(k SLACK) delta_g <= delta'``.
    """

    epsilon: float
    sensitivity: float
    k: int
    method: str = "gumbel"
    noise: str = "gumbel"
    monotonic: bool = False
    neighbouring: Neighbouring = Neighbouring.ADD_REMOVE
    delta: float = 0.0
    n_candidates: int | None = None

    def __init__(
        self,
        *,
        epsilon: float,
        sensitivity: float,
        k: int,
        method: str = "gumbel",
        noise: str = "gumbel",
        monotonic: bool = False,
        neighbouring: str | Neighbouring = Neighbouring.ADD_REMOVE,
        delta: float = 0.0,
        n_candidates: int | None = None,
    ) -> None:
        if method not in _TOP_K_METHODS:
            raise PrivacyParameterError(
                f"method must be 'gumbel', 'laplace' or 'peeling', got {method!r}"
            )
        kk = check_integer(k, name="k", minimum=1, maximum=2**20)
        _set_common(self, epsilon, sensitivity, monotonic, neighbouring, noise)
        if not self.epsilon / kk > 4 * SELECTION_SLACK * kk:
            raise PrivacyParameterError(f"epsilon is too small for k = {kk}, got {epsilon!r}")
        object.__setattr__(self, "k", kk)
        object.__setattr__(self, "method", method)
        d = check_delta(delta)
        if d > 0.0 and method != "laplace":
            raise PrivacyParameterError(
                f"delta > 0 is only used by method='laplace' (one-shot Laplace), got method "
                f"{method!r}; leave delta at 0"
            )
        m: int | None = None
        if n_candidates is not None:
            if d == 0.0:
                raise PrivacyParameterError(
                    "n_candidates is only used with delta > 0 (method='laplace'); leave it out"
                )
            m = check_integer(n_candidates, name="n_candidates", minimum=1, maximum=2**48)
        elif d > 0.0:
            raise PrivacyParameterError(
                "delta > 0 needs n_candidates, the public number of candidates (the noise "
                "scale grows with ln(n_candidates / delta))"
            )
        object.__setattr__(self, "delta", d)
        object.__setattr__(self, "n_candidates", m)

    def _laplace_gain(self) -> tuple[float, bool]:
        """The one-shot Laplace gain and whether it is the approximate (Qiao-Su-Zhang) one:
        the larger (less noise) of the pure gain and, when ``delta > 0``, the approximate gain
        ``(epsilon' - 2 k SLACK) / (8 sqrt(k ln(m / delta_g)))`` (class docstring), both
        rounded down."""
        pure = self._gain()
        if self.delta == 0.0 or self.n_candidates is None:
            return pure, False
        eps = calibrated_epsilon(self.epsilon)
        if eps > _QSZ_MAX_EPSILON or self.delta > _QSZ_MAX_DELTA or self.n_candidates < 2:
            return pure, False
        kk = self.k
        eps_g = math.nextafter(eps - 2 * kk * SELECTION_SLACK, 0.0)
        delta_g = down(Fraction(calibrated_delta(self.delta)) * (1 - 2 * kk * Fraction(2) ** -38))
        if not delta_g > 0.0:
            return pure, False
        log_term = float_up(math.log(self.n_candidates) - math.log(delta_g))
        denom = float_up(8.0 * math.sqrt(kk * log_term))
        approx = math.nextafter(eps_g / denom, 0.0) * (1 - 2.0**-52)
        return (approx, True) if approx > pure else (pure, False)

    @property
    def approximate(self) -> bool:
        """Whether the release is the ``(epsilon, delta)`` one-shot Laplace mechanism (Qiao, Su
        and Zhang 2021) rather than a pure epsilon-DP one (class docstring)."""
        return self.method == "laplace" and self._laplace_gain()[1]

    @property
    def scale(self) -> float:
        """Noise scale of the one-shot passes in score units, ``Delta / gain`` rounded up (for
        display; ``inf`` past the largest double). Peeling reports its per-round scale."""
        if self.method == "peeling":
            return self._round_mechanism().scale
        gain = self._laplace_gain()[0] if self.method == "laplace" else self._gain()
        with np.errstate(over="ignore"):
            return math.nextafter(self.sensitivity / gain, math.inf)

    def _per_round(self) -> float:
        return self.epsilon / self.k

    def _gain(self) -> float:
        """``(epsilon' - 2 k SLACK) / (c k)`` rounded down (one-shot passes)."""
        c = 1.0 if self.monotonic else 2.0
        eps = calibrated_epsilon(self.epsilon)
        return math.nextafter(math.nextafter(eps - 2 * self.k * SELECTION_SLACK, 0.0) / c, 0.0) / (
            self.k * (1 + 2.0**-52)
        )

    @property
    def event(self) -> DpEvent:
        """Gumbel: ``k`` exponential-mechanism events at ``epsilon / k`` (calibrated); Laplace:
        one pure-DP event at the calibrated epsilon (an approximate-DP event at the calibrated
        epsilon and delta when :attr:`approximate`); peeling: ``k`` report-noisy-max events."""
        if self.method == "gumbel":
            one = ExponentialMechanism(
                epsilon=self._per_round(),
                sensitivity=self.sensitivity,
                monotonic=self.monotonic,
                neighbouring=self.neighbouring,
            ).event
            return SelfComposedEvent(event=one, count=self.k)
        if self.method == "laplace":
            if self.approximate:
                return ApproxDpEvent(
                    epsilon=calibrated_epsilon(self.epsilon),
                    delta=calibrated_delta(self.delta),
                )
            return PureDpEvent(epsilon=calibrated_epsilon(self.epsilon))
        rnm = self._round_mechanism().event
        return SelfComposedEvent(event=rnm, count=self.k)

    def _round_mechanism(self) -> ReportNoisyMax:
        return ReportNoisyMax(
            epsilon=self._per_round(),
            sensitivity=self.sensitivity,
            noise=self.noise,
            monotonic=self.monotonic,
            neighbouring=self.neighbouring,
        )

    def release(self, scores: Any, *, source: RandomSource | None = None) -> tuple[int, ...]:
        """The indices of the ``min(k, n)`` selected candidates, best first."""
        return tuple(int(i) for i in self.release_many(scores, count=1, source=source)[0])

    def release_many(
        self, scores: Any, *, count: int, source: RandomSource | None = None
    ) -> npt.NDArray[np.int64]:
        """``count`` independent releases, one row each (shape ``(count, min(k, n))``)."""
        rows = check_integer(count, name="count", minimum=0, maximum=_MAX_DRAWS)
        src = resolve_source(source)
        if self.method == "peeling":
            return self._peel(scores, rows, src)
        gain = self._laplace_gain()[0] if self.method == "laplace" else self._gain()
        z = _scaled_scores(scores, self.sensitivity, gain)
        n = z.size
        if self.n_candidates is not None and n > self.n_candidates:
            raise PrivacyParameterError(
                f"scores has {n} candidates but the mechanism was calibrated for "
                f"n_candidates={self.n_candidates}; build it with the public number of "
                "candidates"
            )
        kk = min(self.k, n)
        out = np.empty((rows, kk), dtype=np.int64)
        step = max(1, _BLOCK // n)
        for start in range(0, rows, step):  # blocks of about _BLOCK noise values
            m = min(step, rows - start)
            if self.method == "gumbel":
                noisy = -np.log(exponential_two_tailed(src, m * n))
            else:
                e, sign = exponential_and_sign(src, m * n)
                noisy = np.where(sign, -e, e)
            noisy = noisy.reshape(m, n) + z
            top = np.argpartition(-noisy, kk - 1, axis=1)[:, :kk] if kk < n else None
            if top is None:
                top = np.broadcast_to(np.arange(n), (m, n))
            vals = np.take_along_axis(noisy, top, axis=1)
            order = np.argsort(-vals, axis=1, kind="stable")
            out[start : start + m] = np.take_along_axis(top, order, axis=1)
        return out

    def _peel(self, scores: Any, rows: int, src: RandomSource) -> npt.NDArray[np.int64]:
        z = _ratios(scores, self.sensitivity)  # validates the scores once (by type)
        n = z.size
        kk = min(self.k, n)
        mech = self._round_mechanism()
        out = np.empty((rows, kk), dtype=np.int64)
        values = np.asarray(scores, dtype=object).reshape(-1) if n else np.empty(0)
        for r in range(rows):
            left = list(range(n))
            for j in range(kk):
                pick = mech.release(values[left], source=src)
                out[r, j] = left.pop(pick)
        return out

    def probability_of(self, scores: Any, ranking: Sequence[int]) -> float:
        """The exact probability of the ordered output ``ranking`` (``method="gumbel"`` only):
        the product of the peeled exponential mechanisms' softmax probabilities."""
        if self.method != "gumbel":
            raise PrivacyParameterError(
                "exact output probabilities are available for method='gumbel' only"
            )
        z = _scaled_scores(scores, self.sensitivity, self._gain())
        picks = [check_integer(i, name="ranking", minimum=0, maximum=z.size - 1) for i in ranking]
        if len(picks) != min(self.k, z.size) or len(set(picks)) != len(picks):
            raise PrivacyParameterError("ranking must list min(k, n) distinct candidates")
        left = np.ones(z.size, dtype=np.bool_)
        p = 1.0
        for i in picks:
            w = np.exp(z[left] - z[left].max())
            p *= float(np.exp(z[i] - z[left].max()) / w.sum())
            left[i] = False
        return p
