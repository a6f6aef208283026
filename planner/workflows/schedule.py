"""The ``schedule`` module derives a weekly set of KEDA cron triggers from traffic, and proves it by replay.

A metric trigger reacts to load it can already see, so every rise in traffic waits a cold start
for its replicas. Traffic that rises at the same hours every week can be met ahead of time: a
KEDA ``cron`` trigger holds a replica floor through a window (:mod:`planner.autoscaler.cron_scaler`)
and the metric trigger beside it still takes the fleet higher. :func:`make_schedule` writes those
windows for a trace, a fleet and a metric trigger (the team's ScaledObject, or the one
:func:`default_scaling_plan` writes), and replays them.

How the minimums are derived
----------------------------
Time is cut into **buckets** of the local wall clock in the schedule's zone: weekday x hour
(168 buckets) when the trace covers a week or more, else hour of the day (24, every day alike).
Simulated time 0 is the fleet's ``start_epoch_s`` (Monday 00:00 UTC unless ``--start`` moves it).

1. **From the traffic.** The oracle's cold-start bound (:func:`planner.simulate.oracle.oracle_bound`)
   gives, for every 15-minute window, the replicas any run must average there to serve every
   request in time (tokens at the replica's best rate, seats, KV blocks). A bucket's first
   minimum is that need in its busiest window, rounded up, and at most ``maxReplicaCount``; over
   several weeks, the busiest of its occurrences. Being a lower bound on what any fleet must
   run, it never pins capacity above what the traffic needs at that hour.
2. **Early by a cold start.** A replica serves its first request ``T`` after it is requested: the
   fleet's time to Ready (with a node pool, a new node's), plus one HPA sync for the cron metric
   to be read. So each rise of the floor starts ``T`` early, rounded up to whole minutes (cron's
   resolution): the floor in force at minute ``m`` is the larger of the bucket's and that of the
   bucket ``T`` ahead. A fall is not moved: the requests of the busier hour still need its
   replicas until it ends.
3. **Windows.** Minutes of equal floor are merged into windows; floors at or below the
   autoscaler's own minimum need none. A window that recurs every listed day at the same time
   (every weekday, say) becomes one trigger whose day-of-week field lists the days
   (``0 8 * * 1-5``); windows never overlap, so ``planner lint`` finds no ``cron-overlap``.
4. **Verified by replay.** The ScaledObject as written (cron triggers and the metric trigger)
   is read back and replayed through the simulator, the same engine and controllers as
   ``planner simulate``. Where the goal is missed, the minimums are raised in the buckets with
   the most missed requests (by arrival), as few as together hold twice the shortfall: each by a
   quarter of its gap to the most replicas the fleet asked for there in that replay, at least
   one (the metric trigger's own level bounds what a floor needs; small steps keep the floors
   cheap, a quarter of the gap reaches that level in a few rounds). The replay repeats, at most
   ``max_rounds`` times. A bucket whose raise did not cut its
   misses is raised no further (its misses come from elsewhere: a burst, a scale-down that cut
   generations, a request no fleet serves in time).

Why replay, not arithmetic: the floors meet a controller with a tolerance, stabilization
windows, scale-up policies and polling, a fleet with cold starts and drains, and a metric trigger
that scales on top. Only the simulator composes them as Kubernetes and KEDA do; the oracle's
need ignores all of them, so it is where the search starts, and the replay is where it ends.

Limits
------
* The schedule is fitted to the replayed trace: a stretched week is one draw of the envelope
  (:class:`planner.simulate.traffic.WeeklyEnvelope`), and next week's traffic differs; holidays
  and trends are not in it. Re-derive it from recent weeks.
* Raising the buckets that miss most is greedy, not the cheapest schedule that meets the goal,
  and a bounded number of rounds may stop short (the result says so).
* Weekdays whose traffic differs (a stretched week's days differ by their noise) get floors of
  their own, so a noisy week is written as many triggers; only windows equal on several days
  collapse into one.
* Buckets the trace does not cover get no window; a trace shorter than a week gives a daily
  schedule (every day alike), weekends included.
* Daylight saving: buckets and windows are local wall-clock time, as cron reads them; around a
  change, an hour is skipped or repeated as robfig/cron does.
* Each round replays the whole trace. The fast engine's kernels run cron triggers beside a
  metric trigger (a week of the Azure conversation trace in seconds); a ScaledObject they do not
  cover (a ``scalingModifiers`` formula, a forecast's subquery) replays in the lockstep engine,
  minutes per simulated day.

Nothing here reads files or the clock.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime

import numpy as np
import yaml

from planner.autoscaler.cron_schedule import load_location, timezone_problem
from planner.autoscaler.spec import Autoscaler
from planner.capacity.headroom import target_for_step
from planner.dynamics.cold_start import pods_per_node
from planner.errors import PlannerInputError
from planner.manifests.generate import (
    CronWindow,
    GeneratedManifest,
    ScalingPlan,
    generate_manifests,
    pod_matcher,
    scheduled_scaled_object,
)
from planner.manifests.lint import Finding, LintSettings, ReplicaSupply, lint
from planner.manifests.writer import dump_manifest
from planner.readers.manifest import autoscaler_from_document
from planner.readers.workload import manifest_set_from_texts
from planner.simulate import simulate
from planner.simulate.fleet import FleetSpec
from planner.simulate.oracle import OracleBound, missed_at, oracle_bound
from planner.simulate.outcome import Outcome
from planner.simulate.traffic import RequestTrace

__all__ = [
    "DEFAULT_ATTAINMENT_GOAL",
    "DEFAULT_MAX_ROUNDS",
    "DEFAULT_TIMEZONE",
    "Buckets",
    "Replay",
    "Round",
    "Schedule",
    "calendar_buckets",
    "cron_windows",
    "default_scaling_plan",
    "effective_floors",
    "lead_s",
    "make_schedule",
    "minute_of",
    "minute_positions",
    "oracle_floors",
    "zone_problem",
]

DEFAULT_ATTAINMENT_GOAL = 0.95
"""Share of requests that must meet the objective unless the caller says otherwise. [fraction]"""
DEFAULT_MAX_ROUNDS = 8
"""Replays of the schedule at most: the first, and up to seven rounds of raised minimums."""
DEFAULT_TIMEZONE = "UTC"
"""The zone the windows are written in unless the caller names one (IANA)."""
DEFAULT_GROWTH_FRAC = 0.2
"""Growth in load during one warmup the default metric trigger's target absorbs (as ``planner knee``). [fraction]"""

MINUTES_PER_HOUR = 60
MINUTES_PER_DAY = 1440
MINUTES_PER_WEEK = 7 * MINUTES_PER_DAY
_SECONDS_PER_MINUTE = 60.0
_CRON_DAYS = ("1", "2", "3", "4", "5", "6", "0")  # Monday first, as datetime.weekday() counts; cron's Sunday is 0


@dataclass(frozen=True)
class Replay:
    """One way of running the fleet on the trace, priced.

    Attributes
    ----------
    name : str
        ``schedule + metric``, ``reactive only`` or ``oracle``.
    gpu_hours : float
        [GPU-h]
    cost_usd : float
        [$]
    slo_attainment_frac : float
        The oracle's is the goal it is computed at. [fraction]
    outcome : Outcome or None
        The simulated run (``None`` for the oracle).
    """

    name: str
    gpu_hours: float
    cost_usd: float
    slo_attainment_frac: float
    outcome: Outcome | None = None

    def summary(self) -> dict:
        return {
            "gpu_hours": self.gpu_hours,
            "cost_usd": self.cost_usd,
            "slo_attainment_frac": self.slo_attainment_frac,
        }


@dataclass(frozen=True)
class Round:
    """One replay of the search.

    Attributes
    ----------
    floors : tuple of int
        The minimum of every bucket. [replicas]
    triggers : int
        Cron triggers written.
    slo_attainment_frac, cost_usd : float
        The replay's. [fraction], [$]
    raised : tuple of int
        Buckets raised by one after this replay (empty on the last).
    """

    floors: tuple[int, ...]
    triggers: int
    slo_attainment_frac: float
    cost_usd: float
    raised: tuple[int, ...] = ()


@dataclass(frozen=True)
class Schedule:
    """A weekly (or daily) schedule of replica floors, the ScaledObject that carries it, and its replay.

    Attributes
    ----------
    windows : tuple of CronWindow
        One KEDA cron trigger each, in the order written.
    floors : tuple of int
        The minimum of every bucket: 168 (Monday 00:00 first) with ``by_weekday``, else 24. [replicas]
    by_weekday : bool
        Buckets are weekday x hour (the trace covers a week), else hour of the day.
    timezone : str
        IANA zone of the buckets and the windows.
    lead_s : float
        How far ahead of its bucket a rise of the floor starts (whole minutes). [s]
    base_replicas, max_replicas : int
        The metric trigger's own minimum and maximum. [replicas]
    scaled_object_text : str
        The ScaledObject YAML: the metric trigger and the cron triggers.
    scheduled, reactive, oracle : Replay
        The schedule with the metric trigger, the metric trigger alone, and the oracle's cold-start bound
        (:mod:`planner.simulate.oracle`) at the goal.
    bound : OracleBound
    attainment_goal_frac : float
        [fraction]
    met : bool
        The schedule's replay meets the goal.
    reason : str
        One or two sentences: how the search ended.
    rounds : tuple of Round
    findings : tuple of Finding
        ``planner lint`` on the ScaledObject (with the fleet's cold start).
    """

    windows: tuple[CronWindow, ...]
    floors: tuple[int, ...]
    by_weekday: bool
    timezone: str
    lead_s: float
    base_replicas: int
    max_replicas: int
    scaled_object_text: str
    scheduled: Replay
    reactive: Replay
    oracle: Replay
    bound: OracleBound
    attainment_goal_frac: float
    met: bool
    reason: str
    rounds: tuple[Round, ...]
    findings: tuple[Finding, ...] = ()

    @property
    def comparison(self) -> tuple[Replay, Replay, Replay]:
        """The three rows of the table: schedule + metric, reactive only, oracle."""
        return self.scheduled, self.reactive, self.oracle

    def floor_at(self, weekday: int, hour: int) -> int:
        """The minimum of a bucket; ``weekday`` 0 is Monday (ignored for a daily schedule). [replicas]"""
        return self.floors[weekday * 24 + hour] if self.by_weekday else self.floors[hour]

    def summary(self) -> dict:
        """JSON-ready: the triggers, the three rows, the search and the lint findings."""
        return {
            "attainment_goal_frac": self.attainment_goal_frac,
            "met": self.met,
            "reason": self.reason,
            "timezone": self.timezone,
            "buckets": "weekday x hour" if self.by_weekday else "hour of day",
            "lead_s": self.lead_s,
            "triggers": [
                {
                    "start": w.start,
                    "end": w.end,
                    "timezone": w.timezone,
                    "desired_replicas": w.desired_replicas,
                }
                for w in self.windows
            ],
            "floors": list(self.floors),
            "scheduled": self.scheduled.summary(),
            "reactive": self.reactive.summary(),
            "oracle": self.oracle.summary(),
            "rounds": [
                {
                    "triggers": r.triggers,
                    "slo_attainment_frac": r.slo_attainment_frac,
                    "cost_usd": r.cost_usd,
                    "raised_buckets": len(r.raised),
                }
                for r in self.rounds
            ],
            "findings": [f.as_dict() for f in self.findings],
            "scaled_object": self.scaled_object_text,
        }


# --------------------------------------------------------------------------- the calendar


def minute_positions(start_epoch_s: float, minutes: int, timezone: str, cycle_minutes: int) -> np.ndarray:
    """Where each wall-clock minute of a replay falls in the local week (or day), in minutes.

    Minute ``k`` is the one holding simulated time ``t`` with ``floor((start + t) / 60) -
    floor(start / 60) = k``; its position is ``weekday x 1440 + hour x 60 + minute`` of local time in
    ``timezone`` (Monday 0), modulo ``cycle_minutes`` (10080 for a week, 1440 for a day).

    Parameters
    ----------
    start_epoch_s : float
        Simulated time 0, UTC epoch. [s]
    minutes : int
        Minutes to place.
    timezone : str
        IANA zone.
    cycle_minutes : int
        :data:`MINUTES_PER_WEEK` or :data:`MINUTES_PER_DAY`.

    Returns
    -------
    numpy.ndarray of int
    """
    zone = load_location(timezone)
    first = math.floor(start_epoch_s / _SECONDS_PER_MINUTE)
    positions = np.empty(minutes, dtype=np.int64)
    for k in range(minutes):
        local = datetime.fromtimestamp((first + k) * _SECONDS_PER_MINUTE, zone)
        positions[k] = local.weekday() * MINUTES_PER_DAY + local.hour * MINUTES_PER_HOUR + local.minute
    return positions % cycle_minutes


def minute_of(t_s, start_epoch_s: float) -> np.ndarray:
    """The minute of the replay (the index :func:`minute_positions` places) holding each simulated time ``t_s`` [s]."""
    first = math.floor(start_epoch_s / _SECONDS_PER_MINUTE)
    return np.floor((start_epoch_s + np.asarray(t_s, dtype=float)) / _SECONDS_PER_MINUTE).astype(np.int64) - first


def zone_problem(timezone: str) -> str | None:
    """Why a schedule cannot be written in ``timezone``, or ``None``: an IANA zone Go loads, not ``Local`` or empty."""
    return timezone_problem(timezone) if timezone not in ("", "Local") else "name an IANA zone"


def lead_s(fleet: FleetSpec) -> float:
    """How far ahead a floor must rise: a new replica's time to Ready plus one HPA sync, in whole minutes. [s]

    With a node pool, a scheduled replica may need a node bought for it and the image pulled
    (:meth:`FleetSpec.time_to_ready_s` at the median of each phase); without, ``warmup_s``.
    """
    ready_s = fleet.time_to_ready_s(needs_node=fleet.nodes is not None, image_cached=False)
    return math.ceil((ready_s + fleet.hpa_sync_period_s) / _SECONDS_PER_MINUTE - 1e-9) * _SECONDS_PER_MINUTE


# --------------------------------------------------------------------------- floors -> windows


def effective_floors(floors: Sequence[int], lead_minutes: int) -> np.ndarray:
    """The floor in force at every minute of the cycle: the larger of the hour's and that ``lead_minutes`` ahead.

    Parameters
    ----------
    floors : sequence of int
        One per hour of the cycle (168 or 24). [replicas]
    lead_minutes : int
        [min]

    Returns
    -------
    numpy.ndarray of int
        One per minute of the cycle. [replicas]
    """
    by_minute = np.repeat(np.asarray(floors, dtype=np.int64), MINUTES_PER_HOUR)
    return np.maximum(by_minute, np.roll(by_minute, -int(lead_minutes)))


def _day_field(days: set[int]) -> str:
    """Days (Monday 0) as a cron day-of-week field: ``*``, ``1-5``, ``0,6``."""
    cron = sorted(int(_CRON_DAYS[d]) for d in days)
    if len(cron) == 7:
        return "*"
    parts, run = [], [cron[0]]
    for day in cron[1:]:
        if day == run[-1] + 1:
            run.append(day)
        else:
            parts.append(run)
            run = [day]
    parts.append(run)
    return ",".join(f"{r[0]}-{r[-1]}" if len(r) > 2 else ",".join(map(str, r)) for r in parts)


def cron_windows(floors: Sequence[int], base_replicas: int, lead_minutes: int, timezone: str) -> tuple[CronWindow, ...]:
    """The cron triggers that hold ``floors``, each rise ``lead_minutes`` early.

    Minutes of equal floor above ``base_replicas`` become windows; windows at the same time of day
    with the same length and floor become one trigger listing their days. A floor that never
    changes is split at the cycle's start and middle (cron needs ``start`` and ``end`` to differ).

    Parameters
    ----------
    floors : sequence of int
        168 (weekday x hour, Monday 00:00 first) or 24 (hour of the day). [replicas]
    base_replicas : int
        The autoscaler's own minimum: floors at or below it need no window. [replicas]
    lead_minutes : int
        [min]
    timezone : str
        IANA zone written into each trigger.

    Returns
    -------
    tuple of CronWindow
        In the order of their first start in the cycle.
    """
    if len(floors) not in (24, 168):
        raise PlannerInputError(f"floors: expected 24 or 168 hourly values, got {len(floors)}")
    weekly = len(floors) == 168
    cycle = MINUTES_PER_WEEK if weekly else MINUTES_PER_DAY
    level = effective_floors(floors, lead_minutes)
    changes = np.flatnonzero(level != np.roll(level, 1))
    if changes.size == 0:
        changes = np.array([0, cycle // 2])  # one floor all along: two windows that meet
    segments = []
    for i, at in enumerate(changes):
        begin, end = int(at), int(changes[(i + 1) % len(changes)])
        length = (end - begin) % cycle or cycle
        count = int(level[begin])
        if count > base_replicas:
            segments.append((begin, length, count))
    groups: dict[tuple[int, int, int], set[int]] = {}
    for begin, length, count in segments:
        groups.setdefault((begin % MINUTES_PER_DAY, length, count), set()).add(begin // MINUTES_PER_DAY)
    windows = []
    for (time_of_day, length, count), days in groups.items():
        stop = time_of_day + length
        start_days = _day_field(days) if weekly else "*"
        end_days = _day_field({(d + stop // MINUTES_PER_DAY) % 7 for d in days}) if weekly else "*"
        stop %= MINUTES_PER_DAY
        opens = f"{time_of_day % 60} {time_of_day // 60} * * {start_days}"
        closes = f"{stop % 60} {stop // 60} * * {end_days}"
        first = min(days) * MINUTES_PER_DAY + time_of_day
        windows.append((first, CronWindow(opens, closes, timezone, count)))
    return tuple(window for _, window in sorted(windows, key=lambda item: item[0]))


# --------------------------------------------------------------------------- the metric trigger


def default_scaling_plan(trace: RequestTrace, fleet: FleetSpec, *, target_name: str = "vllm") -> ScalingPlan:
    """The ScaledObject ``planner manifests`` would write for this fleet when the team has none.

    * in-flight target ``T = K / (1 + 0.2)``, the knee ``K`` being the replica's batch limit
      (``max_num_seqs``), or fewer where the KV cache holds fewer of the trace's mean request;
    * warmup: the fleet's time to Ready (a new node's, with a node pool);
    * ``maxReplicaCount``: the node quota's replicas with a capped node pool, else three times what
      the target asks for in the busiest minute (Little's law: the requests arriving there times
      each one's prefill and decode at a batch of ``T``, over the minute, over ``T``), at least 4:
      room for queues that build faster than replicas come, and for the floors.

    These are assumptions standing in for a load test; pass the team's own ScaledObject instead.
    """
    replica = fleet.replica
    mean_tokens = float(np.mean(trace.input_tokens + trace.output_tokens)) if len(trace) else 1.0
    knee = float(min(replica.max_num_seqs, max(replica.kv_tokens / max(mean_tokens, 1.0), 1.0)))
    target = round(float(target_for_step(knee, DEFAULT_GROWTH_FRAC)), 3)
    warmup_s = max(fleet.time_to_ready_s(needs_node=fleet.nodes is not None, image_cached=False), 1.0)
    nodes = fleet.nodes
    if nodes is not None and nodes.max_nodes is not None:
        max_replicas = max(1, nodes.max_nodes * pods_per_node(nodes.gpus_per_node, fleet.gpus_per_replica))
    else:
        max_replicas = max(4, math.ceil(3.0 * _busiest_in_flight(trace, fleet, target) / target))
    return ScalingPlan(
        target_name=target_name,
        concurrency_target=target,
        warmup_s=min(warmup_s, 3600.0),
        max_output_tokens=float(np.max(trace.output_tokens)) if len(trace) else 1.0,
        itl_ms=replica.step_s(replica.max_num_seqs) * 1000.0,
        max_replicas=max_replicas,
        max_num_seqs=replica.max_num_seqs if target < replica.max_num_seqs else None,
        label_matchers=(pod_matcher("Deployment", target_name),),
    )


_BUSY_WINDOW_S = 60.0


def _busiest_in_flight(trace: RequestTrace, fleet: FleetSpec, target: float) -> float:
    """Mean requests in flight in the busiest window, each held for its prefill and decode at batch ``target``."""
    replica = fleet.replica
    held_s = np.asarray(trace.input_tokens, dtype=float) * replica.prefill_ms_per_token / 1000.0 + np.asarray(
        trace.output_tokens, dtype=float
    ) * replica.step_s(max(1, round(target)))
    window = np.floor(np.asarray(trace.arrival_s, dtype=float) / _BUSY_WINDOW_S).astype(np.int64)
    return float(np.max(np.bincount(window, weights=held_s))) / _BUSY_WINDOW_S if len(trace) else 0.0


def _render(metric: ScalingPlan | Mapping, windows: Sequence[CronWindow], source: str) -> GeneratedManifest:
    if isinstance(metric, ScalingPlan):
        manifest = generate_manifests(dataclasses.replace(metric, cron_windows=tuple(windows))).scaled_object
        header = (
            f"KEDA ScaledObject for {metric.target_kind} {metric.target_name}, written by planner schedule: the "
            "metric trigger planner manifests writes, and one cron trigger per window of the schedule.\n"
            "Apply this or an HPA, not both: KEDA creates its own HPA from this object."
        )
        return dataclasses.replace(manifest, header=header)
    return scheduled_scaled_object(metric, windows, source)


def _read_back(text: str, source: str) -> Autoscaler:
    autoscaler = autoscaler_from_document(source, yaml.safe_load(text))
    if autoscaler is None:  # both renderers write a ScaledObject
        raise PlannerInputError(f"{source}: the written document is not a ScaledObject")
    return autoscaler


# --------------------------------------------------------------------------- the search


@dataclass(frozen=True)
class Buckets:
    """The replay's minutes on the schedule's calendar.

    Attributes
    ----------
    by_weekday : bool
        Weekday x hour (168 buckets): the arrivals span every hour of the week. Else the hour of the day (24).
    of_minute : numpy.ndarray of int
        The bucket of every wall-clock minute from simulated time 0 (Monday 00h is bucket 0).
    start_epoch_s : float
        Simulated time 0 on the wall clock, UTC epoch. [s]
    """

    by_weekday: bool
    of_minute: np.ndarray
    start_epoch_s: float

    @property
    def count(self) -> int:
        return 168 if self.by_weekday else 24

    def of_time(self, t_s) -> np.ndarray:
        """The bucket of each simulated instant (clipped to the replay's minutes). [s]"""
        minute = np.clip(minute_of(np.asarray(t_s, dtype=float), self.start_epoch_s), 0, len(self.of_minute) - 1)
        return self.of_minute[minute]


def calendar_buckets(
    trace: RequestTrace, start_epoch_s: float, timezone: str, duration_s: float | None = None
) -> Buckets:
    """Where each minute of a replay of ``trace`` falls: weekday x hour, or hour of the day.

    Parameters
    ----------
    trace : RequestTrace
    start_epoch_s : float
        Simulated time 0, UTC epoch. [s]
    timezone : str
        IANA zone of the hours.
    duration_s : float, optional
        Simulated time; only arrivals before it count. [s]
    """
    if len(trace) == 0:
        raise PlannerInputError(f"{trace.source or 'trace'}: the trace has no requests")
    end_s = float(np.max(trace.arrival_s))
    if duration_s is not None:
        end_s = min(end_s, duration_s)
    minutes = int(minute_of(np.array([end_s]), start_epoch_s)[0]) + 1
    week_hours = minute_positions(start_epoch_s, minutes, timezone, MINUTES_PER_WEEK) // MINUTES_PER_HOUR
    by_weekday = bool(np.unique(week_hours).size == MINUTES_PER_WEEK // MINUTES_PER_HOUR)
    return Buckets(by_weekday, week_hours if by_weekday else week_hours % 24, float(start_epoch_s))


def oracle_floors(bound: OracleBound, buckets: Buckets, max_replicas: int) -> np.ndarray:
    """Each bucket's first minimum: the oracle's need in its busiest window, rounded up, at most ``max_replicas``.

    Each minute takes the need (bound (b)'s :attr:`~planner.simulate.oracle.OracleBound.profile_replicas`,
    every request met) of the oracle window it starts in; a bucket, the largest over its minutes and
    occurrences. Buckets the replay does not reach get 0. [replicas]
    """
    floors = np.zeros(buckets.count, dtype=np.int64)
    if bound.profile_replicas.size == 0:
        return floors
    first = math.floor(buckets.start_epoch_s / _SECONDS_PER_MINUTE)
    t_s = (first + np.arange(len(buckets.of_minute))) * _SECONDS_PER_MINUTE - buckets.start_epoch_s
    window = np.floor(np.maximum(t_s, 0.0) / bound.window_s).astype(np.int64)
    window = np.clip(window, 0, bound.profile_replicas.size - 1)
    need = np.ceil(bound.profile_replicas[window] - 1e-9).astype(np.int64)
    np.maximum.at(floors, buckets.of_minute, need)
    return np.clip(floors, 0, max_replicas)


def _replay(name: str, outcome: Outcome) -> Replay:
    return Replay(name, outcome.gpu_hours, outcome.cost_usd, outcome.slo_attainment_frac, outcome)


def make_schedule(
    trace: RequestTrace,
    fleet: FleetSpec,
    metric: ScalingPlan | Mapping | None = None,
    *,
    attainment_goal_frac: float = DEFAULT_ATTAINMENT_GOAL,
    timezone: str = DEFAULT_TIMEZONE,
    max_rounds: int = DEFAULT_MAX_ROUNDS,
    source: str = "scaledobject.yaml",
    duration_s: float | None = None,
    engine: str = "fast",
    bound: OracleBound | None = None,
) -> Schedule:
    """Derive a schedule of cron floors beside a metric trigger and verify it by replay (module docstring).

    Parameters
    ----------
    trace : RequestTrace
        Several days of traffic; time 0 is ``fleet.start_epoch_s`` on the wall clock.
    fleet : FleetSpec
        The replica, the cold start, the objectives and the price.
    metric : ScalingPlan or Mapping, optional
        The metric trigger: the generator's plan, or the team's ScaledObject as a parsed YAML
        document (its cron triggers are replaced). Default: :func:`default_scaling_plan`.
    attainment_goal_frac : float
        Share of requests that must meet the objective, as ``planner plan`` counts it. [fraction]
    timezone : str
        IANA zone of the buckets and the triggers.
    max_rounds : int
        Replays of the schedule at most (>= 1).
    source : str
        The team's file, for messages and the header.
    duration_s : float, optional
        Simulated time of every replay and of the oracle. [s]
    engine : str
        ``fast`` or ``reference``.
    bound : OracleBound, optional
        :func:`planner.simulate.oracle.oracle_bound` at ``attainment_goal_frac`` on this trace, fleet
        and ``duration_s``, when the caller has it already (a search over several metric triggers);
        computed here otherwise.

    Returns
    -------
    Schedule

    Raises
    ------
    PlannerInputError
        A goal out of range, an unknown zone, an empty trace, or a metric trigger the schedule
        cannot be written beside.
    """
    if not (isinstance(attainment_goal_frac, int | float) and 0.0 <= attainment_goal_frac <= 1.0):
        raise PlannerInputError(f"attainment goal: expected a fraction between 0 and 1, got {attainment_goal_frac!r}")
    if isinstance(max_rounds, bool) or not isinstance(max_rounds, int) or max_rounds < 1:
        raise PlannerInputError(f"max_rounds: expected a whole number >= 1, got {max_rounds!r}")
    problem = zone_problem(timezone)
    if problem is not None:
        raise PlannerInputError(f"timezone {timezone!r}: {problem}")
    buckets = calendar_buckets(trace, fleet.start_epoch_s, timezone, duration_s)
    if bound is None:
        bound = oracle_bound(trace, fleet, attainment_goal_frac, duration_s=duration_s)
    elif bound.attainment_goal_frac != attainment_goal_frac or bound.requests > len(trace):
        raise PlannerInputError(
            f"the oracle bound given is at {bound.attainment_goal_frac!r} over {bound.requests} requests, not at the "
            f"goal {attainment_goal_frac!r} over this trace of {len(trace)}"
        )
    metric = default_scaling_plan(trace, fleet) if metric is None else metric
    reactive_manifest = _render(metric, (), source)
    reactive_autoscaler = _read_back(dump_manifest(reactive_manifest), source)
    base = reactive_autoscaler.hpa.effective_min_replicas
    ceiling = reactive_autoscaler.hpa.max_replicas
    reactive = _replay(
        "reactive only", simulate(trace, reactive_autoscaler, fleet, engine=engine, duration_s=duration_s)
    )

    lead = lead_s(fleet)
    lead_minutes = int(lead // _SECONDS_PER_MINUTE)

    floors = oracle_floors(bound, buckets, ceiling)
    allowed = missed_at(attainment_goal_frac, bound.requests)
    stalled: set[int] = set()
    rounds: list[Round] = []
    last_misses: np.ndarray | None = None
    last_raised: tuple[int, ...] = ()
    reason = ""
    while True:
        windows = cron_windows(floors.tolist(), base, lead_minutes, timezone)
        manifest = _render(metric, windows, source)
        text = dump_manifest(manifest)
        outcome = simulate(trace, _read_back(text, source), fleet, engine=engine, duration_s=duration_s)
        met = outcome.slo_attainment_frac >= attainment_goal_frac
        missed = ~np.asarray(outcome.slo_met, dtype=bool)
        misses = np.bincount(buckets.of_time(outcome.arrival_s[missed]), minlength=buckets.count)
        if last_misses is not None:
            stalled |= {b for b in last_raised if misses[b] >= last_misses[b]}
        record = Round(tuple(int(f) for f in floors), len(windows), outcome.slo_attainment_frac, outcome.cost_usd)
        if met:
            rounds.append(record)
            reason = _met_text(len(rounds), outcome, reactive, attainment_goal_frac)
            break
        if not bound.reachable:
            rounds.append(record)
            reason = (
                f"No schedule can meet the goal: {bound.impossible_requests:,} requests cannot meet the objective in "
                f"any run, more than the {allowed:,} the goal lets miss."
            )
            break
        if len(rounds) + 1 >= max_rounds:
            rounds.append(record)
            reason = (
                f"The goal is not met after {max_rounds} replays ({100 * outcome.slo_attainment_frac:.2f} % < "
                f"{100 * attainment_goal_frac:g} %); "
                + (
                    f"the fleet reached maxReplicaCount ({ceiling}) in the replay: raise it if the GPUs exist."
                    if outcome.peak_replicas >= ceiling
                    else "allow more rounds, or lower the metric trigger's target."
                )
            )
            break
        # A floor at or below the autoscaler's own minimum holds nothing: a raise starts from that minimum.
        held = np.maximum(floors, base)
        raise_ = _buckets_to_raise(misses, held, ceiling, stalled, int(np.sum(missed)) - allowed)
        if not raise_:
            rounds.append(record)
            at_max = [b for b in np.flatnonzero(misses) if held[b] >= ceiling and b not in stalled]
            reason = (
                f"The goal is not met ({100 * outcome.slo_attainment_frac:.2f} % < {100 * attainment_goal_frac:g} %), "
                + (
                    f"and the hours that miss most are at maxReplicaCount ({ceiling}): raise it if the GPUs exist."
                    if at_max
                    else "and raising the minimums no longer cuts the misses: they come from bursts within the hour, "
                    "generations cut at scale-down or requests no fleet serves in time; lower the metric trigger's "
                    "target or lengthen its scale-down window."
                )
            )
            break
        rounds.append(dataclasses.replace(record, raised=tuple(raise_)))
        last_misses, last_raised = misses, tuple(raise_)
        # A quarter of the way to the most replicas the fleet asked for there, at least one more (module docstring).
        ts = outcome.timeseries
        asked = np.zeros(buckets.count, dtype=np.int64)
        np.maximum.at(
            asked, buckets.of_time(ts["t_s"].to_numpy()), ts["replicas_requested"].to_numpy().astype(np.int64)
        )
        chosen = np.array(raise_)
        step = np.maximum(1, np.ceil((asked[chosen] - held[chosen]) / 4.0).astype(np.int64))
        floors[chosen] = np.minimum(held[chosen] + step, ceiling)

    texts = {"scaledobject.yaml": text}
    ready_s = fleet.time_to_ready_s(needs_node=fleet.nodes is not None, image_cached=False)
    settings = LintSettings(warmup_s=ready_s, supply=ReplicaSupply.from_fleet(fleet))
    findings = tuple(lint(manifest_set_from_texts(texts), settings))
    oracle = Replay("oracle", bound.cold_start.gpu_hours, bound.cold_start.cost_usd, attainment_goal_frac)
    return Schedule(
        windows=windows,
        floors=tuple(int(f) for f in floors),
        by_weekday=buckets.by_weekday,
        timezone=timezone,
        lead_s=lead,
        base_replicas=base,
        max_replicas=ceiling,
        scaled_object_text=text,
        scheduled=_replay("schedule + metric", outcome),
        reactive=reactive,
        oracle=oracle,
        bound=bound,
        attainment_goal_frac=attainment_goal_frac,
        met=met,
        reason=reason,
        rounds=tuple(rounds),
        findings=findings,
    )


def _buckets_to_raise(
    misses: np.ndarray, floors: np.ndarray, ceiling: int, stalled: set[int], shortfall: int
) -> list[int]:
    """The buckets with the most misses, as few as hold twice the shortfall, that can still rise and did respond.

    Twice: a raise removes only part of a bucket's misses (some come from bursts within the hour), so
    holding the shortfall exactly would leave the goal just missed round after round.
    """
    order = [int(b) for b in np.argsort(-misses, kind="stable") if misses[b] > 0]
    chosen, held = [], 0
    for bucket in order:
        if floors[bucket] >= ceiling or bucket in stalled:
            continue
        chosen.append(bucket)
        held += int(misses[bucket])
        if held >= 2 * shortfall:
            break
    return sorted(chosen)


def _met_text(rounds: int, scheduled: Outcome, reactive: Replay, goal: float) -> str:
    after = "on the first replay" if rounds == 1 else f"after {rounds - 1} round(s) of raised minimums"
    if reactive.slo_attainment_frac < goal:
        alone = f"The metric trigger alone reaches {100 * reactive.slo_attainment_frac:.2f} %."
    elif abs(scheduled.cost_usd - reactive.cost_usd) <= 0.005 * reactive.cost_usd:
        alone = (
            "The metric trigger alone meets it too, and the minimums sit at or below what it holds anyway, "
            "so the schedule changes little."
        )
    else:
        alone = (
            f"The metric trigger alone meets it too ({100 * reactive.slo_attainment_frac:.2f} %, "
            f"{_change(scheduled.cost_usd, reactive.cost_usd)}): the schedule buys margin, not the goal."
        )
    return f"The schedule meets {100 * goal:g} % attainment {after}. {alone}"


def _change(scheduled_usd: float, reactive_usd: float) -> str:
    if reactive_usd <= 0:
        return "at no cost"
    pct = 100.0 * (reactive_usd - scheduled_usd) / reactive_usd
    return f"{abs(pct):.1f} % {'cheaper' if pct > 0 else 'dearer'} than the schedule"
