"""The HPA chapters use their parameters: papermill runs on bundled and on real third-party manifests.

The real manifests are other teams' published ScaledObjects and HPAs in the
shared corpus (see its ``real-world/SOURCES.md``); on each, the desired
replica count the chapter glues must equal ``planner hpa --json`` on the same
file and values, and the explorer must open on that same decision.
"""

import json
import re

import pandas as pd
import pytest

from planner.cli import main
from tests.notebooks import glued, run_chapter

# (file, current replicas, Ready replicas or -1 for all, one value per trigger or metric)
REAL_MANIFESTS = [
    # ScaledObject, two triggers without names: the OR section runs on this manifest itself
    ("14-aks-qwen-keda-running-waiting.yaml", 3, -1, {"0": 6.0, "1": 9.0}),
    # ScaledObject with a scalingModifiers formula over four triggers and an immediate scale-up
    (
        "10-llmd-keda-epp-queue-guard-scalingmodifiers.yaml",
        2,
        -1,
        {"queue": 5.0, "running": 40.0, "pending": 0.0, "replicas": 2.0},
    ),
    # ScaledObject on summed KV-cache usage, scale-up limited to one pod per 180 s
    ("12-llmd-keda-decode-kv-cache-sum.yaml", 3, -1, {"decode-kv-utilization": 2.9}),
    # HPA on an External metric with a 120-s scale-up window; at one replica the OR example sits below its minimum
    ("11-llmd-hpa-wva-desired-replicas.yaml", 1, -1, {"0": 2.0}),
    # HPA on a Pods metric with behavior, one of two pods still warming up
    ("04-k8sexamples-hpa-running.yaml", 2, 1, {"vllm_num_requests_running": 7.0}),
    # HPA on an Object metric with a Value target and no behavior (the legacy path)
    ("02-prodstack-hpa-waiting.yaml", 1, -1, {"0": 3.0}),
]


def _cli_json(capsys, path, current, ready, values) -> dict:
    args = ["hpa", "--manifest", str(path), "--current-replicas", str(current), "--json"]
    if ready >= 0:
        args += ["--ready-replicas", str(ready)]
    for key, value in values.items():
        args += ["--metric", f"{key}={value:g}"]
    assert main(args) == 0
    return json.loads(capsys.readouterr().out)


def test_hpa_decisions_default_run(tmp_path):
    values = glued(run_chapter("hpa_decisions", tmp_path))
    assert values["proposal"] == 10 and values["explained"] == "waiting"  # ceil(20 / 2)
    assert values["desired"] == 8 and values["explorer_desired"] == 8  # the larger of +4 pods and +100 % from 4
    assert values["policy_steps"] == "4 -> 8 -> 10" and values["policy_wanted"] == 10
    assert values["or_source"] == "ScaledObject llama-vllm" and values["or_max"] == 5  # ceil(1.0 / 0.8 x 4)
    assert "proposes 10" in values["decision_text"] and "sets 8" in values["decision_text"]


@pytest.mark.parametrize(
    ("name", "current", "ready", "metric_values"), REAL_MANIFESTS, ids=[m[0].split("-")[0] for m in REAL_MANIFESTS]
)
def test_hpa_decisions_on_real_manifests_equals_the_cli(
    tmp_path, capsys, shared_dir, name, current, ready, metric_values
):
    path = shared_dir / "real-world" / "manifests" / name
    values = glued(
        run_chapter(
            "hpa_decisions",
            tmp_path,
            manifest_path=str(path),
            current_replicas=current,
            ready_replicas=ready,
            metric_values=metric_values,
        )
    )
    cli = _cli_json(capsys, path, current, ready, metric_values)
    assert values["desired"] == cli["desired_replicas"]
    assert values["proposal"] == cli["max_proposal"]
    assert values["explorer_desired"] == cli["desired_replicas"]  # the explorer opens on the page's decision
    assert values["manifest"] == f"{cli['kind']} {cli['name']}"
    assert "None" not in values["decision_text"] and "None" not in values["or_text"]
    if name.startswith("14-"):  # several triggers: the OR section is this manifest's
        assert values["or_source"] == values["manifest"] and values["or_max"] == cli["max_proposal"] == 5
    if name.startswith("11-"):
        # The two-trigger example has minReplicaCount 2: at one replica no trigger is evaluated.
        assert values["or_source"] == "ScaledObject llama-vllm" and values["or_max"] is None
        assert values["or_desired"] == 2 and "below the minimum" in values["or_text"]


def _chart(notebook, title_part: str) -> dict:
    """The Vega-Lite spec of the chart whose title contains ``title_part``, from the executed notebook."""
    for cell in notebook.cells:
        for output in cell.get("outputs", []):
            data = output.get("data", {})
            if title_part in data.get("text/plain", "") and "text/html" in data:
                spec = re.search(r"\}\)\((\{.*\}), (\{.*\})\);\s*</script>", data["text/html"], re.S).group(1)
                return json.loads(spec)
    raise AssertionError(f"no chart titled {title_part!r}")


def _rows(spec: dict, column: str) -> pd.DataFrame:
    """The dataset of ``spec`` that has ``column``."""
    for rows in spec["datasets"].values():
        if rows and column in rows[0]:
            return pd.DataFrame(rows)
    raise AssertionError(f"no dataset with {column!r}")


def test_kv_chapter_default_run_chart_and_text_agree(tmp_path):
    notebook = run_chapter("kv_bounded_ratio", tmp_path)
    values = glued(notebook)
    assert values["ramp"] == "4 -> 5 -> 7 -> 9 -> 12" and values["warmups"] == "4"
    ramp = _chart(notebook, "bounded ratio grows the fleet")
    assert ramp["params"][0]["value"] == 0.8  # the slider opens on the chapter's target
    rows = _rows(ramp, "signal")
    bounded = rows[(rows.signal == "KV usage (bounded)") & (rows.target == 0.8)]
    assert bounded.replicas.max() == 12 and bounded.replicas.tolist()[-1] == 12  # stops once the load is served
    assert rows.replicas.max() <= 2 * 10  # no target climbs far past the goal of 10
    pairing = _rows(_chart(notebook, "Pairing KV"), "triggers")
    alone = pairing[(pairing.triggers == "KV usage alone") & (pairing.kv_target == 0.8)].sort_values("t_s")
    assert values["alone_final"] == alone.ready_replicas.iloc[-1] == 11  # the text says what the chart ends at
    assert values["paired_final"] == 10


def test_kv_chapter_follows_other_inputs(tmp_path):
    notebook = run_chapter("kv_bounded_ratio", tmp_path, kv_target_frac=0.95, goal_replicas=16)
    values = glued(notebook)
    assert values["cap"] == "1.05" and values["warmups"] == "never" and values["kv_target"] == "0.95"
    assert values["alone_min"].startswith("never") and values["goal_replicas"] == 16
    assert _chart(notebook, "Pairing KV")["params"][0]["value"] == 0.95
