"""Lyu, Su and Li (2017)'s six sparse-vector variants before the auditor.

Algorithms 3, 4, 5 and 6 are not private; they are entries of the known-bad corpus
(:mod:`dpkit.audit.known_bad`, each audited there on the paper's neighbouring inputs). Here each
of those pairs is audited again, with the same tester and sample size, against the variants that
ARE private, which must be certified within their claim: Algorithm 1 (Lyu et al.'s own:
``rho ~ Lap(Delta / eps1)``, ``nu_i ~ Lap(2 c Delta / eps2)``, ``eps1 = eps2 = epsilon / 2``),
Algorithm 2 (Dwork and Roth 2014: ``rho ~ Lap(2 c Delta / epsilon)`` drawn again after every
positive answer, ``nu_i ~ Lap(4 c Delta / epsilon)``), the numeric variant with fresh noise for
the released values (Lyu et al., Algorithm 7 with ``eps3 > 0``), and dpkit's own
:class:`~dpkit.mechanisms.SparseVector` and :class:`~dpkit.mechanisms.NumericSparseVector`.

The broken and correct variants share pair, tester and sample size, so the corpus test is the
companion of each certification here: the same audit that certifies the correct variant reports
the broken one violated. Audits run at confidence 1 - 1e-6 (a correct mechanism is reported
violated with probability at most 1e-6); sources are seeded.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import numpy.typing as npt
import pytest

from dpkit.audit import audit, known_bad
from dpkit.audit.known_bad import REUSED_NOISE_NONE
from dpkit.mechanisms import NumericSparseVector, SparseVector
from dpkit.noise import RandomSource
from dpkit.noise.samplers import laplace

ALPHA = 1e-6
EPSILON = 1.0
_ENTRIES = {e.name: e for e in known_bad.corpus(epsilon=EPSILON)}
_BROKEN = (
    "sparse-vector-reused-noise",
    "sparse-vector-noise-fixed-in-c",
    "sparse-vector-no-query-noise",
    "sparse-vector-no-cutoff",
)


def _src(seed: str) -> RandomSource:
    return RandomSource(seed=f"svt-variants-{seed}", insecure=True)


def _answers(
    q: npt.NDArray[np.float64],
    size: int,
    source: RandomSource,
    *,
    rho_scale: float,
    nu_scale: float,
    c: int,
    redraw: bool,
) -> npt.NDArray[np.int64]:
    """Answers of a sparse vector run: 0 negative, 1 positive, 2 not asked (after c
    positives); ``redraw``: fresh threshold noise after each positive (Dwork and Roth)."""
    rho = laplace(source, scale=rho_scale, size=(size, c if redraw else 1))
    nu = laplace(source, scale=nu_scale, size=(size, q.size))
    out = np.empty((size, q.size), dtype=np.int64)
    seen = np.zeros(size, dtype=np.int64)
    rows = np.arange(size)
    for i in range(q.size):
        run = np.minimum(seen, rho.shape[1] - 1) if redraw else np.zeros(size, dtype=np.int64)
        positive = q[i] + nu[:, i] >= rho[rows, run]
        out[:, i] = np.where(seen >= c, 2, positive.astype(np.int64))
        seen += (seen < c) & positive
    return out


def _feature(name: str, answers: npt.NDArray[np.int64]) -> npt.NDArray[Any]:
    """The corpus entry's output computed from a correct variant's answers."""
    if name == "sparse-vector-noise-fixed-in-c":
        return np.asarray((answers * 3 ** np.arange(answers.shape[1])).sum(1), dtype=np.int64)
    if name == "sparse-vector-no-query-noise":
        return np.asarray(answers == 1)
    m = answers.shape[1] // 2  # no cut-off pair: positives in the first half minus the second
    pos = answers == 1
    return np.asarray(pos[:, :m].sum(1) - pos[:, m:].sum(1), dtype=np.float64)


class _Reference:
    """Algorithm 1 or 2 of Lyu et al., at ``epsilon``, with the cut-off c of the pair."""

    def __init__(self, name: str, algorithm: int, c: int) -> None:
        self.name, self.algorithm, self.c = name, algorithm, c

    def sample(self, x: Any, size: int, *, source: RandomSource | None = None) -> Any:
        assert source is not None
        q, c = np.asarray(x, dtype=np.float64), self.c
        if self.algorithm == 1:
            scales = {"rho_scale": 2.0 / EPSILON, "nu_scale": 4.0 * c / EPSILON, "redraw": False}
        else:
            scales = {"rho_scale": 2.0 * c / EPSILON, "nu_scale": 4.0 * c / EPSILON, "redraw": True}
        return _feature(self.name, _answers(q, size, source, c=c, **scales))  # type: ignore[arg-type]


class _Dpkit:
    """dpkit's SparseVector run once per output (a Python loop: fewer samples)."""

    def __init__(self, name: str, c: int) -> None:
        self.name = name
        self.mech = SparseVector(epsilon=EPSILON, sensitivity=1.0, threshold=0.0, max_positives=c)

    def sample(self, x: Any, size: int, *, source: RandomSource | None = None) -> Any:
        assert source is not None
        q = list(x)
        out = np.full((size, len(q)), 2, dtype=np.int64)
        for k in range(size):
            for i, a in enumerate(self.mech.release(q, source=source)):
                out[k, i] = int(a)
        return _feature(self.name, out)


def _cut_off(name: str) -> int:
    return 4 if name == "sparse-vector-noise-fixed-in-c" else 1


def _certify(mechanism: Any, name: str, samples: int, seed: str) -> None:
    entry = _ENTRIES[name]
    result = audit(
        mechanism,
        entry.pair,
        samples=samples,
        claim=entry.claim,
        testers=entry.testers,
        confidence=1 - ALPHA,
        source=_src(seed),
    )
    assert not result.violated, result.summary()
    assert result.epsilon_lower_bound <= EPSILON


@pytest.mark.parametrize("name", _BROKEN[1:])
@pytest.mark.parametrize("algorithm", [1, 2])
def test_private_variants_are_certified_on_the_pairs_that_expose_the_broken_ones(
    name: str, algorithm: int
) -> None:
    # the broken variant on the same pair, tester and sample size is reported violated
    # (tests/audit/test_audit.py::test_known_bad_mechanisms_are_caught)
    samples = _ENTRIES[name].samples
    _certify(_Reference(name, algorithm, _cut_off(name)), name, samples, f"alg{algorithm}-{name}")


@pytest.mark.slow
@pytest.mark.parametrize("name", _BROKEN[1:])
def test_dpkit_sparse_vector_is_certified_on_the_same_pairs(name: str) -> None:
    # 4,000 streams per table (about 0.4 ms each); the references above carry the power
    _certify(_Dpkit(name, _cut_off(name)), name, 4_000, f"dpkit-{name}")


class _FreshNoise:
    """Algorithm 7 of Lyu et al. with numeric outputs, c = 1: the positive answer's value is
    released with fresh noise ``Lap(c Delta / eps3)``, here eps1 = eps2 = eps3 = epsilon / 3."""

    def sample(self, x: Any, size: int, *, source: RandomSource | None = None) -> Any:
        assert source is not None
        q = np.asarray(x, dtype=np.float64)
        third = EPSILON / 3.0
        answers = _answers(
            q, size, source, rho_scale=1.0 / third, nu_scale=2.0 / third, c=1, redraw=False
        )
        value = q[-1] + laplace(source, scale=1.0 / third, size=size)
        first = np.where((answers == 1).any(1), (answers == 1).argmax(1), q.size)
        return np.where(first == q.size - 1, value, REUSED_NOISE_NONE)


def test_numeric_sparse_vector_with_fresh_noise_is_certified_where_reuse_is_caught() -> None:
    name = "sparse-vector-reused-noise"
    _certify(_FreshNoise(), name, _ENTRIES[name].samples, "alg7-numeric")


class _DpkitNumeric:
    """dpkit's NumericSparseVector, the corpus entry's feature of its answers."""

    def __init__(self) -> None:
        self.mech = NumericSparseVector(epsilon=EPSILON, sensitivity=1.0, threshold=0.0)

    def sample(self, x: Any, size: int, *, source: RandomSource | None = None) -> Any:
        assert source is not None
        out = np.full(size, REUSED_NOISE_NONE)
        for k in range(size):
            answers = self.mech.release(list(x), source=source)
            if len(answers) == len(x) and answers[-1] is not False:
                out[k] = answers[-1]
        return out


@pytest.mark.slow
def test_dpkit_numeric_sparse_vector_is_certified_where_reuse_is_caught() -> None:
    _certify(_DpkitNumeric(), "sparse-vector-reused-noise", 3_000, "dpkit-numeric")
