"""Differential test: the fast engine against the reference engine, which is the specification.

Both engines replay the same trace through the same manifest and fleet; the
replica trajectories and scale events must be identical, attainment and cost
equal to 1e-9. Inputs: hypothesis-generated manifests, fleets and traces, and
every HPA or ScaledObject in the shared real-world corpus that the simulator
accepts.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from planner.errors import PlannerInputError
from planner.readers.manifest import load_autoscalers
from planner.simulate import fast, reference
from planner.simulate.control import Control
from planner.simulate.fleet import FleetSpec
from planner.simulate.replica import ReplicaSpec
from tests.simulate_helpers import (
    cron_scaled_object,
    external_hpa,
    pods_hpa,
    poisson_trace,
    scaled_object,
    write_manifest,
)

REPLICA_COLUMNS = ["replicas_requested", "replicas_ready", "replicas_live"]
QUERIES = (
    "sum(vllm:num_requests_running) + sum(vllm:num_requests_waiting)",
    "sum(vllm:num_requests_waiting)",
    "sum(vllm:kv_cache_usage_perc)",
    "avg(vllm:gpu_cache_usage_perc)",
    "sum(rate(vllm:request_success_total[1m]))",
    "max(avg_over_time(vllm:num_requests_running[2m]))",
)
POD_METRICS = ("vllm:num_requests_running", "num_requests_waiting", "DCGM_FI_DEV_GPU_UTIL")
# Cron windows for generated runs of one to five minutes: every other minute, two minutes in three, a window
# that wraps the hour, one in a zone Go cannot load (every query fails), one in New York (a generated run may
# start at its fall-back, 2024-11-03 05:50 UTC).
CRON_WINDOWS = (
    ("*/2 * * * *", "1-59/2 * * * *", "UTC"),
    ("1-59/3 * * * *", "*/3 * * * *", "Europe/Dublin"),
    ("3 * * * *", "1 * * * *", "UTC"),
    ("*/2 * * * *", "1-59/2 * * * *", "Europe/Dublyn"),
    ("*/4 * * * *", "2-59/4 * * * *", "America/New_York"),
)


def assert_same(ref, fst) -> None:
    """The differential contract."""
    assert fst.engine == "fast" and ref.engine == "reference"
    assert fst.events == ref.events
    for column in REPLICA_COLUMNS:
        assert fst.timeseries[column].tolist() == ref.timeseries[column].tolist(), column
    assert fst.slo_attainment_frac == pytest.approx(ref.slo_attainment_frac, abs=1e-9, nan_ok=True)
    assert fst.cost_usd == pytest.approx(ref.cost_usd, abs=1e-9)
    assert fst.gpu_hours == pytest.approx(ref.gpu_hours, abs=1e-9)
    summary_ref, summary_fast = ref.summary(), fst.summary()
    summary_ref.pop("engine")
    summary_fast.pop("engine")
    assert summary_fast == summary_ref
    assert fst.timeseries.equals(ref.timeseries)
    assert np.array_equal(fst.ttft_s, ref.ttft_s, equal_nan=True)


def down_policy(kind: str, value: int, period_s: int) -> str:
    return (
        f"          policies:\n          - type: {kind}\n            value: {value}\n"
        f"            periodSeconds: {period_s}\n"
    )


@st.composite
def scenarios(draw):
    kind = draw(st.sampled_from(["keda", "pods", "external", "cron"]))
    keda = kind == "keda"
    min_replicas = draw(st.integers(0 if kind != "pods" else 1, 3))
    max_replicas = draw(st.integers(max(min_replicas, 1), 8))
    if kind == "external":  # an HPA that may scale to zero and back (the ScaledToZero condition)
        text = external_hpa(
            "chat",
            draw(st.sampled_from(POD_METRICS)),
            draw(st.sampled_from([1, 4, 10, 50])),
            min_replicas=min_replicas,
            max_replicas=max_replicas,
            down_window_s=draw(st.sampled_from([0, 30, 120])),
        )
    elif kind == "cron":  # windows of a minute or two that open and close within the run
        windows = draw(st.lists(st.sampled_from(CRON_WINDOWS), min_size=1, max_size=3))
        text = cron_scaled_object(
            "chat",
            draw(st.sampled_from(QUERIES)),
            draw(st.sampled_from([0.5, 2, 5, 10, 20, 40])),
            [(start, end, zone, draw(st.integers(1, 6))) for start, end, zone in windows],
            min_replicas=min_replicas,
            max_replicas=max_replicas,
            up_policy=draw(st.sampled_from(["", "Pods:1:30"])),
        )
    elif keda:
        policy = draw(st.sampled_from(["", down_policy("Pods", 1, 30), down_policy("Percent", 50, 60)]))
        text = scaled_object(
            "chat",
            draw(st.sampled_from(QUERIES)),
            draw(st.sampled_from([0.5, 2, 5, 10, 20, 40])),
            min_replicas=min_replicas,
            max_replicas=max_replicas,
            polling_s=draw(st.sampled_from([5, 15, 30])),
            down_window_s=draw(st.sampled_from([None, 0, 30, 120])),
            down_policy=policy,
            cached=draw(st.booleans()),
        )
    else:
        text = pods_hpa(
            "chat",
            draw(st.sampled_from(POD_METRICS)),
            draw(st.sampled_from([1, 4, 10, 50])),
            min_replicas=min_replicas,
            max_replicas=max_replicas,
        )
    fleet = FleetSpec(
        replica=ReplicaSpec(
            max_num_seqs=draw(st.sampled_from([8, 64])),
            kv_tokens=draw(st.sampled_from([20_000, 200_000])),
            prefill_ms_per_token=draw(st.sampled_from([0.0, 0.05, 0.5])),
            max_num_batched_tokens=draw(st.sampled_from([None, 64, 256, 2048])),
        ),
        warmup_s=draw(st.sampled_from([0.0, 20.0, 60.0])),
        warmup_distribution=draw(st.sampled_from(["fixed", "uniform", "lognormal"])),
        warmup_spread_s=10.0,
        router=draw(st.sampled_from(["least-loaded", "round-robin"])),
        shutdown_timeout_s=draw(st.sampled_from([0.0, 20.0])),
        pre_stop_s=draw(st.sampled_from([0.0, 5.0])),
        seed=draw(st.integers(0, 2**16)),
        start_epoch_s=draw(st.sampled_from([1704067200.0, 1704067200.0 + 90.0, 1730608200.0])),
    )
    low, high = draw(st.floats(0.5, 6.0)), draw(st.floats(0.5, 25.0))
    switch_s = draw(st.floats(30.0, 200.0))
    trace = poisson_trace(
        lambda t: high if t >= switch_s else low,
        draw(st.floats(60.0, 300.0)),
        draw(st.one_of(st.integers(10, 600), st.integers(2_000, 12_000))),  # prompts of one chunk or many
        draw(st.integers(1, 400)),
        seed=draw(st.integers(0, 999)),
    )
    return text, fleet, trace


@settings(max_examples=25, suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(scenarios())
def test_fast_equals_reference_on_generated_inputs(tmp_path, scenario):
    text, fleet, trace = scenario
    if len(trace) == 0:
        return
    manifest = write_manifest(tmp_path, text)
    assert fast.covers(manifest, fleet)  # the compiled kernels run it, not the lockstep fallback
    assert_same(reference.simulate(trace, manifest, fleet), fast.simulate(trace, manifest, fleet))


def accepted_real_world(shared_dir):
    found = []
    for path in sorted((shared_dir / "real-world" / "manifests").glob("*.yaml")):
        try:
            autoscalers = load_autoscalers(path)
        except PlannerInputError:
            continue
        for autoscaler in autoscalers:
            try:
                Control(autoscaler)
            except PlannerInputError:
                continue
            found.append(autoscaler)
    return found


def test_fast_equals_reference_on_every_accepted_real_world_manifest(shared_dir):
    autoscalers = accepted_real_world(shared_dir)
    assert len(autoscalers) >= 10, [a.source for a in autoscalers]
    trace = poisson_trace(lambda t: 3.0 if t < 120 else 30.0, 360.0, 300, 200, seed=4)
    fleet = FleetSpec(warmup_s=30.0, warmup_distribution="lognormal", warmup_spread_s=15.0, seed=3)
    compiled = [a.source for a in autoscalers if fast.covers(a, fleet)]
    # Most real manifests run in the compiled kernels; the rest (say, a formula) in the lockstep engine.
    assert len(compiled) >= len(autoscalers) - 3, sorted(set(a.source for a in autoscalers) - set(compiled))
    for autoscaler in autoscalers:
        ref = reference.simulate(trace, autoscaler, fleet)
        assert_same(ref, fast.simulate(trace, autoscaler, fleet))


def test_many_configurations_in_lockstep_equal_one_at_a_time(tmp_path):
    trace = poisson_trace(lambda t: 4.0 if t < 100 else 20.0, 240.0, 200, 240, seed=9)
    configs = [
        fast.Configuration(
            write_manifest(tmp_path, scaled_object("a", QUERIES[0], target, max_replicas=6), f"a{target}.yaml"),
            FleetSpec(warmup_s=warmup, seed=seed),
        )
        for target, warmup, seed in ((5, 10.0, 1), (20, 60.0, 2), (40, 30.0, 3))
    ]
    together = fast.simulate_many(trace, configs)
    for config, outcome in zip(configs, together, strict=True):
        assert_same(reference.simulate(trace, config.autoscaler, config.fleet), outcome)


def test_same_seed_same_result_bit_for_bit(tmp_path):
    trace = poisson_trace(lambda t: 5.0 if t < 100 else 25.0, 240.0, 200, 240, seed=5)
    manifest = write_manifest(tmp_path, scaled_object("chat", QUERIES[0], 10, down_window_s=30))
    fleet = FleetSpec(warmup_distribution="uniform", warmup_spread_s=30.0, seed=7)
    first, second = fast.simulate(trace, manifest, fleet), fast.simulate(trace, manifest, fleet)
    assert first.timeseries.equals(second.timeseries) and first.events == second.events
    assert np.array_equal(first.latency_s, second.latency_s, equal_nan=True)
    assert len(first.events) >= 2


def test_a_configuration_the_kernels_do_not_cover_runs_in_the_lockstep_engine_with_the_same_result(tmp_path):
    from planner.simulate.fast import compiled

    trace = poisson_trace(lambda t: 4.0 if t < 100 else 20.0, 240.0, 200, 240, seed=11)
    manifest = write_manifest(tmp_path, scaled_object("chat", QUERIES[0], 8, max_replicas=6))
    fleet = FleetSpec(warmup_s=20.0)

    def refuse(*args, **kwargs):
        raise compiled.NotCompilable("pretend the decision kernel lacks a feature")

    original = compiled.decision.compile_control
    compiled.decision.compile_control = refuse
    try:
        assert not fast.covers(manifest, fleet)
        outcome = fast.simulate(trace, manifest, fleet)
    finally:
        compiled.decision.compile_control = original
    assert fast.covers(manifest, fleet)
    assert_same(reference.simulate(trace, manifest, fleet), outcome)
    assert_same(reference.simulate(trace, manifest, fleet), fast.simulate(trace, manifest, fleet))


def test_arrays_too_small_for_the_run_are_grown_and_the_run_repeated(tmp_path, monkeypatch):
    from planner.simulate.fast import compiled

    # Flapping creates many pods: start with room for very few, so the run must grow its arrays.
    trace = poisson_trace(lambda t: 30.0 if (t // 60) % 2 else 1.0, 600.0, 200, 240, seed=12)
    manifest = write_manifest(tmp_path, scaled_object("chat", QUERIES[1], 2, max_replicas=8, down_window_s=0))
    fleet = FleetSpec(warmup_s=10.0)
    runs = []
    real_run = compiled.engine.run

    def counted(*args):
        runs.append(len(args[1].ready_s))
        return real_run(*args)

    monkeypatch.setattr(compiled, "initial_capacity", lambda prepared: (2, 1))
    monkeypatch.setattr(compiled.engine, "run", counted)
    outcome = fast.simulate(trace, manifest, fleet)
    assert len(runs) >= 3 and runs[0] == 2  # grown more than once
    assert outcome.scale_events >= 4
    assert_same(reference.simulate(trace, manifest, fleet), outcome)


def test_configurations_with_different_ticks_are_refused(tmp_path):
    trace = poisson_trace(2.0, 30.0, 100, 100, seed=1)
    manifest = write_manifest(tmp_path, scaled_object("chat", QUERIES[0], 10))
    configs = [fast.Configuration(manifest, FleetSpec()), fast.Configuration(manifest, FleetSpec(tick_s=0.5))]
    with pytest.raises(PlannerInputError, match="configuration 1: tick_s"):
        fast.simulate_many(trace, configs)


def test_cli_engines_print_the_same_numbers_and_fast_is_the_default(tmp_path, capsys):
    import json

    from planner.cli import main

    trace = tmp_path / "trace.csv"
    trace.write_text(
        "arrival_s,input_tokens,output_tokens\n" + "\n".join(f"{i * 0.2:.3f},200,240" for i in range(600)) + "\n"
    )
    manifest = tmp_path / "so.yaml"
    manifest.write_text(scaled_object("chat", QUERIES[0], 8, max_replicas=4))
    outputs = {}
    for engine in ("fast", "reference", None):
        args = ["simulate", "--trace", str(trace), "--manifest", str(manifest), "--json"]
        assert main([*args, "--engine", engine] if engine else args) == 0
        outputs[engine] = json.loads(capsys.readouterr().out)
    assert outputs[None]["engine"] == "fast" and outputs["reference"]["engine"] == "reference"
    for payload in outputs.values():
        payload.pop("engine")
    assert outputs["fast"] == outputs["reference"] == outputs[None]
    assert outputs["fast"]["scale_events"] >= 1


def test_the_kernel_cache_key_covers_every_module_the_kernels_import():
    # numba freezes imported constants into the cached machine code: every planner module a kernel
    # module imports must be in the key, or an edit to it would leave stale kernels in the cache.
    import ast
    from pathlib import Path

    package = Path(fast.__file__).parent
    root = package.parent.parent.parent
    keyed = {source.resolve() for source in fast.kernel_sources()}
    kernels = [path for path in package.glob("*.py") if "@njit" in path.read_text(encoding="utf-8")]
    assert len(kernels) >= 5
    for kernel in kernels:
        for node in ast.walk(ast.parse(kernel.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("planner"):
                module = root / (node.module.replace(".", "/") + ".py")
                if not module.exists():
                    module = module.with_suffix("") / "__init__.py"
                assert module.resolve() in keyed, f"{kernel.name} imports {node.module}, which the cache key misses"


def test_an_hpa_goes_to_zero_in_a_lull_alike_in_both_engines(tmp_path):
    # Kubernetes 1.37: the HPA takes the fleet to 0 in the lull (ScaledToZero True). Its metric is served by
    # the pods, so at 0 replicas the External value is empty and the fleet stays at 0 (lint's
    # min-zero-pod-metric); the way back from 0 is tested on the decision kernel.
    trace = poisson_trace(lambda t: 0.0 if 90 <= t < 260 else 6.0, 400.0, 200, 40, seed=3)
    manifest = write_manifest(tmp_path, external_hpa("chat", "vllm:num_requests_running", 4, max_replicas=6))
    fleet = FleetSpec(warmup_s=20.0, seed=1, initial_replicas=2)
    ref = reference.simulate(trace, manifest, fleet)
    assert fast.covers(manifest, fleet)
    assert_same(ref, fast.simulate(trace, manifest, fleet))
    requested = ref.timeseries["replicas_requested"].tolist()
    first_zero = requested.index(0, 100)
    assert 100 <= first_zero < 260 and max(requested[:first_zero]) > 0 and max(requested[first_zero:]) == 0


@pytest.mark.parametrize("cached", [False, True])
def test_cached_metrics_run_alike_in_both_engines_and_lag_by_up_to_a_poll(tmp_path, cached):
    trace = poisson_trace(lambda t: 3.0 if t < 80 else 18.0, 300.0, 200, 240, seed=11)
    manifest = write_manifest(
        tmp_path,
        scaled_object("chat", QUERIES[0], 10, max_replicas=8, polling_s=60, cached=cached),
        f"cached{cached}.yaml",
    )
    fleet = FleetSpec(warmup_s=30.0, seed=2)
    ref = reference.simulate(trace, manifest, fleet)
    assert fast.covers(manifest, fleet)
    assert_same(ref, fast.simulate(trace, manifest, fleet))
    assert ref.events  # the fleet scales


def test_the_cache_delays_the_first_scale_up_to_a_poll(tmp_path):
    trace = poisson_trace(lambda t: 3.0 if t < 80 else 18.0, 300.0, 200, 240, seed=11)
    fleet = FleetSpec(warmup_s=30.0, seed=2)
    first_up = []
    for cached in (False, True):
        manifest = write_manifest(
            tmp_path,
            scaled_object("chat", QUERIES[0], 10, max_replicas=8, polling_s=60, cached=cached),
            f"delay{cached}.yaml",
        )
        events = reference.simulate(trace, manifest, fleet).events
        first_up.append(next(t for t, before, after in events if after > before))
    fresh, cached_s = first_up
    # A fresh query can act at any 15 s sync; a cached value changes only at the 60 s polls.
    assert cached_s >= fresh and cached_s % 60 == 0


def test_cron_triggers_run_compiled_alike(tmp_path):
    # Two overlapping windows (UTC and Dublin, both GMT in January) beside a queue trigger, load rising
    # inside them; the kernels read the cron triggers' readings computed ahead from the clock.
    trace = poisson_trace(lambda t: 30.0 if 7800 <= t < 8100 else 0.5, 3 * 3600.0, 300, 200, seed=8, tick_s=60.0)
    windows = [("0 1 * * *", "30 2 * * *", "UTC", 3), ("0 2 * * MON", "0 3 * * MON", "Europe/Dublin", 5)]
    manifest = write_manifest(tmp_path, cron_scaled_object("chat", QUERIES[1], 4, windows, max_replicas=12))
    fleet = FleetSpec(
        replica=ReplicaSpec(max_num_seqs=4),
        warmup_s=45.0,
        warmup_distribution="lognormal",
        warmup_spread_s=15.0,
        seed=2,
        tick_s=5.0,
    )
    assert fast.covers(manifest, fleet)
    ref = reference.simulate(trace, manifest, fleet)
    assert_same(ref, fast.simulate(trace, manifest, fleet))
    assert ref.events[0] == (3600.0, 1, 3) and (7200.0, 3, 5) in ref.events
    assert ref.timeseries["replicas_requested"].max() > 5  # the queue trigger takes over above the floors


# (start of the run, windows, the scale events they give): London's spring-forward (2024-03-31, 01:00 GMT
# becomes 02:00 BST) and New York's fall-back (2024-11-03, 02:00 EDT becomes 01:00 EST), runs from midnight.
DST_CASES = {
    # 01:30 does not exist on the day: the end's next firing is the next day's, after the next start, so
    # KEDA's isWithinInterval keeps the first window shut all day; 02:00-03:00 BST is 01:00-02:00 UTC.
    "spring-forward": (
        1711843200.0,
        [("30 0 * * *", "30 1 * * *", "Europe/London", 3), ("0 2 * * *", "0 3 * * *", "Europe/London", 5)],
        ((3600.0, 1, 4), (3615.0, 4, 5), (7500.0, 5, 1)),
    ),
    # 01:30-01:45 happens twice (EDT, then EST); 01:00 fires twice too, and the Sunday window opens at the
    # second 01:00 (before it, the next start comes before the next 02:00, so it is shut).
    "fall-back": (
        1730606400.0,
        [
            ("30 1 * * *", "45 1 * * *", "America/New_York", 3),
            ("0 1 * * SUN", "0 2 * * SUN", "America/New_York", 2),
        ],
        ((5400.0, 1, 3), (6600.0, 3, 1), (7200.0, 1, 2), (9000.0, 2, 3), (10200.0, 3, 2), (11100.0, 2, 1)),
    ),
}


@pytest.mark.parametrize("case", sorted(DST_CASES))
def test_cron_windows_across_a_daylight_saving_change_run_compiled_alike(tmp_path, case):
    start_epoch_s, windows, events = DST_CASES[case]
    trace = poisson_trace(0.3, 4 * 3600.0, 300, 200, seed=8, tick_s=60.0)
    manifest = write_manifest(tmp_path, cron_scaled_object("chat", QUERIES[1], 4, windows, max_replicas=12))
    fleet = FleetSpec(
        replica=ReplicaSpec(max_num_seqs=4), warmup_s=45.0, seed=2, tick_s=5.0, start_epoch_s=start_epoch_s
    )
    assert fast.covers(manifest, fleet)
    ref = reference.simulate(trace, manifest, fleet)
    assert_same(ref, fast.simulate(trace, manifest, fleet))
    assert ref.events == events


def test_cron_activation_from_zero_runs_compiled_alike(tmp_path):
    # minReplicaCount 0: no queue, so KEDA scales to zero at once; the requests that arrive wait at the
    # gateway, where no pod's metric sees them, until the 01:00 window activates the ScaledObject from zero
    # (and its floor lets the queue trigger see them); after it, cooldownPeriod takes the fleet to zero again.
    trace = poisson_trace(lambda t: 1.0 if t < 1200 else 0.0, 2 * 3600.0, 300, 200, seed=3, tick_s=60.0)
    windows = [("0 1 * * *", "15 1 * * *", "UTC", 2)]
    manifest = write_manifest(
        tmp_path, cron_scaled_object("chat", QUERIES[1], 4, windows, min_replicas=0, max_replicas=12)
    )
    fleet = FleetSpec(replica=ReplicaSpec(max_num_seqs=4), warmup_s=45.0, seed=2, tick_s=5.0, initial_replicas=1)
    assert fast.covers(manifest, fleet)
    ref = reference.simulate(trace, manifest, fleet, duration_s=2 * 3600.0)
    assert_same(ref, fast.simulate(trace, manifest, fleet, duration_s=2 * 3600.0))
    assert ref.events[:2] == ((15.0, 1, 0), (3600.0, 0, 2))
    assert ref.events[-1][2] == 0 and ref.events[-1][0] > 4500.0


@pytest.mark.parametrize(
    "method", ["seasonal_naive", "predict_linear", "max_over_time", "double_exponential_smoothing"]
)
def test_forecast_triggers_run_alike(method):
    # The generated ScaledObject with its forecast beside the in-flight trigger, over two one-hour "days"
    # with a climb each hour. The generator combines the triggers in a scalingModifiers formula (max of the
    # two over the target); the kernels run the formula and the forecast's subquery.
    from planner.manifests.generate import ScalingPlan, generate_manifests
    from planner.readers.manifest import autoscaler_from_document
    from planner.vllm.forecast import Forecast

    trace = poisson_trace(lambda t: 6.0 if 1800 <= t % 3600 < 2700 else 0.5, 2 * 3600.0, 200, 120, seed=5, tick_s=5.0)
    forecast = Forecast(method, period_s=3600, lead_s=120, window_s=900, step_s=30, ahead_s=120)
    plan = ScalingPlan("chat", 8, 120, 1024, 50, 12, forecast=forecast)
    manifest = autoscaler_from_document("so.yaml", generate_manifests(plan).scaled_object.document)
    fleet = FleetSpec(
        replica=ReplicaSpec(max_num_seqs=16, fixed_ms=20.0, per_sequence_ms=1.0), warmup_s=120.0, tick_s=5.0
    )
    assert fast.covers(manifest, fleet)
    ref = reference.simulate(trace, manifest, fleet)
    assert_same(ref, fast.simulate(trace, manifest, fleet))
    assert ref.scale_events > 4


def test_forecasts_and_reacting_in_one_group_each_get_the_reference_result():
    # compare_forecasts' shape: the reactive ScaledObject (one trigger, no formula) and the three subquery
    # forecasts (two triggers in a formula) share a fleet, so the kernels run them as one group and split
    # it where their decisions part; each must still get what the reference gives it alone.
    from planner.manifests.generate import ScalingPlan, generate_manifests
    from planner.readers.manifest import autoscaler_from_document
    from planner.vllm.forecast import Forecast

    trace = poisson_trace(lambda t: 6.0 if 1800 <= t % 3600 < 2700 else 0.5, 2 * 3600.0, 200, 120, seed=7, tick_s=5.0)
    fleet = FleetSpec(
        replica=ReplicaSpec(max_num_seqs=16, fixed_ms=20.0, per_sequence_ms=1.0), warmup_s=120.0, tick_s=5.0
    )
    manifests = []
    for method in (None, "predict_linear", "max_over_time", "double_exponential_smoothing"):
        forecast = None if method is None else Forecast(method, window_s=900, step_s=30, ahead_s=120)
        plan = ScalingPlan("chat", 8, 120, 1024, 50, 12, forecast=forecast)
        manifests.append(autoscaler_from_document("so.yaml", generate_manifests(plan).scaled_object.document))
    assert all(fast.covers(manifest, fleet) for manifest in manifests)
    outcomes = fast.simulate_many(trace, [fast.Configuration(manifest, fleet) for manifest in manifests])
    for manifest, outcome in zip(manifests, outcomes, strict=True):
        assert_same(reference.simulate(trace, manifest, fleet), outcome)
    assert len({outcome.events for outcome in outcomes}) == len(outcomes)  # the group did split


@pytest.mark.parametrize("signal", ["in_flight", "request_rate"])
def test_a_seasonal_naive_trigger_runs_compiled_alike(tmp_path, signal):
    # The seasonal-naive forecast (an offset of a period less the lead) as a second Prometheus trigger beside
    # the in-flight one, without a formula: the HPA's max over the two. Three one-hour "days", a climb in each.
    from planner.vllm.forecast import Forecast, forecast_query

    trace = poisson_trace(lambda t: 6.0 if 1800 <= t % 3600 < 2700 else 0.5, 3 * 3600.0, 200, 120, seed=5, tick_s=5.0)
    query = forecast_query(Forecast("seasonal_naive", period_s=3600, lead_s=300), signal)
    assert " offset " in query
    text = scaled_object("chat", QUERIES[0], 8, max_replicas=12).replace(
        "  triggers:\n",
        f"  triggers:\n  - type: prometheus\n    metadata:\n      query: '{query}'\n"
        f"      threshold: '{8 if signal == 'in_flight' else 0.5}'\n",
    )
    manifest = write_manifest(tmp_path, text, f"seasonal-{signal}.yaml")
    fleet = FleetSpec(
        replica=ReplicaSpec(max_num_seqs=16, fixed_ms=20.0, per_sequence_ms=1.0), warmup_s=120.0, tick_s=5.0
    )
    assert fast.covers(manifest, fleet)
    ref = reference.simulate(trace, manifest, fleet)
    assert_same(ref, fast.simulate(trace, manifest, fleet))
    # From the second hour on, the forecast scales up before the climb (at 1800 s into the hour) arrives.
    ups = [t for t, before, after in ref.events if after > before and 3600 <= t]
    assert any(1500 <= t % 3600 < 1800 for t in ups), ref.events


def test_a_store_that_drops_old_scrapes_changes_no_decision(tmp_path, monkeypatch):
    # Nine hours of a one-hour seasonal trigger, the store dropping 256 scrapes at a time once they are
    # older than its reach (58 min + 5 min lookback + 10 min margin); kept whole, the run decides the same.
    from planner.simulate import metrics as metrics_module
    from planner.simulate import reference as reference_module

    monkeypatch.setattr(metrics_module, "_PRUNE_CHUNK", 256)
    held = []
    record = metrics_module.MetricStore.record

    def spy(self, *args, **kwargs):
        record(self, *args, **kwargs)
        held.append(len(self.times_s))

    monkeypatch.setattr(metrics_module.MetricStore, "record", spy)
    trace = poisson_trace(lambda t: 5.0 if 1800 <= t % 3600 < 2400 else 0.3, 9 * 3600.0, 100, 60, seed=6, tick_s=15.0)
    query = "(sum(vllm:num_requests_running offset 58m) + sum(vllm:num_requests_waiting offset 58m)) or vector(0)"
    manifest = write_manifest(tmp_path, scaled_object("chat", query, 6, max_replicas=10))
    fleet = FleetSpec(
        replica=ReplicaSpec(max_num_seqs=16, fixed_ms=20.0, per_sequence_ms=1.0), warmup_s=60.0, tick_s=15.0
    )
    pruned = reference.simulate(trace, manifest, fleet)
    assert max(held) <= 256 + (58 + 5 + 10) * 4 + 1 < len(held)  # it dropped scrapes
    assert fast.covers(manifest, fleet)  # the compiled store keeps every scrape
    assert_same(pruned, fast.simulate(trace, manifest, fleet))
    monkeypatch.setattr(reference_module, "HISTORY_MARGIN_S", 1e12)
    held.clear()
    kept = reference.simulate(trace, manifest, fleet)
    assert max(held) == len(held)  # it kept every scrape
    assert kept.events == pruned.events and kept.timeseries.equals(pruned.timeseries)
    assert pruned.scale_events > 8
