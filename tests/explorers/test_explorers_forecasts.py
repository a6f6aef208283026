"""The forecasts explorer: moving the goal prices every strategy again from the same runs."""

from __future__ import annotations

from planner.explorers.forecasts import pricing_explorer, pricing_rows, pricing_table
from planner.simulate.sweep import SweepResult
from planner.workflows.forecast_comparison import ForecastComparison, Strategy


def _run(name, target, attained, gpu_hours):
    return SweepResult(0, (("strategy", name), ("target", target)), attained, 4 * gpu_hours, gpu_hours, 0, 0, 2, 0, 0)


def _comparison() -> ForecastComparison:
    reactive = (
        _run("reactive", 10.0, 0.999, 20.0),
        _run("reactive", 20.0, 0.97, 10.0),
        _run("reactive", 30.0, 0.90, 8.0),
    )
    seasonal = (
        _run("seasonal", 10.0, 0.999, 21.0),
        _run("seasonal", 20.0, 0.995, 11.0),
        _run("seasonal", 30.0, 0.96, 9.0),
    )
    return ForecastComparison(
        (Strategy("reactive", "", reactive, None, None, ""), Strategy("seasonal", "q", seasonal, None, None, "")),
        0.98,
        3600.0,
        (0.5, 1.0, 1.5),
    )


def test_the_table_prices_each_strategy_at_the_goal_against_reactive():
    rows = pricing_rows(_comparison(), 0.98)
    # reactive: between 0.97 (10 h) and 0.999 (20 h): 10 + 10 x 0.01/0.029; seasonal: between 0.96 and 0.995.
    reactive = 10 + 10 * (0.98 - 0.97) / (0.999 - 0.97)
    seasonal = 9 + 2 * (0.98 - 0.96) / (0.995 - 0.96)
    assert rows == [
        ("reactive", f"{reactive:.2f}", "", ""),
        ("seasonal", f"{seasonal:.2f}", f"{100 * (seasonal / reactive - 1):+.1f} %", ""),
    ]
    assert pricing_table(_comparison(), 0.98).splitlines()[2].startswith("| reactive | 13.45 |")


def test_moving_the_goal_changes_the_prices_and_says_when_there_is_none():
    slider, table = pricing_explorer(_comparison(), 0.98).children
    assert "13.45" in table.value and "<th>GPU-hours at the goal</th>" in table.value
    slider.value = 99.6
    assert "18.97" in table.value and "-28.8 %" in table.value  # seasonal meets 99.6 % with far fewer GPU-hours
    slider.value = 100.0
    assert table.value.count("no target reaches the goal") == 2  # both top out at 99.9 %
    slider.value = 85.0
    assert table.value.count("every target meets the goal") == 2
