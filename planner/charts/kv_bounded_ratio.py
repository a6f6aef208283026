"""Charts for the chapter "KV usage is a bounded ratio".

The ramps come from :mod:`planner.dynamics.kv_ramp` and from stepping the HPA port
through warmups (:mod:`planner.dynamics.hpa_ramp`); the sliders only filter rows.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import altair as alt
import numpy as np
import pandas as pd

from planner.autoscaler.horizontal import ExternalReading, HorizontalController
from planner.autoscaler.hpa_spec import HorizontalPodAutoscalerSpec, MetricSpec, MetricTarget
from planner.autoscaler.keda import keda_quantity_milli
from planner.autoscaler.replica_calculator import (
    Tolerances,
    get_external_metric_replicas,
    get_external_per_pod_metric_replicas,
    ready_pods,
)
from planner.charts import grid_slider
from planner.charts.hpa_decisions import LEGEND, WIDTH_PX, coinciding_lines
from planner.dynamics.hpa_ramp import step_through_warmup
from planner.dynamics.kv_ramp import ramp_replicas, warmups_to_reach

__all__ = [
    "NO_CHANGE",
    "SUM_AVG_TRIGGERS",
    "PairingSummary",
    "kv_targets_around",
    "paired_hpa",
    "pairing_chart",
    "pairing_grid",
    "pairing_summary",
    "ramp_chart",
    "ramp_grid",
    "ramp_warmups",
    "sum_avg_chart",
    "sum_avg_grid",
]


def kv_targets_around(
    kv_target_frac: float, step_frac: float = 0.05, low_frac: float = 0.3, high_frac: float = 0.99
) -> np.ndarray:
    """KV targets for a slider: ``kv_target_frac`` plus and minus whole steps, within ``[low, high]``.

    The chapter's own target is always one of them, so a slider opens exactly on it.

    Examples
    --------
    >>> kv_targets_around(0.8).tolist()[-4:]
    [0.8, 0.85, 0.9, 0.95]
    """
    below = max(math.floor((kv_target_frac - low_frac) / step_frac + 1e-9), 0)
    above = max(math.floor((high_frac - kv_target_frac) / step_frac + 1e-9), 0)
    return np.round(kv_target_frac + step_frac * np.arange(-below, above + 1), 6)


def ramp_warmups(start_replicas: int, goal_replicas: int, targets, *, minimum: int = 4, maximum: int = 12) -> int:
    """Warmups to show: one past the slowest target that reaches the goal, within ``[minimum, maximum]``."""
    needed = [warmups_to_reach(start_replicas, goal_replicas, float(t)) for t in targets]
    slowest = max((n for n in needed if n is not None), default=0)
    return int(min(max(slowest + 1, minimum), maximum))


def ramp_grid(start_replicas: int, targets, n_warmups: int, goal_replicas: int) -> pd.DataFrame:
    """Ready replicas after each warmup on a KV trigger that is saturated until the load is served, per target.

    The bounded ramp holds once it reaches ``goal_replicas`` (see
    :func:`planner.dynamics.kv_ramp.ramp_replicas`); it can overshoot on its last step,
    as the controller does.

    Returns
    -------
    pandas.DataFrame
        ``target``, ``warmup``, ``replicas``, ``signal`` (bounded KV, or an
        unbounded signal that asks for ``goal_replicas`` at once).
    """
    rows = []
    for target in targets:
        ramp = ramp_replicas(start_replicas, float(target), n_warmups, goal_replicas=goal_replicas)
        for warmup, replicas in enumerate(ramp):
            rows.append((float(target), warmup, int(replicas), "KV usage (bounded)"))
            unbounded = start_replicas if warmup == 0 else max(goal_replicas, start_replicas)
            rows.append((float(target), warmup, unbounded, "unbounded signal"))
    return pd.DataFrame(rows, columns=["target", "warmup", "replicas", "signal"])


def ramp_chart(grid: pd.DataFrame, goal_replicas: int, initial_target: float) -> alt.LayerChart:
    """Replicas per warmup against the goal, with a slider for the KV target."""
    target, step = grid_slider("kv_target", grid["target"], initial_target, "KV usage target ", default_step=0.05)
    lines = (
        alt.Chart(grid)
        .transform_filter(f"abs(datum.target - kv_target) < {step / 2}")
        .mark_line(interpolate="step-after", point=True)
        .encode(
            x=alt.X("warmup:Q", title="Warmups after the overload starts", axis=alt.Axis(tickMinStep=1)),
            y=alt.Y("replicas:Q", title="Ready replicas"),
            color=alt.Color("signal:N", legend=LEGEND),
            tooltip=["signal:N", "warmup:Q", "replicas:Q"],
        )
    )
    goal = (
        alt.Chart(pd.DataFrame({"goal": [goal_replicas]}))
        .mark_rule(color="#e45756", strokeDash=[6, 4])
        .encode(y="goal:Q")
    )
    # The unbounded signal sits on the goal once it gets there, so the rule is named where the lines start.
    goal_label = (
        alt.Chart(
            pd.DataFrame({"goal": [goal_replicas], "warmup": [0.05], "text": [f"goal: {goal_replicas} replicas"]})
        )
        .mark_text(align="left", baseline="bottom", dy=-3, color="#e45756")
        .encode(x="warmup:Q", y="goal:Q", text="text:N")
    )
    return (
        alt.LayerChart(layer=[lines, goal, goal_label])
        .add_params(target)
        .properties(width=WIDTH_PX, height=260, title="A bounded ratio grows the fleet by at most 1/target per warmup")
    )


def sum_avg_grid(replica_counts, kv_levels, target: float) -> pd.DataFrame:
    """Proposals for three ways to put KV usage in a trigger, all pods Ready and at the same usage."""
    target_milli = keda_quantity_milli(target)
    tolerances = Tolerances()
    rows = []
    for kv in kv_levels:
        kv_milli = keda_quantity_milli(kv)
        for n in replica_counts:
            n = int(n)
            pods = ready_pods(n)
            rows.append(
                (
                    float(kv),
                    n,
                    "sum(kv) with AverageValue",
                    get_external_per_pod_metric_replicas(n, target_milli, [n * kv_milli], tolerances).replica_count,
                )
            )
            rows.append(
                (
                    float(kv),
                    n,
                    "avg(kv) with Value",
                    get_external_metric_replicas(n, target_milli, [kv_milli], tolerances, pods).replica_count,
                )
            )
            rows.append(
                (
                    float(kv),
                    n,
                    "avg(kv) with AverageValue",
                    get_external_per_pod_metric_replicas(n, target_milli, [kv_milli], tolerances).replica_count,
                )
            )
    return pd.DataFrame(rows, columns=["kv_usage", "replicas", "trigger", "proposal"])


SUM_AVG_TRIGGERS = {
    "avg(kv) with Value": "#f58518",
    "sum(kv) with AverageValue": "#e45756",
    "avg(kv) with AverageValue": "#4c78a8",
}
NO_CHANGE = "no change: proposal = current"


def sum_avg_chart(grid: pd.DataFrame, initial_kv: float) -> alt.LayerChart:
    """Proposal against the current count, with a slider for the KV usage every pod shows.

    ``sum`` with ``AverageValue`` and ``avg`` with ``Value`` give the same
    proposal at every count, so the second is a wide band and the first a
    thin line on it; the dashed grey diagonal (in the legend) is where the
    proposal equals the current count.
    """
    kv, step = grid_slider("kv_usage", grid["kv_usage"], initial_kv, "KV usage on every pod ", default_step=0.05)
    colors = {**SUM_AVG_TRIGGERS, NO_CHANGE: "#888888"}
    base = alt.Chart(grid).transform_filter(f"abs(datum.kv_usage - kv_usage) < {step / 2}")
    x = alt.X("replicas:Q", title="Current replicas (all Ready)")
    y = alt.Y("proposal:Q", title="Proposed replicas")
    tooltip = ["trigger:N", "replicas:Q", "proposal:Q"]
    band, line = coinciding_lines(
        base,
        x,
        y,
        "trigger",
        under="avg(kv) with Value",
        over="sum(kv) with AverageValue",
        colors=colors,
        tooltip=tooltip,
    )
    twice = (
        base.transform_filter(alt.datum.trigger == "avg(kv) with AverageValue")
        .mark_line(point=True, strokeDash=[6, 3])
        .encode(x=x, y=y, color=alt.Color("trigger:N"), tooltip=tooltip)
    )
    ends = [float(grid["replicas"].min()), float(grid["replicas"].max())]
    diagonal = (
        alt.Chart(pd.DataFrame({"replicas": ends, "proposal": ends, "trigger": NO_CHANGE}))
        .mark_line(strokeDash=[2, 3])
        .encode(x="replicas:Q", y="proposal:Q", color=alt.Color("trigger:N"))
    )
    return (
        alt.LayerChart(layer=[band, line, twice, diagonal])
        .add_params(kv)
        .properties(
            width=WIDTH_PX,
            height=260,
            title=alt.TitleParams(
                "Three ways to put KV usage in a trigger",
                limit=WIDTH_PX + 60,
                subtitle=[
                    "sum with AverageValue = avg with Value: the red line runs inside the orange band;",
                    "avg with AverageValue divides by the pods twice.",
                ],
            ),
        )
    )


def paired_hpa(
    kv_target: float, in_flight_target: float | None, max_replicas: int, behavior=None
) -> HorizontalPodAutoscalerSpec:
    """The HPA for a KV trigger (``avg`` with ``Value``), optionally with an in-flight trigger (``sum``, "
    "AverageValue)."""
    metrics = [MetricSpec("External", "kv-usage", MetricTarget("Value", value_milli=keda_quantity_milli(kv_target)))]
    if in_flight_target is not None:
        metrics.append(
            MetricSpec(
                "External",
                "in-flight",
                MetricTarget("AverageValue", average_value_milli=keda_quantity_milli(in_flight_target)),
            )
        )
    return HorizontalPodAutoscalerSpec("hpa", max_replicas, tuple(metrics), 1, behavior)


def pairing_grid(
    kv_targets,
    *,
    start_replicas: int,
    in_flight_total: float,
    kv_capacity_requests: float,
    in_flight_target: float,
    warmup_s: float,
    duration_s: float,
    max_replicas: int,
) -> pd.DataFrame:
    """Ready replicas over time after a load step, KV alone vs KV paired with in-flight requests.

    The load after the step is ``in_flight_total`` requests; each Ready pod
    holds an equal share, and its KV usage is that share over
    ``kv_capacity_requests``, capped at 1.
    """

    def readings(with_in_flight: bool):
        def readings_for(ready: int, current: int):
            share = in_flight_total / max(ready, 1)
            kv = min(1.0, share / kv_capacity_requests)
            values = [ExternalReading((keda_quantity_milli(kv),))]
            if with_in_flight:
                values.append(ExternalReading((keda_quantity_milli(in_flight_total),)))
            return values

        return readings_for

    frames = []
    for kv_target in kv_targets:
        for label, in_flight in (("KV usage alone", None), ("KV usage + in-flight", in_flight_target)):
            controller = HorizontalController(paired_hpa(float(kv_target), in_flight, max_replicas))
            trace = step_through_warmup(
                controller, start_replicas, readings(in_flight is not None), warmup_s, duration_s
            )
            trace["kv_target"] = float(kv_target)
            trace["triggers"] = label
            # Only the syncs where something changes (and the last): the chart draws steps between them.
            moved = trace[["ready_replicas", "desired_replicas"]].diff().abs().sum(axis=1) > 0
            moved.iloc[0] = moved.iloc[-1] = True
            frames.append(trace.loc[moved, ["kv_target", "triggers", "t_s", "ready_replicas", "desired_replicas"]])
    return pd.concat(frames, ignore_index=True)


def pairing_chart(grid: pd.DataFrame, goal_replicas: int, initial_target: float) -> alt.LayerChart:
    """Ready replicas over time for both trigger sets, with a slider for the KV target."""
    target, step = grid_slider(
        "pair_kv_target", grid["kv_target"], initial_target, "KV usage target ", default_step=0.05
    )
    lines = (
        alt.Chart(grid)
        .transform_filter(f"abs(datum.kv_target - pair_kv_target) < {step / 2}")
        .mark_line(interpolate="step-after")
        .encode(
            x=alt.X("t_s:Q", title="Time after the load step (s)"),
            y=alt.Y("ready_replicas:Q", title="Ready replicas"),
            color=alt.Color("triggers:N", legend=LEGEND),
            tooltip=["triggers:N", "t_s:Q", "ready_replicas:Q", "desired_replicas:Q"],
        )
    )
    goal = (
        alt.Chart(pd.DataFrame({"goal": [goal_replicas]}))
        .mark_rule(color="#e45756", strokeDash=[6, 4])
        .encode(y="goal:Q")
    )
    return (
        alt.LayerChart(layer=[lines, goal])
        .add_params(target)
        .properties(width=WIDTH_PX, height=260, title="Pairing KV with an unbounded signal: KV becomes a floor")
    )


@dataclass(frozen=True)
class PairingSummary:
    """What the pairing simulation shows at one KV target, as the chapter states it.

    Attributes
    ----------
    alone_reach_s, paired_reach_s : float or None
        First time the Ready count reaches the goal; ``None`` if it never does. [s]
    alone_final, paired_final : int
        Ready replicas at the end of the simulation (where the chart ends). [replicas]
    duration_s : float
        Simulated time. [s]
    """

    alone_reach_s: float | None
    paired_reach_s: float | None
    alone_final: int
    paired_final: int
    duration_s: float

    @staticmethod
    def minutes(reach_s: float | None, duration_s: float) -> str:
        """``"16"`` minutes, or ``"never (within 24 minutes)"``."""
        return f"never (within {duration_s / 60:.0f} minutes)" if reach_s is None else f"{reach_s / 60:.0f}"


def pairing_summary(grid: pd.DataFrame, kv_target: float, goal_replicas: int) -> PairingSummary:
    """Reach times and final counts of both trigger sets at ``kv_target``, from :func:`pairing_grid`."""
    chosen = grid[np.isclose(grid["kv_target"], kv_target)]
    if chosen.empty:
        raise ValueError(f"no KV target {kv_target} in the pairing grid")

    def of(label: str):
        rows = chosen[chosen["triggers"] == label].sort_values("t_s")
        reached = rows[rows["ready_replicas"] >= goal_replicas]
        return (None if reached.empty else float(reached["t_s"].iloc[0])), int(rows["ready_replicas"].iloc[-1])

    alone_reach, alone_final = of("KV usage alone")
    paired_reach, paired_final = of("KV usage + in-flight")
    return PairingSummary(alone_reach, paired_reach, alone_final, paired_final, float(chosen["t_s"].max()))
