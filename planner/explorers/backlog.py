"""Live explorer: the queue a step leaves, for a cold start, a step and a target, and how each router drains it."""

from __future__ import annotations

import math

import ipywidgets as widgets

from planner.autoscaler.defaults import DEFAULT_SYNC_PERIOD_S
from planner.capacity.headroom import (
    backlog_clear_s,
    backlog_requests,
    fleet_capacity_rps,
    reaction_time_s,
)
from planner.capacity.littles_law import drain_rate_rps, in_flight_requests, replicas_for_target
from planner.dynamics.replica_queues import (
    backlog_per_replica_requests,
    least_loaded_clear_s,
    round_robin_clear_s,
)


def backlog_explorer(
    metric_window_s: float = 30.0,
    eval_interval_s: float = DEFAULT_SYNC_PERIOD_S,
    cold_start_s: float = 60.0,
    knee_concurrency: float = 48.0,
    target_concurrency: float = 40.0,
    request_duration_s: float = 12.0,
    arrival_rate_rps: float = 30.0,
    step_arrival_rate_rps: float = 75.0,
) -> widgets.VBox:
    """Sliders for the cold start, the step and the target; the summary reruns the planner."""
    sliders = {
        "cold_start_s": widgets.FloatSlider(value=cold_start_s, min=0, max=900, step=5, description="cold start (s)"),
        "step_arrival_rate_rps": widgets.FloatSlider(
            value=step_arrival_rate_rps, min=0, max=500, step=1, description="after step"
        ),
        "target_concurrency": widgets.FloatSlider(
            value=target_concurrency, min=1, max=256, step=1, description="target T"
        ),
        "metric_window_s": widgets.FloatSlider(value=metric_window_s, min=0, max=300, step=5, description="window (s)"),
    }
    summary = widgets.HTML()

    def update(_change=None) -> None:
        v = {name: slider.value for name, slider in sliders.items()}
        reaction = reaction_time_s(v["metric_window_s"], eval_interval_s, v["cold_start_s"])
        per_replica = drain_rate_rps(knee_concurrency, request_duration_s)
        before = replicas_for_target(in_flight_requests(arrival_rate_rps, request_duration_s), v["target_concurrency"])
        after = replicas_for_target(
            in_flight_requests(v["step_arrival_rate_rps"], request_duration_s), v["target_concurrency"]
        )
        capacity = fleet_capacity_rps(before, per_replica)
        backlog = backlog_requests(v["step_arrival_rate_rps"], capacity, reaction)
        clear = backlog_clear_s(backlog, fleet_capacity_rps(after, per_replica), v["step_arrival_rate_rps"])
        # The backlog sits in the old replicas' own queues: how each router drains it (closed forms).
        per_old = backlog_per_replica_requests(
            arrival_rate_rps, v["step_arrival_rate_rps"], before, per_replica, knee_concurrency, reaction
        )
        after = max(after, before)
        round_robin = round_robin_clear_s(per_old, per_replica, v["step_arrival_rate_rps"], after)
        least_loaded = least_loaded_clear_s(
            per_old, per_replica, knee_concurrency, v["step_arrival_rate_rps"], before, after
        )
        head = (
            f"<p>Cold start {v['cold_start_s']:.0f} s: reaction time <b>{reaction:.0f} s</b>. "
            f"{before} replicas complete {capacity:.0f} requests/s; "
        )
        if backlog == 0:
            summary.value = head + f"a step to {v['step_arrival_rate_rps']:.0f} requests/s queues nothing.</p>"
            return
        summary.value = head + (
            f"a step to {v['step_arrival_rate_rps']:.0f} requests/s queues <b>{backlog:,.0f}</b> requests, "
            f"about {per_old:,.0f} in each replica's own queue. As one shared queue, {after} replicas would "
            f"clear it in {_seconds(clear)}; behind round robin it clears in <b>{_seconds(round_robin)}</b>, "
            f"behind a least-loaded gateway in <b>{_seconds(least_loaded)}</b>.</p>"
        )

    for slider in sliders.values():
        slider.observe(update, names="value")
    update()
    return widgets.VBox([*sliders.values(), summary])


def _seconds(value: float) -> str:
    return "never" if math.isinf(value) else f"{value:,.0f} s"
