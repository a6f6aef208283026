"""Charts for the flapping chapter: replicas and queue per signal, and each signal's recommendation curve."""

from __future__ import annotations

from collections.abc import Mapping

import altair as alt
import pandas as pd

from planner.charts.lab import configuration_timeline_chart

__all__ = ["fixed_point_chart", "flapping_timeline_chart", "recommendation_frame", "recommendation_table"]

_WIDTH = 90  # three panels and the axis fit a 390 px phone screen


def flapping_timeline_chart(long: pd.DataFrame, initial: str | None = None) -> alt.VConcatChart:
    """Replicas (requested and Ready) and the waiting queue over time, for the signal a selector picks.

    ``long`` is :func:`planner.charts.lab.configurations_long` of the runs, one per signal.
    """
    return configuration_timeline_chart(long, initial, panels=("replicas", "waiting"), selector="signal")


def recommendation_frame(curves: Mapping[str, pd.DataFrame]) -> pd.DataFrame:
    """Stack :func:`planner.workflows.flapping.recommendation_curve` results under a ``signal`` column."""
    return pd.concat([curve.assign(signal=label) for label, curve in curves.items()], ignore_index=True)


def recommendation_table(curves: Mapping[str, pd.DataFrame]) -> pd.DataFrame:
    """:func:`recommendation_frame` for reading: one row per design and fleet size, headers in words."""
    return (
        recommendation_frame(curves)
        .rename(
            columns={
                "signal": "design",
                "replicas": "replicas running",
                "query_value": "query value",
                "desired_replicas": "replicas asked for",
            }
        )[["design", "replicas running", "query value", "replicas asked for"]]
        .set_index(["design", "replicas running"])
    )


def fixed_point_chart(frame: pd.DataFrame) -> alt.FacetChart:
    """Replicas asked for against replicas running, one panel per signal, against the diagonal.

    A trigger answers only at whole replica counts, so each answer is drawn
    as a step one replica wide: a step that lies on the diagonal is a fixed
    point (the fleet that size asks for itself, ringed); a line that jumps
    over the diagonal (above it at ``n``, below at ``n + 1``) has none, and
    the fleet cycles between the two sides. One panel per signal keeps lines
    that agree at some sizes from hiding each other.

    Parameters
    ----------
    frame : pandas.DataFrame
        From :func:`recommendation_frame`: ``replicas``, ``desired_replicas``, ``signal``.
    """
    top = int(max(frame["replicas"].max(), frame["desired_replicas"].max()))
    low, high = float(frame["replicas"].min()) - 0.5, float(frame["replicas"].max()) + 0.5
    signals = list(frame["signal"].unique())
    # One table, three parts, shared x and y columns so every layer draws on the same axes:
    # the trigger's answers at whole counts; each answer as a step from n - 0.5 to n + 0.5 (a last
    # row, the largest count's answer again at the right edge, closes the final step); the diagonal.
    answers = frame.assign(
        part="answer",
        x=frame["replicas"],
        y=frame["desired_replicas"],
        fixed=frame["replicas"] == frame["desired_replicas"],
    )
    steps = [frame.assign(part="step", x=frame["replicas"] - 0.5, y=frame["desired_replicas"])]
    for signal, curve in frame.groupby("signal", sort=False):
        last = curve.loc[curve["replicas"].idxmax()]
        steps.append(
            pd.DataFrame(
                [{"signal": signal, "part": "step", "x": float(last["replicas"]) + 0.5, "y": last["desired_replicas"]}]
            )
        )
    diagonal = pd.DataFrame(
        [{"signal": signal, "part": "diagonal", "x": v, "y": v} for signal in signals for v in (low, high)]
    )
    data = pd.concat([answers, *steps, diagonal], ignore_index=True)
    x = alt.X(
        "x:Q",
        title="Replicas running",
        scale=alt.Scale(domain=[low, high], nice=False),
        axis=alt.Axis(values=list(range(int(low + 0.5), int(high + 0.5) + 1)), format="d", labelOverlap=False),
    )
    y = alt.Y(
        "y:Q",
        title="Replicas asked for",
        scale=alt.Scale(domain=[0, top + 0.5], nice=False),
        axis=alt.Axis(values=list(range(0, top + 1)), format="d", labelOverlap=False),
    )
    color = alt.Color("signal:N", legend=None, sort=signals)
    base = alt.Chart().encode(x=x, y=y)
    diagonal_line = base.transform_filter("datum.part == 'diagonal'").mark_line(color="#999", strokeDash=[3, 3])
    step_line = (
        base.transform_filter("datum.part == 'step'")
        .mark_line(interpolate="step-after", strokeWidth=2.5)
        .encode(color=color, order="x:Q")
    )
    answer_points = (
        base.transform_filter("datum.part == 'answer'")
        .mark_point(filled=True, size=50)
        .encode(
            color=color,
            tooltip=[
                "signal:N",
                alt.Tooltip("replicas:Q", title="replicas running"),
                alt.Tooltip("query_value:Q", format=".2f", title="query value"),
                alt.Tooltip("desired_replicas:Q", title="replicas asked for"),
            ],
        )
    )
    fixed_rings = base.transform_filter("datum.part == 'answer' && datum.fixed").mark_point(
        size=320, color="black", strokeWidth=1.5
    )
    return (
        alt.layer(diagonal_line, step_line, answer_points, fixed_rings, data=data)
        .properties(width=_WIDTH, height=_WIDTH + 20)
        .facet(
            facet=alt.Facet(
                "signal:N",
                title=None,
                sort=signals,
                # "label: name" on two lines, so long names fit a narrow panel.
                header=alt.Header(labelExpr="split(datum.value, ': ')", labelLimit=_WIDTH + 12, labelFontSize=11),
            ),
            columns=3,
            spacing=12,
        )
    )
