"""The chapter "From a load test to thresholds" on real tool output agrees with ``planner knee --json``."""

import json
import math

import papermill
import pytest

from planner.cli import main
from tests.notebooks import glued, run_chapter


def test_papermill_run_on_another_file_reports_its_knee(tmp_path):
    notebook = run_chapter(
        "loadtest_thresholds",
        tmp_path,
        loadtest_path="../tests/data/loadtests/guidellm_v05_qwen3-0.6b_concurrency",
        ttft_p99_slo_ms=250.0,
        itl_p99_slo_ms=50.0,
    )
    values = glued(notebook)
    assert float(values["knee_concurrency_value"]) == 4.0
    assert values["input_sentence"].startswith("The input is guidellm_v05_qwen3-0.6b_concurrency: 2 steps of")


VLLM = "real-world/vllm_bench"
ER0080 = f"{VLLM}/er0080-opt125m-vllm0.25.1"
GUIDELLM = "real-world/guidellm/danielkorat-xpu-20260302"

# (shared path, chapter parameters, what the page must say). Every vllm bench and GuideLLM result in
# the shared corpus; the objectives are chosen so that the cases cover each outcome.
REAL_CASES = [
    (f"{VLLM}/ascend-llama3-8b-sharegpt-qps-sweep", {}, "already misses ITL p99 by 70 ms"),
    (
        f"{VLLM}/ascend-llama3-8b-sharegpt-qps-sweep",
        {"ttft_p99_slo_ms": 1000.0, "itl_p99_slo_ms": 300.0, "mean_output_tokens": 200.0},
        "The knee is at 70.5 requests in flight (at 4 requests/s)",
    ),
    (f"{VLLM}/aurotripathy-llama3.1-8b-fp8-l40s-concurrency-sweep", {}, "The knee is at 4 requests in flight"),
    (f"{ER0080}/sweep_max_num_seqs=4", {}, "a knee needs at least 3"),
    (f"{ER0080}/sweep_max_num_seqs=8", {"repeats": "mean"}, "a knee needs at least 3"),
    (f"{ER0080}/bench_serve_v0.25.1.json", {}, "a knee needs at least 3"),
    (f"{GUIDELLM}/Qwen_Qwen3-30B-A3B_tp4_quant-fp8_benchmarks.json", {}, "a knee needs at least 3"),
    (f"{GUIDELLM}/Qwen_Qwen3-4B-Thinking-2507_tp2_quant-fp8_benchmarks.json", {}, "a knee needs at least 3"),
    (f"{GUIDELLM}/openai_gpt-oss-20b_tp4_quant-none_benchmarks.json", {}, "a knee needs at least 3"),
]


def _cli_json(capsys, path, parameters) -> dict:
    args = [
        "knee",
        str(path),
        "--ttft-p99-ms",
        str(parameters.get("ttft_p99_slo_ms", 2000.0)),
        "--itl-p99-ms",
        str(parameters.get("itl_p99_slo_ms", 50.0)),
        "--wait-budget-s",
        "5",
        "--repeats",
        parameters.get("repeats", "worst"),
        "--json",
    ]
    if "mean_output_tokens" in parameters:
        args += ["--mean-output-tokens", str(parameters["mean_output_tokens"])]
    assert main(args) == 0
    return json.loads(capsys.readouterr().out)


def _number(value) -> float:
    return float(value) if value is not None else math.nan


@pytest.mark.parametrize(("relative", "parameters", "says"), REAL_CASES, ids=lambda v: str(v)[-40:])
def test_chapter_on_real_tool_output_agrees_with_the_cli(tmp_path, capsys, shared_dir, relative, parameters, says):
    path = shared_dir / relative
    notebook = run_chapter("loadtest_thresholds", tmp_path, loadtest_path=str(path), **parameters)
    values = glued(notebook)
    cli = _cli_json(capsys, path, parameters)
    assert says in values["finding"] and values["finding"] == cli["finding"]
    assert values["knee_found"] == cli["knee_found"]
    assert _number(values["knee_concurrency_value"]) == pytest.approx(_number(cli["knee_concurrency"]), nan_ok=True)
    assert _number(values["concurrency_target_value"]) == pytest.approx(_number(cli["concurrency_target"]), nan_ok=True)
    assert values["sweep_too_short"] == cli["sweep_too_short"]
    text = "".join(out.get("text", "") for cell in notebook.cells for out in cell.get("outputs", []))
    if cli["sweep_too_short"]:
        # The page shows the same commands the CLI prints, and no target.
        assert cli["sweep_commands"]["vllm bench serve"] in text and math.isnan(
            _number(values["concurrency_target_value"])
        )
    if cli["repeats_notes"]:
        assert values["repeats_sentence"] == " ".join(cli["repeats_notes"])
    assert "'book'" not in text


def test_chapter_on_a_result_where_every_request_failed_stops_with_the_clis_message(tmp_path, capsys, shared_dir):
    path = shared_dir / ER0080 / "bench_serve_all_requests_failed_v0.25.1.json"
    assert main(["knee", str(path), "--ttft-p99-ms", "2000", "--itl-p99-ms", "50"]) == 2
    message = capsys.readouterr().err.strip().removeprefix("planner knee: error: ")
    with pytest.raises(papermill.PapermillExecutionError) as error:
        run_chapter("loadtest_thresholds", tmp_path, loadtest_path=str(path))
    assert "no request completed (completed=0, failed=8)" in message
    assert message in str(error.value)
