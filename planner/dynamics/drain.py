"""The ``drain`` module estimates which in-flight generations a scale-down cuts off.

A terminating pod keeps serving while its preStop hook runs; at SIGTERM vLLM
either aborts what it holds (``--shutdown-timeout 0``) or drains it for up to
the shutdown timeout; SIGKILL ends everything at ``terminationGracePeriodSeconds``
counted from the start of termination. :func:`drain_window_s` turns those
three settings into the seconds a request in flight at the start of
termination has left to finish.

Which requests are cut then depends on how much of its generation each
in-flight request still has to do. For a replica in steady state whose
requests are independent of each other (arrivals of a stationary process,
as in an M/G/inf system), a request found in flight at a random instant is
length-biased and its remaining time follows the equilibrium distribution of
the request durations ``D``: ``P(remaining > w) = E[(D - w)+] / E[D]``
(:func:`cut_frac`). The model is an approximation in three ways:

- inter-token latency is held constant, although it falls as the batch
  empties during a drain, so long generations finish a little sooner than
  assumed (pessimistic);
- a request's duration is ``ttft + tokens x itl`` with no time queued, so a
  request still waiting for a batch slot when termination starts needs more
  than assumed (optimistic above the knee; below it nothing waits);
- requests that still arrive between the start of termination and the pod's
  removal from the Service's endpoints are not counted (optimistic; a preStop
  hook that outlasts that removal makes them rare).

A simulated hour of Poisson arrivals agrees with it within a percentage
point (``tests/dynamics/test_drain.py``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from planner.dynamics.grace import GraceCheck, GracePlan, check_grace, drain_time_s, plan_grace
from planner.errors import (
    PlannerInputError,
    require_fraction,
    require_non_negative,
    require_positive,
)

__all__ = [
    "OUTPUT_LENGTH_SHAPES",
    "DrainReview",
    "OutputLengths",
    "cut_frac",
    "cut_requests",
    "drain_window_s",
    "empirical_output_lengths",
    "output_lengths",
    "review_drain",
    "shutdown_settings",
]

OUTPUT_LENGTH_SHAPES = ("geometric", "uniform", "max")
"""Named shapes of :func:`output_lengths`."""


@dataclass(frozen=True, eq=False)
class OutputLengths:
    """A distribution of generation lengths, as a probability mass function.

    Attributes
    ----------
    tokens : numpy.ndarray
        Distinct output lengths, increasing. [tokens]
    prob : numpy.ndarray
        Probability of each length; sums to 1. [fraction]
    """

    tokens: np.ndarray
    prob: np.ndarray

    @property
    def mean_tokens(self) -> float:
        """Mean output length. [tokens]"""
        return float(np.dot(self.tokens, self.prob))

    @property
    def max_tokens(self) -> int:
        """Longest output length with non-zero probability. [tokens]"""
        return int(self.tokens[self.prob > 0].max())


def output_lengths(max_output_tokens, shape: str = "geometric", mean_output_tokens=None) -> OutputLengths:
    """A model of output lengths, capped at ``max_output_tokens``.

    Parameters
    ----------
    max_output_tokens : int
        The largest ``max_tokens`` the service accepts; a generation that
        would run longer stops there. [tokens]
    shape : {"geometric", "uniform", "max"}, optional
        ``geometric``: each token ends the answer with probability
        1 / ``mean_output_tokens``, and whatever would run past the cap is
        cut to it (so the cap holds a lump of probability). ``uniform``: every
        length from 1 to the cap equally likely. ``max``: every answer runs
        to the cap (the worst case).
    mean_output_tokens : float, optional
        Mean of the uncapped geometric distribution; required for
        ``geometric``. [tokens]

    Returns
    -------
    OutputLengths

    Examples
    --------
    >>> output_lengths(4, "uniform").mean_tokens
    2.5
    >>> round(float(output_lengths(4096, "geometric", 4096).prob[-1]), 3)
    0.368
    """
    cap = require_positive("max_output_tokens", max_output_tokens)
    if cap != math.floor(cap):
        raise PlannerInputError(f"max_output_tokens: expected a whole number of tokens, got {cap:g}")
    cap = int(cap)
    tokens = np.arange(1, cap + 1, dtype=float)
    if shape == "max":
        return OutputLengths(np.array([float(cap)]), np.array([1.0]))
    if shape == "uniform":
        return OutputLengths(tokens, np.full(cap, 1.0 / cap))
    if shape == "geometric":
        if mean_output_tokens is None:
            raise PlannerInputError("mean_output_tokens: required for the geometric shape")
        mean = float(require_positive("mean_output_tokens", mean_output_tokens))
        if mean < 1.0:
            raise PlannerInputError(f"mean_output_tokens: expected at least 1 token, got {mean:g}")
        stop = 1.0 / mean
        # P(L = k) = stop (1 - stop)^(k-1) below the cap; the tail beyond it lands on the cap.
        prob = stop * (1.0 - stop) ** (tokens - 1.0)
        prob[-1] = (1.0 - stop) ** (cap - 1.0)
        return OutputLengths(tokens, prob / prob.sum())
    raise PlannerInputError(f"shape: expected one of {', '.join(OUTPUT_LENGTH_SHAPES)}, got {shape!r}")


def empirical_output_lengths(output_tokens, max_output_tokens=None) -> OutputLengths:
    """The output lengths a trace recorded, optionally capped at ``max_output_tokens``.

    Parameters
    ----------
    output_tokens : array_like
        One output length per request, e.g. a trace's ``output_tokens``. [tokens]
    max_output_tokens : int, optional
        Cap to apply, as the service's ``max_tokens`` would. [tokens]

    Returns
    -------
    OutputLengths

    Examples
    --------
    >>> lengths = empirical_output_lengths([10, 10, 300], max_output_tokens=100)
    >>> lengths.tokens.tolist(), lengths.prob.round(3).tolist()
    ([10.0, 100.0], [0.667, 0.333])
    """
    tokens = np.asarray(output_tokens, dtype=float).ravel()
    if tokens.size == 0:
        raise PlannerInputError("output_tokens: expected at least one request, got none")
    bad = ~np.isfinite(tokens) | (tokens < 1)
    if bad.any():
        index = int(np.argmax(bad))
        raise PlannerInputError(
            f"output_tokens: expected at least 1 token per request, got {tokens[index]:g} at index {index}"
        )
    if max_output_tokens is not None:
        tokens = np.minimum(tokens, require_positive("max_output_tokens", max_output_tokens))
    values, counts = np.unique(tokens, return_counts=True)
    return OutputLengths(values, counts / counts.sum())


def drain_window_s(termination_grace_period_s, shutdown_timeout_s, pre_stop_s=0.0):
    """Seconds a request in flight when termination starts has to finish.

    The pod keeps serving during preStop. With ``--shutdown-timeout 0``
    SIGTERM aborts everything, so the window ends with preStop; with a
    positive timeout vLLM drains until preStop + timeout. SIGKILL at the
    grace period ends the window in every case.

    Parameters
    ----------
    termination_grace_period_s : float or array_like
        ``terminationGracePeriodSeconds``. [s]
    shutdown_timeout_s : float or array_like
        vLLM's ``--shutdown-timeout``; 0 aborts at SIGTERM. [s]
    pre_stop_s : float or array_like, optional
        preStop hook duration. [s]

    Returns
    -------
    float or numpy.ndarray
        ``min(pre_stop, grace)`` when the timeout is 0, else
        ``min(pre_stop + timeout, grace)``. [s]

    Examples
    --------
    >>> float(drain_window_s(30, 0, 5))
    5.0
    >>> float(drain_window_s(30, 226, 10))
    30.0
    >>> float(drain_window_s(241, 226, 10))
    236.0
    """
    grace = np.asarray(require_positive("termination_grace_period_s", termination_grace_period_s), dtype=float)
    shutdown = np.asarray(require_non_negative("shutdown_timeout_s", shutdown_timeout_s), dtype=float)
    pre_stop = np.asarray(require_non_negative("pre_stop_s", pre_stop_s), dtype=float)
    window = np.minimum(np.where(shutdown > 0, pre_stop + shutdown, pre_stop), grace)
    return window if window.ndim else float(window)


def cut_frac(drain_window_s, lengths: OutputLengths, itl_ms, ttft_ms=0.0):
    """Fraction of the generations in flight at termination that are cut off.

    Parameters
    ----------
    drain_window_s : float or array_like
        Time they have to finish (the function :func:`drain_window_s`). [s]
    lengths : OutputLengths
        Distribution of output lengths.
    itl_ms : float
        Inter-token latency while draining. [ms]
    ttft_ms : float, optional
        Time to first token. [ms]

    Returns
    -------
    float or numpy.ndarray
        ``E[(D - w)+] / E[D]`` with ``D = ttft + tokens x itl``: the share of
        requests in flight whose remaining time exceeds the window, for
        stationary independent arrivals. 1 at a window of 0, 0 from the
        longest generation's duration on. [fraction]

    Examples
    --------
    >>> every_answer_full = output_lengths(4096, "max")
    >>> round(float(cut_frac(30.0, every_answer_full, 50.0)), 4)  # W37: 1 - 30 / 204.8
    0.8535
    >>> float(cut_frac(204.8, every_answer_full, 50.0))
    0.0
    """
    if not isinstance(lengths, OutputLengths):
        raise PlannerInputError(f"lengths: expected OutputLengths, got {type(lengths).__name__}")
    itl_ms = require_positive("itl_ms", itl_ms)
    ttft_ms = require_non_negative("ttft_ms", ttft_ms)
    window = np.asarray(require_non_negative("drain_window_s", drain_window_s), dtype=float)
    # Same arithmetic as planner.dynamics.grace.drain_time_s, so a window of exactly that length cuts nothing.
    duration_s = (ttft_ms + lengths.tokens * itl_ms) / 1000.0
    weight = lengths.prob * duration_s
    # E[(D - w)+] from suffix sums over the sorted durations: O(n + m log n) for m windows.
    tail_weight = np.append(np.cumsum(weight[::-1])[::-1], 0.0)
    tail_prob = np.append(np.cumsum(lengths.prob[::-1])[::-1], 0.0)
    mean_s = tail_weight[0]  # the same sum as the window-0 excess, so a window of 0 gives exactly 1
    first_longer = np.searchsorted(duration_s, window, side="right")
    excess = tail_weight[first_longer] - window * tail_prob[first_longer]
    frac = np.clip(excess / mean_s, 0.0, 1.0)
    return frac if frac.ndim else float(frac)


def cut_requests(in_flight_requests, frac):
    """Requests one scale-down cuts off, on average.

    Parameters
    ----------
    in_flight_requests : float or array_like
        Requests the removed replica holds when its termination starts. [requests]
    frac : float or array_like
        From :func:`cut_frac`. [fraction]

    Returns
    -------
    float or numpy.ndarray
        ``in_flight x frac``. [requests]

    Examples
    --------
    >>> cut_requests(40, 0.25)
    10.0
    """
    in_flight = require_non_negative("in_flight_requests", in_flight_requests)
    return in_flight * require_fraction("frac", frac, allow_zero=True)


def shutdown_settings(plan: GracePlan, container: str = "vllm") -> dict:
    """The pod-template patch that applies ``plan``, as a mapping ready to dump as YAML.

    The same shape as the workload patch of :mod:`planner.manifests.generate`:
    ``terminationGracePeriodSeconds`` and, when ``plan.pre_stop_s`` > 0, a
    preStop ``sleep`` action. ``--shutdown-timeout`` is left out on purpose: a
    strategic-merge patch replaces a container's whole ``args`` list, so the
    flag must be added to the existing arguments by hand.

    Parameters
    ----------
    plan : GracePlan
        From :func:`planner.dynamics.grace.plan_grace`.
    container : str, optional
        Name of the vLLM container.

    Returns
    -------
    dict
        ``{"spec": {"template": {"spec": ...}}}``.

    Examples
    --------
    >>> from planner.dynamics.grace import plan_grace
    >>> spec = shutdown_settings(plan_grace(204.8, pre_stop_s=10))["spec"]["template"]["spec"]
    >>> spec["terminationGracePeriodSeconds"], spec["containers"][0]["lifecycle"]["preStop"]
    (241, {'sleep': {'seconds': 10}})
    """
    if not isinstance(plan, GracePlan):
        raise PlannerInputError(f"plan: expected a GracePlan, got {type(plan).__name__}")
    pod: dict = {"terminationGracePeriodSeconds": plan.termination_grace_period_s}
    if plan.pre_stop_s > 0:
        pod["containers"] = [{"name": container, "lifecycle": {"preStop": {"sleep": {"seconds": plan.pre_stop_s}}}}]
    return {"spec": {"template": {"spec": pod}}}


@dataclass(frozen=True)
class DrainReview:
    """One pod's shutdown settings against its longest generation, and the settings to apply instead.

    The chapter's text, its table and its explorer all read these numbers, so
    they cannot disagree.

    Attributes
    ----------
    longest_s : float
        The longest generation's time to finish (:func:`planner.dynamics.grace.drain_time_s`). [s]
    window_s : float
        Time a request in flight at the start of termination has (:func:`drain_window_s`). [s]
    cut_frac : float
        Share of the generations in flight that one scale-down cuts (:func:`cut_frac`). [fraction]
    cut_requests : float
        The same, in requests, for the replica's in-flight count. [requests]
    current : GraceCheck
        The verdict on the current settings.
    plan : GracePlan
        The recommendation, with the planned preStop and margin.
    """

    longest_s: float
    window_s: float
    cut_frac: float
    cut_requests: float
    current: GraceCheck
    plan: GracePlan


def review_drain(
    lengths: OutputLengths,
    *,
    max_output_tokens,
    itl_ms,
    ttft_ms=0.0,
    in_flight_requests=0.0,
    termination_grace_period_s,
    shutdown_timeout_s,
    pre_stop_s,
    planned_pre_stop_s,
    margin_frac=0.1,
) -> DrainReview:
    """What the current settings cut, and what to set instead.

    Parameters
    ----------
    lengths : OutputLengths
        Distribution of output lengths.
    max_output_tokens : int
        The largest ``max_tokens`` the service accepts. [tokens]
    itl_ms : float
        Inter-token latency while draining. [ms]
    ttft_ms : float, optional
        Time to first token. [ms]
    in_flight_requests : float, optional
        Requests a replica holds when it is removed. [requests]
    termination_grace_period_s, shutdown_timeout_s, pre_stop_s : float
        The current settings. [s]
    planned_pre_stop_s : float
        The preStop the recommendation plans for (the current one may be 0). [s]
    margin_frac : float, optional
        Safety margin on the drain time. [fraction]

    Returns
    -------
    DrainReview

    Examples
    --------
    >>> review = review_drain(output_lengths(4096, "max"), max_output_tokens=4096, itl_ms=50.0,
    ...                       termination_grace_period_s=30, shutdown_timeout_s=0, pre_stop_s=0,
    ...                       planned_pre_stop_s=10)
    >>> review.cut_frac, review.plan.shutdown_timeout_s, review.plan.termination_grace_period_s
    (1.0, 226, 241)
    """
    longest_s = float(drain_time_s(max_output_tokens, itl_ms, ttft_ms))
    window_s = float(drain_window_s(termination_grace_period_s, shutdown_timeout_s, pre_stop_s))
    frac = float(cut_frac(window_s, lengths, itl_ms, ttft_ms))
    return DrainReview(
        longest_s=longest_s,
        window_s=window_s,
        cut_frac=frac,
        cut_requests=float(cut_requests(in_flight_requests, frac)),
        current=check_grace(termination_grace_period_s, shutdown_timeout_s, longest_s, pre_stop_s),
        plan=plan_grace(longest_s, pre_stop_s=planned_pre_stop_s, margin_frac=margin_frac),
    )
