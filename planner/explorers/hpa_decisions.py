"""Live explorer for one HPA decision on a single KEDA trigger, explained step by step.

The controls describe a ScaledObject with one Prometheus trigger; every
move rebuilds it, creates the HPA KEDA would create, and runs
:func:`planner.autoscaler.explain.evaluate_decision`, so the steps shown are the ones
``planner hpa`` prints for the same inputs. The ``behavior`` is the one the
explorer was opened with (a chapter passes its manifest's); the tolerance
control sets ``behavior.scale{Up,Down}.tolerance`` (Kubernetes 1.33+) when
there is a behavior, and the cluster's ``--horizontal-pod-autoscaler-tolerance``
on the legacy path without one.

:func:`explorer_opening` maps a chapter's decision onto these controls, so
the explorer opens on the metric that decided the page's count.
"""

from __future__ import annotations

import dataclasses
import html
from dataclasses import dataclass

import ipywidgets as widgets
import pandas as pd

from planner.autoscaler.behavior import HorizontalPodAutoscalerBehavior, HPAScalingRules
from planner.autoscaler.defaults import DEFAULT_SYNC_PERIOD_S, DEFAULT_TOLERANCE
from planner.autoscaler.explain import Decision, evaluate_decision
from planner.autoscaler.horizontal import HorizontalController, tolerances_for
from planner.autoscaler.hpa_spec import AVERAGE_VALUE, PODS, VALUE
from planner.autoscaler.keda import (
    ScaledObjectSpec,
    Trigger,
    evaluate_triggers,
    hpa_for_scaled_object,
)
from planner.autoscaler.spec import Autoscaler
from planner.dynamics.hpa_ramp import step_through_warmup
from planner.errors import PlannerInputError

__all__ = [
    "ExplorerOpening",
    "explorer_autoscaler",
    "explorer_opening",
    "hpa_decisions_explorer",
    "opening_decision",
    "syncs_with_load_held",
]

METRIC_TYPES = (AVERAGE_VALUE, VALUE)
TRIGGER_NAME = "load"  # how the steps name the one trigger
TIME_VIEW_S = 360.0  # long enough to see a scale-down leave the default 300-s window
DEFAULT_BEHAVIOR = HorizontalPodAutoscalerBehavior()
"""Every behavior field at its API default; ``None`` instead selects the legacy path."""


def explorer_autoscaler(
    metric_type: str,
    target: float,
    tolerance_frac: float,
    min_replicas: int,
    max_replicas: int,
    behavior: HorizontalPodAutoscalerBehavior | None = DEFAULT_BEHAVIOR,
    activation_threshold: float = 0.0,
) -> Autoscaler:
    """The one-trigger ScaledObject the explorer evaluates, and the HPA KEDA makes of it.

    Parameters
    ----------
    metric_type : str
        ``AverageValue`` (the query returns a fleet total) or ``Value``.
    target : float
        The trigger's ``threshold``. [metric units]
    tolerance_frac : float
        Tolerance in both directions. [fraction]
    min_replicas, max_replicas : int
        ``minReplicaCount`` and ``maxReplicaCount``. [replicas]
    behavior : HorizontalPodAutoscalerBehavior or None, optional
        ``advanced.horizontalPodAutoscalerConfig.behavior``; its tolerances are
        replaced by ``tolerance_frac``. ``None``: no behavior (the legacy path,
        where the tolerance is the cluster flag, passed to the decision).
    activation_threshold : float, optional
        The trigger's ``activationThreshold``: at 0 replicas KEDA activates
        only above it. [metric units]

    Raises
    ------
    PlannerInputError
        An unknown metric type, a target <= 0, a tolerance outside [0, 1), or
        bounds KEDA's admission check rejects.
    """
    if metric_type not in METRIC_TYPES:
        raise PlannerInputError(
            f"metric type must be one of {', '.join(METRIC_TYPES)} (one External trigger), got {metric_type!r}"
        )
    if not target > 0:
        raise PlannerInputError(f"target must be > 0, got {target!r}")
    if not 0 <= tolerance_frac < 1:
        raise PlannerInputError(f"tolerance must be in [0, 1), got {tolerance_frac!r}")
    if behavior is not None:
        tolerance = float(tolerance_frac)
        behavior = HorizontalPodAutoscalerBehavior(
            scale_up=dataclasses.replace(behavior.scale_up or HPAScalingRules(), tolerance=tolerance),
            scale_down=dataclasses.replace(behavior.scale_down or HPAScalingRules(), tolerance=tolerance),
        )
    so = ScaledObjectSpec(
        "explorer",
        (
            Trigger(
                0,
                "prometheus",
                float(target),
                name=TRIGGER_NAME,
                metric_type=metric_type,
                activation_threshold=float(activation_threshold),
            ),
        ),
        min_replica_count=int(min_replicas),
        max_replica_count=int(max_replicas),
        behavior=behavior,
    )
    return Autoscaler("ScaledObject", so.name, "explorer", hpa_for_scaled_object(so), so)


def syncs_with_load_held(
    autoscaler: Autoscaler,
    start_replicas: int,
    metric_value: float,
    duration_s: float = TIME_VIEW_S,
    tolerance_frac: float = DEFAULT_TOLERANCE,
) -> pd.DataFrame:
    """``spec.replicas`` at each 15-s sync while the load stays what it is now.

    The fleet starts with ``start_replicas`` Ready; a pod the HPA adds counts
    as Ready by the next sync, so only the behavior (stabilization and rate
    policies) spaces the steps. An ``AverageValue`` trigger keeps returning
    the same fleet total; a ``Value`` trigger on an average returns the
    same total spread over the Ready pods.

    Returns
    -------
    pandas.DataFrame
        The rows of :func:`planner.dynamics.hpa_ramp.step_through_warmup`.
    """
    so = autoscaler.scaled_object
    if so is None:
        raise ValueError("syncs_with_load_held needs a ScaledObject: it holds its first trigger's value")
    trigger = so.triggers[0]
    total = metric_value * start_replicas if trigger.metric_type == VALUE else metric_value

    def readings_for(ready: int, current: int):
        value = total / ready if trigger.metric_type == VALUE else total
        evaluation = evaluate_triggers(
            so, autoscaler.hpa, {trigger.index: value}, current_replicas=current, ready_replicas=ready
        )
        return list(evaluation.readings)

    controller = HorizontalController(autoscaler.hpa, tolerance=tolerance_frac)
    return step_through_warmup(
        controller,
        start_replicas,
        readings_for,
        warmup_s=0.0,
        duration_s=duration_s,
        sync_period_s=DEFAULT_SYNC_PERIOD_S,
    )


@dataclass(frozen=True)
class ExplorerOpening:
    """Where the explorer opens for a chapter's decision: the keyword arguments of
    :func:`hpa_decisions_explorer`, and whether its first state is that decision exactly.

    Attributes
    ----------
    metric_key : str
        The trigger or metric the explorer stands for.
    exact : bool
        ``False`` when one External trigger can only approximate it; ``note`` says why.
    """

    metric_key: str
    current_replicas: int
    ready_replicas: int
    metric_type: str
    target: float
    metric_value: float
    tolerance_frac: float
    min_replicas: int
    max_replicas: int
    behavior: HorizontalPodAutoscalerBehavior | None
    activation_threshold: float = 0.0
    note: str = ""
    exact: bool = True

    def kwargs(self) -> dict:
        """The keyword arguments for :func:`hpa_decisions_explorer`."""
        fields = {f.name: getattr(self, f.name) for f in dataclasses.fields(self)}
        del fields["metric_key"], fields["exact"]
        return fields


def explorer_opening(autoscaler: Autoscaler, decision: Decision) -> ExplorerOpening:
    """Open the explorer on the metric that decided ``decision`` (see :attr:`Decision.explained_metric`).

    The explorer models one External trigger, which reproduces an External
    or Object metric, a KEDA trigger and a ``scalingModifiers`` composite
    exactly, and a Pods metric with an ``AverageValue`` target exactly when
    every pod is Ready (it becomes the fleet total). Its decision equals the
    chapter's whenever the deciding metric alone sets the count, which is
    how the HPA combines several (it takes the largest proposal).
    """
    hpa = autoscaler.hpa
    line = decision.explained_metric
    notes = []
    exact = True
    value = line.value_to_hpa if line.value_to_hpa is not None else line.value
    if value is None:
        value = 0.0
        notes.append(f"Metric {line.key} returned no result; the explorer opens at 0.")
        exact = False
    spec = hpa.metrics[line.index] if autoscaler.scaled_object is None else None
    if spec is not None and spec.type == PODS and line.target_type == AVERAGE_VALUE:
        value = value * decision.ready_replicas  # the per-pod average as a fleet total
        if decision.ready_replicas != decision.current_replicas:
            exact = False
            notes.append("A Pods metric with pods still warming is approximated by its Ready pods' total.")
    elif line.target_type not in METRIC_TYPES:
        exact = False  # the explorer says so itself when it opens
    if len([m for m in decision.metrics if m.proposal is not None]) > 1:
        notes.append(f"It opens on {line.key}, the metric with the largest proposal; the others propose less.")
    tolerances = tolerances_for(hpa.behavior)
    up_frac, down_frac = tolerances.scale_up, tolerances.scale_down
    if up_frac != down_frac:
        exact = False
        notes.append(f"The manifest's tolerances differ by direction; the control sets both to {up_frac:g}.")
    so = autoscaler.scaled_object
    min_replicas = so.effective_min_replica_count if so else hpa.effective_min_replicas
    activation = 0.0
    modifiers = so.scaling_modifiers if so is not None and so.is_using_modifiers else None
    if modifiers is not None:
        activation = float(modifiers.activation_target or 0.0)
    elif so is not None and line.index < len(so.triggers):
        activation = so.triggers[line.index].activation_threshold
    if decision.current_replicas == 0 and so is None:
        exact = False
        notes.append(
            "A plain HPA at 0 replicas acts only if it took the target there itself (Kubernetes 1.37's "
            "ScaledToZero condition); the explorer models KEDA, which can scale from 0."
        )
    elif decision.current_replicas == 0 and so is not None and len(so.triggers) > 1 and not so.is_using_modifiers:
        exact = False
        notes.append("At 0 replicas KEDA activates on any trigger; the explorer has only this one.")
    return ExplorerOpening(
        metric_key=line.key,
        current_replicas=decision.current_replicas,
        ready_replicas=decision.ready_replicas,
        metric_type=line.target_type,
        target=float(line.target),
        metric_value=float(value),
        tolerance_frac=float(up_frac),
        min_replicas=int(min_replicas),
        max_replicas=int(hpa.max_replicas),
        behavior=hpa.behavior,
        activation_threshold=float(activation),
        note=" ".join(notes),
        exact=exact,
    )


def _decide(v: dict, behavior, activation_threshold: float = 0.0) -> tuple[Autoscaler, Decision]:
    # The explorer's one code path from control values to a decision.
    autoscaler = explorer_autoscaler(
        v["metric_type"],
        v["target"],
        v["tolerance_frac"],
        v["min_replicas"],
        v["max_replicas"],
        behavior,
        activation_threshold,
    )
    decision = evaluate_decision(
        autoscaler,
        v["current_replicas"],
        {TRIGGER_NAME: v["metric_value"]},
        ready_replicas=v["ready_replicas"],
        tolerance_frac=v["tolerance_frac"],
    )
    return autoscaler, decision


def opening_decision(opening: ExplorerOpening) -> Decision:
    """The decision the explorer shows first when opened with ``opening.kwargs()``."""
    v = opening.kwargs()
    if v["metric_type"] not in METRIC_TYPES:
        v["metric_type"] = AVERAGE_VALUE  # as the explorer opens for a type it does not model
    return _decide(v, v.pop("behavior"), v.pop("activation_threshold"))[1]


def _steps_html(decision: Decision) -> str:
    # The same step texts `planner hpa` prints, numbered the same way.
    items = "".join(f"<li>{html.escape(step)}</li>" for step in decision.steps)
    return f"<ol>{items}</ol>"


def _time_view_html(trace: pd.DataFrame, start_replicas: int, metric_type: str) -> str:
    counts = [start_replicas]
    changes = []
    for row in trace.itertuples():
        if row.desired_replicas != counts[-1]:
            counts.append(int(row.desired_replicas))
            changes.append(f"{row.desired_replicas} at {row.t_s:g} s")
    held = "the fleet total" if metric_type == AVERAGE_VALUE else "the load (the same total over more Ready pods)"
    path = " → ".join(str(c) for c in counts)
    when = f" ({', '.join(changes)})" if changes else " (no change)"
    return (
        f"<p><b>Over successive {DEFAULT_SYNC_PERIOD_S:g} s syncs</b>, with {held} held and new pods "
        f"Ready by the next sync, starting from {start_replicas} Ready: {path}{when}, "
        f"over {trace['t_s'].iloc[-1]:g} s.</p>"
    )


def hpa_decisions_explorer(
    current_replicas: int = 4,
    ready_replicas: int | None = None,
    metric_type: str = AVERAGE_VALUE,
    target: float = 2.0,
    metric_value: float = 20.0,
    tolerance_frac: float = DEFAULT_TOLERANCE,
    min_replicas: int = 1,
    max_replicas: int = 40,
    behavior: HorizontalPodAutoscalerBehavior | None = DEFAULT_BEHAVIOR,
    activation_threshold: float = 0.0,
    note: str = "",
) -> widgets.VBox:
    """Controls for one trigger and the replica counts, with the decision explained live.

    Parameters
    ----------
    current_replicas : int
        ``spec.replicas`` of the Deployment the controls open at. [replicas]
    ready_replicas : int, optional
        Of which Ready; defaults to all. [replicas]
    metric_type : str
        ``AverageValue`` or ``Value``.
    target : float
        The trigger's threshold. [metric units]
    metric_value : float
        What the trigger's query returns: the fleet total for an
        ``AverageValue`` trigger on ``sum(...)``. [metric units]
    tolerance_frac : float
        Tolerance in both directions. [fraction]
    min_replicas, max_replicas : int
        ``minReplicaCount`` and ``maxReplicaCount``. [replicas]
    behavior : HorizontalPodAutoscalerBehavior or None, optional
        The scaling behavior; ``None`` for the legacy path (no behavior).
    activation_threshold : float, optional
        The trigger's ``activationThreshold`` (it matters at 0 replicas). [metric units]
    note : str, optional
        Shown above the explanation (how the opening relates to the page).

    Returns
    -------
    ipywidgets.VBox
        The controls in the order of the parameters, then the explanation.
    """
    opening_note = f"<p><i>{html.escape(note)}</i></p>" if note else ""
    if metric_type not in METRIC_TYPES:
        # A chapter run on a manifest with, say, a CPU trigger still gets a working explorer, and says so.
        opening_note += (
            f"<p><i>The explorer models one External trigger with an AverageValue or Value target; "
            f"it opened at {AVERAGE_VALUE} instead of {html.escape(str(metric_type))}.</i></p>"
        )
        metric_type = AVERAGE_VALUE
    ready_replicas = current_replicas if ready_replicas is None else ready_replicas
    style = {"description_width": "14em"}
    layout = widgets.Layout(width="36em")
    value_max = max(100.0, 4.0 * metric_value, 20.0 * target)
    controls = {
        "current_replicas": widgets.IntSlider(
            value=current_replicas,
            min=0,
            max=max(64, 2 * current_replicas),
            description="current replicas",
            style=style,
            layout=layout,
        ),
        "ready_replicas": widgets.IntSlider(
            value=ready_replicas, min=0, max=current_replicas, description="of which Ready", style=style, layout=layout
        ),
        "metric_type": widgets.ToggleButtons(
            options=list(METRIC_TYPES), value=metric_type, description="metricType", style=style
        ),
        "target": widgets.FloatSlider(
            value=target,
            min=min(0.01, target),
            max=max(10.0, 4.0 * target),
            step=0.01,
            description="target (threshold)",
            style=style,
            layout=layout,
        ),
        "metric_value": widgets.FloatSlider(
            value=metric_value, min=0.0, max=value_max, step=0.01, description="", style=style, layout=layout
        ),
        "tolerance_frac": widgets.FloatSlider(
            value=tolerance_frac,
            min=0.0,
            max=max(0.5, tolerance_frac),
            step=0.01,
            readout_format=".0%",
            description="tolerance",
            style=style,
            layout=layout,
        ),
        "min_replicas": widgets.IntSlider(
            value=min_replicas,
            min=0,
            max=max(64, min_replicas),
            description="minReplicaCount",
            style=style,
            layout=layout,
        ),
        "max_replicas": widgets.IntSlider(
            value=max_replicas,
            min=1,
            max=max(200, max_replicas),
            description="maxReplicaCount",
            style=style,
            layout=layout,
        ),
    }
    explanation = widgets.HTML()

    def update(_change=None) -> None:
        v = {name: control.value for name, control in controls.items()}
        controls["ready_replicas"].max = v["current_replicas"]  # clamps the Ready count with it
        v["ready_replicas"] = controls["ready_replicas"].value
        controls["metric_value"].description = (
            "query result: fleet total" if v["metric_type"] == AVERAGE_VALUE else "query result: value"
        )
        try:
            autoscaler, decision = _decide(v, behavior, activation_threshold)
        except PlannerInputError as error:
            explanation.value = f"<p><b>Not a valid autoscaler:</b> {html.escape(str(error))}.</p>"
            return
        proposal = "" if decision.max_proposal is None else f" (largest proposal {decision.max_proposal})"
        text = f"<p>Desired at this sync: <b>{decision.desired_replicas}</b> replicas{proposal}.</p>" + _steps_html(
            decision
        )
        if v["current_replicas"] == 0:
            text += "<p>The HPA is idle at 0 replicas; KEDA's activation decides the first replica.</p>"
        else:
            trace = syncs_with_load_held(
                autoscaler, v["current_replicas"], v["metric_value"], tolerance_frac=v["tolerance_frac"]
            )
            text += _time_view_html(trace, v["current_replicas"], v["metric_type"])
            if v["ready_replicas"] < v["current_replicas"]:
                text += "<p>(The time view starts with every current replica Ready.)</p>"
        explanation.value = text

    for control in controls.values():
        control.observe(update, names="value")
    update()
    if opening_note:
        explanation.value = opening_note + explanation.value
    return widgets.VBox([*controls.values(), explanation])
