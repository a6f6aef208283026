"""The flapping chapter uses its parameters: a papermill run on other files changes the page."""

from tests.notebooks import glued, run_chapter


def test_flapping_default_run_is_w35_against_w36(tmp_path):
    values = glued(run_chapter("flapping", tmp_path))
    assert values["tested_flaps"] >= 2 and values["tested_peak"] == 3 and values["tested_cut"] > 0  # W35
    assert values["compared_flaps"] == 0 and values["compared_cut"] == 0  # W36
    assert values["tested_name"] == "qwen-waiting" and values["compared_name"] == "qwen-kv-sum"


def test_flapping_parameters_reach_the_simulation(tmp_path):
    # The KV design as the one under test, with a shorter cold start: the page follows.
    values = glued(run_chapter("flapping", tmp_path, manifest_path="../data/manifests/flapping-kv-sum.yaml",
                               warmup_s=30.0))
    assert values["tested_name"] == "qwen-kv-sum"
    assert values["tested_flaps"] == 0
