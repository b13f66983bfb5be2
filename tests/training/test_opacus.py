"""A small CPU training run with Opacus and the dpkit accountant; its epsilon against Opacus's PRV
and RDP accountants and dp-accounting's PLD on the same history."""

from __future__ import annotations

import pytest

from dpkit.accounting.batching import BatchScheme
from dpkit.errors import PrivacyParameterError
from dpkit.training import BatchSampler, DpkitOpacusAccountant, register_opacus_accountant

torch = pytest.importorskip("torch")
opacus = pytest.importorskip("opacus")


@pytest.mark.slow
def test_opacus_training_run_with_the_dpkit_accountant() -> None:
    from opacus import PrivacyEngine
    from opacus.accountants import PRVAccountant, RDPAccountant

    register_opacus_accountant()
    torch.manual_seed(0)
    x = torch.randn(512, 8)
    y = (x[:, 0] > 0).long()
    data = torch.utils.data.TensorDataset(x, y)
    model = torch.nn.Linear(8, 2)
    opt = torch.optim.SGD(model.parameters(), lr=0.5)
    loader = torch.utils.data.DataLoader(data, batch_size=64)
    engine = PrivacyEngine(accountant="dpkit")
    model, opt, loader = engine.make_private(
        module=model, optimizer=opt, data_loader=loader, noise_multiplier=1.0, max_grad_norm=1.0
    )
    for _ in range(3):
        for xb, yb in loader:
            opt.zero_grad()
            torch.nn.functional.cross_entropy(model(xb), yb).backward()
            opt.step()
    acct = engine.accountant
    assert isinstance(acct, DpkitOpacusAccountant) and len(acct) > 0
    ours = engine.get_epsilon(1e-5)
    rdp, prv = RDPAccountant(), PRVAccountant()
    rdp.history = list(acct.history)
    prv.history = list(acct.history)
    assert ours <= rdp.get_epsilon(1e-5)
    assert abs(ours - prv.get_epsilon(1e-5)) < 0.05
    dpa = pytest.importorskip("dp_accounting")
    pld = dpa.pld.PLDAccountant()
    for s, q, k in acct.history:
        pld.compose(dpa.PoissonSampledDpEvent(q, dpa.GaussianDpEvent(s)), k)
    assert abs(ours - pld.get_epsilon(1e-5)) < 0.02
    correct = sum(int((model(xb).argmax(1) == yb).sum()) for xb, yb in [(x, y)])
    assert correct > 300  # it learned something under DP noise


def test_sampler_bound_accountant_refuses_another_loader() -> None:
    sch = BatchScheme(name="fixed_size", dataset_size=512, batch_size=64)
    acct = DpkitOpacusAccountant(BatchSampler(sch, epochs=1))
    acct.step(noise_multiplier=1.0, sample_rate=64 / 512)
    assert acct.get_epsilon(1e-5) > 0
    with pytest.raises(PrivacyParameterError, match="sample rate"):
        acct.step(noise_multiplier=1.0, sample_rate=0.5)
