"""Charts for the chapter "What the HPA will actually do".

Every number in these grids comes from the HPA port (:mod:`planner.autoscaler.replica_calculator`,
:mod:`planner.autoscaler.horizontal`) or from :func:`planner.autoscaler.explain.evaluate_decision`
on the chapter's own manifest; the sliders only filter rows. The ``*_for``
functions size each grid around the manifest's targets, bounds, behavior and
replica counts, so a chart follows the chapter's parameters.
"""

from __future__ import annotations

import altair as alt
import numpy as np
import pandas as pd

from planner.autoscaler.behavior import HorizontalPodAutoscalerBehavior
from planner.autoscaler.defaults import (
    DEFAULT_DOWNSCALE_STABILIZATION_WINDOW_S,
    DEFAULT_SYNC_PERIOD_S,
)
from planner.autoscaler.explain import Decision, MetricLine, evaluate_decision
from planner.autoscaler.horizontal import ExternalReading, HorizontalController, tolerances_for
from planner.autoscaler.hpa_spec import (
    AVERAGE_VALUE,
    PODS,
    HorizontalPodAutoscalerSpec,
    MetricSpec,
    MetricTarget,
)
from planner.autoscaler.keda import keda_quantity_milli
from planner.autoscaler.replica_calculator import (
    Tolerances,
    get_external_metric_replicas,
    get_external_per_pod_metric_replicas,
    ready_pods,
)
from planner.autoscaler.spec import Autoscaler
from planner.charts import grid_slider

__all__ = [
    "BOUNDED_METRICS",
    "LEGEND",
    "READY_TRIGGERS",
    "bounded_by_full_cache",
    "coinciding_lines",
    "has_several_triggers",
    "or_chart",
    "or_grid",
    "or_load_factors",
    "policy_chart",
    "policy_chart_for",
    "policy_grid",
    "policy_path_text",
    "policy_steps",
    "ready_chart",
    "ready_chart_for",
    "ready_grid",
    "tolerance_chart",
    "tolerance_chart_for",
    "tolerance_grid",
]

WIDTH_PX = 500  # plot area; with axes and a legend below, the chart stays inside a 650-px column
LEGEND = alt.Legend(orient="bottom", title=None, labelLimit=0, columns=2)
MAX_CHART_REPLICAS = 40  # the replica sliders stop here for very large maxReplicas
TOLERANCE_REPLICAS = 24  # replica counts on the tolerance slider at most (keeps the page small)
TOLERANCE_POINTS = 101  # metric values per replica count
POLICY_SYNC_LIMIT = 240  # an hour of 15-s syncs at most per ramp
BOUNDED_METRICS = ("kv_cache_usage_perc", "gpu_cache_usage_perc")
"""vLLM's KV-cache usage gauges (new and old name): a fraction of a replica's cache, at most 1."""


def _fit(chart, title: str):
    return chart.properties(width=WIDTH_PX, height=240, title=alt.TitleParams(title, limit=WIDTH_PX + 60))


def tolerance_grid(
    replica_counts, values, target: float, target_type: str = AVERAGE_VALUE, tolerances: Tolerances | None = None
) -> pd.DataFrame:
    """Proposals of one External metric, per current count and metric value, every pod Ready.

    Parameters
    ----------
    replica_counts : iterable of int
        Current replica counts. [replicas]
    values : iterable of float
        For an ``AverageValue`` target, the fleet total the query returns;
        for a ``Value`` target, the value itself. [metric units]
    target : float
        The metric's target. [metric units]
    target_type : str, optional
        ``AverageValue`` or ``Value``.
    tolerances : Tolerances, optional
        Defaults to 10 % in both directions.

    Returns
    -------
    pandas.DataFrame
        ``replicas``, ``value``, ``usage_ratio``, ``proposal``, ``within_tolerance``.
    """
    tolerances = tolerances or Tolerances()
    target_milli = keda_quantity_milli(target)
    rows = []
    for replicas in replica_counts:
        replicas = int(replicas)
        pods = ready_pods(replicas)
        for value in values:
            value_milli = keda_quantity_milli(float(value))
            if target_type == AVERAGE_VALUE:
                p = get_external_per_pod_metric_replicas(replicas, target_milli, [value_milli], tolerances)
            else:
                p = get_external_metric_replicas(replicas, target_milli, [value_milli], tolerances, pods)
            rows.append((replicas, float(value), p.usage_ratio, p.replica_count, tolerances.is_within(p.usage_ratio)))
    return pd.DataFrame(rows, columns=["replicas", "value", "usage_ratio", "proposal", "within_tolerance"])


def tolerance_chart(
    grid: pd.DataFrame, initial_replicas: int, value_title: str, now_value: float | None = None
) -> alt.LayerChart:
    """Proposal against the metric value, with a slider for the current count and a rule at today's value."""
    counts = np.sort(grid["replicas"].unique())
    current = alt.param(
        name="current",
        value=int(initial_replicas),
        bind=alt.binding_range(min=int(counts.min()), max=int(counts.max()), step=1, name="Current replicas "),
    )
    base = alt.Chart(grid).transform_filter(alt.datum.replicas == current)
    line = base.mark_line(interpolate="step-after", color="#4c78a8").encode(
        x=alt.X("value:Q", title=value_title),
        y=alt.Y("proposal:Q", title="Proposed replicas"),
    )
    points = base.mark_point(filled=True, size=18).encode(
        x="value:Q",
        y="proposal:Q",
        color=alt.Color(
            "within_tolerance:N",
            legend=alt.Legend(
                orient="bottom",
                title=None,
                labelLimit=0,
                labelExpr=(
                    "datum.label == 'true' ? 'inside the tolerance: the count stays' : 'outside: the proposal applies'"
                ),
            ),
            scale=alt.Scale(domain=[True, False], range=["#54a24b", "#e45756"]),
        ),
        tooltip=[
            alt.Tooltip("value:Q"),
            alt.Tooltip("usage_ratio:Q", title="ratio", format=".3f"),
            alt.Tooltip("proposal:Q"),
        ],
    )
    layers = [line, points]
    if now_value is not None:
        layers.append(
            alt.Chart(pd.DataFrame({"value": [float(now_value)]}))
            .mark_rule(color="#888", strokeDash=[4, 4])
            .encode(x="value:Q")
        )
    return _fit(alt.layer(*layers).add_params(current), "A metric's proposal, and the tolerance band around the count")


def _per_replica_view(autoscaler: Autoscaler, line: MetricLine, ready: int) -> tuple[str, float, float]:
    """How the explained metric reads on the charts: its target type, today's x value, and the target."""
    spec = autoscaler.hpa.metrics[line.index] if autoscaler.scaled_object is None else None
    value = line.value_to_hpa if line.value_to_hpa is not None else (line.value or 0.0)
    target_type = line.target_type if line.target_type in (AVERAGE_VALUE, "Value") else "Value"
    if spec is not None and spec.type == PODS and target_type == AVERAGE_VALUE:
        value = value * max(ready, 1)  # a Pods metric's per-pod average as the Ready pods' total
    return target_type, float(value), float(line.target)


def _replica_range(autoscaler: Autoscaler, current: int) -> range:
    hpa = autoscaler.hpa
    high = min(max(hpa.max_replicas, current, 2), max(TOLERANCE_REPLICAS, current))
    return range(max(1, high - TOLERANCE_REPLICAS + 1), high + 1)


def tolerance_chart_for(autoscaler: Autoscaler, decision: Decision) -> alt.LayerChart:
    """The tolerance chart for the metric that decided ``decision``, with the manifest's tolerances.

    The x axis runs to twice today's value or to the value that fills the
    largest replica count shown, whichever is larger.
    """
    line = decision.explained_metric
    target_type, now_value, target = _per_replica_view(autoscaler, line, decision.ready_replicas)
    counts = _replica_range(autoscaler, decision.current_replicas)
    top = max(2.0 * now_value, 1.5 * target * (counts[-1] if target_type == AVERAGE_VALUE else 2))
    values = np.unique(np.round(np.append(np.linspace(0.0, top, TOLERANCE_POINTS), now_value), 6))
    grid = tolerance_grid(counts, values, target, target_type, tolerances_for(autoscaler.hpa.behavior))
    title = (
        f"{line.key}: total over the fleet (target {target:g} per replica)"
        if target_type == AVERAGE_VALUE
        else f"{line.key}: value (target {target:g})"
    )
    return tolerance_chart(grid, min(max(decision.current_replicas, 1), counts[-1]), title, now_value)


def ready_grid(current_replicas: int, per_pod_values, target: float) -> pd.DataFrame:
    """Proposals while some pods are not Ready yet, for two ways of writing the same trigger.

    ``sum(...)`` with ``AverageValue`` (not-Ready pods report nothing, so the
    sum covers Ready pods only) and ``avg(...)`` with ``Value`` (multiplied
    by the Running+Ready pods), each at a per-pod value.
    """
    target_milli = keda_quantity_milli(target)
    tolerances = Tolerances()
    rows = []
    for value in per_pod_values:
        value_milli = keda_quantity_milli(value)
        for ready in range(1, current_replicas + 1):
            total = get_external_per_pod_metric_replicas(
                current_replicas, target_milli, [ready * value_milli], tolerances
            )
            mean = get_external_metric_replicas(
                current_replicas, target_milli, [value_milli], tolerances, ready_pods(ready, current_replicas - ready)
            )
            rows.append((float(value), ready, "sum(...) with AverageValue", total.replica_count))
            rows.append((float(value), ready, "avg(...) with Value", mean.replica_count))
    return pd.DataFrame(rows, columns=["per_pod_value", "ready_replicas", "trigger", "proposal"])


def coinciding_lines(
    base: alt.Chart, x, y, field: str, under: str, over: str, colors: dict[str, str], tooltip
) -> tuple[alt.Chart, alt.Chart]:
    """Two series that often take the same values, drawn so both stay visible.

    ``under`` is a wide translucent band and ``over`` a thin line with hollow
    markers on top of it: where they coincide the thin line runs inside the
    band; where they part, each is seen on its own.

    Returns
    -------
    tuple of altair.Chart
        The band, then the line (layer them in this order).
    """
    color = alt.Color(f"{field}:N", legend=LEGEND, scale=alt.Scale(domain=list(colors), range=list(colors.values())))
    band = (
        base.transform_filter(alt.datum[field] == under)
        .mark_line(strokeWidth=8, opacity=0.35)
        .encode(x=x, y=y, color=color, tooltip=tooltip)
    )
    line = (
        base.transform_filter(alt.datum[field] == over)
        .mark_line(strokeWidth=2, point=alt.OverlayMarkDef(filled=False, size=45))
        .encode(x=x, y=y, color=color, tooltip=tooltip)
    )
    return band, line


READY_TRIGGERS = {"avg(...) with Value": "#4c78a8", "sum(...) with AverageValue": "#f58518"}


def ready_chart(grid: pd.DataFrame, current_replicas: int, initial_value: float) -> alt.LayerChart:
    """Proposal against Ready pods, with a slider for the per-pod value.

    The two ways of writing the trigger coincide wherever neither is inside
    the tolerance (both ask for ceil(Ready pods x value / target)), so the
    ``Value`` one is a wide band and the ``AverageValue`` one a thin line on it.
    """
    value, step = grid_slider(
        "per_pod", grid["per_pod_value"], initial_value, "Value each Ready pod reports ", default_step=0.1
    )
    base = alt.Chart(grid).transform_filter(f"abs(datum.per_pod_value - per_pod) < {step / 2}")
    band, line = coinciding_lines(
        base,
        alt.X("ready_replicas:Q", title=f"Ready pods (of {current_replicas})", axis=alt.Axis(tickMinStep=1)),
        alt.Y("proposal:Q", title="Proposed replicas"),
        "trigger",
        under="avg(...) with Value",
        over="sum(...) with AverageValue",
        colors=READY_TRIGGERS,
        tooltip=["trigger:N", "ready_replicas:Q", "proposal:Q"],
    )
    now = alt.Chart(pd.DataFrame({"y": [current_replicas]})).mark_rule(color="#888", strokeDash=[4, 4]).encode(y="y:Q")
    return (
        alt.LayerChart(layer=[band, line, now])
        .add_params(value)
        .properties(
            width=WIDTH_PX,
            height=240,
            title=alt.TitleParams(
                "While pods warm up, only Ready pods count",
                limit=WIDTH_PX + 60,
                subtitle=[
                    "Where the lines coincide both ask for ceil(Ready pods x value / target);",
                    "they part where one of them is inside the tolerance and keeps the current count.",
                ],
            ),
        )
    )


def ready_chart_for(autoscaler: Autoscaler, decision: Decision) -> alt.LayerChart:
    """The Ready-pods chart at the deciding metric's target, for the current count (at least 2).

    The per-pod values run from half the target to twice it, or on to today's
    value per Ready pod (at most five times the target); the slider opens at
    today's value, or the nearest value on the grid.
    """
    line = decision.explained_metric
    target_type, now_value, target = _per_replica_view(autoscaler, line, decision.ready_replicas)
    current = min(max(decision.current_replicas, 2), MAX_CHART_REPLICAS)
    per_pod = now_value / max(decision.ready_replicas, 1) if target_type == AVERAGE_VALUE else now_value
    top = min(max(2.0, np.ceil(per_pod / target * 10) / 10), 5.0)  # reach today's value, within 5 x target
    values = np.round(target * np.arange(0.5, top + 0.001, 0.1), 6)
    initial = float(values[np.argmin(np.abs(values - per_pod))])
    return ready_chart(ready_grid(current, values, target), current, initial)


def _external_hpa(max_replicas: int, behavior, min_replicas: int = 1) -> HorizontalPodAutoscalerSpec:
    target = MetricTarget("AverageValue", average_value_milli=1000)
    return HorizontalPodAutoscalerSpec(
        "hpa", max_replicas, (MetricSpec("External", "s0-prometheus", target),), min_replicas, behavior
    )


def _idle_limit_s(behavior: HorizontalPodAutoscalerBehavior | None, sync_period_s: float) -> float:
    # A count that has not moved for a full window plus a full policy period will not move again.
    longest = DEFAULT_DOWNSCALE_STABILIZATION_WINDOW_S
    if behavior is not None:
        for rules in (behavior.scale_up, behavior.scale_down):
            if rules is None:
                continue
            longest = max(
                longest,
                float(rules.stabilization_window_seconds or 0)
                + max((p.period_seconds for p in rules.policies or ()), default=0),
            )
    return longest + 2 * sync_period_s


def policy_grid(
    start_replicas: int,
    wanted,
    behavior: HorizontalPodAutoscalerBehavior | None = None,
    *,
    min_replicas: int = 1,
    max_replicas: int = 1000,
    sync_period_s: float = DEFAULT_SYNC_PERIOD_S,
    tolerance_frac: float | None = None,
) -> pd.DataFrame:
    """``spec.replicas`` over time when a trigger's fleet total asks for ``wanted`` replicas and stays there.

    Each ramp runs the HPA port with ``behavior`` (``None``: the legacy
    path) every ``sync_period_s`` until the count reaches ``wanted`` or stops
    moving, then holds its last count for a quarter of its length (at least
    four syncs) so a chart shows it settle. The
    trigger is an ``AverageValue`` External metric with target 1 whose value
    is ``wanted``, so the tolerance applies as it would to a steady load.
    Pods count as soon as they exist, which isolates the rate limits from
    the warmup.

    Returns
    -------
    pandas.DataFrame
        ``wanted``, ``t_s``, ``replicas`` (after the sync at ``t_s``), ``reason``;
        one row at the start, one per change, one at the end.
    """
    spec = _external_hpa(max_replicas, behavior, min_replicas)
    idle_s = _idle_limit_s(behavior, sync_period_s)
    out = []
    for goal in wanted:
        controller = (
            HorizontalController(spec)
            if tolerance_frac is None
            else HorizontalController(spec, tolerance=tolerance_frac)
        )
        replicas, last_change_s, now_s = start_replicas, 0.0, 0.0
        rows = [(int(goal), 0.0, replicas, "")]
        for step in range(POLICY_SYNC_LIMIT):
            now_s = step * sync_period_s
            result = controller.reconcile_autoscaler(
                now_s, replicas, [ExternalReading((int(goal) * 1000,))], pods=ready_pods(replicas, now_s=now_s)
            )
            reason = result.scaling_limited.reason if result.scaling_limited is not None else ""
            if result.desired_replicas != replicas:
                replicas, last_change_s = result.desired_replicas, now_s
                rows.append((int(goal), now_s, replicas, reason))
            if replicas == goal or now_s - last_change_s > idle_s:
                break
        # Hold the last count a while, so the chart (whose axis follows the chosen ramp) shows it settle.
        end_s = max(now_s, last_change_s + max(4 * sync_period_s, 0.25 * last_change_s))
        out.extend(rows)
        out.append((int(goal), end_s, replicas, "end of view"))
    return pd.DataFrame(out, columns=["wanted", "t_s", "replicas", "reason"])


def policy_steps(grid: pd.DataFrame, wanted: int) -> str:
    """The counts one ramp of :func:`policy_grid` passes through, as ``4 -> 8 -> 10``."""
    counts = grid.loc[grid["wanted"] == wanted, "replicas"].tolist()
    if not counts:
        raise ValueError(f"no ramp for {wanted} replicas in the grid")
    steps = [counts[0]]
    for c in counts[1:]:
        if c != steps[-1]:
            steps.append(c)
    return " -> ".join(str(c) for c in steps)


def policy_path_text(grid: pd.DataFrame, wanted: int) -> str:
    """``goes 4 -> 8 -> 10``, or ``stays at 2`` when the ramp never moves."""
    steps = policy_steps(grid, wanted)
    return f"goes {steps}" if "->" in steps else f"stays at {steps}"


def policy_chart(grid: pd.DataFrame, initial_wanted: int, title: str) -> alt.LayerChart:
    """Replicas over time, with a slider for the count the trigger asks for."""
    goal, _ = grid_slider("wanted", grid["wanted"], initial_wanted, "Replicas the trigger asks for ")
    base = alt.Chart(grid).transform_filter(alt.datum.wanted == goal)
    steps = base.mark_line(interpolate="step-after", point=True).encode(
        x=alt.X("t_s:Q", title="Time after the trigger asks (s)"),
        y=alt.Y("replicas:Q", title="spec.replicas"),
        tooltip=["t_s:Q", "replicas:Q", "reason:N"],
    )
    rule = base.mark_rule(color="#e45756", strokeDash=[6, 4]).encode(y="wanted:Q")
    return _fit(alt.layer(steps, rule).add_params(goal), title)


def policy_chart_for(autoscaler: Autoscaler, decision: Decision) -> tuple[alt.LayerChart, pd.DataFrame, int]:
    """Ramps from the current count (within the bounds) to every count between the manifest's bounds.

    Returns
    -------
    tuple
        The chart, its grid, and the count the slider opens at: the
        decision's largest proposal within the bounds (the desired count when
        no metric was evaluated).
    """
    hpa = autoscaler.hpa
    low, high = hpa.effective_min_replicas, hpa.max_replicas
    start = min(max(decision.current_replicas, low, 1), high)
    top = min(high, max(start, MAX_CHART_REPLICAS))
    wanted = range(max(low, 1), top + 1)
    grid = policy_grid(start, wanted, hpa.behavior, min_replicas=low, max_replicas=high)
    asked = decision.max_proposal if decision.max_proposal is not None else decision.desired_replicas
    initial = min(max(asked, wanted[0]), wanted[-1])
    path = "legacy limit: at most max(2 x current, 4) per sync" if hpa.behavior is None else "the manifest's behavior"
    return policy_chart(grid, initial, f"From {start} replicas under {path}"), grid, initial


def bounded_by_full_cache(query: str) -> bool:
    """True if a trigger's query reads vLLM's KV-cache usage, which cannot exceed a full cache."""
    return any(name in query for name in BOUNDED_METRICS)


def has_several_triggers(autoscaler: Autoscaler) -> bool:
    """True for a ScaledObject whose triggers the HPA combines as OR (several, and no formula)."""
    so = autoscaler.scaled_object
    return so is not None and len(so.triggers) > 1 and not so.is_using_modifiers


def or_grid(
    autoscaler: Autoscaler, current_replicas: int, values: dict, load_factors, *, ready_replicas: int | None = None
) -> pd.DataFrame:
    """Each trigger's proposal and the HPA's choice as the load scales, by :func:`evaluate_decision`.

    Every trigger's value is multiplied by the load factor (1 = the values
    given), except a KV-cache usage query (see :func:`bounded_by_full_cache`),
    which stops at full caches: 1 per pod for a ``Value`` target (an average),
    1 per Ready pod for an ``AverageValue`` target (a sum). Values above 1 are
    read as percent, with 100 as full.

    Returns
    -------
    pandas.DataFrame
        ``load``, ``proposal_of`` (trigger, or ``HPA: the larger``), ``replicas``.
    """
    so = autoscaler.scaled_object
    if so is None or not has_several_triggers(autoscaler):
        raise ValueError("or_grid needs a ScaledObject with several triggers and no scalingModifiers")
    ready = current_replicas if ready_replicas is None else ready_replicas
    base = {str(k): v for k, v in values.items()}
    caps = {}
    for trigger in so.triggers:
        if bounded_by_full_cache(trigger.query):
            given = [v for k, v in base.items() if k in (trigger.label, str(trigger.index))]
            full = 100.0 if given and given[0] is not None and float(given[0]) > 1.0 else 1.0
            caps[trigger.label] = full * (max(ready, 1) if trigger.metric_type == AVERAGE_VALUE else 1.0)
    rows = []
    for factor in load_factors:
        scaled: dict[str, float | None] = {}
        for key, value in base.items():
            trigger = so.trigger(key)
            if value is None:
                scaled[key] = None
                continue
            number = float(value) * float(factor)
            scaled[key] = min(number, caps[trigger.label]) if trigger.label in caps else number
        d = evaluate_decision(autoscaler, current_replicas, scaled, ready_replicas=ready)
        for m in d.metrics:
            rows.append((float(factor), m.key, m.proposal))
        rows.append((float(factor), "HPA: the larger", d.max_proposal))
    return pd.DataFrame(rows, columns=["load", "proposal_of", "replicas"])


def or_chart(grid: pd.DataFrame) -> alt.LayerChart:
    """Every trigger's proposal and their maximum against the load, with a rule at today's load."""
    lines = (
        alt.Chart(grid)
        .mark_line(interpolate="step-after")
        .encode(
            x=alt.X("load:Q", title="Load relative to the values given (1 = now)"),
            y=alt.Y("replicas:Q", title="Proposed replicas"),
            color=alt.Color("proposal_of:N", legend=LEGEND),
            strokeDash=alt.StrokeDash("proposal_of:N", legend=None),
            size=alt.condition(alt.datum.proposal_of == "HPA: the larger", alt.value(3.5), alt.value(1.5)),
            tooltip=["proposal_of:N", alt.Tooltip("load:Q", format=".2f"), "replicas:Q"],
        )
    )
    now = alt.Chart(pd.DataFrame({"load": [1.0]})).mark_rule(color="#888", strokeDash=[4, 4]).encode(x="load:Q")
    return _fit(alt.layer(lines, now), "Several triggers are OR: the largest proposal wins")


def or_load_factors(top: float = 3.0, steps: int = 121) -> np.ndarray:
    """Load factors from 0 to ``top`` for :func:`or_grid`; 1 (the values given) is always one of them."""
    factors = np.linspace(0.0, top, steps)
    return np.unique(np.append(factors, 1.0)) if not np.isclose(factors, 1.0).any() else factors
