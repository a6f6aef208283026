"""The flapping chapter uses its parameters: a papermill run on other files changes the page."""

from tests.notebooks import glued, run_chapter


def test_flapping_default_run_is_w35_against_w36(tmp_path):
    values = glued(run_chapter("flapping", tmp_path))
    assert values["tested_flaps"] >= 2 and values["tested_peak"] == 3 and values["tested_cut"] > 0  # W35
    assert values["compared_flaps"] == 0 and values["compared_cut"] == 0  # W36
    assert values["tested_name"] == "qwen-waiting" and values["compared_name"] == "qwen-kv-sum"


def test_flapping_parameters_reach_the_simulation(tmp_path):
    # The KV design as the one under test, with a shorter cold start: the page follows.
    values = glued(
        run_chapter("flapping", tmp_path, manifest_path="../data/manifests/flapping-kv-sum.yaml", warmup_s=30.0)
    )
    assert values["tested_name"] == "qwen-kv-sum"
    assert values["tested_flaps"] == 0


def test_the_page_says_what_the_rig_assumes_and_replays_the_real_cache(tmp_path):
    values = glued(run_chapter("flapping", tmp_path))
    # 32 requests of 550 tokens: 88 % of the rig's 20,000 tokens, 6.8 % of the logged 257,584.
    assert values["rig_full"] == "88%" and values["real_full"] == "6.8%" and values["real_ceiling"] == "0.062"
    # The rig is on the edge too: 0.88 / 1.1 = 0.80, and one replica reads 0.89, just past 1.1 x 0.8.
    assert values["rig_ceiling"] == "0.80" and values["rig_one_replica_reading"] == "0.89"
    # The seed's 0.8 on the real cache: it never moves, and users pay for it.
    assert values["real_seed_peak"] == 1
    assert int(values["real_seed_attainment"].rstrip("%")) < 50
    # The same tokens per pod: the rig's result at the real size.
    assert values["same_tokens"] == "0.062" and values["real_fixed_point"] == "2"
    assert values["real_same_flaps"] == 0 and values["real_same_attainment"] == values["compared_attainment"]
    # A production batch limit (256) still leaves 0.8 out of reach for these requests.
    assert values["production_full"] == "55%" and values["production_verdict"] == "still could not fire"
