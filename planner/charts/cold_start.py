"""Charts for the chapter "Where the GPUs come from": a cold start's phases, and what a node pool does over a run.

The slider chart filters grids the planner precomputed
(:func:`phase_grid`): the waterfall of every combination of three phase
lengths, and the queue a ramp builds until the new replica is Ready.
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping, Sequence

import altair as alt
import numpy as np
import pandas as pd

from planner.capacity.headroom import ramp_backlog_requests
from planner.charts import grid_slider
from planner.charts.simulation import count_axis_y
from planner.charts.tables import compact_table_styles, headed
from planner.dynamics.cold_start import ColdStartPhases, phase_waterfall
from planner.errors import PlannerInputError
from planner.readers.cold_start_cases import ColdStartCase
from planner.simulate.outcome import Outcome

__all__ = [
    "PHASE_COLORS",
    "SLIDER_STEPS",
    "SUPPLY_COLUMNS",
    "case_waterfall_chart",
    "case_waterfall_frame",
    "phase_grid",
    "phase_slider_chart",
    "supply_long",
    "supply_table_view",
    "supply_timeline_chart",
]

_WIDTH = 560
_BAR_WIDTH = 400  # plus the phase names on the left, inside the ~650 px content column

# phase_waterfall's names, in the order a pod goes through them, with one colour each.
PHASE_COLORS = {
    "node autoscaler": "#9d9d9d",
    "provision": "#4c78a8",
    "node init": "#72b7b2",
    "image pull": "#f58518",
    "weights load": "#e45756",
    "warmup": "#b279a2",
}
_COUNTS_AS = {
    "provision_s": "provision",
    "node_init_s": "node init",
    "image_pull_s": "image pull",
    "weights_load_s": "weights load",
    "warmup_s": "warmup",
}

SLIDER_STEPS = (0.0, 0.25, 0.5, 0.75, 1.0, 1.25, 1.5)
"""Each slider of :func:`phase_grid` offers its phase's length times these."""
_FALLBACK_STEP_S = 60.0  # a phase of 0 s gets a slider of 0, 60, ... s instead

SUPPLY_COLUMNS: dict[str, tuple[str, str]] = {
    "configuration": ("Configuration", "{}"),
    "next_replica_s": ("Next replica Ready after (s)", "{:,.0f}"),
    "ready_p50_s": ("Median pod Ready after (s)", "{:,.0f}"),
    "ready_max_s": ("Slowest pod Ready after (s)", "{:,.0f}"),
    "pending_pod_s": ("Pending (pod-s)", "{:,.0f}"),
    "slo_attainment_frac": ("Met the TTFT objective (%)", "{:.1%}"),
    "peak_replicas": ("Peak replicas asked", "{:d}"),
    "peak_ready_replicas": ("Peak replicas Ready", "{:d}"),
    "peak_nodes": ("Peak nodes", "{:d}"),
    "node_hours": ("Node-hours", "{:,.2f}"),
    "idle_gpu_hours": ("Idle GPU-hours", "{:,.2f}"),
    "cost_usd": ("Cost ($)", "{:,.2f}"),
}
"""Each column of :func:`planner.workflows.cold_start.supply_table` the page shows: header with unit, format."""

_SUPPLY_SERIES = {
    "replicas_requested": "replicas asked for",
    "replicas_ready": "replicas Ready",
    "pods_pending": "pods Pending",
    "pods_loading": "pods loading",
    "nodes_ready": "nodes with GPUs allocatable",
    "nodes_provisioning": "nodes on their way",
}
_PANELS = (
    ("Replicas", ("replicas asked for", "replicas Ready"), ("#f58518", "#54a24b")),
    ("Pods", ("pods Pending", "pods loading"), ("#e45756", "#b279a2")),
    ("Nodes", ("nodes with GPUs allocatable", "nodes on their way"), ("#4c78a8", "#9d9d9d")),
)


def case_waterfall_frame(case: ColdStartCase) -> pd.DataFrame:
    """A published case's measured phases back to back, each with the planner phase it counts toward.

    Returns
    -------
    pandas.DataFrame
        One row per phase, in the source's order: ``phase`` (the source's
        name), ``order``, ``start_s``, ``end_s``, ``duration_s`` [s] and
        ``counts_as`` (a key of :data:`PHASE_COLORS`).

    Raises
    ------
    PlannerInputError
        For a case that lists no phases (anything but a measurement), naming the file and the case.
    """
    if not case.phases:
        raise PlannerInputError(
            f"{case.source}: phases: this {case.kind} lists no measured phases to draw; pick a measurement"
        )
    durations = np.array([phase.duration_s for phase in case.phases])
    ends = np.cumsum(durations)
    return pd.DataFrame(
        {
            "phase": [phase.name for phase in case.phases],
            "order": np.arange(len(case.phases)),
            "start_s": ends - durations,
            "end_s": ends,
            "duration_s": durations,
            "counts_as": [_COUNTS_AS[phase.counts_as] for phase in case.phases],
        }
    )


def _phase_color(values: Sequence[str], title: str | None = "Counts toward") -> alt.Color:
    domain = [name for name in PHASE_COLORS if name in set(values)]
    return alt.Color(
        "counts_as:N",
        title=title,
        sort=domain,
        scale=alt.Scale(domain=domain, range=[PHASE_COLORS[name] for name in domain]),
        legend=alt.Legend(orient="top", columns=3, labelLimit=200),
    )


def case_waterfall_chart(frame: pd.DataFrame, title: str) -> alt.LayerChart:
    """The measured phases as bars on one time axis, coloured by the planner phase each counts toward."""
    y = alt.Y("phase:N", title=None, sort=alt.EncodingSortField("order"), axis=alt.Axis(labelLimit=190))
    bars = (
        alt.Chart(frame)
        .mark_bar(height=14)
        .encode(
            x=alt.X("start_s:Q", title="Seconds since the pod was created", scale=alt.Scale(nice=False)),
            x2="end_s:Q",
            y=y,
            color=_phase_color(frame["counts_as"]),
            tooltip=[
                alt.Tooltip("phase:N", title="phase"),
                alt.Tooltip("duration_s:Q", title="seconds", format=",.0f"),
                alt.Tooltip("end_s:Q", title="ends at (s)", format=",.0f"),
                alt.Tooltip("counts_as:N", title="counts toward"),
            ],
        )
    )
    labels = (
        alt.Chart(frame)
        .mark_text(align="left", dx=3, fontSize=11)
        .encode(x="end_s:Q", y=y, text=alt.Text("duration_s:Q", format=",.0f"))
    )
    return alt.LayerChart(layer=[bars, labels]).properties(width=_BAR_WIDTH, height=22 * len(frame), title=title)


def _slider_values(length_s: float) -> np.ndarray:
    if length_s > 0:
        return np.round(np.asarray(SLIDER_STEPS) * length_s, 6)
    return np.arange(len(SLIDER_STEPS)) * _FALLBACK_STEP_S


def phase_grid(
    phases: ColdStartPhases,
    reaction_delay_s: float,
    growth_rate_rps_per_s: float,
    spare_rps: float,
    *,
    points: int = 9,
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Every combination of three slider values: the waterfall, and the queue a ramp builds until Ready.

    The three sliders are the node's part (``provision_s + node_init_s``), the
    image pull, and the pod's own start (``weights_load_s + warmup_s``), each at
    its length in ``phases`` times :data:`SLIDER_STEPS` (a phase of 0 s gets
    0, 60, ... s); a slider's two phases keep their ratio. A node part of 0 is
    a free GPU on a node that is up: no node autoscaler, no new node.

    Parameters
    ----------
    phases : ColdStartPhases
    reaction_delay_s : float
        The node autoscaler's delay before it asks for a node, when one is needed. [s]
    growth_rate_rps_per_s : float
        Slope of the arrivals while the replica starts. [requests/s per s]
    spare_rps : float
        What the Ready replicas complete beyond arrivals when the replica is requested. [requests/s]
    points : int
        Queue samples per combination, from the moment the queue starts to Ready.

    Returns
    -------
    (pandas.DataFrame, pandas.DataFrame)
        The bars: ``node_s``, ``pull_s``, ``load_s`` (the slider values),
        ``counts_as`` (a phase), ``start_s`` and ``end_s`` [s]; phases of 0 s are
        left out, and the last bar ends at Ready. The queue: ``node_s``,
        ``pull_s``, ``load_s``, ``t_s`` [s] and ``queue_requests`` (whole
        requests), from :func:`planner.capacity.headroom.ramp_backlog_requests`;
        the last sample is at Ready.
    """
    node_total_s = phases.provision_s + phases.node_init_s
    node_share = phases.provision_s / node_total_s if node_total_s else 1.0
    load_s_total = phases.weights_load_s + phases.warmup_s
    weights_share = phases.weights_load_s / load_s_total if load_s_total else 0.0
    bars, queues = [], []
    combos = itertools.product(
        _slider_values(node_total_s),
        _slider_values(phases.image_pull_s),
        _slider_values(load_s_total),
    )
    for node_s, pull_s, load_s in combos:
        combo = ColdStartPhases(
            provision_s=node_s * node_share,
            node_init_s=node_s * (1.0 - node_share),
            image_pull_s=pull_s,
            weights_load_s=load_s * weights_share,
            warmup_s=load_s * (1.0 - weights_share),
        )
        waterfall = phase_waterfall(combo, needs_node=node_s > 0, image_cached=False, reaction_delay_s=reaction_delay_s)
        ready_s = waterfall[-1].end_s
        keys = {"node_s": node_s, "pull_s": pull_s, "load_s": load_s}
        bars += [
            keys | {"counts_as": bar.name, "start_s": bar.start_s, "end_s": bar.end_s}
            for bar in waterfall
            if bar.duration_s > 0
        ]
        queue_starts_s = min(spare_rps / growth_rate_rps_per_s, ready_s) if growth_rate_rps_per_s > 0 else ready_s
        times_s = np.unique(np.concatenate([[0.0], np.linspace(queue_starts_s, ready_s, max(points - 1, 2))]))
        queue = ramp_backlog_requests(growth_rate_rps_per_s, times_s, spare_rps)
        queues += [keys | {"t_s": t, "queue_requests": q} for t, q in zip(times_s, queue, strict=True)]
    # Rounded to a tenth of a second and to whole requests: finer than the chart draws, and half the page's data.
    return pd.DataFrame(bars).round(1), pd.DataFrame(queues).round({"t_s": 1, "queue_requests": 0})


def phase_slider_chart(bars: pd.DataFrame, queue: pd.DataFrame, phases: ColdStartPhases) -> alt.VConcatChart:
    """The waterfall and the queue for the combination the three sliders pick; they start at ``phases``."""
    sliders = []
    for column, initial, label in (
        ("node_s", phases.provision_s + phases.node_init_s, "Provision + node init (s) "),
        ("pull_s", phases.image_pull_s, "Image pull (s) "),
        ("load_s", phases.weights_load_s + phases.warmup_s, "Weights load + warmup (s) "),
    ):
        values = np.unique(bars[column])
        start = float(values[np.argmin(np.abs(values - round(initial, 1)))])
        sliders.append((column, *grid_slider(column, values, start, label)))
    chosen = " && ".join(f"abs(datum.{column} - {param.name}) < {step / 2}" for column, param, step in sliders)
    x_max = float(bars["end_s"].max()) * 1.02
    x = alt.X("start_s:Q", title="Seconds since the pod was created", scale=alt.Scale(domain=[0, x_max], nice=False))
    order = [name for name in PHASE_COLORS if name in set(bars["counts_as"])]
    waterfall = (
        alt.Chart(bars)
        .transform_filter(chosen)
        .mark_bar(height=16)
        .encode(
            x=x,
            x2="end_s:Q",
            y=alt.Y("counts_as:N", title=None, sort=order, scale=alt.Scale(domain=order)),
            color=alt.Color(
                "counts_as:N",
                legend=None,
                scale=alt.Scale(domain=order, range=[PHASE_COLORS[name] for name in order]),
            ),
            tooltip=[
                alt.Tooltip("counts_as:N", title="phase"),
                alt.Tooltip("start_s:Q", title="from (s)", format=",.0f"),
                alt.Tooltip("end_s:Q", title="to (s)", format=",.0f"),
            ],
        )
        .properties(width=_BAR_WIDTH + 60, height=24 * len(order), title="Phases of the next replica's cold start")
    )
    ready_text = (
        alt.Chart(bars)
        .transform_filter(chosen)
        .transform_aggregate(ready_s="max(end_s)")
        .transform_calculate(label="'Ready at ' + format(datum.ready_s, ',.0f') + ' s'")
        .mark_text(align="right", baseline="top", dy=-12, fontWeight="bold")
        .encode(x=alt.X("ready_s:Q", scale=alt.Scale(domain=[0, x_max], nice=False)), text="label:N")
    )
    # The queue's axis follows the chosen curve: the grid's largest queue would flatten every other one.
    y = alt.Y(
        "queue_requests:Q",
        title="Requests queued",
        scale=alt.Scale(domain=alt.DomainUnionWith(unionWith=[0, 10])),
        axis=alt.Axis(format=",d", tickMinStep=1),
    )
    queue_line = (
        alt.Chart(queue)
        .transform_filter(chosen)
        .mark_area(color="#e377c2", opacity=0.6, interpolate="monotone")
        .encode(
            x=alt.X("t_s:Q", title="Seconds since the pod was created", scale=alt.Scale(domain=[0, x_max], nice=False)),
            y=y,
            tooltip=[
                alt.Tooltip("t_s:Q", title="t (s)", format=",.0f"),
                alt.Tooltip("queue_requests:Q", title="queued", format=",.0f"),
            ],
        )
    )
    queue_text = (
        alt.Chart(queue)
        .transform_filter(chosen)
        # The queue only grows until Ready: its largest value is the one at Ready.
        .transform_aggregate(t_s="max(t_s)", queue_requests="max(queue_requests)")
        .transform_calculate(label="format(datum.queue_requests, ',.0f') + ' queued at Ready'")
        .mark_text(align="right", baseline="bottom", dy=-4, fontWeight="bold")
        .encode(x=alt.X("t_s:Q", scale=alt.Scale(domain=[0, x_max], nice=False)), y="queue_requests:Q", text="label:N")
    )
    backlog = alt.layer(queue_line, queue_text).properties(
        width=_BAR_WIDTH + 60, height=150, title="The queue the growth builds until that replica is Ready"
    )
    chart = alt.vconcat(alt.layer(waterfall, ready_text), backlog).resolve_scale(x="shared")
    return chart.add_params(*(param for _, param, _ in sliders))


def supply_long(runs: Mapping[str, Outcome], every_s: float = 20.0) -> pd.DataFrame:
    """Every run's replicas, pods and nodes over time, in long form, thinned to one row per ``every_s`` (the maximum).

    Returns
    -------
    pandas.DataFrame
        Columns ``t_s``, ``series``, ``value`` and ``configuration``; a point is kept
        only where its series changes, and at the series' end (the chart draws steps).
    """
    frames = []
    for label, run in runs.items():
        series = run.timeseries
        missing = [name for name in _SUPPLY_SERIES if name not in series]
        if missing:
            raise ValueError(f"{label}: the run has no {missing[0]} series (a fleet without a node pool)")
        bucket = (series["t_s"] // every_s) * every_s
        # The maximum over each span: a pod Pending for a few seconds still shows.
        thinned = series.groupby(bucket)[list(_SUPPLY_SERIES)].max().reset_index()
        long = thinned.melt(id_vars="t_s", var_name="series", value_name="value")
        long["series"] = long["series"].map(_SUPPLY_SERIES)
        # The lines are drawn as steps: a point equal to the one before it draws nothing new, so only the
        # changes (and each series' last point) are kept.
        same = long.groupby("series")["value"].diff().eq(0)
        last = ~long["series"].eq(long["series"].shift(-1))
        frames.append(long[~same | last].assign(configuration=label))
    return pd.concat(frames, ignore_index=True)


def supply_timeline_chart(long: pd.DataFrame, initial: str | None = None, *, title: str = "") -> alt.VConcatChart:
    """Replicas, pods and nodes over time for the configuration a select box picks."""
    labels = list(dict.fromkeys(long["configuration"]))
    if not labels:
        raise ValueError("no runs to chart")
    chosen = alt.param(
        name="run",
        value=initial if initial is not None else labels[0],
        bind=alt.binding_select(options=labels, name="configuration "),
    )
    base = alt.Chart(long).transform_filter(alt.datum.configuration == chosen)
    panels = []
    for number, (panel, names, colors) in enumerate(_PANELS):
        panels.append(
            base.transform_filter(alt.FieldOneOfPredicate("series", list(names)))
            .mark_line(interpolate="step-after")
            .encode(
                x=alt.X("t_s:Q", title="Time (s)" if number == len(_PANELS) - 1 else None),
                y=count_axis_y(panel),
                color=alt.Color(
                    "series:N",
                    title=None,
                    scale=alt.Scale(domain=list(names), range=list(colors)),
                    legend=alt.Legend(orient="top", labelLimit=0),
                ),
                strokeDash=alt.StrokeDash(
                    "series:N",
                    title=None,
                    scale=alt.Scale(domain=list(names), range=[[1, 0], [5, 3]]),
                    legend=alt.Legend(orient="top", labelLimit=0),
                ),
            )
            .properties(width=_WIDTH - 80, height=100)
        )
    chart = alt.vconcat(*panels).add_params(chosen).resolve_scale(color="independent", strokeDash="independent")
    return chart.properties(title=title) if title else chart


def supply_table_view(table: pd.DataFrame, columns: Sequence[str] | None = None):
    """:func:`planner.workflows.cold_start.supply_table` as the page shows it: headers with units, compact cells.

    Parameters
    ----------
    table : pandas.DataFrame
    columns : sequence of str, optional
        The columns to show, after ``configuration``; default every one.

    Returns
    -------
    pandas.io.formats.style.Styler
    """
    shown = table.reset_index()
    if columns is not None:
        shown = shown[["configuration", *columns]]
    shown, formats = headed(shown, SUPPLY_COLUMNS, percent_in_header=True)
    return shown.style.format(formats, na_rep="none").hide(axis="index").set_table_styles(compact_table_styles(9))
