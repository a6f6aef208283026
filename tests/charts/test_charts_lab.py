"""Tests for planner.charts.lab and planner.charts.flapping: selectors over precomputed runs, sized for the book."""

from __future__ import annotations

import json

import pandas as pd
import pytest

from planner.charts.flapping import fixed_point_chart, flapping_timeline_chart, recommendation_frame
from planner.charts.lab import agreement_table_view, configuration_timeline_chart, configurations_long
from planner.readers.manifest import load_autoscaler
from planner.simulate import simulate
from tests.conftest import DATA_DIR
from tests.simulate_helpers import steady_trace

MANIFESTS = DATA_DIR / "manifests"


@pytest.fixture(scope="module")
def runs():
    trace = steady_trace(0.6, 120.0, 100, 300)
    return {
        name: simulate(trace, load_autoscaler(MANIFESTS / f"flapping-{name}.yaml"), duration_s=120.0)
        for name in ("waiting", "kv-sum")
    }


def _widths(spec) -> list[int]:
    found = []
    if isinstance(spec, dict):
        if isinstance(spec.get("width"), int):
            found.append(spec["width"])
        for value in spec.values():
            found += _widths(value)
    elif isinstance(spec, list):
        for value in spec:
            found += _widths(value)
    return found


def test_configurations_long_labels_every_row_with_its_run(runs):
    long = configurations_long(runs, every_s=10.0)
    assert set(long.configuration) == {"waiting", "kv-sum"}
    one = long[(long.configuration == "kv-sum") & (long.series == "replicas requested")]
    expected = runs["kv-sum"].timeseries.groupby(runs["kv-sum"].timeseries.t_s // 10.0)["replicas_requested"].mean()
    assert one["value"].tolist() == pytest.approx(expected.tolist())


def test_selector_offers_every_configuration_and_starts_on_the_one_asked_for(runs):
    spec = configuration_timeline_chart(configurations_long(runs), initial="kv-sum", title="t").to_dict()
    (param,) = spec["params"]
    assert param["bind"]["input"] == "select"
    assert param["bind"]["options"] == ["waiting", "kv-sum"]
    assert param["value"] == "kv-sum"
    assert len(spec["vconcat"]) == 3
    # Every panel filters the data by the selector: the page switches runs without recomputing.
    assert all(
        f"datum.configuration === {param['name']}" in json.dumps(panel)
        or f"(datum.configuration === {param['name']})" in json.dumps(panel)
        for panel in spec["vconcat"]
    )
    assert max(_widths(spec)) <= 560


def test_unknown_panel_and_empty_runs_are_refused(runs):
    with pytest.raises(ValueError, match="unknown panel 'queue'"):
        configuration_timeline_chart(configurations_long(runs), panels=("queue",))
    with pytest.raises(ValueError, match="no runs"):
        configuration_timeline_chart(pd.DataFrame({"configuration": []}))


def test_flapping_timeline_has_replicas_over_queue(runs):
    spec = flapping_timeline_chart(configurations_long(runs)).to_dict()
    assert len(spec["vconcat"]) == 2
    assert spec["params"][0]["bind"]["name"].startswith("signal")
    assert spec["params"][0]["value"] == "waiting"


def test_fixed_point_chart_draws_each_signal_and_the_diagonal():
    curves = {
        "sum": pd.DataFrame({"replicas": [1, 2, 3], "query_value": [0.9, 0.9, 0.9], "desired_replicas": [2, 2, 2]}),
        "waiting": pd.DataFrame(
            {"replicas": [1, 2, 3], "query_value": [30.0, 0.0, 0.0], "desired_replicas": [3, 1, 1]}
        ),
    }
    frame = recommendation_frame(curves)
    assert frame.groupby("signal").size().to_dict() == {"sum": 3, "waiting": 3}
    spec = fixed_point_chart(frame).to_dict()
    # One panel per signal (issue 21: lines in one panel hid each other), each with the diagonal.
    assert spec["facet"]["field"] == "signal"
    parts = {t["filter"] for layer in spec["spec"]["layer"] for t in layer.get("transform", []) if "filter" in t}
    assert "datum.part == 'diagonal'" in parts and "datum.part == 'step'" in parts
    assert max(_widths(spec)) <= 560


def test_the_agreement_table_shows_units_in_its_headers_and_refuses_an_unknown_column():
    rows = pd.DataFrame(
        [
            {
                "case": "light",
                "tick_s": 1.0,
                "requests": 1467,
                "tick_attainment_frac": 1.0,
                "event_attainment_frac": 0.99,
                "attainment_gap_pct_points": 1.0,
                "tick_mean_ttft_s": 0.0343,
                "event_mean_ttft_s": 0.0389,
                "mean_ttft_gap_frac": 0.119,
            }
        ]
    )
    html = agreement_table_view(rows).to_html()
    for shown in ("mean TTFT, ticks [s]", "gap [points]", "1,467", "99.00%", "0.034", "11.9%"):
        assert shown in html
    with pytest.raises(ValueError, match="no header for column 'extra'"):
        agreement_table_view(rows.assign(extra=1))
