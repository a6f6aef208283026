"""The ``replica`` kernel: one vLLM replica's tick, compiled, bit for bit equal to the Python model.

:func:`advance_pod` (and :func:`advance_replica`, the same on loose arrays) and
:func:`kv_usage_frac` compute exactly what
:func:`planner.simulate.replica.advance_replica` and
:func:`planner.simulate.replica.kv_usage_frac` compute, on the fast engine's
data layout (the differential test ``tests/simulate/fast/test_simulate_fast_replica.py``
holds them to that):

* requests are a struct of arrays, as :class:`planner.simulate.replica.RequestState`;
* pod ``p``'s running batch is ``run[p, 0:run_n[p]]``, oldest admission first;
* pod ``p``'s waiting queue is a singly linked list through the requests:
  ``wq_head[p]``, ``wq_tail[p]`` (request index or -1), ``wq_n[p]`` (its
  length) and ``next_req[i]`` (the request after ``i``, -1 at the tail).

Bit-for-bit equality rests on doing the float operations of the Python code in
the same order: numpy's pairwise ``sum`` where it sums an array (on the values
in batch order), left-to-right sums where it calls the built-in ``sum``,
Python's ``min``/``max`` argument order, round-half-even, and the released-KV
list kept sorted as ``(time, tokens)`` tuples and consumed through an index,
even when a new entry sorts in front of that index.

The kernels allocate nothing: the work arrays come from :func:`new_scratch`,
made once per run. A call whose buffers are too small for the pod's requests
changes nothing and returns a negative ``n_completed`` (:data:`NEEDS_CAPACITY`
or :data:`BAD_LAYOUT`).
"""

from __future__ import annotations

import math
from collections import deque
from dataclasses import dataclass
from typing import NamedTuple

import numpy as np
from numba import njit

from planner.simulate.fast._numeric import pairwise_sum
from planner.simulate.replica import DONE, RUNNING, WAITING, ReplicaSpec, ReplicaTick, RequestState

__all__ = [
    "BAD_LAYOUT",
    "NEEDS_CAPACITY",
    "CompiledReplica",
    "ListReplica",
    "ReplicaParams",
    "ReplicaQueues",
    "ReplicaRequests",
    "ReplicaScratch",
    "advance_pod",
    "advance_replica",
    "kv_usage_frac",
    "new_scratch",
]

# Negative n_completed from advance_replica: nothing was changed.
NEEDS_CAPACITY = -1  # scratch or completed_out holds fewer than run_n[p] + wq_n[p] requests: grow and retry
BAD_LAYOUT = -2  # run, step_table_s or scratch not sized for max_num_seqs, or run_n[p] > max_num_seqs


@dataclass(frozen=True)
class CompiledReplica:
    """A :class:`planner.simulate.replica.ReplicaSpec` as the kernel's scalar and table arguments.

    Attributes
    ----------
    step_table_s : numpy.ndarray of float64
        Step time for batches 0 to ``max_num_seqs`` (entry 0 is batch 1's). [s]
    max_num_seqs : int
        Largest running batch. [sequences]
    kv_tokens : int
        KV-cache capacity. [tokens]
    block_size_tokens : int
        KV block size. [tokens]
    prefill_ms_per_token : float
        Prefill cost per prompt token. [ms/token]
    max_num_batched_tokens : int
        Tokens one step may carry; 0 for no budget. [tokens]
    """

    step_table_s: np.ndarray
    max_num_seqs: int
    kv_tokens: int
    block_size_tokens: int
    prefill_ms_per_token: float
    max_num_batched_tokens: int

    @classmethod
    def from_spec(cls, spec: ReplicaSpec) -> CompiledReplica:
        """The kernel arguments for ``spec``."""
        table = np.asarray(spec._step_table_s, dtype=np.float64)
        table.setflags(write=False)
        return cls(
            table,
            int(spec.max_num_seqs),
            int(spec.kv_tokens),
            int(spec.block_size_tokens),
            float(spec.prefill_ms_per_token),
            int(spec.max_num_batched_tokens or 0),
        )

    def params(self) -> ReplicaParams:
        """The same values as the kernels' :class:`ReplicaParams`."""
        return ReplicaParams(
            self.step_table_s,
            self.max_num_seqs,
            self.kv_tokens,
            self.block_size_tokens,
            self.prefill_ms_per_token,
            self.max_num_batched_tokens,
        )


class ReplicaParams(NamedTuple):
    """:class:`CompiledReplica` as the kernels take it (a named tuple numba compiles to a struct).

    Attributes
    ----------
    step_table_s : numpy.ndarray of float64
        Step time for batches 0 to ``max_num_seqs``. [s]
    max_num_seqs : int
        Largest running batch. [sequences]
    kv_tokens, block_size_tokens : int
        KV-cache capacity and block size. [tokens]
    prefill_ms_per_token : float
        Prefill cost per prompt token. [ms/token]
    max_num_batched_tokens : int
        Tokens one step may carry; 0 for no budget (chunked prefill needs a
        budget and a prefill cost). [tokens]
    """

    step_table_s: np.ndarray
    max_num_seqs: int
    kv_tokens: int
    block_size_tokens: int
    prefill_ms_per_token: float
    max_num_batched_tokens: int


class ReplicaQueues(NamedTuple):
    """Every pod's running batch and waiting queue (the fields of :class:`planner.simulate.fast.fleet.Pods`
    the replica kernel reads; ``Pods`` itself is handed over in the engine).

    Attributes
    ----------
    run, run_n : numpy.ndarray of int64
        Running batches (pods x at least ``max_num_seqs``), oldest admission first, and their lengths.
    wq_head, wq_tail, wq_n : numpy.ndarray of int64
        Per pod: first and last queued request (-1 if none) and the queue's length.
    stall_debt_s : numpy.ndarray of float64
        Per pod: the chunked-prefill stall debt its last tick carried out
        (:attr:`planner.simulate.replica.ReplicaTick.stall_debt_s`, 0 for a new pod). [s]
    """

    run: np.ndarray
    run_n: np.ndarray
    wq_head: np.ndarray
    wq_tail: np.ndarray
    wq_n: np.ndarray
    stall_debt_s: np.ndarray


class ReplicaRequests(NamedTuple):
    """The request arrays the replica kernel reads and writes (the fields of
    :class:`planner.simulate.fast.fleet.Requests` it uses; ``Requests`` itself is handed over in the engine).

    Attributes
    ----------
    next_req : numpy.ndarray of int64
        The next request in its pod's queue (-1 at the tail).
    arrival_s, input_tokens, output_tokens, status, admit_s, first_token_s, done_s, generated, \
prefill_left_s, preemptions : numpy.ndarray
        As :class:`planner.simulate.replica.RequestState`.
    """

    next_req: np.ndarray
    arrival_s: np.ndarray
    input_tokens: np.ndarray
    output_tokens: np.ndarray
    status: np.ndarray
    admit_s: np.ndarray
    first_token_s: np.ndarray
    done_s: np.ndarray
    generated: np.ndarray
    prefill_left_s: np.ndarray
    preemptions: np.ndarray


class ReplicaScratch(NamedTuple):
    """Work arrays of :func:`advance_replica`, reused from call to call (contents meaningless between calls).

    Attributes
    ----------
    batch_values : numpy.ndarray of float64, (max_num_seqs,)
        One value per running sequence, gathered in batch order for a pairwise sum.
    free_at_s : numpy.ndarray of float64, (max_num_seqs,)
        Min-heap of the times batch slots free inside the tick. [s]
    freed_at_s, freed_tokens : numpy.ndarray of float64 and int64, (requests_capacity,)
        KV released inside the tick, sorted as ``(time, tokens)`` pairs. [s], [tokens]
    busy_from_s, busy_to_s : numpy.ndarray of float64, (requests_capacity + 1,)
        Intervals during which a sequence was processed. [s]
    """

    batch_values: np.ndarray
    free_at_s: np.ndarray
    freed_at_s: np.ndarray
    freed_tokens: np.ndarray
    busy_from_s: np.ndarray
    busy_to_s: np.ndarray


@njit(cache=True, nogil=True)
def new_scratch(max_num_seqs, requests_capacity):
    """Work arrays for a replica of ``max_num_seqs`` slots holding up to ``requests_capacity`` requests.

    Parameters
    ----------
    max_num_seqs : int
        vLLM ``--max-num-seqs``. [sequences]
    requests_capacity : int
        Most requests one pod holds at a tick start, batch plus queue. Every
        request finishes at most once per tick and a tick admits only queued
        requests, so a tick never records more than that many completions
        (the worst case: one-token outputs, no prefill, every slot refilled
        many times). The number of requests in the trace always suffices.

    Returns
    -------
    ReplicaScratch
    """
    return ReplicaScratch(
        np.empty(max_num_seqs, dtype=np.float64),
        np.empty(max_num_seqs, dtype=np.float64),
        np.empty(requests_capacity, dtype=np.float64),
        np.empty(requests_capacity, dtype=np.int64),
        np.empty(requests_capacity + 1, dtype=np.float64),
        np.empty(requests_capacity + 1, dtype=np.float64),
    )


@njit(cache=True, nogil=True, inline="always")
def _step_s(step_table_s, batch, max_num_seqs):
    # ReplicaSpec.step_s.
    return step_table_s[min(max(batch, 1), max_num_seqs)]


@njit(cache=True, nogil=True, inline="always")
def _blocks_tokens(tokens, block_size_tokens):
    # ReplicaSpec.blocks_tokens: a float division rounded up, as the Python does.
    return math.ceil(tokens / block_size_tokens) * block_size_tokens


@njit(cache=True, nogil=True, inline="always")
def _pow2_shift(n):
    # log2(n) when n is a power of two, else -1: whole blocks by a shift instead of a division.
    if n <= 0 or (n & (n - 1)) != 0:
        return -1
    shift = 0
    while (1 << shift) < n:
        shift += 1
    return shift


@njit(cache=True, nogil=True)
def kv_usage_frac(p, run, run_n, input_tokens, generated, block_size_tokens, kv_tokens):
    """``vllm:kv_cache_usage_perc`` of pod ``p``: blocks held by its running batch over the cache. [fraction]

    Parameters
    ----------
    p : int
        Pod.
    run, run_n : numpy.ndarray of int64
        Running batches (pods x max_num_seqs) and their lengths.
    input_tokens : numpy.ndarray of int64
        Prompt length per request. [tokens]
    generated : numpy.ndarray of float64
        Output tokens produced per request (fractional). [tokens]
    block_size_tokens, kv_tokens : int
        KV block size and cache capacity. [tokens]

    Returns
    -------
    float
        Held blocks (whole generated tokens, rounded up to blocks) over
        ``kv_tokens``, at most 1.
    """
    held = 0
    for k in range(run_n[p]):
        i = run[p, k]
        held += _blocks_tokens(input_tokens[i] + math.floor(generated[i]), block_size_tokens)
    frac = held / kv_tokens
    return 1.0 if 1.0 < frac else frac


@njit(cache=True, nogil=True, inline="always")
def _heap_push(heap, n, value):
    # heapq.heappush on heap[0:n]; returns the new size.
    k = n
    while k > 0:
        parent = (k - 1) >> 1
        if heap[parent] <= value:
            break
        heap[k] = heap[parent]
        k = parent
    heap[k] = value
    return n + 1


@njit(cache=True, nogil=True, inline="always")
def _heap_pop(heap, n):
    # heapq.heappop on heap[0:n] (the minimum is heap[0]); returns the new size.
    n -= 1
    last = heap[n]
    k = 0
    while True:
        child = 2 * k + 1
        if child >= n:
            break
        if child + 1 < n and heap[child + 1] < heap[child]:
            child += 1
        if last <= heap[child]:
            break
        heap[k] = heap[child]
        k = child
    if n > 0:
        heap[k] = last
    return n


@njit(cache=True, nogil=True, inline="always")
def _freed_insert(freed_at_s, freed_tokens, n, at_s, tokens):
    # Append (at_s, tokens) and re-sort, as list.append then list.sort on (time, tokens) tuples; new size.
    k = n
    while k > 0 and (freed_at_s[k - 1] > at_s or (freed_at_s[k - 1] == at_s and freed_tokens[k - 1] > tokens)):
        freed_at_s[k] = freed_at_s[k - 1]
        freed_tokens[k] = freed_tokens[k - 1]
        k -= 1
    freed_at_s[k] = at_s
    freed_tokens[k] = tokens
    return n + 1


@njit(cache=True, nogil=True, inline="always")
def _union_s(busy_from_s, busy_to_s, n):
    # Length of the union of [start, end] intervals: time the GPU ran any kernel. Sorts them in place as
    # (start, end) tuples (insertion sort: they come nearly in order).
    if n == 0:
        return 0.0
    for k in range(1, n):
        start = busy_from_s[k]
        end = busy_to_s[k]
        j = k
        while j > 0 and (busy_from_s[j - 1] > start or (busy_from_s[j - 1] == start and busy_to_s[j - 1] > end)):
            busy_from_s[j] = busy_from_s[j - 1]
            busy_to_s[j] = busy_to_s[j - 1]
            j -= 1
        busy_from_s[j] = start
        busy_to_s[j] = end
    total = 0.0
    cur_start = busy_from_s[0]
    cur_end = busy_to_s[0]
    for k in range(1, n):
        start = busy_from_s[k]
        end = busy_to_s[k]
        if start > cur_end:
            total += cur_end - cur_start
            cur_start = start
            cur_end = end
        elif end > cur_end:
            cur_end = end
    return total + (cur_end - cur_start)


@njit(cache=True, nogil=True, inline="always")
def _preempt_to_fit(p, queues, requests, replica, dt_s, batch_values):
    # Recompute preemption: drop the newest sequences until the batch's growth this tick fits.
    run, run_n, wq_head, wq_tail, wq_n = queues.run, queues.run_n, queues.wq_head, queues.wq_tail, queues.wq_n
    next_req, input_tokens, output_tokens = requests.next_req, requests.input_tokens, requests.output_tokens
    status, generated, prefill_left_s = requests.status, requests.generated, requests.prefill_left_s
    preemptions = requests.preemptions
    step_table_s, max_num_seqs = replica.step_table_s, replica.max_num_seqs
    kv_tokens, block_size_tokens = replica.kv_tokens, replica.block_size_tokens
    n = run_n[p]
    if n == 0:
        return 0
    # Cheap bound first: if even the worst case fits, nothing is preempted.
    step_s = _step_s(step_table_s, n, max_num_seqs)
    prompt_tokens = 0
    for k in range(n):
        i = run[p, k]
        prompt_tokens += input_tokens[i]
        batch_values[k] = generated[i]
    bound = float(prompt_tokens) + pairwise_sum(batch_values, 0, n)
    if bound + n * (dt_s / step_s + block_size_tokens + 1) <= kv_tokens:
        return 0
    preempted = 0
    while n > 1:
        step_s = _step_s(step_table_s, n, max_num_seqs)
        need = 0
        for k in range(n):
            i = run[p, k]
            grown = generated[i] + dt_s / step_s
            if output_tokens[i] < grown:
                grown = output_tokens[i]
            need += _blocks_tokens(input_tokens[i] + math.floor(grown), block_size_tokens)
        if need <= kv_tokens:
            break
        n -= 1
        victim = run[p, n]
        status[victim] = WAITING
        preemptions[victim] += 1
        prefill_left_s[victim] = 0.0
        # waiting.appendleft(victim)
        next_req[victim] = wq_head[p]
        if wq_n[p] == 0:
            wq_tail[p] = victim
        wq_head[p] = victim
        wq_n[p] += 1
        preempted += 1
    run_n[p] = n
    return preempted


@njit(cache=True, nogil=True, inline="always")
def _tick_batch(t0_s, end_s, p, queues, requests, replica, batch_values):
    # The batch that sets the tick's step time: the batch averaged over the part of the tick the replica
    # is busy. Each running sequence is active until it finishes (at the step time of the batch it starts
    # in), each queued request from its arrival; capped at max_num_seqs.
    run, run_n = queues.run, queues.run_n
    output_tokens, generated, prefill_left_s = requests.output_tokens, requests.generated, requests.prefill_left_s
    span_s = end_s - t0_s
    n = run_n[p]
    if n > 0:
        step_s = _step_s(replica.step_table_s, n, replica.max_num_seqs)
        for k in range(n):
            i = run[p, k]
            left_s = prefill_left_s[i] + (output_tokens[i] - generated[i]) * step_s
            batch_values[k] = left_s if left_s <= span_s else span_s
    return _tick_batch_of(t0_s, end_s, p, queues, requests, replica, batch_values)


@njit(cache=True, nogil=True, inline="always")
def _tick_batch_of(t0_s, end_s, p, queues, requests, replica, batch_values):
    # _tick_batch from the running sequences' active times in the tick, batch_values[0:run_n[p]].
    wq_head, wq_n = queues.wq_head, queues.wq_n
    next_req, arrival_s = requests.next_req, requests.arrival_s
    max_num_seqs = replica.max_num_seqs
    span_s = end_s - t0_s
    active_s = 0.0
    busy_s = 0.0
    n = queues.run_n[p]
    if n > 0:
        active_s = pairwise_sum(batch_values, 0, n)
        busy_s = batch_values[0]
        for k in range(1, n):
            if batch_values[k] > busy_s:
                busy_s = batch_values[k]
    i = wq_head[p]
    for _ in range(wq_n[p]):
        if active_s >= max_num_seqs * span_s:
            break
        from_s = arrival_s[i]
        if t0_s > from_s:
            from_s = t0_s
        present_s = end_s - from_s
        if span_s < present_s:
            present_s = span_s
        active_s += present_s
        if present_s > busy_s:
            busy_s = present_s
        i = next_req[i]
    if busy_s <= 0.0:
        return 1
    return min(max(round(active_s / busy_s), 1), max_num_seqs)


@njit(cache=True, nogil=True, inline="always")
def _prefill_queue(t0_s, end_s, batch, step_s, p, queues, requests, replica):
    # planner.simulate.replica._PrefillQueue's constructor: the chunk a step has room for, the share of a
    # full-chunk step spent on the prompt, when the prompts under way have had their chunks scheduled, the
    # stall the decodes take this tick (the estimate plus the debt carried in, clamped), and the debt out
    # before this tick's admissions add to it.
    run, run_n, wq_head, wq_n = queues.run, queues.run_n, queues.wq_head, queues.wq_n
    next_req, arrival_s, input_tokens = requests.next_req, requests.arrival_s, requests.input_tokens
    output_tokens, generated, prefill_left_s = requests.output_tokens, requests.generated, requests.prefill_left_s
    step_table_s, max_num_seqs = replica.step_table_s, replica.max_num_seqs
    cost_ms = replica.prefill_ms_per_token
    span_s = end_s - t0_s
    chunk_tokens = max(replica.max_num_batched_tokens - batch + 1, 1)
    chunk_s = chunk_tokens * cost_ms / 1000.0
    compute_frac = chunk_s / (chunk_s + step_s)
    ahead_s = 0.0
    n = run_n[p]
    slots = max_num_seqs - n
    run_step_s = _step_s(step_table_s, n, max_num_seqs)
    for k in range(n):
        i = run[p, k]
        left_s = prefill_left_s[i]
        if left_s > ahead_s:
            ahead_s = left_s
        if left_s + (output_tokens[i] - generated[i]) * run_step_s <= span_s:
            slots += 1
    free_s = t0_s + ahead_s
    busy_s = (end_s if end_s < free_s else free_s) - t0_s
    queue_s = free_s
    i = wq_head[p]
    for _ in range(wq_n[p]):
        if slots <= 0:
            break
        start_s = queue_s
        if arrival_s[i] > start_s:
            start_s = arrival_s[i]
        if t0_s > start_s:
            start_s = t0_s
        if start_s >= end_s:
            break
        tokens = input_tokens[i] + math.floor(generated[i])
        queue_s = start_s + _held_s(tokens, cost_ms, chunk_tokens, step_s)
        busy_s += (end_s if end_s < queue_s else queue_s) - start_s
        slots -= 1
        i = next_req[i]
    debt_in_s = queues.stall_debt_s[p]
    stall_s = busy_s * compute_frac + debt_in_s
    if stall_s < 0.0:
        stall_s = 0.0
    elif stall_s > span_s * compute_frac:
        stall_s = span_s * compute_frac
    debt_s = debt_in_s - stall_s + ((end_s if end_s < free_s else free_s) - t0_s) * compute_frac
    return free_s, chunk_tokens, compute_frac, stall_s, debt_s


@njit(cache=True, nogil=True, inline="always")
def _held_s(tokens, cost_ms, chunk_tokens, step_s):
    # _PrefillQueue._held_s: the prefill queue's time a prompt holds.
    return tokens * cost_ms / 1000.0 + tokens / chunk_tokens * step_s


@njit(cache=True, nogil=True, inline="always")
def _stalled_step_s(step_s, stall_s, span_s):
    # _PrefillQueue._step_s: a sequence's step when the prompts beside it compute for stall_s seconds.
    return step_s / (1.0 - stall_s / span_s) if stall_s > 0.0 else step_s


@njit(cache=True, nogil=True, inline="always")
def _progress(i, start_s, end_s, step_s, requests):
    # Advance request i from start_s to end_s; return its finish time if it finishes, else NaN.
    output_tokens, status, first_token_s = requests.output_tokens, requests.status, requests.first_token_s
    done_s, generated, prefill_left_s = requests.done_s, requests.generated, requests.prefill_left_s
    status[i] = RUNNING
    prefill = prefill_left_s[i]
    if start_s + prefill >= end_s:
        prefill_left_s[i] = prefill - (end_s - start_s)
        return math.nan
    prefill_left_s[i] = 0.0
    tokens_from_s = start_s + prefill
    gen = generated[i]
    if gen < 1.0:
        first = tokens_from_s + (1.0 - gen) * step_s
        if first <= end_s:
            if math.isnan(first_token_s[i]):
                first_token_s[i] = first
    finish_s = tokens_from_s + (output_tokens[i] - gen) * step_s
    if finish_s <= end_s:
        generated[i] = float(output_tokens[i])
        done_s[i] = finish_s
        status[i] = DONE
        return finish_s
    generated[i] = gen + (end_s - tokens_from_s) / step_s
    return math.nan


@njit(cache=True, nogil=True, inline="always")
def advance_replica(
    t0_s,
    dt_s,
    stop_s,
    p,
    run,
    run_n,
    wq_head,
    wq_tail,
    wq_n,
    stall_debt_s,
    next_req,
    arrival_s,
    input_tokens,
    output_tokens,
    status,
    admit_s,
    first_token_s,
    done_s,
    generated,
    prefill_left_s,
    preemptions,
    step_table_s,
    max_num_seqs,
    kv_tokens,
    block_size_tokens,
    prefill_ms_per_token,
    max_num_batched_tokens,
    scratch,
    completed_out,
):
    """:func:`advance_pod` on loose arrays: the Python model's signature, for the differential test.

    The engine calls :func:`advance_pod` with its named tuples; this packs
    the same arrays into :class:`ReplicaQueues`, :class:`ReplicaRequests` and
    :class:`ReplicaParams` (see :func:`advance_pod` for the parameters).
    """
    return advance_pod(
        t0_s,
        dt_s,
        stop_s,
        p,
        ReplicaQueues(run, run_n, wq_head, wq_tail, wq_n, stall_debt_s),
        ReplicaRequests(
            next_req,
            arrival_s,
            input_tokens,
            output_tokens,
            status,
            admit_s,
            first_token_s,
            done_s,
            generated,
            prefill_left_s,
            preemptions,
        ),
        ReplicaParams(
            step_table_s, max_num_seqs, kv_tokens, block_size_tokens, prefill_ms_per_token, max_num_batched_tokens
        ),
        scratch,
        completed_out,
    )


@njit(cache=True, nogil=True, inline="always")
def advance_pod(t0_s, dt_s, stop_s, p, queues, requests, replica, scratch, completed_out):
    """Run pod ``p``'s replica from ``t0_s`` for ``dt_s`` seconds (or until ``stop_s``), in place.

    Parameters
    ----------
    t0_s, dt_s : float
        Tick start and length. [s]
    stop_s : float
        The replica stops serving at this time (a terminating pod's deadline; ``inf`` if none). [s]
    p : int
        Pod.
    queues : ReplicaQueues or planner.simulate.fast.fleet.Pods
        ``run``, ``run_n`` (running batches, oldest admission first, and
        their lengths; row ``p`` is updated) and ``wq_head``, ``wq_tail``,
        ``wq_n`` (per pod: first and last queued request, -1 if none, and
        the queue's length; entry ``p`` is updated), ``stall_debt_s`` (per
        pod, the chunked-prefill stall debt; entry ``p`` is updated).
    requests : ReplicaRequests or planner.simulate.fast.fleet.Requests
        Per request: ``next_req`` (the next one in its queue, -1 at the
        tail; a request leaving the queue gets -1, a preempted one is linked
        in at the head); ``arrival_s``, ``input_tokens``, ``output_tokens``
        from the trace; ``status`` (WAITING 2, RUNNING 3, DONE 4),
        ``admit_s``, ``first_token_s``, ``done_s`` (NaN until then),
        ``generated``, ``prefill_left_s`` and ``preemptions``, updated.
        [s], [tokens]
    replica : ReplicaParams
        ``step_table_s`` (``max_num_seqs + 1`` entries), ``max_num_seqs``,
        ``kv_tokens``, ``block_size_tokens``, ``prefill_ms_per_token``,
        ``max_num_batched_tokens`` (0 for none), as
        :class:`planner.simulate.replica.ReplicaSpec`. [s], [sequences], [tokens], [ms/token], [tokens]
    scratch : ReplicaScratch
        From :func:`new_scratch`.
    completed_out : numpy.ndarray of int64
        Receives the finished requests; at least ``run_n[p] + wq_n[p]`` long.

    Returns
    -------
    busy_s : float
        Time at least one sequence was processed. [s]
    n_completed : int
        Requests finished, written to ``completed_out[0:n_completed]`` in the
        Python model's order; :data:`NEEDS_CAPACITY` or :data:`BAD_LAYOUT`
        (nothing changed) if the buffers are too small.
    generated_tokens : float
        Output tokens produced. [tokens]
    prompt_tokens : int
        Prompt tokens admitted (prefilled). [tokens]
    preempted : int
        Sequences preempted at the tick start.
    """
    batch_values, free_at_s, freed_at_s, freed_tokens, busy_from_s, busy_to_s = scratch
    run, run_n, wq_head, wq_tail, wq_n = queues.run, queues.run_n, queues.wq_head, queues.wq_tail, queues.wq_n
    next_req, arrival_s, input_tokens = requests.next_req, requests.arrival_s, requests.input_tokens
    output_tokens, status, admit_s = requests.output_tokens, requests.status, requests.admit_s
    first_token_s, done_s, generated = requests.first_token_s, requests.done_s, requests.generated
    prefill_left_s = requests.prefill_left_s
    step_table_s, max_num_seqs, kv_tokens = replica.step_table_s, replica.max_num_seqs, replica.kv_tokens
    block_size_tokens, prefill_ms_per_token = replica.block_size_tokens, replica.prefill_ms_per_token
    if (
        run_n[p] > max_num_seqs
        or run.shape[1] < max_num_seqs
        or step_table_s.shape[0] < max_num_seqs + 1
        or batch_values.shape[0] < max_num_seqs
        or free_at_s.shape[0] < max_num_seqs
    ):
        return 0.0, BAD_LAYOUT, 0.0, 0, 0
    # A tick finishes each request at most once and admits only queued ones.
    held_requests = run_n[p] + wq_n[p]
    if (
        freed_at_s.shape[0] < held_requests
        or freed_tokens.shape[0] < held_requests
        or busy_from_s.shape[0] < held_requests + 1
        or busy_to_s.shape[0] < held_requests + 1
        or completed_out.shape[0] < held_requests
    ):
        return 0.0, NEEDS_CAPACITY, 0.0, 0, 0

    end_s = t0_s + dt_s
    if stop_s < end_s:
        end_s = stop_s
    if end_s <= t0_s:
        return 0.0, 0, 0.0, 0, 0
    # One pass over the running batch for what the tick start needs of it when nothing is preempted (the
    # usual case): the integer bound of _preempt_to_fit, each sequence's active time (_tick_batch) and its
    # tokens so far (into busy_from_s, free until the batch is advanced). Each value is computed as in the
    # separate passes, so the results are the same bit for bit.
    n_start = run_n[p]
    whole = 0
    start_step_s = _step_s(step_table_s, n_start, max_num_seqs)
    for k in range(n_start):
        i = run[p, k]
        gen = generated[i]
        out = output_tokens[i]
        whole += input_tokens[i] + out
        left_s = prefill_left_s[i] + (out - gen) * start_step_s
        batch_values[k] = left_s if left_s <= end_s - t0_s else end_s - t0_s
        busy_from_s[k] = gen
    # Every sequence at its full output, each in one more block than its tokens need, fits the cache: then
    # _preempt_to_fit, whose bounds are tighter, would find nothing to preempt.
    fits = whole + n_start * block_size_tokens <= kv_tokens
    if fits:
        preempted = 0
        batch = _tick_batch_of(t0_s, end_s, p, queues, requests, replica, batch_values)
    else:
        preempted = _preempt_to_fit(p, queues, requests, replica, end_s - t0_s, batch_values)
        batch = _tick_batch(t0_s, end_s, p, queues, requests, replica, batch_values)
    step_s = _step_s(step_table_s, batch, max_num_seqs)
    chunked = replica.max_num_batched_tokens > 0 and prefill_ms_per_token > 0
    span_s = end_s - t0_s
    queue_free_s = t0_s
    queue_since_s = t0_s  # the start of the run of prompts the prefill queue is in
    chunk_tokens = 1
    compute_frac = 0.0
    stall_s = 0.0
    debt_s = 0.0
    if chunked:
        queue_free_s, chunk_tokens, compute_frac, stall_s, debt_s = _prefill_queue(
            t0_s, end_s, batch, step_s, p, queues, requests, replica
        )
    n_run = run_n[p]
    n_completed = 0
    n_busy = 0
    n_freed = 0
    n_still = 0  # still-running requests, compacted into run[p] in order
    # Free batch slots: n_idle of them free since t0_s (the earliest a slot can free), and a min-heap of
    # the times slots free inside the tick (all at or after t0_s; equal times are interchangeable).
    n_idle = max_num_seqs - n_run
    n_heap = 0
    kv_used = 0
    generated_before = 0.0
    # Only admissions read the KV in use and when slots and blocks free: with nothing queued, neither is kept.
    kv_needed = wq_n[p] > 0
    block_shift = _pow2_shift(block_size_tokens)
    running_tokens = 0.0  # the still-running sequences' tokens, summed left to right as they are kept
    if n_run > 0:
        # The sequences running at the tick start: which finish, when, and the KV they held.
        if fits:
            generated_before = pairwise_sum(busy_from_s, 0, n_run)
        else:
            for k in range(n_run):
                batch_values[k] = generated[run[p, k]]
            generated_before = pairwise_sum(batch_values, 0, n_run)
        last_s = 0.0
        for k in range(n_run):
            i = run[p, k]
            gen = generated[i]
            out = output_tokens[i]
            held = 0
            if kv_needed:
                tokens = input_tokens[i] + math.floor(gen)
                if block_shift >= 0 and tokens >= 0:  # the same whole blocks, without a division
                    held = ((tokens + block_size_tokens - 1) >> block_shift) << block_shift
                else:
                    held = -(-tokens // block_size_tokens) * block_size_tokens
            prefill = prefill_left_s[i]
            own_step_s = step_s
            if chunked:
                own_to_s = t0_s + prefill
                own_s = ((end_s if end_s < own_to_s else own_to_s) - t0_s) * compute_frac
                own_step_s = _stalled_step_s(step_s, stall_s - own_s, span_s)
            in_prefill = t0_s + prefill >= end_s
            tokens_from_s = t0_s + prefill
            first = tokens_from_s + (1.0 - gen) * own_step_s
            if not in_prefill and gen < 1.0 and first <= end_s and math.isnan(first_token_s[i]):
                first_token_s[i] = first
            finish_s = tokens_from_s + (out - gen) * own_step_s
            finished = not in_prefill and finish_s <= end_s
            if in_prefill:
                prefill_left_s[i] = prefill - span_s
            else:
                prefill_left_s[i] = 0.0
            kv_used += held
            tail_s = end_s
            if finished:
                generated[i] = float(out)
                done_s[i] = finish_s
                status[i] = DONE
                completed_out[n_completed] = i
                n_completed += 1
                if kv_needed:
                    n_heap = _heap_push(free_at_s, n_heap, finish_s)
                    n_freed = _freed_insert(freed_at_s, freed_tokens, n_freed, finish_s, held)
                tail_s = finish_s
            else:
                if not in_prefill:
                    generated[i] = gen + (end_s - tokens_from_s) / own_step_s
                run[p, n_still] = i
                n_still += 1
                running_tokens += generated[i]
            if k == 0 or tail_s > last_s:
                last_s = tail_s
        busy_from_s[0] = t0_s
        busy_to_s[0] = last_s
        n_busy = 1
    freed_index = 0
    prompt_tokens = 0
    while wq_n[p] > 0 and n_idle + n_heap > 0:
        i = wq_head[p]
        at = t0_s if n_idle > 0 else free_at_s[0]
        if arrival_s[i] > at:
            at = arrival_s[i]
        if t0_s > at:
            at = t0_s
        if at >= end_s:
            break
        while freed_index < n_freed and freed_at_s[freed_index] <= at:
            kv_used -= freed_tokens[freed_index]
            freed_index += 1
        tokens_to_prefill = input_tokens[i] + math.floor(generated[i])
        need = _blocks_tokens(tokens_to_prefill + 1, block_size_tokens)
        if kv_used + need > kv_tokens and kv_used > 0:
            # Head-of-line: the queue waits until sequences finishing in this tick free enough blocks.
            released = 0
            j = freed_index
            when = math.nan
            while j < n_freed:
                released += freed_tokens[j]
                if kv_used - released + need <= kv_tokens:
                    when = freed_at_s[j]
                    break
                j += 1
            if math.isnan(when) or when >= end_s:
                break
            if when > at:
                at = when
            kv_used -= released
            freed_index = j + 1
        if n_idle > 0:
            n_idle -= 1
        else:
            n_heap = _heap_pop(free_at_s, n_heap)
        # waiting.popleft()
        wq_n[p] -= 1
        if wq_n[p] == 0:
            wq_head[p] = -1
            wq_tail[p] = -1
        else:
            wq_head[p] = next_req[i]
        next_req[i] = -1
        kv_used += need
        status[i] = RUNNING
        if math.isnan(admit_s[i]):
            admit_s[i] = at
        prompt_tokens += tokens_to_prefill
        own_step_s = step_s
        if not chunked:
            prefill_left_s[i] = tokens_to_prefill * prefill_ms_per_token / 1000.0
        else:
            # _PrefillQueue.admit: the prompt waits for the ones before it, then is prefilled in chunks.
            start_s = at
            if queue_free_s > at:
                start_s = queue_free_s
            else:
                queue_since_s = at
            n_chunks = max(-(-tokens_to_prefill // chunk_tokens), 1)
            prefill_left_s[i] = (start_s - at) + (
                tokens_to_prefill * prefill_ms_per_token / 1000.0 + (n_chunks - 1) * step_s
            )
            queue_free_s = start_s + _held_s(tokens_to_prefill, prefill_ms_per_token, chunk_tokens, step_s)
            if start_s < end_s:
                debt_s += ((end_s if end_s < queue_free_s else queue_free_s) - start_s) * compute_frac
            own_s = ((end_s if end_s < queue_free_s else queue_free_s) - queue_since_s) * compute_frac
            own_step_s = _stalled_step_s(step_s, stall_s - own_s, span_s)
        generated_before += generated[i]
        finish_s = _progress(i, at, end_s, own_step_s, requests)
        busy_from_s[n_busy] = at
        if math.isnan(finish_s):
            busy_to_s[n_busy] = end_s
            run[p, n_still] = i
            n_still += 1
            running_tokens += generated[i]
        else:
            busy_to_s[n_busy] = finish_s
            completed_out[n_completed] = i
            n_completed += 1
            n_heap = _heap_push(free_at_s, n_heap, finish_s)
            n_freed = _freed_insert(freed_at_s, freed_tokens, n_freed, finish_s, need)
        n_busy += 1
    run_n[p] = n_still
    queues.stall_debt_s[p] = debt_s
    # Built-in sums, left to right: the running batch's tokens (float, kept above), the completed ones' (int).
    completed_tokens = 0
    for k in range(n_completed):
        completed_tokens += output_tokens[completed_out[k]]
    generated_after = running_tokens + completed_tokens
    return (
        _union_s(busy_from_s, busy_to_s, n_busy),
        n_completed,
        generated_after - generated_before,
        prompt_tokens,
        preempted,
    )


@njit(cache=True, nogil=True)
def _link_queue(queue, next_req):
    # The waiting deque (as an array) as a linked list through next_req; its head, tail and length.
    n = queue.shape[0]
    if n == 0:
        return -1, -1, 0
    for k in range(n - 1):
        next_req[queue[k]] = queue[k + 1]
    next_req[queue[n - 1]] = -1
    return queue[0], queue[n - 1], n


@njit(cache=True, nogil=True)
def _unlink_queue(head, n, next_req, out):
    # The linked list from head back into an array, in queue order.
    i = head
    for k in range(n):
        out[k] = i
        i = next_req[i]
    return out[:n]


class ListReplica:
    """The replica kernel behind the Python model's interface: a ``running`` list and a ``waiting`` deque.

    :meth:`advance` is :func:`planner.simulate.replica.advance_replica` for one
    :class:`planner.simulate.replica.ReplicaSpec`, computed by :func:`advance_replica`
    (bit for bit the same, as its differential test holds it): the list and deque are
    copied into a one-pod batch row and linked-list queue, the kernel runs, and
    they are copied back. The lockstep engine serves with it, so the
    configurations the kernels cannot decide for still batch at compiled speed.

    Parameters
    ----------
    spec : ReplicaSpec
    n_requests : int
        Length of the :class:`planner.simulate.replica.RequestState` arrays it is handed.
    """

    def __init__(self, spec: ReplicaSpec, n_requests: int) -> None:
        self._compiled = CompiledReplica.from_spec(spec)
        slots = self._compiled.max_num_seqs
        self._run = np.zeros((1, slots), dtype=np.int64)
        self._run_n = np.zeros(1, dtype=np.int64)
        self._wq_head = np.full(1, -1, dtype=np.int64)
        self._wq_tail = np.full(1, -1, dtype=np.int64)
        self._wq_n = np.zeros(1, dtype=np.int64)
        self._stall_debt_s = np.zeros(1)
        self._next_req = np.full(max(n_requests, 1), -1, dtype=np.int64)
        self._capacity = 0
        self._reserve(64)
        self._req: RequestState | None = None
        self._trace_arrays: tuple[np.ndarray, np.ndarray, np.ndarray] | None = None

    def _read_only(self, req: RequestState) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        # The trace's arrays as read-only contiguous views, whether the trace's own are writable or not:
        # the kernel is compiled (and cached) for one type of each, not once per reader's flags.
        if req is not self._req or self._trace_arrays is None:
            views = []
            for values, dtype in (
                (req.arrival_s, np.float64),
                (req.input_tokens, np.int64),
                (req.output_tokens, np.int64),
            ):
                view = np.ascontiguousarray(values, dtype=dtype).view()
                view.flags.writeable = False
                views.append(view)
            self._req = req
            self._trace_arrays = (views[0], views[1], views[2])
        return self._trace_arrays

    def _reserve(self, requests: int) -> None:
        # Work arrays for a pod holding up to `requests` at a tick start, grown by doubling.
        if requests <= self._capacity:
            return
        self._capacity = max(requests, 2 * self._capacity)
        self._scratch = new_scratch(self._compiled.max_num_seqs, self._capacity)
        self._completed_out = np.empty(self._capacity, dtype=np.int64)
        self._queue_out = np.empty(self._capacity, dtype=np.int64)

    def advance(
        self,
        t0_s: float,
        dt_s: float,
        running: list[int],
        waiting: deque,
        req: RequestState,
        stop_s: float = math.inf,
        stall_debt_s: float = 0.0,
    ) -> ReplicaTick:
        """:func:`planner.simulate.replica.advance_replica` (less its ``spec``), in place. [s]"""
        self._reserve(len(running) + len(waiting))
        n_running = len(running)
        self._run[0, :n_running] = running
        self._run_n[0] = n_running
        queue = np.fromiter(waiting, dtype=np.int64, count=len(waiting))
        self._wq_head[0], self._wq_tail[0], self._wq_n[0] = _link_queue(queue, self._next_req)
        self._stall_debt_s[0] = stall_debt_s
        arrival_s, input_tokens, output_tokens = self._read_only(req)
        c = self._compiled
        busy_s, n_completed, generated_tokens, prompt_tokens, preempted = advance_replica(
            t0_s,
            dt_s,
            stop_s,
            0,
            self._run,
            self._run_n,
            self._wq_head,
            self._wq_tail,
            self._wq_n,
            self._stall_debt_s,
            self._next_req,
            arrival_s,
            input_tokens,
            output_tokens,
            req.status,
            req.admit_s,
            req.first_token_s,
            req.done_s,
            req.generated,
            req.prefill_left_s,
            req.preemptions,
            c.step_table_s,
            c.max_num_seqs,
            c.kv_tokens,
            c.block_size_tokens,
            c.prefill_ms_per_token,
            c.max_num_batched_tokens,
            self._scratch,
            self._completed_out,
        )
        if n_completed < 0:  # the buffers were reserved above; a batch past max_num_seqs is the caller's bug
            raise ValueError(f"the replica kernel refused the pod's layout (code {n_completed})")
        running[:] = self._run[0, : self._run_n[0]].tolist()
        waiting.clear()
        waiting.extend(_unlink_queue(self._wq_head[0], self._wq_n[0], self._next_req, self._queue_out).tolist())
        return ReplicaTick(
            busy_s,
            tuple(self._completed_out[:n_completed].tolist()),
            generated_tokens,
            prompt_tokens,
            preempted,
            float(self._stall_debt_s[0]),
        )
