"""The chapter "Your plan", run by ``planner report`` on a second team's files.

Its numbers equal the commands' on the same files, and the page opens offline
with both charts drawn. One report (a kernel, the simulations and a Sphinx
build) serves every test here.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import nbformat
import pandas as pd
import pytest
import yaml

from planner.cli import main
from planner.readers.trace import read_trace
from tests.check_built_book import browser_unavailable, check_page, chromium
from tests.conftest import DATA_DIR, REPO_ROOT
from tests.notebooks import glued

TRACE_MINUTES = 20


def _cli_json(capsys, argv: list[str], status: int = 0) -> dict:
    assert main(argv) == status
    return json.loads(capsys.readouterr().out)


@pytest.fixture(scope="module")
def second_team(tmp_path_factory, shared_dir):
    # Qwen3-14B with its own vLLM log, the Qwen2.5 vllm-bench sweep, twenty minutes of the Azure code
    # trace and a real waiting-queue ScaledObject: nothing here is a default of the chapter.
    config = DATA_DIR / "models" / "qwen3-14b.json"
    log = REPO_ROOT / "tests" / "data" / "vllm_logs" / "lmcache-1739-qwen3-14b.log"
    loadtest = DATA_DIR / "loadtests" / "qwen2.5-7b_vllm_bench"
    manifest = shared_dir / "real-world" / "manifests" / "92-seed003-attempt2-waiting.yaml"
    azure = read_trace(shared_dir / "traces" / "AzureLLMInferenceTrace_code.csv").until(TRACE_MINUTES * 60.0)
    tmp_path = tmp_path_factory.mktemp("second_team")
    trace = tmp_path / "code-20min.csv"
    pd.DataFrame(
        {"arrival_s": azure.arrival_s, "input_tokens": azure.input_tokens, "output_tokens": azure.output_tokens}
    ).to_csv(trace, index=False)
    params = dict(
        model_config_path=config,
        vllm_log_path=log,
        max_model_len=0,
        max_num_seqs=128,
        loadtest_path=loadtest,
        ttft_p99_slo_ms=1500,
        itl_p99_slo_ms=40,
        trace_path=trace,
        manifests_path=manifest,
        target_name="qwen",
        warmup_s=90,
        max_replicas=8,
        usd_per_gpu_hour=3,
        attainment_goal_frac=0.95,
    )
    out = tmp_path / "report"
    argv = ["report", "your_plan", "--quiet", "--out", str(out)]
    for name, value in params.items():
        argv += ["--param", f"{name}={value}"]
    status = main(argv)
    return status, out, tmp_path, dict(config=config, log=log, loadtest=loadtest, manifest=manifest, trace=trace)


def test_second_team_gets_its_own_numbers(second_team, capsys):
    status, out, tmp_path, files = second_team
    assert status == 0
    assert sorted(p.name for p in out.iterdir()) == ["your_plan.html", "your_plan.ipynb"]
    plan = json.loads(glued(nbformat.read(out / "your_plan.ipynb", as_version=4))["plan_json"])
    config, log, loadtest, manifest, trace = (files[k] for k in ("config", "log", "loadtest", "manifest", "trace"))

    kv = _cli_json(capsys, ["kv", "--config", str(config), "--vllm-log", str(log), "--json"])
    assert (plan["kv_tokens"], plan["max_concurrency"]) == (kv["kv_tokens"], kv["max_concurrency"])
    assert plan["kv_tokens"] == 42_656  # the log's "GPU KV cache size"

    knee = _cli_json(capsys, ["knee", str(loadtest), "--ttft-p99-ms", "1500", "--itl-p99-ms", "40", "--json"])
    assert (plan["knee_concurrency"], plan["concurrency_target"]) == (
        knee["knee_concurrency"],
        knee["concurrency_target"],
    )

    lint = _cli_json(
        capsys,
        ["lint", str(manifest), "--json", "--warmup-s", "90"],
        status=1 if any(f["severity"] == "error" for f in plan["findings"]) else 0,
    )

    # planner report resolves links in input paths, so compare file names, not the spelled path.
    def named(findings):
        return [{**f, "file": Path(f["file"]).name} for f in findings]

    assert named(plan["findings"]) == named(lint["findings"]) and plan["findings"]

    matches = [arg for m in plan["label_matchers"] for arg in ("--match", m)]
    assert plan["label_matchers"] == ['pod=~"qwen-[a-z0-9]+-[a-z0-9]+"']  # no selector in the team's query
    assert (
        main(
            [
                "manifests",
                "--loadtest",
                str(loadtest),
                "--ttft-p99-ms",
                "1500",
                "--itl-p99-ms",
                "40",
                "--warmup-s",
                "90",
                "--max-tokens",
                "4096",
                "--itl-ms",
                "50",
                "--max-replicas",
                "8",
                "--target",
                "qwen",
                "--max-num-seqs",
                "128",
                *matches,
            ]
        )
        == 0
    )
    scaled_object = capsys.readouterr().out.split("\n---\n")[0]
    assert plan["scaledobject_yaml"].rstrip("\n") == scaled_object.rstrip("\n")

    (tmp_path / "scaledobject.yaml").write_text(plan["scaledobject_yaml"], encoding="utf-8")
    (tmp_path / "grid.yaml").write_text(yaml.safe_dump(plan["grid"]), encoding="utf-8")
    (tmp_path / "fleet.yaml").write_text(yaml.safe_dump(plan["fleet"]), encoding="utf-8")
    sweep = _cli_json(
        capsys,
        [
            "sweep",
            "--trace",
            str(trace),
            "--manifest",
            str(tmp_path / "scaledobject.yaml"),
            "--grid",
            str(tmp_path / "grid.yaml"),
            "--fleet",
            str(tmp_path / "fleet.yaml"),
            "--attainment-goal",
            "0.95",
            "--stretch-day",
            "--seed",
            str(plan["seed"]),
            "--json",
        ],
    )
    # The search ran over the day stretched from the twenty minutes (72 of them, thinned to a daily rhythm),
    # and each of its settings did what planner sweep finds for the same point of the grid.
    assert sweep["configurations"] == 2 * 2 * 3 and plan["day_requests"] > 24 * len(read_trace(trace))
    swept = {r["index"]: r for r in sweep["results"]}
    for row in plan["plan"]["configurations"]:
        same = swept[row["index"]]
        assert row["cost_usd_per_week"] == pytest.approx(7 * same["cost_usd"], rel=1e-12)
        assert (row["slo_attainment_frac"], row["flap_cycles_per_week"]) == (
            same["slo_attainment_frac"],
            7 * same["flap_cycles"],
        )

    # planner plan on the same files gives the chapter's answer: one function behind both.
    cli = _cli_json(
        capsys,
        [
            "plan",
            "--trace",
            str(trace),
            "--manifest",
            str(manifest),
            "--fleet",
            str(tmp_path / "fleet.yaml"),
            "--grid",
            str(tmp_path / "grid.yaml"),
            "--loadtest",
            str(loadtest),
            "--ttft-p99-ms",
            "1500",
            "--itl-p99-ms",
            "40",
            "--warmup-s",
            "90",
            "--max-tokens",
            "4096",
            "--itl-ms",
            "50",
            "--target",
            "qwen",
            "--max-replicas",
            "8",
            "--max-num-seqs",
            "128",
            "--attainment-goal",
            "0.95",
            "--max-flap-cycles",
            str(plan["max_flap_cycles"]),
            "--stretch-day",
            "--seed",
            str(plan["seed"]),
            "--json",
        ],
    )
    for key in ("current", "recommended", "front", "case", "reason", "manifests", "deployment_patch"):
        assert cli[key] == plan["plan"][key], key
    assert [f for f in cli["findings"] if f["severity"] == "error"] == []
    assert 'pod=~"qwen-' in cli["manifests"] or cli["case"] == "kept"


def test_the_report_opens_offline_with_both_charts_drawn(second_team, tmp_path):
    missing = browser_unavailable()
    if missing:
        if os.environ.get("CI", "").lower() == "true":
            pytest.fail(f"browser tests cannot run in CI: {missing}")
        pytest.skip(missing)
    status, out, _, _ = second_team
    assert status == 0
    page = out / "your_plan.html"
    text = page.read_text(encoding="utf-8")
    assert "{glue" not in text and "Qwen3" in text.replace("qwen3", "Qwen3")
    with chromium() as browser:
        result = check_page(
            browser, page.as_uri(), page.name, screenshot=tmp_path / "page.png", allowed_origin=page.as_uri()
        )
    assert result.charts >= 2
    assert [p for p in result.problems if "wider than the content column" not in p] == []


def test_every_chapter_the_page_names_is_a_link_that_exists():
    # Issue 20: the page sent readers to a chapter "Reading a load test" that does not exist.
    import re

    notebook = nbformat.read(REPO_ROOT / "book" / "your_plan.ipynb", as_version=4)
    text = "\n".join(c.source for c in notebook.cells if c.cell_type == "markdown")
    assert "Reading a load test" not in text
    assert not re.search(r'chapter "[^"]+"', text)  # chapters are named by links, not in quotes
    targets = re.findall(r"\]\(([^)#]+\.(?:ipynb|md))(?:#[^)]*)?\)", text)
    assert "loadtest_thresholds.ipynb" in targets
    for target in targets:
        assert (REPO_ROOT / "book" / target).is_file(), target
    toc = (REPO_ROOT / "_toc.yml").read_text(encoding="utf-8")
    assert all(Path(target).stem in toc for target in targets)
