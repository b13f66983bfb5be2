"""The privacy report: one page a curator can sign, in HTML and Markdown with a JSON twin.

It says what was released, by whom and when (the budget's ledger), what it cost in every
accounting language dpkit speaks, what an attacker can do (the trade-off curve with the attack
rates marked, and the statements of :class:`~dpkit.risk.Risk` in plain sentences), what is
assumed and what is not protected. Every figure is an upper bound rounded up; nothing is
charged. The HTML page is self-contained (inline SVG figure, no script).
"""

from __future__ import annotations

import base64
import dataclasses
import datetime as _dt
import html
import io
import json
import math
import urllib.parse
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from dpkit.accounting import (
    ApproxDpAccountant,
    ExactGdpAccountant,
    PldAccountant,
    PrivacyAccountant,
    PureDpAccountant,
    RdpAccountant,
    ZCdpAccountant,
    restate,
)
from dpkit.errors import DPKitError, PrivacyParameterError
from dpkit.events import (
    ApproxDpEvent,
    ComposedEvent,
    DiscreteGaussianEvent,
    DiscreteLaplaceEvent,
    DpEvent,
    ExponentialMechanismEvent,
    GaussianEvent,
    LaplaceEvent,
    Neighbouring,
    NonPrivateEvent,
    NoOpEvent,
    PoissonSampledEvent,
    PureDpEvent,
    RandomizedResponseEvent,
    ReportNoisyMaxEvent,
    SelfComposedEvent,
    ZCdpEvent,
    event_to_dict,
)
from dpkit.risk._curve import curve_of_events, guarantee_of, is_budget, is_sub_budget
from dpkit.risk._risk import LOW_FPRS, Risk, percent

__all__ = ["PrivacyReport", "describe_event", "report"]

#: Colours of the figure (the page tests look for them).
CURVE_COLOUR = "#c0392b"
MARK_COLOUR = "#1f4e79"


def describe_event(event: DpEvent) -> str:
    """One release in words (``Gaussian noise, sd 2 x sensitivity``)."""
    if isinstance(event, GaussianEvent):
        return f"Gaussian noise, sd {event.noise_multiplier:.4g} x sensitivity"
    if isinstance(event, LaplaceEvent):
        return f"Laplace noise, scale {event.noise_multiplier:.4g} x sensitivity"
    if isinstance(event, DiscreteLaplaceEvent):
        return f"discrete Laplace noise, scale {event.scale:.4g}"
    if isinstance(event, DiscreteGaussianEvent):
        return f"discrete Gaussian noise, sigma {event.sigma:.4g}"
    if isinstance(event, RandomizedResponseEvent):
        return f"randomized response, truth kept with probability {event.p_truth:.4g}"
    if isinstance(event, (ExponentialMechanismEvent, ReportNoisyMaxEvent)):
        name = (
            "exponential mechanism"
            if isinstance(event, ExponentialMechanismEvent)
            else "report noisy max"
        )
        return f"{name}, epsilon {event.epsilon:.4g}"
    if isinstance(event, PureDpEvent):
        return f"epsilon {event.epsilon:.4g}"
    if isinstance(event, ApproxDpEvent):
        return f"epsilon {event.epsilon:.4g}, delta {event.delta:.3g}"
    if isinstance(event, ZCdpEvent):
        return f"zCDP, rho {event.rho:.4g}"
    if isinstance(event, PoissonSampledEvent):
        return f"{describe_event(event.event)}, on a {event.sampling_rate:.3g} sample"
    if isinstance(event, SelfComposedEvent):
        return f"{event.count} x ({describe_event(event.event)})"
    if isinstance(event, ComposedEvent):
        return " + ".join(describe_event(e) for e in event.events)
    if isinstance(event, NonPrivateEvent):
        return "NOT PRIVATE"
    if isinstance(event, NoOpEvent):
        return "nothing"
    return type(event).__name__  # pragma: no cover - every event type is listed above


def _when(t: float) -> str:
    return _dt.datetime.fromtimestamp(t, tz=_dt.UTC).strftime("%Y-%m-%d %H:%M:%S UTC")


def _costs(events: Sequence[tuple[DpEvent, int]], delta: float) -> list[dict[str, Any]]:
    """The ledger's releases composed by every accountant that reads them exactly (as if the
    releases were fixed in advance); each value is an upper bound."""
    rows: list[dict[str, Any]] = []
    makers: list[tuple[str, str, PrivacyAccountant, str]] = [
        ("pure DP", "epsilon", PureDpAccountant(), "sum of epsilons"),
        (
            "approximate DP (basic composition)",
            "epsilon",
            ApproxDpAccountant(),
            "sums of epsilons and deltas",
        ),
        ("zero-concentrated DP", "rho", ZCdpAccountant(), "sum of rhos"),
        ("Gaussian DP", "mu", ExactGdpAccountant(), "mu = sqrt(sum mu_i^2), exact"),
        ("Renyi DP", "epsilon", RdpAccountant(), f"converted at delta {delta:.3g}"),
        (
            "privacy-loss distribution",
            "epsilon",
            PldAccountant(),
            f"numeric, certified, at delta {delta:.3g}",
        ),
    ]
    for language, unit, acct, how in makers:
        try:
            for ev, k in events:
                acct.compose(ev, k)
            if isinstance(acct, ZCdpAccountant):
                value, extra = (
                    acct.rho,
                    f"epsilon {acct.get_epsilon(delta):.4g} at delta {delta:.3g}",
                )
            elif isinstance(acct, ExactGdpAccountant):
                value, extra = (
                    acct.mu,
                    f"epsilon {acct.get_epsilon(delta):.4g} at delta {delta:.3g}",
                )
            elif isinstance(acct, ApproxDpAccountant):
                e = acct.spent()[0]
                value, extra = e, f"delta {acct.get_delta(e):.3g}"
            elif isinstance(acct, PureDpAccountant):
                value, extra = acct.get_epsilon(0.0), ""
            else:
                value, extra = acct.get_epsilon(delta), ""
        except DPKitError:
            rows.append(
                {
                    "language": language,
                    "unit": unit,
                    "value": None,
                    "note": "does not apply to these releases",
                }
            )
            continue
        rows.append(
            {
                "language": language,
                "unit": unit,
                "value": float(value),
                "note": "; ".join(x for x in (how, extra) if x),
            }
        )
    return rows


def _figure(risk: Risk, group: Risk | None) -> str | None:
    """The trade-off curve as an SVG document (None without matplotlib)."""
    try:
        import matplotlib
    except ImportError:  # pragma: no cover - matplotlib is in the plot extra
        return None
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.ticker import FixedFormatter, FixedLocator, NullLocator

    lin = np.linspace(0.0, 1.0, 401)
    logx = np.geomspace(1e-6, 1.0, 241)
    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(9.0, 3.8))
    try:
        for ax, xs in ((ax1, lin), (ax2, logx)):
            ax.plot(xs, xs, color="#888888", linestyle=":", label="no information (TPR = FPR)")
            ax.plot(
                xs, risk.tpr(xs), color=CURVE_COLOUR, linewidth=2.2, label="largest attack rate"
            )
            if group is not None:
                ax.plot(
                    xs,
                    group.tpr(xs),
                    color=CURVE_COLOUR,
                    linewidth=1.2,
                    linestyle="--",
                    label=f"group of {group.group_size}",
                )
            ax.set_xlabel("false-positive rate (people wrongly flagged)")
            ax.grid(alpha=0.3)
        marks = np.asarray(LOW_FPRS)
        ax2.plot(marks, risk.tpr(marks), "o", color=MARK_COLOUR, label="attack rates reported")
        ax1.set_ylabel("true-positive rate (members found)")
        ax1.set_xlim(0, 1)
        ax1.set_ylim(0, 1.01)
        ax2.set_xscale("log")
        ax2.set_yscale("log")
        ax2.set_xlim(1e-6, 1.0)
        ax2.set_ylim(1e-6, 1.5)
        # plain tick labels (log axes otherwise typeset every label as mathtext, slowly)
        ticks = [1e-6, 1e-4, 1e-2, 1.0]
        labels = ["1e-6", "1e-4", "0.01", "1"]
        for axis in (ax2.xaxis, ax2.yaxis):
            axis.set_minor_locator(NullLocator())
            axis.set_major_locator(FixedLocator(ticks))
            axis.set_major_formatter(FixedFormatter(labels))
        ax1.set_title("membership attacks: best possible")
        ax2.set_title("at low false-positive rates")
        ax1.legend(loc="lower right", fontsize=8)
        fig.subplots_adjust(left=0.07, right=0.98, bottom=0.14, top=0.91, wspace=0.22)
        buf = io.StringIO()
        fig.savefig(buf, format="svg")
    finally:
        plt.close(fig)
    svg = buf.getvalue()
    return svg[svg.index("<svg") :]


@dataclasses.dataclass
class PrivacyReport:
    """A privacy report (build with :func:`report`); ``data`` is the JSON twin."""

    data: dict[str, Any]
    figure_svg: str | None

    def to_json(self) -> str:
        """The JSON twin (for audit trails)."""
        return json.dumps(self.data, indent=2, sort_keys=False, allow_nan=True)

    # ----------------------------------------------------------------- Markdown
    def to_markdown(self) -> str:
        """The page as Markdown (the figure embedded as an SVG data URI)."""
        d = self.data

        def cell(x: Any) -> str:
            return str(x).replace("|", "\\|").replace("\n", " ")

        out = [f"# {d['title']}", "", f"Generated {d['generated']}. {d['summary']}", ""]
        out += ["## What an attacker can do", ""]
        out += [f"- {s}" for s in d["statements"]]
        out += ["", "| false-positive rate | largest true-positive rate |", "| --- | --- |"]
        out += [
            f"| {float(a):.0e} | {percent(t)} |" for a, t in d["risk"]["max_tpr_at_fpr"].items()
        ]
        if self.figure_svg is not None:
            b64 = base64.b64encode(self.figure_svg.encode()).decode()
            out += ["", f"![The trade-off curve](data:image/svg+xml;base64,{b64})"]
        out += [
            "",
            "## What it cost",
            "",
            "| accounting | unit | value | how |",
            "| --- | --- | --- | --- |",
        ]
        for r in d["costs"]:
            v = "n/a" if r["value"] is None else f"{r['value']:.4g}"
            out.append(f"| {cell(r['language'])} | {r['unit']} | {v} | {cell(r['note'])} |")
        if d["analysts"]:
            out += [
                "",
                "## By analyst",
                "",
                "Each analyst's releases composed exactly, as if fixed in advance.",
                "",
                "| analyst | releases | epsilon | at delta | largest TPR at FPR 1e-3 |",
                "| --- | --- | --- | --- | --- |",
            ]
            out += [
                f"| {cell(a['analyst'])} | {a['releases']} | {a['epsilon']:.4g} | "
                f"{a['delta']:.3g} | {percent(a['max_tpr_at_1e-3'])} |"
                for a in d["analysts"]
            ]
        out += [
            "",
            "## What was released",
            "",
            "| # | when | analyst | what | count | query |",
            "| --- | --- | --- | --- | --- | --- |",
        ]
        for r in d["ledger"]:
            out.append(
                f"| {r['seq']} | {r['when']} | {cell(r['analyst'] or '-')} | "
                f"{cell(r['what'])} | {r['count']} | {cell(r['query'] or '')} |"
            )
        out += ["", "## Assumptions", ""] + [f"- {cell(a)}" for a in d["assumptions"]]
        out += ["", "## Known limitations", ""] + [f"- {cell(a)}" for a in d["limitations"]]
        return "\n".join(out) + "\n"

    # ----------------------------------------------------------------- HTML
    def to_html(self, *, analyst_link: str | None = None) -> str:
        """The page as one self-contained HTML document (inline SVG, no script).

        ``analyst_link``: a URL with ``{analyst}`` where each analyst's name goes (quoted for
        a URL), to link each row of the analysts table to that analyst's own report.
        """
        d = self.data
        e = html.escape

        def ul(items: Sequence[str], ident: str) -> str:
            return f'<ul id="{ident}">' + "".join(f"<li>{e(s)}</li>" for s in items) + "</ul>"

        rates = "".join(
            f"<tr><td>{float(a):.0e}</td><td>{percent(t)}</td></tr>"
            for a, t in d["risk"]["max_tpr_at_fpr"].items()
        )
        costs = "".join(
            f"<tr><td>{e(r['language'])}</td><td>{e(r['unit'])}</td>"
            f"<td>{'n/a' if r['value'] is None else format(r['value'], '.4g')}</td>"
            f"<td>{e(r['note'])}</td></tr>"
            for r in d["costs"]
        )
        ledger = "".join(
            f"<tr><td>{r['seq']}</td><td>{e(r['when'])}</td><td>{e(r['analyst'] or '-')}</td>"
            f"<td>{e(r['what'])}</td><td>{r['count']}</td><td>{e(r['query'] or '')}</td></tr>"
            for r in d["ledger"]
        )
        analysts = "".join(
            f"<tr><td>{_analyst_cell(a['analyst'], analyst_link)}</td><td>{a['releases']}</td>"
            f"<td>{a['epsilon']:.4g}</td><td>{a['delta']:.3g}</td>"
            f"<td>{percent(a['max_tpr_at_1e-3'])}</td></tr>"
            for a in d["analysts"]
        )
        figure = (
            '<p id="no-figure">Install the plot extra (matplotlib) for the figure.</p>'
            if self.figure_svg is None
            else f'<figure id="tradeoff-figure">{self.figure_svg}<figcaption>The largest '
            "share of people in the data that any membership attack can find (vertical) "
            "against the share of people not in the data it wrongly flags (horizontal). "
            "The dotted line is an attacker who learns nothing.</figcaption></figure>"
        )
        style = (
            "body{font-family:system-ui,sans-serif;max-width:980px;margin:2em auto;"
            "color:#222;background:#fff}table{border-collapse:collapse;margin:.5em 0}"
            "td,th{border:1px solid #ccc;padding:.25em .6em;text-align:left}"
            "th{background:#f2f2f2}figure{margin:0}svg{max-width:100%;height:auto}"
            ".summary{font-size:1.1em;background:#fdf2e9;padding:.8em;border-left:4px solid "
            f"{CURVE_COLOUR}}}"
        )
        return (
            '<!DOCTYPE html><html lang="en"><head><meta charset="utf-8">'
            f"<title>{e(d['title'])}</title><style>{style}</style></head><body>"
            f"<h1>{e(d['title'])}</h1><p>Generated {e(d['generated'])}.</p>"
            f'<p class="summary" id="summary">{e(d["summary"])}</p>'
            "<h2>What an attacker can do</h2>"
            + ul(d["statements"], "statements")
            + f'<table id="rates"><tr><th>false-positive rate</th><th>largest true-positive '
            f"rate</th></tr>{rates}</table>{figure}" + "<h2>What it cost</h2>"
            f'<table id="costs"><tr><th>accounting</th><th>unit</th><th>value</th><th>how</th>'
            f"</tr>{costs}</table>"
            + (
                ""
                if not d["analysts"]
                else "<h2>By analyst</h2><p>Each analyst's releases composed exactly, as if "
                "fixed in advance.</p>"
                '<table id="analysts"><tr><th>analyst</th><th>releases</th>'
                "<th>epsilon</th><th>at delta</th><th>largest TPR at FPR 1e-3</th></tr>"
                f"{analysts}</table>"
            )
            + '<h2>What was released</h2><table id="ledger"><tr><th>#</th><th>when</th>'
            f"<th>analyst</th><th>what</th><th>count</th><th>query</th></tr>{ledger}</table>"
            + "<h2>Assumptions</h2>"
            + ul(d["assumptions"], "assumptions")
            + "<h2>Known limitations</h2>"
            + ul(d["limitations"], "limitations")
            + "</body></html>\n"
        )

    def write(self, path: str | Path) -> Path:
        """Write the page (``.html``, ``.md`` or ``.json`` by suffix) and, beside an HTML or
        Markdown page, its JSON twin (same name, ``.json``). Returns the page's path."""
        p = Path(path)
        suffix = p.suffix.lower()
        if suffix in (".html", ".htm"):
            p.write_text(self.to_html(), encoding="utf-8")
        elif suffix == ".md":
            p.write_text(self.to_markdown(), encoding="utf-8")
        elif suffix == ".json":
            p.write_text(self.to_json(), encoding="utf-8")
            return p
        else:
            raise PrivacyParameterError(
                f"Write the report to a .html, .md or .json file, not {p.name!r}."
            )
        p.with_suffix(".json").write_text(self.to_json(), encoding="utf-8")
        return p


def _query_text(metadata: dict[str, Any]) -> str | None:
    """What the caller attached to a charge: its query text if it names one, else the whole
    metadata as compact JSON (e.g. the service's query id); at most 200 characters."""
    if not metadata:
        return None
    for key in ("query", "sql", "summary", "description"):
        if key in metadata:
            text = str(metadata[key])
            break
    else:
        text = json.dumps(metadata, sort_keys=True, default=str)
    return text if len(text) <= 200 else text[:197] + "..."


def _limitations(
    budget: Any, risk: Risk, events: Sequence[tuple[DpEvent, int]], privacy_unit: str | None
) -> list[str]:
    out = []
    if not math.isfinite(float(budget.spent[0])):
        out.append("A release was made without privacy: nothing is protected.")
    if not risk.exact:
        out.append(
            "The curve is a certified bound computed numerically: the true risk is at "
            "most what is shown, and may be lower."
        )
    if budget.kind == "rdp":
        out.append(
            "This budget converts Renyi DP at a grid of orders, which is valid for "
            "releases fixed in advance; for adaptively chosen releases use a single "
            "order (rdp_order=...)."
        )
    if any(getattr(ev, "pmf_slack", 0.0) for ev, _ in events):
        out.append("The noise samplers' floating-point slack is included in every figure.")
    if budget.neighbouring is Neighbouring.REPLACE:
        out.append(
            "Under replace-one neighbours the guarantee protects the value of a record, "
            "not whether a person took part."
        )
    if privacy_unit is None:
        out.append(
            "Rows are protected, not people: a person with several rows is protected "
            "only as a group of that many (see the group statements)."
        )
    out.append("A person who appears under several identifiers is protected only as a group.")
    out.append(
        "Differential privacy limits what the releases reveal about one person; it does "
        "not stop inferences about groups or populations, which are the releases' "
        "purpose."
    )
    return out


def _assumptions(budget: Any, risk: Risk, privacy_unit: str | None) -> list[str]:
    rel = (
        "one person's data added or removed"
        if budget.neighbouring is Neighbouring.ADD_REMOVE
        else "one person's data replaced by another's"
    )
    unit = privacy_unit or "each row (every row is taken to be a different person)"
    out = [
        f"Privacy unit: {unit}.",
        f"Neighbouring relation: datasets that differ by {rel}.",
        f"The figures are what the budget certifies ({risk.source}); "
        + (
            "they stay valid when each release was chosen after seeing earlier ones."
            if risk.guarantee.adaptive
            else "they assume the releases were fixed in advance."
        ),
        "Not protected: when releases were made and how long they took (timing), whether a "
        "query was refused, the analyst's own code outside dpkit, and public inputs such as "
        "group keys, bounds and query text.",
        "The ledger is trusted: whoever can write to its store can change what it records.",
        "Randomness comes from the operating system's secure source unless a seeded source "
        "was set up explicitly as insecure.",
    ]
    return out


def _analyst_cell(name: str, link: str | None) -> str:
    """An analyst's name for the HTML table, linked to ``link`` when one is given."""
    if link is None:
        return html.escape(name)
    href = link.replace("{analyst}", urllib.parse.quote(name, safe=""))
    return f'<a href="{html.escape(href)}">{html.escape(name)}</a>'


def report(
    obj: Any,
    *,
    title: str | None = None,
    privacy_unit: str | None = None,
    prior: float = 0.01,
    baseline: float = 1e-3,
    failure: float | None = None,
    group_size: int = 2,
    delta: float | None = None,
) -> PrivacyReport:
    """The privacy report of a :class:`~dpkit.accounting.Budget`, a session, or one analyst's
    :class:`~dpkit.accounting.SubBudget` (that analyst's releases alone, their risk read from
    the exact composition of those releases under the budget's neighbouring relation).

    ``privacy_unit``: what one person is (a session states it itself); ``prior``,
    ``baseline``, ``failure``: the attacker of the statements (see :class:`Risk`);
    ``group_size``: the group also shown (0 or 1: none); ``delta``: the delta at which the
    epsilon of each accounting language is given (default: the budget's delta, or 1e-6 for a
    pure budget). Nothing is charged.
    """
    budget = obj
    protects: str | None = privacy_unit
    sub = obj if is_sub_budget(obj) else None
    if sub is not None:
        budget = sub.parent
    elif not is_budget(obj):
        budget = getattr(obj, "budget", None)
        if budget is None or not is_budget(budget):
            raise PrivacyParameterError(
                f"A report needs a Budget or a session, not {type(obj).__name__}."
            )
        if privacy_unit is None:
            unit = getattr(obj, "privacy_unit", None)
            protects = None if unit is None else f"each person: all rows with the same {unit!r}"
    rel = budget.neighbouring
    if sub is None:
        risk = Risk(guarantee_of(budget))
        records = budget.history()
    else:
        # one analyst's report: the curve of their own releases (the exact composition, under
        # the budget's relation), never the looser (epsilon, delta) pair their cap is read in
        records = sub.history()
        risk = Risk(curve_of_events([(r.event, r.count) for r in records], neighbouring=rel))
    group = risk.group(group_size) if group_size > 1 else None
    events = [(r.event, r.count) for r in records]
    # the ledger keeps events as given; the budget read each under its own relation (an
    # add/remove release on a replace-one budget counts twice), so must every figure here
    read = [(restate(e, rel), k) for e, k in events]
    b_eps, b_delta = (sub if sub is not None else budget).budget
    at = delta if delta is not None else (b_delta if b_delta > 0 else 1e-6)
    spent_e, spent_d = (float(x) for x in (sub if sub is not None else budget).spent)
    analysts: list[dict[str, Any]] = []
    for name in budget.sub_budgets() if sub is None else [sub.analyst]:
        mine = [(r.event, r.count) for r in records if r.analyst == name]
        try:
            acct = PldAccountant()
            for ev, k in mine:
                acct.compose(restate(ev, rel), k)
            e = acct.get_epsilon(at)
            tpr = Risk(curve_of_events(mine, neighbouring=rel)).max_tpr(1e-3)
        except DPKitError:  # pragma: no cover - the budget accepted them, so they compose
            e, tpr = math.inf, 1.0
        analysts.append(
            {
                "analyst": name,
                "releases": sum(k for _, k in mine),
                "epsilon": e,
                "delta": at,
                "max_tpr_at_1e-3": tpr,
            }
        )
    statements = risk.statements(prior=prior, baseline=baseline, failure=failure)
    if group is not None:
        times = "twice" if group_size == 2 else f"{group_size} times"
        statements.append(
            f"Groups: for {group_size} people together (a household, or one person counted "
            f"{times}) the membership rate at 1 in 1,000 false accusations is at most "
            f"{percent(group.max_tpr(1e-3))}."
        )
    budget_words = (
        "no limit"
        if b_eps is None and (sub is not None or budget.native_budget is None)
        else f"epsilon {b_eps:.4g}, delta {b_delta:.3g}"
        if b_eps is not None
        else f"{budget.native_unit} {budget.native_budget:.4g}"
    )
    summary = (
        f"{sum(k for _, k in events)} release(s) spent epsilon {spent_e:.4g}, delta "
        f"{spent_d:.3g} of a budget of {budget_words}. No attacker can identify more "
        f"than {percent(risk.max_tpr(1e-3))} of the people in the data while wrongly "
        "accusing at most 1 in 1,000 of those who are not."
    )
    fprs = np.geomspace(1e-6, 1.0, 61)
    data: dict[str, Any] = {
        "title": title
        or (
            f"Privacy report: {getattr(budget, 'name', 'budget')}"
            if sub is None
            else f"Privacy report: analyst {sub.analyst!r} of {getattr(budget, 'name', 'budget')}"
        ),
        "generated": _when(_dt.datetime.now(tz=_dt.UTC).timestamp()),
        "summary": summary,
        "budget": {
            "kind": budget.kind,
            "mode": budget.mode,
            "epsilon": b_eps,
            "delta": b_delta,
            "native_unit": budget.native_unit,
            "native_budget": budget.native_budget,
            "spent": [spent_e, spent_d],
            "spent_native": budget.spent_native,
            "neighbouring": budget.neighbouring.value,
        },
        "statements": statements,
        "risk": risk.to_dict(prior=prior, baseline=baseline, failure=failure),
        "group_risk": None
        if group is None
        else group.to_dict(prior=prior, baseline=baseline, failure=failure),
        "curve": {"fpr": fprs.tolist(), "max_tpr": risk.tpr(fprs).tolist()},
        "costs": [
            {
                "language": f"this budget ({budget.kind})",
                "unit": "epsilon",
                "value": spent_e,
                "note": f"delta {spent_d:.3g}; certified for the releases as they were chosen",
            },
            *_costs(read, at),
        ],
        "analysts": analysts,
        "ledger": [
            {
                "seq": r.seq,
                "time": r.time,
                "when": _when(r.time),
                "analyst": r.analyst,
                "what": describe_event(r.event),
                "count": r.count,
                "query": _query_text(r.metadata),
                "event": event_to_dict(r.event),
                "spent_after": list(r.spent_after),
            }
            for r in records
        ],
        "assumptions": _assumptions(budget, risk, protects),
        "limitations": _limitations(budget, risk, events, protects),
    }
    return PrivacyReport(data=data, figure_svg=_figure(risk, group))
