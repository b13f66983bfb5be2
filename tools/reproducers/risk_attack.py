"""Attack on dpkit.risk: is every reported membership TPR an upper bound of the true one?

Each check computes points (alpha, 1 - beta) on the *true* trade-off curve of a mechanism by an
independent route (closed forms, mpmath integrals of the privacy-loss law, exact discrete
Neyman-Pearson, dp-accounting's optimistic PLD) and asserts ``risk.of(...).tpr(alpha) >= 1 - beta``
up to a stated tolerance. Run: ``PYTHONPATH=src python tools/reproducers/risk_attack.py``.
"""

from __future__ import annotations

import math
import sys

import mpmath as mp
import numpy as np
from dp_accounting.pld import privacy_loss_distribution as dpa
from scipy.stats import binom, norm

from dpkit import risk
from dpkit.events import (
    DiscreteGaussianEvent,
    DiscreteLaplaceEvent,
    GaussianEvent,
    LaplaceEvent,
    PoissonSampledEvent,
    RandomizedResponseEvent,
    SampledWithoutReplacementEvent,
)

mp.mp.dps = 40
FAIL: list[str] = []
HELD: list[str] = []


def check(name: str, alphas, truth, got, tol=1e-9) -> None:
    alphas, truth, got = (np.asarray(x, dtype=float) for x in (alphas, truth, got))
    gap = truth - got
    worst = int(np.argmax(gap))
    if gap[worst] > tol:
        FAIL.append(
            f"{name}: at fpr={alphas[worst]:.3g} reported {got[worst]:.10g} < true "
            f"{truth[worst]:.10g}"
            f" (short by {gap[worst]:.3g})"
        )
    else:
        HELD.append(f"{name}: min slack {-gap[worst]:.2e} over {len(alphas)} points")


def roc_discrete(p, q):
    """Exact NP curve of two pmfs: vertices (alpha, tpr), alpha under p, tpr under q."""
    p, q = np.asarray(p, float), np.asarray(q, float)
    with np.errstate(divide="ignore"):
        lr = np.where(p > 0, q / np.where(p > 0, p, 1), np.inf)
    order = np.argsort(-lr, kind="stable")
    a = np.concatenate([[0.0], np.cumsum(p[order])])
    t = np.concatenate([[0.0], np.cumsum(q[order])])
    return a, t


def tpr_interp(vert_a, vert_t, alphas):
    return np.interp(alphas, vert_a, vert_t)


ALPHAS = np.unique(np.concatenate([np.geomspace(1e-8, 1, 200), np.linspace(0, 1, 101)]))


# --- Laplace closed form (DRS)
def laplace_tpr(m, a):
    a = mp.mpf(a)
    m = mp.mpf(m)
    if a < mp.e ** (-m) / 2:
        f = 1 - mp.e**m * a
    elif a <= mp.mpf(1) / 2:
        f = mp.e ** (-m) / (4 * a)
    else:
        f = mp.e ** (-m) * (1 - a)
    return float(1 - f)


for b in (0.1, 0.5, 1.0, 3.0, 20.0):
    r = risk.of(LaplaceEvent(noise_multiplier=b))
    check(f"laplace b={b}", ALPHAS, [laplace_tpr(1 / b, a) for a in ALPHAS], r.tpr(ALPHAS))

# --- RR exact
for p, k in ((0.75, 2), (0.9, 2), (0.6, 5), (0.99, 10), (0.5, 2), (0.3, 4)):
    r_ = (1 - p) / (k - 1)
    P = [p, r_] + [r_] * (k - 2)
    Q = [r_, p] + [r_] * (k - 2)
    va, vt = roc_discrete(P, Q)
    r = risk.of(RandomizedResponseEvent(p_truth=p, categories=k))
    check(f"rr p={p} k={k}", ALPHAS, tpr_interp(va, vt, ALPHAS), r.tpr(ALPHAS))


# --- discrete Laplace / Gaussian exact
def dlap(scale, n=4000):
    ks = np.arange(-n, n + 1)
    w = np.exp(-np.abs(ks) / scale)
    return ks, w / w.sum()


for scale, sens in ((1.0, 1), (2.0, 3), (0.5, 1), (10.0, 2)):
    ks, w = dlap(scale)
    P = w
    Q = np.roll(w, sens)
    va, vt = roc_discrete(P, Q)
    r = risk.of(DiscreteLaplaceEvent(scale=scale, sensitivity=sens))
    check(
        f"discrete laplace s={scale} d={sens}",
        ALPHAS,
        tpr_interp(va, vt, ALPHAS),
        r.tpr(ALPHAS),
        tol=1e-7,
    )

for sigma, sens in ((1.0, 1), (3.0, 2), (0.6, 1), (10.0, 1)):
    n = int(sigma * 40) + 50
    ks = np.arange(-n, n + 1)
    w = np.exp(-(ks.astype(float) ** 2) / (2 * sigma**2))
    w /= w.sum()
    va, vt = roc_discrete(w, np.roll(w, sens))
    r = risk.of(DiscreteGaussianEvent(sigma=sigma, sensitivity=sens))
    check(
        f"discrete gaussian s={sigma} d={sens}",
        ALPHAS,
        tpr_interp(va, vt, ALPHAS),
        r.tpr(ALPHAS),
        tol=1e-7,
    )


# --- mixed composition: Gauss + Laplace + RR
def mixed_points(mu, m, p, ts):
    """Exact (alpha, tpr) of the NP test L > t for the product of G_mu, Lap(0,1) vs Lap(m,1) and
    binary RR(p), via the privacy-loss law (mpmath quadrature)."""
    mu, m, p = mp.mpf(mu), mp.mpf(m), mp.mpf(p)
    e = mp.log(p / (1 - p)) if p != mp.mpf(1) / 2 else mp.mpf(0)
    rrP = [(e, 1 - p), (-e, p)]
    rrQ = [(e, p), (-e, 1 - p)]

    def ga(s):  # P(L_G > s)
        return mp.ncdf(-(s + mu**2 / 2) / mu)

    def gb(s):  # Q(L_G <= s)
        return mp.ncdf((s - mu**2 / 2) / mu)

    def lap_a(s):  # P(L_G + L_Lap > s)
        mid = mp.quad(lambda x: mp.e ** (-x) / 2 * ga(s - (2 * x - m)), [0, m])
        return ga(s + m) / 2 + mp.e ** (-m) / 2 * ga(s - m) + mid

    def lap_b(s):  # Q(L_G + L_Lap <= s)
        mid = mp.quad(lambda x: mp.e ** (-(m - x)) / 2 * gb(s - (2 * x - m)), [0, m])
        return mp.e ** (-m) / 2 * gb(s + m) + gb(s - m) / 2 + mid

    out = []
    for t in ts:
        t = mp.mpf(t)
        a = sum(wp * lap_a(t - lr) for lr, wp in rrP)
        b = sum(wq * lap_b(t - lr) for lr, wq in rrQ)
        out.append((float(a), float(1 - b)))
    return out


for sig1, sig2, lb, p in (
    ()
    if "fast" in sys.argv
    else ((1.0, 2.0, 1.0, 0.75), (3.0, 0.8, 0.5, 0.6), (2.0, 5.0, 4.0, 0.9))
):
    mu = math.sqrt(1 / sig1**2 + 1 / sig2**2)
    ev = [
        GaussianEvent(noise_multiplier=sig1, neighbouring="replace"),
        LaplaceEvent(noise_multiplier=lb, neighbouring="replace"),
        RandomizedResponseEvent(p_truth=p),
        GaussianEvent(noise_multiplier=sig2, neighbouring="replace"),
    ]
    r = risk.of(ev)
    ts = np.linspace(-6, 8, 57)
    pts = mixed_points(mu, 1 / lb, p, ts)
    al = [a for a, _ in pts]
    check(f"gauss({sig1})+gauss({sig2})+laplace({lb})+rr({p})", al, [t for _, t in pts], r.tpr(al))


# --- Poisson-subsampled Gaussian, one step

for q, sigma in ((0.01, 1.0), (0.1, 0.8), (0.5, 2.0), (0.001, 0.6), (1.0, 1.0)):
    r = risk.of(PoissonSampledEvent(sampling_rate=q, event=GaussianEvent(noise_multiplier=sigma)))
    ts = np.linspace(-10, 12, 400) * sigma
    # add: P = N(0), Q = mix; reject x > t
    a1 = norm.sf(ts / sigma)
    t1 = (1 - q) * norm.sf(ts / sigma) + q * norm.sf((ts - 1) / sigma)
    # remove: P = mix, Q = N(0); reject x < t
    a2 = (1 - q) * norm.cdf(ts / sigma) + q * norm.cdf((ts - 1) / sigma)
    t2 = norm.cdf(ts / sigma)
    check(f"poisson q={q} sigma={sigma} (add)", a1, t1, r.tpr(a1))
    check(f"poisson q={q} sigma={sigma} (remove)", a2, t2, r.tpr(a2))


# --- many-fold compositions vs dp-accounting (optimistic)

EPS_GRID = np.concatenate([np.linspace(0.0, 3.0, 3001), np.linspace(3.0, 40.0, 3701)[1:]])


def ref_tpr(pld, alphas):
    """TPR of the profile of an *optimistic* PLD (delta below the truth): a lower reference
    (up to the eps-grid; symmetric mechanisms only)."""
    d = np.asarray(pld.get_delta_for_epsilon(EPS_GRID))
    e = EPS_GRID
    out = []
    for a in alphas:
        line1 = d + np.exp(e) * a
        line2 = 1 - np.exp(-e) * (1 - d - a)
        out.append(min(1.0, float(np.min(np.minimum(line1, line2)))))
    return np.asarray(out)


LOW = np.asarray([1e-7, 1e-6, 1e-5, 1e-4, 1e-3, 1e-2, 0.05, 0.1, 0.3, 0.5])
DI = 2e-4

cases = []
# heterogeneous Gaussians + Laplace + RR, with counts
ev = [
    (GaussianEvent(noise_multiplier=4.0, neighbouring="replace"), 30),
    (LaplaceEvent(noise_multiplier=20.0, neighbouring="replace"), 10),
    (RandomizedResponseEvent(p_truth=0.55), 5),
]
pl = (
    dpa.from_gaussian_mechanism(4.0, value_discretization_interval=DI, pessimistic_estimate=False)
    .self_compose(30)
    .compose(
        dpa.from_laplace_mechanism(
            20.0, value_discretization_interval=DI, pessimistic_estimate=False
        ).self_compose(10)
    )
    .compose(
        dpa.from_randomized_response(
            0.9, 2, value_discretization_interval=DI, pessimistic_estimate=False
        ).self_compose(5)
    )
)
cases.append(("30 gauss(4)+10 laplace(20)+5 rr(0.55)", ev, pl))
for name, ev, pl in cases:
    check(name, LOW, ref_tpr(pl, LOW), risk.of(ev).tpr(LOW), tol=1e-6)


def opt(pl_fn, *a, **k):
    return (
        pl_fn(
            *a,
            value_discretization_interval=DI,
            pessimistic_estimate=False,
            use_connect_dots=False,
            **k,
        )
        if pl_fn is dpa.from_gaussian_mechanism
        else pl_fn(*a, value_discretization_interval=DI, pessimistic_estimate=False, **k)
    )


# more than 2000 releases: the self-tensor path
ev = [
    (LaplaceEvent(noise_multiplier=200.0, neighbouring="replace"), 2500),
    (GaussianEvent(noise_multiplier=10.0, neighbouring="replace"), 1),
]
pl = (
    opt(dpa.from_laplace_mechanism, 200.0)
    .self_compose(2500)
    .compose(opt(dpa.from_gaussian_mechanism, 10.0))
)
check("2500 laplace(200)+gauss(10)", LOW, ref_tpr(pl, LOW), risk.of(ev).tpr(LOW), tol=1e-6)
ev = [(RandomizedResponseEvent(p_truth=0.51), 3000)]
pl = opt(dpa.from_randomized_response, 0.98, 2).self_compose(3000)
check("3000 rr(0.51)", LOW, ref_tpr(pl, LOW), risk.of(ev).tpr(LOW), tol=1e-6)
ev = [
    (LaplaceEvent(noise_multiplier=50.0, neighbouring="replace"), 1999),
    (RandomizedResponseEvent(p_truth=0.505), 1),
]
pl = (
    opt(dpa.from_laplace_mechanism, 50.0)
    .self_compose(1999)
    .compose(opt(dpa.from_randomized_response, 0.99, 2))
)
check("1999 laplace(50)+rr", LOW, ref_tpr(pl, LOW), risk.of(ev).tpr(LOW), tol=1e-6)

# DP-SGD: Poisson-subsampled Gaussian, many steps (add/remove)
for q, sigma, T in ((0.01, 1.0, 1000), (0.001, 0.8, 10000), (0.1, 2.0, 300)):
    pl = dpa.from_gaussian_mechanism(
        sigma,
        sampling_prob=q,
        value_discretization_interval=1e-3,
        pessimistic_estimate=False,
        use_connect_dots=False,
    ).self_compose(T)
    ev = [(PoissonSampledEvent(sampling_rate=q, event=GaussianEvent(noise_multiplier=sigma)), T)]
    check(f"dpsgd q={q} sigma={sigma} T={T}", LOW, ref_tpr(pl, LOW), risk.of(ev).tpr(LOW), tol=1e-6)


# --- groups against exact group curves
def gauss_tpr(mu, a):
    return norm.sf(norm.isf(np.asarray(a)) - mu)


for k in (2, 3, 7, 20):
    for rho in (0.01, 0.5, 2.0):
        r = risk.of(rho=rho).group(k)
        check(
            f"zcdp rho={rho} group {k} vs G_(k sqrt(2 rho))",
            LOW,
            gauss_tpr(k * math.sqrt(2 * rho), LOW),
            r.tpr(LOW),
        )
    # k people each answering binary RR: the exact curve of k independent RR responses
    pp = 0.7
    P = binom.pmf(np.arange(k + 1), k, 1 - pp)  # count of "1" answers when all true values are 0
    Q = binom.pmf(np.arange(k + 1), k, pp)
    va, vt = roc_discrete(P, Q)
    r = risk.of(RandomizedResponseEvent(p_truth=pp)).group(k)
    check(
        f"rr(0.7) group {k} vs k independent responses",
        ALPHAS,
        tpr_interp(va, vt, ALPHAS),
        r.tpr(ALPHAS),
    )
    # Gaussian + Laplace release, group of k: the sensitivities grow k-fold
    ev = [
        GaussianEvent(noise_multiplier=6.0, neighbouring="replace"),
        LaplaceEvent(noise_multiplier=8.0, neighbouring="replace"),
    ]
    r = risk.of(ev).group(k)
    if "fast" not in sys.argv or k == 3:
        pts = mixed_points(k / 6.0, k / 8.0, 0.5, np.linspace(-5, 8, 27))
        al = [a for a, _ in pts]
        check(f"gauss(6)+laplace(8) group {k} (exact shifted)", al, [t for _, t in pts], r.tpr(al))
    # (epsilon, delta) group vs the exact group curve of a mechanism meeting it: RR with that eps
    eps = 0.4
    pr = math.exp(eps) / (1 + math.exp(eps))
    P = binom.pmf(np.arange(k + 1), k, 1 - pr)
    Q = binom.pmf(np.arange(k + 1), k, pr)
    va, vt = roc_discrete(P, Q)
    check(
        f"eps=0.4 group {k} vs k RR responses",
        ALPHAS,
        tpr_interp(va, vt, ALPHAS),
        risk.of(epsilon=eps).group(k).tpr(ALPHAS),
    )


# --- posterior: loss tail of an exact composition
for sg, lb in ((1.0, 2.0), (3.0, 0.7)):
    mu = 1 / sg
    ev = [
        GaussianEvent(noise_multiplier=sg, neighbouring="replace"),
        LaplaceEvent(noise_multiplier=lb, neighbouring="replace"),
    ]
    r = risk.of(ev)
    for fail in (1e-2, 1e-4, 1e-6):
        post = r.posterior(0.01, failure=fail)
        ((_, qtail),) = mixed_points(mu, 1 / lb, 0.5, [post.epsilon])
        qtail = float(qtail)
        if qtail > fail * (1 + 1e-9):
            FAIL.append(
                f"posterior gauss({sg})+lap({lb}) failure {fail}: "
                f"Q(L > {post.epsilon:.4g}) = {qtail:.3g}"
            )
        else:
            HELD.append(
                f"posterior gauss({sg})+lap({lb}) failure {fail}: "
                f"Q(L > eps) = {qtail:.3g} <= {fail}"
            )
for bb in (0.5, 2.0):
    post = risk.of(LaplaceEvent(noise_multiplier=bb)).posterior(0.01, failure=0.0)
    truth = 0.01 * math.exp(1 / bb) / (0.01 * math.exp(1 / bb) + 0.99)
    (HELD if post.bound >= truth and post.failure == 0.0 else FAIL).append(
        f"posterior laplace b={bb} failure 0: {post.bound:.6g} vs exact worst {truth:.6g}"
    )


# --- pmf slack: adversarial actual laws within e^{+-A}
def feasible(A, p, q):
    """Can Q' = e^A Q and P' = e^-A P on a set S (complements rescaled) stay within e^{+-A}?"""
    ea = math.exp(A)
    if ea * q > 1:
        return False
    cq = (1 - ea * q) / (1 - q) if q < 1 else 1.0
    cp = (1 - p / ea) / (1 - p) if p < 1 else 1.0
    return cq >= 1 / ea - 1e-15 and cp <= ea + 1e-15


for A in (1e-6, 1e-3, 0.1):
    for sigma in (0.5, 3.0):
        r = risk.of(GaussianEvent(noise_multiplier=sigma, pmf_slack=A))
        pts = []
        for t in np.linspace(-3, 8, 300) * sigma:
            ps, qs = norm.sf(t / sigma), norm.sf((t - 1) / sigma)
            if feasible(A, ps, qs):
                pts.append((math.exp(-A) * ps, math.exp(A) * qs))
        check(
            f"gaussian sigma={sigma} pmf_slack={A} (adversarial laws)",
            [a for a, _ in pts],
            [t for _, t in pts],
            r.tpr([a for a, _ in pts]),
        )
for A in (1e-3, 0.05):
    for scale, sens in ((1.0, 1), (3.0, 2)):
        ks = np.arange(-300, 301)
        P = np.exp(-np.abs(ks) / scale)
        P /= P.sum()
        Q = np.roll(P, sens)
        order = np.argsort(-(np.log(Q) - np.log(P)), kind="stable")
        cum_p, cum_q = np.cumsum(P[order]), np.cumsum(Q[order])
        pts = [
            (math.exp(-A) * a, math.exp(A) * t)
            for a, t in zip(cum_p, cum_q, strict=True)
            if feasible(A, a, t)
        ]
        r = risk.of(DiscreteLaplaceEvent(scale=scale, sensitivity=sens, pmf_slack=A))
        check(
            f"discrete laplace s={scale} d={sens} pmf_slack={A} (adversarial laws)",
            [a for a, _ in pts],
            [t for _, t in pts],
            r.tpr([a for a, _ in pts]),
        )


# --- fixed-size batches (replace-one): dp-accounting's REPLACE_ONE pair, contribution 1/2
# (dpkit's replace-one sensitivity is twice one record's contribution)
for n, b, s_, T in ((1000, 10, 1.0, 50), (100, 50, 2.0, 20)):
    inner = GaussianEvent(noise_multiplier=s_, neighbouring="replace")
    ev = [(SampledWithoutReplacementEvent(sample_size=b, dataset_size=n, event=inner), T)]
    pl = dpa.from_gaussian_mechanism(
        s_,
        sensitivity=0.5,
        sampling_prob=b / n,
        neighboring_relation=dpa.NeighborRel.REPLACE_ONE,
        value_discretization_interval=1e-3,
        pessimistic_estimate=False,
        use_connect_dots=False,
    ).self_compose(T)
    check(
        f"without replacement b={b} n={n} sigma={s_} T={T}",
        LOW,
        ref_tpr(pl, LOW),
        risk.of(ev).tpr(LOW),
        tol=1e-6,
    )


# --- advantage = total variation of the pair
def held_if(ok, what):
    (HELD if ok else FAIL).append(what)


for bb in (0.1, 1.0, 5.0):
    a = risk.of(LaplaceEvent(noise_multiplier=bb)).advantage()
    held_if(a >= 1 - math.exp(-1 / (2 * bb)), f"advantage laplace b={bb}: {a:.6g} vs TV")
for p_, k in ((0.75, 2), (0.6, 5), (0.999, 100)):
    a = risk.of(RandomizedResponseEvent(p_truth=p_, categories=k)).advantage()
    held_if(a >= p_ - (1 - p_) / (k - 1), f"advantage rr p={p_} k={k}: {a:.6g} vs TV")
for q, sg in ((0.1, 1.0), (0.5, 0.5), (1.0, 2.0)):
    ev1 = PoissonSampledEvent(sampling_rate=q, event=GaussianEvent(noise_multiplier=sg))
    a = risk.of(ev1).advantage()
    held_if(
        a >= q * (2 * norm.cdf(1 / (2 * sg)) - 1), f"advantage poisson q={q} sigma={sg}: {a:.6g}"
    )

if __name__ == "__main__":
    for h in HELD:
        print("held  ", h)
    for f in FAIL:
        print("FAIL  ", f)
    sys.exit(1 if FAIL else 0)
