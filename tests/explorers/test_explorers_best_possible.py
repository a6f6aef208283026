"""The explorer of "How close to the best possible": each strategy's cheapest run meeting the goal, beside the bound."""

from __future__ import annotations

from planner.explorers.best_possible import HEADERS, dollar_table, gap_explorer, gap_rows, gap_table, verdict_text
from planner.simulate.sweep import SweepResult
from planner.workflows.best_possible import REACTIVE, SCHEDULE


def _run(name: str, target: float, attained: float, cost_usd: float) -> SweepResult:
    return SweepResult(0, (("strategy", name), ("target", target)), attained, cost_usd, cost_usd / 4, 0, 0, 2, 0, 0)


def test_rows_give_the_excess_over_the_bound_and_the_share_of_reactings_gap():
    rows = gap_rows(
        [(REACTIVE, _run(REACTIVE, 20.0, 0.995, 2000.0)), (SCHEDULE, _run(SCHEDULE, 30.0, 0.991, 1800.0))], 1200.0
    )
    assert rows[0] == (REACTIVE, "target 20", "99.50 %", "$2,000", "+67 %", "")
    # (2000 - 1800) / (2000 - 1200) = 25 % of reacting's gap.
    assert rows[1] == (SCHEDULE, "target 30", "99.10 %", "$1,800", "+50 %", "25 %")
    assert rows[2][0].startswith("oracle") and rows[2][3] == "$1,200"
    small = gap_rows([(REACTIVE, _run(REACTIVE, 20.0, 0.995, 30.85)), ("forecast", None)], 15.96)
    assert small[0][3] == "$30.85" and small[1] == ("forecast", "none of the targets", "-", "-", "-", "-")
    assert "\\$2,000" in dollar_table(rows) and dollar_table(rows).splitlines()[0].count("|") == len(HEADERS) + 1


def test_the_table_and_the_explorer_follow_the_goal(best_possible_setting):
    _, _, _, best = best_possible_setting
    table = gap_table(best)
    reactive = best.cheapest(REACTIVE)
    assert f"| {REACTIVE} | target {dict(reactive.values)['target']:g} |" in table
    slider, html = gap_explorer(best).children
    assert slider.value == 99.0 and "<th>over the bound</th>" in html.value
    before = html.value
    slider.value = 100.0
    assert html.value != before and html.value.count("none of the targets") == 2


def test_the_verdict_says_whether_another_strategy_beats_reacting_and_by_what_share_of_the_gap():
    reactive = _run(REACTIVE, 20.0, 0.995, 2000.0)
    cheaper = verdict_text(reactive, [(SCHEDULE, _run(SCHEDULE, 30.0, 0.991, 1800.0))], 1200.0)
    assert cheaper == (
        "Reacting alone, at its cheapest, costs **\\$2,000**, 67 % above the bound. The cheapest other, "
        "**schedule**, costs \\$1,800: 10.0 % less, closing 25 % of reacting's gap to the bound."
    )
    same = verdict_text(reactive, [("a", _run("a", 20.0, 0.995, 2004.0)), ("b", None)], 1200.0, markdown=False)
    assert same == (
        "Reacting alone, at its cheapest, costs $2,000, 67 % above the bound. Nothing else costs less at the goal: "
        "the cheapest other, a, costs $2,004 (+0.2 %). Meeting the goal at none of the targets: b."
    )
    assert verdict_text(None, [], 1200.0).startswith("Reacting alone meets the goal at none of the targets")
