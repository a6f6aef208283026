"""Charts of the chapter on forecasts: one line per strategy through its runs, the goal as a rule."""

from __future__ import annotations

from planner.charts.forecasts import comparison_chart, comparison_frame
from tests.explorers.test_explorers_forecasts import _comparison


def test_the_frame_has_one_row_per_run_and_the_chart_draws_them_with_the_goal():
    frame = comparison_frame(_comparison())
    assert list(frame.columns) == ["strategy", "target", "gpu_hours", "attainment_pct", "peak_replicas"]
    assert frame["strategy"].tolist() == ["reactive"] * 3 + ["seasonal"] * 3
    assert frame["attainment_pct"].iloc[0] == 99.9 and frame["gpu_hours"].iloc[-1] == 9.0
    spec = comparison_chart(frame, 0.98).to_dict()
    lines, goal = spec["layer"]
    assert lines["mark"]["type"] == "line" and lines["encoding"]["color"]["field"] == "strategy"
    assert goal["mark"]["type"] == "rule"
    assert spec["datasets"][goal["data"]["name"]] == [{"goal_pct": 98.0}]
