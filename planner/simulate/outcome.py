"""The ``outcome`` module turns a finished run into what a team asks: did users get served, at what cost.

Definitions (all counted over the requests that arrived in the simulated window):

* **TTFT** = first token - arrival (queue wait, plus prefill, plus one step);
  **ITL** = mean time between a request's output tokens.
* **Attainment** = fraction of requests whose TTFT is at most the objective
  (and whose ITL is at most its objective, if one is set). A request cut off
  by a pod's termination, or without a first token when the run ends, misses.
* **Cost** = GPU-hours billed from each pod's request to its removal (cold
  start and drain included) x $ per GPU-hour.
* **Scale events**: replica-count changes the controller wrote.
  **Direction changes**: consecutive scale events in opposite directions.
  **Flap cycles**: scale-ups that follow a scale-down, i.e. capacity the
  controller removed and then asked for again.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass

import numpy as np
import pandas as pd

from planner.simulate.replica import CUT, RequestState
from planner.simulate.supply import SupplyOutcome

__all__ = ["Outcome", "count_flaps", "request_latencies", "slo_attainment_frac", "slo_met"]


@dataclass(frozen=True)
class Outcome:
    """The result of one simulated run.

    Attributes
    ----------
    engine : str
        Which engine produced it.
    requests, completed : int
        Requests that arrived in the window, and those that finished.
    slo_attainment_frac : float
        Share meeting the objective(s). [fraction]
    ttft_p50_s, ttft_p99_s : float
        TTFT percentiles over requests that got a first token. [s]
    itl_mean_ms : float
        Mean of the per-request mean ITL. [ms]
    gpu_hours, cost_usd : float
        Billed GPU time, and its price. [GPU-h], [$]
    scale_events, direction_changes, flap_cycles : int
        See the module docstring.
    peak_replicas : int
        Most pods existing (not terminating) at once.
    peak_waiting : int
        Most requests queued at once (in pods' queues and at the gateway).
    cut_generations : int
        Requests cut off by a pod's termination.
    preemptions : int
        KV-cache preemptions.
    events : tuple of (float, int, int)
        Scale events: time [s], replicas before, replicas after.
    timeseries : pandas.DataFrame
        One row per tick: ``t_s``, ``demand_tps`` and ``ready_capacity_tps``
        [output tokens/s], ``running``, ``waiting``, ``replicas_requested``,
        ``replicas_ready``, ``replicas_live``, ``signal`` (the first
        trigger's value as the controller would read it).
    arrival_s, ttft_s, latency_s : numpy.ndarray
        Per request: arrival, time to first token, time to last token (NaN if not reached). [s]
    slo_met : numpy.ndarray of bool
        Per request: met the objective(s).
    supply : SupplyOutcome or None
        With a node pool: node-hours, peak nodes, pending time and time to
        ready; ``cost_usd`` is then counted per node, and ``timeseries`` has
        ``nodes_ready``, ``nodes_provisioning``, ``pods_pending`` and ``pods_loading``.
    """

    engine: str
    requests: int
    completed: int
    slo_attainment_frac: float
    ttft_p50_s: float
    ttft_p99_s: float
    itl_mean_ms: float
    gpu_hours: float
    cost_usd: float
    scale_events: int
    direction_changes: int
    flap_cycles: int
    peak_replicas: int
    peak_waiting: int
    cut_generations: int
    preemptions: int
    events: tuple[tuple[float, int, int], ...]
    timeseries: pd.DataFrame
    arrival_s: np.ndarray
    ttft_s: np.ndarray
    latency_s: np.ndarray
    slo_met: np.ndarray
    supply: SupplyOutcome | None = None

    def attainment_between(self, start_s: float, end_s: float) -> float:
        """Attainment of the requests arriving in ``[start_s, end_s)``. [fraction]"""
        window = (self.arrival_s >= start_s) & (self.arrival_s < end_s)
        return float(self.slo_met[window].mean()) if window.any() else float("nan")

    def summary(self) -> dict:
        """The scalar fields, for JSON."""
        return {
            "engine": self.engine,
            "requests": self.requests,
            "completed": self.completed,
            "slo_attainment_frac": self.slo_attainment_frac,
            "ttft_p50_s": self.ttft_p50_s,
            "ttft_p99_s": self.ttft_p99_s,
            "itl_mean_ms": self.itl_mean_ms,
            "gpu_hours": self.gpu_hours,
            "cost_usd": self.cost_usd,
            "scale_events": self.scale_events,
            "direction_changes": self.direction_changes,
            "flap_cycles": self.flap_cycles,
            "peak_replicas": self.peak_replicas,
            "peak_waiting": self.peak_waiting,
            "cut_generations": self.cut_generations,
            "preemptions": self.preemptions,
        } | ({} if self.supply is None else self.supply.summary())


def request_latencies(req: RequestState) -> tuple[np.ndarray, np.ndarray]:
    """Per request: TTFT [s] and mean ITL [ms] (NaN where not reached)."""
    ttft_s = req.first_token_s - req.arrival_s
    tokens_after_first = req.output_tokens - 1
    with np.errstate(invalid="ignore", divide="ignore"):
        itl_ms = np.where(tokens_after_first > 0, (req.done_s - req.first_token_s) / tokens_after_first * 1000.0, 0.0)
    itl_ms = np.where(np.isfinite(req.done_s), itl_ms, np.nan)
    return ttft_s, itl_ms


def slo_met(
    req: RequestState,
    ttft_slo_s: float,
    itl_slo_ms: float | None = None,
    latencies: tuple[np.ndarray, np.ndarray] | None = None,
) -> np.ndarray:
    """Per request: whether it met the TTFT objective (and ITL, if given).

    ``latencies`` is :func:`request_latencies` of ``req``, when the caller has it already.
    """
    ttft_s, itl_ms = latencies if latencies is not None else request_latencies(req)
    ok = np.isfinite(ttft_s) & (ttft_s <= ttft_slo_s + 1e-9) & (req.status != CUT)
    if itl_slo_ms is not None:
        ok &= np.isfinite(itl_ms) & (itl_ms <= itl_slo_ms + 1e-9)
    return ok


def slo_attainment_frac(req: RequestState, ttft_slo_s: float, itl_slo_ms: float | None = None) -> float:
    """Fraction of requests meeting the TTFT objective (and ITL, if given). [fraction]"""
    if len(req) == 0:
        return float("nan")
    return float(np.count_nonzero(slo_met(req, ttft_slo_s, itl_slo_ms)) / len(req))


def count_flaps(events) -> tuple[int, int]:
    """(direction changes, flap cycles) of a sequence of ``(t, from, to)`` scale events."""
    directions = [1 if to > before else -1 for _, before, to in events if to != before]
    changes = sum(1 for a, b in itertools.pairwise(directions) if a != b)
    flaps = sum(1 for a, b in itertools.pairwise(directions) if a < 0 < b)
    return changes, flaps
