import numpy as np

from planner.charts.littles_law import (
    replicas_chart,
    replicas_grid,
    slider_values,
    step_time_chart,
    step_time_grid,
)


def test_grid_rows_come_from_the_planner():
    grid = replicas_grid([10.0, 16.0], 12.0, [40.0, 30.0])
    at_40 = grid[grid.target_concurrency == 40.0]
    assert at_40.replicas.tolist() == [3, 5]
    assert grid[grid.target_concurrency == 30.0].replicas.tolist() == [4, 7]


def test_replicas_chart_has_a_bound_slider_over_the_grid():
    grid = replicas_grid(np.arange(0, 20.5, 0.5), 12.0, np.arange(20, 49, 2.0))
    spec = replicas_chart(grid, 48.0, 40.0).to_dict()
    (param,) = spec["params"]
    assert param["bind"]["input"] == "range"
    assert param["bind"]["min"] == 20.0 and param["bind"]["max"] == 48.0 and param["bind"]["step"] == 2.0


def test_step_time_chart_builds():
    spec = step_time_chart(step_time_grid(np.arange(1, 65), 6.0, 0.25), 16.0, 32).to_dict()
    assert "hconcat" in spec


def test_slider_values_are_even_whole_steps_within_the_count():
    values = slider_values(16, 64, max_count=32)
    assert values[0] == 16 and values[-1] >= 64
    assert len(values) <= 33
    assert len(set(np.diff(values))) == 1


def test_grid_for_large_inputs_stays_under_altairs_row_limit():
    grid = replicas_grid(np.linspace(0, 540, 121), 9.5, slider_values(64 / 4, 64))
    assert len(grid) <= 5000
    replicas_chart(grid, 64.0, 52.0).to_dict()
