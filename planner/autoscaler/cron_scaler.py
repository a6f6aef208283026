"""The ``cron_scaler`` module is KEDA's ``cron`` scaler: a replica floor on a schedule.

Ported from ``kedacore/keda`` ``pkg/scalers/cron_scaler.go`` (KEDA 2.18 and
later: the inactive value is 0 since kedacore/keda PR 6888, the window test
``isWithinInterval`` since PR 6166), with robfig/cron v3 as
:mod:`planner.autoscaler.cron_schedule`:

* metadata (``cronMetadata``, read by KEDA's typed config, values trimmed):
  ``start`` and ``end`` (5-field cron schedules), ``timezone`` (an IANA
  name) and ``desiredReplicas`` (a JSON integer), all required; ``Validate``
  refuses a schedule robfig cannot parse, ``start == end`` and
  ``desiredReplicas`` 0. A scaler that fails these is never built, so KEDA
  never creates the ScaledObject's HPA. The zone is loaded only when the
  scaler is asked for its metric: an unknown one fails every query
  (``unable to load timezone``), which is an error trigger (fallback applies);
* the HPA metric (``GetMetricSpecForScaling``): External
  ``s{index}-cron-{timezone}-{start}-{end}`` (spaces removed, ``*`` -> ``x``,
  ``/`` -> ``Sl``, ``?`` -> ``Qm``, then ``/ . : %`` -> ``-``) with target 1
  (``AverageValue`` unless the trigger sets ``metricType``), so the HPA
  proposes ``ceil(value / 1)`` = the value in replicas;
* the value and activity (``GetMetricsAndActivity``): with ``now`` in the
  zone, ``nextStart`` and ``nextEnd`` the next firings of ``start`` and
  ``end`` after now; when ``nextStart`` is before ``nextEnd`` the trigger is
  active if now is after ``nextStart`` and before ``nextEnd``, otherwise if
  now is after ``nextStart`` or before ``nextEnd``. Since a next firing is
  always later than now, that is: active exactly when the end comes first,
  i.e. inside ``[start, end)`` to the second, also for a window that wraps
  midnight (``start 0 22 * * *``, ``end 0 6 * * *``). Active, the value is
  ``desiredReplicas``; inactive, 0. Activity is the window, not
  ``activationThreshold``.

The ScaledObject takes the largest proposal across its triggers (the HPA's
max over metrics), so a cron trigger keeps at least ``desiredReplicas``
through its window and leaves the floor to the others outside it. KEDA reads
the clock once per query; here ``now_s`` is injected, UTC epoch seconds.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from functools import lru_cache

import numpy as np

from planner.autoscaler.cron_schedule import (
    CronSchedule,
    CronSyntaxError,
    load_location,
    next_fire_s,
    parse_cron_schedule,
)
from planner.errors import PlannerInputError

__all__ = [
    "CronMetadata",
    "CronProblem",
    "CronReading",
    "CronScaler",
    "activity_steps",
    "build_cron_scaler",
    "cron_metric_name",
    "cron_problems",
    "cron_reading",
    "cron_reading_runs",
    "first_overlap_s",
    "is_active",
    "overlap_in_a_year_s",
]

OVERLAP_FROM_S = 1704067200.0
"""Where :func:`overlap_in_a_year_s` starts: Monday 2024-01-01 00:00 UTC. [s]"""
OVERLAP_SPAN_S = 366 * 86400.0
"""One leap year: every weekday, day of month and month, and both daylight-saving changes. [s]"""

_JSON_INTEGER = re.compile(r"-?(0|[1-9][0-9]*)")  # what json.Unmarshal reads into an int64


@dataclass(frozen=True)
class CronMetadata:
    """A cron trigger's ``metadata`` as written, each value trimmed (``""`` when absent).

    Attributes
    ----------
    start, end : str
        Cron schedules opening and closing the window.
    timezone : str
        IANA zone the schedules are read in.
    desired_replicas : str
        ``desiredReplicas``, the replica floor inside the window. [replicas]
    """

    start: str = ""
    end: str = ""
    timezone: str = ""
    desired_replicas: str = ""


@dataclass(frozen=True)
class CronProblem:
    """One reason KEDA refuses to build the scaler: the metadata key and the message."""

    field: str
    message: str


@dataclass(frozen=True)
class CronScaler:
    """A cron trigger KEDA can build: its parsed schedules, zone name and floor."""

    start: CronSchedule
    end: CronSchedule
    timezone: str
    desired_replicas: int


@dataclass(frozen=True)
class CronReading:
    """What the scaler returns for one query.

    Attributes
    ----------
    value : float
        The metric: ``desiredReplicas`` inside the window, 0 outside, 0 on error. [replicas]
    active : bool
        Inside the window.
    error : str or None
        ``unable to load timezone: ...`` for a zone Go cannot load.
    """

    value: float
    active: bool
    error: str | None = None


def cron_problems(metadata: CronMetadata) -> tuple[CronProblem, ...]:
    """Every reason KEDA's ``parseCronMetadata`` refuses ``metadata`` (empty when it builds).

    Checks in KEDA's order: each required key present, ``desiredReplicas`` a
    JSON integer, then ``Validate``: both schedules parse, they differ, the
    floor is not 0. The zone is not checked here (KEDA loads it per query);
    see :func:`planner.autoscaler.cron_schedule.timezone_problem`.
    """
    problems = []
    for key, value in (
        ("start", metadata.start),
        ("end", metadata.end),
        ("timezone", metadata.timezone),
        ("desiredReplicas", metadata.desired_replicas),
    ):
        if not value:
            problems.append(CronProblem(key, f'missing required parameter "{key}" in [triggerMetadata]'))
    desired = metadata.desired_replicas
    if desired and not _JSON_INTEGER.fullmatch(desired):
        problems.append(CronProblem("desiredReplicas", f"expected a whole number such as 10, got {desired!r}"))
    for key, spec in (("start", metadata.start), ("end", metadata.end)):
        try:
            parse_cron_schedule(spec)
        except CronSyntaxError as error:
            if spec:  # a missing one is reported above
                problems.append(CronProblem(key, f"error parsing {key} schedule: {error}"))
    if metadata.start and metadata.start == metadata.end:
        problems.append(CronProblem("end", "start and end can not have exactly same time input"))
    if desired and _JSON_INTEGER.fullmatch(desired) and int(desired) == 0:
        problems.append(CronProblem("desiredReplicas", "no desiredReplicas specified (0)"))
    return tuple(problems)


def build_cron_scaler(metadata: CronMetadata) -> CronScaler:
    """The scaler KEDA builds from ``metadata`` (``NewCronScaler``).

    Raises
    ------
    PlannerInputError
        ``metadata.KEY: message`` for the first of :func:`cron_problems`.
    """
    problems = cron_problems(metadata)
    if problems:
        first = problems[0]
        raise PlannerInputError(f"metadata.{first.field}: {first.message}")
    return CronScaler(
        parse_cron_schedule(metadata.start),
        parse_cron_schedule(metadata.end),
        metadata.timezone,
        int(metadata.desired_replicas),
    )


def cron_metric_name(index: int, metadata: CronMetadata) -> str:
    """The External metric name KEDA gives the trigger (``GetMetricSpecForScaling``).

    Examples
    --------
    >>> cron_metric_name(0, CronMetadata("0 0 * * Thu", "59 23 * * Thu", "Etc/UTC", "10"))
    's0-cron-Etc-UTC-00xxThu-5923xxThu'
    """

    def compact(spec: str) -> str:  # parseCronTimeFormat
        return spec.replace(" ", "").replace("*", "x").replace("/", "Sl").replace("?", "Qm")

    name = f"cron-{metadata.timezone}-{compact(metadata.start)}-{compact(metadata.end)}"
    for char in "/.:%":  # kedautil.NormalizeString
        name = name.replace(char, "-")
    return f"s{index}-{name}"


def is_active(scaler: CronScaler, now_s: float) -> bool:
    """Inside the window at ``now_s`` (UTC epoch seconds), as ``GetMetricsAndActivity`` decides.

    Raises
    ------
    PlannerInputError
        The zone does not load.
    """
    zone = load_location(scaler.timezone)
    return _within(now_s, next_fire_s(scaler.start, now_s, zone), next_fire_s(scaler.end, now_s, zone))


def _within(now_s: float, next_start: int | None, next_end: int | None) -> bool:
    """``isWithinInterval``; Go's zero time (no firing within five years) is before every instant."""
    start = -math.inf if next_start is None else next_start
    end = -math.inf if next_end is None else next_end
    if start < end:
        return now_s > start and now_s < end
    return now_s > start or now_s < end


def cron_reading(scaler: CronScaler, now_s: float) -> CronReading:
    """The metric and activity KEDA's cron scaler reports at ``now_s`` (UTC epoch seconds)."""
    try:
        active = is_active(scaler, now_s)
    except PlannerInputError as error:
        return CronReading(0.0, False, f"unable to load timezone: {error}")
    return CronReading(float(scaler.desired_replicas) if active else 0.0, active)


def cron_reading_runs(
    scaler: CronScaler, start_epoch_s: float, tick_s: float, n_ticks: int
) -> tuple[tuple[int, CronReading], ...]:
    """The scaler's reading at every instant ``start_epoch_s + k * tick_s``, ``k`` in ``0 .. n_ticks - 1``, as runs.

    What :meth:`planner.autoscaler.keda.KedaController.cron_readings` returns at
    each of those instants (the simulator's tick starts on the wall clock),
    without asking at every one: a reading depends only on the next firings of
    ``start`` and ``end`` (see :func:`_within`), which stay the same until the
    earlier of them. So at the first tick of a run the reading is
    :func:`cron_reading`'s own, and it holds for every tick before that firing.
    A zone that does not load fails every query alike: one run.

    Parameters
    ----------
    scaler : CronScaler
    start_epoch_s : float
        The wall-clock instant of tick 0, UTC epoch. [s]
    tick_s : float
        Tick length. [s]
    n_ticks : int
        Ticks to cover.

    Returns
    -------
    tuple of (int, CronReading)
        ``(first tick, reading)``, ascending from tick 0; each reading holds until the next run's first tick.
        Consecutive runs differ in their reading.
    """
    runs: list[tuple[int, CronReading]] = []
    k = 0
    while k < n_ticks:
        wall_s = start_epoch_s + k * tick_s  # as KedaController.cron_readings adds them
        reading = cron_reading(scaler, wall_s)
        if not runs or runs[-1][1] != reading:
            runs.append((k, reading))
        if reading.error is not None:
            break  # the zone never loads
        zone = load_location(scaler.timezone)
        fires = [
            fire
            for fire in (next_fire_s(scaler.start, wall_s, zone), next_fire_s(scaler.end, wall_s, zone))
            if fire is not None
        ]
        if not fires:
            break  # neither fires within five years: the reading holds
        change_s = min(fires)
        # The first tick at or after the firing (wall-clock instants never decrease with k).
        after = max(k + 1, math.ceil((change_s - start_epoch_s) / tick_s))
        while after > k + 1 and start_epoch_s + (after - 1) * tick_s >= change_s:
            after -= 1
        while after < n_ticks and start_epoch_s + after * tick_s < change_s:
            after += 1
        k = after
    return tuple(runs)


def first_overlap_s(
    a: CronScaler, b: CronScaler, from_epoch_s: float, to_epoch_s: float, max_steps: int = 20_000
) -> float | None:
    """The first instant in ``[from_epoch_s, to_epoch_s]`` (UTC epoch) at which both triggers are active, or ``None``.

    A trigger's activity changes only when one of its two schedules fires (at a
    firing instant the next firings are the later ones, so it holds from that
    instant to the next), so each trigger's activity is a step function over
    its firings (:func:`activity_steps`, followed for at most ``max_steps``
    firings: a schedule firing every minute is followed for two weeks, not a
    year). Its active steps, joined, are half-open intervals ``[open, close)``
    (the last one open to infinity when the steps run out), and the answer is
    the earliest ``max(open_a, open_b)`` over the pairs of intervals that
    intersect. Each trigger's intervals are computed once and kept, so
    checking every pair of many triggers costs one pass over each trigger's
    firings and a binary search per interval and pair.

    Raises
    ------
    PlannerInputError
        A zone does not load.
    """
    opens_a, closes_a, until_a = _active_intervals(a.start, a.end, a.timezone, from_epoch_s, to_epoch_s, max_steps)
    opens_b, closes_b, until_b = _active_intervals(b.start, b.end, b.timezone, from_epoch_s, to_epoch_s, max_steps)
    if not len(opens_a) or not len(opens_b):
        return None
    # For each of a's intervals, the first of b's that closes after it opens: the only one of b's that can
    # meet it earliest (b's intervals are disjoint and in order).
    first_b = np.searchsorted(closes_b, opens_a, side="right")
    found = first_b < len(opens_b)
    first_b = first_b[found]
    meet = opens_b[first_b] < closes_a[found]
    if not meet.any():
        return None
    when = float(np.maximum(opens_a[found][meet], opens_b[first_b[meet]]).min())
    return when if when <= min(until_a, until_b, to_epoch_s) else None


@lru_cache(maxsize=4096)
def _active_intervals(
    start: CronSchedule, end: CronSchedule, timezone: str, from_epoch_s: float, to_epoch_s: float, max_steps: int
) -> tuple[np.ndarray, np.ndarray, float]:
    """A window's active steps joined into ``[open, close)`` intervals (read-only), and how far they are known."""
    steps, until = _window_steps(start, end, timezone, from_epoch_s, to_epoch_s, max_steps)
    instants = np.array([instant for instant, _ in steps] + [math.inf], dtype=np.float64)
    active = np.array([is_on for _, is_on in steps], dtype=bool)
    # An interval opens at an active step after an inactive one and closes at the next inactive step.
    edges = np.diff(np.concatenate(([0], active.astype(np.int8), [0])))
    opens = instants[np.flatnonzero(edges == 1)]
    closes = instants[np.flatnonzero(edges == -1)]
    opens.setflags(write=False)
    closes.setflags(write=False)
    return opens, closes, until


def activity_steps(
    scaler: CronScaler, from_epoch_s: float, to_epoch_s: float, max_steps: int = 20_000
) -> tuple[tuple[tuple[float, bool], ...], float]:
    """The trigger's activity from ``from_epoch_s`` on, as steps, and how far they are known.

    Returns
    -------
    tuple of (float, bool)
        ``(instant, active)`` from ``from_epoch_s``, one per firing of ``start`` or ``end`` up to
        ``to_epoch_s``; each holds until the next. [s]
    float
        The instant up to which the steps are known: infinity, unless ``max_steps`` ran out first. [s]

    Raises
    ------
    PlannerInputError
        The zone does not load.
    """
    return _window_steps(scaler.start, scaler.end, scaler.timezone, from_epoch_s, to_epoch_s, max_steps)


@lru_cache(maxsize=4096)
def _window_steps(
    start: CronSchedule, end: CronSchedule, timezone: str, from_epoch_s: float, to_epoch_s: float, max_steps: int
) -> tuple[tuple[tuple[float, bool], ...], float]:
    # Kept per window, not per trigger: triggers that differ only in their floor share one pass.
    zone = load_location(timezone)
    t = float(from_epoch_s)
    steps: list[tuple[float, bool]] = []
    for _ in range(max_steps):
        if t > to_epoch_s:
            return tuple(steps), math.inf
        fires = (next_fire_s(start, t, zone), next_fire_s(end, t, zone))
        steps.append((t, _within(t, *fires)))
        upcoming = [fire for fire in fires if fire is not None]
        if not upcoming:
            return tuple(steps), math.inf
        t = float(min(upcoming))
    return tuple(steps), t


def overlap_in_a_year_s(a: CronScaler, b: CronScaler) -> float | None:
    """The first instant of 2024 (a leap year from a Monday) at which both windows are open, or ``None``.

    What ``planner lint`` (``cron-overlap``) and ``planner manifests`` check two cron triggers with.

    Raises
    ------
    PlannerInputError
        A zone does not load.
    """
    return first_overlap_s(a, b, OVERLAP_FROM_S, OVERLAP_FROM_S + OVERLAP_SPAN_S)
