import math

import numpy as np
import pytest

from planner.capacity.headroom import backlog_clear_s
from planner.dynamics.replica_queues import (
    LEAST_LOADED,
    ROUND_ROBIN,
    backlog_per_replica_requests,
    least_loaded_clear_s,
    per_replica_waiting_requests,
    round_robin_clear_s,
    step_drain,
)
from planner.errors import PlannerInputError
from planner.readers.manifest import load_autoscaler
from planner.simulate import simulate
from planner.simulate.fleet import ROUTERS as SIMULATOR_ROUTERS
from planner.simulate.fleet import FleetSpec
from planner.simulate.replica import ReplicaSpec
from planner.simulate.traffic import RequestTrace
from tests.simulate_helpers import scaled_object, steady_trace

STEP_AT_S = 120.0
INPUT_TOKENS, OUTPUT_TOKENS = 100, 200


def _simulated_step(tmp_path, router, before_rps, after_rps, replicas_before, replicas_after):
    """The simulator: steady load, a step at STEP_AT_S, a trigger that asks for the maximum at once."""
    path = tmp_path / f"{router}-{replicas_after}.yaml"
    path.write_text(
        scaled_object(
            "step",
            "sum(vllm:num_requests_waiting)",
            1,
            min_replicas=replicas_before,
            max_replicas=replicas_after,
            down_window_s=600,
        )
    )
    before = steady_trace(before_rps, STEP_AT_S, INPUT_TOKENS, OUTPUT_TOKENS)
    after = steady_trace(after_rps, 400.0, INPUT_TOKENS, OUTPUT_TOKENS, start_s=STEP_AT_S)
    trace = RequestTrace(
        *(
            np.concatenate([getattr(before, f), getattr(after, f)])
            for f in ("arrival_s", "input_tokens", "output_tokens")
        ),
        "step",
    )
    # The fluid model drains at the step time alone: prefill is folded into it (a cost of 0).
    spec = FleetSpec(replica=ReplicaSpec(prefill_ms_per_token=0.0), warmup_s=60.0, router=router, ttft_slo_s=100.0)
    return simulate(trace, load_autoscaler(path), spec, duration_s=STEP_AT_S + 400.0), spec


# The fixed cases: 2 replicas at 20 req/s step to 40 (the 2 new ones cannot take every arrival alone)
# and to 50 req/s with 4 new ones (they can).
CASES = [(20.0, 40.0, 2, 4), (20.0, 50.0, 2, 6)]


@pytest.mark.parametrize("router", [ROUND_ROBIN, LEAST_LOADED])
@pytest.mark.parametrize(("before_rps", "after_rps", "replicas_before", "replicas_after"), CASES)
def test_per_replica_model_agrees_with_the_simulator(
    tmp_path, router, before_rps, after_rps, replicas_before, replicas_after
):
    run, spec = _simulated_step(tmp_path, router, before_rps, after_rps, replicas_before, replicas_after)
    ts = run.timeseries
    assert ts["waiting"][ts["t_s"] <= STEP_AT_S].max() == 0  # no queue before the step
    # When the simulator's new replicas were Ready, measured from the step.
    reaction_s = float(ts["t_s"][ts["replicas_ready"] >= replicas_after].iloc[0]) - STEP_AT_S
    after = ts["t_s"] >= STEP_AT_S
    time_s = ts["t_s"][after].to_numpy() - STEP_AT_S
    simulated = ts["waiting"][after].to_numpy()
    slots = spec.replica.max_num_seqs
    mu = slots / (OUTPUT_TOKENS * spec.replica.step_s(slots))  # a full replica's completions per second
    model = step_drain(time_s, before_rps, after_rps, replicas_before, replicas_after, mu, slots, reaction_s, router)
    simulated_clear_s = float(time_s[np.flatnonzero(simulated > 0)[-1] + 1]) - reaction_s
    # Tolerance: peak backlog within 2 %, time to clear within 3 s, the queue at every second within
    # 5 % of the peak (the fluid model has no per-request granularity).
    assert model.peak_backlog_requests == pytest.approx(simulated.max(), rel=0.02)
    assert model.clear_s == pytest.approx(simulated_clear_s, abs=3.0)
    assert np.abs(model.waiting_requests - simulated).max() <= 0.05 * simulated.max()
    # The shared-queue model's time to clear, for comparison: it is right only for least-loaded routing
    # when the new replicas cannot take every arrival alone; round robin takes about twice as long.
    shared_clear_s = backlog_clear_s(simulated.max(), replicas_after * mu, after_rps)
    if router == ROUND_ROBIN:
        assert simulated_clear_s > 1.8 * shared_clear_s
        backlog_per_old = model.old_waiting_requests[np.searchsorted(time_s, reaction_s)] / replicas_before
        assert round_robin_clear_s(backlog_per_old, mu, after_rps, replicas_after) == pytest.approx(
            model.clear_s, abs=2.0
        )


def test_routers_are_the_simulators():
    assert set(SIMULATOR_ROUTERS) == {ROUND_ROBIN, LEAST_LOADED}


def test_round_robin_keeps_the_backlog_in_the_old_replicas():
    # One pod holding 100 waiting (164 with its 64 running), one new empty pod, 10 req/s, mu = 16.
    waiting = per_replica_waiting_requests(
        [0.0, 5.0], 10.0, 2, 16.0, 64.0, ROUND_ROBIN, initial_load_requests=[164.0, 0.0]
    )
    assert waiting[0].tolist() == [100.0, 0.0]
    assert waiting[1][0] == pytest.approx(100.0 - (16.0 - 5.0) * 5.0, abs=1e-6)  # drains at mu - 10 / 2
    assert waiting[1][1] == 0.0


def test_least_loaded_sends_nothing_to_the_loaded_replica():
    waiting = per_replica_waiting_requests(
        [0.0, 5.0], 10.0, 2, 16.0, 64.0, LEAST_LOADED, initial_load_requests=[164.0, 0.0]
    )
    assert waiting[1][0] == pytest.approx(100.0 - 16.0 * 5.0, abs=1e-6)  # drains at the full mu


def test_a_shared_queue_is_the_least_loaded_limit_when_loads_are_level():
    # Two pods, equally loaded: least-loaded keeps them level, so they drain as one queue.
    waiting = per_replica_waiting_requests(
        [0.0, 5.0], 20.0, 2, 16.0, 64.0, LEAST_LOADED, initial_load_requests=[114.0, 114.0]
    )
    assert waiting[1].tolist() == pytest.approx([20.0, 20.0], abs=1e-6)  # 100 - (32 - 20) x 5, split evenly


def test_work_is_conserved():
    # Arrivals - completions = change in load; with every pod saturated completions are n x mu.
    waiting = per_replica_waiting_requests(
        [0.0, 3.0], 50.0, 3, 10.0, 8.0, ROUND_ROBIN, initial_load_requests=[20.0, 20.0, 20.0]
    )
    assert waiting[1].sum() == pytest.approx(3 * 12.0 + (50.0 - 30.0) * 3.0)


def test_round_robin_clear_never_when_each_share_is_at_capacity():
    assert round_robin_clear_s(10.0, 4.0, 80.0, 20) == math.inf
    assert round_robin_clear_s(0.0, 4.0, 80.0, 20) == 0.0


def test_step_drain_clears_never_within_the_horizon_when_capacity_is_short():
    drain = step_drain(np.linspace(0, 300, 31), 10.0, 30.0, 2, 3, 8.0, 48.0, 60.0, ROUND_ROBIN)
    assert drain.clear_s == math.inf


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"router": "random"}, "router"),
        ({"ready_replicas": [2, 1]}, "never decrease"),
        ({"ready_replicas": 0}, ">= 1"),
    ],
)
def test_bad_input_is_named(kwargs, message):
    args = {
        "time_s": [0.0, 1.0],
        "arrival_rate_rps": 1.0,
        "ready_replicas": 1,
        "per_replica_capacity_rps": 1.0,
        "slots": 4.0,
        "router": ROUND_ROBIN,
    } | kwargs
    with pytest.raises(PlannerInputError, match=message):
        per_replica_waiting_requests(**args)


@pytest.mark.parametrize(
    ("before_rps", "after_rps", "replicas_before", "replicas_after", "mu", "slots", "reaction_s"),
    [
        (30.0, 75.0, 9, 23, 4.0, 48.0, 105.0),  # the backlog chapter: 14 new replicas cannot take 75 req/s
        (30.0, 75.0, 9, 29, 4.0, 48.0, 105.0),  # 20 new replicas can
        (10.0, 16.0, 3, 5, 4.0, 48.0, 240.0),  # the Little's law chapter
        (30.0, 75.0, 9, 23, 4.0, 48.0, 645.0),  # a 600 s cold start
    ],
)
def test_closed_forms_agree_with_the_integrated_model(
    before_rps, after_rps, replicas_before, replicas_after, mu, slots, reaction_s
):
    time_s = np.arange(0.0, 6000.0)
    backlog = backlog_per_replica_requests(before_rps, after_rps, replicas_before, mu, slots, reaction_s)
    for router, closed in (
        (ROUND_ROBIN, round_robin_clear_s(backlog, mu, after_rps, replicas_after)),
        (LEAST_LOADED, least_loaded_clear_s(backlog, mu, slots, after_rps, replicas_before, replicas_after)),
    ):
        drain = step_drain(
            time_s, before_rps, after_rps, replicas_before, replicas_after, mu, slots, reaction_s, router
        )
        at_ready = drain.old_waiting_requests[int(reaction_s)] / replicas_before
        assert backlog == pytest.approx(at_ready, rel=0.01)
        assert closed == pytest.approx(drain.clear_s, abs=2.0)


def test_least_loaded_closed_form_edges():
    assert least_loaded_clear_s(0.0, 4.0, 48.0, 75.0, 9, 23) == 0.0
    assert least_loaded_clear_s(100.0, 4.0, 48.0, 75.0, 9, 9) == math.inf  # no new replicas, no spare
    assert least_loaded_clear_s(100.0, 4.0, 48.0, 10.0, 5, 10) == 25.0  # new ones take everything: 100 / mu
    with pytest.raises(PlannerInputError, match="before <= after"):
        least_loaded_clear_s(1.0, 4.0, 48.0, 1.0, 3, 2)
