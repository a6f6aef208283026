"""Live flapping experiment for JupyterLab: pick the trigger's signal, threshold and scale-down window."""

from __future__ import annotations

import ipywidgets as widgets

from planner.explorers.lab import lab_explorer
from planner.simulate.fleet import FleetSpec
from planner.simulate.traffic import RequestTrace

__all__ = ["FLAPPING_SIGNALS", "flapping_explorer"]

FLAPPING_SIGNALS = ("waiting requests", "KV cache use (sum)", "KV cache use (avg)", "requests in flight")
"""The signals the experiment compares (keys of :data:`planner.workflows.lab.SIGNAL_QUERIES`)."""


def flapping_explorer(
    trace: RequestTrace,
    fleet: FleetSpec,
    *,
    signal: str = "waiting requests",
    threshold: float = 7.0,
    scale_down_window_s: int = 0,
    max_replicas: int = 3,
    duration_s: float | None = None,
    run_now: bool = True,
) -> widgets.VBox:
    """The lab's widgets on the flapping rig: one to ``max_replicas`` replicas, the chosen trigger.

    Parameters
    ----------
    trace : RequestTrace
    fleet : FleetSpec
    signal : str
        One of :data:`FLAPPING_SIGNALS`.
    threshold : float
        The trigger's threshold per replica, in the signal's unit.
    scale_down_window_s : int
        [s]
    max_replicas : int
    duration_s : float, optional
        [s]
    run_now : bool
        Simulate the initial setting at once.
    """
    return lab_explorer(
        trace,
        fleet,
        signal=signal,
        target=threshold,
        min_replicas=1,
        max_replicas=max_replicas,
        scale_down_window_s=scale_down_window_s,
        duration_s=duration_s,
        signals=FLAPPING_SIGNALS,
        run_now=run_now,
    )
