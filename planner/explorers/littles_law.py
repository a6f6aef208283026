"""Live explorer for the per-replica target, the backlog a warmup leaves and how each router drains it."""

from __future__ import annotations

import math

import ipywidgets as widgets

from planner.capacity.headroom import (
    backlog_clear_s,
    backlog_requests,
    fleet_capacity_rps,
    step_headroom_frac,
)
from planner.capacity.littles_law import (
    drain_rate_rps,
    in_flight_requests,
    per_replica_load,
    replicas_for_target,
)
from planner.dynamics.replica_queues import (
    backlog_per_replica_requests,
    least_loaded_clear_s,
    round_robin_clear_s,
)


def littles_law_explorer(
    knee_concurrency: float = 48.0,
    request_duration_s: float = 12.0,
    target_concurrency: float = 40.0,
    arrival_rate_rps: float = 10.0,
    step_arrival_rate_rps: float = 16.0,
    warmup_s: float = 240.0,
) -> widgets.VBox:
    """Sliders for the chapter's inputs and a live summary computed by the planner."""
    sliders = {
        "knee_concurrency": widgets.FloatSlider(value=knee_concurrency, min=4, max=256, step=1, description="knee K"),
        "request_duration_s": widgets.FloatSlider(
            value=request_duration_s, min=1, max=120, step=0.5, description="W (s)"
        ),
        "target_concurrency": widgets.FloatSlider(
            value=target_concurrency, min=1, max=256, step=1, description="target T"
        ),
        "arrival_rate_rps": widgets.FloatSlider(
            value=arrival_rate_rps, min=0, max=200, step=0.5, description="λ (req/s)"
        ),
        "step_arrival_rate_rps": widgets.FloatSlider(
            value=step_arrival_rate_rps, min=0, max=400, step=0.5, description="after step"
        ),
        "warmup_s": widgets.FloatSlider(value=warmup_s, min=0, max=900, step=10, description="warmup (s)"),
    }
    summary = widgets.HTML()

    def update(_change=None) -> None:
        v = {name: slider.value for name, slider in sliders.items()}
        before = in_flight_requests(v["arrival_rate_rps"], v["request_duration_s"])
        replicas = replicas_for_target(before, v["target_concurrency"])
        after = in_flight_requests(v["step_arrival_rate_rps"], v["request_duration_s"])
        load_after = per_replica_load(after, replicas)
        mu = drain_rate_rps(v["knee_concurrency"], v["request_duration_s"])
        capacity = fleet_capacity_rps(replicas, mu)
        backlog = backlog_requests(v["step_arrival_rate_rps"], capacity, v["warmup_s"])
        headroom = step_headroom_frac(v["knee_concurrency"], v["target_concurrency"])
        verdict = "under" if load_after <= v["knee_concurrency"] else "<b>over</b>"
        text = (
            f"<p>{before:.0f} requests in flight → <b>{replicas}</b> replicas at T = "
            f"{v['target_concurrency']:.0f} (headroom for a {headroom:.0%} step).</p>"
            f"<p>After the step, before any new replica is Ready: {load_after:.1f} per replica, "
            f"{verdict} the knee of {v['knee_concurrency']:.0f}; backlog after the warmup "
            f"<b>{backlog:,.0f}</b> requests.</p>"
        )
        if backlog > 0:
            # It waits in the old replicas' own queues; the new ones take only new arrivals.
            replicas_after = max(replicas_for_target(after, v["target_concurrency"]), replicas)
            per_old = backlog_per_replica_requests(
                v["arrival_rate_rps"], v["step_arrival_rate_rps"], replicas, mu, v["knee_concurrency"], v["warmup_s"]
            )
            times = {
                "one shared queue": backlog_clear_s(
                    backlog, fleet_capacity_rps(replicas_after, mu), v["step_arrival_rate_rps"]
                ),
                "round robin": round_robin_clear_s(per_old, mu, v["step_arrival_rate_rps"], replicas_after),
                "least-loaded": least_loaded_clear_s(
                    per_old, mu, v["knee_concurrency"], v["step_arrival_rate_rps"], replicas, replicas_after
                ),
            }
            text += (
                f"<p>About {per_old:,.0f} wait in each old replica's own queue. Time to clear after "
                f"{replicas_after} replicas are Ready: "
                + ", ".join(f"{name} {'never' if math.isinf(t) else f'{t:,.0f} s'}" for name, t in times.items())
                + ".</p>"
            )
        summary.value = text

    for slider in sliders.values():
        slider.observe(update, names="value")
    update()
    return widgets.VBox([*sliders.values(), summary])
