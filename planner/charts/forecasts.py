"""Charts for the chapter on forecasts: each strategy's GPU-hours against attainment over its targets.

The numbers come from :mod:`planner.workflows.forecast_comparison`; these functions only lay them
out to fit the book's column (about 650 px).
"""

from __future__ import annotations

import altair as alt
import pandas as pd

__all__ = ["comparison_chart", "comparison_frame"]

WIDTH_PX = 560


def comparison_frame(comparison) -> pd.DataFrame:
    """One row per run of a :class:`planner.workflows.forecast_comparison.ForecastComparison`.

    Columns: ``strategy``, ``target`` (per-replica in-flight target), ``gpu_hours``,
    ``attainment_pct``, ``peak_replicas``.
    """
    rows = [
        (
            strategy.name,
            float(dict(run.values)["target"]),
            run.gpu_hours,
            100.0 * run.slo_attainment_frac,
            run.peak_replicas,
        )
        for strategy in comparison.strategies
        for run in strategy.runs
    ]
    return pd.DataFrame(rows, columns=["strategy", "target", "gpu_hours", "attainment_pct", "peak_replicas"])


def comparison_chart(frame: pd.DataFrame, attainment_goal_frac: float) -> alt.LayerChart:
    """GPU-hours against attainment, one line per strategy through its targets, the goal as a dashed rule.

    Where a line crosses the rule is the strategy's GPU-hours at the goal: the lower, the cheaper.
    """
    base = alt.Chart(frame).encode(
        x=alt.X("attainment_pct:Q", title="SLO attainment [%]", scale=alt.Scale(zero=False)),
        y=alt.Y("gpu_hours:Q", title="GPU-hours of the replay [h]", scale=alt.Scale(zero=False)),
        color=alt.Color("strategy:N", title=None, legend=alt.Legend(orient="bottom")),
    )
    lines = base.mark_line(point=True).encode(
        order="target:Q",
        tooltip=[
            "strategy",
            alt.Tooltip("target:Q", format=".3g"),
            alt.Tooltip("gpu_hours:Q", format=".2f"),
            alt.Tooltip("attainment_pct:Q", format=".2f"),
            "peak_replicas",
        ],
    )
    goal = (
        alt.Chart(pd.DataFrame({"goal_pct": [100.0 * attainment_goal_frac]}))
        .mark_rule(color="#555555", strokeDash=[2, 2])
        .encode(x="goal_pct:Q")
    )
    return alt.LayerChart(layer=[lines, goal]).properties(width=WIDTH_PX, height=300)
