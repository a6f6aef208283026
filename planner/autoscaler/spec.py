"""The ``spec`` module holds :class:`Autoscaler`: one autoscaler as a manifest declares it.

An autoscaler is either a HorizontalPodAutoscaler or a KEDA ScaledObject
together with the HPA KEDA creates from it. Both controllers in
:mod:`planner.autoscaler` and the fleet simulator take this one type;
:mod:`planner.readers.manifest` builds it from YAML.
"""

from __future__ import annotations

from dataclasses import dataclass

from planner.autoscaler.hpa_spec import HorizontalPodAutoscalerSpec
from planner.autoscaler.keda import ScaledObjectSpec

__all__ = ["Autoscaler"]


@dataclass(frozen=True)
class Autoscaler:
    """One autoscaler read from a manifest.

    Attributes
    ----------
    kind : str
        ``HorizontalPodAutoscaler`` or ``ScaledObject``.
    name : str
        ``metadata.name``.
    source : str
        File it came from, and the document number when the file has several.
    hpa : HorizontalPodAutoscalerSpec
        The HPA itself, or the one KEDA creates for the ScaledObject.
    scaled_object : ScaledObjectSpec or None
    notes : tuple of str
        Fields present but ignored by the controller (a misplaced ``metricType``, ...).
    """

    kind: str
    name: str
    source: str
    hpa: HorizontalPodAutoscalerSpec
    scaled_object: ScaledObjectSpec | None = None
    notes: tuple[str, ...] = ()
