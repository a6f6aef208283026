"""Charts for the chapter on scale-down and drain."""

from __future__ import annotations

import altair as alt
import numpy as np
import pandas as pd

from planner.charts import grid_slider
from planner.dynamics.drain import OutputLengths, cut_frac, cut_requests, drain_window_s
from planner.dynamics.grace import drain_time_s, plan_grace

__all__ = ["cut_chart", "cut_grid", "grace_axis_s", "settings_table"]

_WIDTH = 560
# Short codes in the data (it is inlined in the page, once per row); the legend spells them out.
ABORT = "abort"
DRAIN = "drain"
_LABELS = {
    ABORT: "--shutdown-timeout 0 (abort at SIGTERM)",
    DRAIN: "--shutdown-timeout = grace - preStop - slack (drain)",
}


def grace_axis_s(max_grace_period_s: float, points: int = 120) -> np.ndarray:
    """Whole-second grace periods from one step up to ``max_grace_period_s``, at most ``points`` of them.

    The step is the first of 1, 2, 5, 10, 15, 20, 30, 60, 120, ... seconds that
    keeps the count within ``points`` (the chart's data stays small).
    """
    steps = [1, 2, 5, 10, 15, 20, 30] + [60 * 2**k for k in range(20)]
    step = next(s for s in steps if max_grace_period_s / s <= points)
    return np.arange(step, step * np.ceil(max_grace_period_s / step) + 1, step, dtype=float)


def cut_grid(
    itls_ms,
    lengths: OutputLengths,
    grace_periods_s=None,
    *,
    ttft_ms: float = 0.0,
    pre_stop_s: float = 0.0,
    slack_s: float = 5.0,
    margin_frac: float = 0.1,
) -> pd.DataFrame:
    """Fraction of in-flight generations cut, per ITL, grace period and shutdown setting.

    Two settings are compared at every grace period: vLLM's default, which
    aborts at SIGTERM, and a shutdown timeout that drains until ``slack_s``
    before SIGKILL. Without ``grace_periods_s``, each ITL gets its own axis
    (:func:`grace_axis_s`) up to a quarter beyond its recommended grace period.

    Returns
    -------
    pandas.DataFrame
        Columns ``itl_ms``, ``grace_s``, ``setting``, ``cut_frac``,
        ``recommended_grace_s`` (:func:`planner.dynamics.grace.plan_grace` for that ITL)
        and ``pre_stop_s``, the preStop every curve assumes (the chart states it).
    """
    frames = []
    for itl in np.asarray(itls_ms, dtype=float):
        recommended = plan_grace(
            drain_time_s(lengths.max_tokens, itl, ttft_ms),
            pre_stop_s=pre_stop_s,
            margin_frac=margin_frac,
            slack_s=slack_s,
        ).termination_grace_period_s
        grace_s = (
            grace_axis_s(1.25 * recommended) if grace_periods_s is None else np.asarray(grace_periods_s, dtype=float)
        )
        draining_timeout_s = np.maximum(grace_s - pre_stop_s - slack_s, 0.0)
        for setting, window in (
            (ABORT, drain_window_s(grace_s, 0.0, pre_stop_s)),
            (DRAIN, drain_window_s(grace_s, draining_timeout_s, pre_stop_s)),
        ):
            frames.append(
                pd.DataFrame(
                    {
                        "itl_ms": itl,
                        "grace_s": grace_s,
                        "setting": setting,
                        "cut_frac": cut_frac(window, lengths, itl, ttft_ms),
                        "recommended_grace_s": float(recommended),
                        "pre_stop_s": float(pre_stop_s),
                    }
                )
            )
    return pd.concat(frames, ignore_index=True)


def settings_table(
    settings, lengths: OutputLengths, itl_ms: float, in_flight_requests: float, ttft_ms: float = 0.0
) -> pd.DataFrame:
    """What each named setting cuts on one scale-down.

    Parameters
    ----------
    settings : iterable of (str, float, float, float)
        ``(name, terminationGracePeriodSeconds, --shutdown-timeout, preStop)``, in seconds.
    """
    rows = []
    for name, grace_s, shutdown_s, pre_stop_s in settings:
        window = drain_window_s(grace_s, shutdown_s, pre_stop_s)
        frac = cut_frac(window, lengths, itl_ms, ttft_ms)
        rows.append(
            {
                "setting": name,
                "grace (s)": grace_s,
                "--shutdown-timeout (s)": shutdown_s,
                "preStop (s)": pre_stop_s,
                "time to finish (s)": window,
                "in flight cut": f"{frac:.1%}",
                "cut per scale-down": round(float(cut_requests(in_flight_requests, frac)), 1),
            }
        )
    return pd.DataFrame(rows)


def cut_chart(grid: pd.DataFrame, initial_itl_ms: float) -> alt.LayerChart:
    """Cut fraction against the grace period for the ITL the slider picks.

    The grey rule marks Kubernetes' 30 s default, the green one the grace
    period the planner recommends for that ITL. Every curve assumes the grid's
    preStop, which the title and the legend state: requests that finish during
    the hook survive even an abort at SIGTERM.
    """
    pre_stop_s = float(grid["pre_stop_s"].iloc[0]) if "pre_stop_s" in grid else 0.0
    hook = f"after a {pre_stop_s:g} s preStop" if pre_stop_s > 0 else "with no preStop"
    labels = {ABORT: f"{_LABELS[ABORT]}, {hook}", DRAIN: f"{_LABELS[DRAIN]}, {hook}"}
    itl, step = grid_slider("itl_ms", grid["itl_ms"], initial_itl_ms, "ITL while draining (ms) ")
    chosen = f"abs(datum.itl_ms - {itl.name}) < {step / 2}"
    # The page inlines the data: one recommendation per ITL, and the fractions at 5 decimals (0.001 %).
    curves = grid[["itl_ms", "grace_s", "setting"]].assign(cut_frac=grid["cut_frac"].round(5))
    per_itl = grid.groupby("itl_ms", as_index=False)["recommended_grace_s"].first()
    lines = (
        alt.Chart(curves)
        .transform_filter(chosen)
        .mark_line()
        .encode(
            x=alt.X("grace_s:Q", title="terminationGracePeriodSeconds (s)"),
            y=alt.Y(
                "cut_frac:Q",
                title="In-flight generations cut",
                axis=alt.Axis(format="%"),
                scale=alt.Scale(domain=[0, 1]),
            ),
            color=alt.Color(
                "setting:N",
                title=None,
                sort=[ABORT, DRAIN],
                scale=alt.Scale(domain=[ABORT, DRAIN], range=["#e45756", "#4c78a8"]),
                legend=alt.Legend(
                    orient="bottom",
                    direction="vertical",
                    labelLimit=520,
                    labelExpr=f"datum.label == '{ABORT}' ? '{labels[ABORT]}' : '{labels[DRAIN]}'",
                ),
            ),
            tooltip=[
                alt.Tooltip("setting:N"),
                alt.Tooltip("grace_s:Q", title="grace (s)", format=".0f"),
                alt.Tooltip("cut_frac:Q", title="cut", format=".1%"),
            ],
        )
    )
    default = (
        alt.Chart(pd.DataFrame({"grace_s": [30.0]})).mark_rule(color="#888888", strokeDash=[2, 2]).encode(x="grace_s:Q")
    )
    recommended = (
        alt.Chart(per_itl)
        .transform_filter(chosen)
        .mark_rule(color="#54a24b", strokeDash=[6, 4])
        .encode(
            x=alt.X("recommended_grace_s:Q"),
            tooltip=[alt.Tooltip("recommended_grace_s:Q", title="recommended grace (s)")],
        )
    )
    subtitle = (
        ["Without a preStop, --shutdown-timeout 0 cuts every generation at any grace period."] if pre_stop_s > 0 else []
    )
    return (
        alt.LayerChart(layer=[lines, default, recommended])
        .add_params(itl)
        .properties(
            width=_WIDTH,
            height=240,
            title=alt.TitleParams(f"Generations cut by one scale-down, {hook}", subtitle=subtitle),
        )
    )
