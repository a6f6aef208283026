"""Charts for the chapter on Little's law and the per-replica target."""

from __future__ import annotations

import altair as alt
import numpy as np
import pandas as pd

from planner.charts import grid_slider
from planner.littles_law import in_flight_requests, replicas_for_target
from planner.step_time import output_throughput_tps, tpot_ms

__all__ = ["replicas_chart", "replicas_grid", "slider_values", "step_time_chart", "step_time_grid"]


def slider_values(low: float, high: float, max_count: int = 32) -> np.ndarray:
    """Evenly spaced whole-number slider positions from ``low`` to ``high``.

    The step is a whole number chosen so there are at most ``max_count``
    positions, keeping precomputed grids under altair's row limit.
    """
    low, high = float(np.floor(low)), float(np.ceil(high))
    step = max(1.0, float(np.ceil((high - low) / max(1, max_count - 1))))
    return np.arange(low, high + step / 2, step)


def replicas_grid(arrival_rates_rps, time_in_system_s: float, targets) -> pd.DataFrame:
    """Replicas needed at each arrival rate, for each candidate per-replica target.

    Returns
    -------
    pandas.DataFrame
        Columns ``arrival_rate_rps``, ``target_concurrency``, ``in_flight``,
        ``replicas``, ``per_replica_load``.
    """
    rates = np.asarray(arrival_rates_rps, dtype=float)
    rows = []
    for target in np.asarray(targets, dtype=float):
        in_flight = in_flight_requests(rates, time_in_system_s)
        replicas = replicas_for_target(in_flight, target)
        rows.append(pd.DataFrame({
            "arrival_rate_rps": rates,
            "target_concurrency": target,
            "in_flight": in_flight,
            "replicas": replicas,
            "per_replica_load": in_flight / replicas,
        }))
    return pd.concat(rows, ignore_index=True)


def replicas_chart(grid: pd.DataFrame, knee_concurrency: float, initial_target: float) -> alt.VConcatChart:
    """Replicas against arrival rate, with a slider choosing the per-replica target.

    The slider only selects rows of ``grid``; every number was computed by
    the planner beforehand.
    """
    target, _ = grid_slider("target", grid["target_concurrency"], initial_target,
                            "Per-replica target (requests) ")
    selected = alt.Chart(grid).transform_filter(alt.datum.target_concurrency == target)
    replicas = selected.mark_line(interpolate="step-after", point=True).encode(
        x=alt.X("arrival_rate_rps:Q", title="Arrival rate (requests/s)"),
        y=alt.Y("replicas:Q", title="Replicas needed"),
        tooltip=[
            alt.Tooltip("arrival_rate_rps:Q", title="arrivals (req/s)"),
            alt.Tooltip("in_flight:Q", title="in flight", format=".0f"),
            alt.Tooltip("replicas:Q", title="replicas"),
            alt.Tooltip("per_replica_load:Q", title="per replica", format=".1f"),
        ],
    ).properties(width=520, height=220, title="Replicas needed at the chosen target")
    load = selected.mark_line(color="#4c78a8").encode(
        x=alt.X("arrival_rate_rps:Q", title="Arrival rate (requests/s)"),
        y=alt.Y("per_replica_load:Q", title="Requests per replica",
                scale=alt.Scale(domain=[0, float(knee_concurrency) * 1.1])),
    )
    knee = alt.Chart(pd.DataFrame({"knee": [float(knee_concurrency)]})).mark_rule(
        color="#e45756", strokeDash=[6, 4]
    ).encode(y="knee:Q")
    knee_label = alt.Chart(pd.DataFrame({"knee": [float(knee_concurrency)], "label": ["knee"]})).mark_text(
        align="left", dx=4, dy=-6, color="#e45756"
    ).encode(y="knee:Q", x=alt.value(0), text="label:N")
    per_replica = alt.layer(load, knee, knee_label).properties(
        width=520, height=180, title="Load per replica after scaling, against the knee"
    )
    return alt.vconcat(replicas, per_replica).add_params(target)


def step_time_grid(batch_sizes, fixed_ms: float, per_sequence_ms: float) -> pd.DataFrame:
    """TPOT and output throughput of one replica at each batch size."""
    batch = np.asarray(batch_sizes, dtype=float)
    return pd.DataFrame({
        "batch_size": batch,
        "tpot_ms": tpot_ms(batch, fixed_ms, per_sequence_ms),
        "output_tps": output_throughput_tps(batch, fixed_ms, per_sequence_ms),
    })


def step_time_chart(grid: pd.DataFrame, tpot_slo_ms: float, target_batch: float) -> alt.HConcatChart:
    """Output throughput and TPOT against batch size, with the SLO and the target marked."""
    base = alt.Chart(grid).encode(x=alt.X("batch_size:Q", title="Sequences in the batch"))
    throughput = base.mark_line(color="#54a24b").encode(
        y=alt.Y("output_tps:Q", title="Output tokens/s per replica"),
        tooltip=[alt.Tooltip("batch_size:Q"), alt.Tooltip("output_tps:Q", format=",.0f")],
    )
    target_rule = alt.Chart(pd.DataFrame({"batch_size": [float(target_batch)]})).mark_rule(
        strokeDash=[4, 4], color="#4c78a8"
    ).encode(x="batch_size:Q")
    tpot = base.mark_line(color="#f58518").encode(
        y=alt.Y("tpot_ms:Q", title="TPOT (ms)"),
        tooltip=[alt.Tooltip("batch_size:Q"), alt.Tooltip("tpot_ms:Q", format=".2f")],
    )
    slo = alt.Chart(pd.DataFrame({"tpot_ms": [float(tpot_slo_ms)]})).mark_rule(
        color="#e45756", strokeDash=[6, 4]
    ).encode(y="tpot_ms:Q")
    return alt.hconcat(
        alt.layer(throughput, target_rule).properties(width=260, height=200, title="Throughput keeps rising"),
        alt.layer(tpot, slo, target_rule).properties(width=260, height=200, title="...while TPOT rises too"),
    )
