"""Attack 5: which floating-point leakers does the default audit (float_structure) catch?

Each leaker is x + Laplace(1) noise for x in {0, 1}, claimed 1-DP (true epsilon 1 for the
distribution of the value; the leaks below make the true epsilon infinite):

* textbook: ``x + laplace`` in doubles (Mironov 2012);
* sign_of_zero: a lattice (multiples of 2**-4) release whose zero is ``-0.0`` when x = 1;
* low_bit1: a full-precision double whose significand bit 1 is set to x;
* mid_bit20: a full-precision double whose significand bit 20 is set to x (above the lowest set
  bit and above the 8 bits that float_low_bits keeps);
* payload: a lattice release whose exact zero becomes a NaN with payload x... (not run: NaN is
  not a plausible release output).

For each: the default audit (confidence 1 - 1e-6), ``HistogramTester(feature=float_low_bits)``,
and a tester keyed on the leaking bit (to certify that the leak is real and cheap to detect).
Run: PYTHONPATH=src python tools/reproducers/float_structure_leakers.py
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from dpkit.audit import Claim, audit
from dpkit.audit._testers import HistogramTester, float_low_bits
from dpkit.noise import RandomSource

N = 100_000
_src = RandomSource()


def _lap(size: int) -> Any:
    g = np.random.default_rng(int.from_bytes(_src.words(1).tobytes(), "little"))
    return g.laplace(0.0, 1.0, size)


def textbook(x: int, size: int) -> Any:
    return x + _lap(size)


def sign_of_zero(x: int, size: int) -> Any:
    y = np.rint((x + _lap(size)) * 16.0) / 16.0 - x  # centred lattice noise ...
    y = y + x
    if x == 1:
        y = np.where(y == 0.0, -0.0, y)
    return y


def _set_bit(y: Any, bit: int, x: int) -> Any:
    b = np.ascontiguousarray(y, dtype=np.float64).view(np.uint64).copy()
    mask = np.uint64(1 << bit)
    b = (b | mask) if x else (b & ~mask)
    return b.view(np.float64)


def low_bit1(x: int, size: int) -> Any:
    return _set_bit(_lap(size), 1, x)


def mid_bit20(x: int, size: int) -> Any:
    return _set_bit(_lap(size), 20, x)


def _bit(k: int) -> Callable[[Any], Any]:
    def f(v: Any) -> Any:
        b = np.ascontiguousarray(v, dtype=np.float64).view(np.uint64)
        return ((b >> np.uint64(k)) & np.uint64(1)).astype(np.int64)

    return f


def main() -> None:
    claim = Claim.pure(epsilon=1.0)
    cases = [
        ("textbook", textbook, None),
        ("sign_of_zero", sign_of_zero, None),
        ("low_bit1", low_bit1, 1),
        ("mid_bit20", mid_bit20, 20),
    ]
    for name, mech, bit in cases:
        row = [name]
        for label, testers in [
            ("default", None),
            ("float_low_bits", [HistogramTester(feature=float_low_bits)]),
        ]:
            r = audit(
                mech,
                pair=(0, 1),
                samples=N,
                vectorized=True,
                confidence=1 - 1e-6,
                claim=claim,
                testers=testers,
            )
            row.append(f"{label}: eps>={r.epsilon_lower_bound:.2f}")
        if bit is not None:
            r = audit(
                mech,
                pair=(0, 1),
                samples=N,
                vectorized=True,
                confidence=1 - 1e-6,
                claim=claim,
                testers=[HistogramTester(feature=_bit(bit))],
            )
            row.append(f"bit{bit} feature: eps>={r.epsilon_lower_bound:.2f}")
        print(" | ".join(row))


if __name__ == "__main__":
    main()
