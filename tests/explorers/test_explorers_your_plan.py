"""The Your plan explorer: moving the goal changes the configuration it names."""

from __future__ import annotations

from planner.explorers.your_plan import goal_explorer
from planner.simulate.sweep import SweepResult


def _result(index, cost, attained, flaps=0):
    return SweepResult(index, (("min_replicas", index + 1),), attained, cost, cost, 0, flaps, index + 1, 0, 0)


def test_moving_the_goal_changes_the_answer():
    results = [_result(0, 1.0, 0.90), _result(1, 2.0, 0.97), _result(2, 4.0, 0.995)]
    box = goal_explorer(results, 0.95)
    slider, summary = box.children
    assert "min_replicas = 2" in summary.value and "$2.00" in summary.value
    slider.value = 99.0
    assert "min_replicas = 3" in summary.value
    slider.value = 100.0
    assert "No configuration" in summary.value
    slider.value = 85.0
    assert "min_replicas = 1" in summary.value


def test_the_flap_limit_of_the_sweep_applies():
    results = [_result(0, 1.0, 0.99, flaps=9), _result(1, 2.0, 0.99, flaps=2)]
    slider, summary = goal_explorer(results, 0.95, max_flap_cycles=3).children
    assert "min_replicas = 2" in summary.value and "within 3 flap cycles" in summary.value
    slider.value = 100.0
    assert "No configuration" in summary.value and "within 3 flap cycles" in summary.value
    assert "min_replicas = 1" in goal_explorer(results, 0.95).children[1].value


def test_with_the_current_setting_the_slider_applies_the_plans_rules():
    current = SweepResult(-1, (("current", "ScaledObject x"),), 0.995, 1.5, 1.5, 0, 0, 2, 0, 0)
    results = [_result(0, 1.0, 0.999, flaps=1), _result(1, 1.2, 0.999, flaps=0)]
    slider, summary = goal_explorer(results, 0.99, 3, current=current).children
    assert "min_replicas = 2" in summary.value  # #1: cheaper than today and flapping no more
    assert "flapping no more" in summary.value
    slider.value = 99.6  # today misses; the cheapest meeting it within 3 flap cycles is #0
    assert "min_replicas = 1" in summary.value and "misses the attainment goal" in summary.value
    slider.value = 99.95
    assert "Nothing swept meets the goals" in summary.value
