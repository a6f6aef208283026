"""Live lab for JupyterLab: choose a signal, its target and the floor, and re-simulate the same traffic."""

from __future__ import annotations

import tempfile
from pathlib import Path

import ipywidgets as widgets
from IPython.display import display

from planner.autoscaler.defaults import DEFAULT_DOWNSCALE_STABILIZATION_WINDOW_S
from planner.charts.simulation import fleet_timeline_chart
from planner.errors import PlannerInputError
from planner.markdown import plural
from planner.readers.manifest import load_autoscaler
from planner.simulate import simulate
from planner.simulate.fleet import FleetSpec
from planner.simulate.traffic import RequestTrace
from planner.workflows.lab import SIGNAL_QUERIES, scaled_object_yaml

__all__ = ["lab_explorer", "simulate_setting"]


def simulate_setting(
    trace: RequestTrace,
    fleet: FleetSpec,
    signal: str,
    target: float,
    *,
    min_replicas: int,
    max_replicas: int,
    scale_down_window_s: int,
    duration_s: float | None = None,
):
    """Write the chosen ScaledObject to a scratch file, read it as any manifest is read, and simulate it."""
    text = scaled_object_yaml(
        signal, target, min_replicas=min_replicas, max_replicas=max_replicas, scale_down_window_s=scale_down_window_s
    )
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "scaledobject.yaml"
        path.write_text(text)
        autoscaler = load_autoscaler(path)
    return simulate(trace, autoscaler, fleet, duration_s=duration_s)


def lab_explorer(
    trace: RequestTrace,
    fleet: FleetSpec,
    *,
    signal: str = "requests in flight",
    target: float = 40.0,
    min_replicas: int = 3,
    max_replicas: int = 16,
    scale_down_window_s: int = int(DEFAULT_DOWNSCALE_STABILIZATION_WINDOW_S),
    duration_s: float | None = None,
    signals: tuple[str, ...] | None = None,
    run_now: bool = True,
) -> widgets.VBox:
    """Widgets for one ScaledObject trigger that replay ``trace`` through it whenever one changes.

    Each change re-simulates with the ``fast`` engine (the same outcome as the
    reference engine, in well under a second for the chapters' traces); the
    Simulate button runs the current setting again.

    Parameters
    ----------
    trace : RequestTrace
    fleet : FleetSpec
    signal : str
        Initial choice among :data:`planner.workflows.lab.SIGNAL_QUERIES` (or ``signals``).
    target : float
        Initial threshold per replica, in the signal's unit.
    min_replicas, max_replicas : int
    scale_down_window_s : int
        [s]
    duration_s : float, optional
        Simulated time. [s]
    signals : tuple of str, optional
        Restrict the choice to these signals.
    run_now : bool
        Simulate the initial setting at once (a static page leaves it to the first change or the button).
    """
    options = list(signals) if signals is not None else list(SIGNAL_QUERIES)
    controls = {
        "signal": widgets.Dropdown(options=options, value=signal, description="signal"),
        "target": widgets.BoundedFloatText(value=target, min=0.01, max=10_000.0, step=0.1, description="target"),
        "min_replicas": widgets.IntSlider(
            value=min_replicas, min=0, max=32, description="min", continuous_update=False
        ),
        "max_replicas": widgets.IntSlider(
            value=max_replicas, min=1, max=64, description="max", continuous_update=False
        ),
        "scale_down_window_s": widgets.IntSlider(
            value=scale_down_window_s, min=0, max=900, step=15, description="down window (s)", continuous_update=False
        ),
    }
    button = widgets.Button(description="Simulate", button_style="primary")
    summary = widgets.HTML()
    chart = widgets.Output()

    def run(_click=None) -> None:
        v = {name: control.value for name, control in controls.items()}
        summary.value = "<p>simulating...</p>"
        try:
            outcome = simulate_setting(
                trace,
                fleet,
                v["signal"],
                v["target"],
                min_replicas=v["min_replicas"],
                max_replicas=v["max_replicas"],
                scale_down_window_s=v["scale_down_window_s"],
                duration_s=duration_s,
            )
        except PlannerInputError as error:
            summary.value = f"<p><b>Not simulated:</b> {error}</p>"
            return
        summary.value = (
            f"<p>SLO attainment <b>{outcome.slo_attainment_frac:.1%}</b>, cost <b>${outcome.cost_usd:,.2f}</b> "
            f"({outcome.gpu_hours:.2f} GPU-h), peak {plural(outcome.peak_replicas, 'replica')}, "
            f"{plural(outcome.scale_events, 'scale event')}, {plural(outcome.flap_cycles, 'flap cycle')}, "
            f"peak queue {plural(outcome.peak_waiting, 'request')}.</p>"
        )
        chart.clear_output()
        with chart:
            display(fleet_timeline_chart(outcome.timeseries, title=f"{v['signal']} at {v['target']:g}"))

    button.on_click(run)
    for control in controls.values():
        control.observe(run, names="value")
    if run_now:
        run()
    return widgets.VBox([*controls.values(), button, summary, chart])
