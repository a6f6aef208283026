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

import math

import numpy as np
import pandas as pd

from planner.errors import PlannerInputError
from planner.hpa import POD_RUNNING, Pod
from planner.readers.manifest import Autoscaler
from planner.simulate.control import Control
from planner.simulate.fleet import Fleet, FleetSpec
from planner.simulate.metrics import COLUMNS, MetricStore
from planner.simulate.outcome import Outcome, count_flaps, request_latencies, slo_met
from planner.simulate.replica import CUT, DONE, RequestState, advance_replica, kv_usage_frac
from planner.simulate.traffic import RequestTrace
from planner.step_time import output_throughput_tps

__all__ = ["DRAIN_TAIL_S", "controller_pods", "simulate"]

DRAIN_TAIL_S = 120.0
"""Default time simulated after the last arrival, so the last requests can finish. [s]"""


def controller_pods(fleet: Fleet, now_s: float) -> list[Pod]:
    """The pods the HPA sees: live pods, Ready or not, with their start and readiness times."""
    pods = []
    for p in fleet.live():
        ready = fleet.ready_s[p] <= now_s
        transition = fleet.ready_s[p] if ready else fleet.requested_s[p]
        pods.append(Pod(f"pod-{p}", phase=POD_RUNNING, ready=ready, start_time_s=fleet.requested_s[p],
                        ready_transition_s=transition))
    return pods


def simulate(trace: RequestTrace, autoscaler: Autoscaler, fleet_spec: FleetSpec | None = None, *,
             duration_s: float | None = None) -> Outcome:
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
    if not duration_s > 0:
        raise PlannerInputError(f"duration_s: expected a number > 0, got {duration_s!r}")
    keep = trace.arrival_s < duration_s
    req = RequestState(trace.arrival_s[keep], trace.input_tokens[keep], trace.output_tokens[keep])
    control = Control(autoscaler, spec.signal_map, spec.hpa_sync_period_s)
    fleet = Fleet(spec)
    initial = spec.initial_replicas
    if initial is None:
        initial = max(control.min_replicas, 1) if control.min_replicas > 0 else 0
    for _ in range(initial):
        fleet.add_pod(0.0, warm=True)
    store = MetricStore()
    counters = np.zeros((0, 4))
    dt = spec.tick_s
    n_ticks = math.ceil(duration_s / dt - 1e-9)
    scrape_every = max(round(spec.scrape_interval_s / dt), 1)
    capacity_tps = float(output_throughput_tps(spec.replica.max_num_seqs, spec.replica.fixed_ms,
                                               spec.replica.per_sequence_ms))
    spec_replicas = initial
    events: list[tuple[float, int, int]] = []
    rows = []
    next_arrival = 0
    cut = 0
    preemptions = 0
    busy = np.zeros(0)
    for k in range(n_ticks):
        t0 = k * dt
        t1 = (k + 1) * dt
        # 1. control
        live = fleet.live()
        ready_count = sum(1 for p in live if fleet.ready_s[p] <= t0)
        wanted = control.decide(t0, dt, spec_replicas, lambda t=t0: controller_pods(fleet, t), ready_count, store)
        if wanted != spec_replicas:
            events.append((t0, spec_replicas, wanted))
            spec_replicas = wanted
        # 2. fleet
        fleet.scale_to(spec_replicas, t0)
        cut += fleet.finish_terminations(t0, req)
        fleet.release_gateway(t0, req)
        # 3. route
        endpoints = fleet.routable(t0)
        arrivals_from = next_arrival
        next_arrival = int(np.searchsorted(req.arrival_s, t1, side="left"))
        fleet.route_all(range(arrivals_from, next_arrival), t0, req, endpoints)
        # 4. serve
        if counters.shape[0] < len(fleet.uid):
            counters = np.vstack([counters, np.zeros((len(fleet.uid) - counters.shape[0], 4))])
            busy = np.concatenate([busy, np.zeros(len(fleet.uid) - busy.shape[0])])
        serving = fleet.serving(t0)
        for p in serving:
            tick = advance_replica(t0, dt, fleet.running[p], fleet.waiting[p], req, spec.replica,
                                   stop_s=fleet.stop_s[p] if not math.isnan(fleet.stop_s[p]) else math.inf)
            counters[p] += (len(tick.completed), tick.generated_tokens, tick.prompt_tokens, tick.preemptions)
            busy[p] = tick.busy_s / dt
            preemptions += tick.preemptions
        # 5. scrape
        scraped = fleet.serving(t1)
        if (k + 1) % scrape_every == 0:
            values = np.array([
                [len(fleet.running[p]), len(fleet.waiting[p]), kv_usage_frac(fleet.running[p], req, spec.replica),
                 100.0 * busy[p], *counters[p]]
                for p in scraped
            ]).reshape(len(scraped), len(COLUMNS))
            store.record(t1, scraped, values, [p for p in range(len(fleet.uid)) if math.isnan(fleet.removed_s[p])])
        # 6. record
        waiting = sum(len(fleet.waiting[p]) for p in scraped) + len(fleet.gateway)
        running = sum(len(fleet.running[p]) for p in scraped)
        ready_now = len(fleet.routable(t1))
        demand_tps = float(req.output_tokens[arrivals_from:next_arrival].sum()) / dt
        signal = control.signal(store, t1)
        rows.append((t1, demand_tps, ready_now * capacity_tps, running, waiting, spec_replicas, ready_now,
                     len(fleet.live()), math.nan if signal is None else signal))
    end_s = n_ticks * dt
    cut += fleet.finish_terminations(end_s, req)
    return _outcome(req, fleet, spec, events, rows, cut, preemptions, end_s)


def _outcome(req: RequestState, fleet: Fleet, spec: FleetSpec, events, rows, cut: int, preemptions: int,
             end_s: float) -> Outcome:
    series = pd.DataFrame(rows, columns=["t_s", "demand_tps", "ready_capacity_tps", "running", "waiting",
                                         "replicas_requested", "replicas_ready", "replicas_live", "signal"])
    ttft_s, itl_ms = request_latencies(req)
    met = slo_met(req, spec.ttft_slo_s, spec.itl_slo_ms)
    gpu_hours = fleet.gpu_hours(end_s)
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
        cost_usd=gpu_hours * spec.usd_per_gpu_hour,
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
    )

