"""Charts for the chapter on backlog, headroom and cold starts."""

from __future__ import annotations

import altair as alt
import numpy as np
import pandas as pd

from planner.capacity.headroom import (
    backlog_clear_s,
    reaction_time_s,
    step_backlog_trajectory_requests,
)
from planner.charts import grid_slider
from planner.dynamics.replica_queues import LEAST_LOADED, ROUND_ROBIN, step_drain

__all__ = ["MODEL_LABELS", "backlog_chart", "cold_start_grid", "cold_start_table"]

_WIDTH = 560
# Integration step for the per-replica grids: fine enough for the chart (mu x dt / K is a few %).
_GRID_DT_S = 0.5

SHARED = "one shared queue"
MODEL_LABELS = {
    SHARED: SHARED,
    ROUND_ROBIN: "per-pod queues, round robin or random",
    LEAST_LOADED: "per-pod queues, least loaded",
}


def cold_start_grid(
    cold_starts_s,
    metric_window_s: float,
    eval_interval_s: float,
    arrival_rate_rps: float,
    step_arrival_rate_rps: float,
    capacity_rps: float,
    capacity_after_rps: float,
    horizon_s: float,
    points: int = 121,
    *,
    replicas_before: int | None = None,
    replicas_after: int | None = None,
    slots: float | None = None,
) -> pd.DataFrame:
    """The queue after a step, over time, for each cold start in ``cold_starts_s``.

    Always the shared-queue fluid model
    (:func:`planner.capacity.headroom.step_backlog_trajectory_requests`); with
    ``replicas_before``, ``replicas_after`` and ``slots`` (the knee K) also the
    per-pod queues behind a round-robin and a least-loaded router
    (:func:`planner.dynamics.replica_queues.step_drain`), each pod completing
    ``capacity_rps / replicas_before`` requests per second.

    Returns
    -------
    pandas.DataFrame
        Columns ``cold_start_s``, ``reaction_time_s``, ``t_s``, ``queue_requests``
        and ``model`` (a label from :data:`MODEL_LABELS`).
    """
    time_s = np.linspace(0.0, float(horizon_s), points)
    frames = []
    for cold_start in np.asarray(cold_starts_s, dtype=float):
        reaction = reaction_time_s(metric_window_s, eval_interval_s, cold_start)
        # The peak is at the reaction time: sample it so the chart shows the true peak.
        times_s = np.union1d(time_s, [min(reaction, float(horizon_s))])
        queue = step_backlog_trajectory_requests(
            times_s, arrival_rate_rps, step_arrival_rate_rps, capacity_rps, capacity_after_rps, reaction
        )
        frames.append(
            pd.DataFrame(
                {
                    "cold_start_s": cold_start,
                    "reaction_time_s": reaction,
                    "t_s": times_s,
                    "queue_requests": queue,
                    "model": MODEL_LABELS[SHARED],
                }
            )
        )
        if replicas_before is not None and replicas_after is not None and slots is not None:
            for router in (ROUND_ROBIN, LEAST_LOADED):
                drain = step_drain(
                    times_s,
                    arrival_rate_rps,
                    step_arrival_rate_rps,
                    replicas_before,
                    replicas_after,
                    capacity_rps / replicas_before,
                    slots,
                    reaction,
                    router,
                    dt_s=_GRID_DT_S,
                )
                frames.append(
                    pd.DataFrame(
                        {
                            "cold_start_s": cold_start,
                            "reaction_time_s": reaction,
                            "t_s": times_s,
                            "queue_requests": drain.waiting_requests,
                            "model": MODEL_LABELS[router],
                        }
                    )
                )
    return pd.concat(frames, ignore_index=True)


def cold_start_table(
    cold_starts_s,
    metric_window_s: float,
    eval_interval_s: float,
    step_arrival_rate_rps: float,
    capacity_rps: float,
    capacity_after_rps: float,
    *,
    arrival_rate_rps: float | None = None,
    replicas_before: int | None = None,
    replicas_after: int | None = None,
    slots: float | None = None,
) -> pd.DataFrame:
    """Peak backlog, time to clear it and the longest wait, per cold start.

    With ``arrival_rate_rps``, ``replicas_before``, ``replicas_after`` and
    ``slots``, also the time to clear the per-pod queues behind each router.
    """
    rows = []
    for cold_start in np.asarray(cold_starts_s, dtype=float):
        reaction = reaction_time_s(metric_window_s, eval_interval_s, cold_start)
        peak = max(0.0, step_arrival_rate_rps - capacity_rps) * reaction
        clear = backlog_clear_s(peak, capacity_after_rps, step_arrival_rate_rps)
        row = {
            "cold start (s)": cold_start,
            "reaction time (s)": reaction,
            "peak backlog (requests)": round(peak),
            "time to clear it (s)": round(clear, 1),
        }
        if (
            arrival_rate_rps is not None
            and replicas_before is not None
            and replicas_after is not None
            and slots is not None
        ):
            # Round robin, the slower router, takes replicas_after / replicas_before times the shared
            # queue's time (planner.dynamics.replica_queues.round_robin_clear_s): simulate a little past that.
            horizon_s = reaction + 1.2 * clear * replicas_after / replicas_before + 30.0
            if not np.isfinite(horizon_s):
                horizon_s = reaction + 3600.0
            for router, column in ((ROUND_ROBIN, "round robin (s)"), (LEAST_LOADED, "least loaded (s)")):
                drain = step_drain(
                    np.arange(0.0, horizon_s, 1.0),
                    arrival_rate_rps,
                    step_arrival_rate_rps,
                    replicas_before,
                    replicas_after,
                    capacity_rps / replicas_before,
                    slots,
                    reaction,
                    router,
                    dt_s=_GRID_DT_S,
                )
                row[column] = round(drain.clear_s, 1)
        rows.append(row)
    return pd.DataFrame(rows)


def backlog_chart(grid: pd.DataFrame, initial_cold_start_s: float) -> alt.LayerChart:
    """The queue after the step for the cold start the slider picks, one line per queue model.

    The green rule marks the new replicas becoming Ready.
    """
    cold_start, step = grid_slider("cold_start_s", grid["cold_start_s"], initial_cold_start_s, "Cold start (s) ")
    chosen = alt.Chart(grid).transform_filter(f"abs(datum.cold_start_s - {cold_start.name}) < {step / 2}")
    models = [label for label in MODEL_LABELS.values() if label in set(grid["model"])]
    queue = chosen.mark_line().encode(
        x=alt.X("t_s:Q", title="Time since the step (s)"),
        y=alt.Y(
            "queue_requests:Q",
            title="Requests queued",
            scale=alt.Scale(domain=[0, float(grid["queue_requests"].max()) * 1.05]),
        ),
        color=alt.Color(
            "model:N",
            title=None,
            sort=models,
            scale=alt.Scale(domain=models, range=["#e45756", "#4c78a8", "#f58518"][: len(models)]),
            legend=alt.Legend(orient="top", direction="vertical", labelLimit=400),
        ),
        strokeDash=alt.StrokeDash(
            "model:N",
            sort=models,
            legend=None,
            scale=alt.Scale(domain=models, range=[[1, 0], [6, 3], [2, 2]][: len(models)]),
        ),
        tooltip=[
            alt.Tooltip("model:N", title="model"),
            alt.Tooltip("t_s:Q", title="t (s)", format=".0f"),
            alt.Tooltip("queue_requests:Q", title="queued", format=",.0f"),
        ],
    )
    ready = (
        chosen.transform_aggregate(reaction="max(reaction_time_s)")
        .mark_rule(color="#54a24b", strokeDash=[6, 4])
        .encode(x=alt.X("reaction:Q"))
    )
    return (
        alt.LayerChart(layer=[queue, ready])
        .add_params(cold_start)
        .properties(width=_WIDTH, height=220, title="The queue a step leaves; green: new replicas Ready")
    )
