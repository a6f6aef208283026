"""The ``grace`` module sizes the termination grace period so scale-down never cuts a generation.

When the HPA removes a replica, Kubernetes runs the pod's preStop hook,
then sends SIGTERM, and sends SIGKILL once ``terminationGracePeriodSeconds``
(counted from the start of termination, preStop included) has passed.
vLLM's ``--shutdown-timeout`` (from v0.18.0) decides what SIGTERM does: 0,
the default, aborts every in-flight request; a value above 0 stops taking
new requests and lets running ones finish for up to that many seconds.

So three numbers must nest: the longest generation must finish within
the shutdown timeout, and the preStop time plus the shutdown timeout must
stay below the grace period.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from planner.errors import require_non_negative, require_positive

__all__ = [
    "DEFAULT_TERMINATION_GRACE_PERIOD_S",
    "DEFAULT_VLLM_SHUTDOWN_TIMEOUT_S",
    "GraceCheck",
    "GracePlan",
    "check_grace",
    "drain_time_s",
    "plan_grace",
]

DEFAULT_TERMINATION_GRACE_PERIOD_S = 30
"""Kubernetes' default ``terminationGracePeriodSeconds``."""
DEFAULT_VLLM_SHUTDOWN_TIMEOUT_S = 0
"""vLLM's default ``--shutdown-timeout``: abort in-flight requests on SIGTERM."""


def drain_time_s(max_output_tokens, itl_ms, ttft_ms=0.0):
    """Time the longest allowed generation needs to finish once started.

    Parameters
    ----------
    max_output_tokens : float or array_like
        The largest ``max_tokens`` the service accepts. [tokens]
    itl_ms : float or array_like
        Inter-token latency at the load the replica drains under; use a high
        percentile, not the mean. [ms]
    ttft_ms : float or array_like, optional
        Time to first token, for a request that has just been admitted. [ms]

    Returns
    -------
    float or numpy.ndarray
        ``ttft + max_output_tokens x itl``. [s]

    Examples
    --------
    >>> round(drain_time_s(4096, 50.0), 6)
    204.8
    """
    max_output_tokens = require_positive("max_output_tokens", max_output_tokens)
    itl_ms = require_positive("itl_ms", itl_ms)
    ttft_ms = require_non_negative("ttft_ms", ttft_ms)
    return (ttft_ms + max_output_tokens * itl_ms) / 1000.0


@dataclass(frozen=True)
class GracePlan:
    """Settings that let the longest generation finish on scale-down.

    Attributes
    ----------
    drain_time_s : float
        Longest generation's time to finish. [s]
    shutdown_timeout_s : int
        vLLM ``--shutdown-timeout``: the drain time plus the margin, rounded up. [s]
    pre_stop_s : int
        Time the preStop hook holds the pod (e.g. to leave the load balancer). [s]
    termination_grace_period_s : int
        ``terminationGracePeriodSeconds``: preStop + shutdown timeout + slack. [s]
    """

    drain_time_s: float
    shutdown_timeout_s: int
    pre_stop_s: int
    termination_grace_period_s: int


def plan_grace(drain_time_s, pre_stop_s=0.0, margin_frac=0.1, slack_s=5.0) -> GracePlan:
    """Recommend ``--shutdown-timeout`` and ``terminationGracePeriodSeconds``.

    Parameters
    ----------
    drain_time_s : float
        From :func:`drain_time_s`. [s]
    pre_stop_s : float, optional
        preStop hook duration. [s]
    margin_frac : float, optional
        Safety margin on the drain time, for ITL spikes while draining. [fraction]
    slack_s : float, optional
        Seconds between vLLM's deadline and SIGKILL, for process exit. [s]

    Returns
    -------
    GracePlan

    Examples
    --------
    >>> plan_grace(204.8, pre_stop_s=10)
    GracePlan(drain_time_s=204.8, shutdown_timeout_s=226, pre_stop_s=10, termination_grace_period_s=241)
    """
    drain_time_s = require_positive("drain_time_s", drain_time_s)
    pre_stop_s = math.ceil(require_non_negative("pre_stop_s", pre_stop_s))
    margin_frac = require_non_negative("margin_frac", margin_frac)
    slack_s = require_positive("slack_s", slack_s)
    shutdown_timeout_s = math.ceil(round(drain_time_s * (1.0 + margin_frac), 9))
    grace_s = math.ceil(pre_stop_s + shutdown_timeout_s + slack_s)
    return GracePlan(
        drain_time_s=drain_time_s,
        shutdown_timeout_s=shutdown_timeout_s,
        pre_stop_s=pre_stop_s,
        termination_grace_period_s=grace_s,
    )


@dataclass(frozen=True)
class GraceCheck:
    """The verdict on a deployment's shutdown settings.

    Attributes
    ----------
    ok : bool
        True when no generation up to the drain time is cut off.
    problems : tuple of str
        One sentence per problem found, empty when ``ok``.
    """

    ok: bool
    problems: tuple[str, ...]


def check_grace(
    termination_grace_period_s=DEFAULT_TERMINATION_GRACE_PERIOD_S,
    shutdown_timeout_s=DEFAULT_VLLM_SHUTDOWN_TIMEOUT_S,
    drain_time_s=0.0,
    pre_stop_s=0.0,
) -> GraceCheck:
    """Check that a pod's shutdown settings let its longest generation finish.

    Parameters
    ----------
    termination_grace_period_s : float, optional
        The pod's ``terminationGracePeriodSeconds``. [s]
    shutdown_timeout_s : float, optional
        vLLM's ``--shutdown-timeout``. [s]
    drain_time_s : float, optional
        The longest generation's time to finish (:func:`drain_time_s`). [s]
    pre_stop_s : float, optional
        preStop hook duration, which runs before SIGTERM. [s]

    Returns
    -------
    GraceCheck

    Examples
    --------
    >>> check_grace(30, 0, 204.8).ok
    False
    """
    grace = require_positive("termination_grace_period_s", termination_grace_period_s)
    shutdown = require_non_negative("shutdown_timeout_s", shutdown_timeout_s)
    drain = require_non_negative("drain_time_s", drain_time_s)
    pre_stop = require_non_negative("pre_stop_s", pre_stop_s)
    problems = []
    if shutdown == 0 and drain > 0:
        problems.append(
            "--shutdown-timeout is 0, so SIGTERM aborts every in-flight request; "
            f"set it to at least {math.ceil(drain)} s"
        )
    elif shutdown < drain:
        problems.append(
            f"--shutdown-timeout {shutdown:g} s is shorter than the {drain:g} s the longest generation needs"
        )
    if pre_stop + shutdown >= grace:
        problems.append(
            f"preStop {pre_stop:g} s + --shutdown-timeout {shutdown:g} s does not stay below "
            f"terminationGracePeriodSeconds {grace:g} s, so SIGKILL can land mid-drain"
        )
    if grace - pre_stop < drain:
        problems.append(
            f"terminationGracePeriodSeconds {grace:g} s leaves {max(0.0, grace - pre_stop):g} s "
            f"after preStop, less than the {drain:g} s the longest generation needs"
        )
    return GraceCheck(ok=not problems, problems=tuple(problems))
