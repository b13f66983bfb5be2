"""Plots for the benchmarks page, drawn from the tables of ``docs/benchmarks.md``.

``docs/benchmarks.md`` is written by the scripts in ``benchmarks/`` (one section each, between
``<!-- begin NAME -->`` and ``<!-- end NAME -->``). This module reads the numbers back from those
tables, so the plots always show the numbers on the page. :func:`figures` draws what it can
(a section that is missing or reshaped gives no figure; the test suite checks that today's page
gives every figure); :func:`insert` places each figure at the end of its section.
"""

from __future__ import annotations

import io
import re
from dataclasses import dataclass


@dataclass(frozen=True)
class Figure:
    name: str
    section: str
    caption: str
    png: bytes


def section(text: str, name: str) -> str:
    """The text between the begin and end markers of a section ('' when absent)."""
    m = re.search(rf"<!-- begin {name} -->(.*?)<!-- end {name} -->", text, re.S)
    return m.group(1) if m else ""


def table_after(text: str, heading: str) -> list[dict[str, str]]:
    """The first Markdown table after the line that contains ``heading``, as dicts."""
    start = text.find(heading)
    if start < 0:
        return []
    start = text.rfind("\n", 0, start) + 1
    lines = text[start:].splitlines()
    if not lines[0].startswith("|"):
        lines = lines[1:]
    rows: list[list[str]] = []
    for line in lines:
        if line.startswith("|"):
            rows.append([c.strip() for c in line.strip().strip("|").split("|")])
        elif rows:
            break
    if len(rows) < 3:
        return []
    header, body = rows[0], rows[2:]
    return [dict(zip(header, row, strict=False)) for row in body]


def number(cell: str) -> float:
    """A float from a table cell such as ``**0.58**``, ``1.18*``, ``194 (extrap.)`` or ``1,787``."""
    m = re.search(r"-?\d[\d,]*\.?\d*(?:e-?\d+)?", cell.replace("**", ""))
    if m is None:
        raise ValueError(f"no number in {cell!r}")
    return float(m.group(0).replace(",", ""))


def _png(fig: object) -> bytes:
    import matplotlib.pyplot as plt

    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=110, bbox_inches="tight")  # type: ignore[attr-defined]
    plt.close(fig)  # type: ignore[arg-type]
    return buf.getvalue()


def _noise(text: str) -> Figure | None:
    rows = table_after(section(text, "noise"), "| task | implementation")
    rows = [r for r in rows if r.get("task") in ("Laplace", "Gaussian")]
    if not rows:
        return None
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 2, figsize=(10, 3.4), sharex=True)
    for ax, task in zip(axes, ("Laplace", "Gaussian"), strict=True):
        mine = [r for r in rows if r["task"] == task]
        names = [r["implementation"].split(" ")[0] for r in mine]
        values = [number(r["throughput (M/s)"]) for r in mine]
        colors = ["tab:blue" if n == "dpkit" else "tab:gray" for n in names]
        ax.barh(names, values, color=colors)
        ax.set_xscale("log")
        ax.invert_yaxis()
        ax.set_title(f"{task} noise")
        ax.set_xlabel("millions of values per second (log)")
    fig.suptitle("Throughput: dpkit vs numpy (insecure floor) and peers")
    return Figure(
        "bench-noise.png",
        "noise",
        "Noise throughput from the table above (log scale; higher is better).",
        _png(fig),
    )


def _ldp(text: str) -> Figure | None:
    rows = table_after(section(text, "ldp"), "| protocol | library")
    if not rows:
        return None
    import matplotlib.pyplot as plt

    col = "clients + server (s, for 1M users)"
    protocols = list(dict.fromkeys(r["protocol"] for r in rows))
    dpkit_t = []
    peer_t = []
    for p in protocols:
        mine = [r for r in rows if r["protocol"] == p]
        dpkit_t.append(min(number(r[col]) for r in mine if "dpkit" in r["library"]))
        peer_t.append(min(number(r[col]) for r in mine if "dpkit" not in r["library"]))
    fig, ax = plt.subplots(figsize=(8, 3.4))
    x = range(len(protocols))
    ax.bar([i - 0.2 for i in x], dpkit_t, width=0.4, label="dpkit", color="tab:blue")
    ax.bar([i + 0.2 for i in x], peer_t, width=0.4, label="fastest peer", color="tab:gray")
    ax.set_xticks(list(x), protocols)
    ax.set_yscale("log")
    ax.set_ylabel("seconds for 10^6 users (log)")
    ax.legend()
    ax.set_title("Local DP: clients + server, one million users, epsilon 1")
    return Figure(
        "bench-ldp.png",
        "ldp",
        "Time for a million users, dpkit against the fastest peer per protocol.",
        _png(fig),
    )


def _accounting(text: str) -> Figure | None:
    sec = section(text, "accounting")
    a = table_after(sec, "### (a)")
    b = table_after(sec, "### (b)")
    if not a or not b:
        return None
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 2, figsize=(11, 4))
    for ax, rows, title in (
        (axes[0], a, "DP-SGD (60 epochs)"),
        (axes[1], b, "1000 Laplace releases"),
    ):
        rows = [r for r in rows if r["epsilon"] not in ("n/a", "")]
        labels = [f"{r['library'].split(' ')[0]} {r['method']}" for r in rows]
        eps = [number(r["epsilon"]) for r in rows]
        colors = [
            "tab:orange"
            if r["kind"] == "estimate"
            else ("tab:blue" if r["library"] == "dpkit" else "tab:gray")
            for r in rows
        ]
        ax.barh(labels, eps, color=colors)
        ax.invert_yaxis()
        ax.set_xlabel("epsilon at the stated delta (lower is tighter)")
        ax.set_title(title)
        ax.set_xlim(0, max(eps) * 1.25)
        for y, e in enumerate(eps):
            ax.text(e, y, f" {e:.4g}", va="center", fontsize=8)
    fig.suptitle("Accounting: blue dpkit upper bounds, grey peers, orange CLT estimates")
    fig.tight_layout()
    return Figure(
        "bench-accounting.png",
        "accounting",
        "Epsilon reported by each accountant (the value is printed at each bar).",
        _png(fig),
    )


def _time_vs_size(text: str) -> Figure | None:
    audit = table_after(section(text, "audit"), "### Power curve")
    sel = table_after(section(text, "selection"), "### Exact permute-and-flip law")
    if not audit or not sel:
        return None
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 2, figsize=(10, 3.6))
    for label in dict.fromkeys(r["mechanism"] for r in audit):
        rows = [r for r in audit if r["mechanism"] == label]
        axes[0].loglog(
            [number(r["samples per side"]) for r in rows],
            [number(r["seconds"]) for r in rows],
            "o-",
            label=label,
        )
    axes[0].set_xlabel("samples per side")
    axes[0].set_ylabel("seconds")
    axes[0].set_title("Audit: time vs samples")
    axes[0].legend(fontsize=7)
    axes[1].loglog(
        [number(r["candidates"]) for r in sel], [number(r["seconds per call"]) for r in sel], "o-"
    )
    axes[1].set_xlabel("candidates")
    axes[1].set_ylabel("seconds per call")
    axes[1].set_title("Exact permute-and-flip law: time vs candidates")
    fig.tight_layout()
    return Figure(
        "bench-time-vs-size.png",
        "selection",
        "Time against input size: the audit (left) and the exact selection law (right), log-log.",
        _png(fig),
    )


def _analytics(text: str) -> Figure | None:
    sec = section(text, "analytics")
    speed = table_after(sec, "| system | seconds")
    utility = table_after(sec, "| system | groups released")
    if not speed or not utility:
        return None
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 3, figsize=(13, 3.8))
    names = [r["system"].split(" (")[0].split(",")[0] for r in speed]
    names = [n.replace("floor: plain DuckDB SQL", "floor (DuckDB SQL)") for n in names]
    colors = ["tab:blue" if n.startswith("dpkit") else "tab:gray" for n in names]
    axes[0].barh(names, [number(r["seconds"]) for r in speed], color=colors)
    axes[0].set_xscale("log")
    axes[0].invert_yaxis()
    axes[0].set_xlabel("seconds, 10^7 rows (log)")
    axes[0].set_title("Time")
    unames = [r["system"].split(" (")[0] for r in utility]
    ucolors = ["tab:blue" if n == "dpkit" else "tab:gray" for n in unames]
    axes[1].barh(unames, [number(r["groups released"]) for r in utility], color=ucolors)
    axes[1].invert_yaxis()
    axes[1].set_xlabel("groups released")
    axes[1].set_title("Groups released")
    axes[2].barh(unames, [number(r["MAE mean"]) for r in utility], color=ucolors)
    axes[2].set_xscale("log")
    axes[2].invert_yaxis()
    axes[2].set_xlabel("mean absolute error of the mean (log)")
    axes[2].set_title("Error of the per-group mean")
    fig.tight_layout()
    return Figure(
        "bench-analytics.png",
        "analytics",
        "Private analytics at equal budget: time, groups released and error.",
        _png(fig),
    )


def _time_vs_rows(text: str) -> Figure | None:
    """The analytics engine under a memory limit, 10^7 and 10^8 rows (from the prose)."""
    sec = section(text, "analytics")
    big = re.search(r"100,000,000 rows of Parquet.*?dpkit engine ([\d.]+) s", sec, re.S)
    small = re.search(r"on 10,000,000 rows under the same limit just before: ([\d.]+) s", sec)
    floor = re.search(r"floor on 100,000,000 rows under the same limit: ([\d.]+) s", sec)
    if not (big and small and floor):
        return None
    import matplotlib.pyplot as plt

    rows = [1e7, 1e8]
    engine = [float(small.group(1)), float(big.group(1))]
    fig, ax = plt.subplots(figsize=(6, 3.8))
    ax.loglog(rows, engine, "o-", color="tab:blue", label="dpkit engine")
    ax.loglog(rows, [engine[0], engine[0] * 10], ":", color="gray", label="linear in rows")
    ax.loglog(
        [1e8], [float(floor.group(1))], "s", color="tab:gray", label="floor: plain DuckDB SQL"
    )
    ax.set_xlabel("rows of Parquet")
    ax.set_ylabel("seconds")
    ax.set_title("Analytics under a 1 GB memory limit: time vs rows")
    ax.legend()
    fig.tight_layout()
    return Figure(
        "bench-time-vs-rows.png",
        "analytics",
        "Time against rows under a 1 GB DuckDB memory limit, from the paragraph above (log-log).",
        _png(fig),
    )


def figures(text: str) -> list[Figure]:
    """Every figure whose source table is present in ``text``."""
    out = []
    for make in (_noise, _ldp, _accounting, _time_vs_size, _analytics, _time_vs_rows):
        fig = make(text)
        if fig is not None:
            out.append(fig)
    return out


NOTE = (
    "The plots on this page are drawn from its tables when the site is built. Error against "
    "epsilon, for each mechanism, is plotted in [Choosing epsilon]"
    "(concepts/choosing-epsilon.md#what-epsilon-costs-error).\n\n"
)


def insert(markdown: str, figs: list[Figure]) -> str:
    """Place each figure just before the end marker of its section, and a note at the top."""
    first = markdown.find("<!-- begin ")
    if figs and first >= 0:
        markdown = markdown[:first] + NOTE + markdown[first:]
    for fig in figs:
        end = f"<!-- end {fig.section} -->"
        image = f"![{fig.caption}]({fig.name})\n\n*{fig.caption}*\n\n"
        markdown = markdown.replace(end, image + end, 1)
    return markdown
