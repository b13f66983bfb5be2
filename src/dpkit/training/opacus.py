"""An Opacus accountant backed by dpkit's PLD, registered through Opacus's accountant registry.

Opacus (1.6) creates its accountant by name (``PrivacyEngine(accountant="dpkit")``) from the
registry filled by ``opacus.accountants.register_accountant``; it calls ``step(noise_multiplier,
sample_rate)`` after each optimiser step and ``get_epsilon(delta)`` when asked.
:func:`register_opacus_accountant` registers :class:`DpkitOpacusAccountant` (optionally bound to
a :class:`~dpkit.training.samplers.BatchSampler`, whose scheme it then accounts).

* Without a sampler: every step is a Poisson-subsampled Gaussian (add/remove) at the
  ``(noise_multiplier, sample_rate)`` Opacus reports; steps are grouped and composed by
  :class:`~dpkit.accounting.pld.PldAccountant` (an upper bound).
* With a sampler: the sampler's scheme is accounted
  (:func:`dpkit.accounting.batching.dpsgd_bounds`) for the steps taken, at the smallest noise
  multiplier seen (epsilon decreases in it, so this is an upper bound). A reported
  ``sample_rate`` that is neither the scheme's ``b / n`` nor Opacus's ``1 / len(loader)`` for
  this sampler is refused: the loader Opacus sees is not the sampler being accounted.

Opacus is imported only inside :func:`register_opacus_accountant`; the class itself follows
Opacus's accountant interface without importing it.
"""

from __future__ import annotations

import math
from typing import Any

from dpkit._numeric.validation import check_delta, check_positive, check_probability
from dpkit.accounting.batching import dpsgd_bounds
from dpkit.accounting.pld import PldAccountant
from dpkit.errors import PrivacyParameterError
from dpkit.events import GaussianEvent, PoissonSampledEvent
from dpkit.training.samplers import BatchSampler

__all__ = ["DpkitOpacusAccountant", "register_opacus_accountant"]


class DpkitOpacusAccountant:
    """Opacus-compatible accountant (``step``, ``get_epsilon``, ``len``, ``mechanism``).

    ``history`` holds ``(noise_multiplier, sample_rate, steps)`` like Opacus's own accountants.
    """

    sampler: BatchSampler | None = None  # set on subclasses made by register_opacus_accountant

    def __init__(self, sampler: BatchSampler | None = None) -> None:
        self.history: list[tuple[float, float, int]] = []
        if sampler is not None:
            self.sampler = sampler

    @classmethod
    def mechanism(cls) -> str:
        """The registry name."""
        return "dpkit"

    def __len__(self) -> int:
        return sum(k for _, _, k in self.history)

    def step(self, *, noise_multiplier: float, sample_rate: float) -> None:
        """Record one optimiser step (refusing a sample rate the sampler does not produce)."""
        sigma = check_positive(noise_multiplier, "noise_multiplier")
        q = check_probability(sample_rate, name="sample_rate")
        if self.sampler is not None:
            sch = self.sampler.scheme
            allowed = (sch.sampling_rate, 1.0 / sch.steps_per_epoch)
            if not any(math.isclose(q, a, rel_tol=1e-9) for a in allowed):
                raise PrivacyParameterError(
                    f"Opacus reports sample rate {q:.6g} but the dpkit sampler draws "
                    f"{sch.name} batches of {sch.batch_size} from {sch.dataset_size} "
                    f"(rate {sch.sampling_rate:.6g}); pass the sampler to the DataLoader "
                    "as batch_sampler and to make_private(poisson_sampling=False)"
                )
        if self.history and self.history[-1][:2] == (sigma, q):
            s, r, k = self.history[-1]
            self.history[-1] = (s, r, k + 1)
        else:
            self.history.append((sigma, q, 1))

    def get_epsilon(self, delta: float, *args: Any, **kwargs: Any) -> float:
        """Epsilon spent so far at ``delta`` (an upper bound)."""
        d = check_delta(delta)
        if not self.history:
            return 0.0
        if self.sampler is not None:
            sigma = min(s for s, _, _ in self.history)
            return dpsgd_bounds(
                self.sampler.scheme,
                noise_multiplier=sigma,
                delta=d,
                steps=len(self),
                with_lower=False,
            ).upper
        acct = PldAccountant()
        for s, q, k in self.history:
            acct.compose(
                PoissonSampledEvent(sampling_rate=q, event=GaussianEvent(noise_multiplier=s)), k
            )
        return acct.get_epsilon(d)

    def get_optimizer_hook_fn(self, sample_rate: float) -> Any:
        """Opacus's hook: one :meth:`step` per optimiser step (as its own accountants do)."""

        def hook_fn(optim: Any) -> None:
            self.step(
                noise_multiplier=optim.noise_multiplier,
                sample_rate=sample_rate * optim.accumulated_iterations,
            )

        return hook_fn

    def state_dict(self, destination: Any = None) -> Any:
        """Opacus's checkpoint format: ``history`` and ``mechanism``."""
        out = {} if destination is None else destination
        out["history"] = list(self.history)
        out["mechanism"] = self.mechanism()
        return out

    def load_state_dict(self, state_dict: Any) -> None:
        """Restore ``history`` from :meth:`state_dict` output."""
        if not state_dict or state_dict.get("mechanism") != self.mechanism():
            raise PrivacyParameterError("not a dpkit accountant state")
        self.history = [(float(s), float(q), int(k)) for s, q, k in state_dict["history"]]


def register_opacus_accountant(
    sampler: BatchSampler | None = None, name: str = "dpkit"
) -> type[DpkitOpacusAccountant]:
    """Register a dpkit accountant with Opacus under ``name`` (replacing an earlier one).

    With ``sampler``, the registered class accounts that sampler's scheme. Returns the class.
    Opacus's ``IAccountant`` is added as a base so that Opacus's type checks accept it.
    """
    from opacus.accountants import (  # type: ignore[import-untyped,unused-ignore]
        IAccountant,
        register_accountant,
    )

    def _mechanism(cls: type) -> str:
        return name

    cls = type(
        "DpkitOpacusAccountantFor_" + name,
        (DpkitOpacusAccountant, IAccountant),
        {"sampler": sampler, "mechanism": classmethod(_mechanism)},
    )
    register_accountant(name, cls, force=True)
    return cls
