"""Live explorer for how slowly a saturated KV-usage trigger grows a fleet, against an unbounded signal."""

from __future__ import annotations

import html

import ipywidgets as widgets

from planner.dynamics.kv_ramp import (
    DEFAULT_TOLERANCE_FRAC,
    compare_ramps,
    max_usage_ratio,
    ramp_replicas,
)
from planner.errors import PlannerInputError

__all__ = ["kv_bounded_ratio_explorer"]

NEVER_SHOWN_WARMUPS = 3  # warmups listed when the bounded metric never scales up


def kv_bounded_ratio_explorer(
    start_replicas: int = 4,
    kv_target_frac: float = 0.8,
    goal_replicas: int = 10,
    warmup_s: float = 240.0,
) -> widgets.VBox:
    """Sliders for the overload and the KV target, with both ramps recomputed by :mod:`planner.dynamics.kv_ramp`.

    Parameters
    ----------
    start_replicas : int
        Ready replicas when the overload starts. [replicas]
    kv_target_frac : float
        Target of the KV-usage trigger. [fraction]
    goal_replicas : int
        Replicas the load needs. [replicas]
    warmup_s : float
        Pod created -> Ready. [s]

    Returns
    -------
    ipywidgets.VBox
        The four sliders in that order, then the summary.
    """
    style = {"description_width": "14em"}
    layout = widgets.Layout(width="36em")
    sliders = {
        "start_replicas": widgets.IntSlider(
            value=start_replicas,
            min=1,
            max=max(64, start_replicas),
            description="Ready at the start",
            style=style,
            layout=layout,
        ),
        "kv_target_frac": widgets.FloatSlider(
            value=kv_target_frac, min=0.3, max=1.0, step=0.01, description="KV usage target", style=style, layout=layout
        ),
        "goal_replicas": widgets.IntSlider(
            value=goal_replicas,
            min=1,
            max=max(200, goal_replicas),
            description="replicas the load needs",
            style=style,
            layout=layout,
        ),
        "warmup_s": widgets.FloatSlider(
            value=warmup_s,
            min=10.0,
            max=max(1200.0, warmup_s),
            step=10.0,
            description="warmup (s)",
            style=style,
            layout=layout,
        ),
    }
    summary = widgets.HTML()

    def update(_change=None) -> None:
        v = {name: slider.value for name, slider in sliders.items()}
        try:
            cap = float(max_usage_ratio(v["kv_target_frac"]))
            comparison = compare_ramps(v["start_replicas"], v["goal_replicas"], v["kv_target_frac"], v["warmup_s"])
            ramp = comparison.bounded_replicas
            if comparison.bounded_warmups is None:
                ramp = tuple(
                    int(r) for r in ramp_replicas(v["start_replicas"], v["kv_target_frac"], NEVER_SHOWN_WARMUPS)
                )
        except PlannerInputError as error:
            summary.value = f"<p><b>Invalid input:</b> {html.escape(str(error))}.</p>"
            return
        goal = v["goal_replicas"]
        if comparison.bounded_warmups is None:
            reach = (
                f"the cap is inside the {DEFAULT_TOLERANCE_FRAC:.0%} tolerance, so KV usage alone "
                f"<b>never</b> scales up"
            )
        elif comparison.bounded_warmups == 0:
            reach = "the fleet already has the replicas the load needs"
        else:
            reach = (
                f"it reaches {goal} after <b>{comparison.bounded_warmups}</b> warmups, "
                f"<b>{comparison.bounded_time_s / 60:.1f} min</b>"
            )
        rows = "".join(
            f"<tr><td style='text-align:right'>{k}</td><td style='text-align:right'>{k * v['warmup_s'] / 60:.1f}</td>"
            f"<td style='text-align:right'>{replicas}</td><td>{'goal reached' if replicas >= goal else ''}</td></tr>"
            for k, replicas in enumerate(ramp)
        )
        if goal <= v["start_replicas"]:
            unbounded = "Neither signal needs to scale up."
        else:
            unbounded = (
                f"An unbounded signal (requests in flight or waiting) asks for {goal} at once: all Ready "
                f"after <b>{comparison.unbounded_time_s / 60:.1f} min</b> (one warmup plus the default "
                f"scale-up policy's 15 s periods)."
            )
        summary.value = (
            f"<p>A saturated KV trigger shows a ratio of at most 1 / {v['kv_target_frac']:.2f} = <b>{cap:.3g}</b>, "
            f"so each decision grows the Ready fleet by at most {cap - 1:.0%}: "
            f"{' → '.join(str(r) for r in ramp)}; {reach}.</p>"
            f"<p>{unbounded}</p>"
            f"<table><tr><th>warmups</th><th>min</th><th>Ready, KV alone</th><th></th></tr>{rows}</table>"
        )

    for slider in sliders.values():
        slider.observe(update, names="value")
    update()
    return widgets.VBox([*sliders.values(), summary])
