"""Plugs for training loops: batch samplers that implement exactly the accounted batching
schemes, an Opacus accountant backed by dpkit's PLD, and a guard that keeps a dpkit Budget in
step with training steps."""

from dpkit.training.guard import BudgetGuard
from dpkit.training.opacus import DpkitOpacusAccountant, register_opacus_accountant
from dpkit.training.samplers import BatchSampler

__all__ = ["BatchSampler", "BudgetGuard", "DpkitOpacusAccountant", "register_opacus_accountant"]
