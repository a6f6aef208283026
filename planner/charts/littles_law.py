"""Charts for the chapter on Little's law and the per-replica target."""

from __future__ import annotations

import altair as alt
import numpy as np
import pandas as pd

from planner.capacity.littles_law import in_flight_requests, replicas_for_target
from planner.capacity.step_time import output_throughput_tps, tpot_ms
from planner.charts import grid_slider

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
        rows.append(
            pd.DataFrame(
                {
                    "arrival_rate_rps": rates,
                    "target_concurrency": target,
                    "in_flight": in_flight,
                    "replicas": replicas,
                    "per_replica_load": in_flight / replicas,
                }
            )
        )
    return pd.concat(rows, ignore_index=True)


def replicas_chart(grid: pd.DataFrame, knee_concurrency: float, initial_target: float) -> alt.VConcatChart:
    """Replicas against arrival rate, with a slider choosing the per-replica target.

    The slider only selects rows of ``grid``; every number was computed by
    the planner beforehand.
    """
    target, _ = grid_slider("target", grid["target_concurrency"], initial_target, "Per-replica target (requests) ")
    selected = alt.Chart(grid).transform_filter(alt.datum.target_concurrency == target)
    replicas = (
        selected.mark_line(interpolate="step-after", point=True)
        .encode(
            x=alt.X("arrival_rate_rps:Q", title="Arrival rate (requests/s)"),
            y=alt.Y("replicas:Q", title="Replicas needed"),
            tooltip=[
                alt.Tooltip("arrival_rate_rps:Q", title="arrivals (req/s)"),
                alt.Tooltip("in_flight:Q", title="in flight", format=".0f"),
                alt.Tooltip("replicas:Q", title="replicas"),
                alt.Tooltip("per_replica_load:Q", title="per replica", format=".1f"),
            ],
        )
        .properties(width=520, height=220, title="Replicas needed at the chosen target")
    )
    load = selected.mark_line(color="#333333").encode(
        x=alt.X("arrival_rate_rps:Q", title="Arrival rate (requests/s)"),
        y=alt.Y(
            "per_replica_load:Q",
            title="Requests per replica",
            scale=alt.Scale(domain=[0, float(knee_concurrency) * 1.1]),
        ),
    )
    knee_label, target_label = f"knee K = {knee_concurrency:g}", "target T (slider)"
    rule_color = alt.Color(
        "line:N",
        title=None,
        scale=alt.Scale(domain=[knee_label, target_label], range=["#b279a2", "#4c78a8"]),
        legend=alt.Legend(orient="bottom", direction="horizontal"),
    )
    rule_dash = alt.StrokeDash(
        "line:N", scale=alt.Scale(domain=[knee_label, target_label], range=[[8, 3], [4, 4]]), legend=None
    )
    knee = (
        alt.Chart(pd.DataFrame({"value": [float(knee_concurrency)], "line": [knee_label]}))
        .mark_rule(strokeWidth=2)
        .encode(y="value:Q", color=rule_color, strokeDash=rule_dash)
    )
    target_rule = (
        selected.transform_aggregate(value="max(target_concurrency)")
        .transform_calculate(line=f"'{target_label}'")
        .mark_rule(strokeWidth=2)
        .encode(y="value:Q", color=rule_color, strokeDash=rule_dash)
    )
    per_replica = alt.layer(load, knee, target_rule).properties(
        width=520, height=180, title="Load per replica after scaling, against the target and the knee"
    )
    return alt.vconcat(replicas, per_replica).add_params(target)


def step_time_grid(batch_sizes, fixed_ms: float, per_sequence_ms: float) -> pd.DataFrame:
    """TPOT and output throughput of one replica at each batch size."""
    batch = np.asarray(batch_sizes, dtype=float)
    return pd.DataFrame(
        {
            "batch_size": batch,
            "tpot_ms": tpot_ms(batch, fixed_ms, per_sequence_ms),
            "output_tps": output_throughput_tps(batch, fixed_ms, per_sequence_ms),
        }
    )


def step_time_chart(
    grid: pd.DataFrame, tpot_slo_ms: float, target_batch: float, knee_batch: float | None = None
) -> alt.HConcatChart:
    """Output throughput and TPOT against batch size, with the objective, the knee and the target marked.

    Parameters
    ----------
    grid : pandas.DataFrame
        From :func:`step_time_grid`.
    tpot_slo_ms : float
        TPOT objective, a horizontal rule on the TPOT panel. [ms]
    target_batch : float
        The per-replica target T, a vertical rule on both panels. [sequences]
    knee_batch : float, optional
        The knee K, a vertical rule on both panels. [sequences]

    Every rule is named in one legend under the charts.
    """
    markers = [(f"target T = {target_batch:g}", float(target_batch), "#4c78a8", [4, 4])]
    if knee_batch is not None:
        markers.insert(0, (f"knee K = {knee_batch:g}", float(knee_batch), "#b279a2", [8, 3]))
    slo_label = f"TPOT objective {tpot_slo_ms:g} ms"
    legend_items = [*markers, (slo_label, float(tpot_slo_ms), "#e45756", [2, 2])]
    domain = [label for label, _, _, _ in legend_items]
    color = alt.Color(
        "line:N",
        title=None,
        scale=alt.Scale(domain=domain, range=[c for _, _, c, _ in legend_items]),
        legend=alt.Legend(orient="bottom", direction="horizontal"),
    )
    dash = alt.StrokeDash(
        "line:N", scale=alt.Scale(domain=domain, range=[d for _, _, _, d in legend_items]), legend=None
    )
    base = alt.Chart(grid).encode(x=alt.X("batch_size:Q", title="Sequences in the batch"))
    throughput = base.mark_line(color="#54a24b").encode(
        y=alt.Y("output_tps:Q", title="Output tokens/s per replica"),
        tooltip=[alt.Tooltip("batch_size:Q"), alt.Tooltip("output_tps:Q", format=",.0f")],
    )
    vertical = (
        alt.Chart(
            pd.DataFrame({"batch_size": [x for _, x, _, _ in markers], "line": [label for label, _, _, _ in markers]})
        )
        .mark_rule(strokeWidth=2)
        .encode(x="batch_size:Q", color=color, strokeDash=dash, tooltip=[alt.Tooltip("line:N", title="marks")])
    )
    tpot = base.mark_line(color="#f58518").encode(
        y=alt.Y("tpot_ms:Q", title="TPOT (ms)"),
        tooltip=[alt.Tooltip("batch_size:Q"), alt.Tooltip("tpot_ms:Q", format=".2f")],
    )
    slo = (
        alt.Chart(pd.DataFrame({"tpot_ms": [float(tpot_slo_ms)], "line": [slo_label]}))
        .mark_rule(strokeWidth=2)
        .encode(y="tpot_ms:Q", color=color, strokeDash=dash)
    )
    return alt.hconcat(
        alt.layer(throughput, vertical).properties(width=260, height=200, title="Throughput keeps rising"),
        alt.layer(tpot, slo, vertical).properties(width=260, height=200, title="...while TPOT rises too"),
    ).resolve_scale(color="shared", strokeDash="shared")
