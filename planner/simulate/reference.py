"""The ``reference`` engine: a readable per-tick loop around the scalar controller. It is the specification.

Each tick of ``FleetSpec.tick_s`` seconds, in this order:

1. **control** - at the tick start, whatever is due (KEDA poll, HPA sync)
   reads the simulated Prometheus and writes ``spec.replicas``
   (:class:`planner.simulate.control.Control`);
2. **fleet** - the ReplicaSet creates or deletes pods; warm pods become
   Ready; terminating pods past their deadline exit and cut what they hold;
3. **route** - requests arriving during the tick go to Ready pods at their
   arrival (or wait at the gateway while no pod is Ready);
4. **serve** - every pod whose server is up runs the tick
   (:func:`planner.simulate.replica.advance_replica`);
5. **scrape** - at scrape times, the tick-end state of every serving pod
   is recorded;
6. **record** - one row of the time series: demand and Ready capacity (output
   tokens/s), running and waiting requests, replicas requested, Ready and
   live, and the first trigger's (or metric's) value as the controller would
   read it now.

Each step is a function of the state arrays, so an engine over many
configurations can run the same steps on stacked arrays. Nothing reads a
clock or an unseeded random source: the same inputs and seed give the
same result bit for bit.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from planner.autoscaler.replica_calculator import POD_RUNNING, Pod
from planner.autoscaler.spec import Autoscaler
from planner.capacity.step_time import output_throughput_tps
from planner.dynamics.cold_start import pods_per_node
from planner.errors import PlannerInputError
from planner.simulate.control import Control
from planner.simulate.fleet import Fleet, FleetSpec
from planner.simulate.metrics import COLUMNS, HISTORY_MARGIN_S, MetricStore
from planner.simulate.outcome import Outcome, count_flaps, request_latencies, slo_met
from planner.simulate.replica import CUT, DONE, ReplicaTick, RequestState, advance_replica, kv_usage_frac
from planner.simulate.supply import SupplyOutcome
from planner.simulate.traffic import RequestTrace

__all__ = [
    "DRAIN_TAIL_S",
    "RunState",
    "control_step",
    "controller_pods",
    "fleet_step",
    "record_step",
    "route_step",
    "scrape_step",
    "serve_step",
    "simulate",
]

DRAIN_TAIL_S = 120.0
"""Default time simulated after the last arrival, so the last requests can finish. [s]"""

ReplicaAdvance = Callable[..., ReplicaTick]
"""One replica's tick: :func:`planner.simulate.replica.advance_replica` with its ``spec`` bound,
called as ``advance(t0_s, dt_s, running, waiting, req, stop_s=..., stall_debt_s=...)``."""


def controller_pods(fleet: Fleet, now_s: float) -> list[Pod]:
    """The pods the HPA sees: live pods, Ready or not, with their start and readiness times."""
    pods = []
    for p in fleet.live():
        ready = fleet.ready_s[p] <= now_s
        transition = fleet.ready_s[p] if ready else fleet.requested_s[p]
        pods.append(
            Pod(
                f"pod-{p}",
                phase=POD_RUNNING,
                ready=ready,
                start_time_s=fleet.requested_s[p],
                ready_transition_s=transition,
            )
        )
    return pods


@dataclass
class RunState:
    """Everything one run carries from tick to tick (mutated in place by the step functions).

    Attributes
    ----------
    spec : FleetSpec
    control : Control
    req : RequestState
        Per-request arrays.
    fleet : Fleet
        Per-pod arrays, batches and queues.
    store : MetricStore
        The scrapes so far.
    spec_replicas : int
        ``scale.spec.replicas``.
    counters : numpy.ndarray
        Per pod: completed requests, generated tokens, prompt tokens, preemptions (the scraped counters).
    busy_frac : numpy.ndarray
        Per pod: busy fraction of the last tick (NVML utilization).
    next_arrival : int
        First request not yet routed.
    events : list of (t_s, from, to)
        Scale events.
    rows : list of tuple
        The time series so far.
    supply_rows : list of tuple
        With a node pool, per tick: nodes ready and provisioning, pods pending and loading.
    preemptions : int
    """

    spec: FleetSpec
    control: Control
    req: RequestState
    fleet: Fleet
    store: MetricStore = field(default_factory=MetricStore)
    spec_replicas: int = 0
    counters: np.ndarray = field(default_factory=lambda: np.zeros((0, 4)))
    busy_frac: np.ndarray = field(default_factory=lambda: np.zeros(0))
    next_arrival: int = 0
    events: list = field(default_factory=list)
    rows: list = field(default_factory=list)
    preemptions: int = 0
    supply_rows: list = field(default_factory=list)

    def __post_init__(self) -> None:
        # Keep the scrapes the queries reach (a day's offset keeps a day; a plain rate, minutes).
        self.store.retention_s = self.control.history_s + HISTORY_MARGIN_S


def control_step(state: RunState, t0_s: float) -> None:
    """1. Whatever controller is due at ``t0_s`` writes ``spec.replicas``."""
    fleet = state.fleet
    ready = sum(1 for p in fleet.live() if fleet.ready_s[p] <= t0_s)
    wanted = state.control.decide(
        t0_s, state.spec.tick_s, state.spec_replicas, lambda: controller_pods(fleet, t0_s), ready, state.store
    )
    if wanted != state.spec_replicas:
        state.events.append((t0_s, state.spec_replicas, wanted))
        state.spec_replicas = wanted


def fleet_step(state: RunState, t0_s: float) -> None:
    """2. The ReplicaSet creates or deletes pods; exited pods go; pods find nodes; held requests meet Ready pods."""
    state.fleet.scale_to(state.spec_replicas, t0_s)
    state.fleet.finish_terminations(t0_s, state.req)
    state.fleet.supply_step(t0_s)
    state.fleet.release_gateway(t0_s, state.req)


def route_step(state: RunState, t0_s: float, t1_s: float) -> range:
    """3. Requests arriving in ``[t0_s, t1_s)`` go to the Service's endpoints; returns their indices."""
    first = state.next_arrival
    state.next_arrival = int(np.searchsorted(state.req.arrival_s, t1_s, side="left"))
    arrived = range(first, state.next_arrival)
    state.fleet.route_all(arrived, t0_s, state.req, state.fleet.routable(t0_s))
    return arrived


def serve_step(state: RunState, t0_s: float, advance: ReplicaAdvance | None = None) -> None:
    """4. Every pod whose server is up runs one tick of continuous batching.

    ``advance`` stands in for :func:`planner.simulate.replica.advance_replica` on
    ``state.spec.replica`` (the lockstep engine hands in the compiled kernel's
    :meth:`planner.simulate.fast.replica.ListReplica.advance`, the same bit for bit).
    """
    fleet, dt = state.fleet, state.spec.tick_s
    if advance is None:
        advance = functools.partial(advance_replica, spec=state.spec.replica)
    grow = len(fleet.uid) - state.counters.shape[0]
    if grow > 0:
        state.counters = np.vstack([state.counters, np.zeros((grow, 4))])
        state.busy_frac = np.concatenate([state.busy_frac, np.zeros(grow)])
    for p in fleet.serving(t0_s):
        if not (fleet.running[p] or fleet.waiting[p]):
            # An empty replica runs no step: nothing completes, nothing is generated, busy 0; and no
            # decode is left to owe, or be owed, a stall.
            state.busy_frac[p] = 0.0
            fleet.stall_debt_s[p] = 0.0
            continue
        stop_s = fleet.stop_s[p] if not math.isnan(fleet.stop_s[p]) else math.inf
        tick = advance(
            t0_s, dt, fleet.running[p], fleet.waiting[p], state.req, stop_s=stop_s, stall_debt_s=fleet.stall_debt_s[p]
        )
        fleet.stall_debt_s[p] = tick.stall_debt_s
        state.counters[p] += (len(tick.completed), tick.generated_tokens, tick.prompt_tokens, tick.preemptions)
        state.busy_frac[p] = tick.busy_s / dt
        state.preemptions += tick.preemptions


def scrape_step(state: RunState, t1_s: float) -> None:
    """5. Prometheus scrapes every pod whose server is up, at ``t1_s``."""
    fleet, req = state.fleet, state.req
    scraped = fleet.serving(t1_s)
    values = np.array(
        [
            [
                len(fleet.running[p]),
                len(fleet.waiting[p]),
                kv_usage_frac(fleet.running[p], req, state.spec.replica),
                100.0 * state.busy_frac[p],
                *state.counters[p],
            ]
            for p in scraped
        ]
    ).reshape(len(scraped), len(COLUMNS))
    existing = [p for p in range(len(fleet.uid)) if math.isnan(fleet.removed_s[p])]
    state.store.record(t1_s, scraped, values, existing)


def record_step(state: RunState, t1_s: float, arrived: range, capacity_tps: float) -> None:
    """6. One row of the time series, at ``t1_s``."""
    fleet = state.fleet
    up = fleet.serving(t1_s)
    waiting = sum(len(fleet.waiting[p]) for p in up) + len(fleet.gateway)
    running = sum(len(fleet.running[p]) for p in up)
    ready = len(fleet.routable(t1_s))
    demand_tps = float(state.req.output_tokens[arrived.start : arrived.stop].sum()) / state.spec.tick_s
    signal = state.control.signal(state.store, t1_s)
    state.rows.append(
        (
            t1_s,
            demand_tps,
            ready * capacity_tps,
            running,
            waiting,
            state.spec_replicas,
            ready,
            len(fleet.live()),
            math.nan if signal is None else signal,
        )
    )
    if fleet.pool is not None:
        state.supply_rows.append(fleet.supply_counts(t1_s))


def simulate(
    trace: RequestTrace, autoscaler: Autoscaler, fleet_spec: FleetSpec | None = None, *, duration_s: float | None = None
) -> Outcome:
    """Replay ``trace`` through a fleet scaled by ``autoscaler``.

    Parameters
    ----------
    trace : RequestTrace
    autoscaler : Autoscaler
        From :func:`planner.readers.manifest.load_autoscaler`.
    fleet_spec : FleetSpec, optional
        Replica and fleet parameters (defaults documented there).
    duration_s : float, optional
        Simulated time; requests arriving later are left out. Default: the
        last arrival plus :data:`DRAIN_TAIL_S`. [s]

    Returns
    -------
    Outcome
    """
    spec = fleet_spec or FleetSpec()
    if len(trace) == 0:
        raise PlannerInputError(f"{trace.source or 'trace'}: the trace has no requests")
    if duration_s is None:
        duration_s = math.ceil(trace.duration_s) + DRAIN_TAIL_S
    if not (math.isfinite(duration_s) and duration_s > 0):
        raise PlannerInputError(f"duration_s: expected a finite number > 0, got {duration_s!r}")
    control = Control(autoscaler, spec.signal_map, spec.hpa_sync_period_s, spec.start_epoch_s)
    _check_cadence(control, spec)
    _check_node_quota(control, spec)
    keep = trace.arrival_s < duration_s
    state = RunState(
        spec,
        control,
        RequestState(trace.arrival_s[keep], trace.input_tokens[keep], trace.output_tokens[keep]),
        Fleet(spec),
    )
    initial = spec.initial_replicas
    if initial is None:
        initial = control.min_replicas
    for _ in range(initial):
        state.fleet.add_pod(0.0, warm=True)
    state.spec_replicas = initial
    dt = spec.tick_s
    n_ticks = math.ceil(duration_s / dt - 1e-9)
    scrape_every = round(spec.scrape_interval_s / dt)
    capacity_tps = float(
        output_throughput_tps(spec.replica.max_num_seqs, spec.replica.fixed_ms, spec.replica.per_sequence_ms)
    )
    for k in range(n_ticks):
        t0_s, t1_s = k * dt, (k + 1) * dt
        control_step(state, t0_s)
        fleet_step(state, t0_s)
        arrived = route_step(state, t0_s, t1_s)
        serve_step(state, t0_s)
        if (k + 1) % scrape_every == 0:
            scrape_step(state, t1_s)
        record_step(state, t1_s, arrived, capacity_tps)
    end_s = n_ticks * dt
    state.fleet.finish_terminations(end_s, state.req)
    return _outcome(state.req, state.fleet, spec, state.events, state.rows, state.preemptions, end_s, state.supply_rows)


def _check_cadence(control: Control, spec: FleetSpec) -> None:
    # The controllers run on tick starts; their periods must be whole numbers of ticks.
    ticks = control.polling_interval_s / spec.tick_s
    if abs(ticks - round(ticks)) > 1e-9 or round(ticks) < 1:
        raise PlannerInputError(
            f"{control.autoscaler.source}: pollingInterval {control.polling_interval_s:g} s is not a whole "
            f"number of ticks (tick_s={spec.tick_s:g})"
        )


def _check_node_quota(control: Control, spec: FleetSpec) -> None:
    # max_nodes must hold the autoscaler's minimum, or the fleet can never reach it.
    nodes = spec.nodes
    if nodes is None or nodes.max_nodes is None:
        return
    pods = nodes.max_nodes * pods_per_node(nodes.gpus_per_node, spec.gpus_per_replica)
    floor = max(control.min_replicas, spec.initial_replicas or 0)
    if pods < floor:
        where = f"{spec.source}: " if spec.source else ""
        raise PlannerInputError(
            f"{where}nodes.max_nodes: {nodes.max_nodes} nodes of {nodes.gpus_per_node} GPUs hold {pods} pods of "
            f"{spec.gpus_per_replica} GPUs, fewer than the {floor} the fleet starts with "
            f"({control.autoscaler.source}: minimum replicas)"
        )


def _outcome(
    req: RequestState, fleet: Fleet, spec: FleetSpec, events, rows, preemptions: int, end_s: float, supply_rows=()
) -> Outcome:
    series = pd.DataFrame(
        rows,
        columns=[
            "t_s",
            "demand_tps",
            "ready_capacity_tps",
            "running",
            "waiting",
            "replicas_requested",
            "replicas_ready",
            "replicas_live",
            "signal",
        ],
    )
    supply = None
    gpu_hours = fleet.gpu_hours(end_s)
    cost_usd = gpu_hours * spec.usd_per_gpu_hour
    if fleet.pool is not None and spec.nodes is not None:
        columns = ("nodes_ready", "nodes_provisioning", "pods_pending", "pods_loading")
        counts = np.array(supply_rows, dtype=float).reshape(len(supply_rows), len(columns))
        for k, name in enumerate(columns):
            series[name] = counts[:, k].astype(int)
        node_hours = fleet.pool.node_hours(end_s)
        supply = SupplyOutcome(
            node_hours=node_hours,
            peak_nodes=int((counts[:, 0] + counts[:, 1]).max()) if len(counts) else 0,
            pending_pod_s=fleet.pending_pod_s(end_s),
            time_to_ready_s=fleet.time_to_ready_s(),
            usd_per_node_hour=spec.nodes.node_price_usd_per_hour(spec.usd_per_gpu_hour),
        )
        cost_usd = node_hours * supply.usd_per_node_hour
    ttft_s, itl_ms = request_latencies(req)
    met = slo_met(req, spec.ttft_slo_s, spec.itl_slo_ms)
    changes, flaps = count_flaps(events)
    finite_ttft = ttft_s[np.isfinite(ttft_s)]
    finite_itl = itl_ms[np.isfinite(itl_ms)]
    return Outcome(
        engine="reference",
        requests=len(req),
        completed=int(np.count_nonzero(req.status == DONE)),
        slo_attainment_frac=float(met.mean()) if len(met) else math.nan,
        ttft_p50_s=float(np.percentile(finite_ttft, 50)) if finite_ttft.size else math.nan,
        ttft_p99_s=float(np.percentile(finite_ttft, 99)) if finite_ttft.size else math.nan,
        itl_mean_ms=float(finite_itl.mean()) if finite_itl.size else math.nan,
        gpu_hours=gpu_hours,
        cost_usd=cost_usd,
        scale_events=len(events),
        direction_changes=changes,
        flap_cycles=flaps,
        peak_replicas=int(max(series["replicas_live"].max(), 0)) if len(series) else 0,
        peak_waiting=int(series["waiting"].max()) if len(series) else 0,
        cut_generations=int(np.count_nonzero(req.status == CUT)),
        preemptions=int(preemptions),
        events=tuple(events),
        timeseries=series,
        arrival_s=req.arrival_s.copy(),
        ttft_s=ttft_s,
        latency_s=req.done_s - req.arrival_s,
        slo_met=met,
        supply=supply,
    )
