"""Wide count noise is summed in runs of consecutive values: still certified, barely wider.

A mean's or variance's interval bounds a tail probability summed over every value of the
count's noise ``Z_N`` (:func:`dpkit.analytics._intervals._support`). At small epsilon that law
spans up to 200,001 values, and a grouped variance (1,024 cells of its envelope) summed them
all at every step of its bisection: about 100 s for one query. The values are now read in at
most ``_GROUPS`` runs, each bounded at its worst corner, so every half-width is at least the
exact one (never narrower than certified) and, as checked here, at most 1% wider.
"""

from __future__ import annotations

import numpy as np
import pytest

import dpkit.analytics._intervals as iv
from dpkit.analytics._pricing import Noise

CASES = [
    ("discrete_laplace", 300.0),
    ("discrete_laplace", 3000.0),
    ("discrete_gaussian", 300.0),
    ("discrete_gaussian", 3000.0),
]


def _exact(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(iv, "_GROUPS", 10**9)


@pytest.mark.parametrize(("kind", "scale"), CASES)
def test_runs_cover_the_support_with_its_whole_mass(kind: str, scale: float) -> None:
    nn = Noise(kind, scale)  # type: ignore[arg-type]
    sup = iv._support(nn, 0.05)
    assert sup is not None
    k_lo, k_hi, pk, _ = sup
    assert len(pk) <= iv._GROUPS
    h = nn.halfwidth(0.05 * iv._TRUNC)
    assert k_lo[0] == -h and k_hi[-1] == h
    assert np.all(k_lo[1:] == k_hi[:-1] + 1.0)  # consecutive, no gap, no overlap
    exact = iv._pmf(nn, np.arange(-h, h + 1, dtype=np.float64)).sum()
    assert pk.sum() == pytest.approx(exact, rel=1e-12)


@pytest.mark.parametrize(("kind", "scale"), CASES)
def test_mean_halfwidths_in_runs_are_never_narrower_and_at_most_one_percent_wider(
    kind: str, scale: float, monkeypatch: pytest.MonkeyPatch
) -> None:
    nt, nn = Noise(kind, 3.0 * scale), Noise(kind, scale)  # type: ignore[arg-type]
    a = np.linspace(-5.0, 5.0, 17)[:-1]
    b = a + 10.0 / 16.0
    runs = iv._halfwidths(nt, nn, a, b, 0.05)
    _exact(monkeypatch)
    exact = iv._halfwidths(nt, nn, a, b, 0.05)
    assert runs is not None and exact is not None
    assert np.all(runs >= exact - 1.0)  # the bisection stops within 2^-14 of each
    assert np.all(runs <= exact * 1.01 + 1.0)


@pytest.mark.parametrize(("kind", "scale"), [("discrete_laplace", 3000.0)])
def test_variance_halfwidths_in_runs_are_never_narrower_and_at_most_one_percent_wider(
    kind: str, scale: float, monkeypatch: pytest.MonkeyPatch
) -> None:
    nn = Noise(kind, scale)  # type: ignore[arg-type]
    ka = np.linspace(-4.0, 4.0, 9)
    kb = ka + 0.5
    b2 = np.full(ka.shape, 2.0 * scale)
    margin = np.full(ka.shape, 1.0)
    runs = iv._pair_halfwidths(kind, 3.0 * scale, b2, margin, nn, ka, kb, 0.05)
    _exact(monkeypatch)
    exact = iv._pair_halfwidths(kind, 3.0 * scale, b2, margin, nn, ka, kb, 0.05)
    assert runs is not None and exact is not None
    tol = 2.0**-13 * exact
    assert np.all(runs >= exact - tol)
    assert np.all(runs <= exact * 1.01 + tol)
    # and they differ: the runs are in use at this width
    assert not np.array_equal(runs, exact)
