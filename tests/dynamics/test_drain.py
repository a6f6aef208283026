import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from planner.dynamics.drain import (
    OutputLengths,
    cut_frac,
    cut_requests,
    drain_window_s,
    empirical_output_lengths,
    output_lengths,
    review_drain,
    shutdown_settings,
)
from planner.dynamics.grace import check_grace, drain_time_s, plan_grace
from planner.errors import PlannerInputError


def test_w37_default_settings_cut_everything_in_flight():
    # Grace 30 s, no preStop, --shutdown-timeout 0: SIGTERM arrives at once and aborts all.
    assert drain_window_s(30, 0, 0) == 0.0
    assert cut_frac(0.0, output_lengths(4096, "geometric", 512), 50.0) == 1.0


def test_w37_draining_in_30_s_still_cuts_full_length_answers():
    # 204.8 s to finish, 30 s given: every full-length answer in flight has a uniform age, so
    # the share still running after 30 s is 1 - 30 / 204.8.
    window = drain_window_s(30, 300, 0)
    assert window == 30.0
    assert cut_frac(window, output_lengths(4096, "max"), 50.0) == pytest.approx(1 - 30 / 204.8)


def test_window_follows_the_termination_sequence():
    assert drain_window_s(30, 0, 10) == 10.0  # served during preStop, aborted at SIGTERM
    assert drain_window_s(30, 15, 10) == 25.0  # drains after preStop
    assert drain_window_s(30, 60, 10) == 30.0  # SIGKILL at the grace period
    assert drain_window_s(20, 0, 40) == 20.0  # a preStop longer than the grace is killed too
    assert drain_window_s(np.array([30.0, 241.0]), 226, 10).tolist() == [30.0, 236.0]


def test_recommended_plan_cuts_nothing_and_w38_holds():
    longest_s = drain_time_s(4096, 50.0)
    plan = plan_grace(longest_s, pre_stop_s=10)
    window = drain_window_s(plan.termination_grace_period_s, plan.shutdown_timeout_s, plan.pre_stop_s)
    assert window == 236.0 and window < plan.termination_grace_period_s  # W38: timeout inside the grace
    assert cut_frac(window, output_lengths(4096, "uniform"), 50.0) == 0.0


def test_uniform_lengths_closed_form():
    # Lengths uniform on 1..n tokens at 1 s each: E[(D - w)+] for w = n/2 follows by summing.
    n = 100
    lengths = output_lengths(n, "uniform")
    w = 50.0
    expected = sum(k - w for k in range(51, n + 1)) / sum(range(1, n + 1))
    assert cut_frac(w, lengths, 1000.0) == pytest.approx(expected)


def test_geometric_model_lumps_the_tail_at_the_cap():
    lengths = output_lengths(4096, "geometric", 4096)
    assert lengths.prob.sum() == pytest.approx(1.0)
    assert lengths.prob[-1] == pytest.approx((1 - 1 / 4096) ** 4095)
    assert lengths.max_tokens == 4096
    assert output_lengths(100_000, "geometric", 512).mean_tokens == pytest.approx(512, rel=1e-6)


def test_cut_fraction_matches_a_simulated_hour():
    """A Poisson hour of requests with geometric lengths, sampled at many instants."""
    rng = np.random.default_rng(7)
    rate_rps, hour_s, itl_ms = 20.0, 3600.0, 50.0
    arrival_s = np.sort(rng.uniform(0.0, hour_s, rng.poisson(rate_rps * hour_s)))
    tokens = np.minimum(rng.geometric(1 / 512, arrival_s.size), 4096)
    end_s = arrival_s + tokens * itl_ms / 1000.0
    in_flight = 0
    longer = {10.0: 0, 30.0: 0, 60.0: 0}
    for t in np.linspace(600.0, hour_s - 300.0, 300):
        remaining = end_s[(arrival_s <= t) & (end_s > t)] - t
        in_flight += remaining.size
        for w in longer:
            longer[w] += int((remaining > w).sum())
    lengths = output_lengths(4096, "geometric", 512)
    for w, count in longer.items():
        assert count / in_flight == pytest.approx(cut_frac(w, lengths, itl_ms), abs=0.01)


def test_real_trace_lengths(shared_dir):
    from planner.readers.trace import read_trace

    path = shared_dir / "traces" / "AzureLLMInferenceTrace_conv.csv"
    if not path.exists():
        pytest.skip(f"{path} is absent")
    trace = read_trace(path)
    lengths = empirical_output_lengths(trace.output_tokens, max_output_tokens=4096)
    assert lengths.prob.sum() == pytest.approx(1.0)
    assert lengths.mean_tokens == pytest.approx(np.minimum(trace.output_tokens, 4096).mean())
    fracs = cut_frac(np.array([0.0, 5.0, 30.0, drain_time_s(lengths.max_tokens, 50.0)]), lengths, 50.0)
    assert fracs[0] == 1.0 and fracs[-1] == 0.0
    assert np.all(np.diff(fracs) < 0)


@given(
    tokens=st.integers(1, 20000),
    itl=st.floats(1, 300),
    ttft=st.floats(0, 5000),
    mean=st.floats(1, 5000),
    shape=st.sampled_from(["geometric", "uniform", "max"]),
    windows=st.lists(st.floats(0, 10000), min_size=2, max_size=8),
)
def test_cut_fraction_is_a_falling_fraction(tokens, itl, ttft, mean, shape, windows):
    lengths = output_lengths(tokens, shape, mean)
    windows = np.sort(np.array(windows))
    fracs = cut_frac(windows, lengths, itl, ttft)
    assert np.all((fracs >= 0) & (fracs <= 1))
    assert np.all(np.diff(fracs) <= 1e-12)
    assert cut_frac(0.0, lengths, itl, ttft) == 1.0
    assert cut_frac(drain_time_s(tokens, itl, ttft), lengths, itl, ttft) == 0.0


@given(
    tokens=st.integers(1, 20000),
    itl=st.floats(1, 300),
    grace=st.floats(1, 1000),
    shutdown=st.floats(0, 1000),
    pre_stop=st.floats(0, 120),
)
def test_settings_the_check_accepts_cut_nothing(tokens, itl, grace, shutdown, pre_stop):
    longest_s = drain_time_s(tokens, itl)
    window = drain_window_s(grace, shutdown, pre_stop)
    frac = cut_frac(window, output_lengths(tokens, "uniform"), itl)
    if check_grace(grace, shutdown, longest_s, pre_stop).ok:
        assert frac == 0.0
    assert (frac == 0.0) == (window >= longest_s)


def test_cut_requests_scales_the_fraction():
    assert cut_requests(40, 0.25) == 10.0
    with pytest.raises(PlannerInputError, match="frac"):
        cut_requests(40, 1.5)


def test_shutdown_settings_apply_the_plan():
    spec = shutdown_settings(plan_grace(204.8, pre_stop_s=10), container="engine")["spec"]["template"]["spec"]
    assert spec["terminationGracePeriodSeconds"] == 241
    (container,) = spec["containers"]
    # No args: a strategic merge would replace the container's whole argument list.
    assert container == {"name": "engine", "lifecycle": {"preStop": {"sleep": {"seconds": 10}}}}
    assert shutdown_settings(plan_grace(20.0))["spec"]["template"]["spec"] == {"terminationGracePeriodSeconds": 27}


@pytest.mark.parametrize(
    ("call", "name"),
    [
        (lambda: output_lengths(0), "max_output_tokens"),
        (lambda: output_lengths(10.5, "uniform"), "max_output_tokens"),
        (lambda: output_lengths(4096), "mean_output_tokens"),
        (lambda: output_lengths(4096, "geometric", 0.5), "mean_output_tokens"),
        (lambda: output_lengths(4096, "pareto"), "shape"),
        (lambda: empirical_output_lengths([]), "output_tokens"),
        (lambda: empirical_output_lengths([3, 0, 5]), "index 1"),
        (lambda: drain_window_s(0, 0, 0), "termination_grace_period_s"),
        (lambda: drain_window_s(30, -1, 0), "shutdown_timeout_s"),
        (lambda: cut_frac(-1.0, output_lengths(10, "max"), 50.0), "drain_window_s"),
        (lambda: cut_frac(1.0, [1, 2], 50.0), "lengths"),
        (lambda: cut_frac(1.0, output_lengths(10, "max"), 0.0), "itl_ms"),
        (lambda: shutdown_settings({"shutdown_timeout_s": 1}), "plan"),
    ],
)
def test_meaningless_inputs_name_the_parameter(call, name):
    with pytest.raises(PlannerInputError, match=name):
        call()


def test_output_lengths_is_frozen():
    lengths = output_lengths(10, "uniform")
    assert isinstance(lengths, OutputLengths)
    with pytest.raises(AttributeError):
        lengths.tokens = np.array([1.0])


def test_shutdown_settings_match_the_generated_workload_patch():
    from planner.manifests.generate import ScalingPlan, generate_manifests

    manifests = generate_manifests(
        ScalingPlan(
            target_name="chat",
            concurrency_target=40.0,
            warmup_s=120.0,
            max_output_tokens=4096,
            itl_ms=50.0,
            max_replicas=8,
        )
    )
    plan = plan_grace(drain_time_s(4096, 50.0), pre_stop_s=10)
    assert manifests.grace == plan
    assert manifests.workload_patch.document["spec"] == shutdown_settings(plan)["spec"]
    assert manifests.shutdown_flag == f"--shutdown-timeout={plan.shutdown_timeout_s}"


def test_review_is_the_one_computation_of_cut_and_plan():
    lengths = output_lengths(4096, "geometric", 512)
    review = review_drain(
        lengths,
        max_output_tokens=4096,
        itl_ms=50.0,
        in_flight_requests=40.0,
        termination_grace_period_s=30,
        shutdown_timeout_s=0,
        pre_stop_s=0,
        planned_pre_stop_s=10,
        margin_frac=0.1,
    )
    assert review.longest_s == pytest.approx(204.8) and review.window_s == 0.0
    assert review.cut_frac == 1.0 and review.cut_requests == 40.0 and not review.current.ok
    # The plan uses the planned preStop (10 s), not the current one (0 s): W38's 226 s and 241 s.
    assert (review.plan.pre_stop_s, review.plan.shutdown_timeout_s, review.plan.termination_grace_period_s) == (
        10,
        226,
        241,
    )
