"""Tests for planner.capacity.knee: the knee, interpolation, targets (W13, W17, W32, W33) and step-time fits."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest
from hypothesis import given
from hypothesis import strategies as st

from planner.capacity.knee import (
    MIN_SWEEP_STEPS,
    Shortfall,
    find_knee,
    in_flight_by_step,
    knee_finding,
    knee_grid,
    kv_usage_target_frac,
    sweep_commands,
    thresholds_from_loadtest,
    value_at_knee,
)
from planner.capacity.step_time import step_time_ms
from planner.errors import PlannerInputError
from planner.readers.loadtest import COLUMNS, read_loadtest
from tests.conftest import DATA_DIR, TEST_DATA_DIR

SAMPLES = DATA_DIR / "loadtests"
FIXTURES = TEST_DATA_DIR / "loadtests"


def test_knee_is_last_step_meeting_both():
    knee = find_knee([16, 32, 48, 64], [300, 500, 900, 2500], [20, 30, 45, 70], ttft_p99_slo_ms=2000, itl_p99_slo_ms=50)
    assert (knee.index, knee.step, knee.limited_by, knee.lower_bound) == (2, 48.0, "ttft_p99+itl_p99", False)


def test_preemptions_break_the_knee_even_when_latency_passes():
    knee = find_knee(
        [16, 32, 48],
        [300, 400, 500],
        [20, 25, 30],
        [0, 0, 3],
        ttft_p99_slo_ms=2000,
        itl_p99_slo_ms=50,
        interpolate=True,
    )
    assert knee.step == 32.0 and knee.limited_by == "preemptions" and not knee.interpolated


def test_unmeasured_preemptions_are_not_checked():
    knee = find_knee([16, 32], [300, 400], [20, 25], [np.nan, np.nan], ttft_p99_slo_ms=2000, itl_p99_slo_ms=50)
    assert knee.lower_bound and knee.step == 32.0 and knee.limited_by == "none"


def test_interpolation_to_the_crossing():
    # ITL p99 goes 40 -> 60 ms between 32 and 48: crosses 50 ms halfway, at 40.
    knee = find_knee([32, 48], [100, 200], [40, 60], ttft_p99_slo_ms=2000, itl_p99_slo_ms=50, interpolate=True)
    assert knee.interpolated and knee.step == pytest.approx(40.0)
    assert value_at_knee(knee, [32, 48], [0.5, 0.7]) == pytest.approx(0.6)


def test_interpolation_takes_the_earlier_crossing():
    knee = find_knee([10, 20], [1000, 3000], [40, 60], ttft_p99_slo_ms=2000, itl_p99_slo_ms=50, interpolate=True)
    assert knee.step == pytest.approx(15.0)  # both cross at 15
    knee = find_knee([10, 20], [1000, 2000.5], [40, 60], ttft_p99_slo_ms=2000, itl_p99_slo_ms=50, interpolate=True)
    assert knee.step == pytest.approx(15.0)


def test_no_interpolation_towards_inf():
    knee = find_knee([4, np.inf], [100, 9000], [20, 30], ttft_p99_slo_ms=2000, itl_p99_slo_ms=50, interpolate=True)
    assert knee.step == 4.0 and not knee.interpolated


def test_a_later_passing_step_is_reported_not_used():
    knee = find_knee(
        [8, 16, 24, 32], [100, 3000, 1500, 4000], [10, 10, 10, 10], ttft_p99_slo_ms=2000, itl_p99_slo_ms=50
    )
    assert knee.step == 8.0 and knee.later_passing_steps == (2,)


def test_lightest_step_failing_is_a_finding_not_an_error():
    knee = find_knee([4, 8, 12], [2500, 3000, 1900], [10, 60, 10], ttft_p99_slo_ms=2000, itl_p99_slo_ms=50)
    assert knee.status == "no passing step" and not knee.found and not knee.lower_bound
    assert knee.index == -1 and math.isnan(knee.step) and knee.limited_by == "ttft_p99"
    assert knee.lightest_misses == (Shortfall("ttft_p99", 2500.0, 2000.0),)
    assert knee.lightest_misses[0].excess == 500.0
    assert knee.later_passing_steps == (2,)
    assert math.isnan(value_at_knee(knee, [4, 8, 12], [1.0, 2.0, 3.0]))


def test_every_objective_the_lightest_step_misses_is_listed():
    knee = find_knee([4, 8], [2500, 3000], [130, 140], [2, 0], ttft_p99_slo_ms=2000, itl_p99_slo_ms=50)
    assert [m.metric for m in knee.lightest_misses] == ["ttft_p99", "itl_p99", "preemptions"]
    assert knee.lightest_misses[1].describe() == "ITL p99 by 80 ms (130 ms against 50 ms)"
    assert knee.lightest_misses[2].describe() == "zero preemptions (2 preempted)"


def test_steps_must_increase():
    with pytest.raises(PlannerInputError, match="strictly increasing"):
        find_knee([8, 4], [1, 1], [1, 1], ttft_p99_slo_ms=2000, itl_p99_slo_ms=50)


def test_slo_must_be_positive():
    with pytest.raises(PlannerInputError, match="ttft_p99_slo_ms"):
        find_knee([1], [1], [1], ttft_p99_slo_ms=0, itl_p99_slo_ms=50)


@given(st.lists(st.floats(1, 5000), min_size=2, max_size=12), st.floats(10, 5000))
def test_knee_never_exceeds_a_failing_step(ttft, slo):
    ttft = np.array(ttft)
    ttft[0] = min(ttft[0], slo)
    step = np.arange(1, ttft.size + 1, dtype=float)
    knee = find_knee(step, ttft, np.ones_like(ttft), ttft_p99_slo_ms=slo, itl_p99_slo_ms=50, interpolate=True)
    assert np.all(ttft[: knee.index + 1] <= slo)
    assert knee.step >= step[knee.index]
    if not knee.lower_bound:
        assert knee.step <= step[knee.index + 1]


def test_kv_target_just_under_knee():
    assert kv_usage_target_frac(0.84) == pytest.approx(0.798)
    with pytest.raises(PlannerInputError):
        kv_usage_target_frac(1.2)


def _sweep(concurrency, ttft, itl, **extra) -> pd.DataFrame:
    data = {c: [math.nan] * len(concurrency) for c in COLUMNS}
    data.update(
        {
            "source": ["t"] * len(concurrency),
            "tool": ["t"] * len(concurrency),
            "model": ["m"] * len(concurrency),
            "step_label": [str(c) for c in concurrency],
            "concurrency": concurrency,
            "ttft_p99_ms": ttft,
            "itl_p99_ms": itl,
            **extra,
        }
    )
    frame = pd.DataFrame(data).astype({c: float for c in COLUMNS if c not in ("source", "tool", "model", "step_label")})
    frame.attrs["step_variable"] = "concurrency"
    return frame


def test_seed_example_w13_w17_and_queue_threshold():
    # A load test whose knee is 48 with W = 12 s: mu = 4 req/s (W13); T = 48/1.2 = 40 (W15/W17).
    frame = _sweep([32, 48, 64], [500, 900, 3000], [30, 45, 60], e2e_mean_ms=[10000, 12000, 15000])
    result = thresholds_from_loadtest(
        frame, ttft_p99_slo_ms=2000, itl_p99_slo_ms=50, growth_frac=0.2, queue_wait_budget_s=5.0
    )
    assert result.knee_concurrency == 48
    assert result.concurrency_target == pytest.approx(40.0)
    assert result.drain_rate_rps == pytest.approx(4.0) and result.drain_rate_source == "K / W"
    assert result.queue_threshold_requests == pytest.approx(20.0)


def test_w32_and_w33_queue_thresholds():
    # W32: K 258 requests, W 10 s -> 25.8 req/s, W_max 5 s -> ~129 waiting.
    frame = _sweep([200, 258, 300], [80, 100, 5000], [10, 10, 10], e2e_mean_ms=[9000, 10000, 11000])
    result = thresholds_from_loadtest(frame, ttft_p99_slo_ms=2000, itl_p99_slo_ms=50, queue_wait_budget_s=5)
    assert result.drain_rate_rps == pytest.approx(25.8)
    assert round(result.queue_threshold_requests) == 129
    # W33: a measured drain rate of 0.46 req/s and W_max 15 s -> 6.9, about 7.
    frame = _sweep([24, 32, 40], [90, 100, 5000], [10, 10, 10], request_throughput_rps=[0.4, 0.46, 0.47])
    result = thresholds_from_loadtest(frame, ttft_p99_slo_ms=2000, itl_p99_slo_ms=50, queue_wait_budget_s=15)
    assert result.drain_rate_source == "measured throughput at the knee"
    assert result.queue_threshold_requests == pytest.approx(6.9)


def test_step_time_fit_recovers_the_seed_model():
    # W21-W24 constants: TPOT = 6 + 0.25 x batch exactly, throughput = batch / TPOT.
    batch = np.array([1.0, 8, 16, 32, 48, 64])
    tpot = step_time_ms(batch, 6.0, 0.25)
    frame = _sweep(
        batch.tolist(),
        [100] * 6,
        (tpot * 1.5).tolist(),
        tpot_mean_ms=tpot.tolist(),
        output_throughput_tps=(1000 * batch / tpot).tolist(),
    )
    result = thresholds_from_loadtest(frame, ttft_p99_slo_ms=2000, itl_p99_slo_ms=50)
    for fit in (result.tpot_fit, result.throughput_fit):
        assert fit.fixed_ms == pytest.approx(6.0) and fit.per_sequence_ms == pytest.approx(0.25)
        assert fit.r_squared == pytest.approx(1.0)
    assert result.fit_steps == 6


def test_sample_knees():
    llama = thresholds_from_loadtest(
        read_loadtest(SAMPLES / "llama-3.1-8b_canonical.csv"), ttft_p99_slo_ms=2000, itl_p99_slo_ms=50
    )
    assert llama.knee_concurrency == 64 and llama.knee.limited_by == "ttft_p99"
    assert llama.kv_usage_target_frac == pytest.approx(0.8533 * 0.95)
    qwen = thresholds_from_loadtest(
        read_loadtest(SAMPLES / "qwen2.5-7b_canonical.csv"), ttft_p99_slo_ms=2000, itl_p99_slo_ms=50
    )
    assert qwen.knee_concurrency == 32 and qwen.knee.limited_by == "itl_p99+preemptions"
    # The synthetic data came from step = 8 + 0.45 x batch plus prefill interference: the fit sees a slope
    # inflated by the interference but a good R^2.
    assert qwen.tpot_fit.r_squared > 0.99


def test_real_guidellm_sweep_knee():
    result = thresholds_from_loadtest(
        read_loadtest(FIXTURES / "guidellm_v05_qwen3-0.6b_concurrency"),
        ttft_p99_slo_ms=250,
        itl_p99_slo_ms=50,
        growth_frac=0.25,
    )
    assert result.knee_concurrency == 4 and result.knee.limited_by == "ttft_p99"
    # Two steps are too few for a knee: the target is withheld, the measurements stay.
    assert result.sweep_too_short and result.sweep_steps == 2 and math.isnan(result.concurrency_target)
    assert result.drain_rate_rps == pytest.approx(4 / 3.0119190643995233)


def test_real_rate_sweep_knee_uses_mean_in_flight():
    steps = read_loadtest(FIXTURES / "vllm_llama3.3-70b_tp8_qps")
    result = thresholds_from_loadtest(steps, ttft_p99_slo_ms=200, itl_p99_slo_ms=45)
    assert result.step_variable == "request_rate_rps"
    assert result.knee.lower_bound and result.knee_request_rate_rps == 4.0
    assert result.knee_concurrency == pytest.approx(steps.iloc[1].mean_concurrency)
    assert result.knee_concurrency == pytest.approx(18.33, abs=0.01)
    none = thresholds_from_loadtest(steps, ttft_p99_slo_ms=200, itl_p99_slo_ms=40)
    assert none.knee.status == "no passing step" and math.isnan(none.knee_concurrency)
    assert math.isnan(none.concurrency_target) and math.isnan(none.drain_rate_rps)
    assert knee_finding(none, steps) == (
        "No step meets the objectives: the lightest step (1 request/s) already misses ITL p99 by 3.0 ms "
        "(43 ms against 40 ms). Heavier steps pass (4 requests/s), but a knee starts from the lightest step."
    )


# ---------------------------------------------------------------- knee_grid


@pytest.mark.parametrize("interpolate", [False, True])
@pytest.mark.parametrize(
    "path",
    [
        SAMPLES / "llama-3.1-8b_canonical.csv",
        SAMPLES / "qwen2.5-7b_canonical.csv",
        FIXTURES / "vllm_llama3.3-70b_tp8_qps",
        FIXTURES / "guidellm_v05_qwen3-0.6b_concurrency",
    ],
)
def test_grid_agrees_with_the_knee_at_every_pair(path, interpolate):
    steps = read_loadtest(path)
    ttft_slos = [50.0, 200.0, 250.0, 1000.0, 2000.0, 20000.0]
    itl_slos = np.arange(5.0, 80.0, 2.5)
    grid = knee_grid(steps, ttft_slos, itl_slos, growth_frac=0.25, interpolate=interpolate)
    assert len(grid) == len(ttft_slos) * len(itl_slos)
    assert set(grid["status"]) <= {"knee", "lower bound", "no passing step"}
    for row in grid.itertuples():
        if row.status == "no passing step":
            result = thresholds_from_loadtest(
                steps, ttft_p99_slo_ms=row.ttft_p99_slo_ms, itl_p99_slo_ms=row.itl_p99_slo_ms
            )
            assert result.knee.status == "no passing step" and result.knee.limited_by == row.limited_by
            assert math.isnan(row.knee_step) and math.isnan(row.concurrency_target)
            continue
        expected = thresholds_from_loadtest(
            steps,
            ttft_p99_slo_ms=row.ttft_p99_slo_ms,
            itl_p99_slo_ms=row.itl_p99_slo_ms,
            growth_frac=0.25,
            interpolate=interpolate,
        )
        assert row.knee_step == expected.knee.step
        assert row.limited_by == expected.knee.limited_by
        assert (row.status == "lower bound") == expected.knee.lower_bound
        assert row.knee_concurrency == pytest.approx(expected.knee_concurrency, nan_ok=True)
        assert row.concurrency_target == pytest.approx(expected.concurrency_target, nan_ok=True)


def test_grid_records_a_pair_no_step_meets():
    frame = _sweep([16, 32, 48], [300, 500, 3000], [20, 30, 45])
    grid = knee_grid(frame, [200, 2000], [10, 50], growth_frac=0.2)
    by_pair = grid.set_index(["ttft_p99_slo_ms", "itl_p99_slo_ms"])
    assert by_pair.loc[(200, 10), "limited_by"] == "ttft_p99+itl_p99"
    assert by_pair.loc[(2000, 10), "limited_by"] == "itl_p99"
    assert (by_pair.loc[(2000, 10), "status"], by_pair.loc[(200, 50), "status"]) == ("no passing step",) * 2
    assert by_pair.loc[(2000, 50), "knee_step"] == 32 and by_pair.loc[(2000, 50), "limited_by"] == "ttft_p99"
    assert by_pair.loc[(2000, 50), "concurrency_target"] == pytest.approx(32 / 1.2)


def test_grid_still_rejects_bad_input():
    frame = _sweep([16, 32], [300, 500], [20, 30])
    with pytest.raises(PlannerInputError, match="itl_slos_ms"):
        knee_grid(frame, [2000], [0, 50])
    with pytest.raises(PlannerInputError, match="growth_frac"):
        knee_grid(frame, [2000], [50], growth_frac=-0.1)
    with pytest.raises(PlannerInputError, match="strictly increasing"):
        knee_grid(_sweep([32, 16], [300, 500], [20, 30]), [2000], [50])


@given(data=st.data(), interpolate=st.booleans())
def test_a_looser_objective_never_lowers_the_knee(data, interpolate):
    size = data.draw(st.integers(1, 10))
    ttft = data.draw(st.lists(st.floats(1, 5000), min_size=size, max_size=size))
    itl = data.draw(st.lists(st.floats(1, 100), min_size=size, max_size=size))
    preemptions = data.draw(st.lists(st.sampled_from([0.0, 0.0, 0.0, 1.0]), min_size=size, max_size=size))
    frame = _sweep(
        list(np.cumsum(data.draw(st.lists(st.integers(1, 32), min_size=size, max_size=size)))),
        ttft,
        itl,
        preemptions=preemptions,
    )
    ttft_slos = sorted(set(data.draw(st.lists(st.floats(1, 6000), min_size=1, max_size=4))))
    itl_slos = sorted(set(data.draw(st.lists(st.floats(1, 120), min_size=2, max_size=8))))
    grid = knee_grid(frame, ttft_slos, itl_slos, interpolate=interpolate)
    # No knee counts as the lowest knee of all.
    knees = grid.pivot(index="ttft_p99_slo_ms", columns="itl_p99_slo_ms", values="knee_step").fillna(-np.inf)
    knees = knees.to_numpy()
    assert (knees[:, 1:] >= knees[:, :-1]).all()  # along ITL objectives
    assert (knees[1:, :] >= knees[:-1, :]).all()  # along TTFT objectives
    for row in grid.itertuples():
        if row.status != "no passing step":
            knee = find_knee(
                frame["concurrency"],
                ttft,
                itl,
                preemptions,
                ttft_p99_slo_ms=row.ttft_p99_slo_ms,
                itl_p99_slo_ms=row.itl_p99_slo_ms,
                interpolate=interpolate,
            )
            assert (row.knee_step, row.limited_by) == (knee.step, knee.limited_by)


# ------------------------------------------------- short sweeps, rate sweeps


def test_a_sweep_under_three_steps_withholds_the_targets_and_says_so(shared_dir):
    path = shared_dir / "real-world/guidellm/danielkorat-xpu-20260302/Qwen_Qwen3-30B-A3B_tp4_quant-fp8_benchmarks.json"
    steps = read_loadtest(path)
    result = thresholds_from_loadtest(steps, ttft_p99_slo_ms=2000, itl_p99_slo_ms=50, queue_wait_budget_s=5)
    assert MIN_SWEEP_STEPS == 3 and result.sweep_too_short and result.sweep_steps == 1
    assert result.knee.lower_bound and result.knee_concurrency == 1
    # Before, this printed a target of 0.83 requests with no warning.
    assert math.isnan(result.concurrency_target) and math.isnan(result.queue_threshold_requests)
    assert "a knee needs at least 3, so no target is given" in knee_finding(result, steps)
    commands = sweep_commands(steps)
    assert "--max-concurrency $c" in commands["vllm bench serve"]
    assert "--model Qwen/Qwen3-30B-A3B" in commands["vllm bench serve"]
    assert "--percentile-metrics ttft,tpot,itl,e2el" in commands["vllm bench serve"]
    assert "--profile concurrent --rate 1,2,4,8,16,32,64,128" in commands["guidellm"]
    # Three steps are enough.
    frame = _sweep([8, 16, 24], [100, 200, 3000], [10, 10, 10])
    assert not thresholds_from_loadtest(frame, ttft_p99_slo_ms=2000, itl_p99_slo_ms=50).sweep_too_short


def test_rate_sweep_without_throughput_gets_k_from_littles_law(shared_dir):
    steps = read_loadtest(shared_dir / "real-world/vllm_bench/ascend-llama3-8b-sharegpt-qps-sweep")
    assert steps.attrs["step_variable"] == "request_rate_rps"
    # The files keep only latency keys: without a mean output length W, and so K, is unknown, and it says so.
    unknown = thresholds_from_loadtest(steps, ttft_p99_slo_ms=1000, itl_p99_slo_ms=300)
    assert unknown.knee.step == 4.0 and math.isnan(unknown.knee_concurrency)
    assert "--mean-output-tokens" in unknown.concurrency_source
    result = thresholds_from_loadtest(
        steps, ttft_p99_slo_ms=1000, itl_p99_slo_ms=300, mean_output_tokens=200, queue_wait_budget_s=5
    )
    at_4 = steps.iloc[1]
    duration_s = (at_4.ttft_mean_ms + at_4.tpot_mean_ms * 199) / 1000
    assert result.request_duration_s == pytest.approx(duration_s)
    assert result.knee_concurrency == pytest.approx(4.0 * duration_s)  # L = X W, X the offered 4 req/s
    assert result.concurrency_target == pytest.approx(4.0 * duration_s / 1.2)
    assert result.drain_rate_rps == pytest.approx(4.0) and result.queue_threshold_requests == pytest.approx(20.0)
    assert "X the offered rate" in result.concurrency_source and "N = 200" in result.concurrency_source


def test_in_flight_prefers_measured_throughput_and_e2e():
    frame = _sweep(
        [math.nan] * 3,
        [100, 200, 300],
        [10, 10, 10],
        request_rate_rps=[1.0, 2.0, math.inf],
        request_throughput_rps=[0.9, math.nan, 3.0],
        e2e_mean_ms=[2000, 2500, math.nan],
        ttft_mean_ms=[100, 100, 400],
        tpot_mean_ms=[10, 12, 20],
        mean_output_tokens=[50, 50, 50],
    )
    in_flight, duration_ms, source = in_flight_by_step(frame)
    assert duration_ms.tolist() == [2000, 2500, 400 + 20 * 49]
    assert in_flight.tolist() == pytest.approx([0.9 * 2.0, 2.0 * 2.5, 3.0 * 1.38])
    assert "X the offered rate" in source and "the file's mean output tokens" in source
