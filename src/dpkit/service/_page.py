"""The curator's web page: server-rendered HTML with inline SVG plots (no script, no CDN).

It shows the budget and its history (cumulative epsilon spent after each charge, against the
total), each analyst's spend against their cap, the log of queries (who, when, what, cost,
status) and every answered table with a plot of its first estimate and the estimate's
confidence interval. Everything shown is either public (the budget, the queries) or released
(noisy answers); every text taken from a request is HTML-escaped.
"""

from __future__ import annotations

import html
import json
import math
import time
from typing import Any

from dpkit._numeric.display import fmt

__all__ = ["bar_chart", "history_chart", "login_page", "render_page"]

HISTORY_COLOUR = "#1f77b4"
BUDGET_COLOUR = "#d62728"
ANALYST_COLOUR = "#ff7f0e"
RESULT_COLOUR = "#2ca02c"
CI_COLOUR = "#333333"

_STYLE = """
body{font-family:system-ui,sans-serif;margin:1.5em;color:#222;background:#fff}
h1{font-size:1.4em} h2{font-size:1.15em;margin-top:1.6em}
table{border-collapse:collapse;margin:.5em 0} td,th{border:1px solid #ccc;padding:2px 8px;
font-size:.85em;text-align:left} th{background:#f3f3f3}
.num{text-align:right;font-variant-numeric:tabular-nums} code{font-size:.8em}
.card{display:inline-block;border:1px solid #ddd;border-radius:6px;padding:.5em 1em;margin:.3em}
.result{margin:1em 0;padding:.5em;border-top:1px solid #eee}
"""


def _e(x: Any) -> str:
    return html.escape(str(x), quote=True)


def _fmt(x: Any) -> str:
    if x is None:
        return "-"
    if isinstance(x, float) and not math.isfinite(x):
        return "-"
    return fmt(x)


def _charged(q: dict[str, Any], key: str) -> Any:
    """What an answered query charged (its release's ``epsilon``/``delta``); ``None`` when it
    was not answered (a refused query charged nothing)."""
    result = q.get("result")
    if q.get("status") != "answered" or not isinstance(result, dict):
        return None
    return (result.get("release") or {}).get(key)


def _when(t: Any) -> str:
    if t is None:
        return "-"
    return time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime(float(t)))


def history_chart(points: list[float], total: float, *, width: int = 640, height: int = 240) -> str:
    """SVG step plot of cumulative epsilon after each charge, with the total as a dashed line."""
    pad_l, pad_r, pad_t, pad_b = 50, 10, 10, 30
    w, h = width - pad_l - pad_r, height - pad_t - pad_b
    top = max([total, *points]) if points else total
    top = top if top > 0 else 1.0
    n = max(len(points), 1)

    def xy(i: float, v: float) -> tuple[float, float]:
        return pad_l + w * i / n, pad_t + h * (1.0 - v / top)

    path = [xy(0, 0.0)]
    prev = 0.0
    for i, v in enumerate(points):
        path.append(xy(i, prev))
        path.append(xy(i + 1, prev))
        path.append(xy(i + 1, v))
        prev = v
    poly = " ".join(f"{x:.1f},{y:.1f}" for x, y in path)
    by = xy(0, total)[1]
    ticks = "".join(
        f'<text x="{pad_l - 4}" y="{xy(0, top * f)[1] + 4:.1f}" font-size="10" '
        f'text-anchor="end">{_fmt(top * f)}</text>'
        for f in (0.0, 0.5, 1.0)
    )
    return (
        f'<svg id="history-chart" xmlns="http://www.w3.org/2000/svg" width="{width}" '
        f'height="{height}" role="img" aria-label="budget history">'
        f'<rect x="{pad_l}" y="{pad_t}" width="{w}" height="{h}" fill="#fafafa" '
        f'stroke="#ccc"/>{ticks}'
        f'<line x1="{pad_l}" x2="{pad_l + w}" y1="{by:.1f}" y2="{by:.1f}" '
        f'stroke="{BUDGET_COLOUR}" stroke-width="2" stroke-dasharray="6,4"/>'
        f'<polyline points="{poly}" fill="none" stroke="{HISTORY_COLOUR}" stroke-width="3"/>'
        f'<text x="{pad_l + w / 2:.0f}" y="{height - 8}" font-size="11" text-anchor="middle">'
        f"charges ({len(points)})</text></svg>"
    )


def bar_chart(
    labels: list[str],
    values: list[float],
    *,
    caps: list[float] | None = None,
    low: list[float | None] | None = None,
    high: list[float | None] | None = None,
    colour: str = ANALYST_COLOUR,
    chart_id: str = "",
    width: int = 640,
) -> str:
    """Horizontal bars (one per label), optional cap outlines and interval whiskers."""
    bar, gap, pad_l, pad_r = 18, 8, 160, 70
    height = max(1, len(labels)) * (bar + gap) + gap
    w = width - pad_l - pad_r
    cands = [abs(v) for v in values if math.isfinite(v)]
    cands += [abs(c) for c in (caps or []) if math.isfinite(c)]
    cands += [abs(v) for v in (high or []) if v is not None and math.isfinite(v)]
    cands += [abs(v) for v in (low or []) if v is not None and math.isfinite(v)]
    top = max(cands) if cands else 1.0
    top = top if top > 0 else 1.0
    neg = any(v < 0 for v in values if math.isfinite(v)) or any(
        v is not None and v < 0 for v in (low or [])
    )
    zero = pad_l + (w / 2 if neg else 0.0)
    scale = (w / 2 if neg else w) / top
    parts = []
    for i, (lab, v) in enumerate(zip(labels, values, strict=True)):
        y = gap + i * (bar + gap)
        parts.append(
            f'<text x="{pad_l - 6}" y="{y + bar - 5}" font-size="11" '
            f'text-anchor="end">{_e(lab[:24])}</text>'
        )
        if caps is not None:
            parts.append(
                f'<rect x="{zero:.1f}" y="{y}" width="{max(caps[i], 0) * scale:.1f}" '
                f'height="{bar}" fill="none" stroke="#888" stroke-dasharray="3,2"/>'
            )
        if math.isfinite(v):
            x0, x1 = sorted((zero, zero + v * scale))
            parts.append(
                f'<rect x="{x0:.1f}" y="{y}" width="{max(x1 - x0, 1.0):.1f}" '
                f'height="{bar}" fill="{colour}"/>'
            )
        if low is not None and high is not None and low[i] is not None and high[i] is not None:
            lo, hi = zero + float(low[i] or 0) * scale, zero + float(high[i] or 0) * scale
            ym = y + bar / 2
            parts.append(
                f'<line x1="{lo:.1f}" x2="{hi:.1f}" y1="{ym}" y2="{ym}" '
                f'stroke="{CI_COLOUR}" stroke-width="2"/>'
            )
        parts.append(
            f'<text x="{width - pad_r + 4}" y="{y + bar - 5}" font-size="11">{_e(_fmt(v))}</text>'
        )
    ident = f' id="{_e(chart_id)}"' if chart_id else ""
    return (
        f'<svg{ident} xmlns="http://www.w3.org/2000/svg" width="{width}" '
        f'height="{height}" role="img">{"".join(parts)}</svg>'
    )


def _result_block(q: dict[str, Any]) -> str:
    res = q.get("result") or {}
    cols: list[str] = list(res.get("columns", []))
    rows: list[list[Any]] = list(res.get("rows", []))
    head = "".join(f"<th>{_e(c)}</th>" for c in cols)
    body = "".join(
        "<tr>"
        + "".join(
            f'<td class="num">{_e(_fmt(v))}</td>'
            if isinstance(v, (int, float))
            else f"<td>{_e(_fmt(v))}</td>"
            for v in r
        )
        + "</tr>"
        for r in rows[:200]
    )
    table = f'<table class="result-table"><tr>{head}</tr>{body}</table>'
    if not rows:
        table += "<p>no group was released</p>"
    release = res.get("release", {})
    estimates = [c for c in release.get("columns", {}) if c in cols]
    chart = ""
    if estimates and rows:
        col = estimates[0]
        j = cols.index(col)
        keys = [
            c
            for c in cols
            if c not in release.get("columns", {}) and not c.endswith(("_low", "_high"))
        ]
        labels = [", ".join(_fmt(r[cols.index(k)]) for k in keys) or "all" for r in rows[:50]]
        vals = [float(r[j]) if isinstance(r[j], (int, float)) else math.nan for r in rows[:50]]
        lo_i = cols.index(col + "_low") if col + "_low" in cols else None
        hi_i = cols.index(col + "_high") if col + "_high" in cols else None
        low = None if lo_i is None else [r[lo_i] for r in rows[:50]]
        high = None if hi_i is None else [r[hi_i] for r in rows[:50]]
        chart = f"<p>{_e(col)} (bars) with its interval (lines)</p>" + bar_chart(
            labels,
            vals,
            low=low,
            high=high,
            colour=RESULT_COLOUR,
            chart_id=f"result-chart-{q['id']}",
        )
    return (
        f'<div class="result" id="result-{_e(q["id"])}"><h3>{_e(q["analyst"])} at '
        f"{_e(_when(q.get('finished')))}</h3>{table}{chart}</div>"
    )


def render_page(status: dict[str, Any]) -> str:
    """The whole page from :meth:`~dpkit.service.app.Curator.status`."""
    budget, spent, remaining = status["budget"], status["spent"], status["remaining"]
    points = [float(h["spent_after"][0]) for h in status["history"]]
    total_eps = float(budget[0]) if budget and budget[0] is not None else 0.0
    cards = "".join(
        f'<div class="card" id="{k}"><b>{k}</b><br>epsilon {_e(_fmt(v[0]))}, '
        f"delta {_e(_fmt(v[1]))}</div>"
        for k, v in (("budget", budget), ("spent", spent), ("remaining", remaining))
    )
    analysts = status["analysts"]
    a_rows = "".join(
        f"<tr><td>{_e(a['analyst'])}</td><td class='num'>{_e(_fmt(a['spent'][0]))}</td>"
        f"<td class='num'>{_e(_fmt(a['spent'][1]))}</td>"
        f"<td class='num'>{_e(_fmt(a['cap'][0]))}</td><td class='num'>{_e(_fmt(a['cap'][1]))}"
        f"</td><td>{'revoked' if a['revoked'] else 'active'}</td></tr>"
        for a in analysts
    )
    a_chart = (
        bar_chart(
            [a["analyst"] for a in analysts],
            [float(a["spent"][0]) for a in analysts],
            caps=[float(a["cap"][0] or 0.0) for a in analysts],
            colour=ANALYST_COLOUR,
            chart_id="analyst-chart",
        )
        if analysts
        else ""
    )
    queries = status["queries"]
    q_rows = "".join(
        f"<tr><td>{_e(q['analyst'])}</td><td>{_e(_when(q['started']))}</td>"
        f"<td>{_e(q['kind'])}</td>"
        f"<td><code>{_e(json.dumps(q['request'].get('builder', q['request']))[:300])}</code>"
        f"</td><td class='num'>{_e(_fmt(q['epsilon']))}, {_e(_fmt(q['delta']))}</td>"
        f"<td class='num'>{_e(_fmt(_charged(q, 'epsilon')))}, "
        f"{_e(_fmt(_charged(q, 'delta')))}</td><td>{_e(q['status'])}</td></tr>"
        for q in queries
    )
    answered = [q for q in queries if q["status"] == "answered" and q.get("result")]
    results = "".join(_result_block(q) for q in answered[:100])
    return f"""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>dpkit curator: {_e(status["data"])}</title>
<style>{_STYLE}</style></head><body>
<h1>Curator: {_e(status["data"])} (privacy unit {_e(status["privacy_unit"])})</h1>
<form method="post" action="/curator/logout"><button type="submit">log out</button></form>
<p id="risk-link"><a href="/curator/report">Privacy report: risk for each analyst and in
total</a> (<a href="/curator/report.json">JSON</a>)</p>
<section id="budget-section"><h2>Budget</h2>{cards}
<h2>Budget history (epsilon spent after each charge; dashed: the total)</h2>
{history_chart(points, total_eps)}</section>
<section id="analysts-section"><h2>Spend per analyst (dashed outline: the cap)</h2>
<table id="analysts"><tr><th>analyst</th><th>epsilon spent</th><th>delta spent</th>
<th>epsilon cap</th><th>delta cap</th><th>token</th></tr>{a_rows}</table>{a_chart}</section>
<section id="log-section"><h2>Query log ({len(queries)})</h2>
<table id="query-log"><tr><th>who</th><th>when</th><th>kind</th><th>what</th>
<th>asked (epsilon, delta)</th><th>charged (epsilon, delta)</th><th>status</th></tr>{q_rows}
</table></section>
<section id="results-section"><h2>Answered tables</h2>{results}</section>
</body></html>"""


def login_page(message: str = "") -> str:
    """The curator's login form (the token is sent once; the HttpOnly cookie holds a session id)."""
    msg = f'<p id="login-error">{_e(message)}</p>' if message else ""
    return f"""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>dpkit curator: log in</title>
<style>{_STYLE}</style></head><body><h1>Curator log-in</h1>{msg}
<form method="post" action="/curator/login"><label>curator token
<input type="password" name="token" id="token" autocomplete="off"></label>
<button type="submit" id="login">log in</button></form></body></html>"""
