"""Live explorer: what an HPA on GPU utilization does at a given load."""

from __future__ import annotations

import ipywidgets as widgets

from planner.capacity.littles_law import replicas_for_target
from planner.dynamics.gpu_utilization import replica_utilization_frac, utilization_hpa_trace


def gpu_utilization_explorer(
    target_pct: float = 70.0,
    fleet_in_flight: float = 120.0,
    concurrency_target: float = 40.0,
    start_replicas: int = 4,
    max_replicas: int = 16,
    warmup_s: float = 60.0,
    duration_s: float = 600.0,
    busy_utilization_frac: float = 0.97,
) -> widgets.VBox:
    """Sliders for the utilization target and the load; the summary reruns the HPA port."""
    sliders = {
        "target_pct": widgets.FloatSlider(value=target_pct, min=10, max=100, step=1, description="target %"),
        "fleet_in_flight": widgets.FloatSlider(value=fleet_in_flight, min=0, max=1000, step=5, description="in flight"),
        "busy_pct": widgets.FloatSlider(
            value=100 * busy_utilization_frac, min=50, max=100, step=0.5, description="busy util %"
        ),
        "warmup_s": widgets.FloatSlider(value=warmup_s, min=0, max=600, step=15, description="warmup (s)"),
    }
    summary = widgets.HTML()

    def update(_change=None) -> None:
        v = {name: slider.value for name, slider in sliders.items()}
        trace = utilization_hpa_trace(
            v["target_pct"],
            v["fleet_in_flight"],
            start_replicas,
            max_replicas,
            v["warmup_s"],
            duration_s,
            busy_utilization_frac=v["busy_pct"] / 100,
        )
        final = int(trace["desired_replicas"].iloc[-1])
        per_pod = 100 * float(replica_utilization_frac(v["fleet_in_flight"] / final, v["busy_pct"] / 100))
        needed = replicas_for_target(v["fleet_in_flight"], concurrency_target) if v["fleet_in_flight"] else 0
        summary.value = (
            f"<p>Target {v['target_pct']:.0f} %, {v['fleet_in_flight']:.0f} requests in flight. "
            f"After {duration_s:.0f} s the HPA holds <b>{final}</b> replicas (maxReplicas {max_replicas}), "
            f"each reading {per_pod:.1f} % utilization.</p>"
            f"<p>An in-flight target of {concurrency_target:.0f} per replica would hold <b>{needed}</b>.</p>"
        )

    for slider in sliders.values():
        slider.observe(update, names="value")
    update()
    return widgets.VBox([*sliders.values(), summary])
