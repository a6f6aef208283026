"""Charts of the chapter "How close to the best possible": the week's replicas and replica-hours per day."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from planner.charts.best_possible import (
    SERIES,
    day_chart,
    day_frame,
    day_ratios,
    front_chart,
    runs_frame,
    week_chart,
    week_frame,
)
from planner.workflows.best_possible import REACTIVE, SCHEDULE


def test_the_week_frame_holds_every_series_binned_by_the_oracles_window(best_possible_setting):
    _, fleet, _, best = best_possible_setting
    reactive, scheduled = best.cheapest(REACTIVE), best.cheapest(SCHEDULE)
    frame = week_frame(best, reactive, scheduled, fleet.start_epoch_s)
    assert list(frame.columns) == ["time", "series", "replicas"]
    assert set(frame["series"]) == set(SERIES)
    need = frame[frame["series"] == SERIES[0]]["replicas"].to_numpy()
    # Up to the last arrival: the window after it holds only the runs' drain.
    last_s = float(np.max(best.outcome_of(reactive).arrival_s))
    assert np.array_equal(need, best.bound.profile_replicas[best.bound.profile_t_s < last_s])
    assert len(need) == 96  # a day of quarter hours
    # The run's bins are means of its live replicas: their mean over the day is the run's own mean.
    live = best.outcome_of(reactive).timeseries["replicas_live"].to_numpy(dtype=float)
    binned = frame[frame["series"] == SERIES[1]]["replicas"].to_numpy()
    assert binned.max() <= live.max() and binned.min() >= live.min()
    first = frame["time"].min()
    assert first == pd.Timestamp(fleet.start_epoch_s, unit="s")  # Monday 2024-01-01 00:00 UTC
    floor = frame[frame["series"] == SERIES[3]]["replicas"].to_numpy()
    assert floor.min() >= best.schedule_of(scheduled).base_replicas


def test_the_day_frame_sums_replica_hours_per_day_without_the_floor(best_possible_setting):
    _, fleet, _, best = best_possible_setting
    frame = week_frame(best, best.cheapest(REACTIVE), best.cheapest(SCHEDULE), fleet.start_epoch_s)
    days = day_frame(frame)
    assert list(days.columns) == ["day", "weekend", "series", "replica_hours"]
    assert not days["weekend"].any()  # a Monday
    assert set(days["series"]) == set(SERIES[:3])
    assert set(days["day"]) == {"Mon 01"}
    need = days[days["series"] == SERIES[0]]["replica_hours"].iloc[0]
    assert need == pytest.approx(best.bound.profile_replicas[:96].sum() * best.bound.window_s / 3600.0)


def test_the_charts_encode_time_replicas_and_series(best_possible_setting):
    _, fleet, _, best = best_possible_setting
    frame = week_frame(best, best.cheapest(REACTIVE), best.cheapest(SCHEDULE), fleet.start_epoch_s)
    spec = week_chart(frame).to_dict()
    assert spec["mark"]["type"] == "line"
    assert spec["encoding"]["x"]["field"] == "time" and spec["encoding"]["color"]["scale"]["domain"] == list(SERIES)
    bars = day_chart(day_frame(frame)).to_dict()
    assert bars["mark"]["type"] == "bar" and bars["encoding"]["xOffset"]["field"] == "series"
    assert SERIES[3] not in bars["encoding"]["color"]["scale"]["domain"]


def test_the_front_chart_draws_every_run_beside_the_bounds_and_the_goal(best_possible_setting):
    _, _, _, best = best_possible_setting
    frame = runs_frame(best)
    assert frame["strategy"].tolist() == [SERIES[1]] * 2 + [SERIES[2]] * 2
    assert frame["target"].tolist() == list(best.targets) * 2
    assert (frame["regret_usd"] >= -1e-6).all()
    spec = front_chart(best).to_dict()
    bounds, runs, goal = spec["layer"]
    assert bounds["mark"]["type"] == "line" and bounds["encoding"]["strokeDash"]["field"] == "bound"
    assert runs["encoding"]["color"]["field"] == "strategy" and runs["encoding"]["order"]["field"] == "target"
    assert spec["datasets"][goal["data"]["name"]] == [{"attainment_pct": 99.0}]


def test_day_ratios_compare_each_day_with_the_oracles_need():
    days = pd.DataFrame(
        {
            "day": ["Fri 05", "Fri 05", "Sat 06", "Sat 06", "Sun 07", "Sun 07"],
            "weekend": [False, False, True, True, True, True],
            "series": [SERIES[0], SERIES[1]] * 3,
            "replica_hours": [10.0, 16.0, 5.0, 9.0, 4.0, 6.0],
        }
    )
    ratios = day_ratios(days)
    assert ratios["ratio"].tolist() == [1.6, 1.8, 1.5]
    assert (ratios["low_day"], ratios["high_day"]) == ("Sun 07", "Sat 06")
    assert ratios["weekday"] == pytest.approx(1.6) and ratios["weekend"] == pytest.approx(1.65)
    assert np.isnan(day_ratios(days[days["weekend"]])["weekday"])
