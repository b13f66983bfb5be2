"""The public surface of dpkit.audit: exact ``__all__``, light import, keyword-only parameters."""

from __future__ import annotations

import inspect
import json
import subprocess
import sys
import types

import dpkit.audit as audit_pkg


def test_all_is_exactly_the_public_names() -> None:
    public = {n for n in dir(audit_pkg) if not n.startswith("_")}
    modules = {n for n in public if isinstance(getattr(audit_pkg, n), types.ModuleType)}
    assert set(audit_pkg.__all__) == public - (modules - {"known_bad"})


def test_import_is_light() -> None:
    code = "import dpkit.audit, sys, json; print(json.dumps(sorted(sys.modules)))"
    out = subprocess.run(
        [sys.executable, "-c", code], check=True, capture_output=True, text=True, timeout=120
    )
    loaded = set(json.loads(out.stdout.strip().splitlines()[-1]))
    heavy = {m for m in loaded if m.split(".")[0] in ("matplotlib", "typer", "rich")}
    assert heavy == set()
    assert "dpkit.ldp" not in loaded and "dpkit.fdp" not in loaded


def test_privacy_parameters_are_keyword_only() -> None:
    for fn in (
        audit_pkg.audit,
        audit_pkg.audit_ldp,
        audit_pkg.Claim.pure,
        audit_pkg.Claim.approx,
        audit_pkg.Claim.gdp,
        audit_pkg.epsilon_lower_bound,
    ):
        params = inspect.signature(fn).parameters
        for name in ("epsilon", "delta", "mu", "samples", "confidence", "claim"):
            if name in params:
                assert params[name].kind is inspect.Parameter.KEYWORD_ONLY, (fn, name)
