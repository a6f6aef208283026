"""Tests for planner.simulate.scenario and planner.readers.scenario: rates, seeds, and scenarios as data."""

from __future__ import annotations

import math

import numpy as np
import pytest

from planner.errors import PlannerInputError
from planner.readers.scenario import read_scenario
from planner.simulate.scenario import (
    SCENARIO_KINDS,
    Scenario,
    scenario_from_dict,
    scenario_rate_trace,
    scenario_trace,
)


def _count(trace, start, end):
    return np.count_nonzero((trace.arrival_s >= start) & (trace.arrival_s < end))


def _close(count, expected, sigmas=4.0):
    return abs(count - expected) <= sigmas * math.sqrt(expected)


# kind, extra parameters, expected mean rate over the run [requests/s]
MEAN_RATES = [
    ("constant", {}, 4.0),
    ("ramp", {"end_rate_rps": 12.0}, 8.0),
    ("ramp", {"end_rate_rps": 0.0, "ramp_start_s": 10_000.0, "ramp_end_s": 30_000.0}, 2.0),
    ("step", {"step_at_s": 10_000.0, "step_rate_rps": 10.0}, 4.0 * 0.25 + 10.0 * 0.75),
    ("diurnal", {"peak_to_trough": 5.0, "period_s": 40_000.0, "peak_at_s": 123.0}, 4.0),
    ("launch_spike", {"spike_at_s": 10_000.0}, 4.0 * (1 + 1.5 * (30_000 - 10) / 40_000)),
    ("long_answers", {"change_at_s": 20_000.0}, 4.0),
]


@pytest.mark.parametrize(("kind", "extra", "mean_rps"), MEAN_RATES)
def test_mean_rate_over_a_long_run(kind, extra, mean_rps):
    scenario = Scenario(kind, 40_000.0, 4.0, **extra)
    rates = scenario_rate_trace(scenario)
    assert rates.expected_requests == pytest.approx(mean_rps * 40_000.0, rel=1e-6)
    trace = scenario_trace(scenario, 1)
    assert _close(len(trace), mean_rps * 40_000.0)
    trace.check()


def test_every_kind_is_covered():
    assert {kind for kind, _, _ in MEAN_RATES} == set(SCENARIO_KINDS)


def test_launch_spike_is_2_5x_in_20_s():
    scenario = Scenario("launch_spike", 1200.0, 30.0, spike_at_s=300.0)
    assert scenario.rate_at([299.9, 300.0, 310.0, 320.0, 1199.0]).tolist() == [30.0, 30.0, 52.5, 75.0, 75.0]
    held = Scenario("launch_spike", 1200.0, 30.0, spike_at_s=300.0, hold_s=60.0)
    assert held.rate_at([379.0, 380.0]).tolist() == [75.0, 30.0]
    trace = scenario_trace(Scenario("launch_spike", 4000.0, 30.0, spike_at_s=1000.0), 2)
    assert _close(_count(trace, 1020, 4000), 75.0 * 2980)
    assert _close(_count(trace, 0, 1000), 30.0 * 1000)


def test_long_answers_keep_the_request_rate():
    scenario = Scenario(
        "long_answers", 20_000.0, 2.0, mean_output_tokens=200.0, change_at_s=10_000.0, token_distribution="geometric"
    )
    trace = scenario_trace(scenario, 4)
    before, after = trace.arrival_s < 10_000.0, trace.arrival_s >= 10_000.0
    assert _close(before.sum(), 20_000.0) and _close(after.sum(), 20_000.0)
    assert trace.output_tokens[before].mean() == pytest.approx(200.0, rel=0.03)
    assert trace.output_tokens[after].mean() == pytest.approx(600.0, rel=0.03)
    assert trace.input_tokens[after].mean() == pytest.approx(trace.input_tokens[before].mean(), rel=0.03)


def test_diurnal_peak_and_trough():
    scenario = Scenario("diurnal", 86_400.0, 10.0, peak_to_trough=3.0, peak_at_s=50_400.0)
    rate = scenario_rate_trace(scenario)
    assert rate.rate_rps.max() == pytest.approx(15.0, rel=1e-6) and rate.rate_rps.min() == pytest.approx(5.0, rel=1e-6)
    trace = scenario_trace(scenario, 9)
    assert _close(_count(trace, 48_600, 52_200), 15.0 * 3600, sigmas=5)


@pytest.mark.parametrize("kind", SCENARIO_KINDS)
def test_same_seed_same_trace_bit_for_bit(kind):
    extra = {
        "ramp": {"end_rate_rps": 9.0},
        "step": {"step_at_s": 50.0, "step_rate_rps": 1.0},
        "launch_spike": {"spike_at_s": 60.0},
    }.get(kind, {})
    scenario = Scenario(kind, 600.0, 3.0, token_distribution="geometric", **extra)
    a, b, c = scenario_trace(scenario, 123), scenario_trace(scenario, 123), scenario_trace(scenario, 124)
    for field in ("arrival_s", "input_tokens", "output_tokens"):
        assert getattr(a, field).tobytes() == getattr(b, field).tobytes()
    assert not np.array_equal(a.arrival_s, c.arrival_s)


def test_a_short_last_step_uses_its_own_middle():
    rates = scenario_rate_trace(Scenario("ramp", 10.5, 0.0, end_rate_rps=21.0))
    assert rates.t_s[-1] == 10.0 and rates.end_s == 10.5
    assert rates.rate_rps[-1] == pytest.approx(21.0 * 10.25 / 10.5)
    assert rates.expected_requests == pytest.approx(21.0 / 2 * 10.5)


def test_from_dict_and_yaml(tmp_path):
    data = {
        "kind": "step",
        "duration_s": 1200,
        "rate_rps": "0.6",
        "step_at_s": 600,
        "step_rate_rps": 1.2,
        "name": "double",
        "token_distribution": "geometric",
    }
    scenario = scenario_from_dict(data)
    assert scenario == Scenario(
        "step", 1200.0, 0.6, step_at_s=600.0, step_rate_rps=1.2, name="double", token_distribution="geometric"
    )
    path = tmp_path / "spike.yaml"
    path.write_text("kind: launch_spike\nduration_s: 1200\nrate_rps: 30\nspike_at_s: 300\n", encoding="utf-8")
    assert read_scenario(path) == Scenario("launch_spike", 1200.0, 30.0, spike_at_s=300.0)


@pytest.mark.parametrize(
    ("data", "message"),
    [
        ({"kind": "burst", "duration_s": 1, "rate_rps": 1}, "kind must be one of constant, ramp, step"),
        ({"duration_s": 1, "rate_rps": 1}, "kind must be one of"),
        ({"kind": "constant", "rate_rps": 1}, "missing key 'duration_s'"),
        (
            {"kind": "constant", "duration_s": 1, "rate_rps": 1, "spike_at_s": 3},
            "unknown key 'spike_at_s' for a constant scenario",
        ),
        ({"kind": "ramp", "duration_s": 1, "rate_rps": 1}, "a ramp scenario needs end_rate_rps"),
        ({"kind": "step", "duration_s": 1, "rate_rps": 1, "step_at_s": 0}, "a step scenario needs step_rate_rps"),
        ({"kind": "constant", "duration_s": "long", "rate_rps": 1}, "duration_s must be a number, got 'long'"),
        ({"kind": "constant", "duration_s": 0, "rate_rps": 1}, "duration_s must be > 0"),
        ({"kind": "constant", "duration_s": 5, "rate_rps": -1}, "rate_rps must be >= 0"),
        (
            {"kind": "constant", "duration_s": 5, "rate_rps": 1, "mean_output_tokens": 0.5},
            "mean_output_tokens must be >= 1",
        ),
        ({"kind": "diurnal", "duration_s": 5, "rate_rps": 1, "peak_to_trough": 0.5}, "peak_to_trough must be >= 1"),
        (
            {"kind": "constant", "duration_s": 5, "rate_rps": 1, "token_distribution": "zipf"},
            "token_distribution must be one of fixed, geometric",
        ),
        (
            {"kind": "ramp", "duration_s": 5, "rate_rps": 1, "end_rate_rps": 2, "ramp_start_s": 3, "ramp_end_s": 2},
            "ramp_end_s must be after ramp_start_s",
        ),
        ([1, 2], "expected a mapping of scenario parameters"),
    ],
)
def test_bad_scenarios(data, message):
    with pytest.raises(PlannerInputError, match=message):
        scenario_from_dict(data)


def test_bad_scenario_files(tmp_path):
    path = tmp_path / "s.yaml"
    path.write_text("kind: [constant\n", encoding="utf-8")
    with pytest.raises(PlannerInputError, match=r"s.yaml: not valid YAML at line"):
        read_scenario(path)
    path.write_text("kind: constant\nduration_s: 10\nrate_rps: 1\nrate: 2\n", encoding="utf-8")
    with pytest.raises(PlannerInputError, match=r"s.yaml: unknown key 'rate' for a constant scenario"):
        read_scenario(path)
    path.write_text("", encoding="utf-8")
    with pytest.raises(PlannerInputError, match="empty file"):
        read_scenario(path)


def test_bundled_scenarios_load_and_carry_the_articles_numbers():
    from tests.conftest import DATA_DIR

    scenarios = {p.stem: read_scenario(p) for p in sorted((DATA_DIR / "scenarios").glob("*.yaml"))}
    assert {s.kind for s in scenarios.values()} == set(SCENARIO_KINDS)
    spike = scenarios["launch_spike"]
    assert spike.rate_at([spike.spike_at_s + 20.0])[0] == 2.5 * spike.rate_rps == 75.0
    longer = scenarios["long_answers"]
    assert scenario_rate_trace(longer).mean_output_tokens[-1] == 3 * longer.mean_output_tokens
    trickle = scenarios["steady_trickle"]
    assert (trickle.rate_rps, trickle.duration_s) == (0.6, 720.0)
    for scenario in scenarios.values():
        scenario_trace(scenario, 0).check()


def test_bundled_rate_trace():
    from planner.readers.trace import read_rate_trace, read_trace
    from tests.conftest import DATA_DIR

    path = DATA_DIR / "traces" / "rate_example.csv"
    rates = read_rate_trace(path)
    assert rates.end_s == 1200.0 and rates.expected_requests == pytest.approx(300 * (2 + 4 + 4 + 1))
    trace = read_trace(path, seed=0)
    assert set(trace.output_tokens.tolist()) == {240, 720}
    assert np.all(trace.output_tokens[(trace.arrival_s >= 600) & (trace.arrival_s < 900)] == 720)
