"""The ``lockstep`` engine: the reference's code for many configurations in one pass (the fast engine's fallback).

It computes exactly what :mod:`planner.simulate.reference` computes (the
differential test in ``tests/simulate/fast/test_simulate_fast.py`` holds it to that:
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
  trace and one set of tick arrays for all of them;
* **each replica's tick compiled**: the reference's serve step hands each pod
  to :class:`planner.simulate.fast.replica.ListReplica`, the compiled replica
  kernel behind the Python model's list and deque, bit for bit the same
  (``tests/simulate/fast/test_simulate_fast_replica.py``). Batching was more
  than half of this engine's time; with it compiled, the forecasts' replays run
  about twice as fast.

The routing, drain and deletion order (:class:`planner.simulate.fleet.Fleet`),
the simulated Prometheus and the controllers
(:class:`planner.simulate.control.Control`, which drives
:class:`planner.autoscaler.horizontal.HorizontalController` and
:class:`planner.autoscaler.keda.KedaController`) are the reference's own code: the
decisions are the scalar controllers' for every manifest feature, so nothing
the reference accepts is approximated here. What is *not* vectorised: the
controller decisions, which run once per configuration on its sync ticks.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import numpy as np

from planner.autoscaler.spec import Autoscaler
from planner.capacity.step_time import output_throughput_tps
from planner.errors import PlannerInputError
from planner.simulate.control import Control
from planner.simulate.fast.replica import ListReplica
from planner.simulate.fleet import Fleet, FleetSpec
from planner.simulate.metrics import STALENESS_S, MetricStore, depends_on_time
from planner.simulate.outcome import Outcome
from planner.simulate.reference import (
    DRAIN_TAIL_S,
    RunState,
    _check_cadence,
    _check_node_quota,
    _outcome,
    control_step,
    fleet_step,
    record_step,
    route_step,
    scrape_step,
    serve_step,
)
from planner.simulate.replica import RequestState
from planner.simulate.traffic import RequestTrace

__all__ = ["Configuration", "ReplayWindow", "replay_window", "simulate", "simulate_many"]


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
        # Only a terminating pod can exit: with none, the reference's scan changes nothing.
        if not self._terminating:
            return 0
        cut = super().finish_terminations(now_s, req)
        for p in [p for p in self._terminating if not math.isnan(self.removed_s[p])]:
            self._terminating.remove(p)
            self._up.remove(p)
        return cut


def _has_range(node: tuple) -> bool:
    # A range function, an offset or a subquery: the value moves between scrapes.
    return depends_on_time(node)


class _SignalCachingControl(Control):
    """The reference :class:`Control`, with the chart's signal evaluated once per scrape when it can be.

    A query without a range function reads only the latest scrape (and whether
    it is stale), so between scrapes its value cannot change; one with
    ``rate``/``*_over_time`` depends on the time itself and is evaluated every tick.
    """

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        if self.keda is not None:
            query = self.queries.get(min(self.queries)) if self.queries else None
        else:
            query = self.metric_queries[0][1] if self.metric_queries else None
        self._cacheable = query is not None and not _has_range(query.node)
        self._cached: tuple[int, bool, float | None] | None = None

    def signal(self, store: MetricStore, now_s: float) -> float | None:
        if not self._cacheable:
            return super().signal(store, now_s)
        k = store._last_index(now_s)
        stale = k < 0 or now_s - store.times_s[k] > STALENESS_S
        if self._cached is None or self._cached[:2] != (k, stale):
            self._cached = (k, stale, super().signal(store, now_s))
        return self._cached[2]


def simulate(
    trace: RequestTrace, autoscaler: Autoscaler, fleet_spec: FleetSpec | None = None, *, duration_s: float | None = None
) -> Outcome:
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


def _start(config: Configuration, req_arrays: tuple[np.ndarray, np.ndarray, np.ndarray]) -> RunState:
    # As the reference starts a run: the controller, the request arrays, the initial Ready pods.
    spec = config.fleet
    control = _SignalCachingControl(config.autoscaler, spec.signal_map, spec.hpa_sync_period_s, spec.start_epoch_s)
    _check_cadence(control, spec)
    _check_node_quota(control, spec)
    state = RunState(spec, control, RequestState(*req_arrays), _IndexedFleet(spec))
    initial = spec.initial_replicas
    if initial is None:
        initial = control.min_replicas
    for _ in range(initial):
        state.fleet.add_pod(0.0, warm=True)
    state.spec_replicas = initial
    return state


def simulate_many(
    trace: RequestTrace,
    configurations: Sequence[Configuration],
    *,
    duration_s: float | None = None,
    on_tick: Callable[[int, int], None] | None = None,
) -> list[Outcome]:
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
    window = replay_window(trace, configurations, duration_s)
    if window is None:
        return []
    dt, n_ticks = window.tick_s, window.n_ticks
    states = [_start(config, window.arrays) for config in configurations]
    serve = [ListReplica(state.spec.replica, len(state.req)) for state in states]
    # Shared by every configuration: the tick at which each controller and scrape is due.
    ticks = np.arange(n_ticks)
    scrape_due = [(ticks + 1) % round(s.spec.scrape_interval_s / dt) == 0 for s in states]
    control_due = [_due_ticks(s.control, dt, n_ticks) for s in states]
    capacity_tps = [
        float(
            output_throughput_tps(s.spec.replica.max_num_seqs, s.spec.replica.fixed_ms, s.spec.replica.per_sequence_ms)
        )
        for s in states
    ]
    for k in range(n_ticks):
        t0_s, t1_s = k * dt, (k + 1) * dt
        for c, state in enumerate(states):
            if control_due[c][k]:
                control_step(state, t0_s)
            fleet_step(state, t0_s)
            arrived = route_step(state, t0_s, t1_s)
            serve_step(state, t0_s, serve[c].advance)
            if scrape_due[c][k]:
                scrape_step(state, t1_s)
            record_step(state, t1_s, arrived, capacity_tps[c])
        if on_tick is not None and ((k + 1) % 1000 == 0 or k + 1 == n_ticks):
            on_tick(k + 1, n_ticks)
    end_s = n_ticks * dt
    outcomes = []
    for state in states:
        state.fleet.finish_terminations(end_s, state.req)
        outcome = _outcome(
            state.req, state.fleet, state.spec, state.events, state.rows, state.preemptions, end_s, state.supply_rows
        )
        outcomes.append(dataclasses.replace(outcome, engine="fast"))
    return outcomes


@dataclass(frozen=True)
class ReplayWindow:
    """What the configurations of one run share.

    Attributes
    ----------
    arrays : tuple of numpy.ndarray
        Arrival [s], input and output tokens of the requests that arrive
        before ``duration_s``.
    tick_s : float
        The common tick. [s]
    duration_s : float
        Simulated time. [s]
    n_ticks : int
        Ticks that cover ``duration_s``.
    """

    arrays: tuple[np.ndarray, np.ndarray, np.ndarray]
    tick_s: float
    duration_s: float
    n_ticks: int


def replay_window(
    trace: RequestTrace, configurations: Sequence[Configuration], duration_s: float | None
) -> ReplayWindow | None:
    """Check a run's inputs and cut the trace to its window (``None`` when there are no configurations).

    Raises :class:`PlannerInputError` for an empty trace, configurations
    with different ticks, or a duration that is not a finite number > 0.
    """
    if len(trace) == 0:
        raise PlannerInputError(f"{trace.source or 'trace'}: the trace has no requests")
    if not configurations:
        return None
    dt = configurations[0].fleet.tick_s
    for index, config in enumerate(configurations):
        if config.fleet.tick_s != dt:
            raise PlannerInputError(
                f"configuration {index}: tick_s {config.fleet.tick_s} differs from "
                f"{dt}; configurations simulated together share one tick"
            )
    if duration_s is None:
        duration_s = math.ceil(trace.duration_s) + DRAIN_TAIL_S
    if not (math.isfinite(duration_s) and duration_s > 0):
        raise PlannerInputError(f"duration_s: expected a finite number > 0, got {duration_s!r}")
    # Arrivals are sorted, so the window is a prefix: views, not copies (a week is millions of requests).
    keep = int(np.searchsorted(trace.arrival_s, duration_s, side="left"))
    arrays = (trace.arrival_s[:keep], trace.input_tokens[:keep], trace.output_tokens[:keep])
    return ReplayWindow(arrays, dt, duration_s, math.ceil(duration_s / dt - 1e-9))


def _due_ticks(control: Control, dt: float, n_ticks: int) -> np.ndarray:
    # Control.is_due for every tick start at once: on the other ticks decide() changes nothing.
    return np.array([any(control.is_due(k * dt, dt)) for k in range(n_ticks)], dtype=bool)
