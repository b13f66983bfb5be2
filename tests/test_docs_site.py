"""The documentation site builds in strict mode, runs every tutorial block and shows its plots.

One strict build (``mkdocs build --strict``, the same as ``make docs``) runs in a temporary
directory for the whole module. The build's hook (``tools/mkdocs_hooks.py``) executes every
``python`` block of the executed pages and writes a report of them; the tests read that report,
the built pages and the generated images. Strict mode turns every warning into a failure: a
broken link or anchor, a page missing from the navigation, an API cross-reference that does not
resolve, a docstring mkdocstrings cannot read.
"""

from __future__ import annotations

import html as html_module
import importlib
import importlib.util
import inspect
import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"


def _hooks() -> Any:
    spec = importlib.util.spec_from_file_location(
        "dpkit_docs_hooks", ROOT / "tools" / "mkdocs_hooks.py"
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


HOOKS = _hooks()


def _mkdocs(*args: str, cwd: Path, report: Path | None = None) -> subprocess.CompletedProcess[str]:
    env = dict(
        os.environ,
        NO_MKDOCS_2_WARNING="1",
        MPLBACKEND="Agg",
        PYTHONPATH=os.pathsep.join([str(ROOT / "src"), os.environ.get("PYTHONPATH", "")]),
    )
    if report is not None:
        env["DPKIT_DOCS_REPORT"] = str(report)
    # A Spark Connect session made earlier in this process (the Spark tests) marks the
    # environment as Connect mode; the build's own classic session must not inherit that.
    for name in ("SPARK_CONNECT_MODE_ENABLED", "SPARK_REMOTE", "SPARK_API_MODE"):
        env.pop(name, None)
    return subprocess.run(
        [sys.executable, "-m", "mkdocs", *args],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )


Site = tuple[Path, dict[str, list[dict[str, Any]]]]


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Site:
    out = tmp_path_factory.mktemp("site")
    report = out / "report.json"
    built = _mkdocs("build", "--strict", "--site-dir", str(out / "site"), cwd=ROOT, report=report)
    assert built.returncode == 0, built.stdout[-4000:] + built.stderr[-8000:]
    return out / "site", json.loads(report.read_text())


def _executed_pages() -> list[Path]:
    return sorted(
        p for p in DOCS.rglob("*.md") if HOOKS.is_executed(p.relative_to(DOCS).as_posix())
    )


def test_the_executed_pages_are_the_tutorials_examples_and_concepts() -> None:
    names = {p.relative_to(DOCS).as_posix() for p in _executed_pages()}
    for page in (
        "getting-started.md",
        "tutorials/analyst.md",
        "tutorials/analyst-spark.md",
        "tutorials/analyst-service.md",
        "tutorials/ml-engineer.md",
        "tutorials/telemetry-engineer.md",
        "tutorials/privacy-engineer.md",
        "examples/composition.md",
        "examples/exponential-mechanism.md",
        "examples/permute-and-flip.md",
        "examples/randomized-response.md",
        "concepts/neighbouring.md",
        "concepts/choosing-epsilon.md",
        "concepts/floating-point.md",
        "concepts/known-limitations.md",
    ):
        assert page in names, page
    assert not HOOKS.is_executed("accounting.md")


def test_every_python_block_of_every_executed_page_ran(site: Site) -> None:
    _, report = site
    for page in _executed_pages():
        uri = page.relative_to(DOCS).as_posix()
        blocks = HOOKS.PYTHON_BLOCK.findall(page.read_text())
        assert blocks, f"{uri} has no python block"
        assert [entry["block"] for entry in report[uri]] == list(range(len(blocks))), uri


def test_outputs_are_shown_under_their_blocks(site: Site) -> None:
    root, _ = site
    html = (root / "examples" / "exponential-mechanism" / "index.html").read_text()
    assert html.count(">Output<") >= 3
    assert re.search(r"OPT = \d+\.\d\d at price", html)


def _page_text(root: Path, page: str) -> str:
    """The built page's text with the markup removed (outputs are HTML-escaped code)."""
    html = (root / page / "index.html").read_text()
    return html_module.unescape(re.sub(r"<[^>]+>", "", html))


def test_the_spark_tutorial_ran_on_spark_and_spark_connect(site: Site) -> None:
    root, _ = site
    text = _page_text(root, "tutorials/analyst-spark")
    assert "identical on Spark: True" in text
    assert "exact aggregates as on DuckDB: True" in text
    assert re.search(r"refused: This query needs epsilon 1\.5 .* Nothing was spent\.", text)
    assert "Spark stopped" in text
    # the Outpost region (three people) is released only with public keys: once, in section 4
    assert len(re.findall(r"\d\s+Outpost\s+\d", text)) == 1


def test_the_service_tutorial_queried_refused_revoked_and_stopped(site: Site) -> None:
    root, _ = site
    text = _page_text(root, "tutorials/analyst-service")
    assert re.search(r"403 This query needs epsilon 0\.5 .*but only epsilon 0\.4\d* .*left", text)
    spent = re.search(r"Alice has spent: epsilon 0\.6, delta ([0-9.e+-]+)", text)
    # the selection thresholds the count's own noise and charges only the delta it uses
    assert spent is not None and 0.0 < float(spent.group(1)) <= 1e-8, spent
    assert "query by alice epsilon 0.5 refused" in text
    assert "<title>dpkit curator: people.parquet</title>" in text
    assert "Alice after revocation: 401" in text
    assert "server stopped: True" in text


def _processes_with(marker: str) -> list[str]:
    found = []
    for cmdline in Path("/proc").glob("[0-9]*/cmdline"):
        try:
            args = cmdline.read_bytes().decode(errors="replace").replace("\0", " ")
        except OSError:
            continue  # the process ended meanwhile
        if marker in args:
            found.append(args[:200])
    return found


def test_no_spark_process_of_the_spark_tutorial_survives_the_build(site: Site) -> None:
    """The page's local session and its Spark Connect server (a daemon outside the build's
    process) both carry the page's application name; the build has exited, so after a short
    grace period for the JVMs to exit, none may be left."""
    marker = "spark.app.name=private-report"
    deadline = time.monotonic() + 30
    while _processes_with(marker) and time.monotonic() < deadline:
        time.sleep(0.5)
    assert _processes_with(marker) == []
    # companion: the search finds a live process by its command line
    probe = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)", marker])
    try:
        # (the child shows its own command line once it has exec'd: wait for that)
        until = time.monotonic() + 20
        while not _processes_with(marker) and time.monotonic() < until:
            time.sleep(0.1)
        assert _processes_with(marker)
    finally:
        probe.kill()
        probe.wait()


def _stopping_page(failing: bool) -> str:
    return (
        "```python\nfrom contextlib import ExitStack\nfrom pathlib import Path\n"
        "stack = ExitStack()\n"
        "stack.callback(Path('stopped.txt').write_text, 'stopped')\n```\n\n"
        + ("```python\nraise RuntimeError('a block fails')\n```\n" if failing else "")
        + "```python\nprint('last block')\n```\n"
    )


def test_a_failing_block_still_stops_what_its_page_started(tmp_path: Path) -> None:
    from mkdocs.exceptions import PluginError

    with pytest.raises(PluginError, match="a block fails"):
        HOOKS.run_page("tutorials/x.md", _stopping_page(failing=True), tmp_path)
    assert (tmp_path / "stopped.txt").read_text() == "stopped"
    assert Path.cwd() != tmp_path
    # a page that never closes its stack has it closed when the page ends
    ran = tmp_path / "ran"
    ran.mkdir()
    outputs, _ = HOOKS.run_page("tutorials/x.md", _stopping_page(failing=False), ran)
    assert outputs[-1] == "last block\n"
    assert (ran / "stopped.txt").read_text() == "stopped"


def test_an_error_while_stopping_fails_a_page_that_ran_through(tmp_path: Path) -> None:
    from mkdocs.exceptions import PluginError

    page = (
        "```python\nfrom contextlib import ExitStack\nstack = ExitStack()\n"
        "def stop():\n    raise OSError('cannot stop')\nstack.callback(stop)\n```\n"
    )
    with pytest.raises(PluginError, match="cannot stop"):
        HOOKS.run_page("tutorials/x.md", page, tmp_path)
    # after a failing block, the block's error is the one reported
    failing = page + "```python\nraise RuntimeError('the block error')\n```\n"
    with pytest.raises(PluginError, match="the block error"):
        HOOKS.run_page("tutorials/x.md", failing, tmp_path)


def test_images_of_executed_pages_are_in_the_site(site: Site) -> None:
    root, _ = site
    seen = 0
    for page in _executed_pages():
        folder = root / page.relative_to(DOCS).parent
        for image in re.findall(r"!\[[^\]]*\]\(([^)\s]+\.png)\)", page.read_text()):
            assert (folder / image).stat().st_size > 5_000, (page.name, image)
            seen += 1
    assert seen >= 8


def test_benchmarks_page_shows_its_plots(site: Site) -> None:
    root, _ = site
    html = (root / "benchmarks" / "index.html").read_text()
    for name in (
        "bench-noise.png",
        "bench-ldp.png",
        "bench-accounting.png",
        "bench-time-vs-size.png",
        "bench-analytics.png",
        "bench-time-vs-rows.png",
    ):
        assert f'src="../{name}"' in html, name
        assert (root / name).stat().st_size > 5_000, name


def test_bench_plots_read_the_tables_back() -> None:
    import bench_plots  # tools/ is on the test path (pyproject.toml)

    text = (DOCS / "benchmarks.md").read_text()
    rows = bench_plots.table_after(bench_plots.section(text, "analytics"), "| system | seconds")
    assert rows[0]["system"].startswith("floor")
    assert bench_plots.number("**0.58**") == 0.58
    assert bench_plots.number("1,787") == 1787.0
    assert bench_plots.number("194 (extrap.)") == 194.0
    assert bench_plots.figures("no tables here") == []


_REFERENCE = {
    "mechanisms": "dpkit.mechanisms",
    "accounting": "dpkit.accounting",
    "events": "dpkit.events",
    "fdp": "dpkit.fdp",
    "ldp": "dpkit.ldp",
    "audit": "dpkit.audit",
    "known-bad": "dpkit.audit.known_bad",
    "analytics": "dpkit.analytics",
    "noise": "dpkit.noise",
    "training": "dpkit.training",
    "divergence": "dpkit.divergence",
    "errors": "dpkit.errors",
}


@pytest.mark.parametrize(("page", "module_name"), sorted(_REFERENCE.items()))
def test_api_reference_documents_every_public_class_and_function(
    site: Site, page: str, module_name: str
) -> None:
    root, _ = site
    html = (root / "reference" / page / "index.html").read_text()
    module = importlib.import_module(module_name)
    names = getattr(module, "__all__", [])
    assert names
    missing = []
    for name in names:
        obj = getattr(module, name)
        if not (inspect.isclass(obj) or inspect.isfunction(obj)):
            continue  # constants and submodules (which have their own pages)
        if getattr(obj, "__name__", name) != name:
            continue  # an alias of a name documented under its own name
        if f'id="{module_name}.{name}"' not in html:
            missing.append(name)
    assert missing == []


def test_a_broken_cross_reference_fails_the_strict_build(tmp_path: Path) -> None:
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "index.md").write_text(
        "# x\n\n[a name that does not exist][dpkit.mechanisms.NoSuchMechanism]\n"
    )
    (tmp_path / "mkdocs.yml").write_text(
        "site_name: x\nplugins:\n  - autorefs\n  - mkdocstrings:\n      handlers:\n"
        f"        python:\n          paths: [{ROOT / 'src'}]\n"
    )
    broken = _mkdocs("build", "--strict", "--site-dir", str(tmp_path / "site"), cwd=tmp_path)
    assert broken.returncode != 0
    assert "NoSuchMechanism" in broken.stderr + broken.stdout
    # the same project with a real target builds
    (tmp_path / "docs" / "index.md").write_text(
        "# x\n\n[Laplace][dpkit.mechanisms.Laplace]\n\n::: dpkit.mechanisms.Laplace\n"
    )
    fixed = _mkdocs("build", "--strict", "--site-dir", str(tmp_path / "site"), cwd=tmp_path)
    assert fixed.returncode == 0, fixed.stderr[-3000:]
