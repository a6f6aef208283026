"""The ``fast`` engine: the reference engine's model, run for many configurations in one pass.

It computes exactly what :mod:`planner.simulate.reference` computes (the
differential test in ``tests/test_simulate_fast.py`` holds it to that:
identical scale events and replica trajectories, attainment and cost within
1e-9), and gets there with less work:

* **shared across configurations** (computed once per trace, as arrays over
  ticks): which requests arrive in each tick (``searchsorted``), the demand
  column, and which ticks a controller is due on;
* **per configuration, a struct of arrays** over its pods, kept up to date as
  pods come and go, so the Service's endpoints, the live pods and the serving
  pods are found without walking every pod ever created, every tick (the
  reference walks them all; a day of autoscaling creates hundreds);
* **idle work skipped**: a pod holding no request is not advanced (the
  replica model does nothing for it, bit for bit), the controller's pod list
  is built only on its sync ticks, and a signal with no range function is
  evaluated once per scrape instead of once per tick;
* configurations advance in lockstep, tick by tick, so a sweep holds one
  trace and one set of tick arrays for all of them.

The replica model (:func:`planner.simulate.replica.advance_replica`), the
routing, drain and deletion order (:class:`planner.simulate.fleet.Fleet`),
the simulated Prometheus and the controllers
(:class:`planner.simulate.control.Control`, which drives
:class:`planner.hpa_controller.HorizontalController` and
:class:`planner.keda.KedaController`) are the reference's own code: the
decisions are the scalar controllers' for every manifest feature, so nothing
the reference accepts is approximated here. What is *not* vectorised: the
per-request batching inside a replica and the controller decisions, which run
once per configuration on its sync ticks.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from planner.errors import PlannerInputError
from planner.readers.manifest import Autoscaler
from planner.simulate.control import Control
from planner.simulate.fleet import Fleet, FleetSpec
from planner.simulate.metrics import COLUMNS, STALENESS_S, MetricStore
from planner.simulate.outcome import Outcome
from planner.simulate.reference import DRAIN_TAIL_S, _outcome, controller_pods
from planner.simulate.replica import CUT, ReplicaTick, RequestState, advance_replica, kv_usage_frac
from planner.simulate.traffic import RequestTrace
from planner.step_time import output_throughput_tps

__all__ = ["Configuration", "simulate", "simulate_many"]

SERIES_COLUMNS = ("t_s", "demand_tps", "ready_capacity_tps", "running", "waiting", "replicas_requested",
                  "replicas_ready", "replicas_live", "signal")
_IDLE = ReplicaTick(0.0, (), 0.0, 0, 0)


@dataclass(frozen=True)
class Configuration:
    """One autoscaler and fleet to simulate."""

    autoscaler: Autoscaler
    fleet: FleetSpec = field(default_factory=FleetSpec)


class _IndexedFleet(Fleet):
    """The reference :class:`Fleet` with its pod sets kept as it changes instead of rebuilt per call.

    ``_live`` (not terminating), ``_up`` (not yet removed) and ``_terminating``
    (deleted, not removed) are ascending pod lists, so every answer is the one
    the reference's full scan gives, in the same order.
    """

    def __post_init__(self) -> None:
        super().__post_init__()
        self._live: list[int] = []
        self._up: list[int] = []
        self._terminating: list[int] = []

    def live(self) -> list[int]:
        return list(self._live)

    def routable(self, now_s: float) -> list[int]:
        ready_s = self.ready_s
        return [p for p in self._live if ready_s[p] <= now_s]

    def serving(self, now_s: float) -> list[int]:
        ready_s = self.ready_s
        return [p for p in self._up if ready_s[p] <= now_s]

    def existing(self) -> list[int]:
        """Pods not yet removed (what ``kube_pod_info`` counts)."""
        return list(self._up)

    def add_pod(self, now_s: float, *, warm: bool = False) -> int:
        p = super().add_pod(now_s, warm=warm)
        self._live.append(p)
        self._up.append(p)
        return p

    def delete_pod(self, p: int, now_s: float) -> None:
        super().delete_pod(p, now_s)
        self._live.remove(p)
        self._terminating.append(p)
        self._terminating.sort()

    def finish_terminations(self, now_s: float, req: RequestState) -> int:
        # The reference's rule, applied to the terminating pods only (no other pod can change).
        cut = 0
        for p in list(self._terminating):
            held = self.running[p] or self.waiting[p]
            if not held and now_s >= self.sigterm_s[p]:
                last_done = max((req.done_s[i] for i in self._served_by(p, req)), default=self.sigterm_s[p])
                self.removed_s[p] = min(max(self.sigterm_s[p], last_done), now_s)
            elif now_s >= self.stop_s[p]:
                for i in list(self.running[p]) + list(self.waiting[p]):
                    req.status[i] = CUT
                    cut += 1
                self.running[p].clear()
                self.waiting[p].clear()
                self.removed_s[p] = self.stop_s[p]
            else:
                continue
            self._terminating.remove(p)
            self._up.remove(p)
        return cut


def _has_range(node: tuple) -> bool:
    if node[0] == "range":
        return True
    return any(isinstance(child, tuple) and _has_range(child) for child in node[1:])


class _Run:
    """One configuration's state while the engine runs."""

    def __init__(self, config: Configuration, trace: RequestTrace, keep: np.ndarray) -> None:
        spec = config.fleet
        self.spec = spec
        self.req = RequestState(trace.arrival_s[keep], trace.input_tokens[keep], trace.output_tokens[keep])
        self.control = Control(config.autoscaler, spec.signal_map, spec.hpa_sync_period_s)
        self.fleet = _IndexedFleet(spec)
        initial = spec.initial_replicas
        if initial is None:
            initial = max(self.control.min_replicas, 1) if self.control.min_replicas > 0 else 0
        for _ in range(initial):
            self.fleet.add_pod(0.0, warm=True)
        self.spec_replicas = initial
        self.store = MetricStore()
        self.counters = np.zeros((0, 4))
        self.busy = np.zeros(0)
        self.events: list[tuple[float, int, int]] = []
        self.cut = 0
        self.preemptions = 0
        self.capacity_tps = float(output_throughput_tps(spec.replica.max_num_seqs, spec.replica.fixed_ms,
                                                        spec.replica.per_sequence_ms))
        self.signal_query = self._signal_query()
        self.signal_cache: tuple[int, bool, float] | None = None

    def _signal_query(self):
        # The query behind the chart's signal column, when its value can only change at a scrape.
        control = self.control
        if control.keda is not None:
            query = control.queries.get(min(control.queries)) if control.queries else None
        else:
            query = control.metric_queries[0][1] if control.metric_queries else None
        if query is None or _has_range(query.node):
            return None
        return query

    def signal(self, now_s: float) -> float:
        store = self.store
        if self.signal_query is not None:
            k = store._last_index(now_s)
            stale = k < 0 or now_s - store.times_s[k] > STALENESS_S
            if self.signal_cache is not None and self.signal_cache[:2] == (k, stale):
                return self.signal_cache[2]
        value = self.control.signal(store, now_s)
        value = math.nan if value is None else value
        if self.signal_query is not None:
            self.signal_cache = (k, stale, value)
        return value


def simulate(trace: RequestTrace, autoscaler: Autoscaler, fleet_spec: FleetSpec | None = None, *,
             duration_s: float | None = None) -> Outcome:
    """Replay ``trace`` through a fleet scaled by ``autoscaler`` (same contract as the reference engine).

    Parameters
    ----------
    trace : RequestTrace
    autoscaler : Autoscaler
    fleet_spec : FleetSpec, optional
    duration_s : float, optional
        Simulated time; default the last arrival plus :data:`DRAIN_TAIL_S`. [s]

    Returns
    -------
    Outcome
        With ``engine == "fast"``.
    """
    return simulate_many(trace, [Configuration(autoscaler, fleet_spec or FleetSpec())], duration_s=duration_s)[0]


def simulate_many(trace: RequestTrace, configurations: Sequence[Configuration], *,
                  duration_s: float | None = None,
                  on_tick: Callable[[int, int], None] | None = None) -> list[Outcome]:
    """Replay ``trace`` once for each configuration, all advancing tick by tick together.

    Parameters
    ----------
    trace : RequestTrace
    configurations : sequence of Configuration
        All must share ``tick_s`` (the lockstep clock).
    duration_s : float, optional
        Simulated time for every configuration. [s]
    on_tick : callable, optional
        Called as ``on_tick(done_ticks, total_ticks)`` every 1000 ticks and at the end (progress bars).

    Returns
    -------
    list of Outcome
        One per configuration, in order.
    """
    if len(trace) == 0:
        raise PlannerInputError(f"{trace.source or 'trace'}: the trace has no requests")
    if not configurations:
        return []
    dt = configurations[0].fleet.tick_s
    for index, config in enumerate(configurations):
        if config.fleet.tick_s != dt:
            raise PlannerInputError(f"configuration {index}: tick_s {config.fleet.tick_s} differs from "
                                    f"{dt}; configurations simulated together share one tick")
    if duration_s is None:
        duration_s = math.ceil(trace.duration_s) + DRAIN_TAIL_S
    if not duration_s > 0:
        raise PlannerInputError(f"duration_s: expected a number > 0, got {duration_s!r}")
    keep = trace.arrival_s < duration_s
    runs = [_Run(config, trace, keep) for config in configurations]
    n_ticks = math.ceil(duration_s / dt - 1e-9)
    # Shared over configurations: the requests arriving in each tick, and the demand they bring.
    arrival_s = trace.arrival_s[keep]
    tick_end_s = np.arange(1, n_ticks + 1, dtype=float) * dt
    upto = np.searchsorted(arrival_s, tick_end_s, side="left")
    output_cumsum = np.concatenate([[0], np.cumsum(trace.output_tokens[keep], dtype=np.int64)])
    demand_tps = (output_cumsum[upto] - output_cumsum[np.concatenate([[0], upto[:-1]])]) / dt
    series = [np.empty((n_ticks, len(SERIES_COLUMNS))) for _ in runs]
    starts = np.concatenate([[0], upto[:-1]])
    for k in range(n_ticks):
        t0 = k * dt
        t1 = (k + 1) * dt
        first, last = int(starts[k]), int(upto[k])
        for run, rows in zip(runs, series, strict=True):
            _tick(run, k, t0, t1, dt, first, last, rows, float(demand_tps[k]))
        if on_tick is not None and ((k + 1) % 1000 == 0 or k + 1 == n_ticks):
            on_tick(k + 1, n_ticks)
    end_s = n_ticks * dt
    outcomes = []
    for run, rows in zip(runs, series, strict=True):
        run.cut += run.fleet.finish_terminations(end_s, run.req)
        outcomes.append(_finish(run, rows, end_s))
    return outcomes


def _tick(run: _Run, k: int, t0: float, t1: float, dt: float, first: int, last: int, rows: np.ndarray,
          demand: float) -> None:
    # The reference engine's six steps for one configuration and one tick.
    spec, fleet, req, control, store = run.spec, run.fleet, run.req, run.control, run.store
    # 1. control (only on the ticks a controller runs: otherwise it returns spec.replicas unchanged)
    poll, reconcile = control.is_due(t0, dt)
    if poll or reconcile:
        ready_count = sum(1 for p in fleet._live if fleet.ready_s[p] <= t0)
        wanted = control.decide(t0, dt, run.spec_replicas, lambda: controller_pods(fleet, t0), ready_count, store)
        if wanted != run.spec_replicas:
            run.events.append((t0, run.spec_replicas, wanted))
            run.spec_replicas = wanted
    # 2. fleet
    fleet.scale_to(run.spec_replicas, t0)
    if fleet._terminating:
        run.cut += fleet.finish_terminations(t0, req)
    if fleet.gateway:
        fleet.release_gateway(t0, req)
    # 3. route
    if last > first:
        endpoints = fleet.routable(t0)
        for i in range(first, last):
            fleet.route(i, req.arrival_s[i], req, endpoints)
    # 4. serve
    grow = len(fleet.uid) - run.counters.shape[0]
    if grow > 0:
        run.counters = np.vstack([run.counters, np.zeros((grow, 4))])
        run.busy = np.concatenate([run.busy, np.zeros(grow)])
    counters, busy = run.counters, run.busy
    for p in fleet.serving(t0):
        if fleet.running[p] or fleet.waiting[p]:
            stop_s = fleet.stop_s[p]
            tick = advance_replica(t0, dt, fleet.running[p], fleet.waiting[p], req, spec.replica,
                                   stop_s=stop_s if not math.isnan(stop_s) else math.inf)
            counters[p] += (len(tick.completed), tick.generated_tokens, tick.prompt_tokens, tick.preemptions)
            busy[p] = tick.busy_s / dt
            run.preemptions += tick.preemptions
        else:
            counters[p] += (0, 0.0, 0, 0)
            busy[p] = 0.0
    # 5. scrape
    scraped = fleet.serving(t1)
    if (k + 1) % max(round(spec.scrape_interval_s / dt), 1) == 0:
        values = np.array([
            [len(fleet.running[p]), len(fleet.waiting[p]), kv_usage_frac(fleet.running[p], req, spec.replica),
             100.0 * busy[p], *counters[p]]
            for p in scraped
        ]).reshape(len(scraped), len(COLUMNS))
        store.record(t1, scraped, values, fleet.existing())
    # 6. record
    waiting = sum(len(fleet.waiting[p]) for p in scraped) + len(fleet.gateway)
    running = sum(len(fleet.running[p]) for p in scraped)
    ready_now = len(fleet.routable(t1))
    rows[k] = (t1, demand, ready_now * run.capacity_tps, running, waiting, run.spec_replicas, ready_now,
               len(fleet._live), run.signal(t1))


def _finish(run: _Run, rows: np.ndarray, end_s: float) -> Outcome:
    # The reference's outcome, from the same per-tick rows (integer columns as integers).
    columns = {}
    for c, name in enumerate(SERIES_COLUMNS):
        column = rows[:, c]
        columns[name] = column if name in ("t_s", "demand_tps", "ready_capacity_tps", "signal") else (
            column.astype(np.int64))
    series = pd.DataFrame(columns)
    rows_list = list(series.itertuples(index=False, name=None))
    outcome = _outcome(run.req, run.fleet, run.spec, run.events, rows_list, run.cut, run.preemptions, end_s)
    return _with_engine(outcome)


def _with_engine(outcome: Outcome) -> Outcome:
    from dataclasses import replace

    return replace(outcome, engine="fast")
