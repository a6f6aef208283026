"""Tests for planner.charts.simulation."""

from __future__ import annotations

import pandas as pd
import pytest

from planner.charts.simulation import fleet_timeline_chart, timeline_long


def _series():
    t = [float(i) for i in range(1, 21)]
    return pd.DataFrame(
        {
            "t_s": t,
            "demand_tps": [100.0] * 10 + [300.0] * 10,
            "ready_capacity_tps": [200.0] * 20,
            "running": [5] * 20,
            "waiting": [0] * 10 + list(range(10)),
            "replicas_requested": [1] * 10 + [2] * 10,
            "replicas_ready": [1] * 20,
            "replicas_live": [1] * 10 + [2] * 10,
            "signal": [0.0] * 20,
        }
    )


def test_timeline_is_thinned_by_the_mean_over_each_bucket():
    long = timeline_long(_series(), every_s=10.0)
    waiting = long[long.series == "waiting requests"].set_index("t_s")["value"]
    assert waiting.loc[0.0] == 0.0
    assert waiting.loc[10.0] == pytest.approx(sum(range(9)) / 10)  # t = 10..19 s
    assert set(long.series) >= {"demand (output tokens/s)", "replicas Ready"}


def test_chart_fits_the_book_column():
    spec = fleet_timeline_chart(_series()).to_dict()
    assert len(spec["vconcat"]) == 3
    assert all(panel["width"] <= 650 for panel in spec["vconcat"])
