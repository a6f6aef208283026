"""The oracle beside a sweep: each configuration's cost and attainment, the Pareto front, and the bound.

The bound (:mod:`planner.simulate.oracle`) is drawn as two curves over attainment: with the fleet's
cold start (nothing can lie left of it) and with instant scaling. The horizontal distance from a
configuration to the cold-start curve at its attainment is its regret.
"""

from __future__ import annotations

from collections.abc import Sequence

import altair as alt
import numpy as np
import pandas as pd

from planner.simulate.oracle import OracleCurve
from planner.simulate.sweep import SweepResult, pareto_front

__all__ = [
    "ATTAINMENT_Y",
    "BOUNDS",
    "COST_X",
    "WIDTH_PX",
    "bound_frame",
    "bound_lines",
    "configurations_frame",
    "goal_rule",
    "oracle_chart",
]

WIDTH_PX = 560
BOUNDS = ("oracle, cold start", "oracle, instant scaling")
# The axes of a cost-against-attainment chart, shared by every layer drawn on it.
COST_X = alt.X("cost_usd:Q", title="cost of the replayed trace [$]", scale=alt.Scale(zero=True))
ATTAINMENT_Y = alt.Y("attainment_pct:Q", title="SLO attainment [%]", scale=alt.Scale(zero=False))


def configurations_frame(results: Sequence[SweepResult]) -> pd.DataFrame:
    """One row per configuration: ``index``, ``configuration``, ``cost_usd``, ``attainment_pct``,
    ``regret_usd`` (NaN where not computed) and ``kind`` (``Pareto front`` or ``dominated``)."""
    on_front = {r.index for r in pareto_front(results)}
    rows = [
        (
            r.index,
            ", ".join(f"{k}={v:g}" if isinstance(v, float) else f"{k}={v}" for k, v in r.values) or "as written",
            r.cost_usd,
            100.0 * r.slo_attainment_frac,
            np.nan if r.regret_usd is None else r.regret_usd,
            "Pareto front" if r.index in on_front else "dominated",
        )
        for r in results
    ]
    return pd.DataFrame(rows, columns=["index", "configuration", "cost_usd", "attainment_pct", "regret_usd", "kind"])


def bound_frame(curve: OracleCurve, lowest_attainment_frac: float = 0.0) -> pd.DataFrame:
    """The two bounds from ``lowest_attainment_frac`` to 100 %, long form: ``attainment_pct``, ``cost_usd``, ``bound``.

    Attainments no run can reach (inf) are left out.
    """
    attained = curve.attainment_frac
    keep = attained >= lowest_attainment_frac
    frames = []
    for name, cost in zip(BOUNDS, (curve.cold_start_cost_usd, curve.instant_cost_usd), strict=True):
        finite = keep & np.isfinite(cost)
        rows = {"attainment_pct": 100.0 * attained[finite], "cost_usd": cost[finite], "bound": name}
        frames.append(pd.DataFrame(rows))
    return pd.concat(frames, ignore_index=True)


def bound_lines(curve: OracleCurve, lowest_attainment_frac: float = 0.0) -> alt.Chart:
    """The oracle's two bounds as black steps (solid: cold start; dashed: instant), from a little below
    ``lowest_attainment_frac`` (the lowest attainment the chart's runs reach) [fraction]."""
    return (
        alt.Chart(bound_frame(curve, max(0.0, lowest_attainment_frac - 0.02)))
        .mark_line(interpolate="step-before")
        .encode(
            x=COST_X,
            y=ATTAINMENT_Y,
            strokeDash=alt.StrokeDash(
                "bound:N", title=None, legend=alt.Legend(orient="bottom"), scale=alt.Scale(domain=list(BOUNDS))
            ),
            color=alt.value("#222222"),
            order=alt.Order("attainment_pct:Q"),
        )
    )


def goal_rule(attainment_goal_frac: float) -> alt.Chart:
    """The attainment goal as a dotted horizontal rule. [fraction]"""
    return (
        alt.Chart(pd.DataFrame({"attainment_pct": [100.0 * attainment_goal_frac]}))
        .mark_rule(color="#555555", strokeDash=[2, 2])
        .encode(y="attainment_pct:Q")
    )


def oracle_chart(
    results: Sequence[SweepResult], curve: OracleCurve, attainment_goal_frac: float | None = None
) -> alt.LayerChart:
    """Cost against attainment for every configuration, the front joined, the oracle's two bounds as lines.

    The bounds are drawn from a little below the lowest attainment swept; the goal, if given, is a rule.
    """
    frame = configurations_frame(results)
    lowest = min((r.slo_attainment_frac for r in results if np.isfinite(r.slo_attainment_frac)), default=0.0)
    lines = bound_lines(curve, lowest)
    x, y = COST_X, ATTAINMENT_Y
    colour = alt.Color(
        "kind:N",
        title=None,
        legend=alt.Legend(orient="bottom"),
        scale=alt.Scale(domain=["Pareto front", "dominated"], range=["#2c7fb8", "#bbbbbb"]),
    )
    base = alt.Chart(frame).encode(x=x, y=y)
    points = base.mark_circle(size=80, opacity=0.9).encode(
        color=colour,
        tooltip=[
            "configuration",
            alt.Tooltip("cost_usd:Q", format=".2f"),
            alt.Tooltip("attainment_pct:Q", format=".2f"),
            alt.Tooltip("regret_usd:Q", format=".2f", title="over the oracle [$]"),
        ],
    )
    front = (
        base.transform_filter(alt.datum.kind == "Pareto front")
        .mark_line(color="#2c7fb8", strokeDash=[4, 3])
        .encode(order=alt.Order("cost_usd:Q"))
    )
    layers = [lines, front, points]
    if attainment_goal_frac is not None:
        layers.append(goal_rule(attainment_goal_frac))
    return alt.LayerChart(layer=layers).properties(width=WIDTH_PX, height=300)
