"""The ``kv_ramp`` module shows how slowly a bounded metric such as KV-cache usage scales a fleet.

``vllm:kv_cache_usage_perc`` is the fraction of KV blocks in use, so it
cannot exceed 1.0 however large the overload. With a target ``t`` the HPA's
usage ratio is at most ``1 / t``, and one decision can grow the Ready count
by at most that factor. The pods it adds count only once they are Ready, so
each further step waits a full warmup. An unbounded signal (requests in
flight or waiting) sees the whole overload and asks for the full count in
one decision.

The ceil and tolerance steps follow the Kubernetes controller
(``calcPlainMetricReplicas`` and the tolerance check in
``replica_calculator.go``), in float64 as it computes them.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from planner.autoscaler.defaults import DEFAULT_POLICY_PERIOD_S, DEFAULT_TOLERANCE
from planner.errors import PlannerInputError, require_fraction, require_positive

__all__ = [
    "DEFAULT_SCALE_UP_PERIOD_S",
    "DEFAULT_TOLERANCE_FRAC",
    "RampComparison",
    "compare_ramps",
    "max_usage_ratio",
    "ramp_replicas",
    "scale_up_periods",
    "warmups_to_reach",
]

DEFAULT_TOLERANCE_FRAC = DEFAULT_TOLERANCE
"""The HPA's default tolerance (``--horizontal-pod-autoscaler-tolerance``), as a fraction."""
DEFAULT_SCALE_UP_PERIOD_S = float(DEFAULT_POLICY_PERIOD_S)
"""``periodSeconds`` of the HPA's default scale-up policies. [s]"""


def max_usage_ratio(target_frac, metric_ceiling_frac=1.0):
    """The largest usage ratio a metric bounded by ``metric_ceiling_frac`` can produce.

    Parameters
    ----------
    target_frac : float or array_like
        Target value of the bounded metric, e.g. 0.8 KV usage. [fraction]
    metric_ceiling_frac : float, optional
        Largest value the metric can take (1.0 for KV usage). [fraction]

    Returns
    -------
    float or numpy.ndarray
        ``metric_ceiling_frac / target_frac``. [-]

    Examples
    --------
    >>> max_usage_ratio(0.8)
    1.25
    """
    target_frac = require_fraction("target_frac", target_frac)
    metric_ceiling_frac = require_fraction("metric_ceiling_frac", metric_ceiling_frac)
    return metric_ceiling_frac / target_frac


def ramp_replicas(
    start_replicas: int,
    target_frac: float,
    n_warmups: int,
    *,
    metric_ceiling_frac: float = 1.0,
    tolerance_frac: float = DEFAULT_TOLERANCE_FRAC,
    max_replicas: int | None = None,
    goal_replicas: int | None = None,
) -> np.ndarray:
    """Ready replicas after each warmup while the bounded metric stays saturated.

    Parameters
    ----------
    start_replicas : int
        Ready replicas when the overload starts. [replicas]
    target_frac : float
        Target of the bounded metric. [fraction]
    n_warmups : int
        Warmups to simulate.
    metric_ceiling_frac : float, optional
        The metric's saturated value. [fraction]
    tolerance_frac : float, optional
        HPA tolerance; a ratio within ``1 +/- tolerance`` changes nothing. [fraction]
    max_replicas : int, optional
        The HPA's ``maxReplicas``; no cap when omitted. [replicas]
    goal_replicas : int, optional
        Replicas the load needs. Once the fleet has at least this many, the
        load is served and the metric is no longer saturated, so the count
        holds; without it the metric stays saturated for every warmup. [replicas]

    Returns
    -------
    numpy.ndarray of int
        ``n_warmups + 1`` counts, starting with ``start_replicas``. [replicas]

    Examples
    --------
    >>> ramp_replicas(4, 0.8, 4).tolist()
    [4, 5, 7, 9, 12]
    >>> ramp_replicas(4, 0.8, 6, goal_replicas=10).tolist()
    [4, 5, 7, 9, 12, 12, 12]
    """
    start_replicas = _require_count("start_replicas", start_replicas)
    n_warmups = _require_count("n_warmups", n_warmups, minimum=0)
    ratio = float(max_usage_ratio(target_frac, metric_ceiling_frac))
    tolerance_frac = float(tolerance_frac)
    if not 0 <= tolerance_frac < 1:
        raise PlannerInputError(f"tolerance_frac must be in [0, 1), got {tolerance_frac!r}")
    if max_replicas is not None:
        max_replicas = _require_count("max_replicas", max_replicas)
    if goal_replicas is not None:
        goal_replicas = _require_count("goal_replicas", goal_replicas)
    replicas = [start_replicas]
    for _ in range(n_warmups):
        current = replicas[-1]
        desired = current
        served = goal_replicas is not None and current >= goal_replicas
        if not served and abs(1.0 - ratio) > tolerance_frac:
            desired = math.ceil(ratio * current)
        if max_replicas is not None:
            desired = min(desired, max(max_replicas, current))
        replicas.append(desired)
    return np.asarray(replicas, dtype=np.int64)


def warmups_to_reach(
    start_replicas: int,
    goal_replicas: int,
    target_frac: float,
    *,
    metric_ceiling_frac: float = 1.0,
    tolerance_frac: float = DEFAULT_TOLERANCE_FRAC,
) -> int | None:
    """Warmups a saturated bounded metric needs to take the fleet to ``goal_replicas``.

    Returns
    -------
    int or None
        Number of warmups; 0 if already there; ``None`` when the largest
        ratio falls inside the tolerance, so the metric alone never scales up.

    Examples
    --------
    >>> warmups_to_reach(4, 10, 0.8)
    4
    """
    start_replicas = _require_count("start_replicas", start_replicas)
    goal_replicas = _require_count("goal_replicas", goal_replicas)
    ratio = float(max_usage_ratio(target_frac, metric_ceiling_frac))
    if goal_replicas <= start_replicas:
        return 0
    if abs(1.0 - ratio) <= tolerance_frac:
        return None
    current, warmups = start_replicas, 0
    while current < goal_replicas:
        current = math.ceil(ratio * current)
        warmups += 1
    return warmups


def scale_up_periods(start_replicas: int, goal_replicas: int) -> int:
    """Policy periods the HPA's default scale-up needs to go from start to goal.

    The default scale-up behavior allows, per 15-s period, the larger of
    +100 % and +4 pods; an unbounded signal asks for the goal at once and
    only this rate limit spaces the steps.

    Examples
    --------
    >>> scale_up_periods(4, 10)
    2
    """
    start_replicas = _require_count("start_replicas", start_replicas)
    goal_replicas = _require_count("goal_replicas", goal_replicas)
    current, periods = start_replicas, 0
    while current < goal_replicas:
        current = min(goal_replicas, max(2 * current, current + 4))
        periods += 1
    return periods


@dataclass(frozen=True)
class RampComparison:
    """How long a bounded and an unbounded signal take to reach the same fleet size.

    Attributes
    ----------
    bounded_replicas : tuple of int
        Ready replicas after each warmup under the bounded metric. [replicas]
    bounded_warmups : int or None
        Warmups the bounded metric needs; ``None`` if it never gets there.
    bounded_time_s : float
        ``bounded_warmups x warmup_s`` (inf when never). [s]
    unbounded_time_s : float
        One warmup plus the default scale-up policy's spacing. [s]
    """

    bounded_replicas: tuple[int, ...]
    bounded_warmups: int | None
    bounded_time_s: float
    unbounded_time_s: float


def compare_ramps(
    start_replicas: int,
    goal_replicas: int,
    target_frac: float,
    warmup_s: float,
    *,
    metric_ceiling_frac: float = 1.0,
    tolerance_frac: float = DEFAULT_TOLERANCE_FRAC,
) -> RampComparison:
    """Time to reach ``goal_replicas`` on a saturated bounded metric vs an unbounded one.

    Both times count only warmups and policy periods; add the metric window
    and the controller's sync period for the full reaction time.

    Examples
    --------
    >>> c = compare_ramps(4, 10, 0.8, 240.0)
    >>> c.bounded_replicas, c.bounded_time_s, c.unbounded_time_s
    ((4, 5, 7, 9, 12), 960.0, 255.0)
    """
    warmup_s = require_positive("warmup_s", warmup_s)
    warmups = warmups_to_reach(
        start_replicas,
        goal_replicas,
        target_frac,
        metric_ceiling_frac=metric_ceiling_frac,
        tolerance_frac=tolerance_frac,
    )
    shown = warmups if warmups is not None else 0
    replicas = ramp_replicas(
        start_replicas,
        target_frac,
        shown,
        metric_ceiling_frac=metric_ceiling_frac,
        tolerance_frac=tolerance_frac,
    )
    periods = scale_up_periods(start_replicas, goal_replicas)
    unbounded_time_s = 0.0 if periods == 0 else warmup_s + (periods - 1) * DEFAULT_SCALE_UP_PERIOD_S
    return RampComparison(
        bounded_replicas=tuple(int(r) for r in replicas),
        bounded_warmups=warmups,
        bounded_time_s=math.inf if warmups is None else warmups * warmup_s,
        unbounded_time_s=unbounded_time_s,
    )


def _require_count(name: str, value, minimum: int = 1) -> int:
    if isinstance(value, bool) or not isinstance(value, int | np.integer) or value < minimum:
        raise PlannerInputError(f"{name} must be an integer >= {minimum}, got {value!r}")
    return int(value)
