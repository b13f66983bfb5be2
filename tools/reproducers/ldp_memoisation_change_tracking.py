"""Attack: memoised local protocols (RAPPOR, LOLOHA) leak *when* a device's value changes.

Claims under attack (dpkit.ldp.client and dpkit.ldp._protocols, docs/ldp.md):

* RAPPOR: "a device whose value takes k distinct values spends at most k lifetime_epsilon";
* LOLOHA: ``max_lifetime_event`` = ``g lifetime_epsilon`` "over any number of reports and value
  changes".

Both rest on "every report is a post-processing of the memoised draws". It is not: which memo a
report re-randomizes is the device's value at that time, and that sequence is not hidden. Take
the value sequences ``x = (1, 1, 1, ...)`` and ``x' = (0, 1, 0, 1, ...)`` (one and two distinct
values; one and at most two buckets). Under ``x'`` the even and the odd reports re-randomize two
independent memos, which differ with constant probability; under ``x`` they all re-randomize one
memo. After T reports the log-likelihood ratio grows linearly in T, so no finite lifetime bound
holds for sequences that change value.

Figures: (1) the exact pure-DP loss of the T-report law for small T, enumerated from the
device's own probabilities; (2) a certified lower bound (Clopper-Pearson, confidence
1 - 1e-6) from the real device classes (`dpkit.ldp.client`), event "the most frequent report of
the even rounds differs from that of the odd rounds"; (3) the same with LOLOHA's vectorised
simulator (`randomize_rounds`, the law of the device) and many more devices.

Run (repository root): PYTHONPATH=src:tests/support:benchmarks/shared python
    tools/reproducers/ldp_memoisation_change_tracking.py
Known limitation (not fixed): docs/concepts/known-limitations.md, "Local DP".
"""

from __future__ import annotations

import itertools
from collections import Counter
from typing import Any

import numpy as np

from dpkit.audit import clopper_pearson_lower, clopper_pearson_upper
from dpkit.ldp import LOLOHA as SERVER_LOLOHA
from dpkit.ldp.client import LOLOHA, RAPPOR

CONFIDENCE = 1 - 1e-6
SIDE = 1 - (1 - CONFIDENCE) / 2  # two one-sided bounds


def _grr(g: int, b: int, p: float) -> np.ndarray:
    out = np.full(g, (1 - p) / (g - 1))
    out[b] = p
    return out


def _flip(d: int, src: int, p: float) -> np.ndarray:
    out = np.zeros(1 << d)
    for y in range(1 << d):
        diff = bin(src ^ y).count("1")
        out[y] = p ** (d - diff) * (1 - p) ** diff
    return out


def exact_loloha(rounds: int, g: int | None) -> tuple[float, float]:
    """Largest |log P_x(out) - log P_x'(out)| over every output (key, y_1..y_T)."""
    c = LOLOHA(epsilon=1.0, domain=2, lifetime_epsilon=2.0, g=g)
    gg, p1, p2 = c._g, float(c.permanent_probability), float(c.instantaneous_probability)
    seqs = np.array(list(itertools.product(range(gg), repeat=rounds)))
    xs, xp = [1] * rounds, [t % 2 for t in range(rounds)]
    worst = 0.0
    for key in range(c.keys):

        def law(x: list[int], key: int = key) -> np.ndarray:
            buckets = [c.hash(key, v) for v in x]
            distinct = sorted(set(buckets))
            total = np.zeros(len(seqs))
            for memo in itertools.product(range(gg), repeat=len(distinct)):
                w = float(
                    np.prod([_grr(gg, b, p1)[m] for b, m in zip(distinct, memo, strict=True)])
                )
                mm = dict(zip(distinct, memo, strict=True))
                pr = np.ones(len(seqs))
                for t, b in enumerate(buckets):
                    pr *= _grr(gg, mm[b], p2)[seqs[:, t]]
                total += w * pr
            return total

        worst = max(worst, float(np.max(np.abs(np.log(law(xs)) - np.log(law(xp))))))
    return worst, gg * c.lifetime_run_epsilon


def exact_rappor(rounds: int) -> tuple[float, float]:
    c = RAPPOR(epsilon=1.0, domain=2, lifetime_epsilon=2.0)
    p1, p2 = float(c.permanent_probability), float(c.instantaneous_probability)
    seqs = np.array(list(itertools.product(range(4), repeat=rounds)))

    def law(x: list[int]) -> np.ndarray:
        vals = sorted(set(x))
        total = np.zeros(len(seqs))
        for memo in itertools.product(range(4), repeat=len(vals)):
            w = float(np.prod([_flip(2, 1 << v, p1)[m] for v, m in zip(vals, memo, strict=True)]))
            mm = dict(zip(vals, memo, strict=True))
            pr = np.ones(len(seqs))
            for t, v in enumerate(x):
                pr *= _flip(2, mm[v], p2)[seqs[:, t]]
            total += w * pr
        return total

    a, b = law([1] * rounds), law([t % 2 for t in range(rounds)])
    return float(np.max(np.abs(np.log(a) - np.log(b)))), 2 * c.lifetime_run_epsilon


def _modes_differ(reports: list[Any]) -> bool:
    even = Counter(reports[0::2]).most_common()
    odd = Counter(reports[1::2]).most_common()
    clear = (len(even) < 2 or even[0][1] > even[1][1]) and (len(odd) < 2 or odd[0][1] > odd[1][1])
    return clear and even[0][0] != odd[0][0]


def certified(hits_x: int, hits_xp: int, n: int) -> float:
    """ln(P_x'(E) lower / P_x(E) upper), each one-sided at 1 - 5e-7."""
    lo = float(clopper_pearson_lower(hits_xp, n, level=SIDE))
    hi = float(clopper_pearson_upper(hits_x, n, level=SIDE))
    return max(0.0, float(np.log(lo / hi)))


def device_run(make: Any, devices: int, rounds: int) -> tuple[int, int]:
    hits = []
    for seq in ([1] * rounds, [t % 2 for t in range(rounds)]):
        k = 0
        for _ in range(devices):
            dev = make()
            reports = [str(dev.randomize(v)) for v in seq]
            k += _modes_differ(reports)
        hits.append(k)
    return hits[0], hits[1]


def simulator_run(devices: int, rounds: int, chunk: int = 20_000) -> tuple[int, int]:
    proto = SERVER_LOLOHA(epsilon=1.0, domain=2, lifetime_epsilon=2.0, g=2)
    hits = []
    for seq in (np.ones(rounds, dtype=np.int64), np.arange(rounds) % 2):
        k = 0
        for start in range(0, devices, chunk):
            m = min(chunk, devices - start)
            y = proto.randomize_rounds(np.repeat(seq[:, None], m, axis=1))[:, :, 1]  # (T, m)
            even = (y[0::2] == 1).sum(axis=0) * 2 - y[0::2].shape[0]  # >0: mode 1, <0: mode 0
            odd = (y[1::2] == 1).sum(axis=0) * 2 - y[1::2].shape[0]
            k += int(np.count_nonzero(np.sign(even) * np.sign(odd) < 0))
        hits.append(k)
    return hits[0], hits[1]


def main() -> None:
    print("exact pure-DP loss of T reports, x = (1,1,...) vs x' = (0,1,0,1,...), eps 1, life 2")
    for t in (2, 6, 10):
        loss, claim = exact_loloha(t, None)
        print(f"  LOLOHA (g=3) T={t:2d}: exact {loss:.2f}, claimed max_lifetime_event {claim:.2f}")
    for t in (2, 6, 8):
        loss, claim = exact_rappor(t)
        print(f"  RAPPOR       T={t:2d}: exact {loss:.2f}, claimed for 2 values {claim:.2f}")

    rounds, devices = 200, 5000
    print(f"device classes, {devices} devices per sequence, {rounds} reports each:")
    hx, hxp = device_run(
        lambda: RAPPOR(epsilon=1.0, domain=2, lifetime_epsilon=2.0), devices, rounds
    )
    print(
        f"  RAPPOR: event on x {hx}/{devices}, on x' {hxp}/{devices}: certified eps >= "
        f"{certified(hx, hxp, devices):.2f} (claim for 2 values: 4.00)"
    )
    hx, hxp = device_run(
        lambda: LOLOHA(epsilon=1.0, domain=2, lifetime_epsilon=2.0, g=2), devices, rounds
    )
    print(
        f"  LOLOHA g=2: event on x {hx}/{devices}, on x' {hxp}/{devices}: certified eps >= "
        f"{certified(hx, hxp, devices):.2f} (max_lifetime_event: 4.00)"
    )
    devices = 400_000
    hx, hxp = simulator_run(devices, rounds)
    print(
        f"  LOLOHA g=2 simulator, {devices} devices: event on x {hx}, on x' {hxp}: certified "
        f"eps >= {certified(hx, hxp, devices):.2f} (max_lifetime_event: 4.00)"
    )


if __name__ == "__main__":
    main()
