"""The lab and flapping chapters on inputs other than their defaults, checked against `planner simulate --json`."""

from __future__ import annotations

import json

import pandas as pd
import pytest

from planner.cli import main
from planner.readers.trace import read_trace
from tests.conftest import DATA_DIR
from tests.notebooks import glued, run_chapter


def _simulate_json(capsys, trace, manifest, fleet) -> dict:
    capsys.readouterr()
    assert main(["simulate", "--trace", str(trace), "--manifest", str(manifest), "--fleet", str(fleet), "--json"]) == 0
    return json.loads(capsys.readouterr().out)


def _canonical_csv(trace, path, until_s: float):
    keep = trace.arrival_s < until_s
    pd.DataFrame(
        {
            "arrival_s": trace.arrival_s[keep],
            "input_tokens": trace.input_tokens[keep],
            "output_tokens": trace.output_tokens[keep],
        }
    ).to_csv(path, index=False)
    return path


def test_lab_replays_ten_minutes_of_azure_traffic_through_a_real_manifest(tmp_path, capsys, shared_dir):
    trace = _canonical_csv(
        read_trace(shared_dir / "traces" / "AzureLLMInferenceTrace_conv.csv"), tmp_path / "conv-10min.csv", 600.0
    )
    manifest = shared_dir / "real-world" / "manifests" / "91-seed001-chat-model.yaml"
    fleet = tmp_path / "fleet.yaml"
    fleet.write_text(
        (DATA_DIR / "fleets" / "lab-8b.yaml")
        .read_text()
        .replace("usd_per_gpu_hour: 4.0", "usd_per_gpu_hour: 2.5")
        .replace("warmup_s: 60", "warmup_s: 120")
    )
    values = glued(
        run_chapter(
            "lab",
            tmp_path,
            trace_path=str(trace),
            manifest_path=str(manifest),
            fleet_path=str(fleet),
            usd_per_gpu_hour=2.5,
            warmup_s=120.0,
        )
    )
    cli = _simulate_json(capsys, trace, manifest, fleet)
    assert values["your_slo_attainment_frac"] == cli["slo_attainment_frac"]
    assert values["your_cost_usd"] == cli["cost_usd"]
    assert values["your_peak_replicas"] == cli["peak_replicas"]
    assert values["your_scale_events"] == cli["scale_events"]
    assert values["your_flap_cycles"] == cli["flap_cycles"]
    assert values["your_name"] == "ScaledObject chat-model"
    # The missions ran on the same fleet and still came out as seed 001 describes them.
    assert values["m1_gpu_max"] == 16 and values["m4_flaps"] >= 2


def test_flapping_chapter_on_a_faster_load_and_the_articles_own_manifests(tmp_path, capsys, shared_dir):
    # 0.65 req/s instead of 0.6, from a fixed-interval generator, for 12 minutes.
    trace = tmp_path / "steady-0.65.csv"
    arrivals = [i / 0.65 for i in range(int(720 * 0.65))]
    pd.DataFrame({"arrival_s": arrivals, "input_tokens": 100, "output_tokens": 900}).to_csv(trace, index=False)
    manifests = shared_dir / "real-world" / "manifests"
    waiting = manifests / "92-seed003-attempt2-waiting.yaml"
    kv_sum = manifests / "93-seed003-attempt3-kv-sum.yaml"
    fleet = tmp_path / "rig.yaml"
    fleet.write_text((DATA_DIR / "fleets" / "seed003-rig.yaml").read_text() + "usd_per_gpu_hour: 1.1\n")
    values = glued(
        run_chapter(
            "flapping",
            tmp_path,
            trace_path=str(trace),
            manifest_path=str(waiting),
            compare_manifest_path=str(kv_sum),
            fleet_path=str(fleet),
            usd_per_gpu_hour=1.1,
            duration_s=0.0,
        )
    )
    assert values["tested_flaps_during_load"] >= 2 and values["compared_flaps_during_load"] == 0
    cli_waiting = _simulate_json(capsys, trace, waiting, fleet)
    cli_steady = _simulate_json(capsys, trace, kv_sum, fleet)
    # The CLI's default duration is the last arrival plus 120 s: the run the chapter made.
    assert values["tested_slo_attainment_frac"] == cli_waiting["slo_attainment_frac"]
    assert values["tested_cost_usd"] == cli_waiting["cost_usd"]
    assert values["tested_flaps"] == cli_waiting["flap_cycles"]
    assert values["tested_peak"] == cli_waiting["peak_replicas"]
    assert values["compared_slo_attainment_frac"] == cli_steady["slo_attainment_frac"]
    assert values["compared_flaps"] == cli_steady["flap_cycles"]
    assert values["compared_cost_usd"] == cli_steady["cost_usd"]
    assert (values["tested_name"], values["compared_name"]) == ("qwen-vllm", "qwen-vllm")


@pytest.mark.parametrize("name", ["lab", "flapping"])
def test_chapter_titles_and_toc_order(name):
    import nbformat

    from tests.conftest import REPO_ROOT

    notebook = nbformat.read(REPO_ROOT / "book" / f"{name}.ipynb", as_version=4)
    first = notebook.cells[0].source.splitlines()[0]
    assert first == {"lab": "# The lab", "flapping": "# Flapping, and the signal that sees the work"}[name]
    assert all(not cell.get("outputs") for cell in notebook.cells if cell.cell_type == "code")
    toc = (REPO_ROOT / "_toc.yml").read_text()
    assert toc.index("book/flapping") < toc.index("book/lab") < toc.index("caption: Reviewing")


def test_lab_page_reads_as_prose_not_as_code(tmp_path):
    import re

    notebook = run_chapter("lab", tmp_path)
    html = "\n".join(
        str(output.get("data", {}).get("text/html", ""))
        for cell in notebook.cells
        for output in cell.get("outputs", [])
    )
    headers = re.findall(r"<th[^>]*>([^<]*)</th>", html)
    assert headers and not [h for h in headers if re.search(r"[a-z]_[a-z]", h)], headers
    titles = re.findall(r'"title": \{"text": "([^"]*)"|"title": "([^"]*)"', html)
    assert any("Your traffic through the" in t for pair in titles for t in pair), titles
    assert not [t for pair in titles for t in pair if re.search(r"\.(ya?ml|csv)\b|\.\./", t)], titles
    values = glued(notebook)
    texts = [v for v in values.values() if isinstance(v, str)]
    assert not [t for t in texts if "at least 100.0%" in t or re.search(r"\b1 [a-z ]+s$", t)], texts
    assert values["your_scale_events_text"].endswith(("scale event", "scale events"))
