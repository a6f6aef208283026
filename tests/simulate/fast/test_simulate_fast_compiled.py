"""The group driver: configurations that share a fleet, simulated together, get what each gets alone.

``planner.simulate.fast.compiled.simulate_group`` simulates the fleet once for
as long as the members' controllers agree, splits them where they differ and
resumes the later parts from snapshots. Each member's Outcome must equal its
run on its own (a group of one, which ``tests/simulate/fast/test_simulate_fast.py`` holds to
the reference engine) bit for bit, including its own signal column; a few are
checked against the reference engine directly.
"""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from planner.simulate import fast, reference
from planner.simulate.fast import compiled
from planner.simulate.fleet import FleetSpec
from planner.simulate.replica import ReplicaSpec
from tests.simulate.fast.test_simulate_fast import QUERIES, assert_same, down_policy
from tests.simulate_helpers import cron_scaled_object, pods_hpa, poisson_trace, scaled_object, write_manifest


def assert_identical(alone, grouped) -> None:
    """Every field of two fast-engine Outcomes, arrays and frames included, bit for bit."""
    for field in dataclasses.fields(alone):
        a, b = getattr(alone, field.name), getattr(grouped, field.name)
        if isinstance(a, np.ndarray):
            assert np.array_equal(a, b, equal_nan=True), field.name
        elif field.name == "timeseries":
            assert a.equals(b), field.name
        elif isinstance(a, float) and np.isnan(a):
            assert np.isnan(b), field.name
        else:
            assert a == b, field.name


def leaves(monkeypatch) -> list[int]:
    """Record how many members finish together each time some do (one entry per path run to the end)."""
    seen: list[int] = []
    real = compiled.simulate_group

    def counting(*args, **kwargs):
        outer = kwargs.pop("on_done", None)

        def on_done(n):
            seen.append(n)
            if outer is not None:
                outer(n)

        return real(*args, on_done=on_done, **kwargs)

    monkeypatch.setattr(compiled, "simulate_group", counting)
    return seen


def test_members_that_diverge_get_what_they_get_alone_and_what_the_reference_gets(tmp_path, monkeypatch):
    # Same fleet, thresholds and windows that agree at first and part at different times.
    trace = poisson_trace(lambda t: 2.0 if t < 60 else (25.0 if t < 200 else 4.0), 420.0, 200, 240, seed=21)
    fleet = FleetSpec(warmup_s=30.0, warmup_distribution="lognormal", warmup_spread_s=10.0, seed=5)
    configs = [
        fast.Configuration(
            write_manifest(
                tmp_path,
                scaled_object("chat", QUERIES[0], target, max_replicas=8, down_window_s=window),
                f"{target}-{window}.yaml",
            ),
            fleet,
        )
        for target in (10, 20, 40)
        for window in (0, 60)
    ]
    seen = leaves(monkeypatch)
    together = fast.simulate_many(trace, configs)
    assert len(seen) >= 4 and sum(seen) == len(configs)  # the group split, and every member finished once
    for config, outcome in zip(configs, together, strict=True):
        assert_identical(fast.simulate(trace, config.autoscaler, config.fleet), outcome)
    for config, outcome in zip(configs[::2], together[::2], strict=True):
        assert_same(reference.simulate(trace, config.autoscaler, config.fleet), outcome)


def test_members_that_never_diverge_run_one_fleet(tmp_path, monkeypatch):
    # Thresholds so high that no member ever scales: one path for all, and the same numbers for each.
    trace = poisson_trace(1.0, 120.0, 100, 50, seed=2)
    configs = [
        fast.Configuration(
            write_manifest(tmp_path, scaled_object("chat", QUERIES[1], target), f"{target}.yaml"), FleetSpec()
        )
        for target in (500, 600, 700)
    ]
    seen = leaves(monkeypatch)
    together = fast.simulate_many(trace, configs, timeseries=False)
    assert seen == [3]
    assert together[0].scale_events == 0
    for config, outcome in zip(configs, together, strict=True):
        assert_identical(fast.simulate_many(trace, [config], timeseries=False)[0], outcome)


def test_hpas_and_scaled_objects_with_other_queries_and_cadences_share_a_fleet(tmp_path):
    # Members differ in kind, query (a query of one is another's second), polling and sync period.
    trace = poisson_trace(lambda t: 3.0 if t < 90 else 18.0, 300.0, 200, 240, seed=8)
    fleet = FleetSpec(warmup_s=20.0, initial_replicas=1)
    texts = [
        scaled_object("a", QUERIES[0], 12, polling_s=5),
        scaled_object("b", QUERIES[1], 3, polling_s=30),
        scaled_object("c", QUERIES[4], 2),
        scaled_object("d", QUERIES[5], 10, min_replicas=2),
        pods_hpa("e", "vllm:num_requests_running", 20),
        pods_hpa("f", "num_requests_waiting", 4),
    ]
    configs = [fast.Configuration(write_manifest(tmp_path, text, f"m{i}.yaml"), fleet) for i, text in enumerate(texts)]
    configs.append(fast.Configuration(configs[0].autoscaler, dataclasses.replace(fleet, hpa_sync_period_s=30.0)))
    keys = {compiled.fleet_key(compiled.prepare(c.autoscaler, c.fleet)) for c in configs}
    assert len(keys) == 1  # one group
    together = fast.simulate_many(trace, configs)
    for config, outcome in zip(configs, together, strict=True):
        assert_identical(fast.simulate(trace, config.autoscaler, config.fleet), outcome)
    assert_same(reference.simulate(trace, configs[4].autoscaler, fleet), together[4])


def test_a_group_of_cron_schedules_gives_each_member_its_own_windows(tmp_path, monkeypatch):
    # A schedule sweep: members differ in their cron windows (when, how many replicas, which zone, one in a
    # zone that never loads), in the metric trigger's target, and one has no cron trigger. They share the
    # fleet until a window opens for some and not others; each reads its own cron runs.
    trace = poisson_trace(lambda t: 6.0 if 1500 <= t < 1800 else 0.5, 2400.0, 300, 200, seed=4, tick_s=60.0)
    fleet = FleetSpec(replica=ReplicaSpec(max_num_seqs=4), warmup_s=45.0, seed=3, tick_s=5.0)
    schedules = [
        [("5 0 * * *", "15 0 * * *", "UTC", 3)],
        [("5 0 * * *", "15 0 * * *", "UTC", 5)],
        [("10 0 * * *", "20 0 * * *", "Europe/Dublin", 3), ("12 0 * * *", "30 0 * * *", "UTC", 2)],
        [("5 0 * * *", "15 0 * * *", "Europe/Dublyn", 3)],
        [("55 23 * * *", "25 0 * * *", "UTC", 4)],  # open from before the run, wrapping midnight
    ]
    texts = [
        cron_scaled_object("chat", QUERIES[1], target, windows, max_replicas=10)
        for windows in schedules
        for target in (2, 8)
    ] + [scaled_object("chat", QUERIES[1], 2, max_replicas=10)]
    configs = [fast.Configuration(write_manifest(tmp_path, text, f"m{i}.yaml"), fleet) for i, text in enumerate(texts)]
    prepared = [compiled.prepare(c.autoscaler, c.fleet) for c in configs]
    assert len({compiled.fleet_key(p) for p in prepared}) == 1 and all(
        fast.covers(c.autoscaler, fleet) for c in configs
    )
    seen = leaves(monkeypatch)
    together = fast.simulate_many(trace, configs)
    assert len(seen) >= 5 and sum(seen) == len(configs)  # the group split where the windows part
    assert len({outcome.events for outcome in together}) >= 6
    for config, outcome in zip(configs, together, strict=True):
        assert_identical(fast.simulate(trace, config.autoscaler, config.fleet), outcome)
    for index in (0, 5, 6, 9):
        assert_same(reference.simulate(trace, configs[index].autoscaler, fleet), together[index])


def test_a_member_the_kernel_cannot_finish_leaves_the_group_for_the_lockstep_engine(tmp_path, monkeypatch):
    # A query value beyond what the kernel rounds to milli-units exactly: that member's decision fails
    # once requests run, and it is run in Python from the start; the others go on together.
    trace = poisson_trace(lambda t: 2.0 if t < 60 else 12.0, 240.0, 200, 240, seed=3)
    fleet = FleetSpec(warmup_s=20.0)
    huge = "sum(vllm:num_requests_running) * 1e13"
    configs = [
        fast.Configuration(write_manifest(tmp_path, scaled_object("a", QUERIES[0], 10), "a.yaml"), fleet),
        fast.Configuration(write_manifest(tmp_path, scaled_object("b", huge, 1e14), "b.yaml"), fleet),
        fast.Configuration(write_manifest(tmp_path, scaled_object("c", QUERIES[0], 20), "c.yaml"), fleet),
    ]
    fallen: list[int] = []
    real = fast.lockstep.simulate_many

    def lockstep(trace, configurations, **kwargs):
        fallen.append(len(configurations))
        return real(trace, configurations, **kwargs)

    monkeypatch.setattr(fast.lockstep, "simulate_many", lockstep)
    together = fast.simulate_many(trace, configs)
    assert fallen == [1]
    for config, outcome in zip(configs, together, strict=True):
        assert_same(reference.simulate(trace, config.autoscaler, config.fleet), outcome)


def test_arrays_grown_mid_run_with_parts_waiting_give_the_same_result(tmp_path, monkeypatch):
    # Room for two pods and one sample per scrape: the arrays grow while split-off parts wait with
    # snapshots of the smaller ones.
    trace = poisson_trace(lambda t: 30.0 if (t // 60) % 2 else 1.0, 480.0, 200, 240, seed=12)
    fleet = FleetSpec(warmup_s=10.0)
    configs = [
        fast.Configuration(
            write_manifest(
                tmp_path, scaled_object("chat", QUERIES[1], target, max_replicas=8, down_window_s=0), f"{target}.yaml"
            ),
            fleet,
        )
        for target in (2, 3, 5)
    ]
    alone = [fast.simulate(trace, c.autoscaler, c.fleet) for c in configs]
    grown: list[int] = []
    real_run = compiled.engine.run

    def counted(*args):
        grown.append(len(args[1].ready_s))
        return real_run(*args)

    monkeypatch.setattr(compiled, "initial_capacity", lambda prepared: (2, 1))
    monkeypatch.setattr(compiled.engine, "run", counted)
    together = fast.simulate_many(trace, configs)
    assert grown[0] == 2 and max(grown) >= 32
    for outcome, expected in zip(together, alone, strict=True):
        assert outcome.scale_events >= 4
        assert_identical(expected, outcome)


@st.composite
def groups(draw):
    fleet = FleetSpec(
        replica=ReplicaSpec(
            max_num_seqs=draw(st.sampled_from([8, 64])), kv_tokens=draw(st.sampled_from([20_000, 200_000]))
        ),
        warmup_s=draw(st.sampled_from([0.0, 20.0, 60.0])),
        warmup_distribution=draw(st.sampled_from(["fixed", "uniform", "lognormal"])),
        warmup_spread_s=10.0,
        router=draw(st.sampled_from(["least-loaded", "round-robin"])),
        shutdown_timeout_s=draw(st.sampled_from([0.0, 20.0])),
        initial_replicas=draw(st.integers(0, 2)),
        seed=draw(st.integers(0, 2**16)),
    )
    texts = []
    for _ in range(draw(st.integers(2, 6))):
        if draw(st.booleans()):
            policy = draw(st.sampled_from(["", down_policy("Pods", 1, 30), down_policy("Percent", 50, 60)]))
            texts.append(
                scaled_object(
                    "chat",
                    draw(st.sampled_from(QUERIES)),
                    draw(st.sampled_from([0.5, 2, 5, 10, 20])),
                    min_replicas=draw(st.integers(0, 2)),
                    max_replicas=draw(st.integers(2, 8)),
                    polling_s=draw(st.sampled_from([5, 15, 30])),
                    down_window_s=draw(st.sampled_from([None, 0, 30, 120])),
                    down_policy=policy,
                )
            )
        else:
            texts.append(
                pods_hpa(
                    "chat",
                    draw(st.sampled_from(["vllm:num_requests_running", "num_requests_waiting"])),
                    draw(st.sampled_from([1, 4, 10])),
                    min_replicas=draw(st.integers(1, 2)),
                    max_replicas=draw(st.integers(2, 8)),
                )
            )
    low, high = draw(st.floats(0.5, 6.0)), draw(st.floats(0.5, 25.0))
    trace = poisson_trace(
        lambda t: high if (t // 80) % 2 else low,
        draw(st.floats(60.0, 300.0)),
        200,
        draw(st.integers(1, 400)),
        seed=draw(st.integers(0, 999)),
    )
    return fleet, texts, draw(st.booleans()), trace


@settings(
    max_examples=20, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow]
)
@given(groups())
def test_a_generated_group_gives_each_member_what_it_gets_alone(tmp_path, scenario):
    fleet, texts, timeseries, trace = scenario
    if len(trace) == 0:
        return
    configs = [fast.Configuration(write_manifest(tmp_path, text, f"m{i}.yaml"), fleet) for i, text in enumerate(texts)]
    together = fast.simulate_many(trace, configs, timeseries=timeseries)
    for config, outcome in zip(configs, together, strict=True):
        assert_identical(fast.simulate_many(trace, [config], timeseries=timeseries)[0], outcome)


def test_configurations_of_different_fleets_are_not_put_in_one_group(tmp_path):
    manifest = write_manifest(tmp_path, scaled_object("chat", QUERIES[0], 10))
    first = compiled.prepare(manifest, FleetSpec())
    other = compiled.prepare(manifest, FleetSpec(warmup_s=5.0))
    assert compiled.fleet_key(first) != compiled.fleet_key(other)
    assert compiled.fleet_key(first) == compiled.fleet_key(
        compiled.prepare(manifest, FleetSpec(hpa_sync_period_s=30.0))
    )
    trace = poisson_trace(1.0, 30.0, 100, 100, seed=1)
    with pytest.raises(ValueError, match="do not share a fleet"):
        compiled.simulate_group([first, other], trace.arrival_s, trace.input_tokens, trace.output_tokens, 30.0)


def test_without_per_request_arrays_the_numbers_are_the_same(tmp_path):
    trace = poisson_trace(lambda t: 2.0 if t < 60 else 12.0, 200.0, 200, 240, seed=4)
    configs = [
        fast.Configuration(
            write_manifest(tmp_path, scaled_object("chat", QUERIES[0], target), f"{target}.yaml"),
            FleetSpec(warmup_s=20.0),
        )
        for target in (5, 10)
    ]
    full = fast.simulate_many(trace, configs)
    lean = fast.simulate_many(trace, configs, timeseries=False, per_request=False)
    for a, b in zip(full, lean, strict=True):
        assert a.summary() == b.summary() and a.events == b.events
        assert b.timeseries.empty and b.arrival_s.size == b.ttft_s.size == b.latency_s.size == b.slo_met.size == 0
        assert a.arrival_s.size == len(trace)


def test_a_read_only_trace_runs_the_kernels_already_compiled(tmp_path):
    # Traces read through pandas can hold read-only arrays; numba would compile every kernel again for them.
    from planner.simulate.fast import engine

    trace = poisson_trace(4.0, 120.0, 200, 240, seed=5)
    config = fast.Configuration(
        write_manifest(tmp_path, scaled_object("chat", QUERIES[0], 5), "five.yaml"), FleetSpec(warmup_s=20.0)
    )
    (writable,) = fast.simulate_many(trace, [config])
    compiled_for = list(engine.run.signatures)
    frozen = [np.array(values) for values in (trace.arrival_s, trace.input_tokens, trace.output_tokens)]
    for values in frozen:
        values.setflags(write=False)
    (read_only,) = fast.simulate_many(
        dataclasses.replace(trace, arrival_s=frozen[0], input_tokens=frozen[1], output_tokens=frozen[2]), [config]
    )
    assert list(engine.run.signatures) == compiled_for
    assert read_only.summary() == writable.summary() and read_only.events == writable.events
