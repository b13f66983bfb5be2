"""``dpkit demo`` on a small generated table: the report, the budget and the plot."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from dpkit.cli import app
from dpkit.cli._demo import REGIONS, generate_people, plot_report, run_demo

runner = CliRunner()


def test_generated_table_shape() -> None:
    df = generate_people(3000, seed=1)
    assert list(df.columns) == ["user_id", "region", "age", "income"]
    assert 2500 <= len(df) <= 4000
    per = df.groupby("user_id").size()
    assert per.max() > 1  # several rows for some people
    assert (df.groupby("user_id")["region"].nunique() == 1).all()
    assert (df["region"] == REGIONS[-1]).sum() >= 3  # the tiny region exists


def test_run_demo_small(tmp_path: Path) -> None:
    rep = run_demo(rows=30_000, cache=tmp_path, epsilon=3.0, delta=1e-6)
    assert rep.spent[-1][1] == pytest.approx(3.0) and rep.spent[-1][2] <= 1e-6
    # 3 people: released with probability about 1.3e-6 (truncated geometric rule, n = 3)
    assert "Outpost" in rep.truth["hidden"]
    names = [line[0] for line in rep.lines]
    assert any(n.startswith("people, ") for n in names)
    assert any(n.startswith("records ") for n in names)
    png = plot_report(rep, tmp_path / "demo.png")
    assert png.stat().st_size > 10_000


def test_demo_command(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    res = runner.invoke(app, ["demo", "--rows", "20000", "--plot", str(tmp_path / "d.png")])
    assert res.exit_code == 0, res.output
    assert "95% interval" in res.output and "spent epsilon=3" in res.output
    assert max(len(line) for line in res.output.splitlines()) <= 80
    assert (tmp_path / "d.png").exists()


def test_histogram_truth_is_the_bounded_records_count(tmp_path: Path) -> None:
    """The "true" record counts are those the intervals cover: at most MAX_ROWS records per
    person (the data has people with more), not every record."""
    import pandas as pd

    from dpkit.cli._demo import MAX_ROWS, people_parquet

    rep = run_demo(rows=30_000, cache=tmp_path, epsilon=3.0, delta=1e-6)
    per_person = pd.read_parquet(people_parquet(30_000, 7, tmp_path)).groupby("user_id").size()
    assert per_person.max() > MAX_ROWS  # the bounding drops records
    kept = int(per_person.clip(upper=MAX_ROWS).sum())
    assert int(rep.truth["histogram"].sum()) == kept
    records = [line for line in rep.lines if line[0].startswith("records ")]
    assert sum(line[1] for line in records) == kept
