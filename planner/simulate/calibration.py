"""The ``calibration`` module drives one simulated replica the way a load-test client drives a server.

A load test's step is a request rate (Poisson arrivals, or all at once for
``inf``) and an optional concurrency cap (``--max-concurrency`` in ``vllm
bench serve``; GuideLLM's concurrent streams): a request is sent at its
scheduled time or when a slot frees, whichever is later, so a capped step is
a closed loop. :func:`simulate_sweep` runs every step of a sweep through
:func:`planner.simulate.replica.advance_replica` with the replica built from
the sweep's own step-time fit, and reports the columns the knee is found on.

The model has no per-step variance (every sequence in a batch sees the same
step), so it reproduces mean TPOT, not the tail of the inter-token
latency, which prefill stalls drive in a real server.
"""

from __future__ import annotations

import heapq
import math
from collections import deque
from dataclasses import dataclass

import numpy as np
import pandas as pd

from planner.capacity.step_time import StepTimeFit
from planner.errors import PlannerInputError
from planner.simulate.replica import ReplicaSpec, RequestState, advance_replica

__all__ = ["LoadLevel", "replica_from_fit", "run_load_level", "simulate_sweep"]

CALIBRATION_TICK_S = 0.1
"""Tick for load-level runs: a client's next request is sent up to one tick late. [s]"""


def replica_from_fit(
    fit: StepTimeFit, *, max_num_seqs: int = 256, kv_tokens: int = 10**9, prefill_ms_per_token: float = 0.0
) -> ReplicaSpec:
    """A replica whose step time is a load test's fit (``thresholds_from_loadtest(...).tpot_fit``)."""
    if fit is None:
        raise PlannerInputError("the load test has no step-time fit (it needs two or more batch sizes)")
    return ReplicaSpec(
        fixed_ms=fit.fixed_ms,
        per_sequence_ms=max(fit.per_sequence_ms, 0.0),
        max_num_seqs=max_num_seqs,
        kv_tokens=kv_tokens,
        prefill_ms_per_token=prefill_ms_per_token,
    )


@dataclass(frozen=True)
class LoadLevel:
    """One simulated load level: per-request TTFT and TPOT, and the mean requests in flight."""

    ttft_ms: np.ndarray
    tpot_ms: np.ndarray
    mean_concurrency: float


def run_load_level(
    replica: ReplicaSpec,
    *,
    num_requests: int,
    input_tokens: int,
    output_tokens: int,
    request_rate_rps: float = math.inf,
    concurrency: float = math.inf,
    seed: int = 0,
    tick_s: float = CALIBRATION_TICK_S,
) -> LoadLevel:
    """Send ``num_requests`` identical requests at ``request_rate_rps`` with at most ``concurrency`` in flight."""
    if num_requests < 1 or output_tokens < 1 or input_tokens < 0:
        raise PlannerInputError("a load level needs at least one request with at least one output token")
    rng = np.random.default_rng(seed)
    if math.isfinite(request_rate_rps):
        scheduled_s = np.cumsum(rng.exponential(1.0 / request_rate_rps, num_requests))
    else:
        scheduled_s = np.zeros(num_requests)
    req = RequestState(scheduled_s.copy(), np.full(num_requests, input_tokens), np.full(num_requests, output_tokens))
    slots = int(min(concurrency, num_requests)) if math.isfinite(concurrency) else num_requests
    free_at = [0.0] * slots  # when each client slot can send again
    running: list[int] = []
    waiting: deque = deque()
    sent = finished = 0
    k = 0
    while finished < num_requests:
        t0, t1 = k * tick_s, (k + 1) * tick_s
        while sent < num_requests and free_at and max(free_at[0], scheduled_s[sent]) < t1:
            req.arrival_s[sent] = max(heapq.heappop(free_at), scheduled_s[sent])
            waiting.append(sent)
            sent += 1
        tick = advance_replica(t0, tick_s, running, waiting, req, replica)
        for i in tick.completed:
            heapq.heappush(free_at, float(req.done_s[i]))
        finished += len(tick.completed)
        k += 1
        if k > 10**7:
            raise PlannerInputError("load level did not finish")  # a replica that cannot serve the request
    ttft_ms = (req.first_token_s - req.arrival_s) * 1000.0
    tpot_ms = (req.done_s - req.first_token_s) / max(output_tokens - 1, 1) * 1000.0
    makespan_s = float(req.done_s.max() - req.arrival_s.min())
    in_flight_s = float((req.done_s - req.arrival_s).sum())
    return LoadLevel(ttft_ms, tpot_ms, in_flight_s / makespan_s)


def simulate_sweep(
    steps: pd.DataFrame, replica: ReplicaSpec, *, seed: int = 0, tick_s: float = CALIBRATION_TICK_S
) -> pd.DataFrame:
    """Every step of a load-test sweep (as :func:`planner.readers.loadtest.read_loadtest` returns it), simulated.

    Each step uses its own request rate, concurrency cap, request count and
    mean token lengths. Returns one row per step with ``concurrency``,
    ``request_rate_rps``, ``mean_concurrency``, ``ttft_p99_ms``, ``tpot_mean_ms``,
    ``tpot_p99_ms`` and ``preemptions`` (0: the cache is not modelled as binding here).
    """
    rows = []
    for position, step in enumerate(steps.itertuples(index=False)):
        count = step.completed_requests
        if not np.isfinite(count) or count < 1:
            count = 200
        rate = step.request_rate_rps if np.isfinite(step.request_rate_rps) else math.inf
        cap = step.concurrency if np.isfinite(step.concurrency) else math.inf
        level = run_load_level(
            replica,
            num_requests=int(count),
            input_tokens=round(step.mean_input_tokens),
            output_tokens=round(step.mean_output_tokens),
            request_rate_rps=rate,
            concurrency=cap,
            seed=seed + position,
            tick_s=tick_s,
        )
        rows.append(
            {
                "concurrency": step.concurrency,
                "request_rate_rps": step.request_rate_rps,
                "mean_concurrency": level.mean_concurrency,
                "ttft_p99_ms": float(np.percentile(level.ttft_ms, 99)),
                "tpot_mean_ms": float(level.tpot_ms.mean()),
                "tpot_p99_ms": float(np.percentile(level.tpot_ms, 99)),
                "preemptions": 0.0,
            }
        )
    return pd.DataFrame(rows)
