"""The privacy report: its JSON twin, its Markdown, and its HTML page in a real headless
Chromium (rendered, figure drawn, no console errors, hostile names shown as text)."""

from __future__ import annotations

import io
import json
import math
from collections.abc import Iterator
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import numpy as np
import pytest
from PIL import Image
from scipy.stats import norm

from dpkit import risk
from dpkit.accounting import Budget
from dpkit.errors import PrivacyParameterError
from dpkit.events import GaussianEvent, LaplaceEvent
from dpkit.risk._report import CURVE_COLOUR, MARK_COLOUR

HOSTILE = "eve<img src=x onerror=alert(1)>"


@pytest.fixture(scope="module")
def budget() -> Budget:
    b = Budget(mu=1.5, delta=1e-6)
    b.sub_budget("alice", epsilon=4.0, delta=1e-6).charge(
        GaussianEvent(noise_multiplier=2.0), metadata={"query": "SELECT region, count(*) | x"}
    )
    b.sub_budget(HOSTILE, epsilon=3.0, delta=1e-6).charge(
        GaussianEvent(noise_multiplier=3.0), count=2
    )
    b.charge(GaussianEvent(noise_multiplier=4.0), metadata={"query_id": "q-17"})
    return b


@pytest.fixture(scope="module")
def page(budget: Budget) -> risk.PrivacyReport:
    return risk.report(budget, title="Census 2026 release")


def test_json_twin_holds_what_the_page_says(budget: Budget, page: risk.PrivacyReport) -> None:
    data = json.loads(page.to_json())
    # the ledger: what, by whom, when
    assert [r["analyst"] for r in data["ledger"]] == ["alice", HOSTILE, None]
    assert data["ledger"][0]["query"] == "SELECT region, count(*) | x"
    assert data["ledger"][1]["count"] == 2
    assert data["ledger"][1]["query"] is None  # nothing attached
    assert data["ledger"][2]["query"] == '{"query_id": "q-17"}'  # the service's query id
    assert all(r["when"].endswith("UTC") for r in data["ledger"])
    assert [r.seq for r in budget.history()] == [r["seq"] for r in data["ledger"]]
    # the risk: the gdp budget's spent mu, exactly
    mu = math.sqrt(1 / 4 + 2 / 9 + 1 / 16)
    assert data["risk"]["max_tpr_at_fpr"]["0.001"] == pytest.approx(
        norm.cdf(norm.ppf(1e-3) + mu), rel=1e-6
    )
    assert data["risk"]["exact_curve"] is True
    assert data["group_risk"]["group_size"] == 2
    # the costs in every language dpkit speaks; Gaussian DP equals the budget's mu
    langs = {c["language"]: c for c in data["costs"]}
    assert langs["Gaussian DP"]["value"] == pytest.approx(mu, rel=1e-9)
    assert langs["pure DP"]["value"] is None  # Gaussian noise has no pure epsilon
    eps_pld = langs["privacy-loss distribution"]["value"]
    assert eps_pld <= langs["Renyi DP"]["value"] + 1e-9  # the tight one is the smallest
    assert [a["analyst"] for a in data["analysts"]] == ["alice", HOSTILE]
    alice = data["analysts"][0]
    assert alice["max_tpr_at_1e-3"] == pytest.approx(norm.cdf(norm.ppf(1e-3) + 0.5), rel=1e-6)
    assert data["analysts"][1]["releases"] == 2
    assert data["curve"]["max_tpr"] == sorted(data["curve"]["max_tpr"])
    assert any("timing" in a for a in data["assumptions"])
    assert any("analyst's own code" in a for a in data["assumptions"])
    assert data["budget"]["neighbouring"] == "add_remove"


def test_markdown_has_every_section(page: risk.PrivacyReport) -> None:
    md = page.to_markdown()
    for heading in (
        "# Census 2026 release",
        "## What an attacker can do",
        "## What it cost",
        "## By analyst",
        "## What was released",
        "## Assumptions",
        "## Known limitations",
    ):
        assert heading in md
    assert "count(*) \\| x" in md  # a pipe in a query does not break the table
    assert "data:image/svg+xml;base64," in md


def test_write_puts_the_json_twin_beside_the_page(page: risk.PrivacyReport, tmp_path: Path) -> None:
    out = page.write(tmp_path / "report.md")
    assert out.read_text().startswith("# Census")
    assert json.loads((tmp_path / "report.json").read_text())["title"] == "Census 2026 release"
    with pytest.raises(PrivacyParameterError, match="html"):
        page.write(tmp_path / "report.pdf")


def test_report_of_a_session_names_its_privacy_unit(budget: Budget) -> None:
    session = SimpleNamespace(budget=budget, privacy_unit="person_id")
    data = risk.report(session, group_size=1).data
    assert any("'person_id'" in a for a in data["assumptions"])
    assert data["group_risk"] is None
    basic = Budget(epsilon=1.0, delta=0.0)
    basic.charge(LaplaceEvent(noise_multiplier=2.0))
    rows = risk.report(basic).data
    assert any("Rows are protected" in s for s in rows["limitations"])
    with pytest.raises(PrivacyParameterError, match="Budget or a session"):
        risk.report(object())


# ------------------------------------------------------------------ the page in Chromium
@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    opts = webdriver.ChromeOptions()
    opts.binary_location = "/usr/bin/chromium"
    for arg in (
        "--headless=new",
        "--no-sandbox",
        "--disable-dev-shm-usage",
        "--disable-gpu",
        "--window-size=1100,2600",
        "--hide-scrollbars",
        "--force-device-scale-factor=1",
    ):
        opts.add_argument(arg)
    opts.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    driver = webdriver.Chrome(service=Service("/usr/bin/chromedriver"), options=opts)
    try:
        yield driver
    finally:
        driver.quit()


def _shot(element: Any) -> np.ndarray:
    return np.asarray(Image.open(io.BytesIO(element.screenshot_as_png)).convert("RGB"))


def _share(img: np.ndarray, hex_colour: str, tol: int = 40) -> float:
    rgb = np.array([int(hex_colour[i : i + 2], 16) for i in (1, 3, 5)])
    return float(np.all(np.abs(img.astype(int) - rgb) <= tol, axis=2).mean())


def test_the_html_page_renders_in_chromium(
    page: risk.PrivacyReport, browser: Any, tmp_path: Path
) -> None:
    from selenium.webdriver.common.by import By

    path = page.write(tmp_path / "report.html")
    browser.get(path.as_uri())
    assert browser.title == "Census 2026 release"
    assert browser.find_element(By.TAG_NAME, "h1").text == "Census 2026 release"
    # the statements and the tables are there
    assert len(browser.find_elements(By.CSS_SELECTOR, "#statements li")) == 5
    assert len(browser.find_elements(By.CSS_SELECTOR, "#ledger tr")) == 4
    analysts = [
        r.find_elements(By.TAG_NAME, "td")[0].text
        for r in browser.find_elements(By.CSS_SELECTOR, "#analysts tr")[1:]
    ]
    assert analysts == ["alice", HOSTILE]  # shown as text, never run as markup
    assert browser.find_elements(By.CSS_SELECTOR, "img[src='x']") == []
    # the figure: drawn, of a sensible size, with the curve and the marked attack rates
    fig = browser.find_element(By.CSS_SELECTOR, "#tradeoff-figure svg")
    assert fig.size["width"] > 500 and fig.size["height"] > 200
    img = _shot(fig)
    assert img.std() > 20  # not blank
    assert _share(img, CURVE_COLOUR) > 0.002
    assert _share(img, MARK_COLOUR) > 0.0003
    # a blank page would have neither; the whole page is mostly white with dark text
    whole = _shot(browser.find_element(By.TAG_NAME, "body"))
    assert 0.5 < (whole.min(axis=2) > 240).mean() < 0.99
    errors = [e for e in browser.get_log("browser") if e["level"] in ("SEVERE", "ERROR")]
    assert errors == []


def test_the_figure_checks_see_a_missing_figure(
    page: risk.PrivacyReport, browser: Any, tmp_path: Path
) -> None:
    # companion of the screenshot checks: the same page without its figure fails them
    from selenium.webdriver.common.by import By

    bare = risk.PrivacyReport(data=page.data, figure_svg=None).write(tmp_path / "bare.html")
    browser.get(bare.as_uri())
    assert browser.find_elements(By.CSS_SELECTOR, "#tradeoff-figure svg") == []
    body = _shot(browser.find_element(By.TAG_NAME, "body"))
    assert _share(body, MARK_COLOUR) < 0.0003  # the marked attack rates are gone
    assert "plot extra" in browser.find_element(By.ID, "no-figure").text


def test_report_of_a_real_analytics_session_reads_its_ledger() -> None:
    """``dpkit.risk.report(session)`` is how a session's report is made (the analytics layer
    cannot import the risk layer, so a session has no report method): the page names the
    session's privacy unit and lists its one release with the epsilon it charged."""
    import pandas as pd

    import dpkit.analytics as dpa

    frame = pd.DataFrame({"user_id": range(200), "age": [i % 90 for i in range(200)]})
    session = dpa.Session(frame, privacy_unit="user_id", budget=Budget(epsilon=1.0))
    session.sql("SELECT COUNT(*) AS n FROM t", epsilon=0.5)
    page = risk.report(session, group_size=1)
    data = page.data
    assert any("'user_id'" in a for a in data["assumptions"])
    assert len(data["ledger"]) == 1
    assert data["ledger"][0]["spent_after"][0] == pytest.approx(0.5, rel=1e-9)
    assert "user_id" in page.to_markdown()


def test_report_of_a_sub_budget_is_that_analysts_releases_alone() -> None:
    total = Budget(epsilon=5.0, delta=1e-5, method="gdp")
    alice = total.sub_budget("alice", epsilon=2.0, delta=1e-6)
    bob = total.sub_budget("bob", epsilon=2.0, delta=1e-6)
    alice.charge(GaussianEvent(noise_multiplier=4.0))
    bob.charge(GaussianEvent(noise_multiplier=4.0), count=3)
    d = json.loads(risk.report(alice).to_json())
    assert [r["analyst"] for r in d["ledger"]] == ["alice"]
    assert [a["analyst"] for a in d["analysts"]] == ["alice"]
    assert d["budget"]["epsilon"] == 2.0 and "alice" in d["title"]
    # alice's curve is her one Gaussian: mu = 1/4, TPR(a) = Phi(Phi^-1(a) + mu), certified above
    fprs = np.array(d["curve"]["fpr"])
    exact = norm.cdf(norm.ppf(fprs) + 0.25)
    got = np.array(d["curve"]["max_tpr"])
    assert np.all(got >= exact - 1e-12)
    assert np.all(got <= exact + 1e-3)  # the exact composition, not an (epsilon, delta) pair
    # bob (three releases at mu 1/4 each: mu sqrt(3)/4) is riskier than alice; the total riskier
    # than both
    tb = risk.report(bob).data["risk"]["max_tpr_at_fpr"]
    ta = d["risk"]["max_tpr_at_fpr"]
    tt = risk.report(total).data["risk"]["max_tpr_at_fpr"]
    for k in ta:
        assert float(ta[k]) < float(tb[k]) <= float(tt[k]) + 1e-12


def test_report_of_a_sub_budget_that_spent_nothing() -> None:
    total = Budget(epsilon=1.0, delta=1e-6)
    carol = total.sub_budget("carol", epsilon=0.5)
    d = json.loads(risk.report(carol).to_json())
    assert d["ledger"] == [] and d["budget"]["spent"] == [0.0, 0.0]
    assert all(
        float(v) == pytest.approx(float(k), abs=1e-9)
        for k, v in d["risk"]["max_tpr_at_fpr"].items()
    )


def test_analyst_links_are_quoted_and_only_where_asked(page: risk.PrivacyReport) -> None:
    total = Budget(epsilon=1.0, delta=1e-6)
    total.sub_budget('a&b "x"/y', epsilon=0.5).charge(LaplaceEvent(noise_multiplier=10.0))
    rep = risk.report(total)
    assert "<a href" not in rep.to_html()
    linked = rep.to_html(analyst_link="/r?analyst={analyst}")
    assert '<a href="/r?analyst=a%26b%20%22x%22%2Fy">a&amp;b &quot;x&quot;/y</a>' in linked
