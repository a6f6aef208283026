"""The ``defaults`` module defines every HPA and KEDA default the planner applies, once.

Each value is what the controller uses when a manifest or a flag leaves the
setting out; the docstring under each names the flag or field it stands for.
The controller ports, the simulator, the manifest writer and the charts all
import them from here, and :mod:`planner.autoscaler.defaults_table` renders
them, with their sources, for the book. Constants the Go source itself
hard-codes (``scaleUpLimitFactor``, ...) stay beside the code that uses them.
"""

from __future__ import annotations

__all__ = [
    "DEFAULT_COOLDOWN_PERIOD_S",
    "DEFAULT_CPU_INITIALIZATION_PERIOD_S",
    "DEFAULT_CPU_UTILIZATION_PCT",
    "DEFAULT_DELAY_OF_INITIAL_READINESS_STATUS_S",
    "DEFAULT_DOWNSCALE_STABILIZATION_WINDOW_S",
    "DEFAULT_HPA_MAX_REPLICAS",
    "DEFAULT_HPA_MIN_REPLICAS",
    "DEFAULT_INITIAL_COOLDOWN_PERIOD_S",
    "DEFAULT_MIN_REPLICA_COUNT",
    "DEFAULT_POLICY_PERIOD_S",
    "DEFAULT_POLLING_INTERVAL_S",
    "DEFAULT_SYNC_PERIOD_S",
    "DEFAULT_TOLERANCE",
]

# kube-controller-manager flags.
DEFAULT_SYNC_PERIOD_S = 15.0
"""``--horizontal-pod-autoscaler-sync-period``: how often the HPA controller reconciles. [s]"""
DEFAULT_TOLERANCE = 0.1
"""``--horizontal-pod-autoscaler-tolerance``: ratios within 1 +/- 0.1 change nothing."""
DEFAULT_CPU_INITIALIZATION_PERIOD_S = 300.0
"""``--horizontal-pod-autoscaler-cpu-initialization-period`` (5 min). [s]"""
DEFAULT_DELAY_OF_INITIAL_READINESS_STATUS_S = 30.0
"""``--horizontal-pod-autoscaler-initial-readiness-delay`` (30 s). [s]"""
DEFAULT_DOWNSCALE_STABILIZATION_WINDOW_S = 300.0
"""``--horizontal-pod-autoscaler-downscale-stabilization`` (5 min). [s]"""

# autoscaling/v2 API defaults (pkg/apis/autoscaling/v2/defaults.go).
DEFAULT_POLICY_PERIOD_S = 15
"""``periodSeconds`` of the default scale-up and scale-down policies. [s]"""
DEFAULT_CPU_UTILIZATION_PCT = 80
"""``autoscaling.DefaultCPUUtilization``: the target of an HPA that lists no metrics. [%]"""

# KEDA ScaledObject defaults (apis/keda/v1alpha1/scaledobject_types.go).
DEFAULT_POLLING_INTERVAL_S = 30.0
"""``pollingInterval``. [s]"""
DEFAULT_COOLDOWN_PERIOD_S = 300.0
"""``cooldownPeriod``; it applies only to the way down to zero. [s]"""
DEFAULT_INITIAL_COOLDOWN_PERIOD_S = 0.0
"""``initialCooldownPeriod``. [s]"""
DEFAULT_MIN_REPLICA_COUNT = 0
"""``minReplicaCount``: KEDA scales to zero unless told otherwise. [replicas]"""
DEFAULT_HPA_MIN_REPLICAS = 1
"""``defaultHPAMinReplicas``: the HPA KEDA creates never gets 0; KEDA itself moves 0 <-> 1. [replicas]"""
DEFAULT_HPA_MAX_REPLICAS = 100
"""``defaultHPAMaxReplicas``, used when ``maxReplicaCount`` is unset. [replicas]"""
