"""Tests for planner.simulate.replica: one vLLM replica's tick."""

from __future__ import annotations

import dataclasses
import math
from collections import deque

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from planner.errors import PlannerInputError
from planner.simulate.replica import (
    DONE,
    RUNNING,
    WAITING,
    ReplicaSpec,
    RequestState,
    advance_replica,
    kv_usage_frac,
)


def _state(arrival_s, input_tokens, output_tokens):
    n = len(arrival_s)
    return RequestState(np.asarray(arrival_s, float), np.full(n, input_tokens), np.full(n, output_tokens))


def _run(req, spec, ticks, dt=1.0):
    running, waiting = [], deque(range(len(req)))
    ticks_out = []
    for k in range(ticks):
        ticks_out.append(advance_replica(k * dt, dt, running, waiting, req, spec))
    return running, waiting, ticks_out


def test_a_lone_request_gets_prefill_plus_one_step_then_one_token_per_step():
    spec = ReplicaSpec(fixed_ms=10.0, per_sequence_ms=1.0, max_num_seqs=8, prefill_ms_per_token=0.5)
    req = _state([0.25], 100, 50)
    _run(req, spec, 5)
    step_s = 0.011
    assert req.first_token_s[0] == pytest.approx(0.25 + 0.05 + step_s)
    assert req.done_s[0] == pytest.approx(0.25 + 0.05 + 50 * step_s)
    assert req.status[0] == DONE


def test_batch_shares_the_step_and_the_step_grows_with_the_batch():
    spec = ReplicaSpec(fixed_ms=10.0, per_sequence_ms=1.0, max_num_seqs=8, prefill_ms_per_token=0.0)
    req = _state([0.0] * 4, 10, 100)
    _run(req, spec, 3)
    # Four sequences from t = 0: each token takes 14 ms.
    assert np.allclose(req.done_s, 100 * 0.014)


def test_max_num_seqs_queues_the_rest_and_a_freed_slot_is_reused_inside_the_tick():
    spec = ReplicaSpec(fixed_ms=10.0, per_sequence_ms=0.0, max_num_seqs=2, prefill_ms_per_token=0.0)
    req = _state([0.0, 0.0, 0.0], 10, 20)  # 0.2 s each
    running, waiting, _ = _run(req, spec, 1)
    assert req.admit_s[2] == pytest.approx(0.2)
    assert req.done_s[2] == pytest.approx(0.4)
    assert not running and not waiting


def test_admission_waits_for_kv_blocks():
    spec = ReplicaSpec(fixed_ms=10.0, per_sequence_ms=0.0, max_num_seqs=8, kv_tokens=160, block_size_tokens=16)
    req = _state([0.0, 0.0], 100, 10)  # each prompt needs 112 tokens of blocks
    _run(req, spec, 1)
    assert req.admit_s[0] == 0.0
    assert req.admit_s[1] == pytest.approx(req.done_s[0])


def test_kv_usage_counts_whole_blocks_as_a_fraction():
    spec = ReplicaSpec(kv_tokens=1600, block_size_tokens=16)
    req = _state([0.0, 0.0], 20, 5)
    req.generated[:] = [3.6, 0.0]
    assert kv_usage_frac([0, 1], req, spec) == pytest.approx((32 + 32) / 1600)


def test_preemption_when_the_batch_outgrows_the_cache():
    spec = ReplicaSpec(fixed_ms=10.0, per_sequence_ms=0.0, max_num_seqs=8, kv_tokens=256, block_size_tokens=16)
    req = _state([0.0, 0.0], 16, 1000)
    _running, _waiting, ticks = _run(req, spec, 3)
    assert sum(t.preemptions for t in ticks) >= 1
    assert req.preemptions[1] >= 1
    assert req.status[0] == RUNNING and req.status[1] == WAITING


def test_gpu_utilization_is_the_busy_fraction_not_the_work():
    spec = ReplicaSpec(fixed_ms=10.0, per_sequence_ms=0.25, max_num_seqs=64, prefill_ms_per_token=0.0)
    one = _state([0.0], 10, 1000)
    many = _state([0.0] * 64, 10, 1000)
    busy_one = _run(one, spec, 1)[2][0].busy_s
    busy_many = _run(many, spec, 1)[2][0]
    # Both read 100 % busy although the batch of 64 produces far more tokens (seed 001).
    assert busy_one == pytest.approx(1.0) and busy_many.busy_s == pytest.approx(1.0)
    assert busy_many.generated_tokens > 10 * _run(_state([0.0], 10, 1000), spec, 1)[2][0].generated_tokens
    idle = _run(_state([0.5], 10, 10), spec, 1)[2][0]
    assert idle.busy_s == pytest.approx(10 * 0.01025)


def test_a_stop_time_ends_the_tick_early():
    spec = ReplicaSpec(fixed_ms=10.0, per_sequence_ms=0.0, max_num_seqs=8, prefill_ms_per_token=0.0)
    req = _state([0.0], 10, 1000)
    running, waiting = [], deque([0])
    advance_replica(0.0, 1.0, running, waiting, req, spec, stop_s=0.5)
    assert req.generated[0] == pytest.approx(50.0)
    assert math.isnan(req.done_s[0])


@pytest.mark.parametrize("field", ["fixed_ms", "max_num_seqs", "kv_tokens"])
def test_bad_replica_parameters_are_named(field):
    with pytest.raises(PlannerInputError, match=field):
        ReplicaSpec(**{field: 0})


@settings(max_examples=40)
@given(
    arrivals=st.lists(st.floats(0.0, 20.0, allow_nan=False), min_size=1, max_size=40),
    output_tokens=st.integers(1, 400),
    input_tokens=st.integers(0, 300),
    max_num_seqs=st.integers(1, 8),
    kv_blocks=st.integers(8, 200),
    per_sequence_ms=st.floats(0.0, 5.0),
    prefill_ms_per_token=st.floats(0.0, 0.2),
)
def test_invariants_of_a_replica_run(
    arrivals, output_tokens, input_tokens, max_num_seqs, kv_blocks, per_sequence_ms, prefill_ms_per_token
):
    spec = ReplicaSpec(
        fixed_ms=5.0,
        per_sequence_ms=per_sequence_ms,
        max_num_seqs=max_num_seqs,
        kv_tokens=16 * kv_blocks,
        prefill_ms_per_token=prefill_ms_per_token,
    )
    arrival_s = np.sort(np.asarray(arrivals))
    req = RequestState(arrival_s, np.full(len(arrival_s), input_tokens), np.full(len(arrival_s), output_tokens))
    running, waiting = [], deque()
    routed = 0
    for k in range(400):
        t0, t1 = k * 0.5, (k + 1) * 0.5
        while routed < len(req) and req.arrival_s[routed] < t1:
            waiting.append(routed)
            routed += 1
        tick = advance_replica(t0, 0.5, running, waiting, req, spec)
        assert len(running) <= max_num_seqs
        assert 0.0 <= tick.busy_s <= 0.5 + 1e-9
        assert tick.generated_tokens >= -1e-9
        if routed == len(req) and not running and not waiting:
            break
    done = req.status == DONE
    assert done.all()
    # Causality: admitted after arrival, first token after admission, last token after the first.
    assert np.all(req.admit_s >= req.arrival_s - 1e-9)
    assert np.all(req.first_token_s >= req.admit_s + spec.step_s(1) - 1e-9)
    assert np.all(req.done_s >= req.first_token_s - 1e-9)
    # No request is served faster than alone on the replica.
    alone_s = input_tokens * prefill_ms_per_token / 1000.0 + output_tokens * spec.step_s(1)
    assert np.all(req.done_s - req.admit_s >= alone_s - 1e-6)


def _replay(spec, arrival_s, input_tokens, output_tokens, ticks=60, dt=1.0):
    req = RequestState(np.asarray(arrival_s, float), np.asarray(input_tokens), np.asarray(output_tokens))
    running, waiting, routed = [], deque(), 0
    for k in range(ticks):
        while routed < len(req) and req.arrival_s[routed] < (k + 1) * dt:
            waiting.append(routed)
            routed += 1
        advance_replica(k * dt, dt, running, waiting, req, spec)
    return req


def test_a_lone_long_prompt_takes_a_step_per_chunk_of_the_budget():
    # 10,000 tokens in 2,048-token chunks: five steps of 10 ms plus 0.05 ms per token they carry.
    spec = ReplicaSpec(fixed_ms=10.0, per_sequence_ms=0.0, prefill_ms_per_token=0.05, max_num_batched_tokens=2048)
    req = _replay(spec, [0.25], [10_000], [50], ticks=5)
    assert req.first_token_s[0] - 0.25 == pytest.approx(10_000 * 0.05e-3 + 5 * 0.010)
    # Without a budget the same prompt is one prefill before one step; a prompt within the budget gets that too.
    alone = _replay(dataclasses.replace(spec, max_num_batched_tokens=None), [0.25], [10_000], [50], ticks=5)
    assert alone.first_token_s[0] - 0.25 == pytest.approx(10_000 * 0.05e-3 + 0.010)
    short = _replay(spec, [0.25], [2_000], [50], ticks=5)
    assert short.first_token_s[0] - 0.25 == pytest.approx(2_000 * 0.05e-3 + 0.010)


def test_decodes_slow_down_by_the_compute_of_the_prompts_prefilled_beside_them():
    # 32 sequences decode 1,000 tokens at 10 ms; at 2 s a 20,000-token prompt takes 1 s of the GPU.
    spec = ReplicaSpec(fixed_ms=10.0, per_sequence_ms=0.0, prefill_ms_per_token=0.05, max_num_batched_tokens=2048)
    arrival_s, inputs, outputs = [0.0] * 32 + [2.0], [100] * 32 + [20_000], [1000] * 32 + [10]
    chunked = _replay(spec, arrival_s, inputs, outputs)
    private = _replay(dataclasses.replace(spec, max_num_batched_tokens=None), arrival_s, inputs, outputs)
    # Without a budget prefill delays only its own request: the decoders finish as if it were not there.
    assert private.done_s[:32] == pytest.approx(32 * [0.005 + 1000 * 0.010], abs=0.002)
    # With one, they lose the prompts' compute: 1 s for the long one, 32 x 5 ms for their own prompts.
    lost_s = chunked.done_s[:32] - private.done_s[:32]
    assert lost_s.mean() == pytest.approx(1.0 + 32 * 0.005, rel=0.03)
    # The long prompt: ten 2,016-token chunks (the budget less the 32 decodes), each step 10 ms plus its tokens.
    assert chunked.first_token_s[32] - 2.0 == pytest.approx(20_000 * 0.05e-3 + 10 * 0.010, rel=0.01)


def test_without_a_prefill_cost_the_budget_changes_nothing():
    spec = ReplicaSpec(fixed_ms=8.0, per_sequence_ms=0.5, max_num_seqs=16, kv_tokens=20_000, prefill_ms_per_token=0.0)
    rng = np.random.default_rng(3)
    arrival_s = np.sort(rng.uniform(0.0, 20.0, 200))
    inputs, outputs = rng.integers(1, 6000, 200), rng.integers(1, 300, 200)
    runs = [
        _replay(dataclasses.replace(spec, max_num_batched_tokens=budget), arrival_s, inputs, outputs, ticks=80)
        for budget in (None, 16, 2048)
    ]
    for run in runs[1:]:
        for name in ("admit_s", "first_token_s", "done_s", "generated", "preemptions"):
            assert np.array_equal(getattr(run, name), getattr(runs[0], name), equal_nan=True), name


@pytest.mark.parametrize("budget", [63, 0, 100.5])
def test_a_budget_below_max_num_seqs_or_not_whole_is_refused(budget):
    with pytest.raises(PlannerInputError, match="max_num_batched_tokens"):
        ReplicaSpec(max_num_seqs=64, max_num_batched_tokens=budget)
