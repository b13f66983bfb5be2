"""Write one benchmark's section of docs/benchmarks.md, leaving the other sections alone."""

from __future__ import annotations

import os
import platform
import re
from pathlib import Path

# ``DPKIT_BENCH_DOC`` sends the sections elsewhere (``make bench-quick`` writes a scratch page,
# so quick figures never replace the measured ones).
DOC = Path(
    os.environ.get("DPKIT_BENCH_DOC")
    or Path(__file__).resolve().parent.parent / "docs" / "benchmarks.md"
)
HEADER = (
    "# Benchmarks\n\n"
    "Each section is written by one script in `benchmarks/` (run them all with `make bench`),\n"
    "side by side with the peer libraries in one process run. Times are medians on the machine\n"
    "named in the section.\n"
)


def machine() -> str:
    """A one-line description of the machine the numbers come from."""
    return f"{platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}"


def write_section(name: str, markdown: str) -> None:
    """Replace (or append) the section between ``<!-- begin NAME -->`` and ``<!-- end NAME -->``."""
    text = DOC.read_text() if DOC.exists() else HEADER
    begin, end = f"<!-- begin {name} -->", f"<!-- end {name} -->"
    block = f"{begin}\n{markdown.rstrip()}\n{end}"
    pattern = re.compile(re.escape(begin) + r".*?" + re.escape(end), re.S)
    if pattern.search(text):
        text = pattern.sub(lambda _: block, text)
    else:
        text = text.rstrip() + "\n\n" + block + "\n"
    DOC.parent.mkdir(parents=True, exist_ok=True)
    DOC.write_text(text)
