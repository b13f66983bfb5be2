"""Attack 4: are the zCDP / GDP conversions ever below the truth (mpmath, 60 digits)?

For random (rho, delta), (rho, eps), (mu, eps), (mu, delta) and slack A, compare dpkit's
rounded-up answers with an independent high-precision evaluation of the same formula:

* zCDP -> (eps, delta): CKS 2020 Prop. 12 at every order alpha is valid, so the truth we
  compare against is inf_alpha computed by mpmath (findroot on the derivative + a dense grid);
  dpkit must never report a *smaller* epsilon (or delta) than that infimum.
* mu-GDP: the exact profile delta_mu(eps) = Phi(-eps/mu + mu/2) - e^eps Phi(-eps/mu - mu/2).

Prints the worst ratio (dpkit / truth); a value below 1 is a violation.
Run: PYTHONPATH=src python tools/reproducers/conversions_vs_mpmath.py
"""

from __future__ import annotations

import math
import random

import mpmath as mp

from dpkit._numeric.gaussian import gaussian_delta_up, gaussian_mu_for
from dpkit.accounting.gdp import gdp_delta, gdp_epsilon
from dpkit.accounting.zcdp import zcdp_delta, zcdp_epsilon, zcdp_rho_for

mp.mp.dps = 40


def true_gauss_delta(eps: float, mu: float, slack: float = 0.0) -> mp.mpf:
    e = mp.mpf(eps) - 2 * mp.mpf(slack)
    m = mp.mpf(mu)
    val = mp.ncdf(-e / m + m / 2) - mp.exp(e) * mp.ncdf(-e / m - m / 2)
    return mp.exp(mp.mpf(slack)) * max(val, mp.mpf(0))


def _inf_over_orders(f: object) -> mp.mpf:
    """inf over alpha = 1 + e^t, t in [-40, 40]: a scan (step 0.05) then golden refinement."""
    h = lambda t: f(1 + mp.exp(t))  # noqa: E731
    ts = [mp.mpf(-40) + mp.mpf(k) / 20 for k in range(1601)]
    vals = [h(t) for t in ts]
    i = min(range(len(vals)), key=vals.__getitem__)
    lo, hi = ts[max(i - 1, 0)], ts[min(i + 1, len(ts) - 1)]
    g = (mp.sqrt(5) - 1) / 2
    for _ in range(120):
        a, b = hi - g * (hi - lo), lo + g * (hi - lo)
        if h(a) <= h(b):
            hi = b
        else:
            lo = a
    return min(vals[i], h((lo + hi) / 2))


def cks_eps(rho: float, delta: float) -> mp.mpf:
    r, ld = mp.mpf(rho), mp.log(mp.mpf(delta))

    def f(a: mp.mpf) -> mp.mpf:
        return a * r + mp.log(1 - 1 / a) - (ld + mp.log(a)) / (a - 1)

    simple = r + 2 * mp.sqrt(r * -ld)
    return min(_inf_over_orders(f), simple)


def cks_delta(rho: float, eps: float) -> mp.mpf:
    r, e = mp.mpf(rho), mp.mpf(eps)

    def g(a: mp.mpf) -> mp.mpf:
        return (a - 1) * (a * r - e + mp.log(1 - 1 / a)) - mp.log(a)

    out = mp.exp(min(_inf_over_orders(g), mp.mpf(0)))
    if e > r:
        out = min(out, mp.exp(-((e - r) ** 2) / (4 * r)))
    return out


def main() -> None:
    rng = random.Random(12345)
    worst: dict[str, float] = {}

    def note(name: str, reported: float, truth: mp.mpf) -> None:
        if truth <= 0:  # nothing to certify (epsilon 0 is reported as 0)
            return
        ratio = float(mp.mpf(reported) / truth)
        if ratio < worst.get(name, math.inf):
            worst[name] = ratio
        if ratio < 1.0 and not (reported == 1.0 and truth >= 1):  # delta is capped at 1
            print(f"VIOLATION {name}: reported {reported!r} < truth {mp.nstr(truth, 20)}")

    for _ in range(300):
        rho = 10 ** rng.uniform(-8, 2)
        delta = 10 ** rng.uniform(-300, -1)
        eps = 10 ** rng.uniform(-4, 2)
        mu = 10 ** rng.uniform(-4, 1.3)
        slack = rng.choice([0.0, 2.0**-23, 2.0**-12, 1e-3])
        note("zcdp_epsilon", zcdp_epsilon(rho, delta), cks_eps(rho, delta))
        note("zcdp_delta", zcdp_delta(rho, eps), cks_delta(rho, eps))
        note("gaussian_delta_up", gaussian_delta_up(eps, mu), true_gauss_delta(eps, mu))
        note("gdp_delta(slack)", gdp_delta(mu, slack, eps), true_gauss_delta(eps, mu, slack))
        # epsilon from delta: the profile at the reported epsilon must be <= delta
        e_rep = gdp_epsilon(mu, slack, delta)
        if math.isfinite(e_rep):
            t = true_gauss_delta(e_rep, mu, slack)
            if t > 0:
                note("gdp_epsilon (delta/profile)", float(mp.mpf(delta) / t) + 0.0, mp.mpf(1))
        # calibration: mu_for(eps, delta) must satisfy delta_mu(eps) <= delta
        m = gaussian_mu_for(eps, delta)
        if m > 0:
            t = true_gauss_delta(eps, m)
            if t > 0:
                note("gaussian_mu_for (delta/profile)", float(mp.mpf(delta) / t), mp.mpf(1))
        r = zcdp_rho_for(eps, delta)
        if r > 0:
            t = cks_delta(r, eps)
            if t > 0:
                note("zcdp_rho_for (delta/cks)", float(mp.mpf(delta) / t), mp.mpf(1))
    for k, v in sorted(worst.items()):
        print(f"{k:35s} worst dpkit/truth = {v:.15g}")


if __name__ == "__main__":
    main()
