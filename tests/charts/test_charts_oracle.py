"""The oracle chart: configurations, their front, and the two bounds over attainment, within the column."""

from __future__ import annotations

import json

import numpy as np
import pytest

from planner.charts.oracle import BOUNDS, WIDTH_PX, bound_frame, configurations_frame, oracle_chart
from planner.simulate.oracle import OracleCurve
from planner.simulate.sweep import SweepResult


def _result(index, cost, attained, regret=None):
    return SweepResult(index, (("target", 4.0 * (index + 1)),), attained, cost, cost, 0, 0, 1, 0, 0, regret_usd=regret)


CURVE = OracleCurve(
    requests=100,
    impossible_requests=2,
    missed_requests=np.array([0, 1, 2, 10, 50]),
    instant_gpu_hours=np.array([np.inf, np.inf, 1.0, 0.8, 0.3]),
    instant_cost_usd=np.array([np.inf, np.inf, 4.0, 3.2, 1.2]),
    cold_start_gpu_hours=np.array([np.inf, np.inf, 1.5, 1.2, 0.5]),
    cold_start_cost_usd=np.array([np.inf, np.inf, 6.0, 4.8, 2.0]),
)


def test_the_bounds_leave_out_what_no_run_can_reach_and_what_was_not_swept():
    frame = bound_frame(CURVE, 0.85)
    cold = frame[frame["bound"] == BOUNDS[0]]
    assert cold["attainment_pct"].tolist() == [98.0, 90.0] and cold["cost_usd"].tolist() == [6.0, 4.8]
    assert set(frame["bound"]) == set(BOUNDS) and np.isfinite(frame["cost_usd"]).all()
    assert len(bound_frame(CURVE)) == 6


def test_configurations_are_marked_on_the_front_with_their_regret():
    results = [_result(0, 5.0, 0.95, 0.4), _result(1, 7.0, 0.98, 1.0), _result(2, 8.0, 0.96)]
    frame = configurations_frame(results)
    assert frame["kind"].tolist() == ["Pareto front", "Pareto front", "dominated"]
    assert frame["regret_usd"].iloc[0] == pytest.approx(0.4) and np.isnan(frame["regret_usd"].iloc[2])


def test_the_chart_draws_the_bounds_the_front_the_points_and_the_goal_within_the_column():
    results = [_result(0, 5.0, 0.95, 0.4), _result(1, 7.0, 0.98, 1.0), _result(2, 8.0, 0.96, 3.0)]
    spec = oracle_chart(results, CURVE, 0.97).to_dict()
    assert spec["width"] == WIDTH_PX <= 650 and len(spec["layer"]) == 4
    marks = [layer["mark"]["type"] if isinstance(layer["mark"], dict) else layer["mark"] for layer in spec["layer"]]
    assert marks == ["line", "line", "circle", "rule"]
    encoded = json.dumps(spec)
    assert '"field": "bound"' in encoded and "over the oracle" in encoded
    # The bounds start a little below the lowest attainment swept (95 %): 93 % and up.
    bounds = next(data for data in spec["datasets"].values() if data and "bound" in data[0])
    assert min(row["attainment_pct"] for row in bounds) >= 93.0
    assert len(oracle_chart(results, CURVE).to_dict()["layer"]) == 3
