"""The linter with a fleet file's node pool: the quota rules and the scale-down window against the comeback time."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

import pytest

from planner.cli import main
from planner.dynamics.cold_start import ClusterAutoscalerSettings, KarpenterSettings
from planner.manifests.lint import ReplicaSupply
from planner.readers.fleet import fleet_spec_from_mapping
from planner.simulate.fleet import FleetSpec
from planner.simulate.supply import NodePoolSpec
from tests.manifests.test_lint import IN_FLIGHT, rules_of, run_lint, scaled_object

# kaito issue 2325's phases on one-GPU nodes, the node autoscaler's delays at their defaults.
KAITO_FLEET = {
    "gpus_per_replica": 1,
    "warmup_s": 195,
    "pod": {"image_pull_s": 101, "weights_load_s": 260},
    "nodes": {"gpus_per_node": 1, "max_nodes": 6, "provision_s": 284, "node_init_s": 126},
}
WINDOW_600 = """\
scaleDown:
  stabilizationWindowSeconds: 600
"""


def supply(**nodes) -> ReplicaSupply:
    mapping = dict(KAITO_FLEET, nodes=KAITO_FLEET["nodes"] | nodes)
    result = ReplicaSupply.from_fleet(fleet_spec_from_mapping(mapping, "FLEET.yaml"))
    assert result is not None
    return result


def test_the_supply_of_a_fleet_file_is_its_cold_start_and_quota():
    s = supply()
    assert (s.warm_time_to_ready_s, s.cold_time_to_ready_s) == (455.0, 996.0)  # 966 + cluster-autoscaler's 30 s
    assert (s.max_pods, s.empty_node_kept_s, s.comeback_s, s.source) == (6, 600.0, 455.0, "FLEET.yaml")
    assert ReplicaSupply.from_fleet(FleetSpec()) is None


def test_karpenter_removing_empty_nodes_at_once_leaves_only_a_cold_comeback():
    s = supply(autoscaler="karpenter")
    assert s.empty_node_kept_s == 0.0
    assert s.comeback_s == s.cold_time_to_ready_s == 966.0 + KarpenterSettings().batch_idle_s


def test_pods_are_packed_by_whole_gpus_per_node():
    mapping = dict(KAITO_FLEET, gpus_per_replica=3, nodes=KAITO_FLEET["nodes"] | {"gpus_per_node": 8})
    s = ReplicaSupply.from_fleet(fleet_spec_from_mapping(mapping, "FLEET.yaml"))
    assert s is not None and (s.pods_per_node, s.max_pods) == (2, 12)


@pytest.mark.parametrize(("minimum", "maximum", "expected"), [(2, 6, set()), (2, 8, {"max"}), (7, 8, {"min"})])
def test_the_quota_rules(tmp_path, minimum, maximum, expected):
    text = scaled_object(
        IN_FLIGHT, minimum=f"minReplicaCount: {minimum}", maximum=f"maxReplicaCount: {maximum}", behavior=WINDOW_600
    )
    found = rules_of(run_lint(tmp_path, text, supply=supply()))
    quota_rules = {rule.split("-")[0] for rule in found if rule.endswith("-over-node-quota")}
    assert quota_rules == expected
    # Without a fleet file the linter knows no quota.
    assert not {rule for rule in rules_of(run_lint(tmp_path, text)) if rule.endswith("node-quota")}


def test_the_quota_findings_say_what_fits_and_what_to_set(tmp_path):
    text = scaled_object(IN_FLIGHT, maximum="maxReplicaCount: 8", behavior=WINDOW_600)
    (finding,) = [f for f in run_lint(tmp_path, text, supply=supply()) if f.rule == "max-replicas-over-node-quota"]
    assert finding.path == "spec.maxReplicaCount"
    assert "FLEET.yaml holds 6 node(s) of 1 GPU(s), so at most 6 replica(s)" in finding.why
    assert "Set the maximum to 6" in finding.fix and "raise the quota to 8 nodes" in finding.fix


def test_the_scale_down_window_is_held_against_the_comeback_time(tmp_path):
    window_500 = "scaleDown:\n  stabilizationWindowSeconds: 500\n"
    text = scaled_object(IN_FLIGHT, maximum="maxReplicaCount: 6", behavior=window_500)
    # 500 s is longer than the 90 s default warmup, shorter than Karpenter's cold comeback and longer
    # than the 455 s a replica takes on the node cluster-autoscaler keeps for 600 s.
    assert "short-scale-down-window" not in rules_of(run_lint(tmp_path, text))
    assert "short-scale-down-window" not in rules_of(run_lint(tmp_path, text, supply=supply()))
    (finding,) = [
        f
        for f in run_lint(tmp_path, text, supply=supply(autoscaler="karpenter"))
        if f.rule == "short-scale-down-window"
    ]
    assert "967 s a removed replica takes to come back on a new node" in finding.why
    assert "at least the warmup (967 s; from FLEET.yaml)" in finding.fix


def test_planner_lint_reads_the_fleet_file(tmp_path, capsys):
    (tmp_path / "so.yaml").write_text(
        scaled_object(IN_FLIGHT, maximum="maxReplicaCount: 9", behavior=WINDOW_600), encoding="utf-8"
    )
    (tmp_path / "fleet.yaml").write_text(json.dumps(KAITO_FLEET), encoding="utf-8")
    status = main(["lint", str(tmp_path / "so.yaml"), "--fleet", str(tmp_path / "fleet.yaml"), "--json"])
    rules = {f["rule"] for f in json.loads(capsys.readouterr().out)["findings"]}
    assert "max-replicas-over-node-quota" in rules and status == 0


def test_a_bad_fleet_file_is_one_line_and_exit_2(tmp_path):
    (tmp_path / "so.yaml").write_text(scaled_object(IN_FLIGHT), encoding="utf-8")
    (tmp_path / "bad.yaml").write_text(textwrap.dedent("nodes:\n  max_nodes: -1\n"), encoding="utf-8")
    bad = subprocess.run(
        [sys.executable, "-m", "planner.cli", "lint", str(tmp_path / "so.yaml"), "--fleet", str(tmp_path / "bad.yaml")],
        capture_output=True,
        text=True,
        check=False,
    )
    assert bad.returncode == 2
    (line,) = bad.stderr.strip().splitlines()
    assert "bad.yaml: nodes.max_nodes: expected an integer >= 0" in line


def test_a_fleet_without_nodes_gives_its_warmup(tmp_path, capsys):
    text = scaled_object(IN_FLIGHT, behavior="scaleDown:\n  stabilizationWindowSeconds: 200\n")
    (tmp_path / "so.yaml").write_text(text, encoding="utf-8")
    (tmp_path / "fleet.yaml").write_text("warmup_s: 240\n", encoding="utf-8")
    main(["lint", str(tmp_path / "so.yaml"), "--fleet", str(tmp_path / "fleet.yaml")])
    assert "shorter than the 240 s a new replica takes" in capsys.readouterr().out


def test_node_pool_settings_feed_the_comeback():
    nodes = NodePoolSpec(gpus_per_node=1, cluster_autoscaler=ClusterAutoscalerSettings(scale_down_unneeded_s=0.0))
    s = ReplicaSupply.from_fleet(FleetSpec(nodes=nodes, warmup_s=60.0, weights_load_s=30.0))
    assert s is not None and s.comeback_s == s.cold_time_to_ready_s == 30.0 + 30.0 + 60.0
