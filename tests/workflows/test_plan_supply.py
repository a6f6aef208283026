"""``planner plan`` with a node pool: warm spare GPUs against a higher floor, node-autoscaler settings, the emitted
placeholders."""

from __future__ import annotations

import json

import pytest
import yaml

from planner.cli import main
from planner.errors import PlannerInputError
from planner.manifests.generate import PLACEHOLDER_PRIORITY, ScalingPlan, generate_manifests
from planner.manifests.schema import schema_errors
from planner.readers.fleet import read_fleet
from planner.simulate.fleet import FleetSpec
from planner.workflows.plan import check_plan_grid, default_grid, node_pool_changes
from tests.cli.test_cli_plan import _check_rules
from tests.conftest import DATA_DIR, REPO_ROOT

PLAN_DATA = REPO_ROOT / "tests" / "data" / "plan"
NODES_FLEET = PLAN_DATA / "slow-replica-nodes.yaml"
CURRENT = DATA_DIR / "manifests" / "plan_current" / "llama.yaml"
HALF_HOUR = DATA_DIR / "scenarios" / "plan_half_hour.yaml"
SUPPLY_GRID = {
    "target": [48],
    "min_replicas": [1, 2],
    "placeholders": [0, 2],
    "scale_down_unneeded_s": [60, 600],
}


@pytest.fixture(scope="module")
def planned(tmp_path_factory):
    folder = tmp_path_factory.mktemp("plan")
    grid = folder / "grid.yaml"
    grid.write_text(yaml.safe_dump(SUPPLY_GRID), encoding="utf-8")
    argv = ["plan", "--trace", str(HALF_HOUR), "--manifest", str(CURRENT), "--fleet", str(NODES_FLEET)]
    argv += ["--grid", str(grid), "--concurrency-target", "48", "--attainment-goal", "0.9", "--json"]
    argv += ["--out", str(folder / "out")]
    return argv, folder / "out"


def test_the_plan_weighs_warm_spares_against_a_higher_floor(planned, capsys):
    argv, out = planned
    assert main(argv) == 0
    plan = json.loads(capsys.readouterr().out)
    _check_rules(plan)
    rows = plan["configurations"]
    assert len(rows) == 8 and all("node_hours_per_week" in r and "time_to_ready_p95_s" in r for r in rows)
    # A placeholder's node is up: a replica that preempts it skips the node's provisioning, so the
    # slowest cold starts get shorter at every other setting.
    by_values = {tuple(sorted(r["values"].items())): r for r in rows}
    for values, row in by_values.items():
        settings = dict(values)
        if settings["placeholders"] == 2:
            without = by_values[tuple(sorted((settings | {"placeholders": 0}).items()))]
            assert row["time_to_ready_p95_s"] < without["time_to_ready_p95_s"]
    # On this half hour of growing traffic only a floor of 2 with 2 warm spares meets 90 %.
    assert plan["case"] == "current-misses"
    assert plan["recommended"]["values"] == {
        "target": 48,
        "min_replicas": 2,
        "placeholders": 2,
        "scale_down_unneeded_s": 60,
    }
    assert plan["node_pool_changes"] == [
        "cluster-autoscaler: --scale-down-unneeded-time=60s (the fleet file has 600s; it applies to every node group)"
    ]
    placeholders = list(yaml.safe_load_all(plan["placeholders"]))
    assert [d["kind"] for d in placeholders] == ["PriorityClass", "Deployment"]
    assert placeholders[1]["spec"]["replicas"] == 2
    assert sorted(p.name for p in out.iterdir()) == [
        "deployment-patch.yaml",
        "gpu-placeholders.yaml",
        "patched-llama.yaml",
        "scaledobject.yaml",
    ]
    assert (out / "gpu-placeholders.yaml").read_text(encoding="utf-8") == plan["placeholders"]


def test_the_placeholder_manifests_are_valid_and_hold_one_replicas_gpus():
    plan = ScalingPlan("llama", 40, 240, 4096, 50, 8, namespace="llm", placeholders=3, gpus_per_replica=2)
    priority_class, deployment = generate_manifests(plan).placeholders
    for manifest in (priority_class, deployment):
        assert schema_errors(manifest.document) == []
    assert priority_class.document["value"] == PLACEHOLDER_PRIORITY < 0
    assert priority_class.document["preemptionPolicy"] == "Never"
    pod = deployment.document["spec"]["template"]["spec"]
    assert deployment.document["spec"]["replicas"] == 3
    assert pod["priorityClassName"] == priority_class.document["metadata"]["name"]
    assert pod["containers"][0]["resources"]["requests"] == {"nvidia.com/gpu": 2}
    assert generate_manifests(ScalingPlan("llama", 40, 240, 4096, 50, 8)).placeholders == ()


@pytest.mark.parametrize(
    ("grid", "fleet", "message"),
    [
        ({"placeholders": [0, 1]}, FleetSpec(), "grid: placeholders: needs a fleet file with a nodes: section"),
        ({"image_pull_s": [10]}, None, "grid: image_pull_s: needs a fleet file with a nodes: section"),
        (
            {"consolidate_after_s": [0, 300]},
            read_fleet(NODES_FLEET),
            "grid: consolidate_after_s: a karpenter setting, but the fleet's node pool uses cluster-autoscaler",
        ),
        ({"placeholders": [0.5]}, read_fleet(NODES_FLEET), "grid: placeholders: expected a whole number >= 0"),
    ],
)
def test_supply_keys_the_plan_cannot_act_on_are_refused(grid, fleet, message):
    with pytest.raises(PlannerInputError, match=message):
        check_plan_grid(grid, fleet)


def test_a_supply_key_without_nodes_exits_2_with_one_line(tmp_path, capsys):
    grid = tmp_path / "grid.yaml"
    grid.write_text("placeholders: [0, 1]\n", encoding="utf-8")
    argv = ["plan", "--trace", str(HALF_HOUR), "--manifest", str(CURRENT), "--grid", str(grid)]
    status = main([*argv, "--concurrency-target", "48"])
    assert status == 2
    assert (
        capsys.readouterr()
        .err.strip()
        .endswith("grid: placeholders: needs a fleet file with a nodes: section (the node pool it changes)")
    )


def test_node_pool_changes_name_the_setting_and_where_it_lives():
    fleet = read_fleet(NODES_FLEET)
    assert node_pool_changes({"scale_down_unneeded_s": 600, "image_pull_s": 101}, fleet) == ()
    (pull,) = node_pool_changes({"image_pull_s": 15}, fleet)
    assert pull.startswith("image pull of 15 s on a node without the image (the fleet file has 101 s)")
    assert node_pool_changes({"placeholders": 2}, FleetSpec()) == ()


def test_the_default_grid_offers_warm_spares_only_when_asked():
    assert "placeholders" not in default_grid(40.0)
    assert default_grid(40.0, placeholders=(0, 1))["placeholders"] == [0, 1]


def test_planner_manifests_writes_placeholders_that_lint_clean(tmp_path, capsys):
    argv = ["manifests", "--warmup-s", "240", "--max-tokens", "4096", "--itl-ms", "50", "--max-replicas", "8"]
    argv += ["--target", "llama", "--concurrency-target", "40", "--namespace", "llm"]
    assert main([*argv, "--placeholders", "2", "--gpus-per-replica", "4", "--out", str(tmp_path)]) == 0
    names = sorted(p.name for p in tmp_path.iterdir())
    assert "llama-gpu-placeholder.yaml" in names and "llama-gpu-placeholder-priorityclass.yaml" in names
    deployment = yaml.safe_load((tmp_path / "llama-gpu-placeholder.yaml").read_text(encoding="utf-8"))
    pod = deployment["spec"]["template"]["spec"]
    assert deployment["spec"]["replicas"] == 2 and pod["containers"][0]["resources"]["limits"] == {"nvidia.com/gpu": 4}
    capsys.readouterr()
    assert main(["lint", str(tmp_path), "--json"]) == 0
    findings = json.loads(capsys.readouterr().out)["findings"]
    assert not [f for f in findings if f["severity"] == "error"]
    assert main([*argv, "--placeholders", "-1"]) == 2


def test_the_plan_fleet_takes_the_node_pool_and_phases_of_a_fleet_file():
    from planner.workflows.plan import plan_fleet, supply_text

    nodes_fleet = read_fleet(NODES_FLEET)
    fit = type("Fit", (), {"fixed_ms": 24.0, "per_sequence_ms": 1.0})()
    thresholds = type("Thresholds", (), {"tpot_fit": fit})()
    options = dict(
        kv_tokens=200_000, max_num_seqs=64, warmup_s=90.0, usd_per_gpu_hour=2.5, gpus_per_replica=1, ttft_slo_s=2.0
    )
    without = plan_fleet(thresholds, **options)
    fleet = plan_fleet(thresholds, **options, supply_from=nodes_fleet)
    assert without.nodes is None and without.warmup_s == 90.0
    assert "always there" in supply_text(without)
    assert (fleet.nodes, fleet.image_pull_s, fleet.weights_load_s, fleet.warmup_s) == (nodes_fleet.nodes, 101, 60, 120)
    assert fleet.replica == without.replica  # the replica still comes from the load test
    text = supply_text(fleet)
    assert "nodes of 1 GPU bought by cluster-autoscaler (at most 12 nodes)" in text
    assert "Ready 721 s after it is requested, one on a node that is up with the image 180 s" in text
    assert text.startswith("The GPUs come from slow-replica-nodes.yaml's node pool")
