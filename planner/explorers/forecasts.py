"""Live explorer for the chapter on forecasts: move the attainment goal, see each strategy's price at it."""

from __future__ import annotations

import html

import ipywidgets as widgets

from planner.markdown import markdown_table
from planner.workflows.forecast_comparison import REACTIVE, gpu_hours_at_attainment

__all__ = ["HEADERS", "pricing_explorer", "pricing_rows", "pricing_table"]

HEADERS = ("strategy", "GPU-hours at the goal", "against reactive", "note")


def pricing_rows(comparison, attainment_goal_frac: float) -> list[tuple[str, str, str, str]]:
    """Per strategy: its GPU-hours at the goal (interpolated between its runs), the change against reactive, why not.

    Nothing is re-simulated: the runs of ``comparison`` are read at another goal.
    """
    priced = {
        strategy.name: gpu_hours_at_attainment(strategy.runs, attainment_goal_frac)
        for strategy in comparison.strategies
    }
    reactive = priced.get(REACTIVE, (None, None, ""))[0]
    rows = []
    for name, (value, _, note) in priced.items():
        if value is None:
            rows.append((name, "-", "-", note))
            continue
        change = "" if reactive is None or name == REACTIVE else f"{100 * (value / reactive - 1):+.1f} %"
        rows.append((name, f"{value:.2f}", change, ""))
    return rows


def pricing_table(comparison, attainment_goal_frac: float) -> str:
    """:func:`pricing_rows` as a Markdown table, for the page."""
    return markdown_table(HEADERS, pricing_rows(comparison, attainment_goal_frac))


def pricing_explorer(comparison, attainment_goal_frac: float = 0.99) -> widgets.VBox:
    """A goal slider over a finished comparison; the table prices every strategy at that goal."""
    slider = widgets.FloatSlider(
        value=100.0 * attainment_goal_frac, min=80.0, max=100.0, step=0.1, description="goal (%)"
    )
    table = widgets.HTML()

    def update(_change=None) -> None:
        cells = [HEADERS, *pricing_rows(comparison, slider.value / 100.0)]
        body = "".join(
            "<tr>" + "".join(f"<{tag}>{html.escape(cell)}</{tag}>" for cell in row) + "</tr>"
            for tag, row in (("th" if k == 0 else "td", row) for k, row in enumerate(cells))
        )
        table.value = f"<table>{body}</table>"

    slider.observe(update, names="value")
    update()
    return widgets.VBox([slider, table])
