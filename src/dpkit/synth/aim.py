"""AIM: private synthetic data from marginals chosen adaptively for a workload.

McKenna, Mullins, Sheldon and Miklau (2022), "AIM: An Adaptive and Iterative Mechanism for
Differentially Private Synthetic Data", Algorithm 1. The workload ``W`` is a list of cliques
(sets of columns; by default every 3-way marginal); the candidates are every non-empty subset
of a workload clique, each with the weight ``w_r = sum_(s in W) |r ∩ s|``. With a zCDP budget
``rho``, ``T = 16 d`` and ``alpha = 0.9``:

1. Every 1-way marginal is measured with discrete Gaussian noise of ``sigma_0 = Delta sqrt(T /
   (2 alpha rho))`` and a model is fitted (:mod:`dpkit.synth._graph`). With ``oneway`` set (a
   share ``s`` in ``(0, 1)``, what OpenDP's AIM does with ``s = 1/2``), the ``d`` 1-way marginals
   instead share ``s rho`` (each at ``sigma_1 = Delta sqrt(d / (2 s rho))``, rounded up, so they
   spend at most ``s rho``), and ``sigma_0`` and ``epsilon_0`` below are those of ``T`` rounds
   sharing what they left, ``rho' = rho - d Delta^2 / (2 sigma_1^2)`` (exact), in place of
   ``rho``.
2. Each round spends ``Delta^2 / (2 sigma^2) + epsilon^2 / 8`` (``epsilon`` starts at
   ``sqrt(8 (1 - alpha) rho / T)``): among the candidates whose addition keeps the model's
   junction tree within ``(rho_used / rho) max_model_cells`` cells, the exponential mechanism
   (bounded range: ``epsilon^2 / 8``-zCDP, Cesar and Rogers 2021) picks ``r`` with the quality
   ``w_r (||M_r(D) - N p_r||_1 - sqrt(2 / pi) sigma n_r)`` (``n_r`` cells, ``p_r`` the model's
   marginal; sensitivity ``Delta max_r w_r``); ``M_r(D)`` is measured with noise ``sigma`` and
   the model refitted (``round_iterations`` mirror-descent steps, 1000 by default as in
   Private-PGM, warm-started from the previous round's potentials: the next selection scores
   the candidates against this fit, and a fit stopped early keeps errors the measurements have
   already corrected). If the model's estimate of ``r`` moved by less than ``sqrt(2 / pi) sigma
   n_r`` in L1, ``sigma`` is halved and ``epsilon`` doubled (annealing).
3. When less than two rounds' budget is left, the last round gets all of it (``sigma =
   Delta / sqrt(2 alpha rho_left)``, ``epsilon = sqrt(8 (1 - alpha) rho_left)``).

Accounting. The 1-way marginals' cost (with ``oneway``, at most ``oneway rho``) opens the sum
of the fit's spend; the rounds are chosen adaptively but their zCDP costs are added to it
exactly (rational arithmetic, each sigma rounded up and each epsilon down) and the sum never
exceeds ``rho``, which fully adaptive composition of zCDP allows (the privacy filter of
Feldman and Zrnic 2021, Thm. 3.1, for every Renyi order); the fit charges ``rho`` to the
session's zCDP budget once, before any row is read. When a numeric or date column has edges to
choose, the private binning runs first (:mod:`dpkit.synth._binning`) on the ``binning`` share of
``rho`` (rounded down), inside the same charge, and the rounds above share the rest (rounded
down).

Person-level privacy as in MST: every workload marginal is counted by the session's engine on
the table bounded to ``max_rows`` rows per privacy unit, in one statement, so ``Delta =
max_rows`` (L1 and L2 of any marginal); only cell counts leave the engine, and the candidates'
counts are sums of them. Noise comes from dpkit's exact discrete Gaussian sampler.

Columns declared ``missing=False``: the rounds measure and charge exactly as without the
declaration; the final model is conditioned on "not missing" for those columns
(:func:`dpkit.synth.mst.without_missing`), post-processing that costs no privacy.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any

import numpy as np
import numpy.typing as npt

from dpkit._numeric.rounding import down, sqrt_up, up
from dpkit._numeric.validation import check_integer, check_probability
from dpkit.errors import PrivacyParameterError
from dpkit.events import DpEvent, ZCdpEvent
from dpkit.mechanisms import ExponentialMechanism
from dpkit.noise import RandomSource
from dpkit.synth._binning import (
    DEFAULT_BINNING,
    BinningPlan,
    check_binning,
    plan_binning,
)
from dpkit.synth._common import (
    add_noise,
    check_cells,
    check_session,
    resolve_rho,
)
from dpkit.synth._domain import ColumnDomain, check_domains, with_missing
from dpkit.synth._graph import JunctionModel, Measurement, fit_graph, model_cells
from dpkit.synth._measure import clique_statement, read_cliques
from dpkit.synth._tree import estimate_total
from dpkit.synth.mst import (
    DEFAULT_MAX_CELLS,
    SyntheticModel,
    fit_through,
    with_binning,
    without_missing,
)

__all__ = ["AIM", "AIMPlan"]

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]
Clique = tuple[int, ...]

#: The paper's model-size limit, 80 MB of float64 cells.
DEFAULT_MAX_MODEL_CELLS = 10_000_000
_ALPHA = Fraction(9, 10)


@dataclass(frozen=True)
class AIMPlan:
    """The budget and first-round noise of one AIM fit, decided before any row is read.

    ``sigma_oneway``: the 1-way marginals' noise (in rows); ``sigma_0``: the first rounds'
    (equal to ``sigma_oneway`` when ``oneway`` is ``None``); ``epsilon_0``: the first rounds'
    exponential mechanism; ``rounds``: ``T``; ``cells``: the cells of the workload
    marginals the engine counts; ``event``: what is charged (the binning, if any, and the
    rounds' ``measurement_rho``-zCDP); ``binning``: the private binning."""

    rho: float
    columns: int
    sensitivity: int
    sigma_0: float
    epsilon_0: float
    rounds: int
    cells: int
    event: DpEvent = field(repr=False)
    measurement_rho: float = 0.0
    binning: BinningPlan | None = field(default=None, repr=False)
    measurement_event: DpEvent | None = field(default=None, repr=False)
    sigma_oneway: float = 0.0


def _sigma_for(share: Fraction, m: int) -> float:
    """The smallest float ``sigma`` (rounded up) with ``m^2 / (2 sigma^2) <= share``."""
    return up(sqrt_up(Fraction(m * m) / (2 * share)))


def _epsilon_for(share: Fraction) -> float:
    """The largest float ``epsilon`` (rounded down) with ``epsilon^2 / 8 <= share``."""
    eps = down(math.sqrt(float(8 * share)))
    while Fraction(eps) ** 2 / 8 > share:
        eps = math.nextafter(eps, 0.0)
    return eps


def _gauss_cost(sigma: float, m: int) -> Fraction:
    return Fraction(m * m) / (2 * Fraction(sigma) ** 2)


def _em_cost(eps: float) -> Fraction:
    return Fraction(eps) ** 2 / 8


class AIM:
    """The AIM synthesizer over declared column domains (see the module doc).

    ``columns``, ``max_rows`` and ``binning`` as for :class:`~dpkit.synth.MST`.
    ``workload``: the marginals the synthetic table should preserve, as tuples of column
    names (default: every 3-way marginal, or every 2-way one for two columns).
    ``max_cells``: refuse a fit whose workload marginals have more cells.
    ``max_model_cells``: the model-size limit (junction-tree cells; the paper's 80 MB).
    ``rounds``: ``T`` (default ``16 d``). ``iterations``: the final fit's mirror-descent
    steps, ``round_iterations`` those of each round's warm-started refit (post-processing: they
    cost time, not privacy). ``oneway``: ``None`` (the paper's start, the default) or the share
    of ``rho`` the 1-way marginals take before the rounds (module doc, step 1).
    """

    def __init__(
        self,
        columns: Mapping[str, ColumnDomain | None],
        *,
        max_rows: int = 1,
        binning: float = DEFAULT_BINNING,
        workload: Sequence[Sequence[str]] | None = None,
        max_cells: int = DEFAULT_MAX_CELLS,
        max_model_cells: int = DEFAULT_MAX_MODEL_CELLS,
        rounds: int | None = None,
        iterations: int = 1000,
        round_iterations: int = 1000,
        oneway: float | None = None,
    ) -> None:
        self.domains = check_domains(columns)
        d = len(self.domains)
        if d < 2:
            raise PrivacyParameterError(f"AIM models at least two columns, got {d}: add a column")
        self.max_rows = check_integer(max_rows, name="max_rows", minimum=1, maximum=2**31)
        self.binning = check_binning(binning)
        self.max_cells = check_integer(max_cells, name="max_cells", minimum=1)
        self.max_model_cells = check_integer(max_model_cells, name="max_model_cells", minimum=1)
        self.rounds = check_integer(16 * d if rounds is None else rounds, name="rounds", minimum=1)
        self.iterations = check_integer(iterations, name="iterations", minimum=1)
        self.round_iterations = check_integer(round_iterations, name="round_iterations", minimum=1)
        self.oneway = (
            None
            if oneway is None
            else check_probability(oneway, "oneway", open_low=True, open_high=True)
        )
        cols = list(self.domains)
        if workload is None:
            width = min(3, d)
            self.workload = list(itertools.combinations(range(d), width))
        else:
            self.workload = []
            for w in workload:
                if isinstance(w, str) or not isinstance(w, Sequence) or not w:
                    raise PrivacyParameterError(
                        f"each workload marginal is a tuple of column names, got {w!r}"
                    )
                unknown = [c for c in w if c not in self.domains]
                if unknown or len(set(w)) != len(w):
                    raise PrivacyParameterError(
                        f"workload marginal {tuple(w)!r} names unknown or repeated columns "
                        f"(the columns: {cols})"
                    )
                self.workload.append(tuple(sorted(cols.index(c) for c in w)))
            self.workload = list(dict.fromkeys(self.workload))
            covered = {v for w in self.workload for v in w}
            self.workload += [(v,) for v in range(d) if v not in covered]  # its 1-way marginal
        sizes = [dom.size for dom in self.domains.values()]
        biggest = max(self.workload, key=lambda w: math.prod(sizes[i] for i in w))
        if math.prod(sizes[i] for i in biggest) > self.max_model_cells:
            raise PrivacyParameterError(
                f"the workload marginal {tuple(cols[i] for i in biggest)} alone has more cells "
                f"than max_model_cells={self.max_model_cells:,}: use fewer bins or values, or "
                "raise max_model_cells"
            )

    @property
    def cells(self) -> int:
        """The cells of the workload marginals (what the engine counts and returns)."""
        sizes = [dom.size for dom in self.domains.values()]
        return sum(math.prod(sizes[i] for i in w) for w in self.workload)

    def plan(
        self,
        *,
        epsilon: float | None = None,
        delta: float | None = None,
        rho: float | None = None,
        session: Any = None,
    ) -> AIMPlan:
        """The budget and first-round noise of a fit at ``rho`` (or at the ``(epsilon,
        delta)`` share of ``session``'s zCDP budget); reads no data, spends nothing."""
        check_cells(self.cells, self.max_cells, self.domains, "workload")
        r_all = resolve_rho(epsilon, delta, rho, session)
        bplan, r = plan_binning(self.domains, r_all, self.binning, self.max_rows)
        big_t, m, d = self.rounds, self.max_rows, len(self.domains)
        rounds_rho = Fraction(r)
        if self.oneway is None:  # the paper: the 1-way marginals at the first rounds' sigma
            sigma_1 = sigma_0 = _sigma_for(_ALPHA * rounds_rho / big_t, m)
        else:  # a share first, then T rounds of what it leaves (exact: never below 0)
            sigma_1 = _sigma_for(Fraction(self.oneway) * rounds_rho / d, m)
            rounds_rho -= d * _gauss_cost(sigma_1, m)
            sigma_0 = _sigma_for(_ALPHA * rounds_rho / big_t, m)
        eps_0 = _epsilon_for((1 - _ALPHA) * rounds_rho / big_t)
        event = ZCdpEvent(rho=r)
        measured = AIMPlan(
            rho=r,
            columns=d,
            sensitivity=m,
            sigma_0=sigma_0,
            sigma_oneway=sigma_1,
            epsilon_0=eps_0,
            rounds=big_t,
            cells=self.cells,
            event=event,
            measurement_rho=r,
            measurement_event=event,
        )
        out: AIMPlan = with_binning(r_all, bplan, measured)
        return out

    def fit(
        self,
        session: Any,
        *,
        epsilon: float | None = None,
        delta: float | None = None,
        rho: float | None = None,
    ) -> SyntheticModel:
        """Measure the workload marginals, then select, measure and fit round by round;
        charge ``rho`` to the session's budget once, first (refusals spend nothing)."""
        check_session("AIM", self.domains, self.max_rows, session)
        plan = self.plan(epsilon=epsilon, delta=delta, rho=rho, session=session)
        return fit_through(
            "AIM",
            session,
            self.domains,
            self.max_rows,
            plan,
            (epsilon, delta),
            lambda doms: clique_statement(session, doms, self.workload, self.max_rows),
            lambda counts, doms: self._fit_from(
                read_cliques(counts, doms, self.workload),
                plan,
                session.source_of_randomness,
                doms,
            ),
        )

    def _candidates(self) -> dict[Clique, int]:
        """Every non-empty subset of a workload clique and its weight ``sum_s |r ∩ s|``."""
        out: dict[Clique, int] = {}
        for w in self.workload:
            for k in range(1, len(w) + 1):
                for r in itertools.combinations(w, k):
                    out[r] = 0
        for r in out:
            out[r] = sum(len(set(r) & set(s)) for s in self.workload)
        return out

    def _fit_from(
        self,
        exact: Mapping[Clique, IntArray],
        plan: AIMPlan,
        source: RandomSource,
        domains: Mapping[str, ColumnDomain] | None = None,
    ) -> SyntheticModel:
        """Algorithm 1 from the workload's exact counts (after the charge), with the fit's
        resolved ``domains`` (the declared ones by default)."""
        doms = dict(self.domains if domains is None else domains)
        doms = {c: with_missing(d, self.domains[c].missing) for c, d in doms.items()}
        cols = list(doms)
        d, m = len(cols), self.max_rows
        sizes = [doms[c].size for c in cols]
        weights = self._candidates()
        truth: dict[Clique, IntArray] = {}
        for r in weights:
            host = next(w for w in self.workload if set(r) <= set(w))
            truth[r] = exact[host].sum(axis=tuple(k for k, v in enumerate(host) if v not in r))
        rho = Fraction(plan.measurement_rho or plan.rho)
        sigma, eps, sigma_1 = plan.sigma_0, plan.epsilon_0, plan.sigma_oneway or plan.sigma_0
        used = d * _gauss_cost(sigma_1, m)
        ms = [
            Measurement((v,), add_noise(truth[(v,)], sigma_1, source).astype(np.float64), sigma_1)
            for v in range(d)
        ]
        total = estimate_total([x.y for x in ms], [x.sigma for x in ms])
        model, theta = fit_graph(sizes, ms, total, iterations=self.round_iterations)
        em_sensitivity = m * max(weights.values())
        selected: list[list[str]] = []
        steps = 0
        while True:
            left = rho - used
            cost = _gauss_cost(sigma, m) + _em_cost(eps)
            last = left < 2 * cost
            if last:
                if left <= 0:
                    break
                sigma = _sigma_for(_ALPHA * left, m)
                eps = _epsilon_for((1 - _ALPHA) * left)
                cost = _gauss_cost(sigma, m) + _em_cost(eps)
            used += cost
            limit = float(used / rho) * self.max_model_cells
            measured = [x.clique for x in ms]
            cands = [
                r for r in weights if len(r) == 1 or model_cells(sizes, [*measured, r]) <= limit
            ]
            estimates = _model_marginals(model, theta, sizes, cands)
            spread = math.sqrt(2.0 / math.pi) * sigma
            scores = np.array(
                [
                    weights[r]
                    * (
                        float(np.abs(truth[r] - total * estimates[r]).sum())
                        - spread * truth[r].size
                    )
                    for r in cands
                ]
            )
            em = ExponentialMechanism(epsilon=eps, sensitivity=em_sensitivity)
            r = cands[em.release(scores, source=source)]
            y = add_noise(truth[r], sigma, source).astype(np.float64)
            ms.append(Measurement(r, y, sigma))
            selected.append([cols[i] for i in r])
            before = total * estimates[r]
            total = estimate_total([x.y for x in ms], [x.sigma for x in ms])
            model, theta = fit_graph(
                sizes, ms, total, theta=theta, iterations=self.round_iterations
            )
            steps += 1
            if last:
                break
            after = total * _model_marginals(model, theta, sizes, [r])[r]
            if float(np.abs(after - before).sum()) <= spread * truth[r].size:
                sigma, eps = sigma / 2.0, eps * 2.0
        model, theta = fit_graph(sizes, ms, total, theta=theta, iterations=self.iterations)
        assert used <= rho  # exact arithmetic: the rounds never spend more than the charge
        return SyntheticModel(
            domains=doms,
            tree=without_missing(model, doms),
            info={
                "method": "AIM",
                "rho": plan.rho,
                "max_rows": self.max_rows,
                "rounds": steps,
                "selected": selected,
                "sigma_0": plan.sigma_0,
                "sigma_oneway": plan.sigma_oneway,
                "epsilon_0": plan.epsilon_0,
            },
        )


def _model_marginals(
    model: JunctionModel,
    theta: dict[Clique, FloatArray],
    sizes: Sequence[int],
    queries: Sequence[Clique],
) -> dict[Clique, FloatArray]:
    """The model's probabilities of every query clique: read from the junction-tree clique
    that holds it, or else from the calibration of the model with the query added as a clique
    of zero potential (the same distribution, a junction tree that holds it)."""
    out: dict[Clique, FloatArray] = {}
    for q in queries:
        try:
            out[q] = model.marginal(q)
        except ValueError:
            extra = dict(theta)
            extra[q] = np.zeros(tuple(sizes[v] for v in q))
            out[q] = _calibrated(sizes, extra).marginal(q)
    return out


def _calibrated(sizes: Sequence[int], theta: dict[Clique, FloatArray]) -> JunctionModel:
    """The model of potentials ``theta`` calibrated on their junction tree (no fitting)."""
    model, _ = fit_graph(sizes, [], 1.0, theta=theta, iterations=0)
    return model
