"""Charts of the GPU-utilization chapter: grids come from the planner, charts fit the column."""

import numpy as np

from planner.charts.gpu_utilization import (
    batch_chart,
    batch_grid,
    hpa_targets_chart,
    hpa_targets_grid,
    idle_chart,
    idle_grid,
)


def test_batch_grid_shows_flat_utilization_and_growing_throughput():
    grid = batch_grid(64, 6.0, 0.25, 0.97)
    util = grid[grid["quantity"].str.startswith("GPU")]
    tps = grid[grid["quantity"] == "Output tokens/s"]
    assert (util["value"] == 97.0).all()
    assert tps["value"].iloc[0] == 160.0 and round(tps["value"].iloc[-1] / 160.0) == 18
    assert batch_chart(grid).to_dict()["width"] <= 600


def test_hpa_grid_has_one_trace_per_target_and_the_slider_walks_them():
    grid = hpa_targets_grid(np.arange(85.0, 91.0), 120.0, 4, 16, 60.0, 300.0, 0.97)
    assert sorted(grid["target_pct"].unique()) == list(np.arange(85.0, 91.0))
    spec = hpa_targets_chart(grid, 88.0, 16, 3).to_dict()
    assert spec["params"][0]["bind"]["input"] == "range" and spec["params"][0]["value"] == 88.0
    assert spec["width"] <= 600


def test_idle_chart_marks_the_load():
    grid = idle_grid(10.0, 0.97)
    assert grid["utilization_pct"].is_monotonic_increasing
    assert idle_chart(grid, 30.0).to_dict()["width"] <= 600
