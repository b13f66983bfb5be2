"""User documentation: its code runs, its links resolve, it stands alone, its numbers are true.

Every fenced block labelled exactly ``python`` in README.md and docs/getting-started.md is
executed here, each block on its own. The tutorials, worked examples and concept pages (and
getting-started again) run page by page when the site is built: tests/test_docs_site.py builds it
and checks that every one of their blocks ran. Examples that cannot run here on purpose (shell
sessions, sketches of other layers) use another fence label (``console``, ``sh``, ``text``) and
are therefore not executed: nothing is skipped.
"""

from __future__ import annotations

import contextlib
import io
import math
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"
EXECUTED = [ROOT / "README.md", DOCS / "getting-started.md"]
_PYTHON_BLOCK = re.compile(r"^```python\n(.*?)^```", re.S | re.M)
_LINK = re.compile(r"\]\(([^)#\s]+)(?:#[^)]*)?\)")


def _blocks() -> list[tuple[str, int, str]]:
    out = []
    for path in EXECUTED:
        for i, code in enumerate(_PYTHON_BLOCK.findall(path.read_text())):
            out.append((path.name, i, code))
    return out


BLOCKS = _blocks()


def test_the_pages_have_python_examples() -> None:
    names = [name for name, _, _ in BLOCKS]
    assert names.count("README.md") >= 1
    assert names.count("getting-started.md") >= 6


@pytest.mark.parametrize(
    ("page", "index", "code"), BLOCKS, ids=[f"{name}-{i}" for name, i, _ in BLOCKS]
)
def test_python_block_runs(page: str, index: int, code: str) -> None:
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        exec(compile(code, f"{page}[{index}]", "exec"), {"__name__": f"doc_{index}"})
    if "print(" in code:
        assert out.getvalue().strip(), "the example prints nothing"


def test_getting_started_has_a_path_for_each_kind_of_user() -> None:
    text = (DOCS / "getting-started.md").read_text()
    for heading in ("Analyst", "ML engineer", "Telemetry engineer", "Privacy engineer"):
        assert re.search(rf"^### {heading}\b", text, re.M), heading
    for name in (
        "dpkit.Session",
        "dpkit query",
        "analytics.md",
        "dpsgd_epsilon",
        "dpkit.ldp",
        "dpkit.fdp",
        "dpkit.audit",
        "dpkit audit code",
    ):
        assert name in text, name


def _links(path: Path) -> set[str]:
    return {m for m in _LINK.findall(path.read_text()) if "://" not in m}


def test_readme_links_every_doc_page() -> None:
    linked = {(ROOT / link).resolve() for link in _links(ROOT / "README.md")}
    pages = {p.resolve() for p in DOCS.rglob("*.md")}
    assert pages - linked == set(), sorted(str(p.relative_to(DOCS)) for p in pages - linked)


def _drawn_by_the_page(page: Path) -> set[str]:
    """Image files that the page's own python blocks write (the site build adds them)."""
    code = "\n".join(_PYTHON_BLOCK.findall(page.read_text()))
    return set(re.findall(r"[\"']([\w.-]+\.(?:png|svg))[\"']", code))


def test_the_drawn_image_rule_sees_a_saved_figure() -> None:
    page = DOCS / "tutorials" / "analyst.md"
    assert "analyst-report.png" in _drawn_by_the_page(page)
    assert "analyst-report.png" not in _drawn_by_the_page(DOCS / "mechanisms.md")


@pytest.mark.parametrize(
    "page",
    [ROOT / "README.md", *sorted(DOCS.rglob("*.md"))],
    ids=lambda p: str(p.relative_to(ROOT)),
)
def test_relative_links_resolve(page: Path) -> None:
    drawn = _drawn_by_the_page(page)
    missing = [
        link for link in _links(page) if not (page.parent / link).exists() and link not in drawn
    ]
    assert missing == []


# Notes that exist only for dpkit's developers must not leak into what users read.
_INTERNAL = re.compile(
    r"\b[Ss]eed (?:\d{3}|notes?|texts?)\b|DESIGN\.md|STYLE\.md|shared/|"
    r"\b[Ii]ssue #?\d+\b"
)


def _user_facing_files() -> list[Path]:
    return [
        ROOT / "README.md",
        ROOT / "mkdocs.yml",
        *sorted(DOCS.rglob("*.md")),
        *sorted((ROOT / "src").rglob("*.py")),
        *sorted((ROOT / "tools").rglob("*.py")),
    ]


def test_the_internal_note_pattern_catches_what_it_should() -> None:
    for text in (
        "see Seed 002",
        "(seed 000)",
        "per STYLE.md item 1",
        "shared/DESIGN.md",
        "Targets (issue 2)",
        "The seed notes (blog translations)",
        "the seed text",
    ):
        assert _INTERNAL.search(text), text
    for text in ("seed=1", "a seeded source", "--seed 3", "RandomSource(seed=7, insecure=True)"):
        assert not _INTERNAL.search(text), text


def test_user_facing_text_never_cites_internal_notes() -> None:
    hits = []
    for path in _user_facing_files():
        for n, line in enumerate(path.read_text().splitlines(), 1):
            if _INTERNAL.search(line):
                hits.append(f"{path.relative_to(ROOT)}:{n}: {line.strip()}")
    assert hits == []


# docs/mechanisms.md states where Gaussian.from_mu stops; the numbers below are that statement.
def test_docs_state_the_smallest_gaussian_mu_exactly() -> None:
    text = (DOCS / "mechanisms.md").read_text()
    assert "2^-20" in text and "(2/3) · 2^-20" in text and "0.75 · 2^-20" in text
    assert "3e-5" not in text  # the old, wrong threshold


@pytest.mark.parametrize("sensitivity", [1.0, 1.5, 1.999, 3.0, 1e-3, 0.7, 1e6, 2.0**-30])
def test_gaussian_from_mu_limit_is_2_to_the_minus_20(sensitivity: float) -> None:
    from dpkit import Gaussian
    from dpkit.errors import PrivacyParameterError

    top = 2.0**-20
    for mu in (top * (1 + 1e-9), top * 1.01, 1e-6, 3e-5):  # all accepted
        g = Gaussian.from_mu(mu=mu, sensitivity=sensitivity)
        # s is the smallest power of two >= max(2^(floor(log2 d) - 12), d / (mu 2^20))
        base = 2.0 ** (math.floor(math.log2(sensitivity)) - 12)
        expected = 2.0 ** math.ceil(math.log2(max(base, sensitivity / (mu * 2.0**20))))
        assert g.granularity == expected
        assert g.granularity / sensitivity < max(2.0**-12, 2.0**-19 / mu)
    for mu in (top * 2 / 3, top / 2, 1e-7):  # all refused
        with pytest.raises(PrivacyParameterError):
            Gaussian.from_mu(mu=mu, sensitivity=sensitivity)


def test_gaussian_from_mu_smallest_mu_for_sensitivity_one() -> None:
    from dpkit import Gaussian
    from dpkit.errors import PrivacyParameterError

    Gaussian.from_mu(mu=0.75 * 2.0**-20 * (1 + 1e-9), sensitivity=1.0)
    with pytest.raises(PrivacyParameterError):
        Gaussian.from_mu(mu=0.75 * 2.0**-20 * (1 - 1e-9), sensitivity=1.0)
