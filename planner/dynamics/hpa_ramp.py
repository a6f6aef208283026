"""The ``hpa_ramp`` module steps an HPA through time while the pods it adds take a warmup to become Ready.

It is the smallest loop that shows how a controller's decisions compound:
every sync period the :class:`planner.autoscaler.horizontal.HorizontalController`
sees readings that depend on how many pods are Ready, and pods it adds
count only ``warmup_s`` later. The load itself is whatever the caller's
``readings_for`` function makes of the Ready count; there is no queueing
model here (the fleet simulator has one).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import pandas as pd

from planner.autoscaler.defaults import DEFAULT_SYNC_PERIOD_S
from planner.autoscaler.horizontal import HorizontalController
from planner.autoscaler.replica_calculator import ready_pods

__all__ = ["step_through_warmup"]


def step_through_warmup(
    controller: HorizontalController,
    start_replicas: int,
    readings_for: Callable[[int, int], Sequence],
    warmup_s: float,
    duration_s: float,
    *,
    sync_period_s: float = DEFAULT_SYNC_PERIOD_S,
) -> pd.DataFrame:
    """Reconcile every ``sync_period_s`` for ``duration_s``; new pods become Ready after ``warmup_s``.

    Parameters
    ----------
    controller : HorizontalController
        Stepped in place (its history carries over between calls).
    start_replicas : int
        Replicas at t = 0, all Ready. [replicas]
    readings_for : callable
        ``readings_for(ready_replicas, current_replicas)`` returns one reading
        per metric of the controller's HPA.
    warmup_s : float
        Pod created -> Ready. [s]
    duration_s : float
        Simulated time. [s]
    sync_period_s : float, optional
        Time between reconciles. [s]

    Returns
    -------
    pandas.DataFrame
        One row per reconcile: ``t_s``, ``ready_replicas`` and
        ``current_replicas`` before it, ``desired_replicas`` after it, and
        the ``ScalingLimited`` ``reason``.

    Notes
    -----
    On a scale-down the newest pods (the ones still warming first) go first.
    """
    if warmup_s < 0 or duration_s < 0 or sync_period_s <= 0:
        raise ValueError("warmup_s and duration_s must be >= 0 and sync_period_s > 0")
    created = [float("-inf")] * start_replicas  # creation time of each pod, oldest first
    rows = []
    steps = int(duration_s // sync_period_s) + 1
    for step in range(steps):
        now_s = step * sync_period_s
        current = len(created)
        ready = sum(1 for t in created if t + warmup_s <= now_s)
        pods = ready_pods(ready, current - ready, now_s=now_s)
        result = controller.reconcile_autoscaler(now_s, current, readings_for(ready, current), pods=pods)
        desired = result.desired_replicas
        if desired > current:
            created.extend([now_s] * (desired - current))
        elif desired < current:
            del created[desired:]
        reason = result.scaling_limited.reason if result.scaling_limited is not None else ""
        rows.append((now_s, ready, current, desired, reason))
    return pd.DataFrame(rows, columns=["t_s", "ready_replicas", "current_replicas", "desired_replicas", "reason"])
