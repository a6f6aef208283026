"""Differential test: the compiled replica kernel against the Python replica model, bit for bit.

Each case builds one replica's state twice, as the Python model holds it
(``running`` list, ``waiting`` deque, :class:`RequestState`) and as the fast
engine does (batch rows, a linked-list queue, the same arrays), advances both
for a few ticks with arrivals routed in between, and demands identical request
arrays (compared as bits), batch and queue order, and tick numbers.
"""

from __future__ import annotations

import dis
import math
import sys
from collections import Counter, deque
from dataclasses import replace

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from planner.simulate import replica as model
from planner.simulate.fast.replica import (
    BAD_LAYOUT,
    NEEDS_CAPACITY,
    CompiledReplica,
    ListReplica,
    advance_replica,
    kv_usage_frac,
    new_scratch,
)
from planner.simulate.replica import PENDING, RUNNING, WAITING, ReplicaSpec, RequestState

TRACE_ARRAYS = ("arrival_s", "input_tokens", "output_tokens")
ARRAYS = (
    "arrival_s",
    "input_tokens",
    "output_tokens",
    "status",
    "admit_s",
    "first_token_s",
    "done_s",
    "generated",
    "prefill_left_s",
    "preemptions",
)
PODS, POD = 3, 1  # the replica under test is pod 1 of 3, so the other rows must stay untouched


def _bits(values: np.ndarray) -> np.ndarray:
    return values.view(np.int64) if values.dtype == np.float64 else values


class Kernel:
    """The fast engine's copy of one replica: pod ``POD``'s batch row and linked-list queue."""

    def __init__(
        self,
        req: RequestState,
        spec: ReplicaSpec,
        running,
        waiting,
        capacity: int | None = None,
        stall_debt_s: float = 0.0,
    ):
        self.req = {name: getattr(req, name).copy() for name in ARRAYS}
        for name in TRACE_ARRAYS:  # read-only, as the lockstep engine passes them: the same compiled kernel
            self.req[name].flags.writeable = False
        self.compiled = CompiledReplica.from_spec(spec)
        n_req = len(req)
        capacity = n_req if capacity is None else capacity
        self.scratch = new_scratch(spec.max_num_seqs, capacity)
        self.completed_out = np.full(capacity, -3, dtype=np.int64)
        self.run = np.full((PODS, spec.max_num_seqs), -5, dtype=np.int64)
        self.run_n = np.array([7, 0, 9], dtype=np.int64)
        self.wq_head = np.array([-9, -1, -8], dtype=np.int64)
        self.wq_tail = np.array([-9, -1, -8], dtype=np.int64)
        self.wq_n = np.array([11, 0, 12], dtype=np.int64)
        self.stall_debt_s = np.array([-7.5, stall_debt_s, 9.25])
        self.next_req = np.full(n_req, -1, dtype=np.int64)
        self.run[POD, : len(running)] = running
        self.run_n[POD] = len(running)
        for i in waiting:
            self.append(i)
        self.others = self._others()

    def _others(self):
        keep = [q for q in range(PODS) if q != POD]
        arrays = (self.run, self.run_n, self.wq_head, self.wq_tail, self.wq_n, self.stall_debt_s)
        return [a[keep].copy() for a in arrays]

    def append(self, i: int) -> None:
        """The router's append at the queue's tail."""
        self.next_req[i] = -1
        if self.wq_n[POD] == 0:
            self.wq_head[POD] = i
        else:
            self.next_req[self.wq_tail[POD]] = i
        self.wq_tail[POD] = i
        self.wq_n[POD] += 1

    def batch(self) -> list[int]:
        return self.run[POD, : self.run_n[POD]].tolist()

    def queue(self) -> list[int]:
        out, i = [], self.wq_head[POD]
        for _ in range(self.wq_n[POD]):
            out.append(int(i))
            i = self.next_req[i]
        assert i == -1
        assert self.wq_tail[POD] == (out[-1] if out else -1)
        return out

    def advance(self, t0_s: float, dt_s: float, stop_s: float):
        c, r = self.compiled, self.req
        return advance_replica(
            t0_s,
            dt_s,
            stop_s,
            POD,
            self.run,
            self.run_n,
            self.wq_head,
            self.wq_tail,
            self.wq_n,
            self.stall_debt_s,
            self.next_req,
            *(r[name] for name in ARRAYS),
            c.step_table_s,
            c.max_num_seqs,
            c.kv_tokens,
            c.block_size_tokens,
            c.prefill_ms_per_token,
            c.max_num_batched_tokens,
            self.scratch,
            self.completed_out,
        )

    def kv_usage(self) -> float:
        c = self.compiled
        return kv_usage_frac(
            POD, self.run, self.run_n, self.req["input_tokens"], self.req["generated"], c.block_size_tokens, c.kv_tokens
        )


class LineHits:
    """Lines of the Python replica model executed so far: shows the examples reach every branch."""

    FUNCTIONS = (
        model.advance_replica,
        model._preempt_to_fit,
        model._tick_batch,
        model._progress_batch,
        model._progress,
        model._union_s,
        model.kv_usage_frac,
        model._PrefillQueue.__init__,
        model._PrefillQueue._held_s,
        model._PrefillQueue._step_s,
        model._PrefillQueue.running_steps_s,
        model._PrefillQueue.admit,
    )

    def __init__(self):
        self.codes = {f.__code__ for f in self.FUNCTIONS}
        self.hits: Counter[int] = Counter()

    def __call__(self, frame, event, arg):
        return self._line if frame.f_code in self.codes else None

    def _line(self, frame, event, arg):
        if event == "line":
            self.hits[frame.f_lineno] += 1
        return self._line

    def run(self, fn, *args, **kwargs):
        previous = sys.gettrace()
        sys.settrace(self)
        try:
            return fn(*args, **kwargs)
        finally:
            sys.settrace(previous)

    def missed(self) -> set[int]:
        body = set()
        for code in self.codes:
            body |= {line for _, line in dis.findlinestarts(code) if line is not None and line > code.co_firstlineno}
        return body - set(self.hits)

    def count(self, text: str) -> int:
        """Times the model's source line containing ``text`` (exactly one line) ran."""
        lines = [n for n, line in enumerate(open(model.__file__).read().splitlines(), 1) if text in line]
        assert len(lines) == 1, text
        return self.hits[lines[0]]


def tick_both(req, spec, running, waiting, kernel: Kernel, t0_s, dt_s, stop_s, hits: LineHits | None = None):
    """One tick of both; asserts they agree."""
    call = hits.run if hits is not None else (lambda fn, *a, **k: fn(*a, **k))
    stall_debt_s = float(kernel.stall_debt_s[POD])
    tick = call(model.advance_replica, t0_s, dt_s, running, waiting, req, spec, stop_s, stall_debt_s)
    busy_s, n_completed, generated_tokens, prompt_tokens, preempted = kernel.advance(t0_s, dt_s, stop_s)
    assert n_completed >= 0
    assert kernel.completed_out[:n_completed].tolist() == list(tick.completed)
    assert busy_s == tick.busy_s
    assert generated_tokens == tick.generated_tokens
    assert prompt_tokens == tick.prompt_tokens
    assert preempted == tick.preemptions
    assert kernel.stall_debt_s[POD] == tick.stall_debt_s
    assert_same_state(req, running, waiting, kernel)
    assert kernel.kv_usage() == call(model.kv_usage_frac, running, req, spec)
    return tick


def assert_same_state(req, running, waiting, kernel: Kernel) -> None:
    for name in ARRAYS:
        assert np.array_equal(_bits(kernel.req[name]), _bits(getattr(req, name)), equal_nan=True), name
    assert kernel.batch() == list(running)
    assert kernel.queue() == list(waiting)
    for before, after in zip(kernel.others, kernel._others(), strict=True):
        assert np.array_equal(before, after)


@st.composite
def replica_cases(draw, sizes=(1, 2, 3, 4, 6, 8, 16), queue_max=10):
    """A replica mid-run: a batch (up to full), a queue, arrivals to come, and a KV cache sized around them."""
    max_num_seqs = draw(st.sampled_from(sizes))
    block = draw(st.sampled_from([1, 3, 16]))
    dt_s = draw(st.sampled_from([1.0, 0.5]))
    t_start_s = draw(st.sampled_from([0.0, 7.0, 86_000.5]))
    n_ticks = draw(st.integers(1, 5))
    n_run = draw(st.one_of(st.just(max_num_seqs), st.integers(0, max_num_seqs)))
    n_wait = draw(st.integers(0, queue_max))
    n_future = draw(st.integers(0, queue_max))
    n = n_run + n_wait + n_future
    outputs = draw(st.lists(st.one_of(st.just(1), st.integers(1, 4), st.integers(1, 300)), min_size=n, max_size=n))
    inputs = draw(st.lists(st.one_of(st.integers(1, 40), st.integers(1, 600)), min_size=n, max_size=n))
    prefill_ms = draw(st.one_of(st.just(0.0), st.sampled_from([0.3, 2.5]), st.floats(0.0, 4.0)))
    # No budget (prefill delays only its own request), vLLM's default, or budgets a prompt needs several steps of.
    budget = draw(st.one_of(st.none(), st.just(2048), st.integers(0, 48).map(lambda extra: max_num_seqs + extra)))
    fixed_ms = draw(st.one_of(st.floats(0.5, 60.0), st.sampled_from([6.0, 25.0])))
    per_sequence_ms = draw(st.one_of(st.just(0.0), st.floats(0.0, 6.0)))
    # The stall debt the replica's last tick carried out: none, or either sign (a chunked replica's).
    stall_debt_s = draw(st.one_of(st.just(0.0), st.floats(-dt_s, dt_s)))
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))

    arrival = np.empty(n)
    arrival[:n_run] = t_start_s - rng.uniform(0.0, 20.0, n_run)
    arrival[n_run : n_run + n_wait] = t_start_s + rng.uniform(-5.0, dt_s, n_wait) * (rng.random(n_wait) < 0.6)
    arrival[n_run + n_wait :] = np.sort(t_start_s + rng.uniform(dt_s, n_ticks * dt_s, n_future))
    req = RequestState(arrival, np.array(inputs, dtype=np.int64), np.array(outputs, dtype=np.int64))

    def partly_generated(i):
        out = outputs[i]
        kind = rng.integers(4)
        gen = [0.0, float(rng.integers(out)), rng.uniform(0.0, out), rng.uniform(0.0, 1.0)][kind]
        req.generated[i] = min(gen, math.nextafter(float(out), 0.0))
        req.admit_s[i] = arrival[i] + rng.uniform(0.0, 0.5)
        if req.generated[i] >= 1.0:
            req.first_token_s[i] = req.admit_s[i] + rng.uniform(0.0, 0.2)

    for i in range(n_run):
        partly_generated(i)
        req.status[i] = RUNNING
        req.preemptions[i] = rng.integers(0, 2)
        if rng.random() < 0.4:
            req.prefill_left_s[i] = rng.uniform(0.0, 1.5 * dt_s)
    preempted = [i for i in range(n_run, n_run + n_wait) if rng.random() < 0.3]
    for i in preempted:
        partly_generated(i)
        req.preemptions[i] = rng.integers(1, 3)
    for i in range(n_run, n_run + n_wait):
        req.status[i] = WAITING
    rest = sorted(set(range(n_run, n_run + n_wait)) - set(preempted), key=lambda i: arrival[i])
    waiting = deque(preempted + rest)
    running = list(range(n_run))
    rng.shuffle(running)

    # A cache from far too small (preemption, head-of-line waits, prompts larger than the cache) to ample.
    held = sum(math.ceil((inputs[i] + math.floor(req.generated[i]) + 1) / block) * block for i in range(n_run + n_wait))
    factor = draw(st.sampled_from([0.2, 0.5, 0.8, 1.0, 1.3, 3.0, 50.0]))
    kv_tokens = max(block, int(held * factor))
    spec = ReplicaSpec(
        fixed_ms=fixed_ms,
        per_sequence_ms=per_sequence_ms,
        max_num_seqs=max_num_seqs,
        kv_tokens=kv_tokens,
        block_size_tokens=block,
        prefill_ms_per_token=prefill_ms,
        max_num_batched_tokens=budget,
    )
    stop_s = draw(
        st.one_of(
            st.just(math.inf),
            st.floats(0.0, n_ticks * dt_s).map(lambda x: t_start_s + x),
            st.integers(0, n_ticks).map(lambda k: t_start_s + k * dt_s),
        )
    )
    return req, spec, running, waiting, t_start_s, dt_s, n_ticks, stop_s, stall_debt_s


def run_case(case, hits: LineHits | None = None) -> None:
    req, spec, running, waiting, t_start_s, dt_s, n_ticks, stop_s, stall_debt_s = case
    kernel = Kernel(req, spec, running, waiting, stall_debt_s=stall_debt_s)
    assert_same_state(req, running, waiting, kernel)
    routed = len(req) - int((req.status == PENDING).sum())
    for k in range(n_ticks):
        t0_s = t_start_s + k * dt_s
        while routed < len(req) and req.arrival_s[routed] < t0_s + dt_s:
            for status in (req.status, kernel.req["status"]):
                status[routed] = WAITING
            waiting.append(routed)
            kernel.append(routed)
            routed += 1
        tick_both(req, spec, running, waiting, kernel, t0_s, dt_s, stop_s, hits)


def test_the_kernel_equals_the_python_model_on_generated_replicas():
    hits = LineHits()

    @settings(max_examples=1500, deadline=None, suppress_health_check=[HealthCheck.too_slow])
    @given(replica_cases())
    def check(case):
        run_case(case, hits)

    check()
    # Every line of the Python model ran, so every branch of the port was compared.
    assert hits.missed() == set()
    for branch in (
        "victim = running.pop()",  # preemption
        "at = max(at, when)",  # head-of-line wait until a release inside the tick
        "if when is None or when >= end_s:",  # head-of-line wait past the tick
        "j += 1",  # a wait for more than one release
        "active_s += present_s",
        "return total + (cur_end - cur_start)",
        "start_s = self.free_s  # the prompts admitted before it still have chunks to schedule",
        "return self.step_s / (1.0 - stall_s / self.span_s)",  # decodes slowed by prompts beside them
        "stall_s = 0.0",  # a debt larger than the estimate
        "stall_s = self.span_s * self.compute_frac",  # a stall capped at a full chunk's share
        "self.debt_s += (min(self.free_s, self.end_s) - start_s) * self.compute_frac",
    ):
        assert hits.count(branch) >= 20, branch


def test_the_kernel_equals_the_python_model_on_large_batches():
    # Batches of the engine's sizes, and above 128 sequences, where numpy's pairwise sum splits in halves.
    preempted = Counter()

    @settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
    @given(replica_cases(sizes=(64, 200, 256), queue_max=60))
    def check(case):
        preempted[len(case[2]) > 128] += 1
        run_case(case)

    check()
    assert preempted[True] >= 20


def _copy_state(req: RequestState) -> RequestState:
    copy = RequestState(req.arrival_s.copy(), req.input_tokens.copy(), req.output_tokens.copy())
    for name in ARRAYS:
        setattr(copy, name, getattr(req, name).copy())
    return copy


# ListReplica (what the lockstep engine serves with) copies a list and a deque in and out of the kernel.
# The request arrays, the batch and queue order and every tick's numbers must come out bit for bit.
@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(replica_cases(sizes=(1, 3, 8, 200), queue_max=40))
def test_the_list_replica_equals_the_python_model_on_generated_replicas(case):
    req, spec, running, waiting, t_start_s, dt_s, n_ticks, stop_s, stall_debt_s = case
    twin_req, twin_running, twin_waiting = _copy_state(req), list(running), deque(waiting)
    replica = ListReplica(spec, len(req))
    model_debt_s = twin_debt_s = stall_debt_s
    routed = len(req) - int((req.status == PENDING).sum())
    for k in range(n_ticks):
        t0_s = t_start_s + k * dt_s
        while routed < len(req) and req.arrival_s[routed] < t0_s + dt_s:
            req.status[routed] = twin_req.status[routed] = WAITING
            waiting.append(routed)
            twin_waiting.append(routed)
            routed += 1
        tick = model.advance_replica(t0_s, dt_s, running, waiting, req, spec, stop_s, model_debt_s)
        twin = replica.advance(t0_s, dt_s, twin_running, twin_waiting, twin_req, stop_s, twin_debt_s)
        assert twin == tick
        assert [type(i) for i in twin.completed] == [int] * len(twin.completed)
        assert twin_running == running and twin_waiting == waiting
        for name in ARRAYS:
            assert np.array_equal(_bits(getattr(twin_req, name)), _bits(getattr(req, name)), equal_nan=True), name
        model_debt_s, twin_debt_s = tick.stall_debt_s, twin.stall_debt_s


def _queue_only(inputs, outputs, arrival_s=0.0):
    n = len(inputs)
    req = RequestState(np.full(n, arrival_s), np.array(inputs), np.array(outputs))
    req.status[:] = WAITING
    return req


def test_one_token_outputs_refill_every_slot_many_times_within_the_capacity():
    spec = ReplicaSpec(fixed_ms=1.0, per_sequence_ms=0.0, max_num_seqs=2, kv_tokens=10_000, block_size_tokens=16)
    req = _queue_only([10] * 300, [1] * 300)
    running, waiting = [], deque(range(300))
    kernel = Kernel(req, spec, running, waiting, capacity=300)
    tick = tick_both(req, spec, running, waiting, kernel, 0.0, 1.0, math.inf)
    assert len(tick.completed) == 300 and not running and not waiting


def test_buffers_too_small_change_nothing():
    spec = ReplicaSpec(fixed_ms=1.0, max_num_seqs=2)
    req = _queue_only([10] * 5, [3] * 5)
    for capacity, columns, code in ((4, 2, NEEDS_CAPACITY), (5, 1, BAD_LAYOUT)):
        kernel = Kernel(req, spec, [], deque(range(5)), capacity=capacity)
        kernel.run = np.full((PODS, columns), -5, dtype=np.int64)
        kernel.others = kernel._others()
        before = {name: a.copy() for name, a in kernel.req.items()}
        assert kernel.advance(0.0, 1.0, math.inf) == (0.0, code, 0.0, 0, 0)
        assert all(np.array_equal(before[name], kernel.req[name], equal_nan=True) for name in ARRAYS)
        assert kernel.queue() == list(range(5)) and kernel.batch() == []
    kernel = Kernel(req, spec, [], deque(range(5)))
    kernel.completed_out = np.zeros(4, dtype=np.int64)
    assert kernel.advance(0.0, 1.0, math.inf)[1] == NEEDS_CAPACITY


def test_a_replica_past_its_stop_does_nothing():
    spec = ReplicaSpec(max_num_seqs=4)
    req = _queue_only([10] * 3, [5] * 3)
    running, waiting = [], deque(range(3))
    kernel = Kernel(req, spec, running, waiting)
    for stop_s in (3.0, 2.5):
        tick = tick_both(req, spec, running, waiting, kernel, 3.0, 1.0, stop_s)
        assert tick.busy_s == 0.0 and waiting


def test_a_head_of_line_wait_ends_at_the_release_of_a_finishing_sequence():
    # 90 KV tokens held by a sequence that finishes at 0.1 s; the head of the queue needs 16 of 100.
    spec = ReplicaSpec(
        fixed_ms=10.0, per_sequence_ms=0.0, max_num_seqs=4, kv_tokens=100, block_size_tokens=1, prefill_ms_per_token=0.0
    )
    req = _queue_only([90, 15, 5], [10, 20, 20])
    req.status[0] = RUNNING
    running, waiting = [0], deque([1, 2])
    kernel = Kernel(req, spec, running, waiting)
    tick_both(req, spec, running, waiting, kernel, 0.0, 1.0, math.inf)
    assert req.admit_s[1] == req.done_s[0] == pytest.approx(0.1)


def test_a_release_sorting_in_front_of_the_consumed_ones_is_consumed_again_as_in_python():
    # Request 1, nearly done, is admitted at request 0's finish and finishes at that same instant:
    # (t, 15) sorts before the already consumed (t, 90), so the Python releases the 90 tokens twice.
    t0_s = 1000.0
    spec = ReplicaSpec(
        fixed_ms=10.0, per_sequence_ms=0.0, max_num_seqs=2, kv_tokens=100, block_size_tokens=1, prefill_ms_per_token=0.0
    )
    req = _queue_only([90, 5, 80], [10, 10, 5], arrival_s=t0_s - 1.0)
    req.status[0] = RUNNING
    req.generated[1] = 10.0 - 1e-12
    running, waiting = [0], deque([1, 2])
    kernel = Kernel(req, spec, running, waiting)
    tick_both(req, spec, running, waiting, kernel, t0_s, 1.0, math.inf)
    assert req.admit_s[1] == req.done_s[1] == req.done_s[0]
    assert req.admit_s[2] == req.done_s[0]  # admitted although 15 + 81 > 100 - 90 + 90... as the Python does


def test_kv_usage_is_capped_at_one_for_a_prompt_larger_than_the_cache():
    spec = ReplicaSpec(fixed_ms=10.0, max_num_seqs=2, kv_tokens=64, block_size_tokens=16)
    req = _queue_only([100], [500])
    running, waiting = [], deque([0])
    kernel = Kernel(req, spec, running, waiting)
    tick_both(req, spec, running, waiting, kernel, 0.0, 1.0, math.inf)
    assert running == [0] and kernel.kv_usage() == 1.0


def test_the_comparison_can_fail_on_one_bit():
    spec = ReplicaSpec(fixed_ms=10.0, max_num_seqs=2)
    req = _queue_only([10, 10], [50, 500])
    running, waiting = [], deque([0, 1])
    kernel = Kernel(req, spec, running, waiting)
    tick_both(req, spec, running, waiting, kernel, 0.0, 1.0, math.inf)
    kernel.req["done_s"][0] = math.nextafter(kernel.req["done_s"][0], 1.0)
    with pytest.raises(AssertionError, match="done_s"):
        assert_same_state(req, running, waiting, kernel)


def _tick_batch_of(req, spec, running, waiting, t0_s, dt_s):
    """The Python model's averaged batch for the next tick, on copies."""
    return model._tick_batch(t0_s, t0_s + dt_s, list(running), deque(waiting), req, spec)


@pytest.mark.parametrize(("arrivals_s", "batch"), [((0.0, 0.0, 0.5), 2), ((0.0, 0.0, 0.0, 0.5), 4)])
def test_the_averaged_batch_rounds_half_to_even(arrivals_s, batch):
    # Queued requests present 1 + 1 + 0.5 (or 1 + 1 + 1 + 0.5) s of a 1 s tick: an average of 2.5 (3.5)
    # sequences, which Python's round takes to 2 (4); each batch size has its own step time.
    spec = ReplicaSpec(fixed_ms=10.0, per_sequence_ms=1.0, max_num_seqs=8)
    n = len(arrivals_s)
    req = RequestState(np.array(arrivals_s), np.full(n, 10), np.full(n, 500))
    req.status[:] = WAITING
    running, waiting = [], deque(range(n))
    assert _tick_batch_of(req, spec, running, waiting, 0.0, 1.0) == batch
    kernel = Kernel(req, spec, running, waiting)
    for k in range(3):
        tick_both(req, spec, running, waiting, kernel, float(k), 1.0, math.inf)


def _left_s_at_a_half_only_pairwise():
    """Nine running sequences' busy times whose pairwise sum is exactly 4.5 and whose left-to-right sum is above.

    Returns the prefill left per sequence, for sequences one token from done at the step time ``step_s``.
    """
    step_s = ReplicaSpec(fixed_ms=10.0, per_sequence_ms=1.0, max_num_seqs=16).step_s(9)
    rng = np.random.default_rng(5)
    for _ in range(10_000):
        prefill_s = np.concatenate([[5.0], rng.uniform(0.05, 0.6, 8)])
        left_s = np.minimum(prefill_s + 1.0 * step_s, 1.0)
        head = left_s[:8]
        tree = ((head[0] + head[1]) + (head[2] + head[3])) + ((head[4] + head[5]) + (head[6] + head[7]))
        prefill_s[8] = (4.5 - tree) - step_s
        left_s[8] = prefill_s[8] + 1.0 * step_s
        if 0.0 < left_s[8] < 1.0 and left_s.sum() == 4.5 and math.fsum([0.0]) == 0.0:
            in_order = 0.0
            for value in left_s:
                in_order += value
            if in_order > 4.5:
                return prefill_s
    raise AssertionError("no such busy times found")


def test_the_averaged_batch_sums_the_running_sequences_pairwise():
    # A sum of the nine busy times left to right would round to 5 sequences, numpy's pairwise one to 4.
    spec = ReplicaSpec(fixed_ms=10.0, per_sequence_ms=1.0, max_num_seqs=16)
    prefill_s = _left_s_at_a_half_only_pairwise()
    n = len(prefill_s)
    req = RequestState(np.full(n, -1.0), np.full(n, 10), np.full(n, 6))
    req.output_tokens[0] = 500
    req.status[:] = RUNNING
    req.generated[:] = req.output_tokens - 1.0
    req.generated[0] = 0.0
    req.admit_s[:] = -1.0
    req.first_token_s[1:] = -0.5
    req.prefill_left_s[:] = prefill_s
    running, waiting = list(range(n)), deque()
    assert _tick_batch_of(req, spec, running, waiting, 0.0, 1.0) == 4
    kernel = Kernel(req, spec, running, waiting)
    tick_both(req, spec, running, waiting, kernel, 0.0, 1.0, math.inf)
    assert running == [0]


def test_a_first_token_and_a_finish_exactly_at_the_tick_end_fall_in_the_tick():
    # 0.25 s steps. In the batch: 0 ends its prefill at 0.75 s, its first token at 1.0 s; 1 finishes its
    # 4 tokens at 1.0 s. From the queue: 2 arrives at 0.75 s (first token at 1.0 s), 3 at 0 (done at 1.0 s).
    spec = ReplicaSpec(fixed_ms=250.0, per_sequence_ms=0.0, max_num_seqs=4, prefill_ms_per_token=0.0)
    req = RequestState(np.array([-1.0, -1.0, 0.75, 0.0]), np.full(4, 10), np.array([8, 4, 8, 4]))
    req.status[:] = [RUNNING, RUNNING, WAITING, WAITING]
    req.admit_s[:2] = -1.0
    req.prefill_left_s[0] = 0.75
    running, waiting = [0, 1], deque([3, 2])
    kernel = Kernel(req, spec, running, waiting)
    tick = tick_both(req, spec, running, waiting, kernel, 0.0, 1.0, math.inf)
    assert req.first_token_s[0] == req.first_token_s[2] == 1.0
    assert req.done_s[1] == req.done_s[3] == 1.0 and tick.completed == (1, 3)
    tick_both(req, spec, running, waiting, kernel, 1.0, 1.0, math.inf)
    assert req.first_token_s[0] == req.first_token_s[2] == 1.0


def test_a_head_of_line_wait_for_a_release_at_the_tick_end_lasts_into_the_next_tick():
    # 0 holds 90 of 100 KV tokens and finishes at 1.0 s, the tick end; 1 needs 16: it waits for the next tick.
    spec = ReplicaSpec(
        fixed_ms=250.0,
        per_sequence_ms=0.0,
        max_num_seqs=4,
        kv_tokens=100,
        block_size_tokens=1,
        prefill_ms_per_token=0.0,
    )
    req = _queue_only([90, 15], [4, 20])
    req.status[0] = RUNNING
    running, waiting = [0], deque([1])
    kernel = Kernel(req, spec, running, waiting)
    tick_both(req, spec, running, waiting, kernel, 0.0, 1.0, math.inf)
    assert req.done_s[0] == 1.0 and list(waiting) == [1] and math.isnan(req.admit_s[1])
    tick_both(req, spec, running, waiting, kernel, 1.0, 1.0, math.inf)
    assert req.admit_s[1] == 1.0 and running == [1]


def test_layouts_not_sized_for_max_num_seqs_are_refused():
    spec = ReplicaSpec(fixed_ms=1.0, max_num_seqs=4)
    req = _queue_only([10] * 6, [3] * 6)
    req.status[:5] = RUNNING

    def refused(kernel):
        before = {name: a.copy() for name, a in kernel.req.items()}
        queue, batch = kernel.queue(), kernel.batch()
        assert kernel.advance(0.0, 1.0, math.inf) == (0.0, BAD_LAYOUT, 0.0, 0, 0)
        assert all(np.array_equal(before[name], kernel.req[name], equal_nan=True) for name in ARRAYS)
        assert kernel.queue() == queue and kernel.batch() == batch
        for before_pods, after_pods in zip(kernel.others, kernel._others(), strict=True):
            assert np.array_equal(before_pods, after_pods)

    # A batch longer than max_num_seqs (in a row wide enough to hold it).
    kernel = Kernel(req, ReplicaSpec(fixed_ms=1.0, max_num_seqs=5), list(range(5)), deque([5]))
    kernel.compiled = CompiledReplica.from_spec(spec)
    refused(kernel)
    # A step table one entry short, and scratch made for fewer slots.
    for compiled, scratch in (
        (
            replace(CompiledReplica.from_spec(spec), step_table_s=CompiledReplica.from_spec(spec).step_table_s[:-1]),
            None,
        ),
        (None, new_scratch(3, 6)),
    ):
        kernel = Kernel(req, spec, [0, 1], deque([2, 3, 4, 5]))
        kernel.compiled = compiled or kernel.compiled
        kernel.scratch = scratch or kernel.scratch
        refused(kernel)


def test_a_refused_call_succeeds_with_grown_buffers():
    spec = ReplicaSpec(fixed_ms=10.0, max_num_seqs=2, kv_tokens=64, block_size_tokens=16)
    req = _queue_only([10, 20, 30, 40, 50], [1, 2, 3, 60, 1])
    running, waiting = [], deque(range(5))
    kernel = Kernel(req, spec, running, waiting, capacity=4)
    assert kernel.advance(0.0, 1.0, math.inf)[1] == NEEDS_CAPACITY
    kernel.scratch = new_scratch(spec.max_num_seqs, 5)
    kernel.completed_out = np.empty(5, dtype=np.int64)
    for k in range(3):
        tick_both(req, spec, running, waiting, kernel, float(k), 1.0, math.inf)
