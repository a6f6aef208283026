"""The ``hpa_spec`` module holds an autoscaling/v2 HorizontalPodAutoscaler spec as frozen dataclasses.

Only the fields the controller reads are kept. Quantities are integers in
milli-units (``resource.Quantity.MilliValue()``), as the controller uses
them. :mod:`planner.readers.manifest` builds these from YAML and
:mod:`planner.autoscaler.keda` builds them from a ScaledObject.
"""

from __future__ import annotations

from dataclasses import dataclass

from planner.autoscaler.behavior import HorizontalPodAutoscalerBehavior

__all__ = [
    "AVERAGE_VALUE",
    "CONTAINER_RESOURCE",
    "EXTERNAL",
    "OBJECT",
    "PODS",
    "RESOURCE",
    "UTILIZATION",
    "VALUE",
    "HorizontalPodAutoscalerSpec",
    "MetricSpec",
    "MetricTarget",
]

RESOURCE = "Resource"
CONTAINER_RESOURCE = "ContainerResource"
PODS = "Pods"
OBJECT = "Object"
EXTERNAL = "External"

UTILIZATION = "Utilization"
VALUE = "Value"
AVERAGE_VALUE = "AverageValue"


@dataclass(frozen=True)
class MetricTarget:
    """``target`` of a metric; set exactly the field that ``type`` names.

    Attributes
    ----------
    type : str
        ``Utilization``, ``Value`` or ``AverageValue``.
    value_milli : int or None
        ``target.value``. [milli-units]
    average_value_milli : int or None
        ``target.averageValue``. [milli-units]
    average_utilization_pct : int or None
        ``target.averageUtilization``. [% of request]
    """

    type: str
    value_milli: int | None = None
    average_value_milli: int | None = None
    average_utilization_pct: int | None = None


@dataclass(frozen=True)
class MetricSpec:
    """One entry of ``spec.metrics``.

    Attributes
    ----------
    type : str
        ``Resource``, ``ContainerResource``, ``Pods``, ``Object`` or ``External``.
    name : str
        Resource name (``cpu``) or ``metric.name``.
    target : MetricTarget
    container : str
        Container of a ContainerResource metric, else ``""``.
    described_object_kind : str
        Kind of an Object metric's ``describedObject``, else ``""``.
    """

    type: str
    name: str
    target: MetricTarget
    container: str = ""
    described_object_kind: str = ""

    @property
    def description(self) -> str:
        """How the controller names the metric in conditions and events."""
        if self.type in (RESOURCE, CONTAINER_RESOURCE):
            kind = "container resource" if self.type == CONTAINER_RESOURCE else "resource"
            if self.target.average_value_milli is not None:
                return f"{self.name} resource"
            return f"{self.name} {kind} utilization (percentage of request)"
        if self.type == PODS:
            return f"pods metric {self.name}"
        if self.type == OBJECT:
            if self.target.type == AVERAGE_VALUE:
                return f"external metric {self.name}"  # sic: horizontal.go labels it "external"
            return f"{self.described_object_kind} metric {self.name}"
        return f"external metric {self.name}"


@dataclass(frozen=True)
class HorizontalPodAutoscalerSpec:
    """``spec`` of an autoscaling/v2 HorizontalPodAutoscaler.

    Attributes
    ----------
    name : str
        ``metadata.name``.
    max_replicas : int
        ``maxReplicas``. [replicas]
    metrics : tuple of MetricSpec
    min_replicas : int or None
        ``minReplicas``; ``None`` means the default 1. [replicas]
    behavior : HorizontalPodAutoscalerBehavior or None
        ``behavior`` as written (defaults are filled by the controller).
    scale_target_kind, scale_target_name : str
        ``scaleTargetRef``.
    """

    name: str
    max_replicas: int
    metrics: tuple[MetricSpec, ...]
    min_replicas: int | None = None
    behavior: HorizontalPodAutoscalerBehavior | None = None
    scale_target_kind: str = "Deployment"
    scale_target_name: str = ""

    @property
    def effective_min_replicas(self) -> int:
        """``minReplicas`` with the controller's default of 1."""
        return 1 if self.min_replicas is None else self.min_replicas
