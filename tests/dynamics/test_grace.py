import pytest
from hypothesis import given
from hypothesis import strategies as st

from planner.dynamics.grace import (
    DEFAULT_TERMINATION_GRACE_PERIOD_S,
    DEFAULT_VLLM_SHUTDOWN_TIMEOUT_S,
    check_grace,
    drain_time_s,
    plan_grace,
)
from planner.errors import PlannerInputError


def test_w37_4096_tokens_at_50_ms_need_204_8_s():
    assert drain_time_s(4096, 50.0) == pytest.approx(204.8)


def test_w37_default_grace_period_cuts_long_generations():
    check = check_grace(DEFAULT_TERMINATION_GRACE_PERIOD_S, DEFAULT_VLLM_SHUTDOWN_TIMEOUT_S, drain_time_s(4096, 50.0))
    assert not check.ok
    assert any("aborts every in-flight request" in p for p in check.problems)
    assert any("less than the 204.8 s" in p for p in check.problems)


def test_w38_shutdown_timeout_must_stay_below_grace():
    check = check_grace(termination_grace_period_s=200, shutdown_timeout_s=210, drain_time_s=204.8)
    assert not check.ok
    assert any("does not stay below" in p for p in check.problems)


def test_w38_recommended_plan_passes_its_own_check():
    plan = plan_grace(drain_time_s(4096, 50.0), pre_stop_s=10)
    assert plan.shutdown_timeout_s >= 204.8
    assert plan.pre_stop_s + plan.shutdown_timeout_s < plan.termination_grace_period_s
    check = check_grace(plan.termination_grace_period_s, plan.shutdown_timeout_s, plan.drain_time_s, plan.pre_stop_s)
    assert check.ok and check.problems == ()


def test_ttft_adds_to_the_drain_time():
    assert drain_time_s(1000, 20.0, ttft_ms=500.0) == pytest.approx(20.5)


@pytest.mark.parametrize(
    ("call", "name"),
    [
        (lambda: drain_time_s(0, 50.0), "max_output_tokens"),
        (lambda: drain_time_s(4096, float("nan")), "itl_ms"),
        (lambda: plan_grace(-1.0), "drain_time_s"),
        (lambda: check_grace(0, 0, 10), "termination_grace_period_s"),
    ],
)
def test_meaningless_inputs_name_the_parameter(call, name):
    with pytest.raises(PlannerInputError, match=name):
        call()


@given(
    tokens=st.integers(1, 131072),
    itl=st.floats(1, 500),
    pre_stop=st.floats(0, 120),
    margin=st.floats(0, 1),
)
def test_every_plan_passes_the_check(tokens, itl, pre_stop, margin):
    plan = plan_grace(drain_time_s(tokens, itl), pre_stop_s=pre_stop, margin_frac=margin)
    check = check_grace(plan.termination_grace_period_s, plan.shutdown_timeout_s, plan.drain_time_s, plan.pre_stop_s)
    assert check.ok, check.problems
