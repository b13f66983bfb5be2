"""``dpkit demo``: release private statistics of a small generated dataset beside the truth."""

from __future__ import annotations

from fractions import Fraction

import numpy as np
import typer
from rich.console import Console
from rich.table import Table

from dpkit._numeric.rounding import up
from dpkit.mechanisms import (
    ExponentialMechanism,
    Gaussian,
    Laplace,
    RandomizedResponse,
    bounded_mean_sensitivity,
    bounded_sum_sensitivity,
    count_sensitivity,
)
from dpkit.noise import RandomSource

DIAGNOSES = ("flu", "cold", "asthma", "diabetes", "migraine", "none")


def _generate(n: int, seed: int) -> dict[str, np.ndarray]:
    """A synthetic table of n people (the data itself; not a release)."""
    gen = RandomSource(seed=seed, insecure=True)
    u = gen.uniform((4, n))
    age = np.floor(18 + 70 * u[0] ** 1.3)
    income = np.round(np.exp(10 + 0.6 * np.sqrt(-2 * np.log(u[1] + 1e-300)) * np.cos(6.283 * u[2])))
    weights = np.array([0.22, 0.30, 0.08, 0.07, 0.10, 0.23])
    diagnosis = np.searchsorted(np.cumsum(weights), u[3] * weights.sum(), side="right")
    smoker = gen.uniform(n) < 0.18
    return {"age": age, "income": income, "diagnosis": np.minimum(diagnosis, 5), "smoker": smoker}


def demo(
    people: int = typer.Option(10_000, "--people", help="size of the generated dataset"),
    epsilon: float = typer.Option(1.0, "--epsilon", help="epsilon of each release"),
    seed: int = typer.Option(7, "--data-seed", help="seed of the synthetic data (not the noise)"),
) -> None:
    """Release a count, a sum, a mean, a histogram, a mode and a proportion with secure noise."""
    data = _generate(people, seed)
    rows: list[tuple[str, str, str, str, float]] = []
    spent = Fraction(0)
    delta_total = 0.0
    relation = "add_remove"

    over_65 = float(np.sum(data["age"] >= 65))
    m_count = Laplace.from_epsilon(epsilon=epsilon,
                                   sensitivity=count_sensitivity(neighbouring=relation))
    rows.append(("people aged 65+", f"{over_65:,.0f}",
                 f"{m_count.release(over_65)[()]:,.1f}", "Laplace", m_count.epsilon))

    lo, hi = 0.0, 200_000.0
    clipped = np.clip(data["income"], lo, hi)
    m_sum = Laplace.from_epsilon(
        epsilon=epsilon,
        sensitivity=bounded_sum_sensitivity(lower=lo, upper=hi, neighbouring=relation))
    rows.append(("total income (clamped to 200k)", f"{clipped.sum():,.0f}",
                 f"{m_sum.release(clipped.sum())[()]:,.0f}", "Laplace", m_sum.epsilon))

    age_lo, age_hi = 18.0, 90.0
    ages = np.clip(data["age"], age_lo, age_hi)
    m_mean = Gaussian.from_epsilon_delta(
        epsilon=epsilon, delta=1e-6,
        sensitivity=bounded_mean_sensitivity(lower=age_lo, upper=age_hi, n=people,
                                             neighbouring="replace"))
    rows.append(("mean age (n public)", f"{ages.mean():.2f}",
                 f"{m_mean.release(ages.mean())[()]:.2f}", "Gaussian (analytic, delta=1e-6)",
                 epsilon))
    delta_total += 1e-6

    counts = np.bincount(data["diagnosis"], minlength=len(DIAGNOSES)).astype(float)
    m_hist = Laplace.from_epsilon(epsilon=epsilon, sensitivity=1.0)
    noisy = m_hist.release(counts)
    for name, true, priv in zip(DIAGNOSES, counts, noisy, strict=True):
        rows.append((f"  diagnosis = {name}", f"{true:,.0f}", f"{priv:,.1f}",
                     "Laplace histogram", 0.0))
    rows.append(("histogram of diagnoses (parallel composition)", "", "",
                 "Laplace, one bin changes", m_hist.epsilon))

    m_mode = ExponentialMechanism(epsilon=epsilon, sensitivity=1.0, monotonic=True)
    choice = m_mode.release(counts)
    rows.append(("most common diagnosis", DIAGNOSES[int(np.argmax(counts))], DIAGNOSES[choice],
                 "exponential mechanism", m_mode.epsilon))

    rr = RandomizedResponse.from_epsilon(epsilon=epsilon)
    reports = rr.release(data["smoker"])
    rows.append(("share of smokers (local DP)", f"{data['smoker'].mean():.3f}",
                 f"{rr.estimate_proportion(reports):.3f}", "randomized response", rr.epsilon))

    table = Table(title=f"dpkit demo: {people:,} generated people, secure noise")
    for col in ("statistic", "true value", "private value", "mechanism", "epsilon"):
        table.add_column(col, justify="right" if col in ("true value", "private value",
                                                         "epsilon") else "left")
    for name, true, priv, mech, eps in rows:
        if eps:
            spent += Fraction(eps)
        table.add_row(name, true, priv, mech, f"{eps:.4f}" if eps else "")
    console = Console()
    console.print(table)
    console.print(
        f"total privacy spent by basic composition: epsilon = {up(spent):.4f}, "
        f"delta = {delta_total:g} "
        f"(randomized response is local: each person spends {rr.epsilon:.4f})"
    )
