"""Charts for the chapter on backlog, headroom and cold starts."""

from __future__ import annotations

import altair as alt
import numpy as np
import pandas as pd

from planner.charts import grid_slider
from planner.headroom import backlog_clear_s, reaction_time_s, step_backlog_trajectory_requests

__all__ = ["backlog_chart", "cold_start_grid", "cold_start_table"]

_WIDTH = 560


def cold_start_grid(cold_starts_s, metric_window_s: float, eval_interval_s: float, arrival_rate_rps: float,
                    step_arrival_rate_rps: float, capacity_rps: float, capacity_after_rps: float,
                    horizon_s: float, points: int = 121) -> pd.DataFrame:
    """The queue after a step, over time, for each cold start in ``cold_starts_s``.

    Returns
    -------
    pandas.DataFrame
        Columns ``cold_start_s``, ``reaction_time_s``, ``t_s``, ``queue_requests``.
    """
    time_s = np.linspace(0.0, float(horizon_s), points)
    frames = []
    for cold_start in np.asarray(cold_starts_s, dtype=float):
        reaction = reaction_time_s(metric_window_s, eval_interval_s, cold_start)
        # The peak is at the reaction time: sample it so the chart shows the true peak.
        times_s = np.union1d(time_s, [min(reaction, float(horizon_s))])
        queue = step_backlog_trajectory_requests(times_s, arrival_rate_rps, step_arrival_rate_rps, capacity_rps,
                                                 capacity_after_rps, reaction)
        frames.append(pd.DataFrame({"cold_start_s": cold_start, "reaction_time_s": reaction, "t_s": times_s,
                                    "queue_requests": queue}))
    return pd.concat(frames, ignore_index=True)


def cold_start_table(cold_starts_s, metric_window_s: float, eval_interval_s: float,
                     step_arrival_rate_rps: float, capacity_rps: float, capacity_after_rps: float) -> pd.DataFrame:
    """Peak backlog, time to clear it and the longest wait, per cold start."""
    rows = []
    for cold_start in np.asarray(cold_starts_s, dtype=float):
        reaction = reaction_time_s(metric_window_s, eval_interval_s, cold_start)
        peak = max(0.0, step_arrival_rate_rps - capacity_rps) * reaction
        clear = backlog_clear_s(peak, capacity_after_rps, step_arrival_rate_rps)
        rows.append({"cold start (s)": cold_start, "reaction time (s)": reaction,
                     "peak backlog (requests)": round(peak), "time to clear it (s)": round(clear, 1)})
    return pd.DataFrame(rows)


def backlog_chart(grid: pd.DataFrame, initial_cold_start_s: float) -> alt.LayerChart:
    """The queue after the step for the cold start the slider picks; the rule marks new capacity."""
    cold_start, step = grid_slider("cold_start_s", grid["cold_start_s"], initial_cold_start_s, "Cold start (s) ")
    chosen = alt.Chart(grid).transform_filter(
        f"abs(datum.cold_start_s - {cold_start.name}) < {step / 2}"
    )
    queue = chosen.mark_area(color="#e45756", opacity=0.5, line=True).encode(
        x=alt.X("t_s:Q", title="Time since the step (s)"),
        y=alt.Y("queue_requests:Q", title="Requests queued",
                scale=alt.Scale(domain=[0, float(grid["queue_requests"].max()) * 1.05])),
        tooltip=[alt.Tooltip("t_s:Q", title="t (s)", format=".0f"),
                 alt.Tooltip("queue_requests:Q", title="queued", format=",.0f")],
    )
    ready = chosen.transform_aggregate(reaction="max(reaction_time_s)").mark_rule(
        color="#54a24b", strokeDash=[6, 4]
    ).encode(x=alt.X("reaction:Q"))
    return alt.layer(queue, ready).add_params(cold_start).properties(
        width=_WIDTH, height=220, title="The queue a step leaves; green: new replicas Ready"
    )
