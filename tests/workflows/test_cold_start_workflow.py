"""planner.workflows.cold_start: a node pool from a cold start's phases, the runs the chapter compares, its tables."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from planner.dynamics.cold_start import KARPENTER, ColdStartPhases, KarpenterSettings
from planner.errors import PlannerInputError
from planner.readers.fleet import fleet_spec_from_mapping, read_fleet
from planner.readers.manifest import load_autoscaler
from planner.readers.trace import read_trace
from planner.simulate import simulate
from planner.simulate.fleet import FleetSpec
from planner.simulate.supply import NodePoolSpec
from planner.workflows.cold_start import (
    LONG_SCALE_DOWN_DELAY_S,
    fleet_phases,
    node_reaction_delay_s,
    placeholder_usd_per_day,
    replica_cold_starts,
    scale_ups_while_loading,
    supply_fleet,
    supply_table,
    supply_variants,
    with_nodes,
    with_scale_down_delay,
)
from tests.conftest import DATA_DIR
from tests.simulate_helpers import scaled_object, steady_trace, write_manifest

KAITO = ColdStartPhases(provision_s=284, node_init_s=126, image_pull_s=101, weights_load_s=260, warmup_s=195)


def _kaito_fleet() -> FleetSpec:
    return supply_fleet(FleetSpec(), KAITO, node_autoscaler="cluster-autoscaler", gpus_per_node=1)


def test_a_fleet_gets_its_node_pool_from_the_phases_and_gives_them_back():
    fleet = _kaito_fleet()
    assert fleet.nodes == NodePoolSpec(gpus_per_node=1, provision_s=284, node_init_s=126)
    assert (fleet.image_pull_s, fleet.weights_load_s, fleet.warmup_s) == (101, 260, 195)
    assert fleet_phases(fleet) == KAITO


def test_a_fleet_with_its_own_node_pool_keeps_it():
    own = fleet_spec_from_mapping(
        {"nodes": {"gpus_per_node": 8, "provision_s": 90, "autoscaler": "karpenter"}, "pod": {"image_pull_s": 30}},
        "FLEET.yaml",
    )
    fleet = supply_fleet(own, KAITO, node_autoscaler="cluster-autoscaler", gpus_per_node=1)
    assert fleet is own and fleet_phases(fleet) == ColdStartPhases(provision_s=90, image_pull_s=30, warmup_s=60)


def test_bad_node_pool_inputs_name_the_parameter_or_the_file():
    with pytest.raises(PlannerInputError, match=r"^node_autoscaler: expected one of cluster-autoscaler, karpenter"):
        supply_fleet(FleetSpec(), KAITO, node_autoscaler="cluster_autoscaler", gpus_per_node=1)
    with pytest.raises(PlannerInputError, match=r"^gpus_per_node: expected a whole number >= 1"):
        supply_fleet(FleetSpec(), KAITO, node_autoscaler="karpenter", gpus_per_node=0)
    big = fleet_spec_from_mapping({"gpus_per_replica": 2}, "FLEET.yaml")
    with pytest.raises(PlannerInputError, match=r"^FLEET\.yaml: gpus_per_replica: 2 GPUs per pod do not fit on a"):
        supply_fleet(big, KAITO, node_autoscaler="karpenter", gpus_per_node=1)
    with pytest.raises(PlannerInputError, match=r"nodes: this fleet has no node pool"):
        fleet_phases(FleetSpec())
    with pytest.raises(PlannerInputError, match=r"nodes\.colour: not a node pool field"):
        with_nodes(_kaito_fleet(), colour=1)


def test_the_next_replica_by_where_it_lands():
    starts = replica_cold_starts(_kaito_fleet())
    assert (starts.new_node_s, starts.free_gpu_s, starts.cached_image_s) == (996.0, 556.0, 455.0)
    karpenter = with_nodes(_kaito_fleet(), autoscaler=KARPENTER)
    assert node_reaction_delay_s(karpenter.nodes) == 1.0 and replica_cold_starts(karpenter).new_node_s == 967.0
    slow_batch = with_nodes(karpenter, karpenter=KarpenterSettings(batch_idle_s=4.0))
    assert replica_cold_starts(slow_batch).new_node_s == 970.0


def test_a_placeholder_costs_its_share_of_a_node_all_day():
    assert placeholder_usd_per_day(_kaito_fleet(), 1) == 4.0 * 24
    eight = dataclasses.replace(_kaito_fleet(), nodes=NodePoolSpec(gpus_per_node=8, usd_per_node_hour=40.0))
    assert placeholder_usd_per_day(eight, 2) == pytest.approx(2 * 40.0 / 8 * 24)
    with pytest.raises(PlannerInputError, match="placeholders"):
        placeholder_usd_per_day(eight, -1)


def test_the_scale_down_delay_goes_to_the_node_autoscaler_in_use():
    ca = with_scale_down_delay(_kaito_fleet(), 120.0).nodes.cluster_autoscaler
    assert (ca.scale_down_unneeded_s, ca.scale_down_delay_after_add_s) == (120.0, 120.0)
    karpenter = with_scale_down_delay(with_nodes(_kaito_fleet(), autoscaler=KARPENTER), 120.0).nodes
    assert karpenter.karpenter.consolidate_after_s == 120.0
    assert karpenter.cluster_autoscaler.scale_down_unneeded_s == 600  # not the node autoscaler in use


def test_the_variants_change_one_thing_each():
    fleet = dataclasses.replace(_kaito_fleet(), placeholders=3)
    variants = supply_variants(fleet, placeholders=2, quota_nodes=4, capacity_failure_frac=0.25, capacity_retry_s=90.0)
    assert list(variants) == [
        "no placeholder",
        "2 placeholders",
        "empty nodes removed at once",
        "empty nodes kept 30 min",
        "quota of 4 nodes",
        "25% of node requests fail",
    ]
    base = variants["no placeholder"]
    assert base.placeholders == 0 and base.nodes == fleet.nodes  # the fleet's own 3 placeholders are not used
    assert variants["2 placeholders"] == dataclasses.replace(base, placeholders=2)
    assert variants["empty nodes kept 30 min"] == with_scale_down_delay(base, LONG_SCALE_DOWN_DELAY_S)
    assert variants["quota of 4 nodes"].nodes.max_nodes == 4
    failing = variants["25% of node requests fail"].nodes
    assert (failing.capacity_failure_frac, failing.capacity_retry_s) == (0.25, 90.0)
    for bad, message in (
        (dict(placeholders=0), "placeholders: expected a whole number >= 1"),
        (dict(quota_nodes=0), "quota_nodes: expected a whole number >= 1"),
        (dict(capacity_failure_frac=1.0), "capacity_failure_frac: expected a fraction above 0 and below 1"),
        (dict(capacity_retry_s=-1.0), "capacity_retry_s must be a finite number >= 0"),
    ):
        options = dict(placeholders=1, quota_nodes=4, capacity_failure_frac=0.5, capacity_retry_s=60.0) | bad
        with pytest.raises(PlannerInputError, match=message):
            supply_variants(fleet, **options)


def test_the_hpa_scales_up_at_every_sync_while_the_first_pods_load():
    # inference-sim issue 1109's 60 s load and 15 s loop, on the lab's fleet and mission four's steady load.
    fleet = dataclasses.replace(read_fleet(DATA_DIR / "fleets" / "lab-8b.yaml"), warmup_s=60.0)
    trace = read_trace(DATA_DIR / "scenarios" / "lab" / "steady.yaml", seed=4)
    run = simulate(trace, load_autoscaler(DATA_DIR / "manifests" / "queue-keda.yaml"), fleet, duration_s=300.0)
    assert scale_ups_while_loading(run, 60.0) == ((15.0, 1, 5), (30.0, 5, 10), (45.0, 10, 20), (60.0, 20, 40))
    assert scale_ups_while_loading(run, 15.0) == ((15.0, 1, 5),)


def test_the_supply_table_reads_each_run(tmp_path):
    autoscaler = write_manifest(tmp_path, scaled_object("chat", "sum(vllm:num_requests_running)", 4, max_replicas=4))
    fleet = dataclasses.replace(
        _kaito_fleet(), nodes=NodePoolSpec(gpus_per_node=2, provision_s=284, node_init_s=126, initial_nodes=1)
    )
    trace = steady_trace(6.0, 1500.0, 100, 400)
    runs = {"as set": simulate(trace, autoscaler, fleet, duration_s=2000.0)}
    table = supply_table(runs, gpus_per_node=2)
    row, run = table.loc["as set"], runs["as set"]
    ready = run.supply.time_to_ready_s
    assert row.next_replica_s == ready[0] and row.ready_max_s == ready.max()
    assert row.ready_p50_s == np.percentile(ready, 50)
    assert row.idle_gpu_hours == pytest.approx(run.supply.node_hours * 2 - run.gpu_hours)
    assert row.peak_ready_replicas == run.timeseries["replicas_ready"].max() <= row.peak_replicas
    no_pool = simulate(trace, autoscaler, FleetSpec(), duration_s=300.0)
    with pytest.raises(PlannerInputError, match="no pool: the run has no node pool"):
        supply_table({"no pool": no_pool}, gpus_per_node=1)
