"""Tests for planner.simulate.replica: one vLLM replica's tick."""

from __future__ import annotations

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
    spec = ReplicaSpec(fixed_ms=10.0, per_sequence_ms=1.0, max_num_seqs=8)
    req = _state([0.0] * 4, 10, 100)
    _run(req, spec, 3)
    # Four sequences from t = 0: each token takes 14 ms.
    assert np.allclose(req.done_s, 100 * 0.014)


def test_max_num_seqs_queues_the_rest_and_a_freed_slot_is_reused_inside_the_tick():
    spec = ReplicaSpec(fixed_ms=10.0, per_sequence_ms=0.0, max_num_seqs=2)
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
    spec = ReplicaSpec(fixed_ms=10.0, per_sequence_ms=0.25, max_num_seqs=64)
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
    spec = ReplicaSpec(fixed_ms=10.0, per_sequence_ms=0.0, max_num_seqs=8)
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
