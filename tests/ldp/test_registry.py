"""One registry of local-DP protocols (``dpkit.ldp.PROTOCOLS``), read by the CLI and the
selection helpers."""

from __future__ import annotations

import math

import pytest

from dpkit import ldp
from dpkit.cli import _ldp as cli_ldp
from dpkit.errors import PrivacyParameterError


def test_registry_lists_every_protocol_once() -> None:
    classes = list(ldp.PROTOCOLS.values())
    assert len(classes) == len(set(classes))
    exported = {
        getattr(ldp, n)
        for n in ldp.__all__
        if isinstance(getattr(ldp, n), type)
        and issubclass(getattr(ldp, n), (ldp.FrequencyOracle, ldp.MeanMechanism))
    }
    assert set(classes) == {
        c for c in exported if c not in (ldp.FrequencyOracle, ldp.MeanMechanism)
    }
    with pytest.raises(TypeError):
        ldp.PROTOCOLS["new"] = ldp.GRR  # type: ignore[index]


def test_frequency_oracles_are_the_registry_ones_in_the_same_order() -> None:
    expected = (ldp.GRR, ldp.SUE, ldp.OUE, ldp.OLH, ldp.BLH, ldp.HadamardResponse)
    assert expected == ldp.FREQUENCY_ORACLES
    assert set(ldp.FREQUENCY_ORACLES) < set(ldp.PROTOCOLS.values())


@pytest.mark.parametrize("name", [*ldp.PROTOCOLS, "best", "OUE", "Duchi"])
def test_make_protocol_builds_every_registered_name(name: str) -> None:
    proto = ldp.make_protocol(name, epsilon=1.0, domain=8)
    if name.lower() in ldp.PROTOCOLS:
        assert type(proto) is ldp.PROTOCOLS[name.lower()]
    assert proto.epsilon == 1.0
    # the CLI builds through the same registry
    assert type(cli_ldp.make_protocol(name, epsilon=1.0, domain=8)) is type(proto)


def test_make_protocol_refuses_unknown_names_and_missing_domains() -> None:
    for bad in ("nope", "", None, 3):
        with pytest.raises(PrivacyParameterError, match="unknown protocol"):
            ldp.make_protocol(bad, epsilon=1.0, domain=8)  # type: ignore[arg-type]
    for name in ("grr", "best"):
        with pytest.raises(PrivacyParameterError, match="domain"):
            ldp.make_protocol(name, epsilon=1.0)
    with pytest.raises(PrivacyParameterError):
        ldp.make_protocol("duchi", epsilon=math.nan)
