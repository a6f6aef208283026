"""Charts for the chapter "What the HPA will actually do".

Every number in these grids comes from the HPA port (:mod:`planner.hpa`,
:mod:`planner.hpa_controller`); the sliders only filter rows.
"""

from __future__ import annotations

import altair as alt
import numpy as np
import pandas as pd

from planner.behavior import HorizontalPodAutoscalerBehavior
from planner.charts import grid_slider
from planner.hpa import (
    Tolerances,
    get_external_metric_replicas,
    get_external_per_pod_metric_replicas,
    ready_pods,
)
from planner.hpa_controller import ExternalReading, HorizontalController
from planner.hpa_spec import HorizontalPodAutoscalerSpec, MetricSpec, MetricTarget
from planner.keda import keda_quantity_milli

__all__ = [
    "or_chart",
    "or_grid",
    "policy_chart",
    "policy_grid",
    "ready_chart",
    "ready_grid",
    "tolerance_chart",
    "tolerance_grid",
]


def tolerance_grid(replica_counts, totals, target: float, tolerance: float = 0.1) -> pd.DataFrame:
    """Proposals of an ``AverageValue`` trigger on a fleet total, per current count and total.

    Returns
    -------
    pandas.DataFrame
        ``replicas``, ``total``, ``per_replica``, ``usage_ratio``, ``proposal``, ``within_tolerance``.
    """
    tolerances = Tolerances(tolerance, tolerance)
    target_milli = keda_quantity_milli(target)
    rows = []
    for replicas in replica_counts:
        for total in totals:
            p = get_external_per_pod_metric_replicas(int(replicas), target_milli, [keda_quantity_milli(total)],
                                                     tolerances)
            rows.append((int(replicas), float(total), float(total) / replicas, p.usage_ratio, p.replica_count,
                         tolerances.is_within(p.usage_ratio)))
    return pd.DataFrame(rows, columns=["replicas", "total", "per_replica", "usage_ratio", "proposal",
                                       "within_tolerance"])


def tolerance_chart(grid: pd.DataFrame, initial_replicas: int) -> alt.Chart:
    """Proposal against the fleet total, with a slider for the current count."""
    counts = np.sort(grid["replicas"].unique())
    current = alt.param(name="current", value=int(initial_replicas),
                        bind=alt.binding_range(min=int(counts.min()), max=int(counts.max()), step=1,
                                               name="Current replicas "))
    base = alt.Chart(grid).transform_filter(alt.datum.replicas == current)
    line = base.mark_line(interpolate="step-after", color="#4c78a8").encode(
        x=alt.X("total:Q", title="Fleet total the query returns (e.g. requests waiting)"),
        y=alt.Y("proposal:Q", title="Proposed replicas"),
    )
    points = base.mark_point(filled=True, size=18).encode(
        x="total:Q", y="proposal:Q",
        color=alt.Color("within_tolerance:N", title="inside tolerance",
                        scale=alt.Scale(domain=[True, False], range=["#54a24b", "#e45756"])),
        tooltip=[alt.Tooltip("total:Q", title="total"), alt.Tooltip("per_replica:Q", format=".2f"),
                 alt.Tooltip("usage_ratio:Q", title="ratio", format=".3f"), alt.Tooltip("proposal:Q")],
    )
    return alt.layer(line, points).add_params(current).properties(
        width=520, height=260, title="One trigger's proposal: ceil(total / target) outside the tolerance band"
    )


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
            total = get_external_per_pod_metric_replicas(current_replicas, target_milli, [ready * value_milli],
                                                         tolerances)
            mean = get_external_metric_replicas(current_replicas, target_milli, [value_milli], tolerances,
                                                ready_pods(ready, current_replicas - ready))
            rows.append((float(value), ready, "sum(...) with AverageValue", total.replica_count))
            rows.append((float(value), ready, "avg(...) with Value", mean.replica_count))
    return pd.DataFrame(rows, columns=["per_pod_value", "ready_replicas", "trigger", "proposal"])


def ready_chart(grid: pd.DataFrame, current_replicas: int, initial_value: float) -> alt.LayerChart:
    """Proposal against Ready pods, with a slider for the per-pod value."""
    value, step = grid_slider("per_pod", grid["per_pod_value"], initial_value,
                              "Value each Ready pod reports ", default_step=0.1)
    lines = alt.Chart(grid).transform_filter(
        f"abs(datum.per_pod_value - per_pod) < {step / 2}"
    ).mark_line(point=True).encode(
        x=alt.X("ready_replicas:Q", title=f"Ready pods (of {current_replicas})", axis=alt.Axis(tickMinStep=1)),
        y=alt.Y("proposal:Q", title="Proposed replicas"),
        color=alt.Color("trigger:N", title=None),
        strokeDash=alt.StrokeDash("trigger:N", legend=None),
        tooltip=["trigger:N", "ready_replicas:Q", "proposal:Q"],
    )
    now = alt.Chart(pd.DataFrame({"y": [current_replicas]})).mark_rule(color="#888", strokeDash=[4, 4]).encode(y="y:Q")
    return alt.layer(lines, now).add_params(value).properties(
        width=520, height=240, title="While pods warm up, only Ready pods count"
    )


def _external_hpa(target_type: str, target_milli: int, max_replicas: int, behavior=None, name="s0-prometheus"):
    target = (MetricTarget("AverageValue", average_value_milli=target_milli) if target_type == "AverageValue"
              else MetricTarget("Value", value_milli=target_milli))
    return HorizontalPodAutoscalerSpec("hpa", max_replicas, (MetricSpec("External", name, target),), 1, behavior)


def policy_grid(start_replicas: int, wanted, periods: int = 5, sync_period_s: float = 15.0,
                max_replicas: int = 1000) -> pd.DataFrame:
    """Replicas after each sync when a trigger asks for ``wanted`` at once (default behavior policies).

    Pods are taken to exist as soon as they are created (``status.replicas``
    follows ``spec.replicas``), so this isolates the rate limit.
    """
    rows = []
    behavior = HorizontalPodAutoscalerBehavior()
    for goal in wanted:
        controller = HorizontalController(_external_hpa("AverageValue", 1000, max_replicas, behavior))
        replicas = start_replicas
        rows.append((int(goal), 0.0, replicas, ""))
        for step in range(periods):
            now_s = step * sync_period_s
            result = controller.reconcile_autoscaler(now_s, replicas, [ExternalReading((int(goal) * 1000,))])
            replicas = result.desired_replicas
            rows.append((int(goal), now_s, replicas, result.scaling_limited.reason))
    return pd.DataFrame(rows, columns=["wanted", "t_s", "replicas", "reason"])


def policy_chart(grid: pd.DataFrame, initial_wanted: int) -> alt.LayerChart:
    """Replicas over time under the default scale-up policies, with a slider for the count asked for."""
    goal, _ = grid_slider("wanted", grid["wanted"], initial_wanted, "Replicas the trigger asks for ")
    base = alt.Chart(grid).transform_filter(alt.datum.wanted == goal)
    steps = base.mark_line(interpolate="step-after", point=True).encode(
        x=alt.X("t_s:Q", title="Time after the trigger asks (s)"),
        y=alt.Y("replicas:Q", title="spec.replicas"),
        tooltip=["t_s:Q", "replicas:Q", "reason:N"],
    )
    rule = base.mark_rule(color="#e45756", strokeDash=[6, 4]).encode(y="wanted:Q")
    return alt.layer(steps, rule).add_params(goal).properties(
        width=520, height=240, title="Default scale-up: the larger of +100 % and +4 pods per 15 s"
    )


def or_grid(current_replicas: int, in_flight_totals, in_flight_target: float, kv_capacity_requests: float,
            kv_target: float) -> pd.DataFrame:
    """Each trigger's proposal and the HPA's result as load rises, for two triggers on one fleet.

    In-flight requests are spread over the Ready pods; KV usage per pod is
    in-flight per pod over the requests that fill a pod's KV cache, capped at 1.
    """
    spec = HorizontalPodAutoscalerSpec("hpa", 10_000, (
        MetricSpec("External", "in-flight", MetricTarget("AverageValue",
                                                         average_value_milli=keda_quantity_milli(in_flight_target))),
        MetricSpec("External", "kv-usage", MetricTarget("Value", value_milli=keda_quantity_milli(kv_target))),
    ))
    pods = ready_pods(current_replicas)
    rows = []
    for total in in_flight_totals:
        kv = min(1.0, float(total) / current_replicas / kv_capacity_requests)
        controller = HorizontalController(spec)
        result = controller.reconcile_autoscaler(
            0.0, current_replicas,
            [ExternalReading((keda_quantity_milli(total),)), ExternalReading((keda_quantity_milli(kv),))], pods=pods,
        )
        outcomes = result.metrics.outcomes
        rows.append((float(total), "in-flight (AverageValue)", outcomes[0].replica_count))
        rows.append((float(total), "KV usage (Value)", outcomes[1].replica_count))
        rows.append((float(total), "HPA: the larger", result.metric_desired_replicas))
    return pd.DataFrame(rows, columns=["in_flight", "proposal_of", "replicas"])


def or_chart(grid: pd.DataFrame) -> alt.Chart:
    """Both triggers' proposals and their maximum against the load."""
    return alt.Chart(grid).mark_line(interpolate="step-after").encode(
        x=alt.X("in_flight:Q", title="Requests in flight across the fleet"),
        y=alt.Y("replicas:Q", title="Proposed replicas"),
        color=alt.Color("proposal_of:N", title=None),
        strokeDash=alt.StrokeDash("proposal_of:N", legend=None),
        size=alt.condition(alt.datum.proposal_of == "HPA: the larger", alt.value(3.5), alt.value(1.5)),
        tooltip=["proposal_of:N", "in_flight:Q", "replicas:Q"],
    ).properties(width=520, height=260, title="Several triggers are OR: the largest proposal wins")
