"""The ``best_possible`` module sets reacting, a schedule and forecasts against the oracle's bound on one trace.

For a team whose metric trigger is tuned, three questions: how far its cost is from what no
autoscaler can undercut on its own traffic (the oracle, :mod:`planner.simulate.oracle`), whether a
schedule of KEDA cron floors (:mod:`planner.workflows.schedule`) or a forecast
(:mod:`planner.workflows.forecast_comparison`) would cost less at the same attainment goal, and
where over the week the money goes.

How each strategy is priced
---------------------------
Every strategy replays the same trace on the same fleet at several per-replica targets (the
metric trigger's target times each of ``target_fracs``). A looser target runs fewer replicas and
misses more requests, so each strategy's price is its **cheapest run that meets the goal**
(:func:`planner.simulate.sweep.cheapest_meeting`): a run on the grid, not an interpolation, so
the price is exact for a setting that exists and coarse by the grid's step.

* ``reactive``: the metric trigger alone, at each target;
* ``schedule``: at each target, :func:`planner.workflows.schedule.make_schedule` fits cron floors
  beside that metric trigger to the replayed trace and raises them until the replay meets the
  goal; its run is the last replay. Fitted to the very trace it is judged on, it is the best
  case for a schedule: next week's traffic is not this week's.
* forecasts (priced by :func:`planner.workflows.forecast_comparison.compare_forecasts`, usually
  on a shorter trace, since they replay in the lockstep engine).

Each run's **regret** is its cost less the oracle's cold-start bound at the run's own attainment
(:func:`planner.simulate.oracle.regret_usd`), never below 0 since the bound is below every run.
The **gap** of a strategy is its price less the bound at the goal; the share of the reactive
gap another strategy closes is ``(reactive - strategy) / (reactive - bound)``.

Nothing here reads files or the clock.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from planner.errors import PlannerInputError
from planner.manifests.generate import ScalingPlan
from planner.simulate.fleet import FleetSpec
from planner.simulate.oracle import OracleBound, OracleCurve, oracle_bound, oracle_curve, regret_usd
from planner.simulate.outcome import Outcome
from planner.simulate.sweep import SweepResult, cheapest_meeting
from planner.simulate.traffic import RequestTrace
from planner.workflows.schedule import (
    MINUTES_PER_DAY,
    MINUTES_PER_WEEK,
    Schedule,
    effective_floors,
    make_schedule,
    minute_of,
    minute_positions,
)

__all__ = [
    "REACTIVE",
    "SCHEDULE",
    "BestPossible",
    "cold_start_effect_text",
    "compare_with_oracle",
    "gap_closed_frac",
    "oracle_regrets",
    "schedule_floor_replicas",
]

REACTIVE = "reactive"
SCHEDULE = "schedule"


@dataclass(frozen=True)
class BestPossible:
    """Reacting and a schedule at several targets, and the oracle, on one trace and fleet.

    Attributes
    ----------
    bound : OracleBound
        The oracle at the goal.
    curve : OracleCurve
        The oracle at every attainment step of 0.1 %, for moving the goal.
    schedules : tuple of Schedule
        One per target, fitted to the trace beside the metric trigger at that target.
    reactive, scheduled : tuple of SweepResult
        One run per target, in ``targets`` order, each with its ``regret_usd``; ``values`` holds
        ``strategy`` and ``target``.
    targets : tuple of float
        The metric trigger's per-replica in-flight targets. [requests]
    attainment_goal_frac : float
        [fraction]
    """

    bound: OracleBound
    curve: OracleCurve
    schedules: tuple[Schedule, ...]
    reactive: tuple[SweepResult, ...]
    scheduled: tuple[SweepResult, ...]
    targets: tuple[float, ...]
    attainment_goal_frac: float

    @property
    def oracle_cost_usd(self) -> float:
        """The oracle's cold-start bound at the goal. [$]"""
        return self.bound.cold_start.cost_usd

    def runs(self, strategy: str) -> tuple[SweepResult, ...]:
        if strategy == REACTIVE:
            return self.reactive
        if strategy == SCHEDULE:
            return self.scheduled
        raise KeyError(strategy)

    def cheapest(self, strategy: str, attainment_goal_frac: float | None = None) -> SweepResult | None:
        """The strategy's cheapest run meeting the goal (the chapter's goal unless given), or ``None``."""
        goal = self.attainment_goal_frac if attainment_goal_frac is None else attainment_goal_frac
        return cheapest_meeting(self.runs(strategy), goal)

    def schedule_of(self, run: SweepResult) -> Schedule:
        """The fitted schedule behind one of :attr:`reactive` or :attr:`scheduled` (the one at its target)."""
        runs = self.reactive if run in self.reactive else self.scheduled
        return self.schedules[runs.index(run)]

    def outcome_of(self, run: SweepResult) -> Outcome:
        """The simulated run behind one of :attr:`reactive` or :attr:`scheduled`."""
        schedule = self.schedule_of(run)
        outcome = (schedule.reactive if run in self.reactive else schedule.scheduled).outcome
        if outcome is None:  # make_schedule keeps both runs
            raise KeyError(run.index)
        return outcome


def _run(index: int, strategy: str, target: float, outcome) -> SweepResult:
    return SweepResult.of(index, (("strategy", strategy), ("target", target)), outcome)


def oracle_regrets(
    trace: RequestTrace,
    fleet: FleetSpec,
    runs: Sequence[SweepResult],
    attainment_goal_frac: float,
    *,
    duration_s: float | None = None,
) -> tuple[float, list[SweepResult]]:
    """The oracle's cold-start bound at the goal, and ``runs`` with their ``regret_usd`` on one fleet. [$]"""
    oracle_usd, regret = regret_usd(
        trace,
        [fleet] * len(runs),
        [r.cost_usd for r in runs],
        [r.slo_attainment_frac for r in runs],
        attainment_goal_frac,
        duration_s=duration_s,
    )
    return oracle_usd, [
        dataclasses.replace(r, regret_usd=None if math.isnan(x) else float(x))
        for r, x in zip(runs, regret, strict=True)
    ]


def compare_with_oracle(
    trace: RequestTrace,
    fleet: FleetSpec,
    plan: ScalingPlan,
    attainment_goal_frac: float,
    *,
    target_fracs: Sequence[float] = (1.0,),
    timezone: str = "UTC",
    max_rounds: int = 8,
    duration_s: float | None = None,
) -> BestPossible:
    """Replay reacting and a fitted schedule at each target, and bound them by the oracle (module docstring).

    Parameters
    ----------
    trace : RequestTrace
        The traffic; a week or more gives a schedule by weekday and hour.
    fleet : FleetSpec
    plan : ScalingPlan
        The metric trigger; its ``concurrency_target`` is scaled by each of ``target_fracs``.
    attainment_goal_frac : float
        [fraction]
    target_fracs : sequence of float
        Each > 0. [fraction]
    timezone : str
        IANA zone of the schedule's hours.
    max_rounds : int
        Replays of each schedule's search at most.
    duration_s : float, optional
        Simulated time. [s]

    Returns
    -------
    BestPossible
    """
    fracs = tuple(float(f) for f in target_fracs)
    if not fracs or not all(math.isfinite(f) and f > 0 for f in fracs):
        raise PlannerInputError(f"target fractions: expected numbers > 0, got {list(target_fracs)!r}")
    targets = tuple(round(plan.concurrency_target * f, 3) for f in fracs)
    # One oracle for every target: it depends on the trace and the fleet, not on the metric trigger.
    bound = oracle_bound(trace, fleet, attainment_goal_frac, duration_s=duration_s)
    schedules, reactive, scheduled = [], [], []
    for k, target in enumerate(targets):
        at_target = dataclasses.replace(plan, concurrency_target=target, cron_windows=())
        try:
            schedule = make_schedule(
                trace,
                fleet,
                at_target,
                attainment_goal_frac=attainment_goal_frac,
                timezone=timezone,
                max_rounds=max_rounds,
                duration_s=duration_s,
                bound=bound,
            )
        except PlannerInputError as error:
            raise PlannerInputError(f"target {target:g}: {error}") from None
        schedules.append(schedule)
        reactive.append(_run(k, REACTIVE, target, schedule.reactive.outcome))
        scheduled.append(_run(len(targets) + k, SCHEDULE, target, schedule.scheduled.outcome))
    _, runs = oracle_regrets(trace, fleet, reactive + scheduled, attainment_goal_frac, duration_s=duration_s)
    return BestPossible(
        bound=bound,
        curve=oracle_curve(trace, fleet, duration_s=duration_s),
        schedules=tuple(schedules),
        reactive=tuple(runs[: len(targets)]),
        scheduled=tuple(runs[len(targets) :]),
        targets=targets,
        attainment_goal_frac=float(attainment_goal_frac),
    )


def gap_closed_frac(reactive_usd: float, strategy_usd: float, oracle_usd: float) -> float:
    """The share of reacting's gap to the oracle a strategy closes: ``(reactive - strategy) / (reactive - oracle)``.

    1 reaches the bound, 0 is no better than reacting, negative is dearer; NaN when reacting is at the bound. [fraction]
    """
    gap = reactive_usd - oracle_usd
    return (reactive_usd - strategy_usd) / gap if gap > 0 else math.nan


def schedule_floor_replicas(schedule: Schedule, t_s, start_epoch_s: float) -> np.ndarray:
    """The floor the schedule's cron triggers hold at simulated times ``t_s``, early by its lead. [replicas]

    The larger of the hour's floor and that of the hour a lead ahead (:func:`effective_floors`), at
    least the metric trigger's own minimum, read on the local wall clock of the schedule's zone.
    """
    cycle = MINUTES_PER_WEEK if schedule.by_weekday else MINUTES_PER_DAY
    by_minute = effective_floors(schedule.floors, int(schedule.lead_s // 60))
    minute = minute_of(t_s, start_epoch_s)
    minutes = int(minute.max()) + 1 if minute.size else 0
    positions = minute_positions(start_epoch_s, max(minutes, 0), schedule.timezone, cycle)
    floor = by_minute[positions[np.clip(minute, 0, max(minutes - 1, 0))]] if minutes else np.zeros(0, dtype=np.int64)
    return np.maximum(floor, schedule.base_replicas)


def cold_start_effect_text(bound: OracleBound) -> str:
    """One sentence: what the cold start adds to the instant bound at the goal (nothing, or a share of it)."""
    instant, cold = bound.instant.cost_usd, bound.cold_start.cost_usd
    extra = cold / instant - 1 if instant > 0 else 0.0
    if extra < 0.0005:
        return (
            "The two are equal here: on this traffic, keeping a replica through lulls shorter than a cold start "
            "adds nothing the work does not already need."
        )
    return f"The cold start adds {100 * extra:.1f} % to the bound: replicas kept through lulls shorter than it."
