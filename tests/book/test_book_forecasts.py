"""The chapter on forecasts uses its parameters: a papermill run on other numbers prices what compare_forecasts does."""

from __future__ import annotations

import dataclasses

from planner.explorers.forecasts import pricing_table
from planner.manifests.generate import ScalingPlan
from planner.readers.fleet import read_fleet
from planner.readers.trace import read_trace
from planner.workflows.forecast_comparison import compare_forecasts, default_forecasts
from tests.conftest import DATA_DIR
from tests.notebooks import glued, markdown_outputs, run_chapter


def test_default_run_prices_every_strategy_and_the_line_is_exact(tmp_path):
    notebook = run_chapter("forecasts", tmp_path)
    values = glued(notebook)
    assert values["ramp_value"] == values["ramp_expected"] == "120"
    assert values["lead"] == "300" and values["offset"] == "6900"
    table = next(text for text in markdown_outputs(notebook) if text.startswith("| strategy |"))
    for name in ("reactive", "seasonal_naive", "predict_linear", "max_over_time", "double_exponential_smoothing"):
        assert f"| {name} |" in table


def test_other_parameters_reach_every_number(tmp_path):
    params = dict(warmup_s=120.0, target_fracs=[0.75, 1.5], attainment_goal_frac=0.98, concurrency_target=20.0)
    notebook = run_chapter("forecasts", tmp_path, **params)
    values = glued(notebook)
    assert values["lead"] == "120" and values["offset"] == "7080" and values["goal_pct"] == "98"
    fleet = dataclasses.replace(
        read_fleet(DATA_DIR / "fleets" / "seed003-rig.yaml"), warmup_s=120.0, ttft_slo_s=2.0, tick_s=5.0
    )
    plan = ScalingPlan(
        target_name="chat",
        concurrency_target=20.0,
        warmup_s=120.0,
        max_output_tokens=4096,
        itl_ms=70.0,
        max_replicas=20,
        label_matchers=('namespace="llm"', 'model_name="chat"'),
        gpus_per_replica=fleet.gpus_per_replica,
    )
    comparison = compare_forecasts(
        read_trace(DATA_DIR / "scenarios" / "compressed_days.yaml"),
        plan,
        fleet,
        0.98,
        forecasts=default_forecasts(120.0, period_s=7200.0),
        target_fracs=(0.75, 1.5),
    )
    assert pricing_table(comparison, 0.98) in markdown_outputs(notebook)
