"""The chapter "Where the GPUs come from": its default run, and `planner report` on a team's own numbers."""

from __future__ import annotations

import os

import nbformat
import pytest
import yaml

from planner.cli import main
from planner.dynamics.cold_start import ColdStartPhases, time_to_ready_s
from tests.notebooks import glued, run_chapter


@pytest.fixture(scope="module")
def default(tmp_path_factory):
    return glued(run_chapter("cold_start", tmp_path_factory.mktemp("default")))


def test_the_published_cases_are_reproduced(default):
    # kaito issue 2325: 966 s measured, 455 s without the node and the pull.
    assert default["kaito_total_s"] == default["kaito_cold_s"] == "966" and default["kaito_warm_s"] == "455"
    assert default["kaito_node_s"] == "410" and default["kaito_benchmark_s"] == "92"
    # llm-d pull request 1902: 409 s, 199 s with image streaming, 225 s with pod snapshots, 15 s with both.
    assert [default[f"llmd_{name}"] for name in ("total_s", "image_streaming_total_s", "pod_snapshots_total_s")] == [
        "409",
        "199",
        "225",
    ]
    assert default["llmd_image_streaming_and_pod_snapshots_total_s"] == "15"
    # cluster-autoscaler's 30 s GPU buffer (issue 9126) against Karpenter's 1 s batch.
    assert default["ca_buffer_s"] == "30" and default["ca_cpu_buffer_s"] == "2" and default["ca_late_wait_s"] == "37"
    assert default["ca_new_node_s"] == "996" and default["karp_new_node_s"] == "967"


def test_the_overbuying_the_simulator_leaves_out_is_quantified(default):
    assert default["overbuy_nodes"] == "1 extra node" and default["overbuy_node_hours"] == "0.25"
    assert default["assumed_extra"] == "4 extra nodes" == f"{default['report_708_count']} extra nodes"


def test_the_ramp_queue_and_the_placeholders(default):
    # 30 requests/s with 64 / 44 - 1 of spare: 13.6 requests/s, gone after 818 s of +1 request/s per minute.
    assert default["spare_rps"] == "13.6" and default["spare_lasts"] == "uses up in 818 s"
    assert (default["new_node_s"], default["free_gpu_s"], default["cached_image_s"]) == ("996", "556", "455")
    assert (default["backlog_new"], default["backlog_free"], default["backlog_cached"]) == ("263", "0", "0")
    # The replay: the first new replica lands on the placeholder's warm GPU, image there.
    assert default["held_next_s"] == "455" and default["none_next_s"] in {"996", "1,001", "1,006"}
    assert default["held_usd_per_day"] == "$96"


def test_the_hpa_cascade_while_pods_load(default):
    assert default["ups_times"] == "15, 30, 45, 60" and default["ups_path"] == "1 → 5 → 10 → 20 → 40"
    assert default["max_replicas"] == 40


def test_phases_come_from_a_fleet_file_with_a_node_pool(tmp_path):
    fleet = {
        "max_num_seqs": 64,
        "nodes": {"gpus_per_node": 8, "provision_s": 120, "node_init_s": 60, "autoscaler": "karpenter"},
        "pod": {"image_pull_s": 30, "weights_load_s": 90},
        "warmup_s": 45,
    }
    path = tmp_path / "FLEET.yaml"
    path.write_text(yaml.safe_dump(fleet), encoding="utf-8")
    values = glued(run_chapter("cold_start", tmp_path, fleet_path=str(path), provision_s=1.0))
    assert "come from the nodes: section of" in values["phases_note"] and "bought by karpenter" in values["phases_note"]
    phases = ColdStartPhases(provision_s=120, node_init_s=60, image_pull_s=30, weights_load_s=90, warmup_s=45)
    assert values["new_node_s"] == f"{time_to_ready_s(phases, needs_node=True, image_cached=False) + 1:,.0f}"
    assert values["cached_image_s"] == "135"


def _report(tmp_path, *params):
    out = tmp_path / "reports" / "gpus"
    argv = ["report", "cold_start", "--quiet", "--out", str(out)]
    for pair in params:
        argv += ["--param", pair]
    old = os.getcwd()
    os.chdir(tmp_path)
    try:
        return main(argv), out
    finally:
        os.chdir(old)


def test_planner_report_runs_the_chapter_on_other_numbers(tmp_path):
    status, out = _report(
        tmp_path,
        "node_autoscaler=karpenter",
        "image_pull_s=10",
        "placeholders=2",
        "quota_nodes=5",
        "capacity_failure_frac=0.2",
    )
    assert status == 0 and sorted(p.name for p in out.iterdir()) == ["cold_start.html", "cold_start.ipynb"]
    values = glued(nbformat.read(out / "cold_start.ipynb", as_version=4))
    # Karpenter's 1 s batch, a 10 s pull: 1 + 284 + 126 + 10 + 260 + 195.
    assert values["new_node_s"] == "876" and values["free_gpu_s"] == "465" and values["cached_image_s"] == "455"
    assert values["placeholders_text"] == "2 placeholders" and values["held_usd_per_day"] == "$192"
    assert values["quota_nodes_text"] == "5 nodes" and values["failure_pct"] == "20%"
    page = (out / "cold_start.html").read_text(encoding="utf-8")
    assert "{glue" not in page and "2 placeholders" in page


def test_a_bad_parameter_exits_2_naming_it(tmp_path, capsys):
    status, out = _report(tmp_path, "node_autoscaler=cluster_autoscaler")
    assert status == 2 and not out.exists()
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "Traceback" not in err
    assert "node_autoscaler: expected one of cluster-autoscaler, karpenter, got 'cluster_autoscaler'" in err
