"""The compiled engine's Python side: configurations into arrays, the group driver, the Outcomes.

:func:`prepare` compiles what the kernels need from an autoscaler and a
fleet (the decision tables, the queries as code) or raises
:class:`NotCompilable`. :func:`simulate_group` runs configurations that share
a fleet (:func:`fleet_key`) through :func:`planner.simulate.fast.engine.run`
together:

* the group starts as one; the kernel simulates its fleet once and asks every
  member's controller on each control tick;
* when the members' decisions differ, the kernel returns, the members are split
  by what they decided, and every part but the first is kept on a stack with a
  snapshot of the fleet at that point, to be resumed once the first part has run
  to the end (last in, first out);
* a snapshot copies little: requests that finished before the split never change
  again, requests that had not arrived are set when they arrive, and the pods,
  the scrapes and the time series up to the split are what every later path
  starts from, so only the pods created so far (the rows of pods not yet
  created are blank in every path), the node pool (its nodes, placeholders,
  autoscaler clock and generator), the requests in flight and a few counters
  are copied. The scrapes, the time series and the events are shared arrays
  whose prefix up to the split no path after it overwrites.

A configuration simulated in a group gets exactly the result it gets alone
(``tests/simulate/fast/test_simulate_fast.py`` holds the engine to the reference either way);
the work saved is the fleet simulated once for all configurations that agree.
The Outcome is built with the same functions as the reference engine's.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import lru_cache

import numpy as np
import pandas as pd

from planner.autoscaler.cron_scaler import CronScaler, cron_reading_runs
from planner.capacity.step_time import output_throughput_tps
from planner.dynamics.cold_start import CLUSTER_AUTOSCALER
from planner.simulate.control import Control
from planner.simulate.fast import decision, engine, fleet, metrics, supply
from planner.simulate.fast.outcome import request_summary
from planner.simulate.fast.replica import ReplicaParams
from planner.simulate.fleet import ROUND_ROBIN, FleetSpec
from planner.simulate.outcome import Outcome, count_flaps
from planner.simulate.reference import _check_cadence, _check_node_quota
from planner.simulate.replica import DONE
from planner.simulate.supply import NodePoolSpec, SupplyOutcome

__all__ = [
    "NotCompilable",
    "Prepared",
    "fleet_key",
    "fleet_pods",
    "node_pool_params",
    "prepare",
    "simulate_group",
    "simulate_prepared",
]

TIMESERIES_COLUMNS = [
    "t_s",
    "demand_tps",
    "ready_capacity_tps",
    "running",
    "waiting",
    "replicas_requested",
    "replicas_ready",
    "replicas_live",
    "signal",
]
# With a node pool, after those (Outcome.timeseries, engine.SUPPLY_* order).
SUPPLY_COLUMNS = ["nodes_ready", "nodes_provisioning", "pods_pending", "pods_loading"]
_WARMUP_KINDS = {"fixed": fleet.WARMUP_FIXED, "uniform": fleet.WARMUP_UNIFORM, "lognormal": fleet.WARMUP_LOGNORMAL}
_DURATION_KINDS = {
    "fixed": supply.DURATION_FIXED,
    "uniform": supply.DURATION_UNIFORM,
    "lognormal": supply.DURATION_LOGNORMAL,
}
# Pods' and NodePool's fields that are arrays (a snapshot copies them; Pods.pool and NodePool.rng are not).
_POD_ARRAYS = tuple(name for name in fleet.Pods._fields if name != "pool")
_POOL_ARRAYS = tuple(name for name in supply.NodePool._fields if name != "rng")
# The request fields a run changes (the rest is the trace).
_REQUEST_STATE = (
    "status",
    "replica",
    "admit_s",
    "first_token_s",
    "done_s",
    "generated",
    "prefill_left_s",
    "preemptions",
    "next_req",
)


class NotCompilable(Exception):
    """The configuration uses something the kernels do not cover; the lockstep engine runs it."""


@dataclass(frozen=True)
class Prepared:
    """One configuration, compiled: its controller as tables, its queries as code, its cadence."""

    spec: FleetSpec
    control: Control
    compiled_control: decision.CompiledControl
    queries: tuple[metrics.CompiledQuery, ...]
    query_slots: tuple[int, ...]  # the decision row each query fills (its trigger's or metric's position)
    n_slots: int  # the rows the decision reads: triggers (a ScaledObject) or metrics (an HPA)
    cron: tuple[tuple[int, CronScaler], ...]  # (row, scaler) of each cron trigger, which reads no query
    signal_query: int  # which of queries the signal column shows, -1 for none
    signal_kind: int  # 0 KEDA, 1 an HPA Pods metric (averaged over pods), 2 an HPA Object/External metric
    initial_replicas: int
    max_replicas: int
    pods_per_tick: int  # the most pods one scale-up can add: the largest count the controller can write


def prepare(autoscaler, spec: FleetSpec) -> Prepared:
    """Compile a configuration for the kernels.

    Raises
    ------
    PlannerInputError
        What the reference engine refuses (an uninterpretable query, a polling
        interval that is not whole ticks), with the same message.
    NotCompilable
        What the kernels do not cover.
    """
    control = Control(autoscaler, spec.signal_map, spec.hpa_sync_period_s, spec.start_epoch_s)
    _check_cadence(control, spec)
    _check_node_quota(control, spec)
    try:
        compiled_control = decision.compile_control(control)
        cron: tuple[tuple[int, CronScaler], ...] = ()
        if control.keda is not None:
            ordered = list(control.queries.items())
            parsed = [query for _, query in ordered]
            signal_query = [index for index, _ in ordered].index(min(control.queries)) if ordered else -1
            signal_kind = 0
            triggers = [t.index for t in control.keda.so.triggers]
            slots = tuple(triggers.index(index) for index, _ in ordered)
            cron = tuple((triggers.index(index), scaler) for index, scaler in control.keda.cron_scalers.items())
        else:
            parsed = [query for _, query in control.metric_queries]
            signal_query = 0 if parsed else -1
            signal_kind = 1 if control.metric_queries and control.metric_queries[0][0] == "Pods" else 2
            slots = tuple(range(len(parsed)))
        compiled = tuple(metrics.compile_query(query) for query in parsed)
    except (decision.NotCompilable, metrics.NotCompilable) as error:
        # What the kernels do not port (a formula beyond arithmetic, max and min; a subquery of per-pod series).
        raise NotCompilable(str(error)) from None
    initial = spec.initial_replicas if spec.initial_replicas is not None else control.min_replicas
    c = compiled_control
    pods_per_tick = max(
        c.max_replicas, c.min_replicas, c.keda_min_replicas, c.idle_replicas, c.fallback_replicas, int(initial), 1
    )
    return Prepared(
        spec,
        control,
        compiled_control,
        compiled,
        slots,
        int(compiled_control.n_queries),
        cron,
        signal_query,
        signal_kind,
        int(initial),
        int(control.max_replicas),
        int(pods_per_tick),
    )


def fleet_key(prepared: Prepared) -> tuple:
    """What must be equal for configurations to share a fleet: every fleet parameter and the initial count.

    The HPA sync period and the signal map belong to the controller, so they may differ.
    """
    spec = prepared.spec
    return (dataclasses.replace(spec, hpa_sync_period_s=spec.tick_s, signals=()), prepared.initial_replicas)


def initial_capacity(prepared: Prepared) -> tuple[int, int]:
    """Room made at first: pods over the whole run, and scraped pods per scrape.

    A run that needs more is paused at a tick start, its arrays grown four
    times, and resumed, so these only set how often that happens.
    """
    return (max(64, 4 * (prepared.max_replicas + prepared.initial_replicas)), prepared.max_replicas + 4)


def initial_node_capacity(prepared: Prepared) -> int:
    """Room made at first for nodes over the whole run (0 without a node pool).

    It holds the initial nodes, the warm nodes the initial pods and the
    placeholders may need, and a tick's purchases; a run that needs more is
    paused at a tick start, its arrays grown four times, and resumed.
    """
    spec = prepared.spec
    if spec.nodes is None:
        return 0
    start = (spec.nodes.initial_nodes or 0) + prepared.initial_replicas + 2 * spec.placeholders
    return max(16, 4 * (start + prepared.pods_per_tick))


@lru_cache(maxsize=64)
def _every(period_s: float, tick_s: float) -> int:
    # Control.is_due: due on tick k when round(k * tick / tick) % max(round(period / tick), 1) == 0.
    return max(round(period_s / tick_s), 1)


def _concatenate(compiled: Sequence[metrics.CompiledQuery]) -> engine.Queries:
    # One code array and one constants array with offsets, so the loop takes any number of queries.
    codes = [c.code for c in compiled]
    consts = [c.consts for c in compiled]
    code_off = np.zeros(len(codes) + 1, dtype=np.int64)
    consts_off = np.zeros(len(consts) + 1, dtype=np.int64)
    for m, (code, const) in enumerate(zip(codes, consts, strict=True)):
        code_off[m + 1] = code_off[m] + len(code)
        consts_off[m + 1] = consts_off[m] + len(const)
    width = codes[0].shape[1] if codes else 3
    code = np.concatenate(codes) if codes else np.zeros((0, width), dtype=np.int64)
    const = np.concatenate(consts) if consts else np.zeros(0)
    return engine.Queries(
        np.ascontiguousarray(code, dtype=np.int64), code_off, np.ascontiguousarray(const, dtype=float), consts_off
    )


@lru_cache(maxsize=256)
def cron_runs(
    scaler: CronScaler, start_epoch_s: float, tick_s: float, n_ticks: int
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """A cron trigger's readings over a run as arrays (:func:`planner.autoscaler.cron_scaler.cron_reading_runs`).

    Returns
    -------
    first_tick : numpy.ndarray of int64
        Each run's first tick, ascending from 0.
    state : numpy.ndarray of int64
        Each run's ``decision.CRON_INACTIVE``, ``CRON_ACTIVE`` or ``CRON_FAILED``.
    value : numpy.ndarray of float64
        Each run's value: ``desiredReplicas`` in the window, else 0. [replicas]
    """
    runs = cron_reading_runs(scaler, start_epoch_s, tick_s, n_ticks)
    first_tick = np.array([k for k, _ in runs], dtype=np.int64)
    state = np.array(
        [
            decision.CRON_FAILED
            if reading.error is not None
            else decision.CRON_ACTIVE
            if reading.active
            else decision.CRON_INACTIVE
            for _, reading in runs
        ],
        dtype=np.int64,
    )
    value = np.array([reading.value for _, reading in runs], dtype=float)
    return first_tick, state, value


def pack_members(group: Sequence[Prepared], n_ticks: int) -> tuple[engine.Members, engine.Queries, np.ndarray]:
    """The group's controls as :data:`planner.simulate.fast.engine.Members`, and its distinct queries.

    ``n_ticks`` is the run's length: each member's cron triggers are read
    ahead over it (:func:`cron_runs`), from the clock alone.

    Returns
    -------
    members : Members
    queries : Queries
        The distinct queries of all members, as code (see :func:`_concatenate`).
    query_has_range : numpy.ndarray of bool
    """
    distinct: dict[tuple, int] = {}
    unique: list[metrics.CompiledQuery] = []
    query_ids = []
    for prepared in group:
        ids = []
        for query in prepared.queries:
            key = (query.code.tobytes(), query.consts.tobytes())
            if key not in distinct:
                distinct[key] = len(unique)
                unique.append(query)
            ids.append(distinct[key])
        query_ids.append(ids)
    n = len(group)
    most = max((p.n_slots for p in group), default=0)
    query_of = np.full((n, max(most, 1)), -1, dtype=np.int64)
    cron_slots = np.zeros((n, max(most, 1), 2), dtype=np.int64)  # an empty range: the slot reads its query
    cron_parts: list[tuple[np.ndarray, np.ndarray, np.ndarray]] = []
    cron_at = 0
    config_i = np.zeros((n, len(engine.CONFIG_INT)), dtype=np.int64)
    config_f = np.zeros((n, len(engine.CONFIG_FLOAT)))
    table_off = np.zeros((n, 11), dtype=np.int64)
    state_off = np.zeros((n, 6), dtype=np.int64)
    table_i, table_f, state_i, state_f = [], [], [], []
    at = {"table_i": 0, "table_f": 0, "state_i": 0, "state_f": 0}
    for m, (prepared, ids) in enumerate(zip(group, query_ids, strict=True)):
        query_of[m, list(prepared.query_slots)] = ids
        for slot, scaler in prepared.cron:
            runs = cron_runs(scaler, float(prepared.spec.start_epoch_s), float(prepared.spec.tick_s), int(n_ticks))
            cron_slots[m, slot] = (cron_at, cron_at + len(runs[0]))
            cron_parts.append(runs)
            cron_at += len(runs[0])
        tables = decision.tables(prepared.compiled_control)
        config = tables.config._asdict()
        config_i[m] = [int(config[name]) for name in engine.CONFIG_INT]
        config_f[m] = [float(config[name]) for name in engine.CONFIG_FLOAT]
        metric, policy, trigger, formula = tables.metric, tables.policy, tables.trigger, tables.formula
        table_off[m] = [
            at["table_i"],
            at["table_i"] + metric.size,
            at["table_i"] + metric.size + policy.size,
            at["table_f"],
            len(tables.trig_activation),
            len(metric),
            len(policy),
            len(trigger),
            at["table_i"] + metric.size + policy.size + trigger.size,
            at["table_f"] + len(tables.trig_activation),
            len(formula),
        ]
        for part in (metric, policy, trigger, formula):
            table_i.append(part.ravel())
            at["table_i"] += part.size
        for part in (tables.trig_activation, tables.formula_consts):
            table_f.append(part)
            at["table_f"] += len(part)
        state = decision.new_state(prepared.compiled_control)
        n_rec, n_events, n_keda = len(state.rec_replicas), state.events.shape[1], len(state.keda)
        state_off[m] = [at["state_i"], at["state_f"], n_rec, n_events, n_keda, len(state.formula_stack)]
        for part in (state.count, state.rec_replicas, state.events.ravel(), state.keda.ravel()):
            state_i.append(part)
            at["state_i"] += part.size
        for part in (state.rec_t, state.event_t.ravel(), state.last_active_s, state.formula_stack):
            state_f.append(part)
            at["state_f"] += part.size
    tick_s = group[0].spec.tick_s
    poll_every = np.array(
        [_every(p.control.polling_interval_s, tick_s) if p.control.keda is not None else 0 for p in group],
        dtype=np.int64,
    )
    reconcile_every = np.array([_every(p.control.sync_period_s, tick_s) for p in group], dtype=np.int64)
    # A cron slot (-1) is never read from the results: the group's rows serve when every other slot is its own.
    identity = np.array(
        [
            all(q in (slot, -1) for slot, q in enumerate(row[: p.n_slots].tolist()))
            for p, row in zip(group, query_of, strict=True)
        ],
        dtype=np.bool_,
    )
    signal_query = np.array(
        [ids[p.signal_query] if p.signal_query >= 0 else -1 for p, ids in zip(group, query_ids, strict=True)],
        dtype=np.int64,
    )
    signal_kind = np.array([p.signal_kind for p in group], dtype=np.int64)

    def joined(parts, dtype):
        return np.ascontiguousarray(np.concatenate(parts) if parts else np.zeros(0), dtype=dtype)

    members = engine.Members(
        config_i=config_i,
        config_f=config_f,
        table_i=joined(table_i, np.int64),
        table_f=joined(table_f, float),
        table_off=table_off,
        state_i=joined(state_i, np.int64),
        state_f=joined(state_f, float),
        state_off=state_off,
        poll_every=poll_every,
        reconcile_every=reconcile_every,
        query_of=query_of,
        n_query=np.array([p.n_slots for p in group], dtype=np.int64),
        identity=identity,
        signal_query=signal_query,
        signal_kind=signal_kind,
        has_cron=np.array([bool(p.cron) for p in group], dtype=np.bool_),
        cron_slots=cron_slots,
        cron_run_tick=joined([part[0] for part in cron_parts], np.int64),
        cron_run_state=joined([part[1] for part in cron_parts], np.int64),
        cron_run_value=joined([part[2] for part in cron_parts], float),
    )
    has_range = np.array([q.has_range for q in unique], dtype=np.bool_)
    return members, _concatenate(unique), has_range


def metrics_store(n_scrapes: int, n_rows: int):
    """Empty store arrays for ``n_scrapes`` scrapes of ``n_rows`` pod samples in all."""
    return engine.Store(
        scrape_time_s=np.zeros(n_scrapes + 2),
        scrape_rows=np.zeros(n_scrapes + 3, dtype=np.int64),
        sample_pod=np.zeros(n_rows, dtype=np.int64),
        sample_values=np.zeros((n_rows, 8)),
        existing_rows=np.zeros(n_scrapes + 3, dtype=np.int64),
        existing_pod=np.zeros(n_rows, dtype=np.int64),
        counts=np.zeros(3, dtype=np.int64),
    )


def _grown_store(store, n_rows: int):
    # Room for n_rows samples, the scrapes so far copied over.
    grown = metrics_store(len(store.scrape_time_s) - 2, n_rows)
    n_samples, n_existing = int(store.counts[engine.STORE_SAMPLES]), int(store.counts[engine.STORE_EXISTING])
    grown.scrape_time_s[:] = store.scrape_time_s
    grown.scrape_rows[:] = store.scrape_rows
    grown.existing_rows[:] = store.existing_rows
    grown.sample_pod[:n_samples] = store.sample_pod[:n_samples]
    grown.sample_values[:n_samples] = store.sample_values[:n_samples]
    grown.existing_pod[:n_existing] = store.existing_pod[:n_existing]
    grown.counts[:] = store.counts
    return grown


def _copy_arrays(source: Sequence[np.ndarray], target, names: Sequence[str]) -> None:
    # Each array of source into the first entries of target's field of that name (the others stay as made).
    for name, value in zip(names, source, strict=True):
        getattr(target, name)[: len(value)] = value


def _copy_pods(source, target) -> None:
    # Every array of the Pods source into the first entries of target's (target keeps its own pool).
    _copy_arrays([getattr(source, name) for name in _POD_ARRAYS], target, _POD_ARRAYS)


def _grown_pool(pool: supply.NodePool, capacity: int) -> supply.NodePool:
    # Room for capacity nodes, the pool so far copied over (the same generator).
    grown = supply.new_node_pool(capacity, len(pool.placeholder_node), pool.rng)
    _copy_arrays([getattr(pool, name) for name in _POOL_ARRAYS], grown, _POOL_ARRAYS)
    return grown


@dataclass(frozen=True)
class _Snapshot:
    """The fleet where a group split, for the parts resumed later (see the module docstring)."""

    carry: np.ndarray
    first_open: int  # requests before it had finished
    requests: tuple[np.ndarray, ...]  # _REQUEST_STATE of requests first_open .. next arrival
    pods: tuple[np.ndarray, ...]  # _POD_ARRAYS, the rows of the pods created so far (count whole)
    pool: tuple[np.ndarray, ...]  # _POOL_ARRAYS
    store_count: np.ndarray
    rng_state: dict
    pool_rng_state: dict


def _take_snapshot(carry, first_open, req, pods, store, rng) -> _Snapshot:
    stop = int(carry[engine.CARRY_NEXT_ARRIVAL])
    return _Snapshot(
        carry.copy(),
        first_open,
        tuple(getattr(req, name)[first_open:stop].copy() for name in _REQUEST_STATE),
        tuple(_created_rows(pods, name).copy() for name in _POD_ARRAYS),
        tuple(np.copy(getattr(pods.pool, name)) for name in _POOL_ARRAYS),
        store.counts.copy(),
        rng.bit_generator.state,
        pods.pool.rng.bit_generator.state,
    )


def _created_rows(pods, name: str) -> np.ndarray:
    # A Pods array's entries for the pods created so far: rows of the per-pod columns, entries of the
    # position lists (never longer); the count slots whole.
    values = getattr(pods, name)
    return values if name == "count" else values[: pods.count[fleet.PODS_CREATED]]


def _restored_pods(snapshot: _Snapshot, pods, blank):
    # The pods and node pool as the snapshot holds them, in arrays as large as the current ones. Rows past
    # the snapshot's pods, created by the path that ran since, go back to blank (blank: new_pods(1, ...)).
    pool = pods.pool
    if len(snapshot.pool[0]) != len(pool.requested_s):
        pool = supply.new_node_pool(len(pool.requested_s), len(pool.placeholder_node), pool.rng)
    _copy_arrays(snapshot.pool, pool, _POOL_ARRAYS)
    pool.rng.bit_generator.state = snapshot.pool_rng_state
    pods = pods._replace(pool=pool)
    created = int(pods.count[fleet.PODS_CREATED])
    for name, saved in zip(_POD_ARRAYS, snapshot.pods, strict=True):
        values = getattr(pods, name)
        if name != "count":
            values[len(saved) : created] = getattr(blank, name)[0]
        values[: len(saved)] = saved
    return pods


def node_pool_params(spec: FleetSpec) -> supply.NodePoolParams:
    """The kernels' :class:`planner.simulate.fast.supply.NodePoolParams` for ``spec`` (``enabled`` only with nodes)."""
    nodes = spec.nodes or NodePoolSpec(gpus_per_node=spec.gpus_per_replica)  # unused, but typed alike
    ca, karpenter = nodes.cluster_autoscaler, nodes.karpenter
    return supply.NodePoolParams(
        enabled=spec.nodes is not None,
        gpus_per_node=int(nodes.gpus_per_node),
        gpus_per_pod=int(spec.gpus_per_replica),
        max_nodes=supply.NO_LIMIT if nodes.max_nodes is None else int(nodes.max_nodes),
        provision_kind=_DURATION_KINDS[nodes.provision_distribution],
        provision_s=float(nodes.provision_s),
        provision_spread_s=float(nodes.provision_spread_s),
        node_init_s=float(nodes.node_init_s),
        autoscaler=supply.CLUSTER_AUTOSCALER if nodes.autoscaler == CLUSTER_AUTOSCALER else supply.KARPENTER,
        scan_interval_s=float(ca.scan_interval_s),
        gpu_pod_scale_up_delay_s=float(ca.gpu_pod_scale_up_delay_s),
        scale_down_unneeded_s=float(ca.scale_down_unneeded_s),
        scale_down_delay_after_add_s=float(ca.scale_down_delay_after_add_s),
        batch_idle_s=float(karpenter.batch_idle_s),
        batch_max_s=float(karpenter.batch_max_s),
        consolidate_after_s=float(karpenter.consolidate_after_s),
        capacity_failure_frac=float(nodes.capacity_failure_frac),
        capacity_retry_s=float(nodes.capacity_retry_s),
        image_pull_s=float(spec.image_pull_s),
        weights_load_s=float(spec.weights_load_s),
        placeholders=int(spec.placeholders),
        warm_placeholder_nodes=nodes.initial_nodes is None,
    )


def fleet_pods(spec: FleetSpec, capacity: int, node_capacity: int) -> fleet.Pods:
    """Empty pods for ``spec``, on its node pool as the reference's ``Fleet`` starts it: the initial nodes up.

    Room for ``capacity`` pods and ``node_capacity`` nodes (0 without a node pool), and at least for the
    initial nodes.
    """
    initial_nodes = (spec.nodes.initial_nodes or 0) if spec.nodes is not None else 0
    pool = supply.new_node_pool(
        max(node_capacity, initial_nodes), spec.placeholders, np.random.default_rng([spec.seed, 1])
    )
    params = node_pool_params(spec)
    for _ in range(initial_nodes):
        supply.add_node(pool, 0.0, True, params)
    return fleet.new_pods(capacity, spec.replica.max_num_seqs, pool)


def deployment_params(spec: FleetSpec) -> fleet.DeploymentParams:
    """The fleet kernels' :class:`planner.simulate.fast.fleet.DeploymentParams` for ``spec``."""
    return fleet.DeploymentParams(
        warmup_kind=_WARMUP_KINDS[spec.warmup_distribution],
        warmup_s=float(spec.warmup_s),
        warmup_spread_s=float(spec.warmup_spread_s),
        pre_stop_s=float(spec.pre_stop_s),
        grace_period_s=float(spec.termination_grace_period_s),
        shutdown_timeout_s=float(spec.shutdown_timeout_s),
        router=fleet.ROUND_ROBIN if spec.router == ROUND_ROBIN else fleet.LEAST_LOADED,
        nodes=node_pool_params(spec),
    )


def replica_params_of(spec: FleetSpec) -> ReplicaParams:
    """The replica kernel's :class:`planner.simulate.fast.replica.ReplicaParams` for ``spec.replica``."""
    replica = spec.replica
    return ReplicaParams(
        np.asarray(replica._step_table_s, dtype=float),
        int(replica.max_num_seqs),
        int(replica.kv_tokens),
        int(replica.block_size_tokens),
        float(replica.prefill_ms_per_token),
        int(replica.max_num_batched_tokens or 0),
    )


def _first_open(req, start: int, stop: int) -> int:
    # The first request in start .. stop - 1 not yet done or cut (stop if none): earlier ones never change again.
    open_ = np.flatnonzero(req.status[start:stop] < DONE)
    return start + int(open_[0]) if open_.size else stop


def simulate_group(
    group: Sequence[Prepared],
    arrival_s: np.ndarray,
    input_tokens: np.ndarray,
    output_tokens: np.ndarray,
    duration_s: float,
    *,
    timeseries: bool = True,
    per_request: bool = True,
    on_done: Callable[[int], None] | None = None,
) -> list[Outcome | None]:
    """Run configurations that share a fleet over requests that arrive before ``duration_s``.

    Parameters
    ----------
    group : sequence of Prepared
        All with the same :func:`fleet_key`.
    arrival_s, input_tokens, output_tokens : numpy.ndarray
        The requests. [s], [tokens], [tokens]
    duration_s : float
        Simulated time. [s]
    timeseries : bool
        ``False`` leaves each Outcome's time series empty (a sweep keeps only
        the scalar results); every other field is computed as with it.
    per_request : bool
        ``False`` leaves each Outcome's per-request arrays empty (a day of a
        busy trace holds millions of entries per configuration).
    on_done : callable, optional
        Called with the number of configurations each time some finish.

    Returns
    -------
    list of Outcome or None
        One per configuration, in order; ``None`` where the decision kernel
        met a branch it does not cover (run that configuration in Python).
    """
    if not group:
        return []
    keys = {fleet_key(p) for p in group}
    if len(keys) != 1:
        raise ValueError("simulate_group: the configurations do not share a fleet")
    first = group[0]
    spec = first.spec
    dt = spec.tick_s
    n_ticks = math.ceil(duration_s / dt - 1e-9)
    scrape_every = round(spec.scrape_interval_s / dt)
    n_scrapes = n_ticks // scrape_every
    members, queries, has_range = pack_members(group, n_ticks)
    control_due = np.zeros(n_ticks, dtype=np.bool_)
    for every in set(members.poll_every.tolist()) | set(members.reconcile_every.tolist()):
        if every > 0:
            control_due[::every] = True
    rooms = [initial_capacity(p) for p in group]
    pod_capacity, rows_per_scrape = max(r[0] for r in rooms), max(r[1] for r in rooms)
    pods_per_tick = max(p.pods_per_tick for p in group)
    replica = spec.replica
    capacity_tps = float(output_throughput_tps(replica.max_num_seqs, replica.fixed_ms, replica.per_sequence_ms))
    req = fleet.new_requests(arrival_s, input_tokens, output_tokens)
    pods = fleet_pods(spec, pod_capacity, max(initial_node_capacity(p) for p in group))
    store = metrics_store(n_scrapes, n_scrapes * rows_per_scrape)
    outputs = engine.Outputs(
        series_values=np.empty((n_ticks, 3)),
        series_counts=np.empty((n_ticks, 5), dtype=np.int64),
        events=np.empty((int(np.count_nonzero(control_due)) + 1, 3)),
        wanted=np.zeros(len(group), dtype=np.int64),
        signal=np.full((len(group), n_ticks), np.nan) if timeseries else np.zeros((0, 0)),
        supply_counts=np.empty((n_ticks if spec.nodes is not None else 0, 4), dtype=np.int64),
    )
    carry = np.zeros(engine.CARRY_SLOTS, dtype=np.int64)
    rng = np.random.default_rng(spec.seed)
    run_params = engine.RunParams(
        tick_s=dt,
        n_ticks=n_ticks,
        scrape_every=scrape_every,
        initial_replicas=first.initial_replicas,
        pods_per_tick=pods_per_tick,
        capacity_tps=capacity_tps,
    )
    deployment = deployment_params(spec)
    replica_params = replica_params_of(spec)
    outcomes: list[Outcome | None] = [None] * len(group)

    work: tuple[np.ndarray, np.ndarray] | None = None
    blank_pod = fleet.new_pods(1, replica.max_num_seqs)  # a pod's entries before it is created
    stack: list[tuple[np.ndarray, int, _Snapshot | None]] = [(np.arange(len(group), dtype=np.int64), 0, None)]
    while stack:
        active, wanted, snapshot = stack.pop()
        first_open = 0
        if snapshot is not None:
            carry[:] = snapshot.carry
            carry[engine.CARRY_WANTED] = wanted
            first_open = snapshot.first_open
            stop = int(carry[engine.CARRY_NEXT_ARRIVAL])
            for name, saved in zip(_REQUEST_STATE, snapshot.requests, strict=True):
                getattr(req, name)[first_open:stop] = saved
            pods = _restored_pods(snapshot, pods, blank_pod)
            store.counts[:] = snapshot.store_count
            rng.bit_generator.state = snapshot.rng_state
        while True:
            code = engine.run(
                req,
                pods,
                store,
                rng,
                run_params,
                deployment,
                replica_params,
                engine.Group(members, active, control_due, queries, has_range),
                outputs,
                carry,
            )
            if code == engine.OUT_OF_PODS:
                grown = fleet.new_pods(4 * len(pods.ready_s), replica.max_num_seqs, pods.pool)
                _copy_pods(pods, grown)
                pods = grown
                continue
            if code == engine.OUT_OF_NODES:
                pods = pods._replace(pool=_grown_pool(pods.pool, 4 * len(pods.pool.requested_s)))
                continue
            if code == engine.OUT_OF_SAMPLES:
                rows_per_scrape *= 4
                store = _grown_store(store, n_scrapes * rows_per_scrape)
                continue
            if code == engine.DONE:
                if work is None:  # the outcome's scratch, made once for the group's leaves
                    work = (np.empty(len(req.arrival_s)), np.empty(len(req.arrival_s)))
                _finish(active, req, pods, first, outputs, carry, n_ticks * dt, timeseries, per_request, outcomes, work)
                if on_done is not None:
                    on_done(len(active))
                break
            if code != engine.FORK:
                raise RuntimeError(f"the compiled engine stopped with code {code}")
            decided = outputs.wanted[active]
            failed = active[decided < 0]
            if failed.size and on_done is not None:
                on_done(len(failed))  # left as None: the caller runs them in Python
            active, decided = active[decided >= 0], decided[decided >= 0]
            if not active.size:
                break
            values = list(dict.fromkeys(decided.tolist()))  # in the order the members first want them
            if len(values) > 1:
                first_open = _first_open(req, first_open, int(carry[engine.CARRY_NEXT_ARRIVAL]))
                split = _take_snapshot(carry, first_open, req, pods, store, rng)
                for value in reversed(values[1:]):
                    stack.append((active[decided == value], value, split))
            active = active[decided == values[0]]
            carry[engine.CARRY_WANTED] = values[0]
    return outcomes


def simulate_prepared(
    prepared: Prepared,
    arrival_s: np.ndarray,
    input_tokens: np.ndarray,
    output_tokens: np.ndarray,
    duration_s: float,
    *,
    timeseries: bool = True,
) -> Outcome:
    """Run one compiled configuration (a group of one); :class:`NotCompilable` if the kernel cannot."""
    outcome = simulate_group([prepared], arrival_s, input_tokens, output_tokens, duration_s, timeseries=timeseries)[0]
    if outcome is None:
        raise NotCompilable("the decision kernel met a branch it does not cover")
    return outcome


def _finish(
    active,
    req,
    pods,
    prepared: Prepared,
    outputs: engine.Outputs,
    carry,
    end_s: float,
    timeseries: bool,
    per_request: bool,
    outcomes: list,
    work: tuple[np.ndarray, np.ndarray] | None = None,
) -> None:
    # The members that ran to the end together share every result but their signal column.
    arrived = int(carry[engine.CARRY_NEXT_ARRIVAL])
    if arrived < len(req.arrival_s):  # requests after the last tick: as they started
        fresh = fleet.new_requests(req.arrival_s[arrived:], req.input_tokens[arrived:], req.output_tokens[arrived:])
        for name in _REQUEST_STATE:
            getattr(req, name)[arrived:] = getattr(fresh, name)
    outcome = _outcome(
        req,
        pods,
        prepared.spec,
        outputs.events[: carry[engine.CARRY_EVENTS]],
        int(carry[engine.CARRY_PREEMPTIONS]),
        outputs.series_values,
        outputs.series_counts,
        end_s,
        timeseries,
        per_request,
        supply_counts=outputs.supply_counts,
        initial_replicas=prepared.initial_replicas,
        work=work,
    )
    for m in active.tolist():
        if timeseries:
            series = outcome.timeseries.copy()
            series["signal"] = outputs.signal[m].copy()  # not a view that would keep every member's row alive
            outcomes[m] = dataclasses.replace(outcome, timeseries=series)
        else:
            outcomes[m] = outcome


def _gpu_hours(pods, spec: FleetSpec, end_s: float) -> float:
    # Fleet.gpu_hours, pod by pod in creation order: from its request, or with a node pool its binding.
    total_s = 0.0
    n = int(pods.count[fleet.PODS_CREATED])
    start = pods.requested_s if spec.nodes is None else pods.bound_s
    for start_s, removed in zip(start[:n].tolist(), pods.removed_s[:n].tolist(), strict=True):
        if math.isnan(start_s):
            continue  # never held a GPU
        removed = removed if not math.isnan(removed) else end_s
        total_s += max(min(removed, end_s) - start_s, 0.0)
    return total_s * spec.gpus_per_replica / 3600.0


def _supply_outcome(pods, spec: FleetSpec, supply_counts: np.ndarray, end_s: float, initial_replicas: int):
    # The reference's SupplyOutcome: NodePool.node_hours, Fleet.pending_pod_s and Fleet.time_to_ready_s, node
    # by node and pod by pod in creation order; the peak from the per-tick node counts.
    assert spec.nodes is not None
    pool = pods.pool
    n_nodes = int(pool.count[supply.POOL_CREATED])
    node_s = 0.0
    for requested, removed in zip(pool.requested_s[:n_nodes].tolist(), pool.removed_s[:n_nodes].tolist(), strict=True):
        removed = removed if not math.isnan(removed) else end_s
        node_s += max(min(removed, end_s) - requested, 0.0)
    n = int(pods.count[fleet.PODS_CREATED])
    requested_s, ready_s = pods.requested_s[:n], pods.ready_s[:n]
    pending_s = 0.0
    for requested, bound, deleted in zip(
        requested_s.tolist(), pods.bound_s[:n].tolist(), pods.deleted_s[:n].tolist(), strict=True
    ):
        until_s = bound if not math.isnan(bound) else min(end_s, deleted if not math.isnan(deleted) else end_s)
        pending_s += max(until_s - requested, 0.0)
    created = (np.arange(n) >= initial_replicas) & np.isfinite(ready_s)  # the warm pods are the initial ones
    nodes_up = supply_counts[:, engine.SUPPLY_NODES_READY] + supply_counts[:, engine.SUPPLY_NODES_PROVISIONING]
    return SupplyOutcome(
        node_hours=node_s / 3600.0,
        peak_nodes=int(nodes_up.max()) if len(nodes_up) else 0,
        pending_pod_s=pending_s,
        time_to_ready_s=ready_s[created] - requested_s[created],
        usd_per_node_hour=spec.nodes.node_price_usd_per_hour(spec.usd_per_gpu_hour),
    )


def _outcome(
    req,
    pods,
    spec: FleetSpec,
    events: np.ndarray,
    preemptions: int,
    series_values: np.ndarray,
    series_counts: np.ndarray,
    end_s: float,
    timeseries: bool,
    per_request: bool = True,
    *,
    supply_counts: np.ndarray,
    initial_replicas: int,
    work: tuple[np.ndarray, np.ndarray] | None = None,
) -> Outcome:
    # The reference's _outcome, from the kernel's arrays (the signal column is the caller's); the
    # per-request latencies and their counts come from one compiled pass (fast.outcome). ``work``: two
    # float arrays of at least one entry per request, overwritten (a group's leaves share them).
    n = len(req.arrival_s)
    if per_request:
        ttft_s, met = np.empty(n), np.empty(n, dtype=np.bool_)
    else:  # not kept: the kernel skips them
        ttft_s, met = np.empty(0), np.empty(0, dtype=np.bool_)
    if work is not None and len(work[0]) >= n and len(work[1]) >= n:
        finite_ttft_s, finite_itl_ms = work
    else:
        finite_ttft_s, finite_itl_ms = np.empty(n), np.empty(n)
    itl_limit_ms = spec.itl_slo_ms + 1e-9 if spec.itl_slo_ms is not None else math.nan
    n_met, n_done, n_cut, n_ttft, itl_mean_ms = request_summary(
        req.arrival_s,
        req.output_tokens,
        req.status,
        req.first_token_s,
        req.done_s,
        spec.ttft_slo_s + 1e-9,
        itl_limit_ms,
        ttft_s,
        met,
        finite_ttft_s,
        finite_itl_ms,
    )
    ttft_p50_s = ttft_p99_s = math.nan
    if n_ttft:
        # The buffer is ours: numpy may partition it in place instead of copying it first (same values).
        ttft_p50_s, ttft_p99_s = (
            float(v) for v in np.percentile(finite_ttft_s[:n_ttft], [50, 99], overwrite_input=True)
        )
    event_list = tuple((float(t), int(a), int(b)) for t, a, b in events.tolist())
    gpu_hours = _gpu_hours(pods, spec, end_s)
    cost_usd = gpu_hours * spec.usd_per_gpu_hour
    supply_outcome = None
    columns = TIMESERIES_COLUMNS
    if spec.nodes is not None:
        supply_outcome = _supply_outcome(pods, spec, supply_counts, end_s, initial_replicas)
        cost_usd = supply_outcome.node_hours * supply_outcome.usd_per_node_hour
        columns = TIMESERIES_COLUMNS + SUPPLY_COLUMNS
    changes, flaps = count_flaps(event_list)
    if timeseries:
        series = pd.DataFrame(
            {
                "t_s": series_values[:, engine.SERIES_T_S],
                "demand_tps": series_values[:, engine.SERIES_DEMAND_TPS],
                "ready_capacity_tps": series_values[:, engine.SERIES_CAPACITY_TPS],
                "running": series_counts[:, engine.SERIES_RUNNING],
                "waiting": series_counts[:, engine.SERIES_WAITING],
                "replicas_requested": series_counts[:, engine.SERIES_REQUESTED],
                "replicas_ready": series_counts[:, engine.SERIES_READY],
                "replicas_live": series_counts[:, engine.SERIES_LIVE],
                "signal": np.full(len(series_values), np.nan),
            },
            columns=TIMESERIES_COLUMNS,
        )
        if supply_outcome is not None:
            for k, name in enumerate(SUPPLY_COLUMNS):
                series[name] = supply_counts[:, k].copy()
    else:
        series = pd.DataFrame(columns=columns)
    n_rows = len(series_counts)
    if per_request:
        arrival_s, latency_s = req.arrival_s.copy(), req.done_s - req.arrival_s
    else:
        arrival_s, latency_s = np.empty(0), np.empty(0)
    return Outcome(
        engine="fast",
        requests=n,
        completed=int(n_done),
        slo_attainment_frac=n_met / n if n else math.nan,
        ttft_p50_s=ttft_p50_s,
        ttft_p99_s=ttft_p99_s,
        itl_mean_ms=math.nan if math.isnan(itl_mean_ms) else float(itl_mean_ms),  # NaN as the reference's object
        gpu_hours=gpu_hours,
        cost_usd=cost_usd,
        scale_events=len(event_list),
        direction_changes=changes,
        flap_cycles=flaps,
        peak_replicas=int(max(series_counts[:, engine.SERIES_LIVE].max(), 0)) if n_rows else 0,
        peak_waiting=int(series_counts[:, engine.SERIES_WAITING].max()) if n_rows else 0,
        cut_generations=int(n_cut),
        preemptions=preemptions,
        events=event_list,
        timeseries=series,
        arrival_s=arrival_s,
        ttft_s=ttft_s,
        latency_s=latency_s,
        slo_met=met,
        supply=supply_outcome,
    )
