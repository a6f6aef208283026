"""Charts for the chapter "From a load test to thresholds"."""

from __future__ import annotations

import altair as alt
import numpy as np
import pandas as pd

from planner.capacity.step_time import StepTimeFit

__all__ = [
    "PANEL_WIDTH_PX",
    "knee_slider_chart",
    "latency_chart",
    "latency_long",
    "select_objectives_ms",
    "slider_objectives_ms",
    "step_time_chart",
    "step_time_points",
]

# The book's content column is about 650 px; a panel this wide leaves room for its axis.
PANEL_WIDTH_PX = 520

_STEP_TITLES = {
    "concurrency": "Concurrency (requests)",
    "request_rate_rps": "Request rate (requests/s)",
    "mean_concurrency": "Mean requests in flight",
}


def latency_long(steps: pd.DataFrame, step_variable: str, itl_column_prefix: str = "itl") -> pd.DataFrame:
    """Percentiles per step in long form: ``step``, ``metric``, ``percentile``, ``latency_ms``.

    ``itl_column_prefix`` is ``itl`` or ``tpot`` (when the file has no ITL).
    Steps at an infinite rate are left out (they have no place on an axis).
    """
    rows = []
    for metric, prefix in (("TTFT", "ttft"), ("ITL" if itl_column_prefix == "itl" else "TPOT", itl_column_prefix)):
        for stat in ("p50", "p90", "p99"):
            values = steps[f"{prefix}_{stat}_ms"]
            rows.append(
                pd.DataFrame(
                    {
                        "step": steps[step_variable].to_numpy(dtype=float),
                        "metric": metric,
                        "percentile": stat,
                        "latency_ms": values.to_numpy(dtype=float),
                    }
                )
            )
    long = pd.concat(rows, ignore_index=True)
    return long[np.isfinite(long["step"]) & np.isfinite(long["latency_ms"])].reset_index(drop=True)


def latency_chart(
    long: pd.DataFrame, step_variable: str, knee_step: float, ttft_p99_slo_ms: float, itl_p99_slo_ms: float
) -> alt.VConcatChart:
    """TTFT and inter-token percentiles against load, with the objectives and the knee marked.

    The two panels are stacked and the legend sits on top, so the chart
    fits a 650-px column. No knee rule is drawn when ``knee_step`` is NaN
    (no step meets the objectives).
    """
    panels = []
    for metric, slo in ((long["metric"].iloc[0], ttft_p99_slo_ms), (long["metric"].iloc[-1], itl_p99_slo_ms)):
        data = long[long["metric"] == metric]
        base = alt.Chart(data)
        lines = base.mark_line(point=True).encode(
            x=alt.X("step:Q", title=_STEP_TITLES.get(step_variable, step_variable)),
            y=alt.Y("latency_ms:Q", title=f"{metric} (ms)", scale=alt.Scale(type="log")),
            color=alt.Color(
                "percentile:N", title="Percentile", sort=["p50", "p90", "p99"], legend=alt.Legend(orient="top")
            ),
            tooltip=[
                alt.Tooltip("step:Q", title="step"),
                "percentile:N",
                alt.Tooltip("latency_ms:Q", title="latency (ms)", format=",.1f"),
            ],
        )
        slo_rule = (
            alt.Chart(pd.DataFrame({"latency_ms": [slo], "label": [f"p99 objective {slo:g} ms"]}))
            .mark_rule(color="firebrick", strokeDash=[6, 3])
            .encode(y="latency_ms:Q", tooltip=["label:N"])
        )
        layers = [lines, slo_rule]
        if np.isfinite(knee_step):
            layers.append(
                alt.Chart(pd.DataFrame({"step": [knee_step], "label": [f"knee {knee_step:g}"]}))
                .mark_rule(color="black")
                .encode(x="step:Q", tooltip=["label:N"])
            )
        panels.append(alt.layer(*layers).properties(width=PANEL_WIDTH_PX, height=200, title=metric))
    return alt.vconcat(*panels).properties(title="Latency percentiles against load")


def step_time_points(batch, measured_ms, fit: StepTimeFit) -> pd.DataFrame:
    """Measured and fitted step times per batch size, long form: ``batch``, ``source``, ``step_ms``."""
    batch = np.asarray(batch, dtype=float)
    measured = np.asarray(measured_ms, dtype=float)
    keep = np.isfinite(batch) & np.isfinite(measured)
    return pd.concat(
        [
            pd.DataFrame({"batch": batch[keep], "source": "measured", "step_ms": measured[keep]}),
            pd.DataFrame(
                {"batch": batch[keep], "source": "fitted a + b x batch", "step_ms": fit.predict_ms(batch[keep])}
            ),
        ],
        ignore_index=True,
    )


def step_time_chart(points: pd.DataFrame, title: str) -> alt.LayerChart:
    """Measured step times (points) and the fitted line."""
    base = alt.Chart(points).encode(
        x=alt.X("batch:Q", title="Batch (mean requests in flight)"),
        y=alt.Y("step_ms:Q", title="Step time (ms)"),
        tooltip=["source:N", alt.Tooltip("batch:Q", format=",.1f"), alt.Tooltip("step_ms:Q", format=",.2f")],
    )
    measured = base.transform_filter(alt.datum.source == "measured").mark_point(filled=True, size=60)
    fitted = base.transform_filter(alt.datum.source != "measured").mark_line(color="gray")
    return alt.LayerChart(layer=[fitted, measured]).properties(width=420, height=240, title=title)


def _nice_step(raw: float) -> float:
    # Smallest of 1, 2, 5 x 10^k (at least 1) that is >= raw.
    raw = max(float(raw), 1.0)
    decade = 10.0 ** np.floor(np.log10(raw))
    return float(next(m * decade for m in (1.0, 2.0, 5.0, 10.0) if m * decade >= raw))


def slider_objectives_ms(measured_p99_ms, objective_ms: float, max_count: int = 40) -> np.ndarray:
    """Evenly spaced objectives for a range slider, through ``objective_ms`` and across the measurements.

    The spacing is a whole 1, 2 or 5 x 10^k ms, so the slider's positions are
    round numbers; the values run from a little under the lightest
    measurement (where no step passes) to a little over the heaviest (where
    every step passes). At most ``max_count + 2`` values.
    """
    measured = np.asarray(measured_p99_ms, dtype=float)
    measured = measured[np.isfinite(measured)]
    low = 0.8 * min(float(measured.min()), objective_ms) if measured.size else 0.5 * objective_ms
    high = 1.1 * max(float(measured.max()), objective_ms) if measured.size else 2.0 * objective_ms
    step = _nice_step((high - low) / max(1, max_count - 1))
    below = int(np.floor((low - objective_ms) / step))
    above = int(np.ceil((high - objective_ms) / step))
    values = objective_ms + step * np.arange(below, above + 1)
    return values[values > 0]


def select_objectives_ms(measured_p99_ms, objective_ms: float) -> np.ndarray:
    """Objectives for a drop-down: 1, 2, 5 x 10^k ms across the measurements, plus ``objective_ms``."""
    measured = np.asarray(measured_p99_ms, dtype=float)
    measured = measured[np.isfinite(measured) & (measured > 0)]
    low = min(float(measured.min()), objective_ms) if measured.size else objective_ms
    high = max(float(measured.max()), objective_ms) if measured.size else objective_ms
    decades = 10.0 ** np.arange(np.floor(np.log10(low)), np.ceil(np.log10(high)) + 1)
    values = np.concatenate([np.outer(decades, [1.0, 2.0, 5.0]).ravel(), [objective_ms]])
    # Keep one value under the lightest measurement and one over the heaviest.
    under = values[values <= low].max()
    over = values[values >= high].min()
    return np.unique(values[(values >= under) & (values <= over)])


def _knee_label(row) -> str:
    # Two short lines (split at the newline), so the caption stays inside its panel.
    limited = str(row.limited_by).replace("ttft_p99", "TTFT p99").replace("itl_p99", "ITL p99").replace("+", " and ")
    target = (
        "no target (under 3 steps)"
        if not np.isfinite(row.concurrency_target)
        else f"target {row.concurrency_target:,.1f}"
    )
    if row.status == "no passing step":
        return f"No step meets these objectives:\nthe lightest misses {limited}."
    if row.status == "lower bound":
        return f"Every step passes: knee at least {row.knee_concurrency:,.1f},\n{target}."
    return f"Knee {row.knee_concurrency:,.1f} requests, {target};\nthe next step misses {limited}."


def knee_slider_chart(
    latency: pd.DataFrame,
    grid: pd.DataFrame,
    step_variable: str,
    ttft_p99_slo_ms: float,
    itl_p99_slo_ms: float,
    itl_metric: str = "ITL",
) -> alt.VConcatChart:
    """Measured p99s with the knee moving as the reader changes the objectives.

    A range slider picks the ITL p99 objective and a drop-down the TTFT p99
    objective; both only select rows of ``grid`` (from
    :func:`planner.capacity.knee.knee_grid`), so every knee and target shown was
    computed by the planner.

    Parameters
    ----------
    latency : pandas.DataFrame
        :func:`latency_long` output; its p99 rows are drawn.
    grid : pandas.DataFrame
        :func:`planner.capacity.knee.knee_grid` output over evenly spaced ITL
        objectives (a slider needs even steps).
    step_variable : str
        Column the steps are ordered by.
    ttft_p99_slo_ms, itl_p99_slo_ms : float
        Objectives the chart opens at; must be in ``grid``. [ms]
    itl_metric : str
        ``"ITL"``, or ``"TPOT"`` when the load test has no ITL.
    """
    itl_values = np.sort(grid["itl_p99_slo_ms"].unique())
    ttft_values = np.sort(grid["ttft_p99_slo_ms"].unique())
    if itl_p99_slo_ms not in itl_values or ttft_p99_slo_ms not in ttft_values:
        raise ValueError("the chart's opening objectives must be rows of the grid")
    spacing = np.diff(itl_values)
    slider_step = float(spacing.min()) if spacing.size else 1.0
    if spacing.size and not np.allclose(spacing, slider_step):
        raise ValueError("the ITL objectives in the grid must be evenly spaced for a slider")
    itl = alt.param(
        name="itl_slo",
        value=float(itl_p99_slo_ms),
        bind=alt.binding_range(
            min=float(itl_values[0]),
            max=float(itl_values[-1]),
            step=slider_step,
            name=f"{itl_metric} p99 objective (ms) ",
        ),
    )
    ttft = alt.param(
        name="ttft_slo",
        value=float(ttft_p99_slo_ms),
        bind=alt.binding_select(options=[float(v) for v in ttft_values], name="TTFT p99 objective (ms) "),
    )

    rows = grid.copy()
    rows["knee_step"] = rows["knee_step"].where(np.isfinite(rows["knee_step"]))  # inf has no place on an axis
    rows["label"] = [_knee_label(row) for row in rows.itertuples()]
    rows["knee K"], rows["target T"] = rows["knee_concurrency"], rows["concurrency_target"]
    # The slider's value is min + n x step in the browser's floating point: match the nearest grid row.
    itl_matches = f"abs(datum.itl_p99_slo_ms - itl_slo) < {slider_step / 2!r}"
    selected = alt.Chart(rows).transform_filter(alt.datum.ttft_p99_slo_ms == ttft).transform_filter(itl_matches)
    step_title = _STEP_TITLES.get(step_variable, step_variable)
    x_domain = alt.Scale(domain=[0, float(latency["step"].max()) * 1.05])

    panels = []
    for metric, slo_field in (("TTFT", "ttft_p99_slo_ms"), (itl_metric, "itl_p99_slo_ms")):
        points = (
            alt.Chart(latency[(latency["metric"] == metric) & (latency["percentile"] == "p99")])
            .mark_line(point=True, color="#4c78a8")
            .encode(
                x=alt.X("step:Q", title=step_title, scale=x_domain),
                y=alt.Y("latency_ms:Q", title=f"{metric} p99 (ms)", scale=alt.Scale(type="log")),
                tooltip=[
                    alt.Tooltip("step:Q", title="step"),
                    alt.Tooltip("latency_ms:Q", title="p99 (ms)", format=",.1f"),
                ],
            )
        )
        slo_rule = selected.mark_rule(color="firebrick", strokeDash=[6, 3]).encode(
            y=alt.Y(f"{slo_field}:Q"), tooltip=[alt.Tooltip(f"{slo_field}:Q", title="objective (ms)")]
        )
        knee_rule = selected.mark_rule(color="black", strokeWidth=2).encode(x=alt.X("knee_step:Q"), tooltip=["label:N"])
        panels.append(
            alt.layer(points, slo_rule, knee_rule).properties(width=220, height=200, title=f"{metric} p99 against load")
        )

    # Fixed axes, so they stay put while the reader moves the objectives.
    knees = rows["knee_concurrency"].to_numpy(dtype=float)
    highest = float(knees[np.isfinite(knees)].max(initial=0.0))
    y_scale = alt.Scale(domain=[0, max(highest, 1.0) * 1.1])
    x_scale = alt.Scale(domain=[0, float(itl_values[-1])])
    colors = alt.Scale(domain=["knee K", "target T"], range=["black", "#54a24b"])
    this_ttft = (
        alt.Chart(rows)
        .transform_filter(alt.datum.ttft_p99_slo_ms == ttft)
        .transform_fold(["knee K", "target T"], as_=["quantity", "requests"])
    )
    by_itl = this_ttft.mark_line(interpolate="step-after").encode(
        x=alt.X("itl_p99_slo_ms:Q", title=f"{itl_metric} p99 objective (ms)", scale=x_scale),
        y=alt.Y("requests:Q", title="Requests in flight per replica", scale=y_scale),
        color=alt.Color("quantity:N", scale=colors, legend=None),
    )
    here = (
        this_ttft.transform_filter(itl_matches)
        .mark_point(filled=True, size=120)
        .encode(
            x="itl_p99_slo_ms:Q",
            y="requests:Q",
            color=alt.Color("quantity:N", scale=colors, legend=None),
            tooltip=["label:N"],
        )
    )
    # Name each line at its right end instead of a legend.
    names = (
        this_ttft.transform_filter(alt.datum.itl_p99_slo_ms == float(itl_values[-1]))
        .mark_text(align="left", dx=6)
        .encode(
            x="itl_p99_slo_ms:Q",
            y="requests:Q",
            text="quantity:N",
            color=alt.Color("quantity:N", scale=colors, legend=None),
        )
    )
    caption = selected.mark_text(align="left", fontSize=12, dy=-18, lineBreak="\n").encode(
        x=alt.value(0), y=alt.value(0), text="label:N"
    )
    summary = alt.layer(by_itl, here, names, caption).properties(
        width=460, height=180, title=alt.TitleParams("Knee and target against the objective", dy=-30)
    )
    return (
        alt.vconcat(alt.hconcat(*panels), summary)
        .add_params(itl, ttft)
        .properties(title="Move the objectives: the knee follows")
    )
