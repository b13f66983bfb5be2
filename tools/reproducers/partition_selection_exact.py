"""Attack 2: exact check of PartitionSelection's table and GaussianPartitionSelection's delta.

* PartitionSelection: for every n, with p(n) = P(n)/2**63 and e^{eps/k} in 50-digit mpmath,
  check p(n) <= e^{eps/k} p(n-1) + delta/k and 1 - p(n-1) <= e^{eps/k} (1 - p(n)) + delta/k
  (the only two non-trivial DP inequalities of a monotone coin), p monotone, p(threshold) = 1.
* GaussianPartitionSelection: threshold_delta >= k * P[Z >= tau] for the exact discrete
  Gaussian (mpmath sums) and delta_at(eps) >= the exact hockey-stick divergence of the whole
  release for k = 1 (one shared key with count n and one key private to D'), both directions.

Run: PYTHONPATH=src python tools/reproducers/partition_selection_exact.py
"""

from __future__ import annotations

import mpmath as mp

from dpkit.mechanisms import GaussianPartitionSelection, PartitionSelection

mp.mp.dps = 50
T = mp.mpf(2) ** 63


def check_table(eps: float, delta: float, L: int, rel: str) -> str:
    ps = PartitionSelection(epsilon=eps, delta=delta, max_partitions=L, neighbouring=rel)
    k = 2 * L if rel == "replace" else L
    a = mp.exp(mp.mpf(eps) / k)
    d = mp.mpf(delta) / k
    tab = [mp.mpf(int(x)) / T for x in ps._table]
    worst = mp.mpf(-1)
    for n in range(1, len(tab)):
        p0, p1 = tab[n - 1], tab[n]
        assert p1 >= p0
        worst = max(worst, p1 - (a * p0 + d), (1 - p0) - (a * (1 - p1) + d))
    assert tab[-1] == 1 and tab[0] == 0
    return (
        f"eps={eps} delta={delta} L={L} {rel}: threshold={ps.threshold} "
        f"max slack={mp.nstr(worst, 5)} (must be <= 0)"
    )


def dg_pmf(sigma: float, lim: int) -> dict[int, mp.mpf]:
    s2 = 2 * mp.mpf(sigma) ** 2
    w = {z: mp.exp(-(mp.mpf(z) ** 2) / s2) for z in range(-lim, lim + 1)}
    tot = sum(w.values())
    return {z: v / tot for z, v in w.items()}


def hockey(p: dict, q: dict, eps: float) -> mp.mpf:
    e = mp.exp(mp.mpf(eps))
    return sum(max(p.get(x, 0) - e * q.get(x, 0), 0) for x in set(p) | set(q))


def exact_delta(g: GaussianPartitionSelection, eps: float, n: int) -> mp.mpf:
    """k = 1, add/remove: D has one shared key with n units; D' adds a unit to the shared key
    (n+1) OR to a new key (count 1). Outputs: (noisy shared count if > tau else None, new key
    released?). Worst of both neighbours, both directions."""
    lim = int(40 * g.sigma) + g.tau + n + 5
    pmf = dg_pmf(g.sigma, lim)

    def law(shared: int, private: int | None) -> dict:
        out: dict = {}
        p_new = sum(v for z, v in pmf.items() if private is not None and private + z > g.tau)
        for z, v in pmf.items():
            key = shared + z if shared + z > g.tau else None
            for bit, pb in ((True, p_new), (False, 1 - p_new)):
                if pb:
                    out[(key, bit)] = out.get((key, bit), 0) + v * pb
        return out

    base = law(n, None)
    best = mp.mpf(0)
    for other in (law(n + 1, None), law(n, 1)):
        best = max(best, hockey(base, other, eps), hockey(other, base, eps))
    return best


def main() -> None:
    for eps, delta, L, rel in [
        (1.0, 1e-6, 1, "add_remove"),
        (0.1, 1e-9, 1, "add_remove"),
        (2.0, 1e-5, 3, "add_remove"),
        (1.0, 1e-7, 2, "replace"),
        (5.0, 0.3, 1, "add_remove"),
        (1e-3, 1e-3, 1, "add_remove"),
    ]:
        print(check_table(eps, delta, L, rel))
    for eps, delta in [(1.0, 1e-6), (0.5, 1e-8), (3.0, 1e-4)]:
        g = GaussianPartitionSelection.from_epsilon_delta(epsilon=eps, delta=delta)
        pmf = dg_pmf(g.sigma, int(40 * g.sigma) + g.tau + 5)
        tail = sum(v for z, v in pmf.items() if z >= g.tau)
        worst = max(exact_delta(g, eps, n) for n in (0, g.tau - 3, g.tau, g.tau + 1, g.tau + 5))
        print(
            f"Gaussian eps={eps} delta={delta}: sigma={g.sigma:.4f} tau={g.tau} "
            f"threshold_delta={g.threshold_delta:.4e} >= exact tail {mp.nstr(tail, 6)}; "
            f"delta_at={g.delta_at(eps):.4e} >= exact {mp.nstr(worst, 6)}: "
            f"{g.threshold_delta >= tail and g.delta_at(eps) >= worst}"
        )


if __name__ == "__main__":
    main()
