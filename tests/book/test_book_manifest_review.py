"""The manifest review chapter: its checked numbers, and the same findings as `planner lint` on a folder."""

from __future__ import annotations

import json

from planner.cli import main
from tests.notebooks import glued, run_chapter


def test_default_run_reviews_the_bundled_examples(tmp_path):
    values = glued(run_chapter("manifest_review", tmp_path))
    assert values["n_files"] == 3 and values["n_findings"] == 10 and values["n_errors"] == 4
    assert values["drain_s"] == "204.8" and values["grace_s"] == 241 and values["timeout_s"] == 226  # W37
    assert (values["generated_files"], values["generated_findings"]) == (5, 0)  # planner manifests output lints clean
    rules = {f["rule"] for f in json.loads(values["findings_json"])}
    assert {"waiting-only-trigger", "min-zero-pod-metric", "short-grace", "threshold-at-batch-limit"} <= rules


def test_chapter_on_the_corpus_equals_the_cli(tmp_path, capsys, shared_dir):
    folder = shared_dir / "real-world" / "manifests"
    values = glued(run_chapter("manifest_review", tmp_path, manifests_dir=str(folder)))
    assert main(["lint", str(folder), "--format", "json", "--itl-ms", "50", "--warmup-s", "90"]) == 1
    cli = json.loads(capsys.readouterr().out)
    assert json.loads(values["findings_json"]) == cli["findings"]
    assert values["n_files"] == 33 and values["n_errors"] == cli["counts"]["error"]
    assert (values["generated_files"], values["generated_findings"]) == (4, 0)  # no "chat" workload to patch


def test_chapter_checks_query_names_against_a_scrape(tmp_path, shared_dir):
    scrape = shared_dir / "real-world" / "metrics" / "vllm-0.25.1-opt125m-tp2-loaded.txt"
    values = glued(run_chapter("manifest_review", tmp_path, scrape_path=str(scrape)))
    missing = [f for f in json.loads(values["findings_json"]) if f["rule"] == "metric-not-exported"]
    assert len(missing) == 1 and "vllm:gpu_cache_usage_perc" in missing[0]["why"]  # the code model's KV trigger
