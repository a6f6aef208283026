"""Charts of one simulated run: demand, Ready capacity and the queue on one time axis, then replicas."""

from __future__ import annotations

import altair as alt
import pandas as pd

__all__ = ["count_axis_y", "fleet_timeline_chart", "timeline_long"]

_WIDTH = 560  # plus axis labels, inside the ~650 px content column


def count_axis_y(title: str, field: str = "value") -> alt.Y:
    """A y encoding for a count (requests, replicas): whole-number ticks on a domain from 0 to at least 1.

    A queue that stays empty would otherwise get a zero-height domain and a
    single tick printed as "0.000000", with no baseline.
    """
    return alt.Y(
        f"{field}:Q",
        title=title,
        scale=alt.Scale(domain=alt.DomainUnionWith(unionWith=[0, 1])),
        axis=alt.Axis(format="d", tickMinStep=1),
    )


def timeline_long(timeseries: pd.DataFrame, every_s: float = 5.0) -> pd.DataFrame:
    """The run's time series in long form, thinned to one row per ``every_s`` (mean over the span).

    Parameters
    ----------
    timeseries : pandas.DataFrame
        ``Outcome.timeseries`` from :func:`planner.simulate.reference.simulate`.
    every_s : float
        Bucket width. [s]

    Returns
    -------
    pandas.DataFrame
        Columns ``t_s``, ``series`` and ``value``.
    """
    bucket = (timeseries["t_s"] // every_s) * every_s
    thinned = timeseries.groupby(bucket).mean(numeric_only=True).drop(columns="t_s").reset_index()
    names = {
        "demand_tps": "demand (output tokens/s)",
        "ready_capacity_tps": "Ready capacity (output tokens/s)",
        "waiting": "waiting requests",
        "replicas_requested": "replicas requested",
        "replicas_ready": "replicas Ready",
    }
    long = thinned.melt(id_vars="t_s", value_vars=list(names), var_name="series", value_name="value")
    long["series"] = long["series"].map(names)
    return long


def fleet_timeline_chart(
    timeseries: pd.DataFrame, title: str = "Simulated fleet", every_s: float = 5.0
) -> alt.VConcatChart:
    """Demand against Ready capacity, the waiting queue, and replicas requested against Ready.

    The gap between the two replica lines is the cold start; queue growth
    while demand sits above Ready capacity is what users wait through.
    """
    long = timeline_long(timeseries, every_s)
    x = alt.X("t_s:Q", title="Time (s)")
    base = alt.Chart(long)
    throughput = (
        base.transform_filter(
            alt.FieldOneOfPredicate("series", ["demand (output tokens/s)", "Ready capacity (output tokens/s)"])
        )
        .mark_line(interpolate="step-after")
        .encode(
            x=x,
            y=alt.Y("value:Q", title="Output tokens/s"),
            color=alt.Color("series:N", title=None, legend=alt.Legend(orient="top")),
        )
        .properties(width=_WIDTH, height=160, title=title)
    )
    waiting = (
        base.transform_filter(alt.datum.series == "waiting requests")
        .mark_area(color="#e377c2", opacity=0.6, interpolate="step-after")
        .encode(x=x, y=count_axis_y("Waiting requests"))
        .properties(width=_WIDTH, height=90)
    )
    replicas = (
        base.transform_filter(alt.FieldOneOfPredicate("series", ["replicas requested", "replicas Ready"]))
        .mark_line(interpolate="step-after")
        .encode(
            x=x,
            y=count_axis_y("Replicas"),
            color=alt.Color(
                "series:N",
                title=None,
                scale=alt.Scale(range=["#f58518", "#54a24b"]),
                legend=alt.Legend(orient="bottom"),
            ),
        )
        .properties(width=_WIDTH, height=110)
    )
    return alt.vconcat(throughput, waiting, replicas).resolve_scale(color="independent")
