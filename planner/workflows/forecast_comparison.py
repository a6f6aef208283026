"""The ``forecast_comparison`` module weighs predictive triggers against reactive scaling on a team's traffic.

Each strategy is the generated ScaledObject (:func:`planner.manifests.generate.generate_manifests`)
with one change: ``reactive`` as generated, each forecast with its predictive
trigger beside the reactive one (:class:`planner.vllm.forecast.Forecast`), and
whatever else a caller hands in (a cron schedule, an oracle: any function from
the generator's plan to an autoscaler). Every strategy is replayed at several
per-replica targets (the plan's target times each of ``target_fracs``) on the
same trace and fleet, in one :func:`planner.simulate.fast.simulate_many` call: the
reactive runs in the compiled kernels, the forecasts (a ``scalingModifiers``
formula, and subqueries, which the kernels do not cover) in the lockstep engine,
the reference's own code.

**GPU-hours at matched attainment.** Lowering the target buys attainment with
GPU-hours; each strategy's runs trace that curve. Its GPU-hours at the
attainment goal are read off the curve by linear interpolation between the
two runs that bracket the goal (the highest attainment below it and the lowest
at or above it), so every strategy is priced at the same attainment. The
approximation: attainment is not linear in GPU-hours between two targets; the
bracket's two GPU-hour figures bound the error, and both are reported. When no
run falls below the goal (or none reaches it) nothing is interpolated and the
note says which target to add.

Over a replay shorter than a forecast's period, a seasonal trigger has nothing
to read and proposes 0 (its ``or vector(0)``), so it matches the reactive one;
compare it over at least two periods (``--stretch-days``). Nothing here reads
files or the clock.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from planner.autoscaler.spec import Autoscaler
from planner.errors import PlannerInputError
from planner.manifests.generate import ScalingPlan, generate_manifests
from planner.readers.manifest import autoscaler_from_document
from planner.simulate import fast
from planner.simulate.fleet import FleetSpec
from planner.simulate.reference import DRAIN_TAIL_S
from planner.simulate.sweep import SweepResult
from planner.simulate.traffic import SECONDS_PER_DAY, RequestTrace
from planner.vllm.forecast import Forecast

__all__ = [
    "DEFAULT_TARGET_FRACS",
    "REACTIVE",
    "ForecastComparison",
    "Strategy",
    "compare_forecasts",
    "default_forecasts",
    "gpu_hours_at_attainment",
]

REACTIVE = "reactive"
DEFAULT_TARGET_FRACS = (0.5, 1.0, 1.5)
"""Targets each strategy is replayed at, as fractions of the plan's concurrency target."""

StrategyMaker = Callable[[ScalingPlan], Autoscaler]
"""A strategy beyond the generator's: the autoscaler to replay for the generator's plan at one target."""


def default_forecasts(warmup_s: float, *, period_s: float = SECONDS_PER_DAY) -> dict[str, Forecast]:
    """One forecast per method, set for a fleet whose replicas take ``warmup_s`` to be Ready.

    Seasonal: a day (or ``period_s``) ago, one warmup ahead; ``predict_linear``: the
    last 30 minutes' line, one warmup ahead; ``max_over_time``: the last 30
    minutes' peak; Holt's smoothing over 30 minutes with factors 0.3 and 0.3. The
    windows and factors are assumptions to tune on your traffic, not measurements.
    Points every minute. [s]
    """
    lead_s = float(round(warmup_s))
    return {
        "seasonal_naive": Forecast("seasonal_naive", period_s=period_s, lead_s=lead_s),
        "predict_linear": Forecast("predict_linear", window_s=1800.0, step_s=60.0, ahead_s=lead_s),
        "max_over_time": Forecast("max_over_time", window_s=1800.0, step_s=60.0),
        "double_exponential_smoothing": Forecast(
            "double_exponential_smoothing", window_s=1800.0, step_s=60.0, smoothing_frac=0.3, trend_frac=0.3
        ),
    }


@dataclass(frozen=True)
class Strategy:
    """One strategy's runs and its price at the attainment goal.

    Attributes
    ----------
    name : str
        ``reactive``, a forecast method, or a caller's name.
    query : str
        The predictive trigger's query ('' for the reactive one and for callers' strategies).
    runs : tuple of SweepResult
        One per target, in ``target_fracs`` order; ``values`` holds ``strategy`` and ``target``.
    gpu_hours_at_goal : float or None
        GPU-hours at exactly the attainment goal, interpolated (:func:`gpu_hours_at_attainment`). [h]
    bracket_gpu_hours : tuple of float or None
        The two runs' GPU-hours the interpolation lies between. [h]
    note : str
        Why nothing was interpolated, or ''.
    cheapest_meeting : SweepResult or None
        The run with the fewest GPU-hours among those at or above the goal.
    """

    name: str
    query: str
    runs: tuple[SweepResult, ...]
    gpu_hours_at_goal: float | None
    bracket_gpu_hours: tuple[float, float] | None
    note: str
    cheapest_meeting: SweepResult | None = None


@dataclass(frozen=True)
class ForecastComparison:
    """Every strategy on one trace and fleet.

    Attributes
    ----------
    strategies : tuple of Strategy
        ``reactive`` first.
    attainment_goal_frac : float
        The attainment they are priced at. [fraction]
    span_s : float
        Simulated time of each run. [s]
    target_fracs : tuple of float
        The targets, as fractions of the plan's concurrency target.
    """

    strategies: tuple[Strategy, ...]
    attainment_goal_frac: float
    span_s: float
    target_fracs: tuple[float, ...]

    def strategy(self, name: str) -> Strategy:
        for strategy in self.strategies:
            if strategy.name == name:
                return strategy
        raise KeyError(name)

    def as_dict(self) -> dict:
        """JSON-ready: per strategy its query, its runs and GPU-hours at the goal, and the saving against reactive."""
        reactive = self.strategies[0].gpu_hours_at_goal
        out = []
        for strategy in self.strategies:
            at_goal = strategy.gpu_hours_at_goal
            cheapest = strategy.cheapest_meeting
            out.append(
                {
                    "name": strategy.name,
                    "query": strategy.query,
                    "gpu_hours_at_goal": at_goal,
                    "bracket_gpu_hours": list(strategy.bracket_gpu_hours) if strategy.bracket_gpu_hours else None,
                    "saving_vs_reactive_frac": (
                        None if at_goal is None or reactive is None or reactive == 0 else 1 - at_goal / reactive
                    ),
                    "cheapest_meeting_goal": None if cheapest is None else _run_dict(cheapest),
                    "note": strategy.note,
                    "runs": [_run_dict(run) for run in strategy.runs],
                }
            )
        return {
            "attainment_goal_frac": self.attainment_goal_frac,
            "span_s": self.span_s,
            "target_fracs": list(self.target_fracs),
            "strategies": out,
        }


def _run_dict(run: SweepResult) -> dict:
    values = dict(run.values)
    return {
        "target": values.get("target"),
        "gpu_hours": run.gpu_hours,
        "cost_usd": run.cost_usd,
        "slo_attainment_frac": run.slo_attainment_frac,
        "scale_events": run.scale_events,
        "flap_cycles": run.flap_cycles,
        "peak_replicas": run.peak_replicas,
    }


def gpu_hours_at_attainment(
    runs: Sequence[SweepResult], attainment_goal_frac: float
) -> tuple[float | None, tuple[float, float] | None, str]:
    """GPU-hours at exactly the goal on one strategy's curve: (value, bracket, note).

    Linear interpolation between the run with the highest attainment below the
    goal and the run with the lowest attainment at or above it (ties: the
    fewer GPU-hours). ``None`` with a note when the runs do not bracket the goal.
    """
    scored = [run for run in runs if not math.isnan(run.slo_attainment_frac)]
    below = [run for run in scored if run.slo_attainment_frac < attainment_goal_frac]
    meeting = [run for run in scored if run.slo_attainment_frac >= attainment_goal_frac]
    if not meeting:
        best = max(scored, key=lambda run: run.slo_attainment_frac, default=None)
        reached = "nothing" if best is None else f"{100 * best.slo_attainment_frac:.2f} % at most"
        return None, None, f"no target reaches the goal ({reached}): add a lower target fraction"
    if not below:
        return None, None, "every target meets the goal: add a higher target fraction to bracket it"
    low = max(below, key=lambda run: (run.slo_attainment_frac, -run.gpu_hours))
    high = min(meeting, key=lambda run: (run.slo_attainment_frac, run.gpu_hours))
    span = high.slo_attainment_frac - low.slo_attainment_frac
    share = (attainment_goal_frac - low.slo_attainment_frac) / span
    value = low.gpu_hours + share * (high.gpu_hours - low.gpu_hours)
    return value, (low.gpu_hours, high.gpu_hours), ""


def compare_forecasts(
    trace: RequestTrace,
    plan: ScalingPlan,
    fleet: FleetSpec,
    attainment_goal_frac: float,
    *,
    forecasts: Mapping[str, Forecast] | None = None,
    target_fracs: Sequence[float] = DEFAULT_TARGET_FRACS,
    extra: Mapping[str, StrategyMaker] | None = None,
    on_tick=None,
) -> ForecastComparison:
    """Replay reactive scaling, each forecast and each ``extra`` strategy at each target; price them at the goal.

    Parameters
    ----------
    trace : RequestTrace
        The traffic (several days for a seasonal forecast).
    plan : ScalingPlan
        The generator's plan: its ``concurrency_target`` is scaled by ``target_fracs``;
        its own ``forecast`` is ignored (each strategy sets its own).
    fleet : FleetSpec
    attainment_goal_frac : float
        The attainment every strategy is priced at. [fraction]
    forecasts : mapping of str to Forecast, optional
        Name -> forecast; default :func:`default_forecasts` for the plan's warmup.
    target_fracs : sequence of float
        Each > 0. [fraction]
    extra : mapping of str to callable, optional
        Name -> function from the plan (at one target) to the autoscaler to replay: the
        hook for a cron schedule or an oracle.
    on_tick : callable, optional
        Progress, as :func:`planner.simulate.fast.simulate_many` reports it.
    """
    if not (math.isfinite(attainment_goal_frac) and 0 <= attainment_goal_frac <= 1):
        raise PlannerInputError(f"attainment goal: expected a fraction between 0 and 1, got {attainment_goal_frac!r}")
    fracs = tuple(float(f) for f in target_fracs)
    if not fracs or not all(math.isfinite(f) and f > 0 for f in fracs):
        raise PlannerInputError(f"target fractions: expected numbers > 0, got {list(target_fracs)!r}")
    forecasts = dict(default_forecasts(plan.warmup_s) if forecasts is None else forecasts)
    for name, forecast in forecasts.items():
        if not isinstance(forecast, Forecast):
            raise PlannerInputError(f"forecast {name!r}: expected a Forecast, got {forecast!r}")
    makers: dict[str, tuple[str, StrategyMaker]] = {REACTIVE: ("", _generated)}
    for name, forecast in forecasts.items():
        makers[name] = (_query_of(plan, forecast), _with_forecast(forecast))
    for name, maker in (extra or {}).items():
        if name in makers:
            raise PlannerInputError(f"strategy {name!r} is named twice")
        makers[name] = ("", maker)
    configs, labels = [], []
    for name, (_, maker) in makers.items():
        for frac in fracs:
            target = round(plan.concurrency_target * frac, 3)
            at_target = dataclasses.replace(
                plan, concurrency_target=target, forecast=None, knee_concurrency=None, growth_frac=None
            )
            try:
                configs.append(fast.Configuration(maker(at_target), fleet))
            except PlannerInputError as error:
                raise PlannerInputError(f"strategy {name} at target {target:g}: {error}") from None
            labels.append((name, target))
    outcomes = fast.simulate_many(trace, configs, timeseries=False, per_request=False, on_tick=on_tick)
    runs: dict[str, list[SweepResult]] = {name: [] for name in makers}
    for index, ((name, target), outcome) in enumerate(zip(labels, outcomes, strict=True)):
        runs[name].append(SweepResult.of(index, (("strategy", name), ("target", target)), outcome))
    strategies = []
    for name, (query, _) in makers.items():
        value, bracket, note = gpu_hours_at_attainment(runs[name], attainment_goal_frac)
        own = forecasts.get(name)
        if own is not None and own.method == "seasonal_naive" and trace.duration_s <= own.offset_s:
            short = f"the replay is no longer than the offset ({own.offset_s:g} s): nothing to read, as reactive"
            note = f"{note}; {short}" if note else short
        meeting = [run for run in runs[name] if run.slo_attainment_frac >= attainment_goal_frac]
        cheapest = min(meeting, key=lambda run: run.gpu_hours, default=None)
        strategies.append(Strategy(name, query, tuple(runs[name]), value, bracket, note, cheapest))
    span_s = math.ceil(trace.duration_s) + DRAIN_TAIL_S  # simulate_many's default duration
    return ForecastComparison(tuple(strategies), float(attainment_goal_frac), float(span_s), fracs)


def _generated(plan: ScalingPlan) -> Autoscaler:
    document = generate_manifests(plan).scaled_object.document
    autoscaler = autoscaler_from_document("scaledobject.yaml", document)
    if autoscaler is None:  # generate_manifests always writes a ScaledObject
        raise PlannerInputError("scaledobject.yaml: the generated document is not a ScaledObject")
    return autoscaler


def _with_forecast(forecast: Forecast) -> StrategyMaker:
    def make(plan: ScalingPlan) -> Autoscaler:
        return _generated(dataclasses.replace(plan, forecast=forecast))

    return make


def _query_of(plan: ScalingPlan, forecast: Forecast) -> str:
    triggers = generate_manifests(dataclasses.replace(plan, forecast=forecast)).scaled_object.document["spec"]
    return next(t["metadata"]["query"] for t in triggers["triggers"] if t.get("name") == "forecast")
