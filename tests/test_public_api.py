"""The public surface: ``import dpkit`` stays light, and what is exported is what is promised."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

HEAVY = (
    "duckdb",
    "pyspark",
    "matplotlib",
    "pandas",
    "polars",
    "sqlglot",
    "torch",
    "opendp",
    "diffprivlib",
    "pydp",
    "typer",
    "rich",
)


def _modules_after(code: str) -> set[str]:
    out = subprocess.run(
        [sys.executable, "-c", f"{code}\nimport sys, json\nprint(json.dumps(sorted(sys.modules)))"],
        check=True,
        capture_output=True,
        text=True,
        timeout=120,
    )
    return set(json.loads(out.stdout.strip().splitlines()[-1]))


@pytest.mark.parametrize(
    "code",
    [
        "import dpkit",
        "import dpkit.noise",
        "import dpkit.mechanisms",
        "from dpkit.mechanisms import Laplace; Laplace.from_epsilon(epsilon=1.0, sensitivity=1.0)"
        ".release([1.0, 2.0])",
        "from dpkit import Laplace, Gaussian, DiscreteLaplace, DiscreteGaussian, "
        "ExponentialMechanism, ReportNoisyMax, RandomizedResponse, Budget",
    ],
)
def test_core_import_does_not_pull_heavy_dependencies(code: str) -> None:
    loaded = _modules_after(code)
    heavy = sorted(m for m in loaded if m.split(".")[0] in HEAVY)
    assert heavy == [], heavy


def test_plain_import_loads_only_the_errors() -> None:
    # The random source (numpy, cryptography), the subpackages and scipy load on first use.
    loaded = _modules_after("import dpkit")
    assert {m for m in loaded if m.split(".")[0] == "dpkit"} == {"dpkit", "dpkit.errors"}
    for lib in ("numpy", "scipy", "cryptography"):
        assert lib not in loaded, lib
    loaded = _modules_after("import dpkit\ndpkit.RandomSource().words(1)")
    assert {"numpy", "cryptography", "dpkit.noise._source"} <= loaded
    assert not any(m.split(".")[0] == "scipy" for m in loaded)


def test_analytics_import_loads_no_sql_parser_scipy_special_or_dp_sgd() -> None:
    # A builder query needs none of them: sqlglot loads with the first SQL text (a query or a
    # where() predicate) or compiled plan, scipy.special with the functions that call it, the
    # DP-SGD accountants when their names are first read from dpkit.accounting.
    loaded = _modules_after("import dpkit.analytics")
    assert "dpkit.analytics.session" in loaded
    unwanted = ("sqlglot", "scipy.special", "dpkit.accounting.dpsgd", "dpkit.accounting.batching")
    found = sorted(m for m in loaded if m.startswith(unwanted))
    assert found == [], found
    loaded = _modules_after("import dpkit.accounting\nassert dpkit.accounting.Budget")
    assert not any(m.startswith(("scipy", "dpkit.accounting.dpsgd")) for m in loaded)


def test_lazy_names_resolve_where_they_did() -> None:
    # The names loaded on first access are the ones their modules define.
    code = (
        "import dpkit.accounting as acc, dpkit.accounting.dpsgd as d, dpkit.analytics as an\n"
        "assert acc.dpsgd_epsilon is d.dpsgd_epsilon and 'RdpAccountant' in dir(acc)\n"
        "from dpkit.accounting import PldAccountant, dpsgd_rows\n"
        "from dpkit.analytics.sqlquery import SqlError\n"
        "assert an.sqlquery.SqlError is SqlError\n"
    )
    assert "dpkit.accounting.pld" in _modules_after(code)


def test_subpackages_are_attributes_after_a_plain_import() -> None:
    code = (
        "import dpkit, types\n"
        "for name in ('mechanisms', 'accounting', 'fdp', 'ldp', 'audit', 'divergence'):\n"
        "    mod = getattr(dpkit, name)\n"
        "    assert isinstance(mod, types.ModuleType) and mod.__name__ == 'dpkit.' + name\n"
        "assert dpkit.mechanisms.Laplace is dpkit.Laplace\n"
        "assert callable(dpkit.fdp.gdp) and callable(dpkit.audit.audit)\n"
    )
    loaded = _modules_after(code)
    assert {"dpkit.mechanisms", "dpkit.fdp", "dpkit.ldp", "dpkit.audit"} <= loaded


@pytest.mark.parametrize(
    "name",
    [
        "Laplace",
        "Gaussian",
        "DiscreteLaplace",
        "DiscreteGaussian",
        "ExponentialMechanism",
        "ReportNoisyMax",
        "RandomizedResponse",
        "count_sensitivity",
        "bounded_sum_sensitivity",
        "bounded_mean_sensitivity",
    ],
)
def test_top_level_mechanisms_are_the_mechanisms_classes(name: str) -> None:
    import dpkit
    import dpkit.mechanisms

    assert getattr(dpkit, name) is getattr(dpkit.mechanisms, name)
    assert name in dir(dpkit)


def test_top_level_random_source_is_the_noise_one() -> None:
    import dpkit
    import dpkit.noise

    assert dpkit.RandomSource is dpkit.noise.RandomSource


@pytest.mark.parametrize("name", ["Budget", "dpsgd_epsilon", "dpsgd_noise_multiplier"])
def test_top_level_accounting_names(name: str) -> None:
    import dpkit
    import dpkit.accounting

    assert getattr(dpkit, name) is getattr(dpkit.accounting, name)


def test_top_level_budget_is_the_accounting_budget() -> None:
    # Budget is the budget class of dpkit.accounting (the name arrives with the budgets work).
    import dpkit
    import dpkit.accounting

    assert dpkit.Budget is dpkit.accounting.Budget
    assert "Budget" in dpkit.__all__


@pytest.mark.parametrize(
    "name",
    [
        "Session",
        "count",
        "count_distinct",
        "sum",
        "mean",
        "variance",
        "std",
        "quantile",
        "histogram",
    ],
)
def test_top_level_analytics_names(name: str) -> None:
    # Session and the aggregate functions live in dpkit.analytics (the analytics work).
    import dpkit
    import dpkit.analytics

    assert getattr(dpkit, name) is getattr(dpkit.analytics, name)


def test_top_level_synthesizers_are_the_synth_ones() -> None:
    # Every synthesizer class of dpkit.synth is a top-level name, loaded lazily.
    import dpkit
    import dpkit.synth

    synthesizers = {n for n in dpkit.synth.__all__ if n in ("MST", "AIM")}
    assert "MST" in synthesizers
    for name in synthesizers:
        assert getattr(dpkit, name) is getattr(dpkit.synth, name)
        assert name in dpkit.__all__


def test_star_import_exports_the_api_but_never_shadows_builtins() -> None:
    namespace: dict[str, object] = {}
    exec("from dpkit import *", namespace)
    assert {"Laplace", "Gaussian", "Budget", "Session", "RandomSource"} <= set(namespace)
    import builtins

    assert not set(namespace) & set(dir(builtins)) - {"__builtins__"}


def test_unknown_attribute_is_an_attribute_error() -> None:
    import dpkit

    with pytest.raises(AttributeError, match="no attribute 'Laplaze'"):
        dpkit.Laplaze  # noqa: B018
    assert not hasattr(dpkit, "definitely_not_here")


def test_top_level_all_is_exactly_the_public_names() -> None:
    import types

    import dpkit

    public = {n for n in dir(dpkit) if not n.startswith("_")}
    submodules = {
        "accounting",
        "analytics",
        "audit",
        "divergence",
        "fdp",
        "ldp",
        "mechanisms",
        "noise",
        "synth",
    }
    aggregates = {
        "count",
        "count_distinct",
        "sum",
        "mean",
        "variance",
        "std",
        "quantile",
        "histogram",
    }
    assert set(dpkit.__all__) - {"__version__"} == public - submodules - aggregates
    assert submodules <= public and aggregates <= public
    # every eagerly bound public attribute is listed (lazy ones are checked above)
    eager = {
        n
        for n, v in vars(dpkit).items()
        if not n.startswith("_")
        and not isinstance(v, types.ModuleType)
        and n not in {"annotations", "importlib", "TYPE_CHECKING", "Any"} | aggregates
    }
    assert eager <= set(dpkit.__all__), eager - set(dpkit.__all__)


@pytest.mark.parametrize("module", ["dpkit.noise", "dpkit.mechanisms", "dpkit.errors"])
def test_subpackage_all_names_resolve(module: str) -> None:
    import importlib

    mod = importlib.import_module(module)
    for name in mod.__all__:
        assert hasattr(mod, name), (module, name)


def test_mechanisms_api_names_users_rely_on() -> None:
    from dpkit import mechanisms as m

    for name in (
        "Laplace",
        "Gaussian",
        "DiscreteLaplace",
        "DiscreteGaussian",
        "ExponentialMechanism",
        "ReportNoisyMax",
        "RandomizedResponse",
    ):
        assert name in m.__all__, name
    lap = m.Laplace.from_epsilon(epsilon=1.0, sensitivity=1.0)
    for attr in ("scale", "sensitivity", "granularity", "epsilon", "event"):
        assert hasattr(lap, attr), attr
    gau = m.Gaussian.from_epsilon_delta(epsilon=1.0, delta=1e-6, sensitivity=1.0, method="analytic")
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
