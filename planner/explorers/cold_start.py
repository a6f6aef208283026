"""Live explorer: a replica's time to ready, phase by phase, and the queue a ramp builds until then."""

from __future__ import annotations

import html

import ipywidgets as widgets

from planner.capacity.headroom import ramp_backlog_requests
from planner.dynamics.cold_start import CLUSTER_AUTOSCALER, NODE_AUTOSCALERS, ColdStartPhases
from planner.simulate.fleet import FleetSpec
from planner.workflows.cold_start import replica_cold_starts, supply_fleet

_PHASES = (
    ("provision_s", "provision (s)", 900),
    ("node_init_s", "node init (s)", 600),
    ("image_pull_s", "image pull (s)", 600),
    ("weights_load_s", "weights (s)", 900),
    ("warmup_s", "warmup (s)", 600),
)


def cold_start_explorer(
    provision_s: float = 284.0,
    node_init_s: float = 126.0,
    image_pull_s: float = 101.0,
    weights_load_s: float = 260.0,
    warmup_s: float = 195.0,
    node_autoscaler: str = CLUSTER_AUTOSCALER,
    growth_rate_rps_per_s: float = 10.0 / 600.0,
    spare_rps: float = 0.0,
) -> widgets.VBox:
    """Sliders for each phase, the node autoscaler and the growth; the summary reruns the planner.

    For each place the next replica can land (a new node, a free GPU on a node
    without the image, one with it) it gives the time to ready
    (:func:`planner.workflows.cold_start.replica_cold_starts`) and the queue a
    ramp of ``growth_rate_rps_per_s`` builds by then from ``spare_rps`` of
    spare capacity (:func:`planner.capacity.headroom.ramp_backlog_requests`).
    """
    sliders: dict[str, widgets.ValueWidget] = {
        name: widgets.FloatSlider(
            value=float(value), min=0, max=max(limit, float(value)), step=1, description=label, readout_format=".0f"
        )
        for (name, label, limit), value in zip(
            _PHASES, (provision_s, node_init_s, image_pull_s, weights_load_s, warmup_s), strict=True
        )
    }
    sliders["node_autoscaler"] = widgets.Dropdown(
        options=list(NODE_AUTOSCALERS), value=node_autoscaler, description="node autoscaler"
    )
    # The ramp in requests/s gained per minute: easier to read than per second.
    sliders["growth_rpm"] = widgets.FloatSlider(
        value=growth_rate_rps_per_s * 60.0,
        min=0,
        max=max(10.0, growth_rate_rps_per_s * 60.0),
        step=0.1,
        description="growth (req/s per min)",
        readout_format=".1f",
        style={"description_width": "initial"},
    )
    summary = widgets.HTML()

    def update(_change=None) -> None:
        v = {name: slider.value for name, slider in sliders.items()}
        phases = ColdStartPhases(**{name: v[name] for name, _, _ in _PHASES})
        fleet = supply_fleet(FleetSpec(), phases, node_autoscaler=v["node_autoscaler"], gpus_per_node=1)
        starts = replica_cold_starts(fleet)
        growth = v["growth_rpm"] / 60.0
        rows = (
            (f"a new node ({html.escape(v['node_autoscaler'])})", starts.new_node_s),
            ("a free GPU, image not on the node", starts.free_gpu_s),
            ("a free GPU, image on the node", starts.cached_image_s),
        )
        cells = "".join(
            f"<tr><td>{where}</td><td><b>{ready:,.0f} s</b></td>"
            f"<td>{ramp_backlog_requests(growth, ready, spare_rps):,.0f}</td></tr>"
            for where, ready in rows
        )
        summary.value = (
            f"<p>Growing {v['growth_rpm']:.1f} requests/s per minute from {spare_rps:.1f} requests/s of spare "
            f"capacity, the next replica is Ready after:</p>"
            f"<table><tr><th>landing on</th><th>time to ready</th><th>requests queued by then</th></tr>"
            f"{cells}</table>"
        )

    for slider in sliders.values():
        slider.observe(update, names="value")
    update()
    return widgets.VBox([*sliders.values(), summary])
