"""One public-API test for every package of dpkit (``dpkit`` itself: tests/test_public_api.py).

For each package: ``__all__`` has no duplicates and no private names; every name in it
resolves (lazy names included); and every public class, function or constant the package binds
that was defined inside the package (in its own modules) is listed, so nothing public is exported
by accident or forgotten. Public modules (no underscore in their path) must also have an
``__all__`` whose names resolve and are not private.
"""

from __future__ import annotations

import importlib
import pkgutil
import types

import pytest

import dpkit

PACKAGES = sorted(
    info.name for info in pkgutil.walk_packages(dpkit.__path__, "dpkit.") if info.ispkg
)
PUBLIC_MODULES = sorted(
    info.name
    for info in pkgutil.walk_packages(dpkit.__path__, "dpkit.")
    if not info.ispkg and not any(part.startswith("_") for part in info.name.split("."))
)


def test_every_package_is_covered() -> None:
    expected = {
        "dpkit._loss",
        "dpkit._numeric",
        "dpkit.accounting",
        "dpkit.accounting._budget",
        "dpkit.analytics",
        "dpkit.analytics.engines",
        "dpkit.analytics.engines._compiler",
        "dpkit.analytics.sqlquery",
        "dpkit.audit",
        "dpkit.cli",
        "dpkit.divergence",
        "dpkit.fdp",
        "dpkit.ldp",
        "dpkit.ledger",
        "dpkit.mechanisms",
        "dpkit.noise",
        "dpkit.risk",
        "dpkit.service",
        "dpkit.synth",
        "dpkit.training",
    }
    assert set(PACKAGES) == expected


def _defined_inside(value: object, package: str) -> bool:
    module = getattr(value, "__module__", None)
    return isinstance(module, str) and (module == package or module.startswith(package + "."))


@pytest.mark.parametrize("package", PACKAGES)
def test_package_all_is_exactly_its_public_names(package: str) -> None:
    mod = importlib.import_module(package)
    exported = list(mod.__all__)
    assert len(exported) == len(set(exported)), "duplicates in __all__"
    assert not [n for n in exported if n.startswith("_")], "private names exported"
    for name in exported:
        assert hasattr(mod, name), name
    bound = {
        name
        for name, value in vars(mod).items()
        if not name.startswith("_")
        and not isinstance(value, types.ModuleType)
        and name != "TYPE_CHECKING"
        and (_defined_inside(value, package) or name.isupper())
    }
    assert bound <= set(exported), sorted(bound - set(exported))
    assert set(exported) <= set(dir(mod))


@pytest.mark.parametrize("module", PUBLIC_MODULES)
def test_public_module_all_resolves(module: str) -> None:
    mod = importlib.import_module(module)
    exported = list(mod.__all__)
    assert len(exported) == len(set(exported))
    assert not [n for n in exported if n.startswith("_")]
    for name in exported:
        assert hasattr(mod, name), name
