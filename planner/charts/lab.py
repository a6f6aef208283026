"""Charts for the lab: precomputed runs of several configurations, one shown at a time by a selector."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import altair as alt
import pandas as pd

from planner.charts.simulation import count_axis_y, timeline_long
from planner.charts.tables import compact_table_styles, headed
from planner.simulate.outcome import Outcome

__all__ = [
    "AGREEMENT_COLUMNS",
    "TABLE_COLUMNS",
    "agreement_table_view",
    "configuration_table_view",
    "configuration_timeline_chart",
    "configurations_long",
]

_WIDTH = 480  # plus axis labels and the legend, under 560 px

_THROUGHPUT = ("demand (output tokens/s)", "Ready capacity (output tokens/s)")
_REPLICAS = ("replicas requested", "replicas Ready")

TABLE_COLUMNS: dict[str, tuple[str, str]] = {
    "configuration": ("Configuration", "{}"),
    "slo_attainment_frac": ("Met the TTFT objective (%)", "{:.1%}"),
    "window_attainment_frac": ("Met it in the window (%)", "{:.1%}"),
    "cost_usd": ("Cost ($)", "{:,.2f}"),
    "mean_replicas": ("Mean replicas", "{:.1f}"),
    "peak_replicas": ("Peak replicas", "{:d}"),
    "scale_events": ("Scale events", "{:d}"),
    "flap_cycles": ("Flap cycles", "{:d}"),
    "peak_waiting": ("Peak queue (req.)", "{:d}"),
    "cut_generations": ("Answers cut", "{:d}"),
}
"""Each column of :func:`planner.workflows.lab.configuration_table`: its header, with the unit, and its format."""
# GPU-hours are left out of the page's table: on one fleet at one price they rank the rows exactly as the cost
# does, and without them ten columns fit the text column.
_NOT_SHOWN = ("gpu_hours",)


def configurations_long(runs: Mapping[str, Outcome], every_s: float = 5.0) -> pd.DataFrame:
    """Every run's time series in long form, with a ``configuration`` column naming the run.

    Parameters
    ----------
    runs : mapping of str to Outcome
    every_s : float
        Bucket width the series are thinned to. [s]

    Returns
    -------
    pandas.DataFrame
        Columns ``t_s``, ``series``, ``value`` and ``configuration``.
    """
    frames = [timeline_long(run.timeseries, every_s).assign(configuration=label) for label, run in runs.items()]
    return pd.concat(frames, ignore_index=True)


def configuration_timeline_chart(
    long: pd.DataFrame,
    initial: str | None = None,
    *,
    title: str = "",
    panels: Sequence[str] = ("throughput", "waiting", "replicas"),
    selector: str = "configuration",
) -> alt.VConcatChart:
    """Demand against Ready capacity, the queue, and replicas, for the configuration a selector picks.

    Parameters
    ----------
    long : pandas.DataFrame
        From :func:`configurations_long`.
    initial : str, optional
        Configuration shown first. Default: the first in ``long``.
    title : str
    panels : sequence of str
        Which of ``throughput``, ``waiting`` and ``replicas`` to stack, top to bottom.
    selector : str
        The select box's label.

    Returns
    -------
    altair.VConcatChart
        Every configuration's data is in the chart; the select box only filters it.
    """
    labels = list(dict.fromkeys(long["configuration"]))
    if not labels:
        raise ValueError("no runs to chart")
    chosen = alt.param(
        name="chosen",
        value=initial if initial is not None else labels[0],
        bind=alt.binding_select(options=labels, name=f"{selector} "),
    )
    x = alt.X("t_s:Q", title="Time (s)")
    base = alt.Chart(long).transform_filter(alt.datum.configuration == chosen)
    built = {
        "throughput": base.transform_filter(alt.FieldOneOfPredicate("series", list(_THROUGHPUT)))
        .mark_line(interpolate="step-after")
        .encode(
            x=x,
            y=alt.Y("value:Q", title="Output tokens/s"),
            color=alt.Color(
                "series:N",
                title=None,
                scale=alt.Scale(domain=list(_THROUGHPUT), range=["#4c78a8", "#54a24b"]),
                legend=alt.Legend(orient="top", labelLimit=0),
            ),
        )
        .properties(width=_WIDTH, height=150),
        "waiting": base.transform_filter(alt.datum.series == "waiting requests")
        .mark_area(
            color="#e377c2",
            opacity=0.6,
            interpolate="step-after",
        )
        .encode(x=x, y=count_axis_y("Waiting requests"))
        .properties(width=_WIDTH, height=90),
        "replicas": base.transform_filter(alt.FieldOneOfPredicate("series", list(_REPLICAS)))
        .mark_line(interpolate="step-after")
        .encode(
            x=x,
            y=count_axis_y("Replicas"),
            color=alt.Color(
                "series:N",
                title=None,
                scale=alt.Scale(domain=list(_REPLICAS), range=["#f58518", "#54a24b"]),
                legend=alt.Legend(orient="bottom"),
            ),
            strokeDash=alt.StrokeDash(
                "series:N", legend=None, scale=alt.Scale(domain=list(_REPLICAS), range=[[4, 2], [1, 0]])
            ),
        )
        .properties(width=_WIDTH, height=110),
    }
    unknown = [p for p in panels if p not in built]
    if unknown:
        raise ValueError(f"unknown panel {unknown[0]!r}; expected throughput, waiting or replicas")
    chart = alt.vconcat(*(built[p] for p in panels)).add_params(chosen).resolve_scale(color="independent")
    return chart.properties(title=title) if title else chart


def configuration_table_view(table: pd.DataFrame):
    """:func:`planner.workflows.lab.configuration_table` as the page shows it: headers, units, a width that fits.

    Percentages print without their sign (the header carries it); headers wrap
    and the cells are compact, so ten columns fit the book's text column at
    desktop width.

    Returns
    -------
    pandas.io.formats.style.Styler
    """
    shown = table.reset_index().drop(columns=[c for c in _NOT_SHOWN if c in table.columns])
    shown, formats = headed(shown, TABLE_COLUMNS, percent_in_header=True)
    return shown.style.format(formats).hide(axis="index").set_table_styles(compact_table_styles(8))


AGREEMENT_COLUMNS: dict[str, tuple[str, str]] = {
    "case": ("case", "{}"),
    "tick_s": ("tick [s]", "{:g}"),
    "requests": ("requests", "{:,}"),
    "tick_attainment_frac": ("attained, ticks", "{:.2%}"),
    "event_attainment_frac": ("attained, events", "{:.2%}"),
    "attainment_gap_pct_points": ("gap [points]", "{:.2f}"),
    "tick_mean_ttft_s": ("mean TTFT, ticks [s]", "{:.3f}"),
    "event_mean_ttft_s": ("mean TTFT, events [s]", "{:.3f}"),
    "mean_ttft_gap_frac": ("TTFT gap", "{:.1%}"),
}


def agreement_table_view(rows: pd.DataFrame):
    """:func:`planner.simulate.discrete_event.agreement_table` as the page shows it: headers with units.

    Returns
    -------
    pandas.io.formats.style.Styler
    """
    shown, formats = headed(rows, AGREEMENT_COLUMNS)
    return shown.style.format(formats).hide()
