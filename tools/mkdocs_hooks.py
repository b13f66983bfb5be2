"""MkDocs hooks: run the tutorials' code, show its output, add the plots it draws.

Every fenced block labelled exactly ``python`` on an executed page (``getting-started.md`` and
everything under ``tutorials/``, ``examples/`` and ``concepts/``) runs once per build, in order,
in one namespace per page and in a fresh temporary directory. What a block prints is shown
under it on the site; image files a page's code writes (``*.png``, ``*.svg``) are added to the
site next to the page, so ``![...](name.png)`` on that page shows what this build drew. A block
that raises stops the build with the page, the block and the traceback.

A page that starts something (a Spark session, a server) registers how to stop it on a
``contextlib.ExitStack`` of its own and closes the stack in its last block. When the page
ends, the hook closes every ``ExitStack`` left in the page's namespace, so what the page
started is stopped even when one of its blocks raised (closing a closed stack does nothing).

The benchmarks page gets plots drawn from its own tables (``tools/bench_plots.py``).

``DPKIT_DOCS_REPORT=path`` writes a JSON report of every executed block and its time (the test
suite reads it to check that no block was left out).
"""

from __future__ import annotations

import contextlib
import importlib.util
import io
import json
import os
import re
import sys
import tempfile
import time
import traceback
from pathlib import Path
from typing import Any

from mkdocs.exceptions import PluginError
from mkdocs.structure.files import File, Files

ROOT = Path(__file__).resolve().parents[1]
# The pages run (and document) the dpkit on the path: ``make docs`` and the docs-site test put
# this checkout's ``src`` first on PYTHONPATH.


def _load_bench_plots() -> Any:
    """``tools/bench_plots.py``, loaded from its file (mkdocs loads this hook the same way)."""
    spec = importlib.util.spec_from_file_location("bench_plots", ROOT / "tools" / "bench_plots.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["bench_plots"] = module  # its dataclasses look their module up by name
    spec.loader.exec_module(module)
    return module


bench_plots = _load_bench_plots()

PYTHON_BLOCK = re.compile(r"^```python\n(.*?)^```\n?", re.S | re.M)
EXECUTED_DIRS = ("tutorials/", "examples/", "concepts/")
EXECUTED_FILES = ("getting-started.md", "sql.md")
IMAGE_SUFFIXES = (".png", ".svg")

_outputs: dict[str, list[str]] = {}
_report: dict[str, list[dict[str, Any]]] = {}
_bench_figures: list[bench_plots.Figure] = []


def is_executed(src_uri: str) -> bool:
    """Whether the page's ``python`` blocks run at build time."""
    return src_uri in EXECUTED_FILES or src_uri.startswith(EXECUTED_DIRS)


def run_page(src_uri: str, text: str, workdir: Path) -> tuple[list[str], list[dict[str, Any]]]:
    """Run a page's python blocks in order in ``workdir``; return their outputs and timings."""
    namespace: dict[str, Any] = {"__name__": "docs_page"}
    outputs: list[str] = []
    timings: list[dict[str, Any]] = []
    previous = Path.cwd()
    os.chdir(workdir)
    finished = False
    try:
        for index, match in enumerate(PYTHON_BLOCK.finditer(text)):
            code = match.group(1)
            line = text.count("\n", 0, match.start()) + 2
            out = io.StringIO()
            start = time.perf_counter()
            try:
                with contextlib.redirect_stdout(out):
                    exec(compile(code, f"{src_uri}:{line}", "exec"), namespace)
            except Exception as exc:
                raise PluginError(
                    f"{src_uri}: python block {index} (line {line}) raised:\n"
                    + "".join(traceback.format_exception(exc))
                ) from exc
            timings.append(
                {"block": index, "line": line, "seconds": round(time.perf_counter() - start, 3)}
            )
            outputs.append(out.getvalue())
        finished = True
    finally:
        try:
            _close_stacks(src_uri, namespace, failed=not finished)
        finally:
            os.chdir(previous)
            if "matplotlib.pyplot" in sys.modules:
                sys.modules["matplotlib.pyplot"].close("all")
    return outputs, timings


def _close_stacks(src_uri: str, namespace: dict[str, Any], *, failed: bool) -> None:
    """Close the page's ``ExitStack``s, the last one created first (each in LIFO order).

    After a block raised, an error while stopping is printed and the block's error is the one
    reported; on a page that ran through, an error while stopping fails the build.
    """
    stacks = [v for v in namespace.values() if isinstance(v, contextlib.ExitStack)]
    errors: list[BaseException] = []
    for stack in reversed(stacks):
        try:
            stack.close()
        except Exception as exc:
            errors.append(exc)
    if not errors:
        return
    text = "".join("".join(traceback.format_exception(e)) for e in errors)
    if failed:
        print(f"{src_uri}: stopping what the page started also raised:\n{text}", file=sys.stderr)
        return
    raise PluginError(f"{src_uri}: stopping what the page started raised:\n{text}")


def on_files(files: Files, config: Any) -> Files:
    os.environ.setdefault("MPLBACKEND", "Agg")
    _outputs.clear()
    _report.clear()
    docs_dir = Path(config["docs_dir"])
    for file in list(files):
        if not (file.src_uri.endswith(".md") and is_executed(file.src_uri)):
            continue
        text = (docs_dir / file.src_uri).read_text(encoding="utf-8")
        with tempfile.TemporaryDirectory(prefix="dpkit-docs-") as tmp:
            outputs, timings = run_page(file.src_uri, text, Path(tmp))
            folder = file.src_uri.rpartition("/")[0]
            for image in sorted(Path(tmp).iterdir()):
                if image.suffix in IMAGE_SUFFIXES:
                    uri = f"{folder}/{image.name}" if folder else image.name
                    files.append(File.generated(config, uri, content=image.read_bytes()))
        _outputs[file.src_uri] = outputs
        _report[file.src_uri] = timings
    bench = files.get_file_from_path("benchmarks.md")
    if bench is not None:
        _bench_figures[:] = bench_plots.figures((docs_dir / "benchmarks.md").read_text())
        for figure in _bench_figures:
            files.append(File.generated(config, figure.name, content=figure.png))
    return files


def _with_output(text: str, outputs: list[str]) -> str:
    it = iter(outputs)

    def add(match: re.Match[str]) -> str:
        out = next(it).rstrip()
        block = match.group(0)
        if not block.endswith("\n"):
            block += "\n"
        if not out:
            return block
        return f'{block}\n```text title="Output"\n{out}\n```\n'

    return PYTHON_BLOCK.sub(add, text)


def on_page_markdown(markdown: str, page: Any, config: Any, files: Files) -> str:
    uri = page.file.src_uri
    if uri in _outputs:
        return _with_output(markdown, _outputs[uri])
    if uri == "benchmarks.md":
        return bench_plots.insert(markdown, _bench_figures)
    return markdown


def on_post_build(config: Any) -> None:
    path = os.environ.get("DPKIT_DOCS_REPORT")
    if path:
        Path(path).write_text(json.dumps(_report, indent=1))
