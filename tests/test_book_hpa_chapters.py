"""The HPA chapters use their parameters: a papermill run on other numbers changes the page."""

from tests.notebooks import glued, run_chapter


def test_hpa_decisions_default_run_is_w1(tmp_path):
    values = glued(run_chapter("hpa_decisions", tmp_path))
    assert values["proposal"] == 10 and values["ratio"] == "2.5"  # W1
    assert values["desired"] == 8  # this sync: the larger of +4 pods and +100 % from 4
    assert values["policy_steps"] == "4 -> 8 -> 10"  # W4


def test_hpa_decisions_parameters_reach_the_decision(tmp_path):
    values = glued(run_chapter("hpa_decisions", tmp_path, current_replicas=3, ready_replicas=3, waiting_total=9.0,
                               in_flight_total=400.0, kv_usage_avg=0.5))
    assert values["proposal"] == 5 and values["ratio"] == "1.5"  # 9 / (2 x 3); ceil(9 / 2)
    assert values["or_max"] == 10  # in-flight 400 / 40


def test_kv_chapter_default_and_other_target(tmp_path):
    values = glued(run_chapter("kv_bounded_ratio", tmp_path))
    assert values["ramp"] == "4 -> 5 -> 7 -> 9 -> 12" and values["warmups"] == "4"  # W9
    values = glued(run_chapter("kv_bounded_ratio", tmp_path, kv_target_frac=0.95))
    assert values["cap"] == "1.05" and values["warmups"] == "never"
