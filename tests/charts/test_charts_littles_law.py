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


def _layers(spec):
    for panel in spec["hconcat"]:
        yield from panel["layer"]


def test_step_time_chart_marks_the_knee_and_the_target_where_they_are_with_a_legend():
    spec = step_time_chart(step_time_grid(np.arange(1, 65), 6.0, 0.25), 18.0, 40, knee_batch=48).to_dict()
    datasets = spec["datasets"]
    vertical = [
        layer
        for layer in _layers(spec)
        if layer["mark"]["type"] == "rule" and layer["encoding"].get("x", {}).get("field") == "batch_size"
    ]
    assert vertical
    rows = datasets[vertical[0]["data"]["name"]]
    assert {(row["line"], row["batch_size"]) for row in rows} == {("knee K = 48", 48.0), ("target T = 40", 40.0)}
    color = vertical[0]["encoding"]["color"]
    assert color["legend"] is not None
    assert color["scale"]["domain"] == ["knee K = 48", "target T = 40", "TPOT objective 18 ms"]


def test_replicas_chart_draws_the_chosen_target_beside_the_knee_with_a_legend():
    grid = replicas_grid(np.arange(0, 20.5, 0.5), 12.0, np.arange(20, 49, 2.0))
    spec = replicas_chart(grid, 48.0, 40.0).to_dict()
    rules = [layer for layer in spec["vconcat"][1]["layer"] if layer["mark"]["type"] == "rule"]
    labels = {rule["encoding"]["color"]["scale"]["domain"][0] for rule in rules}
    assert labels == {"knee K = 48"}
    assert any(t.get("aggregate") for rule in rules for t in rule.get("transform", []))  # the slider's target
    assert all(rule["encoding"]["color"]["legend"] is not None for rule in rules)
