"""Charts of the drain chapter: one precomputed cut curve per ITL, chosen by a slider."""

import numpy as np
import pytest

from planner.charts.drain import ABORT, DRAIN, cut_chart, cut_grid, grace_axis_s, settings_table
from planner.dynamics.drain import output_lengths


def test_grid_compares_aborting_with_draining():
    lengths = output_lengths(4096, "max")
    grid = cut_grid([40.0, 50.0], lengths, np.arange(5.0, 301.0, 5.0), pre_stop_s=10.0)
    at_50 = grid[grid["itl_ms"] == 50.0].set_index(["setting", "grace_s"])["cut_frac"]
    # Aborting at SIGTERM leaves only the 10 s preStop, whatever the grace period.
    assert at_50.loc[ABORT].loc[30.0] == pytest.approx(1 - 10 / 204.8)
    assert at_50.loc[ABORT].loc[300.0] == pytest.approx(1 - 10 / 204.8)
    # Draining until 5 s before SIGKILL: 25 s at the 30 s default, everything from 210 s on.
    assert at_50.loc[DRAIN].loc[30.0] == pytest.approx(1 - 25 / 204.8)
    assert at_50.loc[DRAIN].loc[210.0] == 0.0
    assert grid.loc[grid["itl_ms"] == 50.0, "recommended_grace_s"].unique().tolist() == [241.0]
    spec = cut_chart(grid, 50.0).to_dict()
    assert spec["params"][0]["value"] == 50.0 and spec["params"][0]["bind"]["step"] == 10.0
    assert spec["width"] <= 560


def test_table_names_each_setting_and_its_cut():
    table = settings_table(
        [("defaults", 30, 0, 0), ("drain", 30, 25, 0), ("planned", 241, 226, 10)],
        output_lengths(4096, "max"),
        50.0,
        40.0,
    )
    assert table["time to finish (s)"].tolist() == [0.0, 25.0, 236.0]
    assert table["in flight cut"].tolist() == ["100.0%", f"{1 - 25 / 204.8:.1%}", "0.0%"]
    assert table["cut per scale-down"].tolist() == [40.0, round(40 * (1 - 25 / 204.8), 1), 0.0]


@pytest.mark.parametrize("upper_s", [12.0, 287.0, 1229.0, 250_000.0])
def test_grace_axis_stays_small_and_reaches_the_top(upper_s):
    axis = grace_axis_s(upper_s)
    assert axis.size <= 120 and axis[0] > 0 and axis[-1] >= upper_s
    assert np.all(axis == np.round(axis)) and len(set(np.diff(axis))) == 1


def test_each_itl_gets_an_axis_past_its_recommended_grace():
    grid = cut_grid([10.0, 100.0], output_lengths(4096, "geometric", 512), pre_stop_s=10.0)
    for _, rows in grid.groupby("itl_ms"):
        recommended = rows["recommended_grace_s"].iloc[0]
        assert rows["grace_s"].max() >= 1.25 * recommended and rows["grace_s"].nunique() <= 120
        assert rows.loc[rows["grace_s"] >= recommended, "cut_frac"].max() < 1.0
        assert rows.loc[(rows["setting"] == DRAIN) & (rows["grace_s"] >= recommended), "cut_frac"].max() == 0.0
    assert len(grid) < 5000  # altair's inline-data limit


def test_chart_states_the_prestop_its_curves_assume():
    grid = cut_grid([50.0], output_lengths(4096, "max"), pre_stop_s=10.0)
    assert (grid["pre_stop_s"] == 10.0).all()
    spec = cut_chart(grid, 50.0).to_dict()
    assert spec["title"]["text"] == "Generations cut by one scale-down, after a 10 s preStop"
    assert "every generation" in spec["title"]["subtitle"][0]
    assert "after a 10 s preStop" in spec["layer"][0]["encoding"]["color"]["legend"]["labelExpr"]
    no_hook = cut_chart(cut_grid([50.0], output_lengths(4096, "max")), 50.0).to_dict()
    assert no_hook["title"]["text"].endswith("with no preStop")
