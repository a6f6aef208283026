"""Tests for planner.readers.loadtest: real files of each format, the samples, and every validation error."""

from __future__ import annotations

import json
import math
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from planner.cli import main
from planner.errors import PlannerInputError
from planner.readers.loadtest import COLUMNS, read_loadtest
from tests.conftest import TEST_DATA_DIR

HERE = TEST_DATA_DIR.parent
FIXTURES = HERE / "data" / "loadtests"
SAMPLES = HERE.parent / "data" / "loadtests"
VLLM_DIR = FIXTURES / "vllm_llama3.3-70b_tp8_qps"
GUIDELLM_DIR = FIXTURES / "guidellm_v05_qwen3-0.6b_concurrency"


# ------------------------------------------------------------- real files


def test_vllm_rate_sweep_directory_real():
    steps = read_loadtest(VLLM_DIR)
    assert list(steps.columns) == list(COLUMNS)
    assert steps.attrs["step_variable"] == "request_rate_rps"
    assert steps["request_rate_rps"].tolist() == [1.0, 4.0]
    assert steps["model"].unique().tolist() == ["meta-llama/Llama-3.3-70B-Instruct"]
    first = steps.iloc[0]
    assert first.ttft_p99_ms == pytest.approx(143.80068917976584)
    assert first.itl_p99_ms == pytest.approx(42.95781370012719)
    assert first.ttft_p50_ms == pytest.approx(56.37217849994158)  # median_ttft_ms
    assert math.isnan(first.e2e_p99_ms)  # e2el was not requested
    assert math.isnan(first.failed_requests)  # the old script wrote no 'failed' key
    assert first.mean_output_tokens == pytest.approx(42722 / 200)
    # Little's law with W = mean TTFT + mean TPOT x (mean output - 1)
    w_s = (65.25777634499718 + 24.564414268982127 * (42722 / 200 - 1)) / 1000
    assert first.mean_concurrency == pytest.approx(0.9745666315653629 * w_s)


def test_guidellm_v05_concurrency_sweep_real():
    steps = read_loadtest(GUIDELLM_DIR)
    assert steps.attrs["step_variable"] == "concurrency"
    assert steps["concurrency"].tolist() == [4.0, 16.0]
    assert steps["tool"].unique().tolist() == ["guidellm"]
    c16 = steps.iloc[1]
    assert c16.model == "Qwen/Qwen3-0.6B"
    assert c16.ttft_p99_ms == pytest.approx(306.71000480651855)
    assert c16.itl_p99_ms == pytest.approx(28.44354674572081)
    assert c16.e2e_mean_ms == pytest.approx(3345.599185648582)  # request_latency is in seconds
    assert c16.mean_concurrency == pytest.approx(15.50074272553126)
    assert c16.duration_s == pytest.approx(60.0)
    assert c16.completed_requests == 278


def test_guidellm_pre_04_shape_real_without_p50():
    steps = read_loadtest(FIXTURES / "guidellm_v03_benchmarks_stripped.json")
    (row,) = steps.itertuples()
    assert row.step_label == "synchronous" and row.concurrency == 1.0
    assert row.model == "example_model"  # worker.backend_model
    assert row.ttft_p50_ms == pytest.approx(16.38054847717285)  # from 'median': no p50 key here
    assert row.duration_s == pytest.approx(29.997201442718506)


GUIDELLM_V07 = FIXTURES / "guidellm_v07_qwen3.8-27b-fp8_multiturn_concurrency" / "agent-multiturn-benchmarks.json"
VLLM_JSONL = FIXTURES / "vllm_llama3.2-3b_llm-d_rate_jsonl" / "results.json"


def test_guidellm_v07_concurrency_sweep_real():
    steps = read_loadtest(GUIDELLM_V07)
    assert steps.attrs["step_variable"] == "concurrency"
    assert steps["concurrency"].tolist() == [1.0, 2.0, 4.0, 8.0]  # config.strategy.streams
    assert steps["step_label"].tolist() == ["concurrent@1", "concurrent@2", "concurrent@4", "concurrent@8"]
    assert steps["model"].unique().tolist() == ["Qwen/Qwen3.8-27B-FP8"]  # per-benchmark backend; the report's is ""
    assert steps["completed_requests"].tolist() == [6, 14, 31, 63]  # the warmup request is not counted
    c8 = steps.iloc[3]
    assert c8.ttft_p99_ms == pytest.approx(3131.0160160064697)
    assert c8.itl_p99_ms == pytest.approx(49.29057772612152)
    assert c8.ttft_p50_ms == pytest.approx(1343.3499336242676)
    assert c8.e2e_p99_ms == pytest.approx(26275.994300842285)  # request_latency is in seconds
    assert c8.mean_concurrency == pytest.approx(4.028979035591816)
    assert c8.output_throughput_tps == pytest.approx(90.57284491055366)
    # No benchmark-level 'duration' kept for this step: the measured window comes from scheduler_metrics.
    assert c8.duration_s == pytest.approx(1789844639.2184331 - 1789844302.8038468)
    assert steps.iloc[0].duration_s == pytest.approx(136.53227305412292)
    # Multi-turn conversations kept two streams at about one request in flight.
    assert steps.iloc[1].mean_concurrency == pytest.approx(0.9999770939326591)


def test_guidellm_v07_knee_cli(capsys):
    code = main(["knee", str(GUIDELLM_V07), "--ttft-p99-ms", "2500", "--itl-p99-ms", "50", "--json"])
    payload = json.loads(capsys.readouterr().out)
    assert code == 0
    assert payload["steps"] == 4
    assert payload["knee_step"] == 4.0  # 8 streams: TTFT p99 3131 ms > 2500
    assert payload["limited_by"] == "ttft_p99"
    assert payload["knee_request_rate_rps"] == pytest.approx(0.11243809580855195)


def test_vllm_append_result_jsonl_real_mixes_deployments():
    # Nine results appended one per line: three llm-d deployments x rates 10, 30, inf.
    # Same rates, different deployments (recorded with --metadata): not repeats, so refused.
    with pytest.raises(
        PlannerInputError,
        match=(
            r"^request_rate_rps 10 appears in results that differ in deployment \(deployment: no-features in "
            r"results.json \(rate 10.0, result 1\); base in results.json \(rate 10.0, result 4\); kvcache in "
        ),
    ):
        read_loadtest(VLLM_JSONL)


def test_vllm_jsonl_one_deployment_real(tmp_path):
    lines = VLLM_JSONL.read_text().splitlines()
    assert [json.loads(line)["deployment"] for line in lines[3:6]] == ["base"] * 3
    path = tmp_path / "base.jsonl"
    path.write_text("\n".join(lines[3:6]) + "\n")
    steps = read_loadtest(path)
    assert steps.attrs["step_variable"] == "request_rate_rps"
    assert steps["request_rate_rps"].tolist() == [10.0, 30.0, math.inf]  # the string "inf"
    assert steps["step_label"].tolist() == ["rate 10.0, result 1", "rate 30.0, result 2", "rate inf, result 3"]
    assert steps["model"].unique().tolist() == ["meta-llama/Llama-3.2-3B-Instruct"]
    inf = steps.iloc[2]
    assert inf.ttft_p99_ms == pytest.approx(3155.812861540362)
    assert inf.itl_p99_ms == pytest.approx(86.78916550024948)
    assert inf.mean_output_tokens == pytest.approx(241786 / 900)
    assert math.isnan(inf.concurrency)  # max_concurrency null
    code = main(["knee", str(path), "--ttft-p99-ms", "1000", "--itl-p99-ms", "100", "--json"])
    assert code == 0


def test_vllm_jsonl_knee_cli_subprocess(tmp_path):
    lines = VLLM_JSONL.read_text().splitlines()
    path = tmp_path / "kvcache.jsonl"
    path.write_text("\n".join(lines[6:9]) + "\n")
    planner = Path(sys.executable).with_name("planner")
    done = subprocess.run(
        [str(planner), "knee", str(path), "--ttft-p99-ms", "1000", "--itl-p99-ms", "100", "--json"],
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    payload = json.loads(done.stdout)
    # kvcache deployment: rate inf has TTFT p99 1249.6 ms, so the knee is the 30 req/s step.
    assert payload["knee_step"] == 30.0 and payload["limited_by"] == "ttft_p99"
    # W = mean TTFT + mean TPOT x (mean output - 1) at 30 req/s; concurrency by Little's law.
    w_s = (72.16499725443909 + 23.541025315462797 * (237626 / 900 - 1)) / 1000
    assert payload["knee_concurrency"] == pytest.approx(21.99082799328171 * w_s)


def test_shared_ascend_rate_sweep_with_inf_step(shared_dir):
    steps = read_loadtest(shared_dir / "real-world/vllm_bench/ascend-llama3-8b-sharegpt-qps-sweep")
    assert steps["request_rate_rps"].tolist() == [1.0, 4.0, 16.0, math.inf]
    assert steps.iloc[-1].ttft_p99_ms == pytest.approx(13925.454098824412)
    assert steps["mean_concurrency"].isna().all()  # latency keys only upstream


def test_shared_vllm_0_25_single_result(shared_dir):
    steps = read_loadtest(shared_dir / "real-world/vllm_bench/er0080-opt125m-vllm0.25.1/bench_serve_v0.25.1.json")
    (row,) = steps.itertuples()
    assert row.concurrency == 2 and row.request_rate_rps == math.inf
    assert row.ttft_p99_ms == pytest.approx(734.4049174101428)


def test_shared_all_failed_result_is_refused(shared_dir):
    path = shared_dir / "real-world/vllm_bench/er0080-opt125m-vllm0.25.1/bench_serve_all_requests_failed_v0.25.1.json"
    with pytest.raises(PlannerInputError, match=r"no request completed \(completed=0, failed=8\)"):
        read_loadtest(path)


def test_shared_sweep_summary_list_with_repeated_runs_is_refused_when_asked(shared_dir):
    path = shared_dir / "real-world/vllm_bench/er0080-opt125m-vllm0.25.1/sweep_max_num_seqs=4/summary.json"
    with pytest.raises(PlannerInputError, match=r"duplicated step: concurrency 2 .* keep one run per step"):
        read_loadtest(path, repeats="refuse")


def test_shared_sweep_single_run_reads(shared_dir):
    steps = read_loadtest(
        shared_dir / "real-world/vllm_bench/er0080-opt125m-vllm0.25.1/sweep_max_num_seqs=8/run=0.json"
    )
    assert steps.iloc[0].e2e_p99_ms > 0  # this run asked for e2el


def test_shared_guidellm_reports(shared_dir):
    folder = shared_dir / "real-world/guidellm/danielkorat-xpu-20260302"
    for path in sorted(folder.glob("*.json")):
        (row,) = read_loadtest(path).itertuples()
        assert row.concurrency == 1.0 and row.ttft_p99_ms > 0 and row.itl_p99_ms > 0


def test_shared_guidellm_folder_mixes_models(shared_dir):
    with pytest.raises(PlannerInputError, match="mixed models in one sweep: 'Qwen/Qwen3-30B-A3B'"):
        read_loadtest(shared_dir / "real-world/guidellm/danielkorat-xpu-20260302")


# -------------------------------------------------------- synthetic samples


@pytest.mark.parametrize("model", ["llama-3.1-8b", "qwen2.5-7b"])
def test_samples_agree_across_formats(model):
    canonical = read_loadtest(SAMPLES / f"{model}_canonical.csv")
    for other in (f"{model}_vllm_bench", f"{model}_vllm_bench.jsonl", f"{model}_guidellm_benchmarks.json"):
        steps = read_loadtest(SAMPLES / other)
        np.testing.assert_allclose(steps["concurrency"], canonical["concurrency"])
        np.testing.assert_allclose(steps["ttft_p99_ms"], canonical["ttft_p99_ms"], rtol=1e-3)
        np.testing.assert_allclose(steps["itl_p99_ms"], canonical["itl_p99_ms"], rtol=1e-3)
    per_request = read_loadtest(SAMPLES / f"{model}_per_request.csv")
    np.testing.assert_allclose(per_request["ttft_p99_ms"], canonical["ttft_p99_ms"], rtol=1e-3)
    np.testing.assert_allclose(per_request["e2e_mean_ms"], canonical["e2e_mean_ms"], rtol=1e-3)
    np.testing.assert_allclose(per_request["tpot_mean_ms"], canonical["tpot_mean_ms"], rtol=1e-3)


def test_per_request_aggregation_by_hand(tmp_path):
    path = tmp_path / "requests.csv"
    path.write_text(
        "step,start_s,ttft_ms,latency_ms,input_tokens,output_tokens\n"
        "a,0.0,100,1100,10,11\n"
        "a,0.5,300,2300,10,21\n"
        "b,5.0,200,700,10,6\n"
    )
    steps = read_loadtest(path)
    assert steps.attrs["step_variable"] == "mean_concurrency"  # no configured setting in the file
    assert steps["step_label"].tolist() == ["b", "a"]  # b averages 1.0 in flight, a 1.21
    a = steps.iloc[1]
    assert a.completed_requests == 2
    assert a.tpot_mean_ms == pytest.approx((100 + 100) / 2)  # (1100-100)/10 and (2300-300)/20
    assert a.duration_s == pytest.approx(2.8)  # first start 0.0 to last end 0.5 + 2.3
    assert a.mean_concurrency == pytest.approx((1.1 + 2.3) / 2.8)
    assert math.isnan(a.itl_p99_ms)


# -------------------------------------------------------- validation errors


def _csv(tmp_path, text, name="steps.csv"):
    path = tmp_path / name
    path.write_text(text)
    return path


GOOD_HEADER = "concurrency,ttft_p99_ms,itl_p99_ms\n"


def test_error_missing_step_column(tmp_path):
    with pytest.raises(PlannerInputError, match=r"steps.csv: missing column 'concurrency' or 'request_rate_rps'"):
        read_loadtest(_csv(tmp_path, "ttft_p99_ms,itl_p99_ms\n100,10\n"))


def test_error_missing_latency_column(tmp_path):
    with pytest.raises(PlannerInputError, match=r"missing column 'itl_p99_ms'"):
        read_loadtest(_csv(tmp_path, "concurrency,ttft_p99_ms\n1,100\n"))


def test_error_missing_vllm_key(tmp_path):
    doc = json.loads((VLLM_DIR / "serving_meta-llama-Llama-3.3-70B-Instruct_tp8_pp1_sharegpt_qps_01.json").read_text())
    del doc["p99_itl_ms"]
    path = tmp_path / "run.json"
    path.write_text(json.dumps(doc))
    with pytest.raises(PlannerInputError, match=r"run.json: key 'p99_itl_ms' missing; run vllm bench serve with"):
        read_loadtest(path)


def test_error_missing_guidellm_key(tmp_path):
    doc = json.loads((GUIDELLM_DIR / "concurrent4-benchmarks.json").read_text())
    del doc["benchmarks"][0]["metrics"]["time_to_first_token_ms"]
    path = tmp_path / "benchmarks.json"
    path.write_text(json.dumps(doc))
    with pytest.raises(
        PlannerInputError, match=r"benchmarks\[0\]: key 'metrics.time_to_first_token_ms.successful' missing"
    ):
        read_loadtest(path)


def test_error_unknown_latency_unit(tmp_path):
    with pytest.raises(PlannerInputError, match=r"column 'ttft_p99_min' has unknown unit 'min'"):
        read_loadtest(_csv(tmp_path, "concurrency,ttft_p99_min,itl_p99_ms\n1,1,10\n"))


def test_error_latency_without_unit(tmp_path):
    with pytest.raises(PlannerInputError, match=r"column 'itl_p99' has unknown unit '\(none\)'"):
        read_loadtest(_csv(tmp_path, "concurrency,ttft_p99_ms,itl_p99\n1,100,10\n"))


def test_error_unknown_kv_unit(tmp_path):
    with pytest.raises(PlannerInputError, match=r"column 'kv_usage_ratio' has unknown unit"):
        read_loadtest(_csv(tmp_path, GOOD_HEADER.strip() + ",kv_usage_ratio\n1,100,10,0.5\n"))


def test_error_unknown_per_request_unit(tmp_path):
    path = _csv(tmp_path, "step,start_s,ttft_ms,latency_ms,latency_min,input_tokens,output_tokens\na,0,1,2,3,4,5\n")
    with pytest.raises(PlannerInputError, match=r"column 'latency_min' has an unknown unit"):
        read_loadtest(path)


def test_units_are_converted(tmp_path):
    steps = read_loadtest(_csv(tmp_path, "concurrency,ttft_p99_s,itl_p99_us,kv_usage_pct\n1,0.25,20000,42\n"))
    assert steps.iloc[0].ttft_p99_ms == 250.0 and steps.iloc[0].itl_p99_ms == 20.0
    assert steps.iloc[0].kv_usage_frac == pytest.approx(0.42)


def test_error_nan_value(tmp_path):
    with pytest.raises(PlannerInputError, match=r"steps.csv, row 3: column 'ttft_p99_ms' is empty or NaN"):
        read_loadtest(_csv(tmp_path, GOOD_HEADER + "1,100,10\n2,NaN,12\n"))


def test_error_negative_value(tmp_path):
    with pytest.raises(PlannerInputError, match=r"steps.csv, row 2: column 'itl_p99_ms' is negative \(-3\)"):
        read_loadtest(_csv(tmp_path, GOOD_HEADER + "1,100,-3\n"))


def test_error_negative_value_in_json(tmp_path):
    doc = json.loads((VLLM_DIR / "serving_meta-llama-Llama-3.3-70B-Instruct_tp8_pp1_sharegpt_qps_01.json").read_text())
    doc["mean_ttft_ms"] = -1.0
    path = tmp_path / "run.json"
    path.write_text(json.dumps(doc))
    with pytest.raises(PlannerInputError, match=r"key 'mean_ttft_ms' must be a finite number >= 0, got -1.0"):
        read_loadtest(path)


def test_error_non_monotonic_steps(tmp_path):
    with pytest.raises(PlannerInputError, match=r"row 3: steps must increase; concurrency 4 follows 8 on row 2"):
        read_loadtest(_csv(tmp_path, GOOD_HEADER + "8,100,10\n4,120,12\n"))


def test_error_duplicated_steps_in_csv(tmp_path):
    with pytest.raises(PlannerInputError, match=r"row 3: duplicated step \(concurrency 8 also on row 2\)"):
        read_loadtest(_csv(tmp_path, GOOD_HEADER + "8,100,10\n8,120,12\n"))


def test_one_result_in_two_files_is_counted_once(tmp_path):
    shutil.copy(GUIDELLM_DIR / "concurrent4-benchmarks.json", tmp_path / "a.json")
    shutil.copy(GUIDELLM_DIR / "concurrent4-benchmarks.json", tmp_path / "b.json")
    steps = read_loadtest(tmp_path)
    assert len(steps) == 1 and steps.iloc[0].source == "a.json"
    assert steps.attrs["dropped_duplicates"] == [
        "b.json (concurrent@4) repeats a.json (concurrent@4), so it is counted once."
    ]
    with pytest.raises(PlannerInputError, match=r"repeats must be one of worst, mean, refuse, got 'max'"):
        read_loadtest(tmp_path, repeats="max")


def test_error_mixed_models(tmp_path):
    a = _csv(tmp_path, "model,concurrency,ttft_p99_ms,itl_p99_ms\nm1,1,100,10\n", "a.csv")
    b = _csv(tmp_path, "model,concurrency,ttft_p99_ms,itl_p99_ms\nm2,2,100,10\n", "b.csv")
    with pytest.raises(PlannerInputError, match=r"mixed models in one sweep: 'm1' in a.csv; 'm2' in b.csv"):
        read_loadtest([a, b])


def test_error_kv_above_one(tmp_path):
    with pytest.raises(PlannerInputError, match=r"kv_usage_frac 42 is above 1; a percentage belongs in kv_usage_pct"):
        read_loadtest(_csv(tmp_path, GOOD_HEADER.strip() + ",kv_usage_frac\n1,100,10,42\n"))


def test_error_not_a_number(tmp_path):
    with pytest.raises(PlannerInputError, match=r"row 2: column 'concurrency' must be a number, got 'eight'"):
        read_loadtest(_csv(tmp_path, GOOD_HEADER + "eight,100,10\n"))


def test_error_bad_request_rate(tmp_path):
    doc = json.loads((VLLM_DIR / "serving_meta-llama-Llama-3.3-70B-Instruct_tp8_pp1_sharegpt_qps_01.json").read_text())
    doc["request_rate"] = "fast"
    path = tmp_path / "run.json"
    path.write_text(json.dumps(doc))
    with pytest.raises(PlannerInputError, match=r"key 'request_rate' must be a number or \"inf\", got 'fast'"):
        read_loadtest(path)


def test_error_not_json(tmp_path):
    path = tmp_path / "run.json"
    path.write_text("{not json")
    with pytest.raises(PlannerInputError, match=r"run.json: not JSON or JSON lines"):
        read_loadtest(path)


def test_error_unknown_json(tmp_path):
    path = tmp_path / "run.json"
    path.write_text(json.dumps({"hello": 1}))
    with pytest.raises(PlannerInputError, match=r"not a vllm bench serve result"):
        read_loadtest(path)


def test_error_unknown_guidellm_strategy(tmp_path):
    doc = json.loads((GUIDELLM_DIR / "concurrent4-benchmarks.json").read_text())
    doc["benchmarks"][0]["config"]["strategy"]["type_"] = "burst"
    path = tmp_path / "benchmarks.json"
    path.write_text(json.dumps(doc))
    with pytest.raises(PlannerInputError, match=r"strategy type 'burst' unknown"):
        read_loadtest(path)


def test_error_empty_directory(tmp_path):
    with pytest.raises(PlannerInputError, match=r"directory holds no .json, .jsonl or .csv result files"):
        read_loadtest(tmp_path)


def test_error_per_request_latency_shorter_than_ttft(tmp_path):
    path = _csv(tmp_path, "step,start_s,ttft_ms,latency_ms,input_tokens,output_tokens\na,0,500,100,4,5\n")
    with pytest.raises(PlannerInputError, match=r"row 2: latency \(100 ms\) is shorter than TTFT \(500 ms\)"):
        read_loadtest(path)


def test_error_per_request_missing_column(tmp_path):
    path = _csv(tmp_path, "step,start_s,ttft_ms,input_tokens,output_tokens\na,0,500,4,5\n")
    with pytest.raises(PlannerInputError, match=r"missing column 'latency_ms' \(per-request CSV"):
        read_loadtest(path)


def test_error_jsonl_bad_line(tmp_path):
    good = (VLLM_DIR / "serving_meta-llama-Llama-3.3-70B-Instruct_tp8_pp1_sharegpt_qps_01.json").read_text()
    path = tmp_path / "runs.jsonl"
    path.write_text(good + "\n{broken\n")
    with pytest.raises(PlannerInputError, match=r"runs.jsonl, line 2: not valid JSON"):
        read_loadtest(path)


def test_every_column_is_documented_in_data_readme():
    readme = (HERE.parent / "data" / "README.md").read_text()
    for column in COLUMNS:
        assert f"| `{column}` |" in readme, column


# ------------------------------------------------------------ repeated runs

ER0080 = "real-world/vllm_bench/er0080-opt125m-vllm0.25.1"


@pytest.mark.parametrize("how", ["worst", "mean"])
def test_shared_repeated_runs_are_combined_and_said(shared_dir, how):
    folder = shared_dir / ER0080 / "sweep_max_num_seqs=4"
    runs = [json.loads((folder / f"run={i}.json").read_text()) for i in (0, 1)]
    steps = read_loadtest(folder, repeats=how)
    (row,) = steps.itertuples()
    # summary.json lists the same two runs: each counted once.
    assert len(steps.attrs["dropped_duplicates"]) == 2 and "summary.json" in steps.attrs["dropped_duplicates"][0]
    assert steps.attrs["repeats"] == how and steps.attrs["combined_steps"][0].startswith(
        "At concurrency 2, 2 runs were combined: run=0.json"
    )
    p99s = [r["p99_ttft_ms"] for r in runs]  # 762 ms (a cold first run) and 58 ms
    assert row.ttft_p99_ms == pytest.approx(max(p99s) if how == "worst" else sum(p99s) / 2)
    # Means are pooled exactly: weighted by completed requests, rates by measured time.
    assert row.completed_requests == 16
    assert row.ttft_mean_ms == pytest.approx(sum(r["mean_ttft_ms"] * r["completed"] for r in runs) / 16)
    assert row.request_throughput_rps == pytest.approx(16 / sum(r["duration"] for r in runs))
    assert row.run_settings == "max_num_seqs=4"


def test_shared_runs_with_different_server_settings_are_not_repeats(shared_dir):
    folders = [shared_dir / ER0080 / f"sweep_max_num_seqs={n}" for n in (4, 8)]
    with pytest.raises(PlannerInputError, match=r"concurrency 2 appears in results that differ in max_num_seqs"):
        read_loadtest(folders)


@given(st.lists(st.lists(st.floats(1, 1000), min_size=1, max_size=60), min_size=2, max_size=5))
def test_worst_run_p99_is_never_below_the_pooled_p99(samples):
    # With the inverted-CDF percentile the bound is exact: F(max q_i) >= 0.99 over the union.
    per_run = [np.percentile(s, 99, method="inverted_cdf") for s in samples]
    pooled = np.percentile(np.concatenate(samples), 99, method="inverted_cdf")
    assert pooled <= max(per_run)


def test_the_input_sentence_follows_the_input(shared_dir):
    from planner.readers.loadtest import describe_input

    sample = HERE.parent / "data" / "loadtests" / "llama-3.1-8b_canonical.csv"
    assert describe_input(sample, read_loadtest(sample)).startswith("The input is a synthetic sweep bundled")
    real = shared_dir / "real-world/vllm_bench/aurotripathy-llama3.1-8b-fp8-l40s-concurrency-sweep"
    assert describe_input(real, read_loadtest(real)) == (
        "The input is aurotripathy-llama3.1-8b-fp8-l40s-concurrency-sweep: 8 steps of "
        "RedHatAI/Meta-Llama-3.1-8B-Instruct-FP8 by concurrency, written by vllm bench serve."
    )
