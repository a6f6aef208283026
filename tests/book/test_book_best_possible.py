"""The chapter "How close to the best possible" uses its parameters: its tables are what the workflow computes."""

from __future__ import annotations

import dataclasses

import yaml

from planner.explorers.best_possible import gap_table
from planner.readers.fleet import read_fleet
from planner.readers.trace import read_trace
from planner.simulate.traffic import WeeklyEnvelope, stretch_days
from planner.workflows.best_possible import compare_with_oracle
from planner.workflows.schedule import default_scaling_plan
from tests.conftest import DATA_DIR, REPO_ROOT
from tests.notebooks import glued, markdown_outputs, run_chapter


def _tables(notebook) -> list[str]:
    return [text for text in markdown_outputs(notebook) if text.startswith("| strategy |")]


def test_default_run_prices_a_week_and_every_forecast_against_the_bound(tmp_path):
    notebook = run_chapter("best_possible", tmp_path)
    values = glued(notebook)
    assert values["goal_pct"] == "99" and values["days"] == "7.0"
    week, forecasts = _tables(notebook)
    for name in ("reactive", "schedule", "oracle (cold-start bound)"):
        assert f"| {name} |" in week
    for name in ("reactive", "seasonal_naive", "predict_linear", "max_over_time", "double_exponential_smoothing"):
        assert f"| {name} |" in forecasts
    # The schedule's and reacting's costs at T itself and the tightest target are glued from the same runs.
    assert values["tight_target"] == "31.667" and values["target"] == "16.667"


def test_other_parameters_reach_every_number(tmp_path):
    params = dict(stretch_days=2, target_fracs=[1.0, 1.9], attainment_goal_frac=0.98, warmup_s=120.0)
    notebook = run_chapter("best_possible", tmp_path, **params)
    values = glued(notebook)
    assert values["goal_pct"] == "98" and values["days"] == "2.0"
    source = read_trace(DATA_DIR / "traces" / "steady-0.6rps-12min.csv")
    trace = stretch_days(source, 0, 2, envelope=WeeklyEnvelope(peak_to_trough=8.0), mean_factor=2.0)
    fleet = dataclasses.replace(
        read_fleet(DATA_DIR / "fleets" / "seed003-rig.yaml"), warmup_s=120.0, ttft_slo_s=2.0, tick_s=5.0
    )
    plan = default_scaling_plan(trace, fleet, target_name="chat")
    best = compare_with_oracle(trace, fleet, plan, 0.98, target_fracs=(1.0, 1.9))
    assert values["requests"] == f"{len(trace):,}"
    assert values["oracle_usd"] == f"${best.oracle_cost_usd:,.0f}"
    assert _tables(notebook)[0] == gap_table(best)


def test_the_chapter_follows_the_forecasts_in_the_part_on_the_plan():
    toc = yaml.safe_load((REPO_ROOT / "_toc.yml").read_text(encoding="utf-8"))
    part = next(p for p in toc["parts"] if p["caption"] == "Your plan")
    files = [chapter["file"] for chapter in part["chapters"]]
    assert files.index("book/best_possible") == files.index("book/forecasts") + 1
