"""Charts for the chapter "How close to the best possible": the week's replicas beside the oracle's need.

The numbers come from :mod:`planner.workflows.best_possible`; these functions only lay them out
to fit the book's column (about 650 px). The bounds are drawn as
:func:`planner.charts.oracle.oracle_chart` draws them.
"""

from __future__ import annotations

import altair as alt
import numpy as np
import pandas as pd

from planner.charts.oracle import ATTAINMENT_Y, COST_X, bound_lines, goal_rule
from planner.simulate.sweep import SweepResult
from planner.workflows.best_possible import REACTIVE, SCHEDULE, BestPossible, schedule_floor_replicas

__all__ = [
    "SERIES",
    "WIDTH_PX",
    "day_chart",
    "day_frame",
    "day_ratios",
    "front_chart",
    "runs_frame",
    "week_chart",
    "week_frame",
]

WIDTH_PX = 560
SERIES = ("oracle's need", "reacting", "schedule + metric", "schedule's floor")
_COLORS = ("#222222", "#1f77b4", "#d62728", "#ff9896")


def _binned(t_s: np.ndarray, values: np.ndarray, bin_s: float) -> tuple[np.ndarray, np.ndarray]:
    # The mean over each bin, at the bin's start: a week of 5 s ticks is far more points than a chart needs.
    bins = np.floor(t_s / bin_s).astype(np.int64)
    counts = np.bincount(bins)
    sums = np.bincount(bins, weights=values)
    keep = counts > 0
    return np.flatnonzero(keep) * bin_s, sums[keep] / counts[keep]


def week_frame(
    best: BestPossible,
    reactive: SweepResult,
    scheduled: SweepResult,
    start_epoch_s: float,
    bin_s: float | None = None,
) -> pd.DataFrame:
    """Long form, one row per series and bin: ``time`` (UTC), ``series`` (:data:`SERIES`), ``replicas``.

    ``oracle's need`` is the cold-start bound's replicas per window with every request met
    (:attr:`~planner.simulate.oracle.OracleBound.profile_replicas`); ``reacting`` and
    ``schedule + metric`` the mean live replicas of the two runs; ``schedule's floor`` what that
    run's cron triggers hold. Bins default to the oracle's window; every series stops at the last
    arrival, leaving out the runs' drain after it.
    """
    bin_s = float(best.bound.window_s if bin_s is None else bin_s)
    # Up to the last arrival: the runs' drain after it, and the oracle's window holding that drain, are left out.
    arrivals = np.asarray(best.outcome_of(reactive).arrival_s, dtype=float)
    end_s = float(arrivals.max()) if arrivals.size else 0.0
    shown = best.bound.profile_t_s < end_s
    frames = [
        pd.DataFrame(
            {
                "t_s": best.bound.profile_t_s[shown],
                "series": SERIES[0],
                "replicas": best.bound.profile_replicas[shown],
            }
        )
    ]
    schedule = best.schedule_of(scheduled)
    for name, run in ((SERIES[1], reactive), (SERIES[2], scheduled)):
        series = best.outcome_of(run).timeseries
        within = series["t_s"].to_numpy() < end_s
        t, live = _binned(
            series["t_s"].to_numpy()[within], series["replicas_live"].to_numpy(dtype=float)[within], bin_s
        )
        frames.append(pd.DataFrame({"t_s": t, "series": name, "replicas": live}))
    floor = schedule_floor_replicas(schedule, t, start_epoch_s)
    frames.append(pd.DataFrame({"t_s": t, "series": SERIES[3], "replicas": floor.astype(float)}))
    frame = pd.concat(frames, ignore_index=True)
    frame["time"] = pd.to_datetime(start_epoch_s + frame["t_s"], unit="s")
    return frame[["time", "series", "replicas"]]


def week_chart(frame: pd.DataFrame) -> alt.Chart:
    """Replicas over the replay, one line per series; the floor dashed, the oracle's need as a step line."""
    return (
        alt.Chart(frame)
        .mark_line(interpolate="step-after", strokeWidth=1.2)
        .encode(
            x=alt.X("time:T", title="time (UTC)", axis=alt.Axis(format="%a %H:%M", labelAngle=0, tickCount=7)),
            y=alt.Y("replicas:Q", title="replicas"),
            color=alt.Color(
                "series:N",
                title=None,
                scale=alt.Scale(domain=list(SERIES), range=list(_COLORS)),
                legend=alt.Legend(orient="bottom"),
            ),
            strokeDash=alt.StrokeDash(
                "series:N",
                scale=alt.Scale(domain=list(SERIES), range=[[1, 0], [1, 0], [1, 0], [4, 3]]),
                legend=None,
            ),
            tooltip=[alt.Tooltip("time:T", format="%a %H:%M"), "series", alt.Tooltip("replicas:Q", format=".1f")],
        )
        .properties(width=WIDTH_PX, height=260)
    )


def day_frame(frame: pd.DataFrame) -> pd.DataFrame:
    """Replica-hours per calendar day (UTC) of each series of :func:`week_frame`, the floor left out.

    Columns ``day`` (``Mon 01``), ``weekend`` (Saturday or Sunday), ``series``, ``replica_hours``:
    each bin's mean replicas times the
    bin's length. The oracle's need is a lower bound per day with every request met; the runs' are
    live replicas (warming ones included), close to but not exactly the billed GPU-hours. [h]
    """
    kept = frame[frame["series"] != SERIES[3]].sort_values("time")
    bin_s = float(kept.groupby("series")["time"].diff().dt.total_seconds().median())
    days = kept["time"].dt.floor("D")
    hours = kept.assign(day=days, replica_hours=kept["replicas"] * bin_s / 3600.0)
    out = hours.groupby(["day", "series"], sort=True, as_index=False)["replica_hours"].sum()
    out["weekend"] = out["day"].dt.day_of_week >= 5
    out["day"] = out["day"].dt.strftime("%a %d")
    return out[["day", "weekend", "series", "replica_hours"]]


def day_chart(frame: pd.DataFrame) -> alt.Chart:
    """Replica-hours per day, one group of bars per day (weekends included), one bar per series."""
    order = list(dict.fromkeys(frame["day"]))
    shown = [s for s in SERIES if s != SERIES[3]]
    return (
        alt.Chart(frame)
        .mark_bar()
        .encode(
            x=alt.X("day:N", title=None, sort=order, axis=alt.Axis(labelAngle=0)),
            xOffset=alt.XOffset("series:N", sort=shown),
            y=alt.Y("replica_hours:Q", title="replica-hours per day [h]"),
            color=alt.Color(
                "series:N",
                title=None,
                scale=alt.Scale(domain=shown, range=list(_COLORS[:3])),
                legend=alt.Legend(orient="bottom"),
            ),
            tooltip=["day", "series", alt.Tooltip("replica_hours:Q", format=".1f")],
        )
        .properties(width=WIDTH_PX, height=220)
    )


_LABELS = {REACTIVE: SERIES[1], SCHEDULE: SERIES[2]}


def runs_frame(best: BestPossible) -> pd.DataFrame:
    """One row per run: ``strategy`` (as :data:`SERIES` names it), ``target``, ``cost_usd``, ``attainment_pct``,
    ``regret_usd``."""
    rows = [
        (
            _LABELS[strategy],
            target,
            run.cost_usd,
            100.0 * run.slo_attainment_frac,
            np.nan if run.regret_usd is None else run.regret_usd,
        )
        for strategy in (REACTIVE, SCHEDULE)
        for run, target in zip(best.runs(strategy), best.targets, strict=True)
    ]
    return pd.DataFrame(rows, columns=["strategy", "target", "cost_usd", "attainment_pct", "regret_usd"])


def front_chart(best: BestPossible) -> alt.LayerChart:
    """Cost against attainment: each strategy's runs joined in target order, the oracle's two bounds, the goal.

    The bounds are drawn from a little below the lowest attainment of the runs; no run can lie left
    of the cold-start bound, and a run's horizontal distance to it at its own attainment is its regret.
    """
    frame = runs_frame(best)
    lowest = float(frame["attainment_pct"].min()) / 100.0 if len(frame) else 0.0
    lines = bound_lines(best.curve, lowest)
    x, y = COST_X, ATTAINMENT_Y
    shown = [SERIES[1], SERIES[2]]
    runs = (
        alt.Chart(frame)
        # Open marks of two shapes: where both strategies ran the same replay, both stay visible.
        .mark_line(point=alt.OverlayMarkDef(size=90, filled=False, strokeWidth=1.5), strokeWidth=1.2)
        .encode(
            x=x,
            y=y,
            color=alt.Color(
                "strategy:N",
                title=None,
                legend=alt.Legend(orient="bottom"),
                scale=alt.Scale(domain=shown, range=list(_COLORS[1:3])),
            ),
            shape=alt.Shape("strategy:N", legend=None, scale=alt.Scale(domain=shown, range=["circle", "square"])),
            order=alt.Order("target:Q"),
            tooltip=[
                "strategy",
                alt.Tooltip("target:Q", format=".3g"),
                alt.Tooltip("cost_usd:Q", format=",.0f"),
                alt.Tooltip("attainment_pct:Q", format=".2f"),
                alt.Tooltip("regret_usd:Q", format=",.0f", title="over the bound [$]"),
            ],
        )
    )
    layers = [lines, runs, goal_rule(best.attainment_goal_frac)]
    return alt.LayerChart(layer=layers).properties(width=WIDTH_PX, height=300)


def day_ratios(days: pd.DataFrame, run: str = SERIES[1]) -> dict:
    """How many times the oracle's need a run's replica-hours are, per day of :func:`day_frame`.

    Returns ``ratio`` (a Series by day, in the frame's order), ``low_day`` and ``high_day`` (the days
    of the least and the most), and ``weekday`` and ``weekend`` (the means over those days, NaN
    when there are none). [-]
    """
    order = list(dict.fromkeys(days["day"]))
    by_day = days.pivot(index="day", columns="series", values="replica_hours").loc[order]
    ratio = by_day[run] / by_day[SERIES[0]]
    weekend = days.groupby("day", sort=False)["weekend"].first().loc[order]
    return {
        "ratio": ratio,
        "low_day": str(ratio.idxmin()),
        "high_day": str(ratio.idxmax()),
        "weekday": float(ratio[~weekend].mean()) if (~weekend).any() else float("nan"),
        "weekend": float(ratio[weekend].mean()) if weekend.any() else float("nan"),
    }
