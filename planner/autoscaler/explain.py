"""The ``explain`` module evaluates one autoscaler decision from metric values and explains it.

It is what ``planner hpa`` prints: for an HPA or a ScaledObject read by
:mod:`planner.readers.manifest`, the current and Ready replica counts, and
one value per metric or trigger, it runs KEDA's trigger handling (for a
ScaledObject) and one reconcile of a freshly started
:class:`planner.autoscaler.horizontal.HorizontalController`, then lists each step.

Two assumptions make one evaluation well defined, and both are stated in
the output:

* The controller's recommendation history holds only the current count (as
  right after it starts, or after a steady spell at this count), so a
  scale-down is held by the stabilization window; the count it reaches once
  the window has passed is reported too.
* Pods that are not Ready report no sample of a per-pod metric (a server
  still loading its model serves no ``/metrics``).

What a value means, per metric type: External and Object metrics take the
value the query returns (for an ``AverageValue`` trigger on ``sum(...)``,
the fleet total); a Pods metric takes the value each Ready pod reports; a
Resource metric with a Utilization target takes the average utilization in
percent of the request, with an AverageValue target the average usage per pod.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field

from planner.autoscaler.behavior import set_defaults_horizontal_pod_autoscaler_behavior
from planner.autoscaler.defaults import DEFAULT_TOLERANCE
from planner.autoscaler.horizontal import (
    ExternalReading,
    HorizontalController,
    ObjectReading,
    PodMetricsReading,
    ReconcileResult,
)
from planner.autoscaler.hpa_spec import (
    AVERAGE_VALUE,
    CONTAINER_RESOURCE,
    EXTERNAL,
    OBJECT,
    PODS,
    RESOURCE,
    UTILIZATION,
)
from planner.autoscaler.keda import (
    COMPOSITE_METRIC_NAME,
    TriggersEvaluation,
    evaluate_triggers,
    request_scale,
)
from planner.autoscaler.quantity import parse_quantity_milli
from planner.autoscaler.replica_calculator import Pod, PodMetric, ready_pods
from planner.autoscaler.spec import Autoscaler
from planner.errors import PlannerInputError

__all__ = ["Decision", "MetricLine", "behavior_text", "evaluate_decision", "metric_values_by_key"]

CLI_VALUE_HINT = "pass --metric NAME=VALUE"
"""How the CLI asks for a missing value; a notebook names its own parameter instead."""

_REQUEST_MILLI = 1000  # a nominal per-pod request for utilization inputs


@dataclass(frozen=True)
class MetricLine:
    """One trigger or metric in the explanation."""

    key: str
    index: int
    kind: str
    target_type: str
    target: float
    value: float | None
    value_to_hpa: float | None = None
    usage_ratio: float | None = None
    within_tolerance: bool | None = None
    proposal: int | None = None
    active: bool | None = None
    error: str | None = None
    query: str = ""


@dataclass(frozen=True)
class Decision:
    """One decision and how it was reached."""

    kind: str
    name: str
    source: str
    current_replicas: int
    ready_replicas: int
    desired_replicas: int
    metrics: tuple[MetricLine, ...]
    max_proposal: int | None
    stabilized_replicas: int | None
    after_window_replicas: int | None
    result: ReconcileResult | None
    keda_active: bool | None
    keda_reason: str | None
    steps: tuple[str, ...]
    notes: tuple[str, ...] = field(default=())

    @property
    def explained_metric(self) -> MetricLine:
        """The line that decided the count: the largest proposal (the composite one under
        ``scalingModifiers``), else the first line that has a value."""
        proposed = [(m.proposal, m) for m in self.metrics if m.proposal is not None]
        if proposed:
            return max(proposed, key=lambda pair: pair[0])[1]  # max keeps the first of equals
        return next((m for m in self.metrics if m.value is not None), self.metrics[0])

    def outcome_text(self) -> str:
        """One sentence: what the deciding metric proposes and what the controller sets."""
        replicas = f"{self.desired_replicas} replica{'' if self.desired_replicas == 1 else 's'}"
        if self.max_proposal is None:
            return f"No metric is evaluated at this sync ({self._why_not_evaluated()}); the count is set to {replicas}."
        line = self.explained_metric
        if line.kind == "scalingModifiers.formula":
            who = "The scalingModifiers formula's composite metric"
        else:
            who = f"{'Trigger' if self.kind == 'ScaledObject' else 'Metric'} {line.key}"
        text = (
            f"{who} has the ratio {line.usage_ratio:.3g}, so it proposes {line.proposal} "
            f"replica{'' if line.proposal == 1 else 's'}"
        )
        if sum(m.proposal is not None for m in self.metrics) > 1:
            text += ", the largest proposal"
        text += f"; after the stabilization window and the rate limits the controller sets {replicas} at this sync."
        if self.after_window_replicas is not None and self.after_window_replicas != self.desired_replicas:
            text += f" Once the window has passed, the same values take it to {self.after_window_replicas}."
        return text

    def proposal_lines(self) -> tuple[str, ...]:
        """One line per trigger or metric with its value and proposal, then the controller's choice."""
        width = max(len(m.key) for m in self.metrics)
        lines = []
        for m in self.metrics:
            value = "no result" if m.value is None else f"{m.value:g}"
            if m.proposal is not None:
                said = f"proposes {m.proposal}"
            elif m.kind != "scalingModifiers.formula" and m.target_type == "(formula input)":
                said = "feeds the formula"
            elif m.error is not None:
                said = f"invalid ({m.error})"
            else:
                said = "not evaluated"
            lines.append(f"{m.key:>{width}}: value {value} -> {said}")
        if self.max_proposal is None:
            lines.append(f"No proposal at this sync ({self._why_not_evaluated()}); sets {self.desired_replicas}.")
        else:
            lines.append(f"The HPA takes the largest: {self.max_proposal}; sets {self.desired_replicas} this sync.")
        return tuple(lines)

    def _why_not_evaluated(self) -> str:
        if self.result is None:
            return f"at 0 replicas the HPA is idle and KEDA decides: {self.keda_reason}"
        reason = self.result.rescale_reason
        if "below Spec.MinReplicas" in reason:
            return f"{self.current_replicas} is below the minimum, so the HPA sets the minimum without reading metrics"
        if "above Spec.MaxReplicas" in reason:
            return f"{self.current_replicas} is above the maximum, so the HPA sets the maximum without reading metrics"
        return reason or "no metric was evaluated"

    def to_dict(self) -> dict:
        """A JSON-ready summary (what ``planner hpa --json`` prints)."""
        result = self.result

        def condition(c):
            return None if c is None else {"status": c.status, "reason": c.reason, "message": c.message}

        return {
            "kind": self.kind,
            "name": self.name,
            "source": self.source,
            "current_replicas": self.current_replicas,
            "ready_replicas": self.ready_replicas,
            "desired_replicas": self.desired_replicas,
            "max_proposal": self.max_proposal,
            "stabilized_replicas": self.stabilized_replicas,
            "after_window_replicas": self.after_window_replicas,
            "triggers": [
                {
                    "name": m.key,
                    "index": m.index,
                    "kind": m.kind,
                    "target_type": m.target_type,
                    "target": m.target,
                    "value": m.value,
                    "value_to_hpa": m.value_to_hpa,
                    "usage_ratio": m.usage_ratio,
                    "within_tolerance": m.within_tolerance,
                    "proposal": m.proposal,
                    "active": m.active,
                    "error": m.error,
                    "query": m.query,
                }
                for m in self.metrics
            ],
            "conditions": {
                "AbleToScale": condition(result.able_to_scale if result else None),
                "ScalingActive": condition(result.scaling_active if result else None),
                "ScalingLimited": condition(result.scaling_limited if result else None),
            },
            "keda": None if self.keda_active is None else {"active": self.keda_active, "reason": self.keda_reason},
            "steps": list(self.steps),
            "notes": list(self.notes),
        }


def evaluate_decision(
    autoscaler: Autoscaler,
    current_replicas: int,
    values: Mapping[str, str | float | None],
    *,
    ready_replicas: int | None = None,
    value_hint: str = CLI_VALUE_HINT,
    tolerance_frac: float = DEFAULT_TOLERANCE,
) -> Decision:
    """Evaluate one decision for ``autoscaler``.

    Parameters
    ----------
    autoscaler : Autoscaler
        From :func:`planner.readers.manifest.load_autoscaler`.
    current_replicas : int
        ``spec.replicas`` of the target now. [replicas]
    values : mapping of str to str, float or None
        Value per trigger/metric ``name`` or 0-based index; ``None`` (or an
        empty string) for a query that returned no result.
    ready_replicas : int, optional
        Ready pods; defaults to ``current_replicas``. [replicas]
    value_hint : str, optional
        How the caller's user supplies a missing value, appended to that error.
    tolerance_frac : float, optional
        The cluster's ``--horizontal-pod-autoscaler-tolerance``; a
        ``behavior.scale{Up,Down}.tolerance`` in the manifest takes precedence. [fraction]

    Raises
    ------
    PlannerInputError
        Unknown or missing names, bad numbers, impossible replica counts.
    """
    if isinstance(current_replicas, bool) or not isinstance(current_replicas, int) or current_replicas < 0:
        raise PlannerInputError(f"current replicas must be an integer >= 0, got {current_replicas!r}")
    ready = current_replicas if ready_replicas is None else ready_replicas
    if isinstance(ready, bool) or not isinstance(ready, int) or not 0 <= ready <= current_replicas:
        raise PlannerInputError(
            f"ready replicas must be an integer between 0 and the current replicas ({current_replicas}), got {ready!r}"
        )
    if autoscaler.scaled_object is not None:
        return _scaled_object_decision(autoscaler, current_replicas, ready, values, value_hint, tolerance_frac)
    return _hpa_decision(autoscaler, current_replicas, ready, values, value_hint, tolerance_frac)


def metric_values_by_key(values, where: str = "metric_values") -> dict[str, object]:
    """Values per trigger from a mapping (name or 0-based index to value) or a list in trigger order.

    Parameters
    ----------
    values : mapping, sequence or str
        ``{"0": 20}``, ``{0: 20, "kv": 0.9}``, ``[20, 0.9]`` or ``"0=20,kv=0.9"``;
        ``None`` (or an empty ``VALUE``) for a query that returned no result.
    where : str, optional
        The parameter's name, for the error message.

    Returns
    -------
    dict of str to object
        Keys as :func:`evaluate_decision` takes them.

    Raises
    ------
    PlannerInputError
        Anything else, or a key that is neither a name nor an index.
    """
    if isinstance(values, Mapping):
        out = {}
        for key, value in values.items():
            if isinstance(key, bool) or not isinstance(key, str | int) or (isinstance(key, int) and key < 0):
                raise PlannerInputError(f"{where}: keys are trigger names or 0-based indices, got {key!r}")
            out[str(key)] = value
        return out
    if isinstance(values, list | tuple):
        return {str(i): value for i, value in enumerate(values)}
    if isinstance(values, str) and "=" in values:  # "0=6,1=9", as the CLI's --metric takes them
        out = {}
        for item in values.replace(",", " ").split():
            key, sep, value = item.partition("=")
            if not sep or not key:
                raise PlannerInputError(f"{where}: expected NAME=VALUE items, got {item!r}")
            if key in out:
                raise PlannerInputError(f"{where}: {key} was given twice")
            out[key] = value
        return out
    raise PlannerInputError(
        f"{where} must map trigger names or 0-based indices to values (e.g. {{'0': 20}}) "
        f"or list one value per trigger, got {values!r}"
    )


def _resolve(
    keys: list[str], values: Mapping[str, str | float | None], what: str, value_hint: str = CLI_VALUE_HINT
) -> dict[int, object]:
    """Map user keys (names or indices) onto metric indices; every metric needs one value."""
    resolved: dict[int, object] = {}
    for key, value in values.items():
        matches = [i for i, name in enumerate(keys) if name and name == key]
        if not matches and key.isdigit() and int(key) < len(keys):
            matches = [int(key)]
        if not matches:
            listing = ", ".join(f"{i}={name}" if name else str(i) for i, name in enumerate(keys))
            raise PlannerInputError(f"no {what} named {key!r} (known: {listing}); {value_hint}")
        if len(matches) > 1:
            raise PlannerInputError(f"{key!r} names several {what}s; use its index instead")
        if matches[0] in resolved:
            raise PlannerInputError(f"{what} {key!r} was given twice")
        resolved[matches[0]] = value
    missing = [f"{i} ({name})" if name else str(i) for i, name in enumerate(keys) if i not in resolved]
    if missing:
        raise PlannerInputError(f"no value given for {what} {', '.join(missing)}; {value_hint}")
    return resolved


def _as_float(key: str, value) -> float | None:
    if value is None or (isinstance(value, str) and value.strip().lower() in ("", "null", "none", "nan")):
        return None
    try:
        number = float(value)
    except (TypeError, ValueError):
        raise PlannerInputError(f"value for {key!r} must be a number (or empty for no result), got {value!r}") from None
    if not math.isfinite(number) or number < 0:
        raise PlannerInputError(f"value for {key!r} must be a finite number >= 0, got {value!r}")
    return number


def _reading_for(spec, value, pods: tuple[Pod, ...], key: str):
    ready_names = [p.name for p in pods if p.ready]
    if spec.type in (EXTERNAL, OBJECT):
        milli = parse_quantity_milli(value)
        return (ExternalReading((milli,)) if spec.type == EXTERNAL else ObjectReading(milli)), milli / 1000
    if spec.type == PODS:
        milli = parse_quantity_milli(value)
        return PodMetricsReading({name: PodMetric(milli) for name in ready_names}), milli / 1000
    # Resource / ContainerResource: utilization in percent, or usage per pod
    if spec.target.type == UTILIZATION:
        milli = round(float(value) * _REQUEST_MILLI / 100)
        shown = float(value)
    else:
        milli = parse_quantity_milli(value)
        shown = milli / 1000
    return PodMetricsReading({name: PodMetric(milli, -1e9, 60.0) for name in ready_names}), shown


def _pods(current: int, ready: int, hpa) -> tuple[Pod, ...]:
    # One container with a nominal request; named after a ContainerResource metric's container if any.
    container = next((m.container for m in hpa.metrics if m.type == CONTAINER_RESOURCE), "main")
    pods = ready_pods(ready, current - ready, now_s=0.0)
    return tuple(
        Pod(p.name, p.phase, p.ready, p.start_time_s, p.ready_transition_s, p.deleted, ((container, _REQUEST_MILLI),))
        for p in pods
    )


def _hpa_decision(
    autoscaler: Autoscaler, current: int, ready: int, values, value_hint: str, tolerance_frac: float
) -> Decision:
    hpa = autoscaler.hpa
    keys = [m.name for m in hpa.metrics]
    resolved = _resolve(keys, values, "metric", value_hint)
    pods = _pods(current, ready, hpa)
    readings, shown = [], []
    for index, spec in enumerate(hpa.metrics):
        value = resolved[index]
        if value is None or (isinstance(value, str) and not value.strip()):
            raise PlannerInputError(f"metric {keys[index]!r} needs a value (an HPA has no ignoreNullValues)")
        try:
            reading, number = _reading_for(spec, value, pods, keys[index])
        except ValueError:
            raise PlannerInputError(f"value for metric {keys[index]!r} must be a number, got {value!r}") from None
        readings.append(reading)
        shown.append(number)
    result, after = _reconcile(hpa, current, ready, readings, pods, tolerance_frac)
    lines = []
    for index, spec in enumerate(hpa.metrics):
        outcome = result.metrics.outcomes[index] if result.metrics else None
        lines.append(
            MetricLine(
                key=keys[index],
                index=index,
                kind=spec.type,
                target_type=spec.target.type,
                target=_target_value(spec),
                value=shown[index],
                value_to_hpa=shown[index],
                usage_ratio=outcome.usage_ratio if outcome else None,
                within_tolerance=outcome.within_tolerance if outcome else None,
                proposal=outcome.replica_count if outcome else None,
                error=outcome.error if outcome else None,
            )
        )
    steps = _steps(autoscaler, hpa, current, ready, lines, result, after, None)
    return Decision(
        autoscaler.kind,
        autoscaler.name,
        autoscaler.source,
        current,
        ready,
        result.desired_replicas,
        tuple(lines),
        _max_proposal(result),
        result.stabilized_replicas,
        after,
        result,
        None,
        None,
        tuple(steps),
        autoscaler.notes,
    )


def _scaled_object_decision(
    autoscaler: Autoscaler, current: int, ready: int, values, value_hint: str, tolerance_frac: float
) -> Decision:
    so, hpa = autoscaler.scaled_object, autoscaler.hpa
    assert so is not None  # only ScaledObjects are routed here
    keys = [t.name for t in so.triggers]
    resolved = _resolve(keys, values, "trigger", value_hint)
    pods = _pods(current, ready, hpa)
    floats = {}
    resource_readings = {}
    for trigger in so.triggers:
        value = resolved[trigger.index]
        if trigger.is_resource:
            spec = next(s for s in hpa.metrics if s.type == RESOURCE and s.name == trigger.type)
            try:
                resource_readings[trigger.index], floats[trigger.index] = _reading_for(spec, value, pods, trigger.label)
            except (ValueError, TypeError):
                raise PlannerInputError(
                    f"value for trigger {trigger.label!r} must be a number, got {value!r}"
                ) from None
        else:
            floats[trigger.index] = _as_float(trigger.label, value)
    evaluation = evaluate_triggers(
        so,
        hpa,
        {i: v for i, v in floats.items() if not so.triggers[i].is_resource},
        current_replicas=current,
        ready_replicas=ready,
        resource_readings=resource_readings,
    )
    executor = request_scale(so, current, evaluation.is_active, evaluation.is_error, 0.0, last_active_s=None)
    result = after = None
    desired = current
    if current == 0:
        desired = executor.replicas if executor.replicas is not None else 0
    else:
        result, after = _reconcile(hpa, current, ready, list(evaluation.readings), pods, tolerance_frac)
        desired = result.desired_replicas
    lines = _trigger_lines(so, hpa, evaluation, result, floats)
    steps = _steps(autoscaler, hpa, current, ready, lines, result, after, (evaluation, executor))
    return Decision(
        autoscaler.kind,
        autoscaler.name,
        autoscaler.source,
        current,
        ready,
        desired,
        tuple(lines),
        _max_proposal(result) if result else None,
        result.stabilized_replicas if result else None,
        after,
        result,
        evaluation.is_active,
        executor.reason,
        tuple(steps),
        autoscaler.notes,
    )


def _trigger_lines(so, hpa, evaluation: TriggersEvaluation, result, floats) -> list[MetricLine]:
    outcomes = {}
    if result is not None and result.metrics is not None:
        outcomes = {hpa.metrics[o.index].name: o for o in result.metrics.outcomes}
    lines = []
    evaluations = {e.trigger.index: e for e in evaluation.triggers}
    for trigger in so.triggers:
        if trigger.is_resource:
            outcome = outcomes.get(trigger.type)
            lines.append(
                MetricLine(
                    key=trigger.label,
                    index=trigger.index,
                    kind=f"{trigger.type} (Resource)",
                    target_type=trigger.metric_type,
                    target=trigger.threshold,
                    value=floats[trigger.index],
                    value_to_hpa=floats[trigger.index],
                    usage_ratio=outcome.usage_ratio if outcome else None,
                    within_tolerance=outcome.within_tolerance if outcome else None,
                    proposal=outcome.replica_count if outcome else None,
                    error=outcome.error if outcome else None,
                )
            )
            continue
        e = evaluations[trigger.index]
        outcome = None if so.is_using_modifiers else outcomes.get(trigger.metric_name)
        lines.append(
            MetricLine(
                key=trigger.label,
                index=trigger.index,
                kind=f"{trigger.type} ({trigger.metric_name})",
                target_type="(formula input)" if so.is_using_modifiers else trigger.metric_type,
                target=trigger.threshold,
                value=e.raw_value,
                value_to_hpa=None if e.value_milli is None else e.value_milli / 1000,
                usage_ratio=outcome.usage_ratio if outcome else None,
                within_tolerance=outcome.within_tolerance if outcome else None,
                proposal=outcome.replica_count if outcome else None,
                active=e.active,
                error=e.error or (outcome.error if outcome else None),
                query=trigger.query,
            )
        )
    if so.is_using_modifiers:
        outcome = outcomes.get(COMPOSITE_METRIC_NAME)
        modifiers = so.scaling_modifiers
        lines.append(
            MetricLine(
                key=COMPOSITE_METRIC_NAME,
                index=len(so.triggers),
                kind="scalingModifiers.formula",
                target_type=modifiers.metric_type or AVERAGE_VALUE,
                target=float(modifiers.target),
                value=None if evaluation.composite_value_milli is None else evaluation.composite_value_milli / 1000,
                value_to_hpa=None
                if evaluation.composite_value_milli is None
                else evaluation.composite_value_milli / 1000,
                usage_ratio=outcome.usage_ratio if outcome else None,
                within_tolerance=outcome.within_tolerance if outcome else None,
                proposal=outcome.replica_count if outcome else None,
                active=evaluation.is_active,
                error=evaluation.composite_error or (outcome.error if outcome else None),
                query=modifiers.formula,
            )
        )
    return lines


def _reconcile(hpa, current, ready, readings, pods, tolerance_frac) -> tuple[ReconcileResult, int | None]:
    # A plain HPA at 0 replicas with minReplicas 0 is taken to have scaled the target there itself
    # (its ScaledToZero condition True), so Kubernetes 1.37 computes its metrics.
    controller = HorizontalController(
        hpa, tolerance=tolerance_frac, scaled_to_zero=current == 0 and hpa.effective_min_replicas == 0
    )
    result = controller.reconcile_autoscaler(0.0, current, readings, pods=pods)
    after = None
    stabilization = result.stabilization
    if stabilization is not None and stabilization.reason in ("ScaleDownStabilized", "ScaleUpStabilized"):
        # the same inputs once the seeded record has left the window
        window = _window_s(controller, scale_down=stabilization.reason == "ScaleDownStabilized")
        later = HorizontalController(
            hpa,
            tolerance=tolerance_frac,
            recommendations=controller.recommendations,
            scale_up_events=controller.scale_up_events,
            scale_down_events=controller.scale_down_events,
            scaled_to_zero=controller.scaled_to_zero,
        )
        after = later.reconcile_autoscaler(window + 1.0, current, readings, pods=pods).desired_replicas
    return result, after


def _window_s(controller: HorizontalController, scale_down: bool) -> float:
    behavior = controller.behavior
    if behavior is None:
        return controller.downscale_stabilization_window_s
    rules = behavior.scale_down if scale_down else behavior.scale_up
    assert rules is not None  # SetDefaults fills both directions
    window = rules.stabilization_window_seconds
    return controller.downscale_stabilization_window_s if window is None else float(window)


def _max_proposal(result: ReconcileResult | None) -> int | None:
    if result is None or result.metrics is None:
        return None
    return result.metric_desired_replicas


def _target_value(spec) -> float:
    t = spec.target
    if t.type == UTILIZATION:
        return float(t.average_utilization_pct)
    milli = t.average_value_milli if t.type == AVERAGE_VALUE else t.value_milli
    return milli / 1000


def _fmt(x: float | None) -> str:
    if x is None:
        return "-"
    return f"{x:g}" if abs(x) < 1e6 else f"{x:.4g}"


def _steps(autoscaler, hpa, current, ready, lines, result, after, keda) -> list[str]:
    steps = [
        f"{autoscaler.kind} {autoscaler.name}: HPA min {hpa.effective_min_replicas}, max {hpa.max_replicas}, "
        f"{'behavior set' if hpa.behavior is not None else 'no behavior (legacy path)'}; "
        f"current {current} replica{'' if current == 1 else 's'}, {ready} Ready.",
    ]
    if keda is not None:
        evaluation, executor = keda
        for line in lines:
            if line.kind == "scalingModifiers.formula":
                steps.append(
                    f"formula -> {_fmt(line.value)}; composite metric {line.target_type} target {_fmt(line.target)}; "
                    f"active if > activationTarget: {'yes' if line.active else 'no'}."
                )
                continue
            if line.kind.endswith("(Resource)"):
                continue
            if line.value is None and line.error is None:
                got = "empty result, counted as 0 (ignoreNullValues)"
            elif line.value is None:
                got = "empty result"
            else:
                got = _fmt(line.value)
            state = f"error: {line.error}" if line.error else ("active" if line.active else "not active")
            steps.append(f"trigger {line.key}: query returned {got} -> HPA gets {_fmt(line.value_to_hpa)}; {state}.")
        steps.append(f"KEDA: {'active' if evaluation.is_active else 'not active'}; {executor.reason}.")
        if current == 0:
            steps.append(
                f"At 0 replicas the HPA is idle (ScalingDisabled); KEDA sets "
                f"{executor.replicas if executor.replicas is not None else 0} and the HPA takes over from there."
            )
            return steps
    if result.metrics is None:
        steps.append(f"{result.rescale_reason}: desired {result.desired_replicas}, no metric evaluated.")
        return steps
    for line in lines:
        if line.proposal is None and line.error is None:
            continue
        if line.error is not None and line.proposal is None:
            steps.append(f"metric {line.key}: invalid ({line.error}).")
            continue
        band = "inside" if line.within_tolerance else "outside"
        tolerance = "" if line.within_tolerance is None else f", {band} the tolerance"
        steps.append(
            f"metric {line.key} ({line.target_type} target {_fmt(line.target)}): value {_fmt(line.value_to_hpa)}, "
            f"ratio {line.usage_ratio:.4g}{tolerance} -> proposes {line.proposal}."
        )
    if result.metric_desired_replicas == -1:
        steps.append(f"Invalid metrics and no scale-up: nothing changes ({result.error}).")
        steps.append(f"Final: {result.desired_replicas} replica{'' if result.desired_replicas == 1 else 's'}.")
        return steps
    steps.append(f"Largest proposal: {result.metric_desired_replicas}.")
    if result.stabilization is not None:
        steps.append(
            f"Stabilization: {result.stabilized_replicas} ({result.stabilization.reason}: "
            f"{result.stabilization.message})."
        )
    if result.scaling_limited is not None:
        steps.append(
            f"Limits: {result.desired_replicas} ({result.scaling_limited.reason}: {result.scaling_limited.message})."
        )
    steps.append(f"Final: {result.desired_replicas} replica{'' if result.desired_replicas == 1 else 's'}.")
    if after is not None and after != result.desired_replicas:
        steps.append(
            "The stabilization window holds the change; with the same metrics after the window the count goes "
            f"to {after}."
        )
    if keda is not None and autoscaler.scaled_object.effective_min_replica_count == 0 and not keda[0].is_active:
        cooldown = autoscaler.scaled_object.effective_cooldown_period_s
        steps.append(f"minReplicaCount is 0: KEDA scales to 0 once no trigger has been active for {cooldown:g} s.")
    return steps


def behavior_text(hpa) -> str:
    """The HPA's scaling behavior in one sentence, with the API defaults filled in.

    Parameters
    ----------
    hpa : HorizontalPodAutoscalerSpec
        The HPA (for a ScaledObject, the one KEDA creates).
    """
    behavior = set_defaults_horizontal_pod_autoscaler_behavior(hpa.behavior)
    if behavior is None:
        return (
            "No behavior is set, so the legacy rules apply: a scale-up reaches at most max(2 x current, 4) "
            "per sync, and a scale-down waits for the controller's 300 s window."
        )

    def rules_text(rules, window_default: str) -> str:
        if rules.select_policy == "Disabled":
            return "disabled"
        window = rules.stabilization_window_seconds
        policies = ", ".join(
            f"{p.value}{' %' if p.type == 'Percent' else (' pod' if p.value == 1 else ' pods')} per "
            f"{p.period_seconds} s"
            for p in rules.policies
        )
        pick = "the larger" if rules.select_policy in (None, "Max") else "the smaller"
        several = f" ({pick} applies)" if len(rules.policies) > 1 else ""
        return f"window {window_default if window is None else f'{window} s'}, {policies}{several}"

    return f"Scale-up: {rules_text(behavior.scale_up, '0 s')}. Scale-down: {rules_text(behavior.scale_down, '300 s')}."
