"""Charts for the chapter "Your plan": the sweep's cost-attainment trade-off and a simulated day.

The numbers come from :mod:`planner.workflows.plan`; these functions only lay them out
to fit the book's column (about 650 px).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import altair as alt
import pandas as pd

from planner.simulate.sweep import SweepResult

ROLES = ("recommended", "current", "current, recommended", "Pareto front", "dominated")

__all__ = ["ROLES", "day_chart", "pareto_chart", "plan_chart", "plan_frame", "sweep_frame"]

WIDTH_PX = 560


def sweep_frame(
    results: Sequence[SweepResult], front: Sequence[SweepResult], chosen: SweepResult | None
) -> pd.DataFrame:
    """One row per configuration: its settings as a label, cost, attainment, and whether on the front or chosen."""
    on_front = {r.index for r in front}
    rows = []
    for r in results:
        label = ", ".join(f"{k}={v:g}" if isinstance(v, float) else f"{k}={v}" for k, v in r.values)
        kind = (
            "chosen"
            if chosen is not None and r.index == chosen.index
            else ("Pareto front" if r.index in on_front else "dominated")
        )
        rows.append((r.index, label, r.cost_usd, 100.0 * r.slo_attainment_frac, r.peak_replicas, kind))
    return pd.DataFrame(rows, columns=["index", "configuration", "cost_usd", "attainment_pct", "peak_replicas", "kind"])


def pareto_chart(frame: pd.DataFrame, attainment_goal_frac: float) -> alt.LayerChart:
    """Cost against attainment for every configuration, the front joined by a line, the goal as a rule."""
    colour = alt.Color(
        "kind:N",
        title=None,
        legend=alt.Legend(orient="bottom"),
        scale=alt.Scale(domain=["chosen", "Pareto front", "dominated"], range=["#c0392b", "#2c7fb8", "#bbbbbb"]),
    )
    base = alt.Chart(frame).encode(
        x=alt.X("cost_usd:Q", title="cost of the simulated day [$]", scale=alt.Scale(zero=False)),
        y=alt.Y("attainment_pct:Q", title="SLO attainment [%]", scale=alt.Scale(zero=False)),
    )
    points = base.mark_circle(size=90, opacity=0.85).encode(
        color=colour,
        tooltip=[
            "configuration",
            alt.Tooltip("cost_usd:Q", format=".2f"),
            alt.Tooltip("attainment_pct:Q", format=".2f"),
            "peak_replicas",
        ],
    )
    front = base.transform_filter(alt.datum.kind != "dominated").mark_line(color="#2c7fb8", strokeDash=[4, 3])
    goal = (
        alt.Chart(pd.DataFrame({"goal_pct": [100.0 * attainment_goal_frac]}))
        .mark_rule(color="#555555", strokeDash=[2, 2])
        .encode(y="goal_pct:Q")
    )
    return alt.LayerChart(layer=[front, points, goal]).properties(width=WIDTH_PX, height=280)


def day_chart(series: Mapping[str, pd.DataFrame]) -> alt.Chart:
    """Ready replicas through the simulated day, one line per configuration (hours on the x axis)."""
    frames = []
    for name, frame in series.items():
        # A step line needs only the rows where the count changes (and the last one).
        changed = frame["ready"].ne(frame["ready"].shift())
        changed.iloc[-1] = True
        kept = frame.loc[changed, ["t_s", "ready"]]
        frames.append(kept.assign(hour=kept["t_s"] / 3600.0, configuration=name))
    data = pd.concat(frames, ignore_index=True)
    return (
        alt.Chart(data)
        .mark_line(interpolate="step-after")
        .encode(
            x=alt.X("hour:Q", title="time of day [h]"),
            y=alt.Y("ready:Q", title="Ready replicas"),
            color=alt.Color("configuration:N", title=None, legend=alt.Legend(orient="bottom")),
        )
        .properties(width=WIDTH_PX, height=240)
    )


def plan_frame(plan) -> pd.DataFrame:
    """One row per setting of a :class:`planner.workflows.plan.Plan`, the current one first, with its role.

    Columns: ``index``, ``setting``, ``cost_usd_per_week``, ``attainment_pct``,
    ``flap_cycles_per_week``, ``peak_replicas``, ``role`` (one of :data:`ROLES`:
    the front is on cost, attainment and flap cycles together).
    """
    on_front = {r.index for r in plan.front}
    recommended = plan.recommended.index
    rows = []
    for result in (plan.current, *plan.results):
        figures = plan.weekly(result)
        is_current = result is plan.current
        if is_current:
            role = "current, recommended" if recommended == result.index else "current"
        elif result.index == recommended:
            role = "recommended"
        else:
            role = "Pareto front" if result.index in on_front else "dominated"
        rows.append(
            (
                result.index,
                "current setting" if is_current else f"#{result.index} {figures['setting']}",
                figures["cost_usd_per_week"],
                100.0 * result.slo_attainment_frac,
                figures["flap_cycles_per_week"],
                result.peak_replicas,
                role,
            )
        )
    return pd.DataFrame(
        rows,
        columns=[
            "index",
            "setting",
            "cost_usd_per_week",
            "attainment_pct",
            "flap_cycles_per_week",
            "peak_replicas",
            "role",
        ],
    )


def plan_chart(frame: pd.DataFrame, attainment_goal_frac: float, max_flap_cycles_per_week: float | None = None):
    """Cost against attainment (top) and against flap cycles (bottom), every setting coloured by its flapping.

    The current and the recommended settings are drawn as larger labelled
    shapes; the goal and the flap limit are dashed rules.
    """
    shape = alt.Shape(
        "role:N",
        title=None,
        legend=alt.Legend(orient="bottom", columns=3),
        scale=alt.Scale(domain=list(ROLES), range=["diamond", "square", "diamond", "circle", "triangle-down"]),
    )
    colour = alt.Color(
        "flap_cycles_per_week:Q",
        title="flap cycles per week",
        scale=alt.Scale(scheme="orangered"),
        legend=alt.Legend(orient="bottom"),
    )
    tooltip = [
        "setting",
        "role",
        alt.Tooltip("cost_usd_per_week:Q", format=",.0f"),
        alt.Tooltip("attainment_pct:Q", format=".2f"),
        alt.Tooltip("flap_cycles_per_week:Q", format=",.0f"),
        "peak_replicas",
    ]
    x = alt.X(
        "cost_usd_per_week:Q",
        title="cost per week [$]",
        scale=alt.Scale(zero=False),
        axis=alt.Axis(tickCount=6, labelOverlap=True),
    )
    size = alt.condition(
        alt.FieldOneOfPredicate(field="role", oneOf=["recommended", "current", "current, recommended"]),
        alt.value(260),
        alt.value(80),
    )
    stroke = alt.condition(
        alt.FieldOneOfPredicate(field="role", oneOf=["recommended", "current, recommended"]),
        alt.value("#000000"),
        alt.value("#777777"),
    )
    marked = alt.datum.role != "Pareto front"

    def panel(y, rule_value, height):
        base = alt.Chart(frame).encode(x=x, y=y)
        points = base.mark_point(filled=True, opacity=0.9, strokeWidth=1.5).encode(
            shape=shape, color=colour, size=size, stroke=stroke, tooltip=tooltip
        )
        labels = (
            base.transform_filter(marked & (alt.datum.role != "dominated"))
            .mark_text(align="left", dx=9, dy=-9, fontSize=11)
            .encode(text="role:N")
        )
        layers = [points, labels]
        if rule_value is not None:
            layers.append(
                alt.Chart(pd.DataFrame({"v": [rule_value]}))
                .mark_rule(color="#555555", strokeDash=[2, 2])
                .encode(y="v:Q")
            )
        return alt.layer(*layers).properties(width=WIDTH_PX, height=height)

    top = panel(
        alt.Y("attainment_pct:Q", title="SLO attainment [%]", scale=alt.Scale(zero=False)),
        100.0 * attainment_goal_frac,
        240,
    )
    bottom = panel(alt.Y("flap_cycles_per_week:Q", title="flap cycles per week"), max_flap_cycles_per_week, 150)
    return alt.vconcat(top, bottom).resolve_scale(color="shared", shape="shared")
