"""Tests for planner.charts.loadtest_thresholds."""

from pathlib import Path

import numpy as np

from planner.charts.loadtest_thresholds import (
    latency_chart,
    latency_long,
    step_time_chart,
    step_time_points,
)
from planner.knee import thresholds_from_loadtest
from planner.readers.loadtest import read_loadtest

SAMPLE = Path(__file__).resolve().parent.parent / "data" / "loadtests" / "qwen2.5-7b_canonical.csv"


def test_charts_build_and_hold_the_knee():
    steps = read_loadtest(SAMPLE)
    result = thresholds_from_loadtest(steps, ttft_p99_slo_ms=2000, itl_p99_slo_ms=50)
    long = latency_long(steps, "concurrency")
    assert set(long["metric"]) == {"TTFT", "ITL"} and len(long) == 6 * len(steps)
    spec = latency_chart(long, "concurrency", result.knee.step, 2000, 50).to_dict()
    assert '"knee 32"' in str(spec).replace("'", '"')
    points = step_time_points(result.fit_batch, steps["tpot_mean_ms"].iloc[list(result.fit_step_indices)], result.tpot_fit)
    fitted = points[points["source"] != "measured"]["step_ms"].to_numpy()
    np.testing.assert_allclose(fitted, result.tpot_fit.predict_ms(np.array(result.fit_batch)))
    assert isinstance(step_time_chart(points, "t").to_dict(), dict)


def test_infinite_rate_step_is_left_off_the_axis():
    steps = read_loadtest(Path(__file__).resolve().parent / "data/loadtests/vllm_llama3.3-70b_tp8_qps")
    steps.loc[1, "request_rate_rps"] = np.inf
    assert latency_long(steps, "request_rate_rps")["step"].max() == 1.0
