"""The device side: standard library only, plain JSON reports, clear refusals."""

from __future__ import annotations

import json
import math
import subprocess
import sys
from fractions import Fraction
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dpkit import ldp
from dpkit.errors import PrivacyParameterError
from dpkit.ldp import client

CLIENT_FILE = Path(client.__file__)

_STANDALONE = r"""
import importlib.abc, importlib.util, json, sys

class Block(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in {"numpy", "scipy", "dpkit", "cryptography"}:
            raise ImportError("blocked: " + name)
        return None

sys.meta_path.insert(0, Block())
spec = importlib.util.spec_from_file_location("ldp_client_alone", sys.argv[1])
mod = importlib.util.module_from_spec(spec)
spec.loader.exec_module(mod)
out = {
    "rr": mod.RandomizedResponse(epsilon=1.0).randomize(True),
    "grr": mod.GRR(epsilon=1.0, domain=["a", "b", "c"]).randomize("b"),
    "sue": mod.SUE(epsilon=1.0, domain=10).randomize(3),
    "oue": mod.OUE(epsilon=1.0, domain=10).randomize(3),
    "olh": mod.OLH(epsilon=1.0, domain=100).randomize(42),
    "blh": mod.BLH(epsilon=1.0, domain=100).randomize(42),
    "hr": mod.HadamardResponse(epsilon=1.0, domain=100).randomize(42),
    "duchi": mod.Duchi(epsilon=1.0).randomize(0.25),
    "pm": mod.Piecewise(epsilon=1.0).randomize(-0.5),
    "hm": mod.Hybrid(epsilon=1.0).randomize(0.75),
}
loaded = sorted(m for m in sys.modules if m.split(".")[0] in {"numpy", "scipy", "dpkit"})
print(json.dumps({"reports": out, "loaded": loaded}))
"""


def test_client_file_runs_alone_with_numpy_blocked() -> None:
    proc = subprocess.run(
        [sys.executable, "-c", _STANDALONE, str(CLIENT_FILE)],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    data = json.loads(proc.stdout)
    assert data["loaded"] == []
    reps = data["reports"]
    assert reps["rr"] in (0, 1) and reps["duchi"] in (0, 1)
    assert reps["grr"] in (0, 1, 2)
    assert isinstance(reps["sue"], str) and len(reps["sue"]) == 4
    assert isinstance(reps["olh"], list) and len(reps["olh"]) == 2


def test_client_imports_only_the_standard_library() -> None:
    import ast

    tree = ast.parse(CLIENT_FILE.read_text())
    roots = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            roots.update(a.name.split(".")[0] for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module:
            roots.add(node.module.split(".")[0])
    assert roots <= set(sys.stdlib_module_names) | {"__future__"}, roots
    assert "random" not in roots  # the secrets module only


def test_reports_are_json_and_accepted_by_the_server() -> None:
    protos = [
        ldp.RandomizedResponse(epsilon=1.0),
        ldp.GRR(epsilon=1.0, domain=["x", "y", "z"]),
        ldp.SUE(epsilon=1.0, domain=13),
        ldp.OUE(epsilon=1.0, domain=13),
        ldp.OLH(epsilon=1.0, domain=50),
        ldp.BLH(epsilon=1.0, domain=50),
        ldp.HadamardResponse(epsilon=1.0, domain=50),
    ]
    for proto in protos:
        value = proto.labels[1]
        reports = [json.loads(json.dumps(proto.randomize(value))) for _ in range(20)]
        agg = proto.aggregator()
        assert agg.add(reports) == 20 and agg.rejected == 0
    for mech in (ldp.Duchi(epsilon=1.0), ldp.Piecewise(epsilon=1.0), ldp.Hybrid(epsilon=2.0)):
        reports = [json.loads(json.dumps(mech.randomize(0.3))) for _ in range(20)]
        agg = mech.aggregator()
        assert agg.add(reports) == 20 and agg.rejected == 0


@pytest.mark.parametrize("bad", [-1, 10, 2.0, "3", None, True, 10**30])
def test_client_refuses_values_outside_the_domain(bad: object) -> None:
    for proto in (
        client.GRR(epsilon=1.0, domain=10),
        client.OUE(epsilon=1.0, domain=10),
        client.OLH(epsilon=1.0, domain=10),
        ldp.HadamardResponse(epsilon=1, domain=10),
    ):
        with pytest.raises(ValueError, match=r"domain|int"):
            proto.randomize(bad)


@pytest.mark.parametrize("bad", [1.5, -1.0000001, math.nan, math.inf, "0.1", None, True])
def test_mean_clients_refuse_values_outside_unit_interval(bad: object) -> None:
    for mech in (
        client.Duchi(epsilon=1.0),
        client.Piecewise(epsilon=1.0),
        client.Hybrid(epsilon=1.0),
    ):
        with pytest.raises(ValueError, match=r"\[-1, 1\]"):
            mech.randomize(bad)


def test_labelled_domain_refuses_unknown_labels() -> None:
    grr = ldp.GRR(epsilon=1.0, domain=["red", "green"])
    with pytest.raises(ValueError, match="not in the domain"):
        grr.randomize("blue")
    with pytest.raises(ValueError, match="not in the domain"):
        grr.randomize_many(["red", "blue"])
    with pytest.raises(ValueError, match="not in the domain"):
        grr.randomize_many(np.array(["red", "blue"]))
    assert grr.encode_many(np.array(["green", "red", "green"])).tolist() == [1, 0, 1]
    ints = ldp.OUE(epsilon=1.0, domain=[10, 20, 30])
    assert ints.encode_many(np.array([30, 10])).tolist() == [2, 0]
    with pytest.raises(ValueError, match="not in the domain"):
        ints.encode_many(np.array([30, 11]))
    with pytest.raises(ValueError, match="outside"):
        ldp.OUE(epsilon=1.0, domain=4).randomize_many([0, 4])
    with pytest.raises(ValueError, match="outside"):
        ldp.Duchi(epsilon=1.0).randomize_many([0.0, 1.5])


# ------------------------------------------------------------------------------------------
# the client's stand-alone parameter rules agree with dpkit's shared validator
# ------------------------------------------------------------------------------------------
_EPS = st.one_of(
    st.floats(allow_nan=True, allow_infinity=True),
    st.integers(-5, 50),
    st.fractions(),
    st.booleans(),
    st.none(),
    st.text(max_size=2),
)


@settings(max_examples=300, deadline=None)
@given(eps=_EPS)
def test_client_and_shared_validator_agree_on_epsilon(eps: object) -> None:
    def ok(fn: object) -> bool:
        try:
            fn()  # type: ignore[operator]
        except (ValueError, TypeError):
            return False
        return True

    server = ok(lambda: ldp.GRR(epsilon=eps, domain=3))  # type: ignore[arg-type]
    device = ok(lambda: client.GRR(epsilon=eps, domain=3))  # type: ignore[arg-type]
    assert server == device


@settings(max_examples=200, deadline=None)
@given(d=st.one_of(st.integers(-3, 40), st.booleans(), st.floats(0, 10), st.none()))
def test_client_and_shared_validator_agree_on_domain(d: object) -> None:
    def ok(mod: object) -> bool:
        try:
            mod.OUE(epsilon=1.0, domain=d)  # type: ignore[attr-defined]
        except (ValueError, TypeError):
            return False
        return True

    assert ok(ldp) == ok(client)


def test_server_raises_privacy_parameter_errors() -> None:
    for bad in (0, -1.0, math.nan, math.inf, True, "1", 31.0):
        with pytest.raises(PrivacyParameterError):
            ldp.OUE(epsilon=bad, domain=4)  # type: ignore[arg-type]
    for dom in (1, 0, True, "abc", [1, 1], [3], 2.5):
        with pytest.raises(PrivacyParameterError):
            ldp.GRR(epsilon=1.0, domain=dom)  # type: ignore[arg-type]
    with pytest.raises(PrivacyParameterError):
        ldp.OLH(epsilon=1.0, domain=4, g=4)  # not prime
    with pytest.raises(PrivacyParameterError):
        ldp.RandomizedResponse(p_truth=0.5)
    with pytest.raises(PrivacyParameterError):
        ldp.RandomizedResponse(epsilon=1.0, p_truth=0.7)
    with pytest.raises(PrivacyParameterError):
        ldp.Piecewise(epsilon=1.0, resolution=0)
    with pytest.raises(TypeError):
        ldp.GRR(1.0, 4)  # type: ignore[misc]  # keyword-only


@settings(max_examples=60, deadline=None)
@given(eps=st.floats(0.01, 30.0), d=st.integers(2, 300))
def test_dyadic_probabilities_never_exceed_the_budget(eps: float, d: int) -> None:
    run = client.calibrated_epsilon(eps)  # what the probabilities are calibrated to
    lo = client.exp_bounds(run)[0]
    for proto in (
        ldp.GRR(epsilon=eps, domain=d),
        ldp.OUE(epsilon=eps, domain=d),
        ldp.SUE(epsilon=eps, domain=d),
        ldp.HadamardResponse(epsilon=eps, domain=d),
    ):
        p, q = proto.support_probabilities()
        if isinstance(proto, ldp.GRR):
            assert p / q <= lo
        elif isinstance(proto, ldp.HadamardResponse):
            assert p / (1 - p) <= lo
        else:
            assert p * (1 - q) / ((1 - p) * q) <= lo
        # and within 2**-62 of the textbook probabilities
        assert proto.run_epsilon == run
        assert abs(float(p) - _ideal(proto, run)[0]) < 2**-50
    assert isinstance(lo, Fraction)


def _ideal(proto: object, eps: float) -> tuple[float, float]:
    e = math.exp(eps)
    if isinstance(proto, ldp.GRR):
        return e / (e + proto.d - 1), 1 / (e + proto.d - 1)
    if isinstance(proto, ldp.SUE):
        h = math.exp(eps / 2)
        return h / (h + 1), 1 / (h + 1)
    if isinstance(proto, ldp.OUE):
        return 0.5, 1 / (e + 1)
    return e / (e + 1), 0.5


def test_server_import_stays_light() -> None:
    code = (
        "import sys, dpkit.ldp; print(sorted(m for m in ('matplotlib', 'typer', 'rich', "
        "'duckdb', 'pyspark') if m in sys.modules))"
    )
    proc = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=False
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "[]"
