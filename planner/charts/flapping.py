"""Charts for the flapping chapter: replicas and queue per signal, and each signal's recommendation curve."""

from __future__ import annotations

from collections.abc import Mapping

import altair as alt
import pandas as pd

from planner.charts.lab import configuration_timeline_chart

__all__ = ["fixed_point_chart", "flapping_timeline_chart", "recommendation_frame"]

_WIDTH = 300


def flapping_timeline_chart(long: pd.DataFrame, initial: str | None = None) -> alt.VConcatChart:
    """Replicas (requested and Ready) and the waiting queue over time, for the signal a selector picks.

    ``long`` is :func:`planner.charts.lab.configurations_long` of the runs, one per signal.
    """
    return configuration_timeline_chart(long, initial, panels=("replicas", "waiting"), selector="signal")


def recommendation_frame(curves: Mapping[str, pd.DataFrame]) -> pd.DataFrame:
    """Stack :func:`planner.flapping.recommendation_curve` results under a ``signal`` column."""
    return pd.concat([curve.assign(signal=label) for label, curve in curves.items()], ignore_index=True)


def fixed_point_chart(frame: pd.DataFrame) -> alt.LayerChart:
    """Replicas asked for against replicas running, one line per signal, and the diagonal.

    A signal's line crossing the diagonal is a fixed point: the fleet that size asks for itself.
    A line that jumps over the diagonal (above it at ``n``, below at ``n + 1``) has none, and the
    fleet cycles between the two sides.

    Parameters
    ----------
    frame : pandas.DataFrame
        From :func:`recommendation_frame`: ``replicas``, ``desired_replicas``, ``signal``.
    """
    top = int(max(frame["replicas"].max(), frame["desired_replicas"].max()))
    diagonal = alt.Chart(pd.DataFrame({"replicas": [0, top + 0.5]})).mark_line(
        color="#999", strokeDash=[3, 3]).encode(x="replicas:Q", y="replicas:Q")
    lines = alt.Chart(frame).mark_line(point=True).encode(
        x=alt.X("replicas:Q", title="Replicas running", scale=alt.Scale(domain=[0, top + 0.5]),
                axis=alt.Axis(tickMinStep=1)),
        y=alt.Y("desired_replicas:Q", title="Replicas the trigger asks for",
                scale=alt.Scale(domain=[0, top + 0.5]), axis=alt.Axis(tickMinStep=1)),
        color=alt.Color("signal:N", title=None, legend=alt.Legend(orient="right")),
        tooltip=["signal:N", "replicas:Q", alt.Tooltip("query_value:Q", format=".2f", title="query value"),
                 "desired_replicas:Q"],
    )
    return alt.layer(diagonal, lines).properties(
        width=_WIDTH, height=_WIDTH)
