"""The node pool in the compiled kernels: the fast engine against the reference engine, which is the specification.

With ``nodes:`` set, pods wait Pending for GPUs, cluster-autoscaler or
Karpenter buys nodes (within a quota, with capacity failures that back off,
each draw from the pool's own seeded generator in the reference's order),
placeholders hold warm GPUs and are preempted, images are cached per node,
empty nodes are removed and billed per node. The compiled kernels
(``planner.simulate.fast.supply`` and the supply step of
``planner.simulate.fast.fleet``) must give what the reference gives, bit for
bit: the same scale events, time series (nodes and pods by phase included),
summaries and per-pod times to ready, on generated node pools, on named ones
that exercise each feature, in groups that split (the pool snapshotted), with
arrays grown mid-run, in a sweep over the node pool's grid keys, and on the
public Azure conversation trace.
"""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from planner.dynamics.cold_start import ClusterAutoscalerSettings, KarpenterSettings
from planner.simulate import fast, reference
from planner.simulate.fast import compiled
from planner.simulate.fleet import FleetSpec
from planner.simulate.supply import NodePoolSpec
from planner.simulate.sweep import apply_point, expand_grid, run_chunk
from tests.simulate.fast.test_simulate_fast import QUERIES, assert_same, scenarios
from tests.simulate.fast.test_simulate_fast_compiled import assert_identical, groups, leaves
from tests.simulate_helpers import poisson_trace, scaled_object, write_manifest

IN_FLIGHT = QUERIES[0]
# Load that rises, falls and rises again: pods are created, wait for nodes, drain, and nodes go empty.
WAVES = poisson_trace(lambda t: 14.0 if 60 <= t < 300 or t >= 600 else 1.0, 900.0, 300, 160, seed=5)


def assert_same_supply(ref, fst) -> None:
    """The differential contract, and the node pool's own results exactly."""
    assert_same(ref, fst)
    assert ref.supply is not None and fst.supply is not None
    assert np.array_equal(fst.supply.time_to_ready_s, ref.supply.time_to_ready_s)
    assert fst.supply.summary() == ref.supply.summary()
    assert fst.cost_usd == ref.cost_usd and fst.gpu_hours == ref.gpu_hours


def assert_identical_with_supply(alone, grouped) -> None:
    """Every field of two fast-engine Outcomes bit for bit, the node pool's results included."""
    assert alone.supply is not None and grouped.supply is not None
    for field in dataclasses.fields(alone.supply):
        a, b = getattr(alone.supply, field.name), getattr(grouped.supply, field.name)
        assert np.array_equal(a, b) if isinstance(a, np.ndarray) else a == b, field.name
    assert_identical(dataclasses.replace(alone, supply=None), dataclasses.replace(grouped, supply=None))


@st.composite
def node_pools(draw) -> dict:
    """FleetSpec keys for a node pool, pod phases and placeholders (every setting the supply model reads)."""
    gpus_per_node = draw(st.sampled_from([1, 2, 4]))
    nodes = NodePoolSpec(
        gpus_per_node=gpus_per_node,
        usd_per_node_hour=draw(st.sampled_from([None, 3.5])),
        max_nodes=draw(st.sampled_from([None, 3, 6])),  # at least the 3 pods a minimum can ask for
        initial_nodes=draw(st.sampled_from([None, 0, 1, 3])),
        provision_s=draw(st.sampled_from([0.0, 15.0, 60.0])),
        provision_distribution=draw(st.sampled_from(["fixed", "uniform", "lognormal"])),
        provision_spread_s=draw(st.sampled_from([0.0, 10.0])),
        node_init_s=draw(st.sampled_from([0.0, 10.0])),
        autoscaler=draw(st.sampled_from(["cluster-autoscaler", "karpenter"])),
        cluster_autoscaler=ClusterAutoscalerSettings(
            scan_interval_s=draw(st.sampled_from([0.0, 5.0, 10.0])),
            gpu_pod_scale_up_delay_s=draw(st.sampled_from([0.0, 2.0, 30.0])),
            scale_down_unneeded_s=draw(st.sampled_from([0.0, 30.0, 600.0])),
            scale_down_delay_after_add_s=draw(st.sampled_from([0.0, 20.0, 600.0])),
        ),
        karpenter=KarpenterSettings(
            batch_idle_s=draw(st.sampled_from([0.0, 1.0, 3.0])),
            batch_max_s=draw(st.sampled_from([0.0, 10.0])),
            consolidate_after_s=draw(st.sampled_from([0.0, 15.0, 120.0])),
        ),
        capacity_failure_frac=draw(st.sampled_from([0.0, 0.2, 0.6])),
        capacity_retry_s=draw(st.sampled_from([10.0, 60.0])),
    )
    return {
        "nodes": nodes,
        "gpus_per_replica": draw(st.sampled_from([g for g in (1, 2) if g <= gpus_per_node])),
        "image_pull_s": draw(st.sampled_from([0.0, 10.0, 60.0])),
        "weights_load_s": draw(st.sampled_from([0.0, 10.0])),
        "placeholders": draw(st.integers(0, 2)),
    }


@settings(max_examples=30, suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(scenarios(), node_pools())
def test_fast_equals_reference_on_generated_node_pools(tmp_path, scenario, pool):
    text, fleet, trace = scenario
    if len(trace) == 0:
        return
    fleet = dataclasses.replace(fleet, **pool)
    manifest = write_manifest(tmp_path, text)
    assert fast.covers(manifest, fleet)  # the compiled kernels run it, not the lockstep fallback
    assert_same_supply(reference.simulate(trace, manifest, fleet), fast.simulate(trace, manifest, fleet))


def _fleet(nodes: NodePoolSpec, **changes) -> FleetSpec:
    options = dict(
        image_pull_s=20.0, weights_load_s=10.0, warmup_s=15.0, warmup_distribution="uniform", warmup_spread_s=5.0
    )
    return FleetSpec(nodes=nodes, pre_stop_s=5.0, shutdown_timeout_s=10.0, seed=3, **(options | changes))


QUICK_CA = ClusterAutoscalerSettings(
    scan_interval_s=10.0, gpu_pod_scale_up_delay_s=5.0, scale_down_unneeded_s=60.0, scale_down_delay_after_add_s=30.0
)
NAMED = {
    # cluster-autoscaler's own defaults: 10 s scans, the 30 s GPU buffer, 600 s before a scale-down
    "cluster-autoscaler defaults": _fleet(NodePoolSpec(gpus_per_node=2, provision_s=60.0, node_init_s=20.0)),
    "capacity failures back off": _fleet(
        NodePoolSpec(
            gpus_per_node=1,
            provision_s=30.0,
            provision_distribution="lognormal",
            provision_spread_s=10.0,
            cluster_autoscaler=QUICK_CA,
            capacity_failure_frac=0.5,
            capacity_retry_s=40.0,
        )
    ),
    "karpenter batches and consolidates": _fleet(
        NodePoolSpec(
            gpus_per_node=4,
            provision_s=40.0,
            provision_distribution="uniform",
            provision_spread_s=20.0,
            autoscaler="karpenter",
            karpenter=KarpenterSettings(batch_idle_s=2.0, batch_max_s=10.0, consolidate_after_s=30.0),
        )
    ),
    "placeholders are preempted": _fleet(
        NodePoolSpec(gpus_per_node=1, provision_s=90.0, cluster_autoscaler=QUICK_CA), placeholders=2
    ),
    "quota-bound": _fleet(NodePoolSpec(gpus_per_node=2, max_nodes=2, initial_nodes=1, provision_s=20.0)),
    "two GPUs per pod on 4-GPU nodes": _fleet(
        NodePoolSpec(gpus_per_node=4, provision_s=30.0, cluster_autoscaler=QUICK_CA), gpus_per_replica=2
    ),
}


def _without(spec: FleetSpec, **nodes_changes) -> FleetSpec:
    assert spec.nodes is not None
    return dataclasses.replace(spec, nodes=dataclasses.replace(spec.nodes, **nodes_changes))


@pytest.mark.parametrize("name", list(NAMED))
def test_fast_equals_reference_on_each_feature_of_the_node_pool(tmp_path, name):
    spec = NAMED[name]
    manifest = write_manifest(tmp_path, scaled_object("chat", IN_FLIGHT, 6, max_replicas=8, down_window_s=0))
    assert fast.covers(manifest, spec)
    ref = reference.simulate(WAVES, manifest, spec)
    assert_same_supply(ref, fast.simulate(WAVES, manifest, spec))
    # Each case does what it is named for (so the comparison above covers that branch).
    series = ref.timeseries
    nodes_up = series["nodes_ready"] + series["nodes_provisioning"]
    assert ref.scale_events >= 4 and series["pods_pending"].max() > 0
    if name in ("capacity failures back off", "karpenter batches and consolidates", "two GPUs per pod on 4-GPU nodes"):
        assert nodes_up.max() > nodes_up.iloc[-1]  # empty nodes were removed
    if name == "capacity failures back off":
        lucky = reference.simulate(WAVES, manifest, _without(spec, capacity_failure_frac=0.0))
        assert ref.supply.pending_pod_s > lucky.supply.pending_pod_s
    if name == "karpenter batches and consolidates":
        assert series["nodes_provisioning"].max() >= 1
    if name == "placeholders are preempted":
        # The first new pods take the placeholders' warm GPUs; without them they wait for new nodes.
        without = reference.simulate(WAVES, manifest, dataclasses.replace(spec, placeholders=0))
        cold_s = 90.0 + spec.image_pull_s + spec.weights_load_s
        assert ref.supply.time_to_ready_s[0] < cold_s < without.supply.time_to_ready_s[0]
        assert ref.supply.pending_pod_s < without.supply.pending_pod_s
        assert ref.supply.node_hours > without.supply.node_hours  # what the warm GPUs cost
    if name == "quota-bound":
        assert nodes_up.max() == 2 and series["replicas_requested"].max() > 4  # asked for more than fits


def test_configurations_with_a_node_pool_share_a_fleet_and_each_gets_what_it_gets_alone(tmp_path, monkeypatch):
    # Thresholds and windows that agree at first and part later: the group splits, and the later parts
    # resume from snapshots of the node pool (nodes, placeholders, the autoscaler's clock, its generator).
    spec = NAMED["capacity failures back off"]
    spec = dataclasses.replace(spec, placeholders=1)
    configs = [
        fast.Configuration(
            write_manifest(
                tmp_path,
                scaled_object("chat", IN_FLIGHT, target, max_replicas=8, down_window_s=window),
                f"{target}-{window}.yaml",
            ),
            spec,
        )
        for target in (4, 8, 16)
        for window in (0, 60)
    ]
    keys = {compiled.fleet_key(compiled.prepare(c.autoscaler, c.fleet)) for c in configs}
    assert len(keys) == 1
    seen = leaves(monkeypatch)
    together = fast.simulate_many(WAVES, configs)
    assert len(seen) >= 4 and sum(seen) == len(configs)  # the group split, and every member finished once
    for config, outcome in zip(configs, together, strict=True):
        assert_identical_with_supply(fast.simulate(WAVES, config.autoscaler, config.fleet), outcome)
    for config, outcome in zip(configs[::2], together[::2], strict=True):
        assert_same_supply(reference.simulate(WAVES, config.autoscaler, config.fleet), outcome)


@settings(
    max_examples=15, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow]
)
@given(groups(), node_pools())
def test_a_generated_group_on_a_node_pool_gives_each_member_what_it_gets_alone(tmp_path, scenario, pool):
    fleet, texts, timeseries, trace = scenario
    if len(trace) == 0:
        return
    fleet = dataclasses.replace(fleet, **pool)
    configs = [fast.Configuration(write_manifest(tmp_path, text, f"m{i}.yaml"), fleet) for i, text in enumerate(texts)]
    together = fast.simulate_many(trace, configs, timeseries=timeseries)
    for config, outcome in zip(configs, together, strict=True):
        assert_identical_with_supply(fast.simulate_many(trace, [config], timeseries=timeseries)[0], outcome)
    assert_same_supply(
        reference.simulate(trace, configs[0].autoscaler, fleet), fast.simulate(trace, configs[0].autoscaler, fleet)
    )


def test_node_and_pod_arrays_grown_mid_run_with_parts_waiting_give_the_same_result(tmp_path, monkeypatch):
    spec = NAMED["karpenter batches and consolidates"]
    spec = _without(spec, gpus_per_node=1, initial_nodes=1)
    configs = [
        fast.Configuration(
            write_manifest(
                tmp_path, scaled_object("chat", IN_FLIGHT, target, max_replicas=8, down_window_s=0), f"{target}.yaml"
            ),
            spec,
        )
        for target in (4, 6, 10)
    ]
    alone = [fast.simulate(WAVES, c.autoscaler, c.fleet) for c in configs]
    grown: list[tuple[int, int]] = []
    real_run = compiled.engine.run

    def counted(*args):
        pods = args[1]
        grown.append((len(pods.ready_s), len(pods.pool.requested_s)))
        return real_run(*args)

    monkeypatch.setattr(compiled, "initial_capacity", lambda prepared: (2, 1))
    monkeypatch.setattr(compiled, "initial_node_capacity", lambda prepared: 1)
    monkeypatch.setattr(compiled.engine, "run", counted)
    together = fast.simulate_many(WAVES, configs)
    assert grown[0] == (2, 1) and max(pods for pods, _ in grown) >= 32 and max(nodes for _, nodes in grown) >= 16
    for outcome, expected in zip(together, alone, strict=True):
        assert outcome.scale_events >= 4
        assert_identical_with_supply(expected, outcome)
    assert_same_supply(reference.simulate(WAVES, configs[0].autoscaler, spec), together[0])


def test_a_sweep_over_the_node_pools_grid_keys_gives_the_reference_results(tmp_path):
    spec = dataclasses.replace(NAMED["placeholders are preempted"], placeholders=0)
    manifest = write_manifest(tmp_path, scaled_object("chat", IN_FLIGHT, 6, max_replicas=8, down_window_s=0))
    grid = {
        "target": [4, 8],
        "placeholders": [0, 1],
        "image_pull_s": [5.0, 60.0],
        "provision_s": [30.0],
        "scale_down_unneeded_s": [30.0, 600.0],
    }
    points = expand_grid(grid)
    results = run_chunk(WAVES, manifest, spec, points)
    for point, result in zip(points, results, strict=True):
        config = apply_point(manifest, spec, point)
        ref = reference.simulate(WAVES, config.autoscaler, config.fleet)
        assert (result.slo_attainment_frac, result.cost_usd, result.gpu_hours, result.scale_events) == (
            ref.slo_attainment_frac,
            ref.cost_usd,
            ref.gpu_hours,
            ref.scale_events,
        ), point
    assert len({r.cost_usd for r in results}) > len(results) // 2  # the keys change what the pool costs


def test_without_a_time_series_the_supply_results_are_the_same(tmp_path):
    spec = NAMED["placeholders are preempted"]
    manifest = write_manifest(tmp_path, scaled_object("chat", IN_FLIGHT, 6, max_replicas=8))
    full = fast.simulate_many(WAVES, [fast.Configuration(manifest, spec)])[0]
    lean = fast.simulate_many(WAVES, [fast.Configuration(manifest, spec)], timeseries=False, per_request=False)[0]
    assert full.summary() == lean.summary() and lean.timeseries.empty
    assert {"nodes_ready", "pods_loading"} <= set(lean.timeseries.columns)


def test_fast_equals_reference_on_the_azure_conversation_trace(tmp_path, shared_dir):
    # An hour of the public Azure LLM conversation trace (19,366 requests, real token counts) through a
    # small replica and a low target, so the fleet scales all hour and nodes come and go.
    from planner.readers.trace import read_trace
    from planner.simulate.replica import ReplicaSpec

    trace = read_trace(shared_dir / "traces" / "AzureLLMInferenceTrace_conv.csv")
    assert len(trace) > 19_000
    manifest = write_manifest(tmp_path, scaled_object("chat", IN_FLIGHT, 4, max_replicas=16, down_window_s=60))
    spec = FleetSpec(
        replica=ReplicaSpec(max_num_seqs=16),
        nodes=NodePoolSpec(
            gpus_per_node=2,
            provision_s=60.0,
            provision_distribution="lognormal",
            provision_spread_s=20.0,
            node_init_s=20.0,
            cluster_autoscaler=QUICK_CA,
            capacity_failure_frac=0.2,
            capacity_retry_s=30.0,
        ),
        image_pull_s=30.0,
        weights_load_s=15.0,
        warmup_s=30.0,
        warmup_distribution="lognormal",
        warmup_spread_s=10.0,
        placeholders=1,
        seed=2,
    )
    assert fast.covers(manifest, spec)
    ref = reference.simulate(trace, manifest, spec)
    assert_same_supply(ref, fast.simulate(trace, manifest, spec))
    assert ref.scale_events >= 10 and ref.supply.peak_nodes >= 3 and ref.supply.pending_pod_s > 0


# ---- each supply kernel beside its NodePool twin, on generated pool states -------------------------


@st.composite
def pool_states(draw):
    """A node pool mid-run: nodes in every state, placeholders, Pending pods, the autoscaler's clock."""
    gpus_per_node = draw(st.sampled_from([1, 2, 4]))
    gpus_per_pod = draw(st.sampled_from([g for g in (1, 2) if g <= gpus_per_node]))
    now_s = float(draw(st.integers(0, 40)) * 5)
    nodes = []
    for _ in range(draw(st.integers(0, 7))):
        requested_s = float(draw(st.integers(0, now_s // 5)) * 5)
        allocatable_s = requested_s + draw(st.sampled_from([0.0, 10.0, 60.0]))
        removed = draw(st.booleans()) and allocatable_s <= now_s
        free = draw(st.integers(0, gpus_per_node // gpus_per_pod)) * gpus_per_pod + gpus_per_node % gpus_per_pod
        empty = free == gpus_per_node
        nodes.append(
            (
                requested_s,
                allocatable_s,
                float(draw(st.integers(int(allocatable_s), int(max(allocatable_s, now_s))))) if removed else np.nan,
                free,
                draw(st.sampled_from([np.inf, requested_s, allocatable_s + 7.0])),
                float(draw(st.integers(int(requested_s), int(max(requested_s, now_s))))) if empty else np.inf,
            )
        )
    live = [n for n, node in enumerate(nodes) if np.isnan(node[2])]
    placeholders = [
        (draw(st.sampled_from([-1, *live])), float(draw(st.integers(0, now_s // 5)) * 5))
        for _ in range(draw(st.integers(0, 3)))
    ]
    pending_since_s = sorted(float(draw(st.integers(0, now_s // 5)) * 5) for _ in range(draw(st.integers(0, 5))))
    nodes_spec = NodePoolSpec(
        gpus_per_node=gpus_per_node,
        max_nodes=draw(st.sampled_from([None, len(live), len(live) + 2])),
        provision_s=draw(st.sampled_from([0.0, 30.0])),
        provision_distribution=draw(st.sampled_from(["fixed", "uniform", "lognormal"])),
        provision_spread_s=10.0,
        node_init_s=draw(st.sampled_from([0.0, 5.0])),
        autoscaler=draw(st.sampled_from(["cluster-autoscaler", "karpenter"])),
        cluster_autoscaler=ClusterAutoscalerSettings(
            scan_interval_s=draw(st.sampled_from([0.0, 5.0, 10.0])),
            gpu_pod_scale_up_delay_s=draw(st.sampled_from([0.0, 10.0, 30.0])),
            scale_down_unneeded_s=draw(st.sampled_from([0.0, 20.0])),
            scale_down_delay_after_add_s=draw(st.sampled_from([0.0, 20.0])),
        ),
        karpenter=KarpenterSettings(
            batch_idle_s=draw(st.sampled_from([0.0, 5.0])),
            batch_max_s=draw(st.sampled_from([5.0, 20.0])),
            consolidate_after_s=draw(st.sampled_from([0.0, 10.0])),
        ),
        capacity_failure_frac=draw(st.sampled_from([0.0, 0.5])),
        capacity_retry_s=30.0,
    )
    batch_open = draw(st.booleans())
    clock_s = (
        draw(st.sampled_from([-np.inf, now_s - 10.0, now_s])),  # last scale-up
        draw(st.sampled_from([-np.inf, now_s, now_s + 10.0])),  # backoff until
        now_s - 10.0 if batch_open else np.inf,  # batch opened
        now_s - 5.0 if batch_open else np.inf,  # batch last grew
    )
    batch_seen = draw(st.integers(1, 4)) if batch_open else 0
    spec = FleetSpec(
        nodes=nodes_spec,
        gpus_per_replica=gpus_per_pod,
        image_pull_s=5.0,
        placeholders=len(placeholders),
    )
    return spec, now_s, nodes, placeholders, pending_since_s, clock_s, batch_seen, draw(st.integers(0, 999))


class PoolTwins:
    """One node pool state twice: the reference's NodePool and the kernels' arrays."""

    def __init__(self, state):
        from planner.simulate.supply import NodePool

        spec, self.now_s, nodes, placeholders, pending_since_s, clock_s, batch_seen, seed = state
        self.spec = spec
        self.params = compiled.node_pool_params(spec)
        ref = NodePool(spec.nodes, spec.gpus_per_replica, np.random.default_rng(seed))
        columns = list(zip(*nodes, strict=True)) if nodes else [[]] * 6
        ref.requested_s, ref.allocatable_s, ref.removed_s, ref.gpus_free, ref.image_since_s, ref.empty_since_s = (
            [float(v) if k != 3 else int(v) for v in column] for k, column in enumerate(columns)
        )
        ref.placeholder_node = [node for node, _ in placeholders]
        ref.placeholder_pending_since_s = [since for _, since in placeholders]
        ref.pending = list(range(len(pending_since_s)))
        ref.pending_since_s = dict(enumerate(pending_since_s))
        ref.last_scale_up_s, ref.backoff_until_s, ref.batch_opened_s, ref.batch_last_s = clock_s
        ref.batch_seen = batch_seen
        self.ref = ref
        from planner.simulate.fast import supply

        pool = supply.new_node_pool(len(nodes) + 64, len(placeholders), np.random.default_rng(seed))
        for name, column in zip(NODE_COLUMNS, columns, strict=True):
            getattr(pool, name)[: len(column)] = column
        live = ref.nodes()
        pool.live[: len(live)] = live
        pool.count[supply.POOL_CREATED], pool.count[supply.POOL_LIVE] = len(nodes), len(live)
        pool.placeholder_node[:] = ref.placeholder_node
        pool.placeholder_since_s[:] = ref.placeholder_pending_since_s
        pool.clock_s[:] = clock_s
        pool.count[supply.POOL_BATCH_SEEN] = batch_seen
        self.pool = pool
        self.pending = np.arange(len(pending_since_s), dtype=np.int64)
        self.requested_s = np.asarray(pending_since_s, dtype=float)

    def same(self, step: str) -> None:
        from planner.simulate.fast import supply

        ref, pool = self.ref, self.pool
        n = int(pool.count[supply.POOL_CREATED])
        assert n == len(ref.requested_s), step
        for name in NODE_COLUMNS:
            fast_values = getattr(pool, name)[:n]
            assert np.array_equal(fast_values, np.asarray(getattr(ref, name), dtype=fast_values.dtype), equal_nan=True)
        assert pool.live[: pool.count[supply.POOL_LIVE]].tolist() == ref.nodes(), step
        assert pool.placeholder_node.tolist() == ref.placeholder_node, step
        assert pool.placeholder_since_s.tolist() == ref.placeholder_pending_since_s, step
        clock = [ref.last_scale_up_s, ref.backoff_until_s, ref.batch_opened_s, ref.batch_last_s]
        assert pool.clock_s.tolist() == clock and pool.count[supply.POOL_BATCH_SEEN] == ref.batch_seen, step
        assert pool.rng.bit_generator.state == ref.rng.bit_generator.state, step


NODE_COLUMNS = ("requested_s", "allocatable_s", "removed_s", "gpus_free", "image_since_s", "empty_since_s")


@settings(max_examples=300, suppress_health_check=[HealthCheck.too_slow])
@given(pool_states())
def test_each_supply_kernel_equals_its_node_pool_twin_on_generated_states(state):
    from planner.simulate.fast import supply

    twins = PoolTwins(state)
    ref, pool, params, now_s = twins.ref, twins.pool, twins.params, twins.now_s
    gpus_per_pod = twins.spec.gpus_per_replica
    free = ref._free_node(now_s)
    assert supply.free_node(pool, now_s, gpus_per_pod) == (-1 if free is None else free)
    assert supply.upcoming_pods(pool, now_s, gpus_per_pod) == ref._upcoming_pods(now_s)
    assert supply.node_counts(pool, now_s) == ref.counts(now_s)
    waiting = ref._waiting_for_nodes()
    delay_s = twins.spec.nodes.cluster_autoscaler.gpu_pod_scale_up_delay_s
    old_enough = sum(1 for since in waiting if now_s - since >= delay_s - 1e-9)
    assert supply.waiting_for_nodes(pool, now_s, twins.pending, len(twins.pending), twins.requested_s, delay_s) == (
        len(waiting),
        old_enough,
    )
    preempted = ref._preempt_placeholder(now_s)
    assert supply.preempt_placeholder(pool, now_s, params) == (-1 if preempted is None else preempted)
    twins.same("preempt a placeholder")
    ref._bind_placeholders(now_s)
    supply.bind_placeholders(pool, now_s, params)
    twins.same("bind placeholders")
    ref.autoscale(now_s)
    assert supply.autoscale(pool, now_s, params, twins.pending, len(twins.pending), twins.requested_s) == 0
    twins.same("autoscale")
    ref._buy(3, now_s + 5.0)
    assert supply.buy(pool, 3, now_s + 5.0, params) == 0
    twins.same("buy")
    ref._remove_empty(now_s + 30.0, 10.0)
    supply.remove_empty(pool, now_s + 30.0, 10.0, params)
    twins.same("remove empty nodes")
    assert supply.add_node(pool, now_s + 40.0, False, params) == ref.add_node(now_s + 40.0)
    twins.same("add a node")


@pytest.mark.parametrize("warm_nodes", [True, False])
def test_placeholders_start_on_free_gpus_then_on_warm_nodes_within_the_quota(warm_nodes):
    from planner.simulate.fast import supply

    nodes = NodePoolSpec(gpus_per_node=2, max_nodes=2, initial_nodes=None if warm_nodes else 1)
    spec = FleetSpec(nodes=nodes, placeholders=5)
    state = (spec, 0.0, [(0.0, 0.0, np.nan, 1, 0.0, np.inf)], [(-1, 0.0)] * 5, [], (-np.inf,) * 2 + (np.inf,) * 2, 0, 1)
    twins = PoolTwins(state)
    twins.ref.placeholder_node, twins.ref.placeholder_pending_since_s = [], []
    twins.pool.placeholder_node[:] = 0
    twins.ref.add_placeholders(5, 0.0, warm_nodes=warm_nodes)
    assert supply.add_placeholders(twins.pool, 0.0, twins.params) == 0
    twins.same("start the placeholders")
    held = [node for node in twins.ref.placeholder_node if node >= 0]
    assert len(held) == (3 if warm_nodes else 1)  # a free GPU, then one warm node of two GPUs, then the quota
