"""Each step kernel of the compiled engine against its reference twin, step by step, bit for bit.

The reference engine's tick is six functions of a :class:`RunState`
(:mod:`planner.simulate.reference`); the fast engine's is the same six as
step kernels on arrays (:mod:`planner.simulate.fast.engine`). Here both run
side by side on small fleets, and after every step of every tick the two
states must be equal: the pods and their batches and queues, the requests'
arrays (compared as bits), the scrapes, the time-series row and the signal;
with a node pool also its nodes, placeholders, Pending and bound pods, the
node autoscaler's clock and both random generators' states.
A difference names the first step that departs, which the whole-run
differential test (``tests/simulate/fast/test_simulate_fast.py``) cannot.

The module docstring of :mod:`planner.simulate.fast` maps each fast function
to its twin; the table is checked to name functions that exist.
"""

from __future__ import annotations

import importlib
import math
import re

import numpy as np
import pytest

from planner.capacity.step_time import output_throughput_tps
from planner.dynamics.cold_start import ClusterAutoscalerSettings, KarpenterSettings
from planner.simulate import fast, reference
from planner.simulate.control import Control
from planner.simulate.fast import compiled, engine
from planner.simulate.fast import fleet as fast_fleet
from planner.simulate.fast import supply as fast_supply
from planner.simulate.fast.metrics import store_arrays
from planner.simulate.fleet import Fleet, FleetSpec
from planner.simulate.replica import RUNNING, ReplicaSpec, RequestState
from planner.simulate.supply import NodePoolSpec
from tests.simulate_helpers import cron_scaled_object, poisson_trace, scaled_object, write_manifest

IN_FLIGHT = "sum(vllm:num_requests_running) + sum(vllm:num_requests_waiting)"
REQUEST_FIELDS = (
    "status",
    "replica",
    "admit_s",
    "first_token_s",
    "done_s",
    "generated",
    "prefill_left_s",
    "preemptions",
)
POD_FIELDS = ("requested_s", "ready_s", "deleted_s", "sigterm_s", "stop_s", "removed_s", "uid", "stall_debt_s")
NODE_FIELDS = ("requested_s", "allocatable_s", "removed_s", "gpus_free", "image_since_s", "empty_since_s")


def _twin_rows() -> list[tuple[str, str]]:
    # (fast function, reference twin) per row of the table in planner.simulate.fast's docstring.
    return re.findall(r"^``([\w.]+)``\s+``([\w.]+)``", fast.__doc__ or "", flags=re.MULTILINE)


def _resolve(dotted: str, package: str = "planner"):
    parts = dotted.split(".")
    for cut in range(len(parts), 0, -1):
        try:
            target = importlib.import_module(".".join([package, *parts[:cut]]))
        except ModuleNotFoundError:
            continue
        for name in parts[cut:]:
            target = getattr(target, name)
        return target
    raise AssertionError(f"{dotted}: no such module under {package}")


def test_the_twin_table_names_functions_that_exist_and_every_step_kernel():
    rows = _twin_rows()
    assert len(rows) >= 25
    for fast_name, twin in rows:
        assert callable(_resolve(fast_name, "planner.simulate.fast")), fast_name
        assert callable(_resolve(twin)), twin
    listed = {fast_name for fast_name, _ in rows}
    steps = {f"engine.{name}" for name in dir(engine) if name.endswith("_step") and name != "room_step"}
    assert steps and steps <= listed


def test_the_ports_of_kubernetes_functions_have_their_twins_names():
    # The table leaves them out: each public function of fast.decision not in it is named as its twin.
    from planner.autoscaler import behavior, horizontal, keda, replica_calculator
    from planner.simulate.fast import decision

    listed = {fast_name.split(".", 1)[1] for fast_name, _ in _twin_rows() if fast_name.startswith("decision.")}
    ports = {
        name
        for name, value in vars(decision).items()
        if not name.startswith("_")
        and getattr(getattr(value, "py_func", None), "__module__", "") == decision.__name__
        and name not in listed
    }
    assert len(ports) >= 10
    for name in sorted(ports):
        assert any(hasattr(module, name) for module in (behavior, horizontal, keda, replica_calculator)), name


def _bits(values: np.ndarray) -> np.ndarray:
    return values.view(np.int64) if values.dtype == np.float64 else values


class Twins:
    """One fleet twice: the reference's RunState and the fast engine's arrays, advanced step by step."""

    def __init__(self, tmp_path, spec: FleetSpec, trace, threshold: float, text: str = ""):
        autoscaler = write_manifest(
            tmp_path, text or scaled_object("chat", IN_FLIGHT, threshold, max_replicas=6, down_window_s=0)
        )
        self.spec = spec
        control = Control(autoscaler, spec.signal_map, spec.hpa_sync_period_s, spec.start_epoch_s)
        self.state = reference.RunState(
            spec, control, RequestState(trace.arrival_s, trace.input_tokens, trace.output_tokens), Fleet(spec)
        )
        prepared = compiled.prepare(autoscaler, spec)
        members, queries, has_range = compiled.pack_members([prepared], 240)
        self.n_ticks = 240
        self.scrape_every = round(spec.scrape_interval_s / spec.tick_s)
        self.group = engine.Group(
            members, np.zeros(1, dtype=np.int64), np.ones(self.n_ticks, dtype=np.bool_), queries, has_range
        )
        self.req = fast_fleet.new_requests(trace.arrival_s, trace.input_tokens, trace.output_tokens)
        self.pods = compiled.fleet_pods(spec, 256, 256 if spec.nodes is not None else 0)
        self.store = compiled.metrics_store(self.n_ticks, 256 * self.n_ticks)
        self.rng = np.random.default_rng(spec.seed)
        self.deployment = compiled.deployment_params(spec)
        self.replica = compiled.replica_params_of(spec)
        replica = spec.replica
        self.capacity_tps = float(
            output_throughput_tps(replica.max_num_seqs, replica.fixed_ms, replica.per_sequence_ms)
        )
        self.run_params = engine.RunParams(
            spec.tick_s,
            self.n_ticks,
            self.scrape_every,
            prepared.initial_replicas,
            prepared.pods_per_tick,
            self.capacity_tps,
        )
        self.scratch = engine.new_scratch(256, len(trace.arrival_s), replica.max_num_seqs, self.group)
        self.outputs = engine.Outputs(
            np.empty((self.n_ticks, 3)),
            np.empty((self.n_ticks, 5), dtype=np.int64),
            np.empty((self.n_ticks + 1, 3)),
            np.zeros(1, dtype=np.int64),
            np.full((1, self.n_ticks), np.nan),
            np.empty((self.n_ticks if spec.nodes is not None else 0, 4), dtype=np.int64),
        )
        for _ in range(prepared.initial_replicas):
            self.state.fleet.add_pod(0.0, warm=True)
            fast_fleet.add_pod(self.pods, 0.0, True, self.rng, self.deployment)
        self.state.spec_replicas = self.spec_replicas = prepared.initial_replicas
        self.next_arrival = 0
        self.n_events = 0
        self.preemptions = 0

    # -- comparisons ------------------------------------------------------------------------------
    def same_pods(self, step: str) -> None:
        ref, pods = self.state.fleet, self.pods
        count = pods.count
        n = int(count[fast_fleet.PODS_CREATED])
        assert n == len(ref.uid), step
        for name in POD_FIELDS:
            assert np.array_equal(
                _bits(getattr(pods, name)[:n]), _bits(np.asarray(getattr(ref, name), dtype=getattr(pods, name).dtype))
            ), f"{step}: {name}"
        assert pods.live[: count[fast_fleet.PODS_LIVE]].tolist() == ref.live(), step
        for p in range(n):
            assert pods.run[p, : pods.run_n[p]].tolist() == ref.running[p], f"{step}: batch of pod {p}"
            assert self._chain(int(pods.wq_head[p]), int(pods.wq_n[p])) == list(ref.waiting[p]), f"{step}: queue {p}"
        gateway = self._chain(int(count[fast_fleet.GATEWAY_HEAD]), int(count[fast_fleet.GATEWAY_QUEUED]))
        assert gateway == list(ref.gateway), step
        assert self.rng.bit_generator.state == ref.rng.bit_generator.state, f"{step}: the fleet's draws"
        if ref.pool is not None:
            self.same_pool(step)

    def same_pool(self, step: str) -> None:
        ref, pods = self.state.fleet, self.pods
        pool, ref_pool = pods.pool, ref.pool
        assert ref_pool is not None
        n_pods = int(pods.count[fast_fleet.PODS_CREATED])
        assert np.array_equal(_bits(pods.bound_s[:n_pods]), _bits(np.asarray(ref.bound_s))), f"{step}: bound_s"
        assert pods.pending[: pods.count[fast_fleet.PODS_PENDING]].tolist() == ref_pool.pending, f"{step}: pending"
        assert pods.bound[: pods.count[fast_fleet.PODS_BOUND]].tolist() == sorted(ref_pool.pod_node), step
        assert pods.node[:n_pods].tolist() == [ref_pool.pod_node.get(p, -1) for p in range(n_pods)], f"{step}: node"
        n = int(pool.count[fast_supply.POOL_CREATED])
        assert n == len(ref_pool.requested_s), f"{step}: nodes"
        for name in NODE_FIELDS:
            fast_values = getattr(pool, name)[:n]
            ref_values = np.asarray(getattr(ref_pool, name), dtype=fast_values.dtype)
            assert np.array_equal(_bits(fast_values), _bits(ref_values)), f"{step}: node {name}"
        assert pool.live[: pool.count[fast_supply.POOL_LIVE]].tolist() == ref_pool.nodes(), f"{step}: live nodes"
        started = ref._supply_started  # the reference starts its placeholders at its first supply step
        assert bool(pool.count[fast_supply.POOL_STARTED]) == started, step
        placeholders = ref_pool.placeholder_node if started else [-1] * self.spec.placeholders
        assert pool.placeholder_node.tolist() == placeholders, f"{step}: placeholders"
        if started:
            assert np.array_equal(pool.placeholder_since_s, ref_pool.placeholder_pending_since_s), step
        clock = (ref_pool.last_scale_up_s, ref_pool.backoff_until_s, ref_pool.batch_opened_s, ref_pool.batch_last_s)
        assert pool.clock_s.tolist() == list(clock), f"{step}: the node autoscaler's clock"
        assert pool.count[fast_supply.POOL_BATCH_SEEN] == ref_pool.batch_seen, step
        assert pool.rng.bit_generator.state == ref_pool.rng.bit_generator.state, f"{step}: the pool's draws"

    def _chain(self, head: int, n: int) -> list[int]:
        out, i = [], head
        for _ in range(n):
            out.append(i)
            i = int(self.req.next_req[i])
        assert i == -1
        return out

    def same_requests(self, step: str) -> None:
        for name in REQUEST_FIELDS:
            ref = getattr(self.state.req, name)
            assert np.array_equal(_bits(getattr(self.req, name)), _bits(ref.astype(getattr(self.req, name).dtype))), (
                f"{step}: {name}"
            )

    def same_serving(self, step: str) -> None:
        n = len(self.state.busy_frac)
        assert np.array_equal(_bits(self.pods.busy_frac[:n]), _bits(self.state.busy_frac)), step
        assert np.array_equal(_bits(self.pods.counters[:n]), _bits(self.state.counters)), step
        assert self.preemptions == self.state.preemptions, step

    def same_store(self, step: str) -> None:
        ref, store = store_arrays(self.state.store), self.store
        n = ref.n_scr
        assert store.counts[engine.STORE_SCRAPES] == n, step
        assert np.array_equal(store.scrape_time_s[:n], ref.scr_t), step
        assert np.array_equal(store.scrape_rows[: n + 1], ref.scr_off), step
        assert np.array_equal(store.existing_rows[: n + 1], ref.ex_off), step
        rows, existing = int(ref.scr_off[-1]), int(ref.ex_off[-1])
        assert np.array_equal(store.sample_pod[:rows], ref.smp_pod), step
        assert np.array_equal(_bits(store.sample_values[:rows]), _bits(ref.smp_val)), step
        assert np.array_equal(store.existing_pod[:existing], ref.ex_pod), step

    # -- one tick, step by step ---------------------------------------------------------------------
    def tick(self, k: int) -> None:
        dt = self.spec.tick_s
        t0_s, t1_s = k * dt, (k + 1) * dt
        state = self.state

        reference.control_step(state, t0_s)
        wanted, agreed = engine.control_step(
            k, t0_s, self.spec_replicas, self.pods, self.store, self.group, self.outputs.wanted, self.scratch
        )
        assert agreed and wanted == state.spec_replicas, f"tick {k}: control"
        if wanted != self.spec_replicas:
            self.n_events = engine.record_event(self.outputs.events, self.n_events, t0_s, self.spec_replicas, wanted)
            self.spec_replicas = wanted
        assert [tuple(row) for row in self.outputs.events[: self.n_events].tolist()] == [
            (float(t), float(a), float(b)) for t, a, b in state.events
        ], f"tick {k}: events"

        reference.fleet_step(state, t0_s)
        engine.fleet_step(self.pods, self.req, self.rng, self.spec_replicas, t0_s, self.deployment, self.scratch)
        self.same_pods(f"tick {k}: fleet")
        self.same_requests(f"tick {k}: fleet")

        arrived = reference.route_step(state, t0_s, t1_s)
        first = self.next_arrival
        self.next_arrival = engine.route_step(
            self.pods, self.req, first, t0_s, t1_s, self.deployment.router, self.scratch.endpoints
        )
        assert range(first, self.next_arrival) == arrived, f"tick {k}: route"
        self.same_pods(f"tick {k}: route")
        self.same_requests(f"tick {k}: route")

        reference.serve_step(state, t0_s)
        preempted = engine.serve_step(self.pods, self.req, t0_s, dt, self.replica, self.scratch)
        assert preempted >= 0
        self.preemptions += preempted
        self.same_pods(f"tick {k}: serve")
        self.same_requests(f"tick {k}: serve")
        self.same_serving(f"tick {k}: serve")

        if (k + 1) % self.scrape_every == 0:
            reference.scrape_step(state, t1_s)
            engine.scrape_step(self.pods, self.req, self.store, t1_s, self.replica)
            self.same_store(f"tick {k}: scrape")

        reference.record_step(state, t1_s, arrived, self.capacity_tps)
        engine.signal_step(k, t1_s, self.store, self.group, self.outputs.signal, self.scratch)
        engine.record_step(
            k,
            t1_s,
            first,
            self.next_arrival,
            self.spec_replicas,
            self.pods,
            self.req,
            self.run_params,
            self.outputs,
            self.scratch.endpoints,
        )
        row = state.rows[-1]
        fast_row = (
            *self.outputs.series_values[k].tolist(),
            *self.outputs.series_counts[k].tolist(),
            float(self.outputs.signal[0, k]),
        )
        assert np.array_equal(np.asarray(fast_row), np.asarray(row, dtype=float), equal_nan=True), f"tick {k}: record"
        if self.spec.nodes is not None:
            assert tuple(self.outputs.supply_counts[k].tolist()) == state.supply_rows[-1], f"tick {k}: supply row"


FLEETS = {
    "least-loaded, fixed warmup": FleetSpec(warmup_s=20.0),
    "round-robin, uniform warmup, drain": FleetSpec(
        warmup_s=20.0,
        warmup_distribution="uniform",
        warmup_spread_s=10.0,
        router="round-robin",
        pre_stop_s=5.0,
        shutdown_timeout_s=20.0,
        seed=7,
    ),
    "small KV cache (preemptions), lognormal warmup": FleetSpec(
        replica=ReplicaSpec(max_num_seqs=8, kv_tokens=2_000),
        warmup_s=10.0,
        warmup_distribution="lognormal",
        warmup_spread_s=5.0,
        initial_replicas=0,
        seed=3,
    ),
    # Five 4,000-token prompts fill the cache but for 20 tokens: their first tokens preempt the newest, mid-prefill.
    "long prompts in 512-token chunks, preempted mid-prefill": FleetSpec(
        replica=ReplicaSpec(max_num_seqs=8, kv_tokens=20_100, prefill_ms_per_token=0.2, max_num_batched_tokens=512),
        warmup_s=10.0,
        seed=9,
    ),
}
PROMPT_TOKENS = {"long prompts in 512-token chunks, preempted mid-prefill": 4_000}


@pytest.mark.parametrize("name", list(FLEETS))
def test_every_step_kernel_matches_its_reference_twin_tick_by_tick(tmp_path, name):
    spec = FLEETS[name]
    # Load that rises, drops and rises again, so pods are created, drained and deleted.
    prompt = PROMPT_TOKENS.get(name, 300)
    trace = poisson_trace(lambda t: 12.0 if 40 <= t < 110 or t >= 170 else 1.0, 230.0, prompt, 160, seed=5)
    twins = Twins(tmp_path, spec, trace, threshold=6)
    req = twins.state.req
    preempted_mid_prefill = 0
    for k in range(twins.n_ticks):
        prefilling = np.flatnonzero((req.status == RUNNING) & (req.prefill_left_s > 0))
        before = req.preemptions[prefilling].copy()
        twins.tick(k)
        preempted_mid_prefill += int((req.preemptions[prefilling] > before).sum())
    if prompt > spec.replica.max_num_batched_tokens:
        assert preempted_mid_prefill > 0
    assert twins.n_events >= 2 and twins.pods.count[fast_fleet.PODS_CREATED] > 2
    assert math.isfinite(twins.req.done_s[0])
    if spec.replica.kv_tokens < 10_000:
        assert twins.preemptions > 0
    if spec.shutdown_timeout_s > 0:
        assert np.isfinite(twins.pods.removed_s).any()  # a drained pod went


def test_the_control_step_reads_cron_triggers_as_the_reference_tick_by_tick(tmp_path):
    # Two-minute windows from a Monday 00:00 UTC (open at minutes 0 and 2, shut at 1 and 3) beside the
    # in-flight trigger, and a Dublin window from 00:02:00 to 00:03:00 overlapping the second: the floor
    # rises and falls while the load trigger asks for more.
    windows = [("*/2 * * * *", "1-59/2 * * * *", "UTC", 3), ("2 0 * * MON", "3 0 * * MON", "Europe/Dublin", 5)]
    text = cron_scaled_object("chat", IN_FLIGHT, 6, windows, max_replicas=8)
    trace = poisson_trace(lambda t: 12.0 if 150 <= t < 200 else 1.0, 230.0, 300, 160, seed=5)
    twins = Twins(tmp_path, FleetSpec(warmup_s=20.0), trace, threshold=6, text=text)
    for k in range(twins.n_ticks):
        twins.tick(k)
    events = [tuple(row) for row in twins.outputs.events[: twins.n_events].tolist()]
    assert events[0] == (0.0, 1.0, 3.0) and (120.0, 3.0, 5.0) in events  # the UTC floor, then Dublin's


NODE_FLEETS = {
    "cluster-autoscaler, 2-GPU nodes, a placeholder, capacity failures": FleetSpec(
        nodes=NodePoolSpec(
            gpus_per_node=2,
            provision_s=20.0,
            provision_distribution="lognormal",
            provision_spread_s=8.0,
            node_init_s=5.0,
            cluster_autoscaler=ClusterAutoscalerSettings(
                scan_interval_s=10.0,
                gpu_pod_scale_up_delay_s=5.0,
                scale_down_unneeded_s=30.0,
                scale_down_delay_after_add_s=0.0,
            ),
            capacity_failure_frac=0.4,
            capacity_retry_s=20.0,
        ),
        image_pull_s=10.0,
        weights_load_s=5.0,
        warmup_s=10.0,
        warmup_distribution="uniform",
        warmup_spread_s=5.0,
        placeholders=1,
        pre_stop_s=5.0,
        shutdown_timeout_s=20.0,
        seed=11,
    ),
    "karpenter, 1-GPU nodes within a quota, an initial node, two placeholders": FleetSpec(
        nodes=NodePoolSpec(
            gpus_per_node=1,
            max_nodes=5,
            initial_nodes=1,
            provision_s=15.0,
            provision_distribution="uniform",
            provision_spread_s=10.0,
            node_init_s=3.0,
            autoscaler="karpenter",
            karpenter=KarpenterSettings(batch_idle_s=2.0, batch_max_s=6.0, consolidate_after_s=15.0),
        ),
        image_pull_s=8.0,
        warmup_s=10.0,
        warmup_distribution="lognormal",
        warmup_spread_s=4.0,
        placeholders=2,
        seed=4,
    ),
}


@pytest.mark.parametrize("name", list(NODE_FLEETS))
def test_every_step_kernel_matches_its_reference_twin_tick_by_tick_with_a_node_pool(tmp_path, name):
    spec = NODE_FLEETS[name]
    # A peak high enough to buy several nodes, so that scaling down empties whole nodes for the node autoscaler.
    trace = poisson_trace(lambda t: 24.0 if 40 <= t < 110 or t >= 170 else 1.0, 230.0, 300, 160, seed=5)
    twins = Twins(tmp_path, spec, trace, threshold=6)
    supply_rows = []
    for k in range(twins.n_ticks):
        twins.tick(k)
        supply_rows.append(twins.state.supply_rows[-1])
    pool = twins.state.fleet.pool
    assert pool is not None and twins.n_events >= 2
    # The node pool did its work: pods waited, nodes were bought and removed, placeholders were preempted.
    _, nodes_provisioning, pods_pending, _ = (max(column) for column in zip(*supply_rows, strict=True))
    assert pods_pending > 0 and nodes_provisioning > 0 and len(pool.requested_s) > 2
    assert any(not math.isnan(t) for t in pool.removed_s)
    assert any(since > 0 for since in pool.placeholder_pending_since_s)
    if spec.nodes is not None and spec.nodes.capacity_failure_frac > 0:
        assert pool.backoff_until_s > 0  # a request failed
    if spec.nodes is not None and spec.nodes.max_nodes is not None:
        assert max(row[0] + row[1] for row in supply_rows) == spec.nodes.max_nodes  # the quota binds
