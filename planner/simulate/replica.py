"""The ``replica`` module models one vLLM replica: continuous batching, a KV budget, cold start.

State is kept as arrays, one entry per request (:class:`RequestState`), so a
vectorised engine can hold the same fields for many configurations; a
replica's own state is two index lists: the running batch and the waiting
queue (first come, first served, as vLLM's scheduler runs them).

One tick of ``dt_s`` seconds (:func:`advance_replica`) is the model's unit:

* **Step time.** Every scheduler step emits one token per running sequence
  and lasts ``planner.capacity.step_time.step_time_ms(batch)``. The step time is set
  once per tick (the approximation this engine makes), for the batch averaged
  over the busy part of the tick: running sequences until they finish, queued
  requests from their arrival, capped at ``max_num_seqs``. The per-request discrete-event engine
  (:mod:`planner.simulate.discrete_event`), which re-evaluates the step at
  every admission and completion, measures what this costs: on five
  fixed-fleet scenarios at 1 s ticks, at most 0.53 percentage points of SLO
  attainment and 7.6 % of mean TTFT (near capacity, where a queue amplifies
  the frozen step).
* **Tokens within a tick** are fractional: a sequence active for ``x``
  seconds of the tick gains ``x / step`` tokens, so first-token and finish
  times fall inside the tick, not on its edges.
* **Admission.** A slot freed inside the tick is given to the head of the
  queue at that moment; a request arriving inside the tick is admitted at its
  arrival when a slot is free. Admission also needs KV blocks for the prompt
  (and any tokens already generated); while they are missing the queue waits
  (head-of-line, as vLLM's FCFS policy does).
* **Prefill.** Without a token budget (``max_num_batched_tokens=None``),
  ``prefill_ms_per_token x prompt tokens`` delays the request's own first
  token and nothing else. With ``prefill_ms_per_token = 0`` prefill is not
  modelled at all: a step-time fit from a load test then folds the average
  prefill interference into its constants.
* **Chunked prefill** (a budget and a prefill cost, the default), as vLLM V1's
  scheduler runs it (``vllm/v1/core/sched/scheduler.py``, ``Scheduler.schedule``:
  the running requests first, one token per decode, then prompt chunks with
  what is left of ``max_num_batched_tokens``, in admission order). A step
  carrying ``x`` prompt tokens lasts ``step_s(batch) + x x prefill cost``.
  At the tick's scale, with ``d`` the tick's step, ``c`` the cost per token,
  ``P`` a prompt's tokens and ``k = max_num_batched_tokens - (batch - 1)``
  the chunk a step has room for beside the other sequences' decodes:

  - prompts are prefilled one after another, in admission order: a prompt
    starts when the one before it has had its chunks scheduled, and its
    first token comes ``c P + (ceil(P / k) - 1) d`` later, plus the step that
    carries its last chunk (so a lone prompt of up to ``k`` tokens gets
    exactly what it gets without a budget, and a longer one a step per
    chunk); each prompt holds the prefill queue for its share of the steps
    that carry it, ``c P + (P / k) d``;
  - decodes slow down: the prompt compute the tick carries, ``C``,
    lengthens the steps of every sequence beside it, to
    ``d / (1 - (C - own) / tick)``, where ``own`` is the prompt compute in
    the tick before the sequence's own prefill ends (its own, and that of the
    prompts it queued behind: none of it runs beside its decode). ``C`` is
    set at the tick start, before the tick's admissions are known: the
    estimate (from the prefills under way and the queued prompts the free
    slots will admit) plus the *stall debt* the replica's last tick carried
    out, at least 0 and at most the share ``c k / (c k + d)`` of the tick.
    The debt is the compute the prefill queue's busy time in the tick
    actually carried, less ``C`` (:attr:`ReplicaTick.stall_debt_s`; the
    engines drop it when a replica empties). Over a busy spell the decodes
    therefore lose exactly the compute the prompts ran, give or take one
    tick's; without it, a queued prompt counted in one tick's
    estimate but admitted in the next was charged twice, and more often the
    shorter the tick.

  Against the discrete-event engine's step-by-step replica (two replicas, a
  2,048-token budget, "near capacity" traffic): within 0.1 percentage points
  of attainment at 14 rps, 0.2 at 15.5 and 0.9 at 16; past saturation, at
  17 rps, 71.2 % against 73.5 %, the tick engine on the side of more
  replicas. The gap closes as the tick shrinks (at 17 rps: 73.0 % at
  0.25 s, 73.7 % at 0.1 s; tests/simulate/test_simulate_discrete_event.py).

  Preempting a sequence mid-prefill returns it to the queue, which prefills
  its prompt again from the start (the preempted are always the newest, the
  tail of the prefill queue). The whole prompt's KV blocks are reserved at
  admission, as without a budget.
* **Preemption.** At each tick start, if the running batch would outgrow the
  KV cache during the tick, the most recently admitted sequences are preempted
  (vLLM V1's recompute mode: their blocks are freed, they go back to the head
  of the queue, keep their generated tokens and prefill them again).
* **GPU utilization** is NVML's definition: the fraction of the tick during
  which at least one sequence was being processed.
"""

from __future__ import annotations

import heapq
import math
from collections import deque
from dataclasses import dataclass, field
from functools import cached_property

import numpy as np

from planner.capacity.kv_cache import DEFAULT_MAX_NUM_BATCHED_TOKENS
from planner.capacity.step_time import step_time_ms
from planner.errors import PlannerInputError

__all__ = [
    "CUT",
    "DEFAULT_PREFILL_MS_PER_TOKEN",
    "DONE",
    "GATEWAY",
    "PENDING",
    "RUNNING",
    "WAITING",
    "ReplicaSpec",
    "ReplicaTick",
    "RequestState",
    "advance_replica",
    "kv_usage_frac",
]

DEFAULT_PREFILL_MS_PER_TOKEN = 0.0576
"""The default fleet's prefill cost: the fit of
:func:`planner.simulate.calibration.fit_prefill` on the real-world ``vllm bench serve``
sweep ``vllm_bench/aurotripathy-llama3.1-8b-fp8-l40s-concurrency-sweep``
(Llama-3.1-8B-Instruct FP8 on one L40S, the 8B-on-one-GPU replica the
default fleet stands for): TTFT p50 95.6 ms at concurrency 1, less one
14.4 ms decode step, over 1,409.5 prompt tokens. [ms/token]"""

# Request status codes (int8 in RequestState.status).
PENDING, GATEWAY, WAITING, RUNNING, DONE, CUT = 0, 1, 2, 3, 4, 5


@dataclass(frozen=True)
class ReplicaSpec:
    """What one vLLM replica can do.

    Attributes
    ----------
    fixed_ms : float
        Step-time constant: cost of a step whatever the batch. [ms]
    per_sequence_ms : float
        Step-time cost per running sequence. [ms/sequence]
    max_num_seqs : int
        vLLM ``--max-num-seqs``: largest running batch. [sequences]
    kv_tokens : int
        KV-cache capacity (vLLM's "GPU KV cache size" line, or
        :func:`planner.capacity.kv_cache.kv_tokens`). [tokens]
    block_size_tokens : int
        KV block size; usage is counted in whole blocks. [tokens]
    prefill_ms_per_token : float
        Prefill cost: the time a step gains per prompt token it carries (0:
        prefill is folded into the step-time constants). [ms/token]
    max_num_batched_tokens : int or None
        vLLM ``--max-num-batched-tokens``: tokens one step may carry, decodes
        and prompt chunks together (at least ``max_num_seqs``, as vLLM
        requires); the default is ``vllm serve``'s on GPUs under 70 GiB.
        ``None``: no budget, a prompt's prefill delays only its own first
        token. [tokens]
    """

    fixed_ms: float = 6.0
    per_sequence_ms: float = 0.25
    max_num_seqs: int = 64
    kv_tokens: int = 200_000
    block_size_tokens: int = 16
    prefill_ms_per_token: float = DEFAULT_PREFILL_MS_PER_TOKEN
    max_num_batched_tokens: int | None = DEFAULT_MAX_NUM_BATCHED_TOKENS

    def __post_init__(self) -> None:
        checks = (
            ("fixed_ms", self.fixed_ms > 0),
            ("per_sequence_ms", self.per_sequence_ms >= 0),
            ("max_num_seqs", self.max_num_seqs >= 1),
            ("kv_tokens", self.kv_tokens >= self.block_size_tokens),
            ("block_size_tokens", self.block_size_tokens >= 1),
            ("prefill_ms_per_token", self.prefill_ms_per_token >= 0),
        )
        for name, ok in checks:
            value = getattr(self, name)
            if not ok or not math.isfinite(value):
                raise PlannerInputError(f"replica parameter {name}: got {value!r}, which is out of range")
        budget = self.max_num_batched_tokens
        if budget is not None and (isinstance(budget, bool) or budget != int(budget) or budget < self.max_num_seqs):
            raise PlannerInputError(
                f"replica parameter max_num_batched_tokens: got {budget!r}; expected a whole number of at least "
                f"max_num_seqs ({self.max_num_seqs}), as vLLM requires"
            )

    @property
    def chunked_prefill(self) -> bool:
        """Whether prompts are prefilled in chunks within a token budget (a budget and a prefill cost)."""
        return self.max_num_batched_tokens is not None and self.prefill_ms_per_token > 0

    @cached_property
    def _step_table_s(self) -> tuple[float, ...]:
        # Step time for every batch size the replica can run, computed once.
        batches = np.arange(self.max_num_seqs + 1).clip(min=1)
        return tuple(float(v) / 1000.0 for v in step_time_ms(batches, self.fixed_ms, self.per_sequence_ms))

    def step_s(self, batch: int) -> float:
        """Duration of one decode step with ``batch`` sequences (at least 1, at most ``max_num_seqs``). [s]"""
        return self._step_table_s[min(max(batch, 1), self.max_num_seqs)]

    def blocks_tokens(self, tokens: float) -> int:
        """KV tokens reserved for ``tokens`` tokens, rounded up to whole blocks. [tokens]"""
        block = self.block_size_tokens
        return math.ceil(tokens / block) * block


@dataclass
class RequestState:
    """Per-request arrays (a struct of arrays), mutated as the simulation runs.

    Attributes
    ----------
    arrival_s, input_tokens, output_tokens : numpy.ndarray
        From the trace. [s], [tokens], [tokens]
    status : numpy.ndarray of int8
        PENDING, GATEWAY (held by the router, no Ready pod), WAITING,
        RUNNING, DONE or CUT.
    replica : numpy.ndarray of int
        Pod the request was routed to, -1 before routing.
    admit_s, first_token_s, done_s : numpy.ndarray of float
        First admission into a batch, first output token, last output token
        (NaN until they happen). [s]
    generated : numpy.ndarray of float
        Output tokens produced so far (fractional inside a tick). [tokens]
    prefill_left_s : numpy.ndarray of float
        Prefill still to run before tokens flow. [s]
    preemptions : numpy.ndarray of int
        Times the request was preempted.
    """

    arrival_s: np.ndarray
    input_tokens: np.ndarray
    output_tokens: np.ndarray
    status: np.ndarray = field(init=False)
    replica: np.ndarray = field(init=False)
    admit_s: np.ndarray = field(init=False)
    first_token_s: np.ndarray = field(init=False)
    done_s: np.ndarray = field(init=False)
    generated: np.ndarray = field(init=False)
    prefill_left_s: np.ndarray = field(init=False)
    preemptions: np.ndarray = field(init=False)

    def __post_init__(self) -> None:
        n = len(self.arrival_s)
        self.arrival_s = np.asarray(self.arrival_s, dtype=float)
        self.input_tokens = np.asarray(self.input_tokens, dtype=np.int64)
        self.output_tokens = np.asarray(self.output_tokens, dtype=np.int64)
        self.status = np.zeros(n, dtype=np.int8)
        self.replica = np.full(n, -1, dtype=np.int64)
        self.admit_s = np.full(n, np.nan)
        self.first_token_s = np.full(n, np.nan)
        self.done_s = np.full(n, np.nan)
        self.generated = np.zeros(n)
        self.prefill_left_s = np.zeros(n)
        self.preemptions = np.zeros(n, dtype=np.int64)

    def __len__(self) -> int:
        return len(self.arrival_s)


@dataclass(frozen=True)
class ReplicaTick:
    """What one replica did during one tick.

    Attributes
    ----------
    busy_s : float
        Time at least one sequence was processed (NVML's utilization numerator). [s]
    completed : tuple of int
        Requests that finished. [request indices]
    generated_tokens : float
        Output tokens produced. [tokens]
    prompt_tokens : int
        Prompt tokens admitted (prefilled). [tokens]
    preemptions : int
        Sequences preempted at the tick start.
    stall_debt_s : float
        Prompt compute the tick carried that its decodes were not slowed by
        (negative: slowed by in excess), for the replica's next tick (0
        without chunked prefill). [s]
    """

    busy_s: float
    completed: tuple[int, ...]
    generated_tokens: float
    prompt_tokens: int
    preemptions: int
    stall_debt_s: float = 0.0


def kv_usage_frac(running: list[int], req: RequestState, spec: ReplicaSpec) -> float:
    """``vllm:kv_cache_usage_perc``: blocks held by the running batch over the cache (0 to 1). [fraction]"""
    held = sum(spec.blocks_tokens(req.input_tokens[i] + math.floor(req.generated[i])) for i in running)
    return min(held / spec.kv_tokens, 1.0)


def _preempt_to_fit(running: list[int], waiting: deque, req: RequestState, spec: ReplicaSpec, dt_s: float) -> int:
    # Recompute preemption: drop the newest sequences until the batch's growth this tick fits.
    preempted = 0
    if not running:
        return 0
    # Cheap bound first: if even the worst case fits, nothing is preempted.
    step_s = spec.step_s(len(running))
    idx = np.asarray(running)
    bound = float(req.input_tokens[idx].sum() + req.generated[idx].sum())
    if bound + len(running) * (dt_s / step_s + spec.block_size_tokens + 1) <= spec.kv_tokens:
        return 0
    while len(running) > 1:
        step_s = spec.step_s(len(running))
        need = 0
        for i in running:
            grown = min(req.generated[i] + dt_s / step_s, req.output_tokens[i])
            need += spec.blocks_tokens(req.input_tokens[i] + math.floor(grown))
        if need <= spec.kv_tokens:
            break
        victim = running.pop()
        req.status[victim] = WAITING
        req.preemptions[victim] += 1
        req.prefill_left_s[victim] = 0.0
        waiting.appendleft(victim)
        preempted += 1
    return preempted


def advance_replica(
    t0_s: float,
    dt_s: float,
    running: list[int],
    waiting: deque,
    req: RequestState,
    spec: ReplicaSpec,
    stop_s: float = math.inf,
    stall_debt_s: float = 0.0,
) -> ReplicaTick:
    """Run one replica from ``t0_s`` for ``dt_s`` seconds (or until ``stop_s``), in place.

    Parameters
    ----------
    t0_s, dt_s : float
        Tick start and length. [s]
    running : list of int
        Requests in the batch, oldest admission first; updated.
    waiting : collections.deque of int
        Queue in arrival order; requests arriving inside the tick may be in
        it (their ``arrival_s`` is honoured); updated.
    req : RequestState
        The request arrays; updated.
    spec : ReplicaSpec
    stop_s : float, optional
        The replica stops serving at this time (a terminating pod's deadline). [s]
    stall_debt_s : float, optional
        The replica's previous tick's :attr:`ReplicaTick.stall_debt_s` (0 for
        a new replica). [s]

    Returns
    -------
    ReplicaTick
    """
    end_s = min(t0_s + dt_s, stop_s)
    if end_s <= t0_s:
        return ReplicaTick(0.0, (), 0.0, 0, 0, stall_debt_s)
    preempted = _preempt_to_fit(running, waiting, req, spec, end_s - t0_s)
    batch = _tick_batch(t0_s, end_s, running, waiting, req, spec)
    step_s = spec.step_s(batch)
    chunks = None
    if spec.chunked_prefill:
        chunks = _PrefillQueue(t0_s, end_s, batch, step_s, running, waiting, req, spec, stall_debt_s)
    completed: list[int] = []
    intervals: list[tuple[float, float]] = []
    free_at: list[float] = [t0_s] * (spec.max_num_seqs - len(running))
    freed: list[tuple[float, int]] = []  # (time, KV tokens released)
    kv_used = 0
    generated_before = 0.0
    still_running: list[int] = []
    if running:
        idx = np.asarray(running)
        steps_s = step_s if chunks is None else chunks.running_steps_s(req.prefill_left_s[idx])
        finished, done_s, held, generated_before = _progress_batch(idx, t0_s, end_s, steps_s, req, spec)
        kv_used = int(held.sum())
        intervals.append((t0_s, float(np.where(finished, done_s, end_s).max())))
        for i, is_done, at, tokens in zip(running, finished.tolist(), done_s.tolist(), held.tolist(), strict=True):
            if is_done:
                completed.append(i)
                free_at.append(at)
                freed.append((at, tokens))
            else:
                still_running.append(i)
    heapq.heapify(free_at)
    freed.sort()
    freed_index = 0
    prompt_tokens = 0
    while waiting and free_at:
        i = waiting[0]
        at = max(free_at[0], float(req.arrival_s[i]), t0_s)
        if at >= end_s:
            break
        while freed_index < len(freed) and freed[freed_index][0] <= at:
            kv_used -= freed[freed_index][1]
            freed_index += 1
        tokens_to_prefill = int(req.input_tokens[i]) + math.floor(float(req.generated[i]))
        need = spec.blocks_tokens(tokens_to_prefill + 1)
        if kv_used + need > spec.kv_tokens and kv_used > 0:
            # Head-of-line: the queue waits until sequences finishing in this tick free enough blocks.
            released, j, when = 0, freed_index, None
            while j < len(freed):
                released += freed[j][1]
                if kv_used - released + need <= spec.kv_tokens:
                    when = freed[j][0]
                    break
                j += 1
            if when is None or when >= end_s:
                break
            at = max(at, when)
            kv_used -= released
            freed_index = j + 1
        heapq.heappop(free_at)
        waiting.popleft()
        kv_used += need
        req.status[i] = RUNNING
        if math.isnan(req.admit_s[i]):
            req.admit_s[i] = at
        prompt_tokens += tokens_to_prefill
        own_step_s = step_s
        if chunks is None:
            req.prefill_left_s[i] = tokens_to_prefill * spec.prefill_ms_per_token / 1000.0
        else:
            req.prefill_left_s[i], own_step_s = chunks.admit(at, tokens_to_prefill)
        generated_before += req.generated[i]
        done = _progress(i, at, end_s, own_step_s, req, intervals)
        if done is None:
            still_running.append(i)
        else:
            completed.append(i)
            heapq.heappush(free_at, done)
            freed.append((done, need))
            freed.sort()
    running[:] = still_running
    generated_after = sum(req.generated[i] for i in running) + sum(req.output_tokens[i] for i in completed)
    return ReplicaTick(
        _union_s(intervals),
        tuple(completed),
        float(generated_after - generated_before),
        prompt_tokens,
        preempted,
        chunks.debt_s if chunks is not None else 0.0,
    )


def _tick_batch(
    t0_s: float, end_s: float, running: list[int], waiting: deque, req: RequestState, spec: ReplicaSpec
) -> int:
    # The batch that sets the tick's step time: the batch averaged over the part of the tick the replica
    # is busy. Each running sequence is active until it finishes (at the step time of the batch it starts
    # in), each queued request from its arrival; capped at max_num_seqs.
    span_s = end_s - t0_s
    active_s = 0.0
    busy_s = 0.0
    if running:
        idx = np.asarray(running)
        step_s = spec.step_s(len(running))
        left_s = np.minimum(req.prefill_left_s[idx] + (req.output_tokens[idx] - req.generated[idx]) * step_s, span_s)
        active_s = float(left_s.sum())
        busy_s = float(left_s.max())
    for i in waiting:
        if active_s >= spec.max_num_seqs * span_s:
            break
        present_s = min(end_s - max(float(req.arrival_s[i]), t0_s), span_s)
        active_s += present_s
        busy_s = max(busy_s, present_s)
    if busy_s <= 0.0:
        return 1
    return min(max(round(active_s / busy_s), 1), spec.max_num_seqs)


class _PrefillQueue:
    """One tick of chunked prefill on one replica: the prompts' queue and the stall their compute causes.

    Built at the tick start (see the module docstring): ``free_s`` is when
    the prompts under way have had their chunks scheduled, ``stall_s`` the
    prompt compute the decodes are slowed by this tick (the estimate plus
    the debt carried in); :meth:`admit` queues a prompt. ``debt_s`` is the
    debt to carry out: the compute the queue's busy time in the tick
    carries, less ``stall_s``.
    A sequence's ``own`` compute, which does not slow it, is that of the run
    of prompts it is in, from the run's start (or the tick's) to its own
    end: it all comes before the sequence's first decode.
    """

    __slots__ = (
        "chunk_tokens",
        "compute_frac",
        "cost_ms",
        "debt_s",
        "end_s",
        "free_s",
        "since_s",
        "span_s",
        "stall_s",
        "step_s",
        "t0_s",
    )

    def __init__(
        self,
        t0_s: float,
        end_s: float,
        batch: int,
        step_s: float,
        running: list[int],
        waiting: deque,
        req: RequestState,
        spec: ReplicaSpec,
        stall_debt_s: float,
    ):
        self.t0_s, self.end_s, self.span_s, self.step_s = t0_s, end_s, end_s - t0_s, step_s
        self.cost_ms = spec.prefill_ms_per_token
        # The chunk a step has room for beside the other sequences' decodes, and the share of a step that
        # carries a full chunk spent on the prompt.
        self.chunk_tokens = max((spec.max_num_batched_tokens or 0) - batch + 1, 1)
        chunk_s = self.chunk_tokens * self.cost_ms / 1000.0
        self.compute_frac = chunk_s / (chunk_s + step_s)
        # The prompts under way end at the latest prefill left (they run one after another); the queued
        # prompts the tick can admit are those the free slots and the slots freed in the tick take.
        ahead_s = 0.0
        slots = spec.max_num_seqs - len(running)
        run_step_s = spec.step_s(len(running))
        for i in running:
            left_s = float(req.prefill_left_s[i])
            if left_s > ahead_s:
                ahead_s = left_s
            if left_s + (req.output_tokens[i] - req.generated[i]) * run_step_s <= self.span_s:
                slots += 1
        self.free_s = t0_s + ahead_s
        self.since_s = t0_s  # the start of the run of prompts the queue is in
        busy_s = min(self.free_s, end_s) - t0_s
        queue_s = self.free_s
        for i in waiting:
            if slots <= 0:
                break
            start_s = max(queue_s, float(req.arrival_s[i]), t0_s)
            if start_s >= end_s:
                break
            queue_s = start_s + self._held_s(int(req.input_tokens[i]) + math.floor(float(req.generated[i])))
            busy_s += min(queue_s, end_s) - start_s
            slots -= 1
        # The estimate counts queued prompts the tick may not admit and can miss some it does; the debt
        # carried in corrects it, so over ticks the decodes lose exactly the compute the prompts ran. No
        # step can lose more than a full chunk's share.
        stall_s = busy_s * self.compute_frac + stall_debt_s
        if stall_s < 0.0:
            stall_s = 0.0
        elif stall_s > self.span_s * self.compute_frac:
            stall_s = self.span_s * self.compute_frac
        self.stall_s = stall_s
        self.debt_s = stall_debt_s - stall_s + (min(self.free_s, end_s) - t0_s) * self.compute_frac

    def _held_s(self, tokens: int) -> float:
        # The prefill queue's time a prompt holds: its compute and its share of the steps that carry it.
        return tokens * self.cost_ms / 1000.0 + tokens / self.chunk_tokens * self.step_s

    def _step_s(self, stall_s: float) -> float:
        # A sequence's step this tick when the prompts beside it compute for stall_s seconds.
        if stall_s > 0.0:
            return self.step_s / (1.0 - stall_s / self.span_s)
        return self.step_s

    def running_steps_s(self, prefill_left_s: np.ndarray) -> np.ndarray:
        """Each running sequence's step this tick, given its prefill left at the tick start. [s]"""
        own_s = (np.minimum(self.t0_s + prefill_left_s, self.end_s) - self.t0_s) * self.compute_frac
        stall_s = self.stall_s - own_s
        return np.where(stall_s > 0.0, self.step_s / (1.0 - stall_s / self.span_s), self.step_s)

    def admit(self, at_s: float, tokens: int) -> tuple[float, float]:
        """Queue a prompt of ``tokens`` admitted at ``at_s``: its prefill left and its step this tick. [s]"""
        start_s = at_s
        if self.free_s > at_s:
            start_s = self.free_s  # the prompts admitted before it still have chunks to schedule
        else:
            self.since_s = at_s  # the queue was idle: a new run of prompts starts with this one
        chunks = max(-(-tokens // self.chunk_tokens), 1)
        prefill_left_s = (start_s - at_s) + (tokens * self.cost_ms / 1000.0 + (chunks - 1) * self.step_s)
        self.free_s = start_s + self._held_s(tokens)
        if start_s < self.end_s:
            self.debt_s += (min(self.free_s, self.end_s) - start_s) * self.compute_frac
        # The compute of its run of prompts up to its own end happens before it decodes: it slows others only.
        own_s = (min(self.free_s, self.end_s) - self.since_s) * self.compute_frac
        return prefill_left_s, self._step_s(self.stall_s - own_s)


def _progress_batch(idx: np.ndarray, t0_s: float, end_s: float, step_s, req: RequestState, spec: ReplicaSpec):
    # The sequences running at the tick start, all at once: which finish, when, and the KV they held
    # (step_s: one step for all, or one per sequence).
    gen = req.generated[idx]
    out = req.output_tokens[idx]
    block = spec.block_size_tokens
    held = -(-(req.input_tokens[idx] + np.floor(gen).astype(np.int64)) // block) * block
    prefill = req.prefill_left_s[idx]
    in_prefill = t0_s + prefill >= end_s
    tokens_from = t0_s + prefill
    first = tokens_from + (1.0 - gen) * step_s
    first_now = ~in_prefill & (gen < 1.0) & (first <= end_s) & np.isnan(req.first_token_s[idx])
    req.first_token_s[idx[first_now]] = first[first_now]
    done_s = tokens_from + (out - gen) * step_s
    finished = ~in_prefill & (done_s <= end_s)
    req.prefill_left_s[idx] = np.where(in_prefill, prefill - (end_s - t0_s), 0.0)
    new_gen = np.where(in_prefill, gen, np.where(finished, out, gen + (end_s - tokens_from) / step_s))
    req.generated[idx] = new_gen
    req.done_s[idx[finished]] = done_s[finished]
    req.status[idx[finished]] = DONE
    return finished, done_s, held, float(gen.sum())


def _progress(
    i: int, start_s: float, end_s: float, step_s: float, req: RequestState, intervals: list[tuple[float, float]]
) -> float | None:
    # Advance request i from start_s to end_s; return its finish time if it finishes.
    req.status[i] = RUNNING
    prefill = req.prefill_left_s[i]
    if start_s + prefill >= end_s:
        req.prefill_left_s[i] = prefill - (end_s - start_s)
        intervals.append((start_s, end_s))
        return None
    req.prefill_left_s[i] = 0.0
    tokens_from_s = start_s + prefill
    gen = req.generated[i]
    if gen < 1.0:
        first = tokens_from_s + (1.0 - gen) * step_s
        if first <= end_s:
            if math.isnan(req.first_token_s[i]):
                req.first_token_s[i] = first
    done_s = tokens_from_s + (req.output_tokens[i] - gen) * step_s
    if done_s <= end_s:
        req.generated[i] = float(req.output_tokens[i])
        req.done_s[i] = done_s
        req.status[i] = DONE
        intervals.append((start_s, done_s))
        return done_s
    req.generated[i] = gen + (end_s - tokens_from_s) / step_s
    intervals.append((start_s, end_s))
    return None


def _union_s(intervals: list[tuple[float, float]]) -> float:
    # Length of the union of [start, end] intervals: time the GPU ran any kernel.
    if not intervals:
        return 0.0
    intervals.sort()
    total = 0.0
    cur_start, cur_end = intervals[0]
    for start, end in intervals[1:]:
        if start > cur_end:
            total += cur_end - cur_start
            cur_start, cur_end = start, end
        elif end > cur_end:
            cur_end = end
    return total + (cur_end - cur_start)
