"""The accountant submodules stay attributes of ``dpkit.accounting`` after its names became lazy.

Finding (red team, lazy imports of ``dpkit.accounting``, PEP 562): the package used to import
``batching``, ``dpsgd``, ``gdp``, ``pld``, ``rdp`` and ``tables`` eagerly, so after a plain
``import dpkit.accounting`` the attribute ``dpkit.accounting.rdp`` (and the five others) was
there. When those names became lazy, only the names in ``__all__`` were loaded on access: the
six submodules gave ``AttributeError`` (6 of 14 public submodules before the fix, 0 after).
Not a privacy finding (nothing is charged), a public name that stopped resolving; no reproducer.
"""

from __future__ import annotations

import subprocess
import sys

import pytest

SUBMODULES = ("batching", "dpsgd", "gdp", "pld", "rdp", "tables")


@pytest.mark.parametrize("name", SUBMODULES)
def test_accounting_submodule_is_an_attribute_after_a_plain_import(name: str) -> None:
    # a fresh interpreter: in this one another test may have imported the submodule already
    code = (
        "import sys, types\n"
        "import dpkit.accounting as acc\n"
        f"assert 'dpkit.accounting.{name}' not in sys.modules\n"
        f"mod = acc.{name}\n"
        f"assert isinstance(mod, types.ModuleType) and mod.__name__ == 'dpkit.accounting.{name}'\n"
        f"assert sys.modules['dpkit.accounting.{name}'] is mod and '{name}' in dir(acc)\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stderr


def test_an_unknown_accounting_attribute_still_raises_attribute_error() -> None:
    import dpkit.accounting

    with pytest.raises(AttributeError, match="no_such_name"):
        dpkit.accounting.no_such_name  # noqa: B018
