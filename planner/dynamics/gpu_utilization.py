"""The ``gpu_utilization`` module says what GPU utilization measures on a decode loop, and what an HPA makes of it.

NVML (and so ``nvidia-smi`` and the DCGM exporter's ``DCGM_FI_DEV_GPU_UTIL``)
reports utilization as the fraction of a sample period during which at least
one kernel ran on the device. A vLLM replica launches decode steps back to
back whenever at least one sequence is in flight, so the reading is close to
its ceiling from one sequence to a full batch, while the useful work per step
grows with the batch.
"""

from __future__ import annotations

import math

import numpy as np

from planner.errors import (
    PlannerInputError,
    require_fraction,
    require_non_negative,
    require_positive,
)

__all__ = [
    "busy_frac_poisson",
    "nvml_utilization_frac",
    "replica_utilization_frac",
    "utilization_hpa_trace",
]


def nvml_utilization_frac(kernel_busy_s, sample_period_s):
    """GPU utilization as NVML defines it: time with a kernel running over the sample period.

    Parameters
    ----------
    kernel_busy_s : float or array_like
        Time within the period during which one or more kernels executed. [s]
    sample_period_s : float
        Length of the sample period (1/6 s to 1 s, by device). [s]

    Returns
    -------
    float or numpy.ndarray
        Utilization. [fraction]

    Raises
    ------
    PlannerInputError
        If the busy time is negative or longer than the period.
    """
    kernel_busy_s = require_non_negative("kernel_busy_s", kernel_busy_s)
    sample_period_s = require_positive("sample_period_s", sample_period_s)
    if np.any(np.asarray(kernel_busy_s) > sample_period_s):
        raise PlannerInputError(
            f"kernel_busy_s must not exceed sample_period_s ({sample_period_s:g} s): "
            "a kernel cannot run for longer than the period it is sampled in"
        )
    return kernel_busy_s / sample_period_s


def busy_frac_poisson(mean_in_flight):
    """Fraction of time a replica has at least one request in flight, under Poisson arrivals.

    With Poisson arrivals and no limit on the batch, the number of requests
    in flight is Poisson-distributed with mean L = arrival rate x time in
    system, whatever the distribution of request durations (the M/G/inf
    queue). The replica is idle only when that number is zero.

    Parameters
    ----------
    mean_in_flight : float or array_like
        L, the mean number of requests in flight on the replica. [requests]

    Returns
    -------
    float or numpy.ndarray
        1 - exp(-L). [fraction]

    Notes
    -----
    Exact for Poisson arrivals below the batch limit; at the limit the
    replica is busy anyway. Burstier traffic leaves more idle time at the
    same mean, smoother traffic less.
    """
    mean_in_flight = require_non_negative("mean_in_flight", mean_in_flight)
    return -np.expm1(-mean_in_flight) if np.ndim(mean_in_flight) else -math.expm1(-mean_in_flight)


def replica_utilization_frac(mean_in_flight, busy_utilization_frac: float = 0.97):
    """NVML utilization of a decode replica holding ``mean_in_flight`` requests on average.

    Parameters
    ----------
    mean_in_flight : float or array_like
        Mean requests in flight on the replica. [requests]
    busy_utilization_frac : float, optional
        Utilization while the decode loop runs: the share of each step spent
        in kernels rather than in the scheduler between steps (0.97 is
        illustrative; measure yours with ``nvidia-smi dmon`` under load). [fraction]

    Returns
    -------
    float or numpy.ndarray
        ``busy_utilization_frac`` x :func:`busy_frac_poisson`. [fraction]
    """
    busy_utilization_frac = require_fraction("busy_utilization_frac", busy_utilization_frac)
    return busy_utilization_frac * busy_frac_poisson(mean_in_flight)


def utilization_hpa_trace(
    target_pct: float,
    fleet_in_flight: float,
    start_replicas: int,
    max_replicas: int,
    warmup_s: float,
    duration_s: float,
    *,
    min_replicas: int = 1,
    busy_utilization_frac: float = 0.97,
):
    """Replicas over time under an HPA that targets GPU utilization, at a constant load.

    The HPA holds a Pods metric (``DCGM_FI_DEV_GPU_UTIL``, 0-100) at an
    ``AverageValue`` of ``target_pct``. Every Ready pod reports
    :func:`replica_utilization_frac` of its share of ``fleet_in_flight``;
    pods still warming report nothing, which the controller treats as it
    treats missing pods. Decisions come from
    :class:`planner.autoscaler.horizontal.HorizontalController`, every 15 s.

    Parameters
    ----------
    target_pct : float
        The HPA's utilization target. [%]
    fleet_in_flight : float
        Requests in flight across the fleet, held constant. [requests]
    start_replicas, max_replicas, min_replicas : int
        Replicas at t = 0 (all Ready), ``maxReplicas`` and ``minReplicas``. [replicas]
    warmup_s, duration_s : float
        Pod created -> Ready, and the time simulated. [s]
    busy_utilization_frac : float, optional
        See :func:`replica_utilization_frac`. [fraction]

    Returns
    -------
    pandas.DataFrame
        The rows of :func:`planner.dynamics.hpa_ramp.step_through_warmup`, plus
        ``utilization_pct``, the per-pod reading at that reconcile.
    """
    from planner.autoscaler.horizontal import HorizontalController, PodMetricsReading
    from planner.autoscaler.hpa_spec import HorizontalPodAutoscalerSpec, MetricSpec, MetricTarget
    from planner.autoscaler.replica_calculator import PodMetric
    from planner.dynamics.hpa_ramp import step_through_warmup

    target_pct = require_positive("target_pct", target_pct)
    fleet_in_flight = require_non_negative("fleet_in_flight", fleet_in_flight)
    if not 1 <= min_replicas <= start_replicas <= max_replicas:
        raise PlannerInputError(
            f"need 1 <= min_replicas <= start_replicas <= max_replicas, got {min_replicas}, "
            f"{start_replicas} and {max_replicas}"
        )
    spec = HorizontalPodAutoscalerSpec(
        name="gpu-utilization",
        max_replicas=int(max_replicas),
        min_replicas=int(min_replicas),
        metrics=(
            MetricSpec(
                "Pods",
                "DCGM_FI_DEV_GPU_UTIL",
                MetricTarget("AverageValue", average_value_milli=round(target_pct * 1000)),
            ),
        ),
    )
    readings_pct: list[float] = []

    def readings_for(ready: int, current: int):
        pct = 100.0 * float(replica_utilization_frac(fleet_in_flight / max(ready, 1), busy_utilization_frac))
        readings_pct.append(pct)
        milli = round(pct * 1000)
        return [PodMetricsReading({f"pod-{i}": PodMetric(milli, -1e9) for i in range(ready)})]

    trace = step_through_warmup(HorizontalController(spec), int(start_replicas), readings_for, warmup_s, duration_s)
    return trace.assign(utilization_pct=readings_pct)
