"""Charts of the chapter "Your plan": they fit the column and show every configuration."""

from __future__ import annotations

import pandas as pd

from planner.charts.your_plan import WIDTH_PX, day_chart, pareto_chart, sweep_frame
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
