"""The curator's page in a real headless Chromium: log in, read it, check its screenshots."""

from __future__ import annotations

import io
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from PIL import Image
from service_fixtures import Running, start_service
from service_harness import COUNT_QUERY, HTTP, bearer, serve_in_thread

from dpkit.service._page import ANALYST_COLOUR, HISTORY_COLOUR, RESULT_COLOUR

WIDTH, HEIGHT = 1200, 2400


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
        f"--window-size={WIDTH},{HEIGHT}",
        "--hide-scrollbars",
        "--force-device-scale-factor=1",
    ):
        opts.add_argument(arg)
    driver = webdriver.Chrome(service=Service("/usr/bin/chromedriver"), options=opts)
    try:
        yield driver
    finally:
        driver.quit()


@pytest.fixture(scope="module")
def busy(tmp_path_factory: pytest.TempPathFactory, people: Path) -> Iterator[Running]:
    """A service with some history: two analysts, answered and refused queries."""
    tmp = tmp_path_factory.mktemp("page")
    app, url, tokens = start_service(tmp, people, analysts={"alice": 1.0, "bob<script>": 0.3})
    keys = {"region": ["north", "south", "east", "west"]}
    grouped = {
        "builder": {
            "group_by": {"columns": ["region"], "keys": keys},
            "bound": {"max_partitions": 1, "max_rows_per_partition": 3},
            "agg": {
                "n": {"kind": "count"},
                "age": {"kind": "mean", "column": "age", "bounds": [0, 100]},
            },
        },
        "epsilon": 0.3,
        "delta": 1e-8,
    }
    with serve_in_thread(app) as base:
        for who, body in (
            ("alice", grouped),
            ("alice", COUNT_QUERY),
            ("bob<script>", dict(COUNT_QUERY, epsilon=0.2)),
            ("bob<script>", dict(COUNT_QUERY, epsilon=0.2)),
        ):
            HTTP.post(base + "/v1/query", json=body, headers=bearer(tokens[who]), timeout=30)
        yield Running(base=base, ledger_url=url, tokens=tokens, app=app)


def _login(browser: Any, token: str, expect: str) -> None:
    """Submit the log-in form and wait for the next page to show element ``expect``."""
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support import expected_conditions as ec
    from selenium.webdriver.support.ui import WebDriverWait

    old = browser.find_element(By.ID, "token")
    old.send_keys(token)
    browser.find_element(By.ID, "login").click()
    WebDriverWait(browser, 20).until(ec.staleness_of(old))
    WebDriverWait(browser, 20).until(ec.presence_of_element_located((By.ID, expect)))


def _colour_share(img: np.ndarray, hex_colour: str, tol: int = 12) -> float:
    rgb = np.array([int(hex_colour[i : i + 2], 16) for i in (1, 3, 5)])
    close = np.all(np.abs(img[:, :, :3].astype(int) - rgb) <= tol, axis=2)
    return float(close.mean())


def _shot(el_or_driver: Any) -> np.ndarray:
    png = (
        el_or_driver.screenshot_as_png
        if hasattr(el_or_driver, "screenshot_as_png")
        else el_or_driver.get_screenshot_as_png()
    )
    return np.asarray(Image.open(io.BytesIO(png)).convert("RGB"))


def test_login_is_required_and_wrong_token_refused(busy: Running, browser: Any) -> None:
    from selenium.webdriver.common.by import By

    browser.delete_all_cookies()
    browser.get(busy.base + "/curator")
    assert browser.find_elements(By.ID, "history-chart") == []
    _login(browser, busy.tokens["alice"], "login-error")  # an analyst's token: refused
    assert "unknown curator token" in browser.find_element(By.ID, "login-error").text
    assert browser.find_elements(By.ID, "history-chart") == []


def test_page_shows_budget_history_spend_log_and_results(
    busy: Running, browser: Any, tmp_path: Path
) -> None:
    from selenium.webdriver.common.by import By

    browser.delete_all_cookies()
    browser.get(busy.base + "/curator")
    _login(browser, busy.tokens["curator"], "history-chart")
    assert "Curator: people.parquet" in browser.find_element(By.TAG_NAME, "h1").text
    # Budget cards and history plot: one step per charge in the ledger.
    charges = busy.history()
    assert len(charges) == 3  # alice twice, bob once (his second query was refused)
    assert "epsilon 3" in browser.find_element(By.ID, "budget").text
    spent = browser.find_element(By.ID, "spent").text
    assert f"{charges[-1].spent_after[0]:.6g}" in spent
    assert f"charges ({len(charges)})" in browser.find_element(By.ID, "history-chart").text
    # Per-analyst spend; a hostile analyst name is shown as text, never run as markup.
    rows = browser.find_elements(By.CSS_SELECTOR, "#analysts tr")
    assert [r.find_elements(By.TAG_NAME, "td")[0].text for r in rows[1:]] == [
        "alice",
        "bob<script>",
    ]
    # The log: who, when, what, cost, status, newest first.
    log = browser.find_elements(By.CSS_SELECTOR, "#query-log tr")[1:]
    assert len(log) == 4
    statuses = [r.find_elements(By.TAG_NAME, "td")[-1].text for r in log]
    assert sorted(statuses) == ["answered", "answered", "answered", "refused"]
    assert "UTC" in log[0].find_elements(By.TAG_NAME, "td")[1].text
    # Each answered table and its plot.
    results = browser.find_elements(By.CSS_SELECTOR, "#results-section .result")
    assert len(results) == 3
    assert all(r.find_elements(By.CSS_SELECTOR, "table.result-table") for r in results)
    assert all(r.find_elements(By.TAG_NAME, "svg") for r in results)

    page = _shot(browser)
    Image.fromarray(page).save(tmp_path / "curator.png")
    assert page.shape[1] == WIDTH and page.shape[0] >= 800
    assert page.std() > 10  # not blank
    for el_id, colour in (("history-chart", HISTORY_COLOUR), ("analyst-chart", ANALYST_COLOUR)):
        el = browser.find_element(By.ID, el_id)
        img = _shot(el)
        assert img.shape[1] == int(el.get_attribute("width"))
        assert img.shape[0] == int(el.get_attribute("height"))
        assert _colour_share(img, colour) > 0.002, el_id
        # The other plot's colour is absent here: the check can fail.
        other = ANALYST_COLOUR if colour == HISTORY_COLOUR else HISTORY_COLOUR
        assert _colour_share(img, other) < 1e-4
    chart = results[0].find_element(By.TAG_NAME, "svg")
    assert _colour_share(_shot(chart), RESULT_COLOUR) > 0.002


def test_page_cookie_is_httponly_and_logout_forgets_it(busy: Running, browser: Any) -> None:
    from selenium.webdriver.common.by import By

    browser.get(busy.base + "/curator")
    if not browser.find_elements(By.ID, "history-chart"):
        _login(browser, busy.tokens["curator"], "history-chart")
    cookie = browser.get_cookie("dpkit_curator")
    assert cookie is not None and cookie["httpOnly"] and cookie["sameSite"] == "Strict"
    assert browser.execute_script("return document.cookie") == ""
    from selenium.webdriver.support import expected_conditions as ec
    from selenium.webdriver.support.ui import WebDriverWait

    chart = browser.find_element(By.ID, "history-chart")
    browser.find_element(By.CSS_SELECTOR, "form[action='/curator/logout'] button").click()
    WebDriverWait(browser, 20).until(ec.staleness_of(chart))
    WebDriverWait(browser, 20).until(ec.presence_of_element_located((By.ID, "token")))
    assert browser.find_elements(By.ID, "history-chart") == []
    assert browser.get_cookie("dpkit_curator") is None
    assert browser.find_elements(By.ID, "token")


def _risk_section_problems(browser: Any) -> list[str]:
    """What is wrong with the risk part of the curator page (empty list: it renders)."""
    from selenium.webdriver.common.by import By

    from dpkit.risk._report import CURVE_COLOUR

    problems: list[str] = []
    links = browser.find_elements(By.CSS_SELECTOR, "#risk-link a")
    if not links:
        return ["no risk link on the curator page"]
    links[0].click()
    if not browser.find_elements(By.CSS_SELECTOR, "table#analysts"):
        problems.append("no per-analyst table")
    svgs = browser.find_elements(By.TAG_NAME, "svg")
    if not svgs:
        return [*problems, "no figure"]
    img = _shot(svgs[0])
    if img.std() <= 10 or _colour_share(img, CURVE_COLOUR) <= 0.001:
        problems.append("blank figure")
    errors = [m for m in browser.get_log("browser") if m.get("level") == "SEVERE"]
    if errors:
        problems.append(f"console errors: {errors}")
    return problems


def test_page_links_to_a_risk_report_that_renders(busy: Running, browser: Any) -> None:
    from selenium.webdriver.common.by import By

    browser.delete_all_cookies()
    browser.get(busy.base + "/curator")
    _login(browser, busy.tokens["curator"], "history-chart")
    browser.get_log("browser")  # drop earlier messages
    assert _risk_section_problems(browser) == []
    names = [
        r.find_elements(By.TAG_NAME, "td")[0].text
        for r in browser.find_elements(By.CSS_SELECTOR, "table#analysts tr")[1:]
    ]
    assert names == ["alice", "bob<script>"]


def test_risk_check_fails_when_the_section_is_missing(busy: Running, browser: Any) -> None:
    browser.delete_all_cookies()
    browser.get(busy.base + "/curator")
    _login(browser, busy.tokens["curator"], "history-chart")
    browser.execute_script("document.getElementById('risk-link').remove()")
    assert _risk_section_problems(browser) == ["no risk link on the curator page"]
