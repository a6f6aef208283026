"""The backlog chapter: where the queue waits behind each router, and what sets KEDA's delay."""

import json

from tests.conftest import REPO_ROOT
from tests.notebooks import glued, run_chapter


def test_default_run_glues_the_per_replica_drain(tmp_path):
    values = glued(run_chapter("backlog", tmp_path))
    assert values["backlog"] == "4,095" and values["clear_s"] == "241 s"  # one shared queue
    # 9 old replicas keep the backlog; round robin drains each at 4 - 75 / 23 requests/s.
    assert values["backlog_per_replica"] == "447"  # 4,095 / 9 less the 8 slots each had free
    assert values["round_robin_clear_s"] == "606 s" and values["round_robin_ratio"] == "2.5"
    assert values["least_loaded_clear_s"] == "219 s"


def test_keda_polling_interval_is_not_called_the_controller_period():
    cells = json.loads((REPO_ROOT / "book" / "backlog.ipynb").read_text())["cells"]
    text = "".join("".join(cell["source"]) for cell in cells)
    assert "or KEDA pollingInterval" not in text and "fresh value" not in text
    assert "useCachedMetrics" in text  # the one case where pollingInterval sets the delay


def test_the_hpa_tolerance_band_and_the_sync_period_are_counted(tmp_path):
    values = glued(run_chapter("backlog", tmp_path))
    # From the target a 12 % ramp needs T <= 43.0; from the top of the 10 % band, 39.1: 40 falls short.
    assert values["ramp_target_from_target"] == "43.0" and values["ramp_target"] == "39.1"
    assert values["verdict_ramp"] == "does not cover"
    assert values["step_target"] == "19.2" and values["step_target_in_band"] == "17.5"
    # A scheduled minimum acts at the next sync: one cold start plus one sync period ahead.
    assert values["lead_s"] == "75"


def test_the_first_scale_up_is_capped_by_the_default_policies(tmp_path):
    values = glued(run_chapter("backlog", tmp_path))
    assert values["replicas_after"] == "23" and values["first_wave"] == "18"  # 9 doubled, then 23 a sync later
