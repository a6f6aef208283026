"""The ``plan`` module strings a team's inputs into one autoscaling plan.

It composes what the other commands compute, calling the same functions they
call, so the chapter "Your plan" and ``planner kv`` / ``knee`` / ``lint`` /
``manifests`` / ``sweep`` / ``simulate`` agree on the same files:

1. the load test's thresholds become a :class:`~planner.manifests.generate.ScalingPlan`
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
from pathlib import PurePath
from typing import TYPE_CHECKING

from planner.autoscaler.spec import Autoscaler
from planner.capacity.knee import LoadTestThresholds
from planner.capacity.kv_cache import DEFAULT_MAX_NUM_BATCHED_TOKENS
from planner.dynamics.cold_start import CLUSTER_AUTOSCALER, KARPENTER
from planner.dynamics.grace import GracePlan
from planner.errors import PlannerInputError
from planner.manifests.generate import ManifestSet as GeneratedSet
from planner.manifests.generate import ScalingPlan as GeneratedPlan
from planner.manifests.generate import manifest_thresholds
from planner.markdown import plural
from planner.readers.manifest import autoscaler_from_document
from planner.readers.workload import ManifestSet, Workload, YamlDocument
from planner.simulate import fast, simulate
from planner.simulate.calibration import replica_from_fit, replica_from_loadtest
from planner.simulate.fleet import FleetSpec
from planner.simulate.oracle import regret_usd
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
    with_supply,
)
from planner.simulate.traffic import SECONDS_PER_DAY, RequestTrace, stretch_trace

if TYPE_CHECKING:
    import pandas as pd

__all__ = [
    "CASES",
    "CURRENT_INDEX",
    "DAYS_PER_WEEK",
    "PLAN_GRID_KEYS",
    "SUPPLY_PLAN_KEYS",
    "Plan",
    "PlanSweep",
    "Recommendation",
    "WeekOutcome",
    "change_text",
    "check_plan_grid",
    "choice_text",
    "chosen_configuration",
    "current_autoscaler",
    "current_result",
    "day_trace",
    "default_grid",
    "dominates",
    "generated_autoscaler",
    "make_plan",
    "manifest_thresholds",
    "meets_goals",
    "node_pool_changes",
    "plan_configuration",
    "plan_fleet",
    "plan_front",
    "recommend",
    "recommended_scaling_plan",
    "setting_text",
    "simulate_week",
    "supply_text",
    "sweep_plan",
]

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
        raise PlannerInputError(
            "manifests_path: no HorizontalPodAutoscaler or ScaledObject found "
            "(the side-by-side needs the team's current one)"
        )
    if not name:
        return found[0]
    for autoscaler in found:
        if autoscaler.name == name:
            return autoscaler
    raise PlannerInputError(
        f"current_autoscaler: no autoscaler named {name!r} (found: {', '.join(a.name for a in found)})"
    )


def plan_fleet(
    result: LoadTestThresholds,
    *,
    kv_tokens: int,
    max_num_seqs: int,
    warmup_s: float,
    usd_per_gpu_hour: float,
    gpus_per_replica: int,
    ttft_slo_s: float,
    itl_slo_ms: float | None = None,
    block_size_tokens: int = 16,
    grace: GracePlan | None = None,
    supply_from: FleetSpec | None = None,
    loadtest: pd.DataFrame | None = None,
    max_num_batched_tokens: int | None = DEFAULT_MAX_NUM_BATCHED_TOKENS,
) -> FleetSpec:
    """The simulator's fleet: the load test's step-time fit, the replica's KV tokens and the prices.

    Parameters
    ----------
    result : LoadTestThresholds
        From :func:`planner.capacity.knee.thresholds_from_loadtest`; its ``tpot_fit`` sets the step time.
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
    supply_from : FleetSpec, optional
        A fleet file with a ``nodes:`` section: its node pool, pod phases
        (image pull, weights load, and ``warmup_s``, which then replaces the
        ``warmup_s`` given here) and placeholders. Without one, or without
        ``nodes:`` in it, GPUs are always there and ``warmup_s`` is the whole
        cold start.
    loadtest : pandas.DataFrame, optional
        The sweep ``result`` came from: the replica then prefills in chunks at
        the cost its TTFT shows, on the decode step its TPOT shows once the
        prompts' share is removed
        (:func:`planner.simulate.calibration.replica_from_loadtest`). Without
        it, the step-time fit alone, prefill folded into it.
    max_num_batched_tokens : int, optional
        vLLM ``--max-num-batched-tokens`` of the served replica (with ``loadtest``). [tokens]
    """
    if result.tpot_fit is None:
        raise PlannerInputError("the load test has no step-time fit (it needs two or more batch sizes)")
    if loadtest is None:
        replica = replica_from_fit(result.tpot_fit, max_num_seqs=max_num_seqs, kv_tokens=kv_tokens)
    else:
        replica = replica_from_loadtest(
            loadtest,
            result,
            max_num_seqs=max_num_seqs,
            kv_tokens=kv_tokens,
            max_num_batched_tokens=max_num_batched_tokens,
        )
    replica = dataclasses.replace(replica, block_size_tokens=block_size_tokens)
    fleet = FleetSpec(
        replica=replica,
        warmup_s=warmup_s,
        usd_per_gpu_hour=usd_per_gpu_hour,
        gpus_per_replica=gpus_per_replica,
        ttft_slo_s=ttft_slo_s,
        itl_slo_ms=itl_slo_ms,
    )
    if supply_from is not None and supply_from.nodes is not None:
        fleet = dataclasses.replace(
            fleet,
            nodes=supply_from.nodes,
            image_pull_s=supply_from.image_pull_s,
            weights_load_s=supply_from.weights_load_s,
            warmup_s=supply_from.warmup_s,
            placeholders=supply_from.placeholders,
            source=supply_from.source,
        )
    if grace is None:
        return fleet
    return dataclasses.replace(
        fleet,
        termination_grace_period_s=float(grace.termination_grace_period_s),
        pre_stop_s=float(grace.pre_stop_s),
        shutdown_timeout_s=float(grace.shutdown_timeout_s),
    )


def default_grid(
    concurrency_target: float,
    *,
    target_fracs: Sequence[float] = (0.5, 1.0),
    min_replicas: Sequence[int] = (1, 2),
    scale_down_windows_s: Sequence[int] = (120, 600, 1800),
    placeholders: Sequence[int] = (),
) -> dict:
    """A small grid around the generated ScaledObject (GRID.yaml keys of ``planner sweep``).

    ``target`` scales the first trigger's threshold (the concurrency target)
    by each of ``target_fracs``; the other keys are taken as given.
    ``placeholders`` (with a node pool, e.g. ``(0, 1)``) sets warm spare GPUs
    beside a higher floor, so the plan weighs one against the other.
    """
    if not (math.isfinite(concurrency_target) and concurrency_target > 0):
        raise PlannerInputError(f"concurrency_target: expected a number > 0, got {concurrency_target!r}")
    return {
        "target": [round(concurrency_target * f, 3) for f in target_fracs],
        "min_replicas": [int(m) for m in min_replicas],
        "scale_down_window_s": [int(w) for w in scale_down_windows_s],
    } | ({"placeholders": [int(p) for p in placeholders]} if placeholders else {})


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


def sweep_plan(
    trace: RequestTrace,
    autoscaler: Autoscaler,
    fleet: FleetSpec,
    grid: Mapping,
    attainment_goal_frac: float,
    max_flap_cycles: int | None = None,
) -> PlanSweep:
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
    outcome = simulate(day, autoscaler, fleet)
    return WeekOutcome(
        day=outcome,
        cost_usd=DAYS_PER_WEEK * outcome.cost_usd,
        gpu_hours=DAYS_PER_WEEK * outcome.gpu_hours,
        slo_attainment_frac=outcome.slo_attainment_frac,
        flap_cycles=DAYS_PER_WEEK * outcome.flap_cycles,
        scale_events=DAYS_PER_WEEK * outcome.scale_events,
        requests=DAYS_PER_WEEK * outcome.requests,
    )


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
        return (
            f"It meets the goal and flaps {plural(chosen.flap_cycles, 'time')} over the day, within the limit of "
            f"{limit}."
        )
    if not math.isnan(chosen.slo_attainment_frac) and chosen.slo_attainment_frac >= sweep.attainment_goal_frac:
        return (
            f"Every configuration that meets the goal flaps more than {limit} times over the day; this is the "
            f"one that flaps least ({chosen.flap_cycles}). Widen the grid (longer scale-down windows, a higher "
            "floor) before applying it."
        )
    return (
        "No configuration in the grid meets the goal; this one comes closest. Widen the grid (lower targets, "
        "a higher floor or maximum) before applying it."
    )


# --------------------------------------------------------------------------- planner plan

SECONDS_PER_WEEK = DAYS_PER_WEEK * SECONDS_PER_DAY
CURRENT_INDEX = -1
"""The index the current setting carries among the swept configurations."""
PLAN_GRID_KEYS = (
    "target",
    "min_replicas",
    "max_replicas",
    "polling_interval_s",
    "scale_down_window_s",
    "placeholders",
    "image_pull_s",
    "scale_down_unneeded_s",
    "consolidate_after_s",
)
"""Grid keys ``planner plan`` can sweep: values of the ScaledObject, the placeholder Deployment it writes
beside it, and, with a node pool, the node autoscaler's settings and the image pull, which it reports
as changes to make outside the manifests."""
SUPPLY_PLAN_KEYS = ("placeholders", "image_pull_s", "scale_down_unneeded_s", "consolidate_after_s")
"""The plan grid keys that need the fleet's node pool (``nodes:``)."""

KEPT = "kept"
CHEAPER = "cheaper"
SAME_COST_BETTER = "same-cost-better"
CURRENT_MISSES = "current-misses"
NONE_MEETS = "none-meets"
CASES = (KEPT, CHEAPER, SAME_COST_BETTER, CURRENT_MISSES, NONE_MEETS)


def meets_goals(result: SweepResult, attainment_goal_frac: float, max_flap_cycles: float | None = None) -> bool:
    """Attainment at least the goal, and flap cycles at most the limit (``None``: no limit)."""
    return _attainment(result) >= attainment_goal_frac and (
        max_flap_cycles is None or result.flap_cycles <= max_flap_cycles
    )


def dominates(a: SweepResult, b: SweepResult) -> bool:
    """``a`` costs no more, attains no less and flaps no more than ``b``, and is strictly better in one."""
    no_worse = a.cost_usd <= b.cost_usd and _attainment(a) >= _attainment(b) and a.flap_cycles <= b.flap_cycles
    better = a.cost_usd < b.cost_usd or _attainment(a) > _attainment(b) or a.flap_cycles < b.flap_cycles
    return no_worse and better


def plan_front(candidates: Sequence[SweepResult]) -> tuple[SweepResult, ...]:
    """The candidates no other one dominates on (cost, attainment, flap cycles), cheapest first.

    Flapping is the third objective: a cheaper setting that flaps is not
    better than a calmer one, only different, so both stay on the front.
    """
    front = [c for c in candidates if not any(dominates(other, c) for other in candidates)]
    return tuple(sorted(front, key=lambda r: (r.cost_usd, -_attainment(r), r.flap_cycles, r.index)))


@dataclass(frozen=True)
class Recommendation:
    """The setting :func:`recommend` picks, which case of its rules applied, and why, in one sentence.

    Attributes
    ----------
    result : SweepResult
        The recommended setting (``index`` :data:`CURRENT_INDEX` for the current one).
    case : str
        One of :data:`CASES`: ``kept`` (the current setting meets the goals and nothing
        meeting them is strictly cheaper without flapping more), ``cheaper`` (the current
        setting meets them, this one too, strictly cheaper, flapping no more),
        ``same-cost-better`` (the current setting meets them but another at the same cost
        dominates it), ``current-misses`` (the current setting misses a goal; this is the
        cheapest that meets both), ``none-meets`` (nothing meets both; the closest).
    reason : str
        One sentence for a person.
    """

    result: SweepResult
    case: str
    reason: str

    @property
    def is_current(self) -> bool:
        return self.result.index == CURRENT_INDEX


def _first(candidates, key):
    return min(candidates, key=lambda r: (*key(r), r.index)) if candidates else None


def _goals_text(goal: float, limit: float | None) -> str:
    flaps = "" if limit is None else f" and at most {limit:g} flap cycle(s)"
    return f"{100 * goal:g} % attainment{flaps}"


def recommend(
    current: SweepResult,
    results: Sequence[SweepResult],
    attainment_goal_frac: float,
    max_flap_cycles: float | None = None,
) -> Recommendation:
    """Pick the setting to run from the current one and the swept ones.

    Rules, in order:

    1. When the current setting meets the goals (:func:`meets_goals`), it stays,
       unless another that meets them is strictly cheaper and flaps no more
       (then the cheapest such, higher attainment then fewer flaps on ties).
       If another at the very same cost dominates it, that one is taken instead,
       so the recommendation is never dominated.
    2. Otherwise the cheapest setting that meets the goals (ties as above).
    3. When none does: among those reaching the attainment goal the one that
       flaps least (then the cheapest), else the highest attainment (then the
       cheapest, then the fewest flaps).

    Each pick is the first of its set in an order that a dominating candidate
    would precede, and every candidate dominating it would be in the same
    set, so the recommendation is never dominated on (cost, attainment, flap
    cycles) by any candidate, the current one included.

    Raises
    ------
    PlannerInputError
        A goal out of range.
    """
    if not (isinstance(attainment_goal_frac, int | float) and 0.0 <= attainment_goal_frac <= 1.0):
        raise PlannerInputError(f"attainment goal: expected a fraction between 0 and 1, got {attainment_goal_frac!r}")
    if max_flap_cycles is not None and not (isinstance(max_flap_cycles, int | float) and max_flap_cycles >= 0):
        raise PlannerInputError(f"flap limit: expected a number >= 0, got {max_flap_cycles!r}")
    candidates = [current, *results]
    goals = _goals_text(attainment_goal_frac, max_flap_cycles)
    by_cost = lambda r: (r.cost_usd, -_attainment(r), r.flap_cycles)  # noqa: E731
    meeting = [r for r in candidates if meets_goals(r, attainment_goal_frac, max_flap_cycles)]
    if meets_goals(current, attainment_goal_frac, max_flap_cycles):
        cheaper = [r for r in meeting if r.cost_usd < current.cost_usd and r.flap_cycles <= current.flap_cycles]
        if cheaper:
            pick = _first(cheaper, by_cost)
            saving = 100.0 * (current.cost_usd - pick.cost_usd) / current.cost_usd if current.cost_usd else 0.0
            return Recommendation(
                pick,
                CHEAPER,
                (
                    f"The current setting meets the goals ({goals}), and {_label(pick)} also meets them for "
                    f"{saving:.1f} % less, flapping no more ({pick.flap_cycles} against {current.flap_cycles} "
                    "flap cycles)."
                ),
            )
        better = [r for r in candidates if dominates(r, current)]
        if better:  # only at the same cost: anything cheaper would have been taken above
            pick = _first(better, by_cost)
            return Recommendation(
                pick,
                SAME_COST_BETTER,
                (
                    f"The current setting meets the goals ({goals}), but {_label(pick)} costs the same, attains "
                    "at least as much and flaps no more, one of them strictly."
                ),
            )
        return Recommendation(
            current,
            KEPT,
            (
                f"Keep the current setting: it meets the goals ({goals}), and no swept setting that meets them "
                "is strictly cheaper without flapping more."
            ),
        )
    misses = _misses(current, attainment_goal_frac, max_flap_cycles)
    if meeting:
        pick = _first(meeting, by_cost)
        return Recommendation(
            pick,
            CURRENT_MISSES,
            (
                f"The current setting {misses}; {_label(pick)} is the cheapest swept setting that meets the goals "
                f"({goals})."
            ),
        )
    reaching = [r for r in candidates if _attainment(r) >= attainment_goal_frac]
    if reaching:
        pick = _first(reaching, lambda r: (r.flap_cycles, r.cost_usd, -_attainment(r)))
        why = (
            f"every setting that reaches {100 * attainment_goal_frac:g} % flaps more than {max_flap_cycles:g} "
            f"times; {_label(pick)} flaps least ({pick.flap_cycles})"
        )
    else:
        pick = _first(candidates, lambda r: (-_attainment(r), r.cost_usd, r.flap_cycles))
        why = (
            f"no setting reaches {100 * attainment_goal_frac:g} %; {_label(pick)} comes closest "
            f"({100 * _attainment(pick):.2f} %)"
        )
    return Recommendation(
        pick, NONE_MEETS, (f"Nothing swept meets the goals ({goals}): {why}; widen the grid before applying it.")
    )


def _misses(current: SweepResult, goal: float, limit: float | None) -> str:
    if _attainment(current) < goal:
        return f"misses the attainment goal ({100 * _attainment(current):.2f} % < {100 * goal:g} %)"
    return f"flaps {current.flap_cycles} times, more than the limit of {limit:g}"


def _attainment(result: SweepResult) -> float:
    return -math.inf if math.isnan(result.slo_attainment_frac) else result.slo_attainment_frac


def _label(result: SweepResult) -> str:
    if result.index == CURRENT_INDEX:
        return "the current setting"
    return "#" + str(result.index) + " (" + setting_text(result) + ")"


def setting_text(result) -> str:
    """A configuration's values as ``target = 26.667, min_replicas = 2``."""
    return ", ".join(f"{k} = {v:g}" if isinstance(v, float) else f"{k} = {v}" for k, v in result.values)


def _result(index: int, values: tuple, outcome: Outcome) -> SweepResult:
    return SweepResult.of(index, values, outcome)


def current_result(trace: RequestTrace, autoscaler: Autoscaler, fleet: FleetSpec) -> SweepResult:
    """The current setting replayed on the trace and fleet, as one more candidate (index :data:`CURRENT_INDEX`)."""
    outcome = simulate(trace, autoscaler, fleet)
    return _result(CURRENT_INDEX, (("current", f"{autoscaler.kind} {autoscaler.name}"),), outcome)


def supply_text(fleet: FleetSpec) -> str:
    """One sentence on where the fleet's GPUs come from, for the plan's page."""
    if fleet.nodes is None:
        return (
            f"The GPUs are always there: a new replica is Ready {fleet.warmup_s:g} s after it is requested, "
            "and cost counts GPU-hours of the pods."
        )
    nodes = fleet.nodes
    source = PurePath(fleet.source).name if fleet.source else "the fleet file"
    quota = "no node quota" if nodes.max_nodes is None else f"at most {plural(nodes.max_nodes, 'node')}"
    return (
        f"The GPUs come from {source}'s node pool: nodes of "
        f"{plural(nodes.gpus_per_node, 'GPU')} bought by {nodes.autoscaler} ({quota}); a replica that needs a new "
        f"node is Ready {fleet.time_to_ready_s(needs_node=True, image_cached=False):g} s after it is requested, "
        f"one on a node that is up with the image {fleet.time_to_ready_s(needs_node=False, image_cached=True):g} s, "
        "and cost counts node-hours, idle nodes included."
    )


def check_plan_grid(grid: Mapping, fleet: FleetSpec | None = None) -> list[SweepPoint]:
    """The grid's points, refusing keys the plan could not act on and floors below 1.

    Keys of :data:`SUPPLY_PLAN_KEYS` need ``fleet`` with a node pool, and each must suit the
    pool's node autoscaler (``scale_down_unneeded_s`` is cluster-autoscaler's, ``consolidate_after_s``
    Karpenter's).
    """
    points = expand_grid(grid)
    for key in grid:
        if key not in PLAN_GRID_KEYS:
            raise PlannerInputError(
                f"grid: {key!r} is not a value planner plan can write into the manifests it emits "
                f"(plan grids take: {', '.join(PLAN_GRID_KEYS)}); use planner sweep to explore it"
            )
        if key in SUPPLY_PLAN_KEYS and (fleet is None or fleet.nodes is None):
            raise PlannerInputError(f"grid: {key}: needs a fleet file with a nodes: section (the node pool it changes)")
        autoscaler = None if fleet is None or fleet.nodes is None else fleet.nodes.autoscaler
        for name, needs in (("scale_down_unneeded_s", CLUSTER_AUTOSCALER), ("consolidate_after_s", KARPENTER)):
            if key == name and autoscaler != needs:
                raise PlannerInputError(f"grid: {key}: a {needs} setting, but the fleet's node pool uses {autoscaler}")
    for point in points:
        values = point.as_dict()
        if values.get("min_replicas", 1) < 1:
            raise PlannerInputError(
                "grid: min_replicas: expected whole numbers >= 1 (the vLLM metrics vanish "
                "at 0 replicas, so nothing would scale the fleet back up)"
            )
    return points


def node_pool_changes(values: Mapping[str, object], fleet: FleetSpec) -> tuple[str, ...]:
    """What a configuration changes outside the manifests, each as one instruction.

    Empty when it changes nothing there (or matches the fleet file already).
    """
    changes = []
    nodes = fleet.nodes
    if nodes is None:
        return ()
    unneeded = values.get("scale_down_unneeded_s")
    if unneeded is not None and unneeded != nodes.cluster_autoscaler.scale_down_unneeded_s:
        changes.append(
            f"cluster-autoscaler: --scale-down-unneeded-time={_duration(unneeded)} (the fleet file has "
            f"{_duration(nodes.cluster_autoscaler.scale_down_unneeded_s)}; it applies to every node group)"
        )
    consolidate = values.get("consolidate_after_s")
    if consolidate is not None and consolidate != nodes.karpenter.consolidate_after_s:
        changes.append(
            f"Karpenter NodePool: spec.disruption.consolidateAfter: {_duration(consolidate)} (the fleet file has "
            f"{_duration(nodes.karpenter.consolidate_after_s)})"
        )
    pull = values.get("image_pull_s")
    if pull is not None and pull != fleet.image_pull_s:
        changes.append(
            f"image pull of {_number_text(pull)} s on a node without the image (the fleet file has "
            f"{_number_text(fleet.image_pull_s)} s): a smaller image, a node image or disk with it "
            "preloaded, or lazy image streaming; no manifest here sets it"
        )
    return tuple(changes)


def _duration(seconds) -> str:
    """A Go duration as Kubernetes and the node autoscalers write it: ``600s``."""
    return f"{_number_text(seconds)}s"


def _number_text(value) -> str:
    return f"{value:g}" if isinstance(value, float) else str(value)


def recommended_scaling_plan(base: GeneratedPlan, result: SweepResult | SweepPoint) -> GeneratedPlan:
    """The generator's plan with a swept configuration's values, so the manifests carry exactly them."""
    values = dict(result.values)
    changes: dict = {}
    if "target" in values:
        changes["concurrency_target"] = float(_number_value(values, "target"))
        changes["knee_concurrency"] = None  # the comment then states the chosen target, not the knee's
        changes["growth_frac"] = None
    for key, field_name in (
        ("min_replicas", "min_replicas"),
        ("max_replicas", "max_replicas"),
        ("polling_interval_s", "polling_interval_s"),
        ("scale_down_window_s", "scale_down_window_s"),
    ):
        if key in values:
            value = _number_value(values, key)
            changes[field_name] = int(value) if key != "polling_interval_s" or float(value).is_integer() else value
    if "placeholders" in values:
        changes["placeholders"] = int(_number_value(values, "placeholders"))
    return dataclasses.replace(base, **changes)


def _number_value(values: Mapping[str, object], key: str) -> float:
    """A numeric grid value (:func:`expand_grid` checks them; a hand-made point may not be)."""
    value = values[key]
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise PlannerInputError(f"grid: {key}: expected a number, got {value!r}")
    return value


@dataclass(frozen=True)
class Plan:
    """What ``planner plan`` and the chapter "Your plan" hand a team.

    Attributes
    ----------
    results : tuple of SweepResult
        Every swept configuration, in grid order (cost and flaps over the replayed trace).
    current : SweepResult
        The team's current setting on the same trace and fleet (index :data:`CURRENT_INDEX`).
    front : tuple of SweepResult
        :func:`plan_front` of the current and the swept settings.
    recommendation : Recommendation
    attainment_goal_frac : float
    max_flap_cycles : float or None
        Over the replayed trace.
    weeks_per_trace : float
        Weeks / the span the trace stands for (7 for one day). [1]
    generated : ManifestSet
        The generator's manifests at the grid's centre (the sweep's starting point).
    emitted : ManifestSet or None
        The generator's manifests at the recommended values; ``None`` when the current setting is kept.
    manifests_text : str
        YAML of the autoscaler to apply: the emitted ScaledObject, or the team's own when kept.
    deployment_patch_text : str
        YAML of the strategic-merge patch for the workload (grace period, preStop).
    patched_workload_text : str
        The team's workload file with the patch and ``--shutdown-timeout`` applied ('' without one).
    findings : tuple of Finding
        ``planner lint`` on the manifests, the patched workload (or the patch) together.
    placeholders_text : str
        YAML of the placeholders' PriorityClass and Deployment ('' when the recommendation has none).
    node_pool_changes : tuple of str
        What the recommendation changes outside the manifests (node autoscaler settings, image pulls).
    oracle_cost_usd : float
        The least any setting could cost over the replayed trace at the attainment goal
        (:mod:`planner.simulate.oracle`, with the fleet's cold start; inf when no setting can reach it);
        each result's ``regret_usd`` is its cost over the oracle at its own attainment. [$]
    """

    results: tuple[SweepResult, ...]
    current: SweepResult
    front: tuple[SweepResult, ...]
    recommendation: Recommendation
    attainment_goal_frac: float
    max_flap_cycles: float | None
    weeks_per_trace: float
    generated: GeneratedSet
    emitted: GeneratedSet | None
    manifests_text: str
    deployment_patch_text: str
    patched_workload_text: str
    findings: tuple
    placeholders_text: str = ""
    node_pool_changes: tuple[str, ...] = ()
    oracle_cost_usd: float = math.nan

    @property
    def recommended(self) -> SweepResult:
        return self.recommendation.result

    @property
    def errors(self) -> tuple:
        return tuple(f for f in self.findings if f.severity == "error")

    def weekly(self, result: SweepResult) -> dict:
        """One setting's figures, per week where they add up."""
        per_week = self.weeks_per_trace
        return (
            {
                "index": result.index,
                "setting": "current" if result.index == CURRENT_INDEX else setting_text(result),
                "values": {k: v for k, v in result.values},
                "cost_usd_per_week": result.cost_usd * per_week,
                "gpu_hours_per_week": result.gpu_hours * per_week,
                "slo_attainment_frac": result.slo_attainment_frac,
                "flap_cycles_per_week": result.flap_cycles * per_week,
                "scale_events_per_week": result.scale_events * per_week,
                "peak_replicas": result.peak_replicas,
                "cut_generations_per_week": result.cut_generations * per_week,
                "meets_goals": meets_goals(result, self.attainment_goal_frac, self.max_flap_cycles),
            }
            | (
                {}
                if result.regret_usd is None
                else {"regret_usd": result.regret_usd, "regret_usd_per_week": result.regret_usd * per_week}
            )
            | (
                {}
                if result.node_hours is None
                else {
                    "node_hours_per_week": result.node_hours * per_week,
                    "time_to_ready_p95_s": result.time_to_ready_p95_s,
                }
            )
        )

    def as_dict(self) -> dict:
        """JSON-ready: current, recommended, the front, the reason, the YAML texts and the lint findings."""
        return {
            "attainment_goal_frac": self.attainment_goal_frac,
            "max_flap_cycles": self.max_flap_cycles,
            "weeks_per_trace": self.weeks_per_trace,
            "oracle_cost_usd": self.oracle_cost_usd,
            "oracle_cost_usd_per_week": self.oracle_cost_usd * self.weeks_per_trace,
            "current": self.weekly(self.current),
            "recommended": self.weekly(self.recommended),
            "case": self.recommendation.case,
            "reason": self.recommendation.reason,
            "front": [self.weekly(r) for r in self.front],
            "configurations": [self.weekly(r) for r in self.results],
            "manifests": self.manifests_text,
            "deployment_patch": self.deployment_patch_text,
            "patched_workload": self.patched_workload_text,
            "placeholders": self.placeholders_text,
            "node_pool_changes": list(self.node_pool_changes),
            "findings": [f.as_dict() for f in self.findings],
        }


def make_plan(
    trace: RequestTrace,
    current: Autoscaler,
    fleet: FleetSpec,
    base: GeneratedPlan,
    grid: Mapping,
    attainment_goal_frac: float,
    max_flap_cycles: float | None = None,
    *,
    period_s: float | None = None,
    current_document: Mapping | None = None,
    workload_text: str = "",
    workload_source: str = "deployment.yaml",
    lint_settings=None,
    on_tick=None,
) -> Plan:
    """Sweep a grid around the generated ScaledObject, replay the current setting, recommend, and write it.

    The one function behind ``planner plan`` and the chapter "Your plan".

    Parameters
    ----------
    trace : RequestTrace
        The traffic to replay (a day stretched from the team's trace, or the trace itself).
    current : Autoscaler
        The team's current HPA or ScaledObject.
    fleet : FleetSpec
        The replica, the price and the objectives; its drain settings are replaced by the patch's.
    base : ScalingPlan
        The generator's plan (thresholds, warmup, longest generation, selectors): the grid's centre.
    grid : mapping
        GRID.yaml keys limited to :data:`PLAN_GRID_KEYS`.
    attainment_goal_frac : float
        The attainment goal. [fraction]
    max_flap_cycles : float, optional
        The flap limit over the replayed trace (``None``: none).
    period_s : float, optional
        The span of time the trace stands for (a day for a stretched one); default
        the trace's duration. The week is that span repeated. [s]
    current_document : mapping, optional
        The current autoscaler's YAML document, written out when it is kept.
    workload_text : str
        The team's Deployment (or StatefulSet) YAML, patched and linted with the manifests.
    workload_source : str
        Its file name, for findings.
    lint_settings : LintSettings, optional
        Default: the plan's warmup, longest generation and ITL.
    on_tick : callable, optional
        Progress, as :func:`planner.simulate.fast.simulate_many` reports it.
    """
    from planner.manifests.generate import generate_manifests
    from planner.manifests.lint import LintSettings, ReplicaSupply, lint
    from planner.manifests.writer import dump_manifest, patch_workload_text
    from planner.readers.workload import manifest_set_from_texts

    points = check_plan_grid(grid, fleet)
    base = dataclasses.replace(base, gpus_per_replica=fleet.gpus_per_replica)
    generated = generate_manifests(base)
    grace = generated.grace
    fleet = dataclasses.replace(
        fleet,
        termination_grace_period_s=float(grace.termination_grace_period_s),
        pre_stop_s=float(grace.pre_stop_s),
        shutdown_timeout_s=float(grace.shutdown_timeout_s),
    )
    # Every grid point is written by the generator and read back, so what is simulated is exactly what
    # would be emitted; the current setting runs beside them on the same fleet.
    plans = [recommended_scaling_plan(base, point) for point in points]
    configs = []
    for point, point_plan in zip(points, plans, strict=True):
        try:
            configs.append(
                fast.Configuration(
                    generated_autoscaler(generate_manifests(point_plan)), with_supply(fleet, point.as_dict())
                )
            )
        except PlannerInputError as error:
            raise PlannerInputError(f"grid point {point.index} ({setting_text(point)}): {error}") from None
    configs.append(fast.Configuration(current, fleet))
    outcomes = fast.simulate_many(trace, configs, timeseries=False, per_request=False, on_tick=on_tick)
    results = tuple(
        _result(point.index, point.values, outcome) for point, outcome in zip(points, outcomes[:-1], strict=True)
    )
    now = _result(CURRENT_INDEX, (("current", f"{current.kind} {current.name}"),), outcomes[-1])
    # Every setting against the oracle on the same trace, each with its own fleet (the grid may change the nodes).
    oracle_usd, regret = regret_usd(
        trace,
        [config.fleet for config in configs],
        [r.cost_usd for r in (*results, now)],
        [r.slo_attainment_frac for r in (*results, now)],
        attainment_goal_frac,
    )
    regrets = [None if math.isnan(x) else float(x) for x in regret]
    results = tuple(dataclasses.replace(r, regret_usd=x) for r, x in zip(results, regrets[:-1], strict=True))
    now = dataclasses.replace(now, regret_usd=regrets[-1])
    recommendation = recommend(now, results, attainment_goal_frac, max_flap_cycles)
    span_s = period_s if period_s is not None else trace.duration_s
    if not (math.isfinite(span_s) and span_s > 0):
        raise PlannerInputError("trace: its requests span no time; a week cannot be made of it")
    changes: tuple[str, ...] = ()
    placeholders_text = ""
    if recommendation.is_current:
        emitted = None
        if current_document is None:
            raise PlannerInputError("the current setting is recommended, but its YAML document was not given")
        import yaml

        manifests_text = yaml.safe_dump(dict(current_document), sort_keys=False)
    else:
        emitted = generate_manifests(recommended_scaling_plan(base, recommendation.result))
        manifests_text = dump_manifest(emitted.scaled_object)
        placeholders_text = "---\n".join(dump_manifest(m) for m in emitted.placeholders)
        changes = node_pool_changes(dict(recommendation.result.values), fleet)
    deployment_patch_text = dump_manifest(generated.workload_patch)
    patched_text = ""
    texts = {"autoscaler.yaml": manifests_text}
    if placeholders_text:
        texts["gpu-placeholders.yaml"] = placeholders_text
    if workload_text:
        patched_text = patch_workload_text(
            workload_text, grace, source=workload_source, target_name=base.target_name
        ).text
        texts[workload_source] = patched_text
    settings = lint_settings or LintSettings(
        warmup_s=base.warmup_s,
        max_tokens=base.max_output_tokens,
        itl_ms=base.itl_ms,
        supply=ReplicaSupply.from_fleet(fleet),
    )
    findings = tuple(lint(manifest_set_from_texts(texts), settings))
    return Plan(
        results=results,
        current=now,
        front=plan_front((now, *results)),
        recommendation=recommendation,
        attainment_goal_frac=attainment_goal_frac,
        max_flap_cycles=max_flap_cycles,
        weeks_per_trace=SECONDS_PER_WEEK / span_s,
        generated=generated,
        emitted=emitted,
        manifests_text=manifests_text,
        deployment_patch_text=deployment_patch_text,
        patched_workload_text=patched_text,
        findings=findings,
        placeholders_text=placeholders_text,
        node_pool_changes=changes,
        oracle_cost_usd=oracle_usd,
    )


def plan_configuration(plan: Plan, current: Autoscaler, fleet: FleetSpec) -> fast.Configuration:
    """The recommended autoscaler and the fleet draining as the patch says, for replaying it again."""
    grace = plan.generated.grace
    fleet = dataclasses.replace(
        fleet,
        termination_grace_period_s=float(grace.termination_grace_period_s),
        pre_stop_s=float(grace.pre_stop_s),
        shutdown_timeout_s=float(grace.shutdown_timeout_s),
    )
    if plan.recommendation.is_current:
        return fast.Configuration(current, fleet)
    assert plan.emitted is not None  # make_plan emits manifests whenever it recommends a change
    return fast.Configuration(generated_autoscaler(plan.emitted), fleet)


DEFAULT_MAX_TOKENS = 4096
"""Longest generation when neither the caller nor the workload's ``--max-model-len`` gives one. [tokens]"""


@dataclass(frozen=True)
class CurrentSetup:
    """The team's current autoscaler, its YAML document and the vLLM workload it scales (if in the files)."""

    document: YamlDocument
    autoscaler: Autoscaler
    workload: Workload | None

    @property
    def matchers(self) -> tuple[str, ...]:
        """:meth:`scope` for the workload the current autoscaler scales."""
        return self.scope()

    def scope(self, target_name: str = "", target_kind: str = "") -> tuple[str, ...]:
        """Label matchers for the generated queries.

        The team's own matchers as written, then the workload's namespace and
        served model name for labels they leave out (the autoscaler's namespace
        when the workload is not in the files), and, when still nothing names
        the model or the pods, a ``pod`` matcher for the pods of ``target_name``
        (default: the one the current autoscaler scales).
        """
        from planner.manifests.generate import pod_matcher, query_matchers, workload_matchers

        team: list[str] = []
        so = self.autoscaler.scaled_object
        for trigger in so.triggers if so is not None else ():
            team += [m for m in query_matchers(trigger.query) if m not in team]
        server = self.workload.servers[0] if self.workload is not None and self.workload.servers else None
        namespace = (self.workload.namespace if self.workload is not None else "") or self.document.namespace
        scope = workload_matchers(namespace, server.flags if server is not None else {})
        found = list(team) + [m for m in scope if _label_name(m) not in {_label_name(t) for t in team}]
        if not {"model_name", "pod"} & {_label_name(m) for m in found}:
            hpa = self.autoscaler.hpa
            found.append(
                pod_matcher(
                    target_kind or hpa.scale_target_kind, target_name or hpa.scale_target_name or self.autoscaler.name
                )
            )
        return tuple(found)

    def max_tokens(self, given: float = 0.0) -> float:
        """The longest generation to drain: ``given``, else the workload's ``--max-model-len``, else 4096. [tokens]"""
        if given:
            return given
        server = self.workload.servers[0] if self.workload is not None and self.workload.servers else None
        return float(server.max_model_len) if server is not None and server.max_model_len else float(DEFAULT_MAX_TOKENS)

    @property
    def workload_yaml(self) -> str:
        """The workload's document alone, as YAML (the file may hold other objects)."""
        import yaml

        return "" if self.workload is None else yaml.safe_dump(dict(self.workload.document.data), sort_keys=False)


def _label_name(matcher: str) -> str:
    return matcher.split("=")[0].rstrip("!~").strip()


def current_setup(manifests: ManifestSet, name: str = "") -> CurrentSetup:
    """The team's current autoscaler (:func:`current_autoscaler`), its document and its target workload."""
    from planner.readers.workload import find_scale_target

    autoscaler = current_autoscaler(manifests, name)
    document = next(doc for doc, found in manifests.autoscalers if found is autoscaler)
    return CurrentSetup(document, autoscaler, find_scale_target(autoscaler, document, manifests.workloads))


def target_matchers(manifests: ManifestSet, target_name: str) -> tuple[str, ...]:
    """Label matchers for queries that scale the workload ``target_name`` of ``manifests``.

    The matchers of the autoscaler that already scales it (the team's own
    selector) and the workload's scope, as :attr:`CurrentSetup.matchers` gives
    them; without such an autoscaler, the workload's scope alone.
    """
    from planner.manifests.generate import pod_matcher, workload_matchers
    from planner.readers.workload import find_scale_target

    for document, autoscaler in manifests.autoscalers:
        if autoscaler.hpa.scale_target_name == target_name:
            workload = find_scale_target(autoscaler, document, manifests.workloads)
            return CurrentSetup(document, autoscaler, workload).matchers
    workload = next((w for w in manifests.workloads if w.name == target_name), None)
    if workload is None:
        # Nothing known of the target but its name: its pods, never every vLLM in the cluster.
        return (pod_matcher("Deployment", target_name),)
    server = workload.servers[0] if workload.servers else None
    found = workload_matchers(workload.namespace, server.flags if server is not None else {})
    if not any(_label_name(m) in ("model_name", "pod") for m in found):
        found += (pod_matcher(workload.kind, workload.name),)
    return found
