"""Tests for planner.explorers.loadtest_thresholds: the sliders re-run the planner."""

import pytest

from planner.capacity.knee import thresholds_from_loadtest
from planner.explorers.loadtest_thresholds import loadtest_thresholds_explorer
from planner.readers.loadtest import read_loadtest
from tests.conftest import DATA_DIR

SAMPLE = DATA_DIR / "loadtests" / "llama-3.1-8b_canonical.csv"


@pytest.fixture
def explorer():
    steps = read_loadtest(SAMPLE)
    box = loadtest_thresholds_explorer(steps, ttft_p99_slo_ms=2000.0, itl_p99_slo_ms=50.0, growth_frac=0.2)
    ttft, itl, growth, summary = box.children
    return steps, ttft, itl, growth, summary


def test_opens_at_the_chapters_numbers(explorer):
    steps, ttft, itl, growth, summary = explorer
    assert (ttft.value, itl.value, growth.value) == (2000.0, 50.0, 0.2)
    expected = thresholds_from_loadtest(
        steps, ttft_p99_slo_ms=2000.0, itl_p99_slo_ms=50.0, growth_frac=0.2, queue_wait_budget_s=5.0
    )
    assert f">{expected.concurrency_target:,.1f}<" in summary.value
    assert "The knee is at 64 requests in flight" in summary.value and "53.3" in summary.value


def test_moving_a_slider_recomputes(explorer):
    _, _, itl, growth, summary = explorer
    itl.value = 30.0
    assert "The knee is at 32 requests in flight" in summary.value and "misses ITL p99" in summary.value
    growth.value = 0.6
    assert ">20.0<" in summary.value  # T = 32 / 1.6


def test_an_objective_no_step_meets_is_said_not_raised(explorer):
    _, _, itl, _, summary = explorer
    itl.value = itl.min
    assert "No knee" in summary.value and "lightest step (concurrency 1) already misses ITL p99 by" in summary.value


def test_the_sliders_span_the_measurements(explorer):
    steps, ttft, itl, _, _ = explorer
    assert itl.min < steps["itl_p99_ms"].min() and itl.max > steps["itl_p99_ms"].max()
    # A log slider: its ends are powers of ten.
    assert 10**ttft.min < steps["ttft_p99_ms"].min() and 10**ttft.max > steps["ttft_p99_ms"].max()
