"""Charts for the chapter on why GPU utilization makes a poor scaling signal."""

from __future__ import annotations

import altair as alt
import numpy as np
import pandas as pd

from planner.capacity.step_time import output_throughput_tps
from planner.charts import grid_slider
from planner.dynamics.gpu_utilization import (
    busy_frac_poisson,
    replica_utilization_frac,
    utilization_hpa_trace,
)

__all__ = [
    "batch_chart",
    "batch_grid",
    "hpa_targets_chart",
    "hpa_targets_grid",
    "idle_chart",
    "idle_grid",
]

_WIDTH = 560


def batch_grid(batch_limit: int, fixed_ms: float, per_sequence_ms: float, busy_utilization_frac: float) -> pd.DataFrame:
    """Utilization and output throughput at each batch size from 1 to ``batch_limit``, long form.

    Returns
    -------
    pandas.DataFrame
        Columns ``batch_size``, ``quantity``, ``pct_of_max`` (each quantity as
        a percentage of its largest value) and ``value`` with ``unit``.
    """
    batch = np.arange(1, int(batch_limit) + 1, dtype=float)
    throughput = output_throughput_tps(batch, fixed_ms, per_sequence_ms)
    # With at least one sequence in the batch the decode loop never pauses.
    utilization_pct = np.full_like(batch, 100.0 * busy_utilization_frac)
    return pd.concat(
        [
            pd.DataFrame(
                {
                    "batch_size": batch,
                    "quantity": "GPU utilization (NVML)",
                    "pct_of_max": utilization_pct,
                    "value": utilization_pct,
                    "unit": "%",
                }
            ),
            pd.DataFrame(
                {
                    "batch_size": batch,
                    "quantity": "Output tokens/s",
                    "pct_of_max": 100.0 * throughput / throughput[-1],
                    "value": throughput,
                    "unit": "tokens/s",
                }
            ),
        ],
        ignore_index=True,
    )


def batch_chart(grid: pd.DataFrame) -> alt.Chart:
    """Utilization stays flat while throughput grows with the batch."""
    return (
        alt.Chart(grid, title="What the GPU does at each batch size, as % of its maximum")
        .mark_line()
        .encode(
            x=alt.X("batch_size:Q", title="Sequences in the batch"),
            y=alt.Y("pct_of_max:Q", title="% of maximum", scale=alt.Scale(domain=[0, 105])),
            color=alt.Color("quantity:N", title=None, legend=alt.Legend(orient="bottom", labelLimit=300)),
            tooltip=[
                alt.Tooltip("batch_size:Q", title="batch"),
                alt.Tooltip("quantity:N"),
                alt.Tooltip("value:Q", format=",.1f"),
                alt.Tooltip("unit:N"),
            ],
        )
        .properties(width=_WIDTH, height=220)
    )


def idle_grid(max_in_flight: float, busy_utilization_frac: float, points: int = 121) -> pd.DataFrame:
    """Busy fraction and NVML utilization against mean requests in flight (Poisson arrivals)."""
    in_flight = np.linspace(0.0, float(max_in_flight), points)
    return pd.DataFrame(
        {
            "mean_in_flight": in_flight,
            "busy_pct": 100.0 * busy_frac_poisson(in_flight),
            "utilization_pct": 100.0 * replica_utilization_frac(in_flight, busy_utilization_frac),
        }
    )


def idle_chart(grid: pd.DataFrame, marked_in_flight: float) -> alt.LayerChart:
    """Utilization saturates after a few requests in flight; the marked load is a rule."""
    line = (
        alt.Chart(grid)
        .mark_line(color="#e45756")
        .encode(
            x=alt.X("mean_in_flight:Q", title="Mean requests in flight on the replica"),
            y=alt.Y("utilization_pct:Q", title="GPU utilization (%)", scale=alt.Scale(domain=[0, 100])),
            tooltip=[
                alt.Tooltip("mean_in_flight:Q", format=".2f", title="in flight"),
                alt.Tooltip("utilization_pct:Q", format=".1f", title="utilization %"),
            ],
        )
    )
    rule = (
        alt.Chart(pd.DataFrame({"mean_in_flight": [float(marked_in_flight)]}))
        .mark_rule(color="#4c78a8", strokeDash=[4, 4])
        .encode(x="mean_in_flight:Q")
    )
    return alt.LayerChart(layer=[line, rule]).properties(
        width=_WIDTH, height=200, title="Utilization under Poisson arrivals: near its ceiling after 3 in flight"
    )


def hpa_targets_grid(
    targets_pct,
    fleet_in_flight: float,
    start_replicas: int,
    max_replicas: int,
    warmup_s: float,
    duration_s: float,
    busy_utilization_frac: float,
) -> pd.DataFrame:
    """One :func:`planner.dynamics.gpu_utilization.utilization_hpa_trace` per target, stacked."""
    return pd.concat(
        [
            utilization_hpa_trace(
                float(target),
                fleet_in_flight,
                start_replicas,
                max_replicas,
                warmup_s,
                duration_s,
                busy_utilization_frac=busy_utilization_frac,
            ).assign(target_pct=float(target))
            for target in targets_pct
        ],
        ignore_index=True,
    )


def hpa_targets_chart(
    grid: pd.DataFrame, initial_target_pct: float, max_replicas: int, needed_replicas: int
) -> alt.LayerChart:
    """Replicas over time for the utilization target the slider picks, against what the load needs."""
    target, _ = grid_slider("target_pct", grid["target_pct"], initial_target_pct, "Utilization target (%) ")
    replicas = (
        alt.Chart(grid)
        .transform_filter(alt.datum.target_pct == target)
        .mark_line(interpolate="step-after", point=True)
        .encode(
            x=alt.X("t_s:Q", title="Time (s)"),
            y=alt.Y("desired_replicas:Q", title="Replicas", scale=alt.Scale(domain=[0, int(max_replicas) + 1])),
            tooltip=[
                alt.Tooltip("t_s:Q", title="t (s)"),
                alt.Tooltip("desired_replicas:Q", title="desired"),
                alt.Tooltip("ready_replicas:Q", title="Ready before"),
                alt.Tooltip("utilization_pct:Q", format=".1f", title="utilization %"),
                alt.Tooltip("reason:N", title="ScalingLimited"),
            ],
        )
    )
    marks = pd.DataFrame(
        {"replicas": [float(max_replicas), float(needed_replicas)], "label": ["maxReplicas", "what the load needs"]}
    )
    rules = (
        alt.Chart(marks)
        .mark_rule(strokeDash=[6, 4])
        .encode(
            y="replicas:Q",
            color=alt.Color(
                "label:N", title=None, legend=alt.Legend(orient="bottom"), scale=alt.Scale(range=["#e45756", "#54a24b"])
            ),
        )
    )
    return (
        alt.LayerChart(layer=[replicas, rules])
        .add_params(target)
        .properties(width=_WIDTH, height=220, title="Replicas an HPA on GPU utilization asks for, at constant load")
    )
