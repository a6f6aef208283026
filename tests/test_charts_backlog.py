"""Charts of the backlog chapter: one precomputed queue per cold start, chosen by a slider."""

import numpy as np
import pytest

from planner.charts.backlog import backlog_chart, cold_start_grid, cold_start_table


def test_a_longer_cold_start_leaves_a_longer_queue():
    grid = cold_start_grid(np.arange(0.0, 301.0, 60.0), 30.0, 15.0, 30.0, 75.0, 36.0, 92.0, 800.0)
    peaks = grid.groupby("cold_start_s")["queue_requests"].max()
    assert peaks.is_monotonic_increasing
    assert peaks.loc[60.0] == pytest.approx((75.0 - 36.0) * 105.0)
    spec = backlog_chart(grid, 60.0).to_dict()
    assert spec["params"][0]["value"] == 60.0 and spec["width"] <= 600


def test_table_gives_backlog_and_time_to_clear():
    table = cold_start_table([60.0, 0.0], 30.0, 15.0, 75.0, 36.0, 92.0)
    assert table["peak backlog (requests)"].tolist() == [4095, 1755]
    assert table["time to clear it (s)"].tolist() == [round(4095 / 17, 1), round(1755 / 17, 1)]
