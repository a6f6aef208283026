"""The ``versions`` module holds which Kubernetes and KEDA versions support which autoscaling fields.

Every version fact the planner acts on lives here, so the generator, the
linter and the controller ports agree:

* ``HPAConfigurableTolerance`` (KEP-4951, ``behavior.scale{Up,Down}.tolerance``):
  alpha in 1.33 (off by default), beta and on by default in 1.35, GA in
  1.37. Where the gate is off, the API server drops the field silently and
  the cluster-wide 10 % applies.
* KEDA copies ``advanced.horizontalPodAutoscalerConfig.behavior.*.tolerance``
  into the HPA it creates from 2.18 on; older KEDA CRDs do not list the field.
* ``HPAScaleToZero`` (KEP-2021, ``minReplicas: 0`` on an HPA with an Object
  or External metric): alpha and off by default from 1.16; in 1.36 the
  controller switched to the condition-based implementation (kubernetes
  PR 135118: the ``ScaledToZero`` status condition), which from then needs
  the gate on kube-controller-manager too; beta and on by default in 1.37
  (kubernetes PR 139648).

Defaults: Kubernetes 1.37, the newest minor release; KEDA 2.20, the newest
KEDA minor series with a stable release (2.20.2, August 2026), and one that
passes ``tolerance`` through.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from planner.errors import PlannerInputError

__all__ = [
    "DEFAULT_KEDA_VERSION",
    "DEFAULT_KUBERNETES_VERSION",
    "HPA_CONFIGURABLE_TOLERANCE",
    "HPA_SCALE_TO_ZERO",
    "KEDA_TOLERANCE_SINCE",
    "SCALED_TO_ZERO_CONDITION_SINCE",
    "ClusterVersions",
    "FeatureGate",
    "Version",
]

_VERSION = re.compile(r"^v?(\d+)\.(\d+)(?:\.(\d+))?$")


@dataclass(frozen=True, order=True)
class Version:
    """A ``major.minor`` release (the patch level changes no autoscaling field)."""

    major: int
    minor: int

    @classmethod
    def parse(cls, text: str, what: str = "version") -> Version:
        """``"1.37"``, ``"v1.37.2"`` or ``"2.20.2"`` as a :class:`Version`.

        Raises
        ------
        PlannerInputError
            Naming ``what`` and the form expected.
        """
        match = _VERSION.match(str(text).strip())
        if match is None:
            raise PlannerInputError(
                f"{what}: expected MAJOR.MINOR such as 1.37 (a v prefix and a patch level are allowed), got {text!r}"
            )
        return cls(int(match.group(1)), int(match.group(2)))

    def __str__(self) -> str:
        return f"{self.major}.{self.minor}"


@dataclass(frozen=True)
class FeatureGate:
    """A Kubernetes feature gate's stages: the release each began in (``None``: not yet)."""

    name: str
    alpha: Version
    beta: Version | None
    ga: Version | None
    on_by_default: Version | None

    def stage(self, version: Version) -> str:
        """``"absent"``, ``"alpha"``, ``"beta"`` or ``"GA"`` in ``version``."""
        if self.ga is not None and version >= self.ga:
            return "GA"
        if self.beta is not None and version >= self.beta:
            return "beta"
        if version >= self.alpha:
            return "alpha"
        return "absent"

    def enabled_by_default(self, version: Version) -> bool:
        return self.on_by_default is not None and version >= self.on_by_default


HPA_CONFIGURABLE_TOLERANCE = FeatureGate(
    "HPAConfigurableTolerance",
    alpha=Version(1, 33),
    beta=Version(1, 35),
    ga=Version(1, 37),
    on_by_default=Version(1, 35),
)
HPA_SCALE_TO_ZERO = FeatureGate(
    "HPAScaleToZero", alpha=Version(1, 16), beta=Version(1, 37), ga=None, on_by_default=Version(1, 37)
)
SCALED_TO_ZERO_CONDITION_SINCE = Version(1, 36)
"""The HPA controller's condition-based scale to zero (``ScaledToZero``), kubernetes PR 135118."""
KEDA_TOLERANCE_SINCE = Version(2, 18)
"""First KEDA that passes ``behavior.scale{Up,Down}.tolerance`` to its HPA."""
DEFAULT_KUBERNETES_VERSION = Version(1, 37)
DEFAULT_KEDA_VERSION = Version(2, 20)


@dataclass(frozen=True)
class ClusterVersions:
    """The versions a manifest is written for or checked against.

    Attributes
    ----------
    kubernetes : Version
    keda : Version
    """

    kubernetes: Version = DEFAULT_KUBERNETES_VERSION
    keda: Version = DEFAULT_KEDA_VERSION

    @classmethod
    def parse(cls, kubernetes: str | None = None, keda: str | None = None) -> ClusterVersions:
        """From the CLI's ``--kubernetes-version`` and ``--keda-version`` (``None``: the default)."""
        return cls(
            DEFAULT_KUBERNETES_VERSION if kubernetes is None else Version.parse(kubernetes, "--kubernetes-version"),
            DEFAULT_KEDA_VERSION if keda is None else Version.parse(keda, "--keda-version"),
        )

    def tolerance_dropped(self, kind: str) -> str | None:
        """Why ``behavior.*.tolerance`` would be dropped for a ``kind`` object, or ``None`` if it is kept.

        ``kind`` is ``HorizontalPodAutoscaler`` or ``ScaledObject``.
        """
        gate = HPA_CONFIGURABLE_TOLERANCE
        k8s = self.kubernetes
        if not gate.enabled_by_default(k8s):
            if gate.stage(k8s) == "absent":
                return f"Kubernetes {k8s} has no per-HPA tolerance (it came in {gate.alpha}, as alpha)"
            return (
                f"on Kubernetes {k8s} the {gate.name} feature gate is alpha and off by default (on by "
                f"default from {gate.on_by_default}), so the API server drops the field unless the gate "
                "is enabled"
            )
        if kind == "ScaledObject" and self.keda < KEDA_TOLERANCE_SINCE:
            return (
                f"KEDA {self.keda} does not pass tolerance to the HPA it creates (KEDA "
                f"{KEDA_TOLERANCE_SINCE} and later do)"
            )
        return None

    @property
    def hpa_scale_to_zero_by_default(self) -> bool:
        """An HPA accepts ``minReplicas: 0`` without enabling a feature gate."""
        return HPA_SCALE_TO_ZERO.enabled_by_default(self.kubernetes)

    @property
    def hpa_scale_to_zero_mode(self) -> str:
        """The HPA controller's scale-to-zero logic with the gate at its default.

        ``"condition"`` (1.37 on: the ``ScaledToZero`` condition), ``"disabled"``
        (1.36: the condition-based controller with the gate off) or ``"legacy"``
        (before 1.36). The names are :data:`planner.autoscaler.horizontal.SCALE_TO_ZERO_MODES`.
        """
        if not self.scaled_to_zero_condition:
            return "legacy"
        return "condition" if self.hpa_scale_to_zero_by_default else "disabled"

    @property
    def scaled_to_zero_condition(self) -> bool:
        """The HPA controller runs the condition-based scale to zero (``ScaledToZero``) when the gate is on."""
        return self.kubernetes >= SCALED_TO_ZERO_CONDITION_SINCE
