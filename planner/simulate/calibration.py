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

:func:`fit_prefill` reads the prefill cost off the same sweep's time to first
token: with several prompt lengths, the least-squares line of TTFT against
prompt length at each length's lightest step; with one, that length's
lightest-step TTFT p50 less one decode step, over its prompt tokens. A
measured TPOT already carries the prompt chunks its steps shared, so a
replica that models them itself (:func:`replica_from_loadtest`) takes its
step time from :func:`decode_step_fit`, the TPOT with that share removed.
"""

from __future__ import annotations

import heapq
import math
from collections import deque
from dataclasses import dataclass

import numpy as np
import pandas as pd

from planner.capacity.knee import LoadTestThresholds
from planner.capacity.kv_cache import DEFAULT_MAX_NUM_BATCHED_TOKENS
from planner.capacity.step_time import StepTimeFit, fit_step_time
from planner.errors import PlannerInputError
from planner.simulate.replica import ReplicaSpec, RequestState, advance_replica

__all__ = [
    "LoadLevel",
    "PrefillFit",
    "decode_step_fit",
    "fit_prefill",
    "replica_from_fit",
    "replica_from_loadtest",
    "run_load_level",
    "simulate_sweep",
]

CALIBRATION_TICK_S = 0.1
"""Tick for load-level runs: a client's next request is sent up to one tick late. [s]"""


@dataclass(frozen=True)
class PrefillFit:
    """The prefill cost a load test's time to first token implies.

    Attributes
    ----------
    prefill_ms_per_token : float
        Time a prompt token adds to the first token (0 when the fit's slope
        is negative: the sweep shows none). [ms/token]
    method : str
        ``least-squares`` (several prompt lengths) or ``lightest-step`` (one).
    input_tokens : tuple of float
        The prompt lengths used, one per point. [tokens]
    ttft_ms : tuple of float
        Their lightest steps' TTFT p50 (the mean where the file has no p50). [ms]
    step_ms : float
        The TTFT left at a zero-token prompt: the fitted intercept, or the
        decode step subtracted. [ms]
    """

    prefill_ms_per_token: float
    method: str
    input_tokens: tuple[float, ...]
    ttft_ms: tuple[float, ...]
    step_ms: float


SAME_LENGTH_FRAC = 0.1
"""Mean prompt lengths this close (relative) are one length to :func:`fit_prefill`. [fraction]"""


def fit_prefill(steps: pd.DataFrame, fit: StepTimeFit | None) -> PrefillFit:
    """Fit the prefill cost per prompt token from a sweep's TTFT against prompt length.

    Parameters
    ----------
    steps : pandas.DataFrame
        A sweep as :func:`planner.readers.loadtest.read_loadtest` returns it
        (lightest step first): ``mean_input_tokens``, ``ttft_p50_ms`` or
        ``ttft_mean_ms``, and the step variable.
    fit : StepTimeFit or None
        The sweep's step-time fit (``thresholds_from_loadtest(...).tpot_fit``):
        with one prompt length, the decode step at the lightest step's batch
        is subtracted from its TTFT. Unused with several lengths.

    Returns
    -------
    PrefillFit

    Raises
    ------
    PlannerInputError
        No step has both a prompt length and a TTFT, or one length and no fit.

    Notes
    -----
    At the lightest step a request waits for no other, so its TTFT is its
    prefill plus the step that emits its first token (plus client and
    network overheads the fit cannot tell from prefill). Each prompt length
    counts once, at its lightest step, so a loaded step's queueing does not
    steepen the line.
    """
    ttft = steps["ttft_p50_ms"].to_numpy(dtype=float) if "ttft_p50_ms" in steps else np.full(len(steps), np.nan)
    if "ttft_mean_ms" in steps:
        ttft = np.where(np.isfinite(ttft), ttft, steps["ttft_mean_ms"].to_numpy(dtype=float))
    tokens = steps["mean_input_tokens"].to_numpy(dtype=float) if "mean_input_tokens" in steps else ttft * np.nan
    usable = np.flatnonzero(np.isfinite(ttft) & np.isfinite(tokens) & (tokens > 0))
    if usable.size == 0:
        raise PlannerInputError(
            "the load test has no step with both a mean prompt length (mean_input_tokens) and a TTFT "
            "(ttft_p50_ms or ttft_mean_ms) to fit the prefill cost on"
        )
    # Steps come lightest first: each prompt length's first step is its point. Lengths within
    # SAME_LENGTH_FRAC of a point's are that length (a dataset's sample mean moves from step to step).
    points: list[int] = []
    for position in usable:
        if all(abs(tokens[position] / tokens[point] - 1.0) > SAME_LENGTH_FRAC for point in points):
            points.append(int(position))
    points.sort(key=lambda position: tokens[position])
    x, y = tokens[points], ttft[points]
    if len(points) >= 2:
        (intercept_ms, slope), *_ = np.linalg.lstsq(np.column_stack([np.ones_like(x), x]), y, rcond=None)
        return PrefillFit(max(float(slope), 0.0), "least-squares", tuple(x), tuple(y), float(intercept_ms))
    if fit is None:
        raise PlannerInputError(
            "the load test has one prompt length and no step-time fit: the decode step to subtract from its "
            "TTFT is unknown (it needs two or more batch sizes)"
        )
    batch = _lightest_batch(steps, points[0])
    step_ms = float(fit.predict_ms(batch))
    return PrefillFit(max((y[0] - step_ms) / x[0], 0.0), "lightest-step", tuple(x), tuple(y), step_ms)


def _lightest_batch(steps: pd.DataFrame, position: int) -> float:
    # The batch at a light step: its mean requests in flight, else its concurrency cap, else one.
    for column in ("mean_concurrency", "concurrency"):
        if column in steps:
            value = float(steps[column].iloc[position])
            if np.isfinite(value) and value > 0:
                return value
    return 1.0


def decode_step_fit(steps: pd.DataFrame, prefill_ms_per_token: float) -> StepTimeFit:
    """The step-time fit of the decode steps alone: measured TPOT less the prompt compute its steps carried.

    At a step serving ``rate`` requests per second of ``P``-token prompts, the
    prompts take ``rate x P x prefill cost`` of every second, so a decode
    step measured at ``tpot`` would last ``tpot x (1 - rate x P x cost)``
    without them (the identity a chunked-prefill replica inverts,
    :mod:`planner.simulate.replica`). Fitted over the steps with a batch
    (mean requests in flight, else the concurrency cap) and a TPOT (else the
    mean ITL), up to the first whose TPOT does not grow: past the knee
    queueing lengthens the time to first token, not the decode step, and
    the step's growth with the batch is what the replica needs at every
    load, until the server's batch is full and more requests only queue.

    Parameters
    ----------
    steps : pandas.DataFrame
        A sweep (:func:`planner.readers.loadtest.read_loadtest`);
        ``request_throughput_rps`` (else completed requests over
        ``duration_s``) and ``mean_input_tokens`` set each step's share (0
        where either is missing).
    prefill_ms_per_token : float
        :func:`fit_prefill`'s cost. [ms/token]

    Returns
    -------
    StepTimeFit

    Raises
    ------
    PlannerInputError
        Fewer than two batch sizes, or prompts that would take the whole GPU at a step.
    """
    batch = steps["mean_concurrency"].to_numpy(dtype=float)
    batch = np.where(np.isfinite(batch), batch, steps["concurrency"].to_numpy(dtype=float))
    tpot = steps["tpot_mean_ms"].to_numpy(dtype=float)
    tpot = np.where(np.isfinite(tpot), tpot, steps["itl_mean_ms"].to_numpy(dtype=float))
    rate = steps["request_throughput_rps"].to_numpy(dtype=float)
    rate = np.where(np.isfinite(rate), rate, steps["completed_requests"] / steps["duration_s"])
    busy_frac = np.nan_to_num(rate * steps["mean_input_tokens"].to_numpy(dtype=float) * prefill_ms_per_token / 1000.0)
    used = np.isfinite(batch) & (batch > 0) & np.isfinite(tpot) & (tpot > 0)
    # Once the TPOT stops growing the server's batch is capped and more requests in flight only queue.
    growing = np.concatenate([[True], np.diff(tpot) > 0])
    used &= np.cumprod(growing | ~np.isfinite(tpot)).astype(bool)
    if (busy_frac[used] >= 1.0).any():
        raise PlannerInputError(
            f"a prefill cost of {prefill_ms_per_token:.4g} ms per token would take the whole GPU at a step of the "
            "load test; the TTFT it was fitted on is not prefill"
        )
    return fit_step_time(batch[used], tpot[used] * (1.0 - busy_frac[used]))


def replica_from_loadtest(
    steps: pd.DataFrame,
    thresholds: LoadTestThresholds,
    *,
    max_num_seqs: int = 256,
    kv_tokens: int = 10**9,
    max_num_batched_tokens: int | None = DEFAULT_MAX_NUM_BATCHED_TOKENS,
    seed: int = 0,
) -> ReplicaSpec:
    """A replica from a load test: its prefill cost, and its decode step with the prompts' share removed.

    The cost is :func:`fit_prefill`'s and the step :func:`decode_step_fit`'s
    at that cost, for chunked prefill within ``max_num_batched_tokens``.
    With one prompt length the cost takes the lightest step's whole TTFT,
    less one step, for the prompt's own prefill; where that step ran
    requests side by side their prompts also queued for each other, so the
    cost is then lowered (bisection) until this replica, driven as the step
    was, gives no more than the measured TTFT p50.

    When the TPOTs leave no room for that much prompt compute (the decode
    steps, less it, no longer grow with the batch from a positive fixed
    cost), the TTFT is mostly latency that holds no GPU (the API server,
    tokenization, the network): the replica then keeps the sweep's own
    step-time fit and charges the cost as a delay of each request's own
    first token, without a budget.

    Parameters
    ----------
    steps : pandas.DataFrame
        The sweep (lightest step first).
    thresholds : LoadTestThresholds
        ``thresholds_from_loadtest(steps, ...)``: its ``tpot_fit``.
    max_num_seqs, kv_tokens, max_num_batched_tokens : int
        The server's settings (``max_num_batched_tokens``: ``vllm serve``'s
        default unless given). [sequences], [tokens], [tokens]
    seed : int
        Seed of the lightest step's simulated arrivals.

    Returns
    -------
    ReplicaSpec
    """
    if thresholds.tpot_fit is None:
        raise PlannerInputError("the load test has no step-time fit (it needs two or more batch sizes)")
    prefill = fit_prefill(steps, thresholds.tpot_fit)
    cost_ms = prefill.prefill_ms_per_token
    tpot_fit = thresholds.tpot_fit
    settings = {"max_num_seqs": max_num_seqs, "kv_tokens": kv_tokens}
    if cost_ms == 0 or max_num_batched_tokens is None or not _leaves_room(steps, cost_ms):
        return replica_from_fit(tpot_fit, prefill_ms_per_token=cost_ms, max_num_batched_tokens=None, **settings)

    def replica(cost: float) -> ReplicaSpec:
        fit = decode_step_fit(steps, cost) if cost > 0 else tpot_fit
        return replica_from_fit(
            fit, prefill_ms_per_token=cost, max_num_batched_tokens=max_num_batched_tokens, **settings
        )

    if prefill.method == "lightest-step":
        measured_ms = prefill.ttft_ms[0]

        def too_slow(cost: float) -> bool:
            lightest = simulate_sweep(steps.iloc[:1], replica(cost), seed=seed)
            return float(lightest["ttft_p50_ms"].iloc[0]) > measured_ms

        if too_slow(cost_ms):
            low, high = 0.0, cost_ms
            for _ in range(_SETTLE_STEPS):
                middle = 0.5 * (low + high)
                low, high = (low, middle) if too_slow(middle) else (middle, high)
            cost_ms = low
    return replica(cost_ms)


def _leaves_room(steps: pd.DataFrame, cost_ms: float) -> bool:
    # Whether the TPOTs, less the prompt compute at this cost, still grow with the batch from a positive cost.
    try:
        return decode_step_fit(steps, cost_ms).is_plausible
    except PlannerInputError:
        return False


_SETTLE_STEPS = 12  # bisection halvings of the one-length prefill cost: 1/4096 of the estimate


def replica_from_fit(
    fit: StepTimeFit,
    *,
    max_num_seqs: int = 256,
    kv_tokens: int = 10**9,
    prefill_ms_per_token: float = 0.0,
    max_num_batched_tokens: int | None = DEFAULT_MAX_NUM_BATCHED_TOKENS,
) -> ReplicaSpec:
    """A replica whose step time is a load test's fit (``thresholds_from_loadtest(...).tpot_fit``).

    ``prefill_ms_per_token`` (:func:`fit_prefill`) with ``max_num_batched_tokens``
    models chunked prefill (``None``: prefill delays only each request's own
    first token; a cost of 0: prefill stays folded into the fit).
    """
    if fit is None:
        raise PlannerInputError("the load test has no step-time fit (it needs two or more batch sizes)")
    return ReplicaSpec(
        fixed_ms=fit.fixed_ms,
        per_sequence_ms=max(fit.per_sequence_ms, 0.0),
        max_num_seqs=max_num_seqs,
        kv_tokens=kv_tokens,
        prefill_ms_per_token=prefill_ms_per_token,
        max_num_batched_tokens=max_num_batched_tokens,
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
    slots = int(min(concurrency, num_requests)) if math.isfinite(concurrency) else num_requests
    if math.isfinite(request_rate_rps):
        scheduled_s = np.cumsum(rng.exponential(1.0 / request_rate_rps, num_requests))
    else:
        scheduled_s = np.zeros(num_requests)
        if slots < num_requests:
            # A closed loop of identical requests started at once would stay in lockstep, every prompt
            # prefilled while no other sequence decodes; a real run's jitter spreads the clients, so their
            # first sends are spread over one request's decode at the full batch.
            spread_s = output_tokens * replica.step_s(slots)
            scheduled_s[:slots] = np.sort(rng.uniform(0.0, spread_s, slots))
    req = RequestState(scheduled_s.copy(), np.full(num_requests, input_tokens), np.full(num_requests, output_tokens))
    free_at = [0.0] * slots  # when each client slot can send again
    running: list[int] = []
    waiting: deque = deque()
    sent = finished = 0
    stall_debt_s = 0.0
    k = 0
    while finished < num_requests:
        t0, t1 = k * tick_s, (k + 1) * tick_s
        while sent < num_requests and free_at and max(free_at[0], scheduled_s[sent]) < t1:
            # A slot freed in an earlier tick is seen at this tick's start: the request is sent then (up to a
            # tick late), rather than stamped when the slot freed, which would count the lag as server time.
            req.arrival_s[sent] = max(heapq.heappop(free_at), scheduled_s[sent], t0)
            waiting.append(sent)
            sent += 1
        tick = advance_replica(t0, tick_s, running, waiting, req, replica, stall_debt_s=stall_debt_s)
        stall_debt_s = tick.stall_debt_s
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
    ``request_rate_rps``, ``mean_concurrency``, ``ttft_p50_ms``, ``ttft_p99_ms``, ``tpot_mean_ms``,
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
                "ttft_p50_ms": float(np.percentile(level.ttft_ms, 50)),
                "ttft_p99_ms": float(np.percentile(level.ttft_ms, 99)),
                "tpot_mean_ms": float(level.tpot_ms.mean()),
                "tpot_p99_ms": float(np.percentile(level.tpot_ms, 99)),
                "preemptions": 0.0,
            }
        )
    return pd.DataFrame(rows)
