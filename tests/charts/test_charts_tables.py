"""Tables under their headers: the shared renaming and formats of the chapters' table views."""

from __future__ import annotations

import pandas as pd
import pytest

from planner.charts.tables import compact_table_styles, headed

COLUMNS = {
    "configuration": ("Configuration", "{}"),
    "met_frac": ("Met (%)", "{:.1%}"),
    "cost_usd": ("Cost ($)", "{:,.2f}"),
}


def test_each_column_goes_under_its_header_with_its_format_and_the_frame_is_left_alone():
    frame = pd.DataFrame({"configuration": ["a"], "met_frac": [0.925], "cost_usd": [1234.5]})
    shown, formats = headed(frame, COLUMNS)
    assert list(shown.columns) == ["Configuration", "Met (%)", "Cost ($)"]
    assert formats == {"Configuration": "{}", "Met (%)": "{:.1%}", "Cost ($)": "{:,.2f}"}
    assert shown["Met (%)"].iloc[0] == 0.925
    in_header, formats = headed(frame, COLUMNS, percent_in_header=True)
    assert in_header["Met (%)"].iloc[0] == pytest.approx(92.5) and formats["Met (%)"] == "{:.1f}"
    assert frame["met_frac"].iloc[0] == 0.925  # the caller's frame is not changed


def test_a_column_without_a_header_is_refused():
    with pytest.raises(ValueError, match="no header for column 'extra'"):
        headed(pd.DataFrame({"configuration": ["a"], "extra": [1]}), COLUMNS)


def test_the_compact_styles_cap_the_first_column():
    assert compact_table_styles(8)[-1] == {"selector": "th.col0, td.col0", "props": "text-align: left; max-width: 8em;"}
