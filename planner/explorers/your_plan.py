"""Live explorer for the chapter "Your plan": move the attainment goal, see what the plan would recommend."""

from __future__ import annotations

from collections.abc import Sequence

import ipywidgets as widgets

from planner.errors import PlannerInputError
from planner.simulate.sweep import SweepResult, cheapest_meeting

__all__ = ["goal_explorer"]


def _shown(result: SweepResult) -> str:
    return ", ".join(f"{k} = {v:g}" if isinstance(v, float) else f"{k} = {v}" for k, v in result.values)


def goal_explorer(
    results: Sequence[SweepResult],
    attainment_goal_frac: float = 0.99,
    max_flap_cycles: float | None = None,
    current: SweepResult | None = None,
) -> widgets.VBox:
    """A goal slider over a finished sweep; the summary names the setting the rules pick at that goal.

    Nothing is re-simulated. With ``current`` (the team's setting, as
    :func:`planner.workflows.plan.make_plan` replayed it) the pick is
    :func:`planner.workflows.plan.recommend`'s, with its reason; without it, the cheapest
    configuration meeting the goal within the flap limit
    (:func:`planner.simulate.sweep.cheapest_meeting`).
    """
    slider = widgets.FloatSlider(
        value=100.0 * attainment_goal_frac, min=50.0, max=100.0, step=0.1, description="goal (%)"
    )
    summary = widgets.HTML()

    def update(_change=None) -> None:
        goal = slider.value / 100.0
        if current is not None:
            from planner.workflows.plan import recommend

            pick = recommend(current, results, goal, max_flap_cycles)
            chosen = pick.result
            summary.value = (
                f"<p>At {slider.value:.1f} %: <b>{'the current setting' if pick.is_current else _shown(chosen)}"
                f"</b>, {100 * chosen.slo_attainment_frac:.2f} % for ${chosen.cost_usd:.2f} over the "
                f"replayed day, {chosen.flap_cycles} flap cycles. {pick.reason}</p>"
            )
            return
        if max_flap_cycles is not None and not isinstance(max_flap_cycles, int):
            # Without the current setting the pick is cheapest_meeting's, which counts whole cycles.
            raise PlannerInputError(f"max flap cycles: expected an integer >= 0, got {max_flap_cycles!r}")
        best = cheapest_meeting(results, goal, max_flap_cycles)
        within = "" if max_flap_cycles is None else f" within {max_flap_cycles} flap cycles"
        if best is None:
            summary.value = f"<p>No configuration of the grid reaches {slider.value:.1f} % attainment{within}.</p>"
        else:
            summary.value = (
                f"<p>Cheapest meeting {slider.value:.1f} %{within}: <b>{_shown(best)}</b>, "
                f"{100 * best.slo_attainment_frac:.2f} % for ${best.cost_usd:.2f} "
                f"(peak {best.peak_replicas} replicas, {best.flap_cycles} flap cycles).</p>"
            )

    slider.observe(update, names="value")
    update()
    return widgets.VBox([slider, summary])
