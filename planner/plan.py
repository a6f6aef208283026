"""The ``plan`` module strings a team's inputs into one autoscaling plan.

It composes what the other commands compute, calling the same functions they
call, so the chapter "Your plan" and ``planner kv`` / ``knee`` / ``lint`` /
``manifests`` / ``sweep`` / ``simulate`` agree on the same files:

1. the load test's thresholds become a :class:`~planner.manifests.ScalingPlan`
   (as ``planner manifests --loadtest`` does);
2. the load test's step-time fit and the replica's KV tokens become the
   simulator's replica (:func:`plan_fleet`);
3. the trace is stretched to one day under a diurnal envelope
   (:func:`day_trace`), and a small grid around the generated ScaledObject
   is swept over that day with the ``fast`` engine for the cheapest
   configuration that meets an attainment goal without flapping more than a
   limit (:func:`sweep_plan`);
4. the chosen configuration and the team's current autoscaler are each
   replayed through the same day, and the day is repeated to make a week
   (:func:`simulate_week`).

Approximation: the week is seven copies of one simulated day (every day has
the same diurnal shape and the same requests). Everything runs at the
fleet's tick (1 s by default), so the week's day of the chosen configuration
is the sweep's run of it. Nothing here reads files or the clock.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from planner.errors import PlannerInputError
from planner.grace import GracePlan
from planner.knee import LoadTestThresholds
from planner.manifests import ManifestSet as GeneratedSet
from planner.manifests import manifest_thresholds
from planner.readers.manifest import Autoscaler, autoscaler_from_document
from planner.readers.workload import ManifestSet
from planner.simulate import fast
from planner.simulate.calibration import replica_from_fit
from planner.simulate.fleet import FleetSpec
from planner.simulate.outcome import Outcome
from planner.simulate.sweep import (
    SweepPoint,
    SweepResult,
    apply_point,
    cheapest_meeting,
    closest_to_goal,
    expand_grid,
    pareto_front,
    run_chunk,
)
from planner.simulate.traffic import SECONDS_PER_DAY, RequestTrace, stretch_trace

__all__ = ["DAYS_PER_WEEK", "PlanSweep", "WeekOutcome", "change_text", "choice_text", "chosen_configuration", "current_autoscaler",
           "day_trace", "default_grid",
           "generated_autoscaler", "manifest_thresholds", "plan_fleet", "simulate_week", "sweep_plan"]

DAYS_PER_WEEK = 7


def generated_autoscaler(generated: GeneratedSet) -> Autoscaler:
    """The generated ScaledObject, read back as the simulator reads a manifest."""
    autoscaler = autoscaler_from_document("scaledobject.yaml", generated.scaled_object.document)
    if autoscaler is None:  # generate_manifests always writes a ScaledObject
        raise PlannerInputError("scaledobject.yaml: the generated document is not a ScaledObject")
    return autoscaler


def current_autoscaler(manifests: ManifestSet, name: str = "") -> Autoscaler:
    """The team's current HPA or ScaledObject: the one called ``name``, else the only or first one.

    Raises
    ------
    PlannerInputError
        The folder holds no autoscaler, or none called ``name``.
    """
    found = [autoscaler for _, autoscaler in manifests.autoscalers]
    if not found:
        raise PlannerInputError("manifests_path: no HorizontalPodAutoscaler or ScaledObject found "
                                "(the side-by-side needs the team's current one)")
    if not name:
        return found[0]
    for autoscaler in found:
        if autoscaler.name == name:
            return autoscaler
    raise PlannerInputError(f"current_autoscaler: no autoscaler named {name!r} "
                            f"(found: {', '.join(a.name for a in found)})")


def plan_fleet(result: LoadTestThresholds, *, kv_tokens: int, max_num_seqs: int, warmup_s: float,
               usd_per_gpu_hour: float, gpus_per_replica: int, ttft_slo_s: float,
               itl_slo_ms: float | None = None, block_size_tokens: int = 16,
               grace: GracePlan | None = None) -> FleetSpec:
    """The simulator's fleet: the load test's step-time fit, the replica's KV tokens and the prices.

    Parameters
    ----------
    result : LoadTestThresholds
        From :func:`planner.knee.thresholds_from_loadtest`; its ``tpot_fit`` sets the step time.
    kv_tokens : int
        KV-cache tokens per replica (``planner kv``). [tokens]
    max_num_seqs : int
        vLLM ``--max-num-seqs``. [sequences]
    warmup_s : float
        Pod request to Ready. [s]
    usd_per_gpu_hour : float
        Price of one GPU-hour. [$]
    gpus_per_replica : int
        GPUs billed per pod (tensor x pipeline parallel).
    ttft_slo_s : float
        TTFT objective a request must meet. [s]
    itl_slo_ms : float, optional
        Mean ITL objective, if any. [ms]
    block_size_tokens : int
        KV block size. [tokens]
    grace : GracePlan, optional
        The drain settings the generated Deployment patch sets (grace period,
        preStop, ``--shutdown-timeout``); without it, the simulator's defaults
        (Kubernetes' 30 s, vLLM's) as an unpatched Deployment has them.
    """
    replica = replica_from_fit(result.tpot_fit, max_num_seqs=max_num_seqs, kv_tokens=kv_tokens)
    replica = dataclasses.replace(replica, block_size_tokens=block_size_tokens)
    drain = {} if grace is None else {"termination_grace_period_s": float(grace.termination_grace_period_s),
                                      "pre_stop_s": float(grace.pre_stop_s),
                                      "shutdown_timeout_s": float(grace.shutdown_timeout_s)}
    return FleetSpec(replica=replica, warmup_s=warmup_s, usd_per_gpu_hour=usd_per_gpu_hour,
                     gpus_per_replica=gpus_per_replica, ttft_slo_s=ttft_slo_s, itl_slo_ms=itl_slo_ms, **drain)


def default_grid(concurrency_target: float, *, target_fracs: Sequence[float] = (0.5, 1.0),
                 min_replicas: Sequence[int] = (1, 2),
                 scale_down_windows_s: Sequence[int] = (120, 600, 1800)) -> dict:
    """A small grid around the generated ScaledObject (GRID.yaml keys of ``planner sweep``).

    ``target`` scales the first trigger's threshold (the concurrency target)
    by each of ``target_fracs``; the other keys are taken as given.
    """
    if not (math.isfinite(concurrency_target) and concurrency_target > 0):
        raise PlannerInputError(f"concurrency_target: expected a number > 0, got {concurrency_target!r}")
    return {"target": [round(concurrency_target * f, 3) for f in target_fracs],
            "min_replicas": [int(m) for m in min_replicas],
            "scale_down_window_s": [int(w) for w in scale_down_windows_s]}


@dataclass(frozen=True)
class PlanSweep:
    """A sweep's results, its cost-attainment Pareto front and the configuration it recommends.

    Attributes
    ----------
    results : tuple of SweepResult
        Every configuration, in grid order.
    front : tuple of SweepResult
        The Pareto front, cheapest first.
    best : SweepResult or None
        The cheapest configuration whose attainment is at least the goal and
        whose flap cycles are at most the limit
        (:func:`planner.simulate.sweep.cheapest_meeting`).
    chosen : SweepResult
        ``best``, or when there is none,
        :func:`planner.simulate.sweep.closest_to_goal`.
    attainment_goal_frac : float
        The goal. [fraction]
    max_flap_cycles : int or None
        The flap limit over the swept trace (``None``: none).
    """

    results: tuple[SweepResult, ...]
    front: tuple[SweepResult, ...]
    best: SweepResult | None
    chosen: SweepResult
    attainment_goal_frac: float
    max_flap_cycles: int | None = None


def sweep_plan(trace: RequestTrace, autoscaler: Autoscaler, fleet: FleetSpec, grid: Mapping,
               attainment_goal_frac: float, max_flap_cycles: int | None = None) -> PlanSweep:
    """Run every grid point through the ``fast`` engine, as ``planner sweep`` does, in one chunk."""
    points = expand_grid(grid)
    results = tuple(run_chunk(trace, autoscaler, fleet, points))
    best = cheapest_meeting(results, attainment_goal_frac, max_flap_cycles)
    chosen = best if best is not None else closest_to_goal(results, attainment_goal_frac)
    return PlanSweep(results, tuple(pareto_front(results)), best, chosen, attainment_goal_frac, max_flap_cycles)


def chosen_configuration(autoscaler: Autoscaler, fleet: FleetSpec, sweep: PlanSweep) -> fast.Configuration:
    """The autoscaler and fleet of the sweep's chosen point."""
    return apply_point(autoscaler, fleet, SweepPoint(sweep.chosen.index, sweep.chosen.values))


@dataclass(frozen=True)
class WeekOutcome:
    """A week of one configuration: one simulated day, repeated.

    Attributes
    ----------
    day : Outcome
        The simulated day (its time series feeds the chart).
    cost_usd : float
        Seven days' cost. [$]
    gpu_hours : float
        Seven days' GPU-hours. [h]
    slo_attainment_frac : float
        The day's attainment (the same every day). [fraction]
    flap_cycles : int
        Seven days' flap cycles.
    scale_events : int
        Seven days' scale events.
    requests : int
        Seven days' requests.
    """

    day: Outcome
    cost_usd: float
    gpu_hours: float
    slo_attainment_frac: float
    flap_cycles: int
    scale_events: int
    requests: int


def day_trace(trace: RequestTrace, seed: int) -> RequestTrace:
    """One day stretched from ``trace`` under the diurnal envelope of :func:`stretch_trace`."""
    return stretch_trace(trace, seed, duration_s=SECONDS_PER_DAY)


def simulate_week(day: RequestTrace, autoscaler: Autoscaler, fleet: FleetSpec) -> WeekOutcome:
    """Simulate one day with the ``fast`` engine at the fleet's tick and count it seven times.

    The last requests of the day are followed for
    :data:`planner.simulate.reference.DRAIN_TAIL_S`; the days are independent
    (each starts from the autoscaler's minimum).
    """
    outcome = fast.simulate(day, autoscaler, fleet)
    return WeekOutcome(day=outcome, cost_usd=DAYS_PER_WEEK * outcome.cost_usd,
                       gpu_hours=DAYS_PER_WEEK * outcome.gpu_hours,
                       slo_attainment_frac=outcome.slo_attainment_frac,
                       flap_cycles=DAYS_PER_WEEK * outcome.flap_cycles,
                       scale_events=DAYS_PER_WEEK * outcome.scale_events,
                       requests=DAYS_PER_WEEK * outcome.requests)


def change_text(new: float, old: float) -> str:
    """How ``new`` compares with ``old`` in words: "12 % more", "3 % less", "the same", "5 more".

    In whole percent when ``old`` is not zero, else the difference.
    """
    if new == old:
        return "the same"
    if old != 0 and math.isfinite(old):
        pct = 100.0 * (new - old) / abs(old)
        if round(abs(pct)) == 0:
            return "about the same"
        return f"{abs(pct):.0f} % {'more' if pct > 0 else 'less'}"
    diff = new - old
    return f"{abs(diff):,.0f} {'more' if diff > 0 else 'less'}"


def choice_text(sweep: PlanSweep) -> str:
    """One sentence on why the sweep chose what it chose, for the chapter's text."""
    chosen = sweep.chosen
    limit = sweep.max_flap_cycles
    if sweep.best is not None:
        if limit is None:
            return "It meets the goal."
        return (f"It meets the goal and flaps {chosen.flap_cycles} time(s) over the day, within the limit of "
                f"{limit}.")
    if not math.isnan(chosen.slo_attainment_frac) and chosen.slo_attainment_frac >= sweep.attainment_goal_frac:
        return (f"Every configuration that meets the goal flaps more than {limit} times over the day; this is the "
                f"one that flaps least ({chosen.flap_cycles}). Widen the grid (longer scale-down windows, a higher "
                "floor) before applying it.")
    return ("No configuration in the grid meets the goal; this one comes closest. Widen the grid (lower targets, "
            "a higher floor or maximum) before applying it.")
