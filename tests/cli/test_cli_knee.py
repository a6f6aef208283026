"""Tests for ``planner knee`` and ``planner metrics``: contract keys, exit codes, no tracebacks."""

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from planner.cli import main
from tests.conftest import REPO_ROOT

ROOT = REPO_ROOT
SAMPLES = ROOT / "data" / "loadtests"


def test_knee_json_contract(capsys):
    code = main(
        [
            "knee",
            str(SAMPLES / "llama-3.1-8b_canonical.csv"),
            "--ttft-p99-ms",
            "2000",
            "--itl-p99-ms",
            "50",
            "--warmup-s",
            "120",
            "--growth-frac",
            "0.25",
            "--wait-budget-s",
            "5",
            "--json",
        ]
    )
    assert code == 0
    payload = json.loads(capsys.readouterr().out)
    assert payload["knee_concurrency"] == 64
    assert payload["concurrency_target"] == pytest.approx(64 / 1.25)
    assert payload["kv_usage_target"] == pytest.approx(0.8533 * 0.95)
    assert payload["drain_rate_rps"] > 0 and payload["queue_threshold_requests"] == pytest.approx(
        5 * payload["drain_rate_rps"]
    )
    assert payload["step_time_fit_tpot"]["r_squared"] > 0.99


def test_knee_json_without_kv_omits_kv_target(capsys):
    assert (
        main(
            ["knee", str(SAMPLES / "llama-3.1-8b_vllm_bench"), "--ttft-p99-ms", "2000", "--itl-p99-ms", "50", "--json"]
        )
        == 0
    )
    payload = json.loads(capsys.readouterr().out)
    assert "kv_usage_target" not in payload and payload["knee_concurrency"] == 64


def test_knee_several_files_form_one_sweep(capsys):
    folder = ROOT / "tests/data/loadtests/guidellm_v05_qwen3-0.6b_concurrency"
    files = [str(p) for p in sorted(folder.glob("*.json"))]
    assert main(["knee", *files, "--ttft-p99-ms", "1000", "--itl-p99-ms", "50", "--json"]) == 0
    payload = json.loads(capsys.readouterr().out)
    assert payload["steps"] == 2 and payload["knee_is_lower_bound"] and payload["knee_concurrency"] == 16


def test_knee_table(capsys):
    assert main(["knee", str(SAMPLES / "qwen2.5-7b_canonical.csv"), "--ttft-p99-ms", "2000", "--itl-p99-ms", "50"]) == 0
    out = capsys.readouterr().out
    assert "knee concurrency [requests]" in out and "itl_p99+preemptions" in out and "R^2" in out


@pytest.mark.parametrize(
    "content, message",
    [
        ("concurrency,ttft_p99_ms\n1,10\n", "missing column 'itl_p99_ms'"),
        ("concurrency,ttft_p99_min,itl_p99_ms\n1,10,1\n", "unknown unit 'min'"),
        ("concurrency,ttft_p99_ms,itl_p99_ms\n1,nan,1\n", "is empty or NaN"),
        ("concurrency,ttft_p99_ms,itl_p99_ms\n1,-5,1\n", "is negative"),
        ("concurrency,ttft_p99_ms,itl_p99_ms\n4,10,1\n2,10,1\n", "steps must increase"),
        ("concurrency,ttft_p99_ms,itl_p99_ms\n4,10,1\n4,10,1\n", "duplicated step"),
        ("model,concurrency,ttft_p99_ms,itl_p99_ms\na,1,10,1\nb,2,10,1\n", "mixed models"),
    ],
)
def test_knee_bad_input_exits_2_with_one_line(tmp_path, capsys, content, message):
    path = tmp_path / "steps.csv"
    path.write_text(content)
    assert main(["knee", str(path), "--ttft-p99-ms", "2000", "--itl-p99-ms", "50"]) == 2
    err = capsys.readouterr().err
    assert message in err and "Traceback" not in err and len(err.strip().splitlines()) == 1


def test_knee_bad_option_exits_2(capsys):
    assert (
        main(
            [
                "knee",
                str(SAMPLES / "llama-3.1-8b_canonical.csv"),
                "--ttft-p99-ms",
                "2000",
                "--itl-p99-ms",
                "50",
                "--warmup-s",
                "-1",
            ]
        )
        == 2
    )
    assert "--warmup-s must be" in capsys.readouterr().err
    with pytest.raises(SystemExit) as exit_info:
        main(["knee", "x.csv", "--itl-p99-ms", "50"])  # --ttft-p99-ms missing: argparse usage error
    assert exit_info.value.code == 2


def test_metrics_json(capsys, shared_dir):
    path = shared_dir / "real-world/metrics/vllm-v1-qwen1.5-0.5b-chat-idle.txt"
    assert main(["metrics", str(path), "--json"]) == 0
    payload = json.loads(capsys.readouterr().out)
    assert payload["signals"]["kv_usage"]["status"] == "current"
    assert payload["deprecated_present"] == ["vllm:time_per_output_token_seconds"]
    assert "kv_usage_fleet_sum" in payload["queries"]


def test_metrics_table_and_bad_scrape(tmp_path, capsys):
    assert main(["metrics", str(ROOT / "data/metrics/vllm-v0-style-loaded.txt")]) == 0
    assert "Deprecated names exported" in capsys.readouterr().out
    bad = tmp_path / "scrape.txt"
    bad.write_text("hello world\n")
    assert main(["metrics", str(bad)]) == 2
    assert "planner metrics: error:" in capsys.readouterr().err


def test_console_script_end_to_end(tmp_path):
    planner = shutil.which("planner") or str(Path(sys.executable).parent / "planner")
    done = subprocess.run(
        [
            planner,
            "knee",
            str(SAMPLES / "qwen2.5-7b_guidellm_benchmarks.json"),
            "--ttft-p99-ms",
            "2000",
            "--itl-p99-ms",
            "50",
            "--json",
        ],
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["knee_concurrency"] == 32
    missing = subprocess.run(
        [planner, "knee", str(tmp_path / "none.json"), "--ttft-p99-ms", "1", "--itl-p99-ms", "1"],
        capture_output=True,
        text=True,
        check=False,
    )
    assert missing.returncode == 2 and "Traceback" not in missing.stderr


def test_implausible_step_time_fit_is_flagged_on_a_real_multi_turn_sweep(capsys):
    import json as _json

    from planner.cli import main as cli_main
    from tests.conftest import TEST_DATA_DIR

    sweep = TEST_DATA_DIR / "loadtests" / "guidellm_v07_qwen3.8-27b-fp8_multiturn_concurrency"
    assert cli_main(["knee", str(sweep), "--ttft-p99-ms", "2500", "--itl-p99-ms", "50", "--json"]) == 0
    out = _json.loads(capsys.readouterr().out)
    assert out["step_time_fit_tpot"]["plausible"] is False
    assert cli_main(["knee", str(sweep), "--ttft-p99-ms", "2500", "--itl-p99-ms", "50"]) == 0
    assert "does not describe this sweep" in capsys.readouterr().out


# ------------------------------------------------ findings on real tool output

ASCEND = "real-world/vllm_bench/ascend-llama3-8b-sharegpt-qps-sweep"
ER0080 = "real-world/vllm_bench/er0080-opt125m-vllm0.25.1"


def test_knee_no_passing_step_is_a_finding_exit_0(capsys, shared_dir):
    path = str(shared_dir / ASCEND)
    assert main(["knee", path, "--ttft-p99-ms", "2000", "--itl-p99-ms", "50", "--json"]) == 0
    payload = json.loads(capsys.readouterr().out)
    assert payload["knee_found"] is False and payload["knee_status"] == "no passing step"
    assert payload["knee_concurrency"] is None and payload["concurrency_target"] is None
    (miss,) = payload["lightest_misses"]
    assert miss["metric"] == "itl_p99" and miss["objective"] == 50 and miss["excess"] == pytest.approx(69.94, abs=0.01)
    assert payload["finding"].startswith(
        "No step meets the objectives: the lightest step (1 request/s) already misses ITL p99 by 70 ms"
    )
    assert main(["knee", path, "--ttft-p99-ms", "2000", "--itl-p99-ms", "50"]) == 0
    out = capsys.readouterr().out
    assert out.splitlines()[0] == payload["finding"] and "lightest step misses" in out


def test_knee_short_sweep_withholds_targets_and_prints_the_sweep_to_run(capsys, shared_dir):
    path = str(shared_dir / ER0080 / "bench_serve_v0.25.1.json")
    assert main(["knee", path, "--ttft-p99-ms", "2000", "--itl-p99-ms", "50", "--wait-budget-s", "5", "--json"]) == 0
    payload = json.loads(capsys.readouterr().out)
    assert payload["sweep_too_short"] and payload["min_sweep_steps"] == 3
    assert payload["concurrency_target"] is None and payload["queue_threshold_requests"] is None
    assert payload["knee_concurrency"] == 2  # the measurement stays
    assert "--max-concurrency $c" in payload["sweep_commands"]["vllm bench serve"]
    assert "--profile concurrent" in payload["sweep_commands"]["guidellm"]
    assert main(["knee", path, "--ttft-p99-ms", "2000", "--itl-p99-ms", "50"]) == 0
    out = capsys.readouterr().out
    assert "withheld (sweep too short)" in out and "A knee needs at least 3 steps" in out
    assert "for c in 1 2 4 8 16 32 64 128; do" in out and "guidellm benchmark run" in out


@pytest.mark.parametrize("how", ["worst", "mean"])
def test_knee_repeated_runs_say_how_they_were_combined(capsys, shared_dir, how):
    path = str(shared_dir / ER0080 / "sweep_max_num_seqs=4")
    assert main(["knee", path, "--ttft-p99-ms", "2000", "--itl-p99-ms", "50", "--repeats", how, "--json"]) == 0
    payload = json.loads(capsys.readouterr().out)
    assert payload["repeats"] == how and payload["steps"] == 1
    assert any(f"With repeats '{how}'" in note for note in payload["repeats_notes"])
    assert sum("counted once" in note for note in payload["repeats_notes"]) == 2
    assert main(["knee", path, "--ttft-p99-ms", "2000", "--itl-p99-ms", "50", "--repeats", "refuse"]) == 2
    assert "duplicated step: concurrency 2" in capsys.readouterr().err


def test_knee_rate_sweep_with_mean_output_tokens(capsys, shared_dir):
    path = str(shared_dir / ASCEND)
    args = ["knee", path, "--ttft-p99-ms", "1000", "--itl-p99-ms", "300", "--wait-budget-s", "5", "--json"]
    assert main(args) == 0
    assert json.loads(capsys.readouterr().out)["knee_concurrency"] is None
    assert main([*args, "--mean-output-tokens", "200"]) == 0
    payload = json.loads(capsys.readouterr().out)
    assert payload["knee_concurrency"] == pytest.approx(70.53, abs=0.01)
    assert payload["concurrency_target"] == pytest.approx(payload["knee_concurrency"] / 1.2)
    assert payload["drain_rate_rps"] == pytest.approx(4.0) and payload["queue_threshold_requests"] == pytest.approx(20)
    assert "Little's law" in payload["concurrency_source"]
    assert main([*args, "--mean-output-tokens", "-3"]) == 2
    assert "--mean-output-tokens must be a finite number > 0" in capsys.readouterr().err


def test_knee_choices_match_the_library():
    from planner.cli.knee import _REPEATS
    from planner.readers.loadtest import REPEATS

    assert _REPEATS == tuple(REPEATS)
