"""Charts of the cold-start chapter: a published case's phases, the phase sliders' grid, the node pool over a run."""

from __future__ import annotations

import dataclasses

import numpy as np
import pandas as pd
import pytest

from planner.capacity.headroom import ramp_backlog_requests
from planner.charts.cold_start import (
    SLIDER_STEPS,
    case_waterfall_chart,
    case_waterfall_frame,
    phase_grid,
    phase_slider_chart,
    supply_long,
    supply_table_view,
    supply_timeline_chart,
)
from planner.dynamics.cold_start import ColdStartPhases, phase_waterfall
from planner.errors import PlannerInputError
from planner.readers.cold_start_cases import cold_start_case, read_cold_start_cases
from planner.simulate import simulate
from planner.simulate.fleet import FleetSpec
from planner.simulate.supply import NodePoolSpec
from planner.workflows.cold_start import supply_table
from tests.conftest import DATA_DIR
from tests.simulate_helpers import scaled_object, steady_trace, write_manifest

KAITO = ColdStartPhases(provision_s=284, node_init_s=126, image_pull_s=101, weights_load_s=260, warmup_s=195)


def test_a_published_case_is_drawn_back_to_back_to_its_total():
    kaito = cold_start_case(read_cold_start_cases(DATA_DIR / "cold_starts.yaml"), "kaito-2325")
    frame = case_waterfall_frame(kaito)
    assert (frame["start_s"].iloc[1:].to_numpy() == frame["end_s"].iloc[:-1].to_numpy()).all()
    assert frame["end_s"].iloc[-1] == 966 and frame["counts_as"].iloc[3] == "image pull"
    spec = case_waterfall_chart(frame, kaito.title).to_dict()
    assert spec["title"] == kaito.title and spec["width"] <= 600
    report = cold_start_case(read_cold_start_cases(DATA_DIR / "cold_starts.yaml"), "gpu-operator-708")
    with pytest.raises(PlannerInputError, match=r"\(gpu-operator-708\): phases: this user report lists no measured"):
        case_waterfall_frame(report)


def test_the_grid_starts_at_the_pages_phases_and_the_queue_ends_at_ready():
    growth, spare = 1.0 / 60.0, 13.6
    bars, queue = phase_grid(KAITO, 30.0, growth, spare)
    assert len(bars) < 5000 and len(queue) < 5000  # altair's limit per data set
    assert sorted(bars["node_s"].unique()) == pytest.approx([410.0 * step for step in SLIDER_STEPS])
    keys = (bars.node_s == 410.0) & (bars.pull_s == 101.0) & (bars.load_s == 455.0)
    chosen = bars[keys]
    expected = phase_waterfall(KAITO, needs_node=True, image_cached=False, reaction_delay_s=30.0)
    assert chosen["counts_as"].tolist() == [bar.name for bar in expected]
    assert chosen["end_s"].tolist() == pytest.approx([bar.end_s for bar in expected])
    curve = queue[(queue.node_s == 410.0) & (queue.pull_s == 101.0) & (queue.load_s == 455.0)]
    assert curve["t_s"].iloc[-1] == 996.0
    assert curve["queue_requests"].iloc[-1] == round(ramp_backlog_requests(growth, 996.0, spare))
    assert curve["queue_requests"].is_monotonic_increasing
    # A node part of 0 is a GPU on a node that is up: no node autoscaler, provisioning or node init.
    free = bars[(bars.node_s == 0) & (bars.pull_s == 101.0) & (bars.load_s == 455.0)]
    assert free["counts_as"].tolist() == ["image pull", "weights load", "warmup"] and free["end_s"].max() == 556.0


def test_a_phase_of_zero_gets_a_slider_of_whole_minutes():
    no_pull = dataclasses.replace(KAITO, image_pull_s=0.0)
    bars, _ = phase_grid(no_pull, 30.0, 0.01, 0.0)
    assert sorted(bars["pull_s"].unique()) == [60.0 * i for i in range(len(SLIDER_STEPS))]
    assert "image pull" not in set(bars[bars.pull_s == 0]["counts_as"])  # a phase of 0 s draws no bar


def test_the_sliders_start_at_the_phases_and_filter_the_grid():
    bars, queue = phase_grid(KAITO, 30.0, 1.0 / 60.0, 13.6)
    spec = phase_slider_chart(bars, queue, KAITO).to_dict()
    params = {param["name"]: param for param in spec["params"]}
    assert {name: param["value"] for name, param in params.items()} == {
        "node_s": 410.0,
        "pull_s": 101.0,
        "load_s": 455.0,
    }
    assert params["node_s"]["bind"]["step"] == pytest.approx(102.5)
    text = str(spec)
    assert "abs(datum.node_s - node_s)" in text and "abs(datum.load_s - load_s)" in text


def _runs(tmp_path):
    autoscaler = write_manifest(tmp_path, scaled_object("chat", "sum(vllm:num_requests_running)", 4, max_replicas=4))
    nodes = NodePoolSpec(gpus_per_node=1, provision_s=284, node_init_s=126, initial_nodes=1)
    fleet = FleetSpec(nodes=nodes, image_pull_s=101, weights_load_s=260, warmup_s=195)
    trace = steady_trace(6.0, 1500.0, 100, 400)
    return {
        "none": simulate(trace, autoscaler, fleet, duration_s=2000.0),
        "one": simulate(trace, autoscaler, dataclasses.replace(fleet, placeholders=1), duration_s=2000.0),
    }


def test_the_timeline_keeps_only_the_steps_and_draws_them_all(tmp_path):
    runs = _runs(tmp_path)
    long = supply_long(runs, every_s=20.0)
    assert set(long["configuration"]) == {"none", "one"}
    # Filling the dropped points forward gives back every thinned point: nothing a step chart draws is lost.
    series = runs["none"].timeseries
    bucket = (series["t_s"] // 20.0) * 20.0
    full = series.groupby(bucket)["pods_pending"].max()
    kept = long[(long.configuration == "none") & (long.series == "pods Pending")].set_index("t_s")["value"]
    assert len(kept) < len(full)
    assert (kept.reindex(full.index).ffill().to_numpy() == full.to_numpy()).all()
    spec = supply_timeline_chart(long, initial="one").to_dict()
    assert spec["params"][0]["value"] == "one" and spec["params"][0]["bind"]["options"] == ["none", "one"]
    with pytest.raises(ValueError, match="bare: the run has no replicas_requested series"):
        supply_long({"bare": dataclasses.replace(runs["none"], timeseries=pd.DataFrame({"t_s": [0.0]}))})


def test_the_table_view_has_a_header_with_a_unit_for_each_column(tmp_path):
    table = supply_table(_runs(tmp_path), gpus_per_node=1)
    html = supply_table_view(table).to_html()
    assert "Next replica Ready after (s)" in html and "Idle GPU-hours" in html and "Met the TTFT objective (%)" in html
    narrow = supply_table_view(table, ["node_hours"]).to_html()
    assert "Node-hours" in narrow and "Pending" not in narrow
    with pytest.raises(ValueError, match="no header for column 'colour'"):
        supply_table_view(table.assign(colour=np.ones(len(table))))
