"""Attacks on the privacy-loss engine (dpkit._loss), its users and the divergence closed forms.

Every "truth" below is a certified value or interval computed independently with mpmath
(50 digits); a line marked UNDER means dpkit's answer is on the unsafe side of it.

A. PLD accountant, Poisson-subsampled Gaussian on the grid (q = 1 is the plain Gaussian
   mechanism through the grid; the true profile is then exactly the mu-GDP profile with
   mu = sqrt(k) / sigma, Dong, Roth and Su 2022, Corollary 3.3). Tiny losses (large sigma):
   the tails are evaluated as ndtr(x) ~ 0.5 whose absolute round-off (2^-54) swallows the
   P - Q difference, and no allowance covers it.
B. The same, epsilon at delta = 0: the subsampled Gaussian loss is unbounded, so every
   delta(eps) > 0 and the true epsilon(0) is +inf (a certified lower bound on the true
   delta(eps) for the remove direction is q^k * delta_GDP(eps - k log q; sqrt(k)/sigma), from
   L >= log q + g and the all-subsampled branch).
C. fdp.tensor / self_tensor: the knots' beta allowance is clipped away at beta = 0 while alpha
   carries relative round-off; truth = exact profile of f_{eps0,delta0} (one factor) or the
   KOV composition of the worst-case pair.
D. divergence.LaplacePair.renyi / RandomizedResponsePair.renyi near alpha = 1 (cancellation
   divided by alpha - 1); truth = the same closed form in mpmath.
E. Exceptions on legal input.

Run: PYTHONPATH=src python tools/reproducers/loss_engine_attacks.py
"""

from __future__ import annotations

import math

import mpmath as mp
import numpy as np

from dpkit import fdp
from dpkit.accounting.pld import PldAccountant
from dpkit.divergence import LaplacePair, RandomizedResponsePair
from dpkit.errors import PrivacyParameterError
from dpkit.events import (
    DiscreteGaussianEvent,
    DiscreteLaplaceEvent,
    GaussianEvent,
    LaplaceEvent,
    PoissonSampledEvent,
)

mp.mp.dps = 50


def gdp_delta(eps: float | mp.mpf, mu: mp.mpf) -> mp.mpf:
    e = mp.mpf(eps)
    return mp.ncdf(-e / mu + mu / 2) - mp.exp(e) * mp.ncdf(-e / mu - mu / 2)


def sampled(q: float, sigma: float, k: int) -> PldAccountant:
    acc = PldAccountant()
    acc.compose(
        PoissonSampledEvent(sampling_rate=q, event=GaussianEvent(noise_multiplier=sigma)), k
    )
    return acc


def part_a() -> int:
    print("A. grid Gaussian, delta(eps) vs exact mu-GDP (q = 1)")
    bad = 0
    for sigma, k, eps in [
        (1e12, 1, 0.0),
        (3e15, 1, 0.0),
        (1e16, 1, 0.0),
        (1e16, 10**8, 0.0),
        (1e16, 10**8, 5e-13),
        (1e18, 10**6, 0.0),
    ]:
        d = sampled(1.0, sigma, k).get_delta(eps)
        t = gdp_delta(eps, mp.sqrt(k) / sigma)
        flag = "UNDER" if d < t else "ok"
        bad += d < t
        print(f"  sigma={sigma:g} k={k} eps={eps:g}: dpkit {d!r}  truth {mp.nstr(t, 12)}  {flag}")
    return bad


def part_b() -> int:
    print("B. epsilon at delta = 0 of a subsampled Gaussian (truth: +inf)")
    bad = 0
    for q, sigma, k in [(1e-8, 100.0, 1000), (1e-6, 1e4, 1), (1.0, 1e10, 1)]:
        acc = sampled(q, sigma, k)
        e = acc.get_epsilon(0.0)
        mq = mp.mpf(q)
        lb = (
            mp.mpf(0)
            if math.isinf(e)
            else (mq**k * gdp_delta(mp.mpf(e) - k * mp.log(mq), mp.sqrt(k) / sigma))
        )
        flag = "UNDER" if e < math.inf else "ok"
        bad += e < math.inf
        if math.isfinite(e):
            print(
                f"  q={q:g} sigma={sigma:g} k={k}: dpkit eps(0) = {e!r}, get_delta(that) = "
                f"{acc.get_delta(e)!r}; true delta there >= {mp.nstr(lb, 5)} > 0  {flag}"
            )
        else:
            print(f"  q={q:g} sigma={sigma:g} k={k}: dpkit eps(0) = inf  {flag}")
    # discrete Laplace with a huge scale: r = exp(-1/t) rounds to 1
    d = PldAccountant().compose(DiscreteLaplaceEvent(scale=1e300, sensitivity=1)).get_delta(0.0)
    t = mp.tanh(mp.mpf(1) / (2 * mp.mpf(1e300)))  # TV of DLap(0, t) vs DLap(1, t)
    flag = "UNDER" if d < t else "ok"
    bad += d < t
    print(f"  discrete Laplace scale=1e300: delta(0) = {d!r}, truth {mp.nstr(t, 8)}  {flag}")
    return bad


def kov_delta(eps0: float, d0: float, k: int, eps: float) -> mp.mpf:
    e0 = mp.mpf(eps0)
    p = 1 / (1 + mp.exp(-e0))
    fin = (1 - mp.mpf(d0)) ** k
    tot = 1 - fin
    for j in range(k + 1):
        loss = (2 * j - k) * e0
        if loss > eps:
            mass = mp.binomial(k, j) * p**j * (1 - p) ** (k - j) * fin
            tot += mass * (1 - mp.exp(mp.mpf(eps) - loss))
    return tot


def part_c() -> int:
    print("C. fdp.tensor / self_tensor of approx_dp: profile of the returned curve vs exact")
    bad = 0
    total = 0
    worst = (0.0, "")
    for eps0, d0, k in [
        (20.0, 0.0, 1),
        (40.0, 0.1, 1),
        (100.0, 0.0, 1),
        (40.0, 0.1, 2),
        (40.0, 0.1, 5),
        (10.0, 0.0, 3),
        (650.0, 0.0, 1),
    ]:
        f = fdp.approx_dp(epsilon=eps0, delta=d0)
        curve = fdp.tensor(f) if k == 1 else fdp.self_tensor(f, k)
        top = eps0 * k
        for i in range(1, 121):
            eps = top - 6.0 * i / 120
            if eps < 0:
                continue
            total += 1
            v = curve.delta(eps)
            t = kov_delta(eps0, d0, k, eps)
            if v < t:
                bad += 1
                gap = float(t - v)
                if gap > worst[0]:
                    worst = (
                        gap,
                        f"eps0={eps0} delta0={d0} k={k} eps={eps:.4f}: dpkit {v!r} "
                        f"truth {mp.nstr(t, 17)}",
                    )
    print(f"  {bad} of {total} probes UNDER; worst gap {worst[0]:.3g}: {worst[1]}")
    # epsilon at delta = 1e-3 of f_{650, 0}: truth 650 + ln(1 - 1e-3 (1 + e^-650)) exactly
    e = fdp.tensor(fdp.approx_dp(epsilon=650.0)).epsilon(1e-3)
    t = 650 + mp.log(1 - mp.mpf("1e-3") * (1 + mp.exp(-650)))
    bad += e < t
    print(
        f"  tensor(approx_dp(650)).epsilon(1e-3) = {e!r}, truth {mp.nstr(t, 17)} "
        f"{'UNDER' if e < t else 'ok'}"
    )
    return bad


def part_d() -> int:
    print("D. Renyi divergences near alpha = 1")
    bad = 0
    for mu, a in [
        (0.01, 1 + 1e-15),
        (0.1, 1 - 1e-13),
        (1.0, 1 - 1e-15),
        (5.0, 1 - 1e-15),
        (1.0, 1 + 1e-10),
    ]:
        v = LaplacePair(mu=mu).renyi(alpha=a)
        m, al = mp.mpf(mu), mp.mpf(a)
        t = mp.log(
            al / (2 * al - 1) * mp.exp((al - 1) * m) + (al - 1) / (2 * al - 1) * mp.exp(-al * m)
        ) / (al - 1)
        bad += v < t
        print(
            f"  Laplace mu={mu} alpha={a!r}: dpkit {v!r} truth {mp.nstr(t, 12)} "
            f"{'UNDER' if v < t else 'ok'}"
        )
    for a in [1 - 1e-15, 1 - 1e-13]:
        v = RandomizedResponsePair(p_truth=0.75).renyi(alpha=a)
        al, p = mp.mpf(a), mp.mpf("0.75")
        t = mp.log(p**al * (1 - p) ** (1 - al) + (1 - p) ** al * p ** (1 - al)) / (al - 1)
        bad += v < t
        print(
            f"  RR p=0.75 alpha={a!r}: dpkit {v!r} truth {mp.nstr(t, 12)} "
            f"{'UNDER' if v < t else 'ok'}"
        )
    return bad


def part_e() -> int:
    print("E. exceptions on legal input")
    cases = {
        "LaplacePair(mu=1).renyi(alpha=1000)": lambda: LaplacePair(mu=1).renyi(alpha=1000),
        "LaplacePair(mu=800).renyi(alpha=2)": lambda: LaplacePair(mu=800).renyi(alpha=2),
        "LaplacePair(mu=3000).renyi(alpha=0.3)": lambda: LaplacePair(mu=3000).renyi(alpha=0.3),
        "RandomizedResponsePair(p_truth=0.5, categories=2**60).hockey_stick(epsilon=1)": lambda: (
            RandomizedResponsePair(p_truth=0.5, categories=2**60).hockey_stick(epsilon=1)
        ),
        "fdp.tensor(laplace(1), gdp(1), loss_step=1e300).delta(1)": lambda: fdp.tensor(
            fdp.laplace(mu=1.0), fdp.gdp(1.0), loss_step=1e300
        ).delta(1.0),
        "PldAccountant(value_discretization_interval=1e300) Laplace+Gaussian get_epsilon": lambda: (
            PldAccountant(value_discretization_interval=1e300)
            .compose(LaplaceEvent(noise_multiplier=1.0))
            .compose(GaussianEvent(noise_multiplier=1.0))
            .get_epsilon(1e-6)
        ),
        "PldAccountant DiscreteGaussianEvent(sigma=1e9) get_epsilon": lambda: (
            PldAccountant()
            .compose(DiscreteGaussianEvent(sigma=1e9, sensitivity=1))
            .get_epsilon(1e-6)
        ),
    }
    cases["fdp.laplace(mu=746)(0.0) (true value 1)"] = lambda: float(
        fdp.laplace(mu=746.0)(np.array([0.0]))[0]
    )
    bad = 0
    for name, fn in cases.items():
        try:
            with np.errstate(all="ignore"):
                out = fn()
            bad += isinstance(out, float) and math.isnan(out)
            print(f"  {name}: {out!r}")
        except PrivacyParameterError as exc:  # a clear refusal by parameter, not a crash
            print(f"  {name}: REFUSED ({type(exc).__name__}): {str(exc)[:80]}")
        except Exception as exc:
            bad += 1
            print(f"  {name}: RAISES {type(exc).__name__}: {str(exc)[:80]}")
    return bad


def main() -> None:
    counts = [part_a(), part_b(), part_c(), part_d(), part_e()]
    print("violations per part (A..E):", counts)


if __name__ == "__main__":
    main()
