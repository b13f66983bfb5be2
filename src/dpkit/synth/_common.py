"""What the synthesizers share: the budget, the checks before any spend, the noise, the charge.

Every check here runs before the session's budget is charged, and every refusal says that
nothing was spent.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from fractions import Fraction
from typing import Any, TypeVar

import numpy as np
import numpy.typing as npt

from dpkit._numeric.validation import check_delta, check_epsilon, check_positive
from dpkit.analytics.binning import is_number_type, time_kind_of
from dpkit.errors import BudgetExceededError, EngineError, PrivacyParameterError
from dpkit.events import DpEvent
from dpkit.noise import RandomSource, discrete_gaussian_exact
from dpkit.synth._domain import ColumnDomain, Date, Numeric

__all__ = [
    "add_noise",
    "after_charge",
    "charge",
    "charge_then_count",
    "check_cells",
    "check_session",
    "resolve_rho",
]

IntArray = npt.NDArray[np.int64]
T = TypeVar("T")


def resolve_rho(epsilon: Any, delta: Any, rho: Any, session: Any) -> float:
    """The fit's zCDP budget: ``rho``, or the ``(epsilon, delta)`` share of ``session``'s."""
    if rho is not None:
        if epsilon is not None or delta is not None:
            raise PrivacyParameterError("give either rho or (epsilon, delta), not both")
        return check_positive(rho, "rho")
    if epsilon is None or delta is None:
        raise PrivacyParameterError(
            "give the fit's budget: epsilon and delta (a share of the session's zCDP "
            "budget), or rho"
        )
    eps = check_epsilon(epsilon)
    dl = check_delta(delta, allow_zero=False)
    share = getattr(getattr(session, "budget", None), "zcdp_share", None)
    if share is None:
        raise PrivacyParameterError(
            "an (epsilon, delta) share needs a session with a zCDP budget; or give rho"
        )
    r = float(share(eps, dl)[0])
    if not r > 0.0:
        raise PrivacyParameterError(f"epsilon {eps} and delta {dl} give no zCDP budget")
    return r


def check_cells(cells: int, max_cells: int, domains: Mapping[str, ColumnDomain], what: str) -> None:
    """Refuse, before any spend, marginals with more than ``max_cells`` cells."""
    if cells > max_cells:
        sizes = {c: d.size for c, d in domains.items()}
        big = sorted(sizes.items(), key=lambda kv: -kv[1])[:3]
        shown = ", ".join(f"{c!r}: {n:,}" for c, n in big)
        raise PrivacyParameterError(
            f"The {what} marginals of these {len(sizes)} columns have {cells:,} cells, more "
            f"than max_cells={max_cells:,} (about {cells * 8 / 2**20:,.1f} MiB of "
            f"counts): use fewer bins or "
            f"values, or fewer columns (largest domains, with the missing cell: {shown}), "
            "or raise max_cells. Nothing was spent."
        )


def check_session(
    method: str, domains: Mapping[str, ColumnDomain], max_rows: int, session: Any
) -> None:
    """Refuse, before any spend, a session the fit cannot use (accounting, columns, unit)."""
    if getattr(session, "mode", None) != "zcdp":
        raise PrivacyParameterError(
            f"{method} is accounted in zero-concentrated DP: open the session with "
            "Budget(epsilon=..., delta=..., method='zcdp') (this session's accounting is "
            f"{getattr(session, 'mode', None)!r}). Nothing was spent."
        )
    columns = set(session.columns)
    unknown = [c for c in domains if c not in columns]
    if unknown:
        raise PrivacyParameterError(
            f"column(s) {unknown} are not in the session's table (its columns: "
            f"{sorted(columns)}). Nothing was spent."
        )
    if session.privacy_unit is None and max_rows != 1:
        raise PrivacyParameterError(
            f"this session protects rows (privacy_unit=None), so each row is one person "
            f"and max_rows must be 1, got {max_rows}. Nothing was spent."
        )
    if session.privacy_unit in domains:
        raise PrivacyParameterError(
            f"the privacy unit {session.privacy_unit!r} cannot be a column of the synthetic "
            "table: drop it from columns. Nothing was spent."
        )
    for c, dom in domains.items():
        t = (session.column_type(c) or "").upper()
        if isinstance(dom, Numeric) and t and not is_number_type(t):
            hint = " or Date(...)" if any(k in t for k in ("DATE", "TIME")) else ""
            raise PrivacyParameterError(
                f"column {c!r} has the type {t}, not a number: declare it Categorical([...])"
                f"{hint}, or cast it to a number first. Nothing was spent."
            )
        if isinstance(dom, Date) and time_kind_of(session.column_type(c)) is None:
            raise PrivacyParameterError(
                f"column {c!r} has the type {t or 'unknown'}, not one read as dates (DATE, "
                "TIMESTAMP, TIMESTAMPTZ, in microseconds): declare it Numeric(...) or "
                "Categorical([...]), or cast it to DATE or TIMESTAMP first. Nothing was spent."
            )


def add_noise(counts: IntArray, sigma: float, source: RandomSource) -> IntArray:
    """``counts`` plus independent discrete Gaussian noise of ``sigma`` in every cell (the exact
    rational sampler, Canonne, Kamath and Steinke 2020: no floating-point slack)."""
    s2 = Fraction(sigma) ** 2
    flat = counts.reshape(-1)
    noise = np.array([discrete_gaussian_exact(source, s2) for _ in range(flat.size)], np.int64)
    out: IntArray = (flat + noise).reshape(counts.shape)
    return out


def charge(session: Any, event: DpEvent, rho: float, metadata: dict[str, Any]) -> None:
    """Charge ``event`` to the session's budget; one the budget cannot pay raises
    :class:`~dpkit.errors.BudgetExceededError` (nothing spent)."""
    try:
        session.budget.charge(event, metadata=metadata)
    except BudgetExceededError as exc:
        raise BudgetExceededError(
            f"This {metadata.get('synth', 'synthesizer')} fit needs rho {rho:.6g}. {exc}"
        ) from exc


def after_charge(step: Callable[[], T]) -> T:
    """Run one step of a fit after its charge (an engine statement, the binning): any failure
    becomes an :class:`~dpkit.errors.EngineError` that withholds the original message."""
    try:
        return step()
    except Exception:
        raise EngineError(
            "the engine failed after the charge; nothing released (the engine's message "
            "is withheld: it may quote a private value)"
        ) from None


def charge_then_count(
    session: Any, event: DpEvent, rho: float, metadata: dict[str, Any], statement: Any
) -> list[tuple[int, ...]]:
    """Charge ``event`` to the session's budget, then run the checked ``statement``.

    A charge the budget cannot pay raises :class:`~dpkit.errors.BudgetExceededError` (nothing
    spent); an engine failure after the charge withholds the engine's message."""
    charge(session, event, rho, metadata)
    counts: list[tuple[int, ...]] = after_charge(statement.run)
    return counts
