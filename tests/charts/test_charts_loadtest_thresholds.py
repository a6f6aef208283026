"""Tests for planner.charts.loadtest_thresholds."""

import numpy as np
import pytest

from planner.capacity.knee import knee_grid, thresholds_from_loadtest
from planner.charts.loadtest_thresholds import (
    knee_slider_chart,
    latency_chart,
    latency_long,
    select_objectives_ms,
    slider_objectives_ms,
    step_time_chart,
    step_time_points,
)
from planner.readers.loadtest import read_loadtest
from tests.conftest import DATA_DIR, TEST_DATA_DIR

SAMPLE = DATA_DIR / "loadtests" / "qwen2.5-7b_canonical.csv"


def test_charts_build_and_hold_the_knee():
    steps = read_loadtest(SAMPLE)
    result = thresholds_from_loadtest(steps, ttft_p99_slo_ms=2000, itl_p99_slo_ms=50)
    long = latency_long(steps, "concurrency")
    assert set(long["metric"]) == {"TTFT", "ITL"} and len(long) == 6 * len(steps)
    spec = latency_chart(long, "concurrency", result.knee.step, 2000, 50).to_dict()
    assert '"knee 32"' in str(spec).replace("'", '"')
    points = step_time_points(
        result.fit_batch, steps["tpot_mean_ms"].iloc[list(result.fit_step_indices)], result.tpot_fit
    )
    fitted = points[points["source"] != "measured"]["step_ms"].to_numpy()
    np.testing.assert_allclose(fitted, result.tpot_fit.predict_ms(np.array(result.fit_batch)))
    assert isinstance(step_time_chart(points, "t").to_dict(), dict)


def test_infinite_rate_step_is_left_off_the_axis():
    steps = read_loadtest(TEST_DATA_DIR / "loadtests/vllm_llama3.3-70b_tp8_qps")
    steps.loc[1, "request_rate_rps"] = np.inf
    assert latency_long(steps, "request_rate_rps")["step"].max() == 1.0


# ---------------------------------------------------------------- the objectives slider


def _slider_inputs(path=SAMPLE, ttft_ms=2000.0, itl_ms=50.0):
    steps = read_loadtest(path)
    grid = knee_grid(
        steps,
        select_objectives_ms(steps["ttft_p99_ms"], ttft_ms),
        slider_objectives_ms(steps["itl_p99_ms"], itl_ms),
        growth_frac=0.2,
    )
    return steps, grid


def _walk(node):
    if isinstance(node, dict):
        yield node
        for value in node.values():
            yield from _walk(value)
    elif isinstance(node, list):
        for value in node:
            yield from _walk(value)


def test_slider_objectives_are_round_even_steps_across_the_measurements():
    values = slider_objectives_ms([7.064, 48.479], 50.0, max_count=40)
    assert 50.0 in values and values[0] < 7.064 and values[-1] > 50.0
    spacing = np.diff(values)
    assert np.allclose(spacing, 2.0) and len(values) <= 42
    odd = slider_objectives_ms([10.0, 400.0], 37.5, max_count=20)
    # 432 ms over 19 gaps rounds up to 50 ms; values at or under 0 ms are left out.
    assert odd.tolist() == [37.5 + 50 * k for k in range(10)]


def test_select_objectives_bracket_the_measurements():
    values = select_objectives_ms([136.4, 17783.3], 1500.0)
    assert values.tolist() == [100, 200, 500, 1000, 1500, 2000, 5000, 10000, 20000]


def test_slider_chart_binds_a_range_and_a_select_to_the_planners_grid():
    steps, grid = _slider_inputs()
    spec = knee_slider_chart(latency_long(steps, "concurrency"), grid, "concurrency", 2000.0, 50.0).to_dict()
    params = {param["name"]: param for param in spec["params"]}
    itl, ttft = params["itl_slo"], params["ttft_slo"]
    itl_values = np.sort(grid["itl_p99_slo_ms"].unique())
    assert itl["bind"]["input"] == "range" and itl["value"] == 50.0
    assert (itl["bind"]["min"], itl["bind"]["max"]) == (itl_values[0], itl_values[-1])
    assert itl["bind"]["step"] == 2.0
    assert ttft["bind"]["input"] == "select" and ttft["value"] == 2000.0
    assert ttft["bind"]["options"] == sorted(grid["ttft_p99_slo_ms"].unique().tolist())
    # The page only filters the precomputed rows: no Vega calculation anywhere.
    transforms = [t for node in _walk(spec) for t in node.get("transform", [])]
    assert transforms and not any("calculate" in t or "aggregate" in t for t in transforms)
    filters = " ".join(str(t["filter"]) for t in transforms if "filter" in t)
    assert "itl_slo" in filters and "ttft_slo" in filters
    # The grid's rows reach the page unchanged, one per pair of objectives.
    (rows,) = [data for data in spec["datasets"].values() if data and "knee_step" in data[0]]
    assert len(rows) == len(grid) < 5000
    at_inputs = next(r for r in rows if (r["ttft_p99_slo_ms"], r["itl_p99_slo_ms"]) == (2000.0, 50.0))
    assert at_inputs["knee_step"] == 32.0 and at_inputs["limited_by"] == "itl_p99+preemptions"
    assert at_inputs["label"].startswith("Knee 32.0 requests, target 26.7")


def test_slider_rows_say_when_no_step_passes_and_when_every_step_does():
    _, grid = _slider_inputs()
    spec = knee_slider_chart(
        latency_long(read_loadtest(SAMPLE), "concurrency"), grid, "concurrency", 2000.0, 50.0
    ).to_dict()
    (rows,) = [data for data in spec["datasets"].values() if data and "knee_step" in data[0]]
    tightest = next(r for r in rows if r["itl_p99_slo_ms"] == grid["itl_p99_slo_ms"].min())
    assert tightest["knee_step"] is None
    assert tightest["label"].startswith("No step meets these objectives:\nthe lightest misses")
    loosest = [
        r
        for r in rows
        if r["ttft_p99_slo_ms"] == grid["ttft_p99_slo_ms"].max() and r["itl_p99_slo_ms"] == grid["itl_p99_slo_ms"].max()
    ]
    assert loosest[0]["label"].startswith(("Every step passes", "Knee"))


def test_slider_chart_on_a_rate_sweep_with_an_infinite_step():
    steps = read_loadtest(TEST_DATA_DIR / "loadtests/vllm_llama3.3-70b_tp8_qps")
    steps.loc[len(steps) - 1, "request_rate_rps"] = np.inf
    grid = knee_grid(
        steps,
        select_objectives_ms(steps["ttft_p99_ms"], 200.0),
        slider_objectives_ms(steps["itl_p99_ms"], 45.0),
        growth_frac=0.2,
    )
    assert np.isinf(grid["knee_step"]).any()
    spec = knee_slider_chart(latency_long(steps, "request_rate_rps"), grid, "request_rate_rps", 200.0, 45.0)
    text = str(spec.to_dict())
    assert "inf" not in text.replace("info", "") and "Request rate (requests/s)" in text


def test_slider_chart_refuses_opening_objectives_off_the_grid():
    steps, grid = _slider_inputs()
    with pytest.raises(ValueError, match="rows of the grid"):
        knee_slider_chart(latency_long(steps, "concurrency"), grid, "concurrency", 2000.0, 51.0)


# ---------------------------------------------------------------- layout

COLUMN_PX = 650  # the book's content column
AXIS_PX = 80  # a y axis's labels and title beside a panel
RIGHT_LEGEND_PX = 120
SPACING_PX = 20


def _estimated_width(spec: dict) -> float:
    # An upper estimate of the drawn width: panels, their axes, the gaps and any legend on the right.
    if "hconcat" in spec:
        return sum(_estimated_width(c) for c in spec["hconcat"]) + SPACING_PX * (len(spec["hconcat"]) - 1)
    if "vconcat" in spec:
        return max(_estimated_width(c) for c in spec["vconcat"])
    colors = [node["color"] for node in _walk(spec) if isinstance(node.get("color"), dict) and "field" in node["color"]]
    # A colour encoding draws a legend on the right unless told otherwise (or told not to).
    right_legend = any(
        "legend" not in c or (c["legend"] is not None and c["legend"].get("orient", "right") == "right") for c in colors
    )
    return spec.get("width", 0) + AXIS_PX + (RIGHT_LEGEND_PX if right_legend else 0)


@pytest.mark.parametrize("path", [SAMPLE, TEST_DATA_DIR / "loadtests/vllm_llama3.3-70b_tp8_qps"])
def test_every_chart_fits_the_content_column(path):
    steps = read_loadtest(path)
    variable = steps.attrs["step_variable"]
    result = thresholds_from_loadtest(steps, ttft_p99_slo_ms=2000, itl_p99_slo_ms=50)
    long = latency_long(steps, variable)
    grid = knee_grid(
        steps, select_objectives_ms(steps["ttft_p99_ms"], 2000.0), slider_objectives_ms(steps["itl_p99_ms"], 50.0)
    )
    charts = {
        "latency": latency_chart(long, variable, result.knee.step, 2000, 50),
        "slider": knee_slider_chart(long, grid, variable, 2000.0, 50.0),
    }
    if result.tpot_fit is not None:
        points = step_time_points(
            result.fit_batch, steps["tpot_mean_ms"].iloc[list(result.fit_step_indices)], result.tpot_fit
        )
        charts["step time"] = step_time_chart(points, "t")
    for name, chart in charts.items():
        assert _estimated_width(chart.to_dict()) <= COLUMN_PX, name
    # Before, the latency panels sat side by side: 2 x 300 px plus axes and a legend, about 820 px.
    assert "vconcat" in charts["latency"].to_dict()


def test_latency_chart_without_a_knee_draws_no_knee_rule():
    steps = read_loadtest(SAMPLE)
    spec = latency_chart(latency_long(steps, "concurrency"), "concurrency", float("nan"), 10.0, 1.0).to_dict()
    assert "knee" not in str(spec) and len(spec["vconcat"]) == 2


def test_slider_captions_are_two_short_lines():
    _, grid = _slider_inputs()
    spec = knee_slider_chart(
        latency_long(read_loadtest(SAMPLE), "concurrency"), grid, "concurrency", 2000.0, 50.0
    ).to_dict()
    (rows,) = [data for data in spec["datasets"].values() if data and "knee_step" in data[0]]
    for row in rows:
        lines = row["label"].split("\n")
        assert len(lines) == 2 and max(len(line) for line in lines) <= 60, row["label"]
    assert any(node.get("lineBreak") == "\n" for node in _walk(spec))
