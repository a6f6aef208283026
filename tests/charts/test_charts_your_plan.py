"""Charts of the chapter "Your plan": they fit the column and show every configuration."""

from __future__ import annotations

import json

import pandas as pd

from planner.charts.your_plan import (
    WIDTH_PX,
    day_chart,
    pareto_chart,
    plan_chart,
    plan_frame,
    sweep_frame,
)
from planner.simulate.sweep import SweepResult


def _result(index, cost, attained):
    return SweepResult(index, (("target", 10.0 * (index + 1)),), attained, cost, cost / 2, 0, 0, 1, 0, 0)


def test_pareto_frame_marks_front_and_choice():
    results = [_result(0, 1.0, 0.9), _result(1, 2.0, 0.99), _result(2, 3.0, 0.95)]
    frame = sweep_frame(results, results[:2], results[1])
    assert list(frame["kind"]) == ["Pareto front", "chosen", "dominated"]
    assert frame["attainment_pct"].tolist() == [90.0, 99.0, 95.0]
    spec = pareto_chart(frame, 0.95).to_dict()
    assert spec["width"] == WIDTH_PX <= 650 and len(spec["layer"]) == 3


def test_day_chart_keeps_only_changes():
    series = pd.DataFrame({"t_s": [0.0, 1.0, 2.0, 3.0], "ready": [1, 1, 2, 2]})
    spec = day_chart({"a": series}).to_dict()
    data = next(iter(spec["datasets"].values()))
    assert [row["ready"] for row in data] == [1, 2, 2] and spec["width"] <= 650


def _plan(current, results, recommended_index):
    from planner.workflows.plan import Recommendation, plan_front

    class _Plan:  # the attributes plan_frame reads, without simulating anything
        pass

    plan = _Plan()
    plan.current, plan.results = current, tuple(results)
    plan.front = plan_front((current, *results))
    plan.recommended = next(r for r in (current, *results) if r.index == recommended_index)
    plan.recommendation = Recommendation(plan.recommended, "kept", "")
    plan.weekly = lambda r: {
        "setting": "x",
        "cost_usd_per_week": 7 * r.cost_usd,
        "flap_cycles_per_week": 7 * r.flap_cycles,
    }
    return plan


def _flapping(index, cost, attained, flaps):
    return SweepResult(index, (("target", 10.0 * (index + 1)),), attained, cost, cost / 2, 0, flaps, 1, 0, 0)


def test_the_plan_chart_shows_flapping_and_marks_current_and_recommended():
    current = _flapping(-1, 1.0, 0.998, 0)
    results = [_flapping(0, 0.9, 0.999, 20), _flapping(1, 1.2, 1.0, 5), _flapping(2, 1.3, 0.99, 6)]
    frame = plan_frame(_plan(current, results, -1))
    assert list(frame["role"]) == ["current, recommended", "Pareto front", "Pareto front", "dominated"]
    assert frame["flap_cycles_per_week"].tolist() == [0, 140, 35, 42]
    spec = plan_chart(frame, 0.99, 84).to_dict()
    top, bottom = spec["vconcat"]
    encoded = json.dumps(spec)
    assert '"field": "flap_cycles_per_week"' in encoded  # flapping is drawn: a colour and a panel of its own
    assert bottom["layer"][0]["encoding"]["y"]["field"] == "flap_cycles_per_week"
    assert top["layer"][0]["encoding"]["shape"]["field"] == "role"
    assert top["width"] <= 650 and bottom["width"] <= 650
    frame = plan_frame(_plan(current, results, 0))
    assert list(frame["role"][:2]) == ["current", "recommended"]
