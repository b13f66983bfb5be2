"""Public keys given as a dict of lists are refused from the list lengths alone."""

from __future__ import annotations

import itertools
from typing import Any

import pytest

from dpkit.analytics.builder import _parse_keys
from dpkit.errors import PrivacyParameterError


def test_key_product_above_the_limit_is_refused_before_it_is_built(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import dpkit.analytics.builder as builder

    def no_product(*lists: Any) -> Any:
        raise AssertionError("the cartesian product was built")

    monkeypatch.setattr(builder.itertools, "product", no_product)
    keys = {"a": list(range(300)), "b": list(range(300)), "c": list(range(300))}  # 2.7e7
    with pytest.raises(PrivacyParameterError, match="2\\*\\*24"):
        _parse_keys(keys, ("a", "b", "c"))
    monkeypatch.setattr(builder, "_MAX_KEYS", 100)  # one long list: same check, smaller
    with pytest.raises(PrivacyParameterError, match="2\\*\\*24"):
        _parse_keys({"a": list(range(101))}, ("a",))


def test_key_product_below_the_limit_is_kept() -> None:
    got = _parse_keys({"a": [1, 2], "b": ["x", "y", "x"]}, ("a", "b"))
    assert got == tuple(itertools.product([1, 2], ["x", "y"]))
