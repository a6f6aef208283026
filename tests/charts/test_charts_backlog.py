"""Charts of the backlog chapter: one precomputed queue per cold start, chosen by a slider."""

import numpy as np
import pytest

from planner.charts.backlog import MODEL_LABELS, backlog_chart, cold_start_grid, cold_start_table
from planner.dynamics.replica_queues import LEAST_LOADED, ROUND_ROBIN


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


def test_per_replica_grid_draws_one_line_per_queue_model_with_a_legend():
    grid = cold_start_grid(
        [60.0], 30.0, 15.0, 30.0, 75.0, 36.0, 92.0, 800.0, replicas_before=9, replicas_after=23, slots=48.0
    )
    assert set(grid["model"]) == set(MODEL_LABELS.values())
    # The same step fills the old replicas' queues whatever the router; round robin drains them last.
    peaks = grid.groupby("model")["queue_requests"].max()
    assert peaks[MODEL_LABELS[ROUND_ROBIN]] == pytest.approx(4095, rel=0.03)
    still_queued = grid[grid["t_s"] >= 105.0 + 300.0].groupby("model")["queue_requests"].first()
    assert still_queued[MODEL_LABELS[ROUND_ROBIN]] > 0
    assert still_queued[MODEL_LABELS[LEAST_LOADED]] == 0 and still_queued[MODEL_LABELS["one shared queue"]] == 0
    layer = backlog_chart(grid, 60.0).to_dict()["layer"][0]
    assert layer["encoding"]["color"]["field"] == "model"
    assert "legend" in layer["encoding"]["color"] and layer["encoding"]["color"]["legend"] is not None


def test_table_gives_the_time_to_clear_behind_each_router():
    table = cold_start_table(
        [60.0], 30.0, 15.0, 75.0, 36.0, 92.0, arrival_rate_rps=30.0, replicas_before=9, replicas_after=23, slots=48.0
    )
    # Round robin: about 447 / (4 - 75 / 23) s; least-loaded: about as fast as the shared queue.
    assert table["round robin (s)"].iloc[0] == pytest.approx(605, abs=3)
    assert table["least loaded (s)"].iloc[0] <= table["time to clear it (s)"].iloc[0]
