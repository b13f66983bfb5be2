"""The public surface: ``import dpkit`` stays light, and what is exported is what is promised."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

HEAVY = ("duckdb", "pyspark", "matplotlib", "pandas", "polars", "sqlglot", "torch", "opendp",
         "diffprivlib", "pydp", "typer", "rich")


def _modules_after(code: str) -> set[str]:
    out = subprocess.run(
        [sys.executable, "-c", f"{code}\nimport sys, json\nprint(json.dumps(sorted(sys.modules)))"],
        check=True, capture_output=True, text=True, timeout=120,
    )
    return set(json.loads(out.stdout.strip().splitlines()[-1]))


@pytest.mark.parametrize("code", [
    "import dpkit",
    "import dpkit.noise",
    "import dpkit.mechanisms",
    "from dpkit.mechanisms import Laplace; Laplace.from_epsilon(epsilon=1.0, sensitivity=1.0)"
    ".release([1.0, 2.0])",
])
def test_core_import_does_not_pull_heavy_dependencies(code: str) -> None:
    loaded = _modules_after(code)
    heavy = sorted(m for m in loaded if m.split(".")[0] in HEAVY)
    assert heavy == [], heavy


def test_top_level_all_is_exactly_the_public_names() -> None:
    import dpkit

    public = {n for n in dir(dpkit) if not n.startswith("_")}
    # Submodules imported as a side effect of importing dpkit are attributes but not API.
    import types

    submodules = {n for n in public if isinstance(getattr(dpkit, n), types.ModuleType)}
    assert set(dpkit.__all__) - {"__version__"} == public - (submodules - set(dpkit.__all__))
    for name in dpkit.__all__:
        assert hasattr(dpkit, name), name


@pytest.mark.parametrize("module", ["dpkit.noise", "dpkit.mechanisms", "dpkit.errors"])
def test_subpackage_all_names_resolve(module: str) -> None:
    import importlib

    mod = importlib.import_module(module)
    for name in mod.__all__:
        assert hasattr(mod, name), (module, name)


def test_mechanisms_api_names_users_rely_on() -> None:
    from dpkit import mechanisms as m

    for name in ("Laplace", "Gaussian", "DiscreteLaplace", "DiscreteGaussian",
                 "ExponentialMechanism", "ReportNoisyMax", "RandomizedResponse"):
        assert name in m.__all__, name
    lap = m.Laplace.from_epsilon(epsilon=1.0, sensitivity=1.0)
    for attr in ("scale", "sensitivity", "granularity", "epsilon", "event"):
        assert hasattr(lap, attr), attr
    gau = m.Gaussian.from_epsilon_delta(epsilon=1.0, delta=1e-6, sensitivity=1.0,
                                        method="analytic")
    assert gau.sigma > 0


def test_errors_hierarchy() -> None:
    from dpkit import errors

    for name in errors.__all__:
        cls = getattr(errors, name)
        assert issubclass(cls, errors.DPKitError), name
    assert issubclass(errors.PrivacyParameterError, ValueError)


def test_py_typed_marker_is_shipped() -> None:
    from pathlib import Path

    import dpkit

    assert (Path(dpkit.__file__).parent / "py.typed").exists()
