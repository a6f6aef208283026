"""Live explorer for the chapter "How close to the best possible": move the goal, price each strategy and the bound."""

from __future__ import annotations

import html
import math
from collections.abc import Sequence

import ipywidgets as widgets

from planner.markdown import markdown_table
from planner.simulate.sweep import SweepResult
from planner.workflows.best_possible import REACTIVE, SCHEDULE, BestPossible, gap_closed_frac

__all__ = ["HEADERS", "dollar_table", "gap_explorer", "gap_rows", "gap_table", "verdict_text"]

HEADERS = ("strategy", "cheapest at the goal", "attainment", "cost", "over the bound", "reacting's gap closed")


def gap_rows(
    priced: Sequence[tuple[str, SweepResult | None]], oracle_usd: float, reactive_name: str = REACTIVE
) -> list[tuple[str, ...]]:
    """One row per strategy: its cheapest run meeting the goal, its cost over the oracle's, the share of reacting's gap.

    ``priced`` is (strategy, its cheapest run meeting the goal or ``None``), the oracle last as its
    own row. Nothing is simulated.
    """
    reactive = dict(priced).get(reactive_name)
    rows: list[tuple[str, ...]] = []
    for name, run in priced:
        if run is None:
            rows.append((name, "none of the targets", "-", "-", "-", "-"))
            continue
        over = run.cost_usd / oracle_usd - 1 if oracle_usd > 0 else float("nan")
        share = math.nan if reactive is None else gap_closed_frac(reactive.cost_usd, run.cost_usd, oracle_usd)
        closed = "" if name == reactive_name or math.isnan(share) else f"{round(100 * share) + 0:d} %"
        rows.append(
            (
                name,
                f"target {dict(run.values)['target']:g}",
                f"{100 * run.slo_attainment_frac:.2f} %",
                _usd(run.cost_usd),
                f"{100 * over:+.0f} %",
                closed,
            )
        )
    rows.append(("oracle (cold-start bound)", "a bound, not a setting", "the goal", _usd(oracle_usd), "", ""))
    return rows


def verdict_text(
    reactive: SweepResult | None,
    others: Sequence[tuple[str, SweepResult | None]],
    oracle_usd: float,
    *,
    markdown: bool = True,
) -> str:
    """Two sentences: reacting's cheapest cost against the bound, and whether the cheapest other strategy beats it.

    ``others`` are (strategy, its cheapest run meeting the goal or ``None``); a change within 0.5 % is no
    change. With ``markdown``, names are bold and each ``$`` is escaped so no renderer reads it as math.
    """
    bold = "**" if markdown else ""
    if reactive is None:
        return "Reacting alone meets the goal at none of the targets: add a tighter target to price it."
    over = f", {100 * (reactive.cost_usd / oracle_usd - 1):.0f} % above the bound" if oracle_usd > 0 else ""
    text = f"Reacting alone, at its cheapest, costs {bold}{_usd(reactive.cost_usd)}{bold}{over}."
    priced = [(name, run) for name, run in others if run is not None]
    unpriced = [name for name, run in others if run is None]
    if priced:
        name, run = min(priced, key=lambda item: item[1].cost_usd)
        change = run.cost_usd / reactive.cost_usd - 1
        if change < -0.005:
            closed = gap_closed_frac(reactive.cost_usd, run.cost_usd, oracle_usd)
            share = "" if math.isnan(closed) else f", closing {100 * closed:.0f} % of reacting's gap to the bound"
            text += (
                f" The cheapest other, {bold}{name}{bold}, costs {_usd(run.cost_usd)}: "
                f"{-100 * change:.1f} % less{share}."
            )
        else:
            text += (
                f" Nothing else costs less at the goal: the cheapest other, {bold}{name}{bold}, costs "
                f"{_usd(run.cost_usd)} ({100 * change:+.1f} %)."
            )
    if unpriced:
        text += f" Meeting the goal at none of the targets: {', '.join(unpriced)}."
    return text.replace("$", "\\$") if markdown else text


def _usd(value: float) -> str:
    # Whole dollars for a week's bill, cents for a short replay's.
    return f"${value:,.0f}" if abs(value) >= 100 else f"${value:,.2f}"


def _priced(best: BestPossible, attainment_goal_frac: float) -> list[tuple[str, SweepResult | None]]:
    return [(name, best.cheapest(name, attainment_goal_frac)) for name in (REACTIVE, SCHEDULE)]


def gap_table(best: BestPossible, attainment_goal_frac: float | None = None) -> str:
    """:func:`gap_rows` for the week's reacting and schedule as a Markdown table, for the page."""
    goal = best.attainment_goal_frac if attainment_goal_frac is None else attainment_goal_frac
    return dollar_table(gap_rows(_priced(best, goal), best.curve.cold_start_cost_usd_at(goal)))


def dollar_table(rows: Sequence[Sequence[str]]) -> str:
    """Rows of :func:`gap_rows` as a Markdown table, each ``$`` escaped so no renderer reads it as math."""
    return markdown_table(HEADERS, [[cell.replace("$", "\\$") for cell in row] for row in rows])


def gap_explorer(best: BestPossible) -> widgets.VBox:
    """A goal slider over the finished runs; the table prices reacting, the schedule and the oracle at that goal.

    The schedules stay the ones fitted at the chapter's goal; only which run is cheapest and the bound move.
    """
    lowest = min((r.slo_attainment_frac for r in best.reactive + best.scheduled), default=0.9)
    slider = widgets.FloatSlider(
        value=100.0 * best.attainment_goal_frac,
        min=max(50.0, round(100.0 * lowest - 5.0)),
        max=100.0,
        step=0.1,
        description="goal (%)",
    )
    table = widgets.HTML()

    def update(_change=None) -> None:
        goal = slider.value / 100.0
        rows = gap_rows(_priced(best, goal), best.curve.cold_start_cost_usd_at(goal))
        body = "".join(
            "<tr>" + "".join(f"<{tag}>{html.escape(cell)}</{tag}>" for cell in row) + "</tr>"
            for tag, row in (("th" if k == 0 else "td", row) for k, row in enumerate([HEADERS, *rows]))
        )
        table.value = f"<table>{body}</table>"

    slider.observe(update, names="value")
    update()
    return widgets.VBox([slider, table])
