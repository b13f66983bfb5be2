"""Keep a dpkit :class:`~dpkit.accounting.budget.Budget` in step with training steps.

:class:`BudgetGuard` charges the budget *before* each step (call :meth:`BudgetGuard.before_step`
and take the step only if it returns); a step that would exceed the budget raises
:class:`~dpkit.errors.BudgetExceededError` and nothing is charged, so training stops there. Each
charge goes through :meth:`Budget.charge`, so a durable budget writes it to its ledger first.

What is charged per step (the event of :meth:`BatchScheme.event` for one step):

* ``poisson``, ``fixed_size``, ``user_poisson``: one step's event at each step;
* ``shuffle``, ``cyclic``: one epoch's Gaussian (replace-one, ``sigma / 2``) at the first step of
  each epoch (a record is in at most one batch per epoch, so the epoch is paid before it starts);
* ``balls_in_bins``: likewise one epoch's Gaussian (add/remove, ``sigma``) at the first step of
  each epoch;
* ``truncated_poisson`` is refused: its total-variation term is not an event and does not
  compose with a budget's other charges.

The budget's neighbouring relation must be the scheme's (a replace-one budget for fixed-size,
shuffle and cyclic batches).
"""

from __future__ import annotations

from typing import Any

from dpkit._numeric.validation import check_positive
from dpkit.errors import PrivacyParameterError
from dpkit.training.samplers import BatchSampler

__all__ = ["BudgetGuard"]


class BudgetGuard:
    """Charge ``budget`` for each step of ``sampler`` at ``noise_multiplier``."""

    def __init__(self, budget: Any, sampler: BatchSampler, *, noise_multiplier: float) -> None:
        if not isinstance(sampler, BatchSampler):
            raise PrivacyParameterError(f"sampler must be a BatchSampler, got {sampler!r}")
        sch = sampler.scheme
        if sch.name == "truncated_poisson":
            raise PrivacyParameterError(
                "BudgetGuard cannot charge truncated Poisson steps (the truncation term is not "
                "an event); use scheme 'poisson' or 'fixed_size'"
            )
        if budget.neighbouring != sch.relation:
            raise PrivacyParameterError(
                f"the budget counts {budget.neighbouring.value} neighbours but {sch.name} "
                f"batches are accounted under {sch.relation.value}; open the budget with "
                f"neighbouring={sch.relation.value!r}"
            )
        self.budget = budget
        self.sampler = sampler
        self.noise_multiplier = check_positive(noise_multiplier, "noise_multiplier")
        self.steps_taken = 0

    def before_step(self) -> None:
        """Charge the next step (raises ``BudgetExceededError`` and charges nothing if over)."""
        sch = self.sampler.scheme
        if sch.name in ("shuffle", "cyclic", "balls_in_bins"):
            if self.steps_taken % sch.steps_per_epoch == 0:
                self.budget.charge(
                    sch.event(self.noise_multiplier, 1),
                    metadata={"dpsgd": sch.name, "step": self.steps_taken},
                )
        else:
            self.budget.charge(
                sch.event(self.noise_multiplier, 1),
                metadata={"dpsgd": sch.name, "step": self.steps_taken},
            )
        self.steps_taken += 1
