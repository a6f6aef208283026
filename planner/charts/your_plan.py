"""Charts for the chapter "Your plan": the sweep's cost-attainment trade-off and a simulated day.

The numbers come from :mod:`planner.plan`; these functions only lay them out
to fit the book's column (about 650 px).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import altair as alt
import pandas as pd

from planner.simulate.sweep import SweepResult

__all__ = ["day_chart", "pareto_chart", "sweep_frame"]

WIDTH_PX = 560


def sweep_frame(results: Sequence[SweepResult], front: Sequence[SweepResult],
                chosen: SweepResult | None) -> pd.DataFrame:
    """One row per configuration: its settings as a label, cost, attainment, and whether on the front or chosen."""
    on_front = {r.index for r in front}
    rows = []
    for r in results:
        label = ", ".join(f"{k}={v:g}" if isinstance(v, float) else f"{k}={v}" for k, v in r.values)
        kind = "chosen" if chosen is not None and r.index == chosen.index else (
            "Pareto front" if r.index in on_front else "dominated")
        rows.append((r.index, label, r.cost_usd, 100.0 * r.slo_attainment_frac, r.peak_replicas, kind))
    return pd.DataFrame(rows, columns=["index", "configuration", "cost_usd", "attainment_pct", "peak_replicas",
                                       "kind"])


def pareto_chart(frame: pd.DataFrame, attainment_goal_frac: float) -> alt.LayerChart:
    """Cost against attainment for every configuration, the front joined by a line, the goal as a rule."""
    colour = alt.Color("kind:N", title=None, legend=alt.Legend(orient="bottom"),
                       scale=alt.Scale(domain=["chosen", "Pareto front", "dominated"],
                                       range=["#c0392b", "#2c7fb8", "#bbbbbb"]))
    base = alt.Chart(frame).encode(
        x=alt.X("cost_usd:Q", title="cost of the simulated day [$]", scale=alt.Scale(zero=False)),
        y=alt.Y("attainment_pct:Q", title="SLO attainment [%]", scale=alt.Scale(zero=False)),
    )
    points = base.mark_circle(size=90, opacity=0.85).encode(
        color=colour, tooltip=["configuration", alt.Tooltip("cost_usd:Q", format=".2f"),
                               alt.Tooltip("attainment_pct:Q", format=".2f"), "peak_replicas"])
    front = base.transform_filter(alt.datum.kind != "dominated").mark_line(color="#2c7fb8", strokeDash=[4, 3])
    goal = alt.Chart(pd.DataFrame({"goal_pct": [100.0 * attainment_goal_frac]})).mark_rule(
        color="#555555", strokeDash=[2, 2]).encode(y="goal_pct:Q")
    return alt.layer(front, points, goal).properties(width=WIDTH_PX, height=280)


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
    return alt.Chart(data).mark_line(interpolate="step-after").encode(
        x=alt.X("hour:Q", title="time of day [h]"),
        y=alt.Y("ready:Q", title="Ready replicas"),
        color=alt.Color("configuration:N", title=None, legend=alt.Legend(orient="bottom")),
    ).properties(width=WIDTH_PX, height=240)
