"""planner kv: the JSON contract, the three memory sources, and exit 2 on bad input."""

import json
import shutil
import subprocess
import sys

import pytest

from planner.cli import main
from tests.conftest import DATA_DIR, TEST_DATA_DIR

QWEN_AWQ = str(DATA_DIR / "models" / "qwen2.5-7b-instruct-awq.json")
LOGS = TEST_DATA_DIR / "vllm_logs"


def run_json(capsys, *argv):
    status = main(["kv", *argv, "--json"])
    captured = capsys.readouterr()
    return status, json.loads(captured.out) if status == 0 else captured.err


def test_w29_to_w31_through_the_cli(capsys):
    status, out = run_json(
        capsys,
        "--config",
        QWEN_AWQ,
        "--available-kv-gib",
        "13.76",
        "--max-model-len",
        "32768",
        "--tokens-per-request",
        "1000",
        "--vllm-version",
        "0.11.0",
    )
    assert status == 0
    assert out["bytes_per_token"] == 57_344  # W29
    assert abs(out["kv_tokens"] - 257_584) <= 2 * 16 * 3  # W30, within the GiB rounding
    assert round(out["concurrent_requests"]) == 258  # W31
    assert out["max_concurrency"] == pytest.approx(out["num_blocks"] / 2048)
    assert out["available_kv_source"] == "argument" and out["is_estimate"] is False


def test_contract_keys_and_optional_fields(capsys):
    status, out = run_json(capsys, "--config", QWEN_AWQ, "--available-kv-gib", "10")
    assert status == 0
    assert {"bytes_per_token", "kv_tokens", "max_concurrency"} <= set(out)
    assert "concurrent_requests" not in out
    assert out["max_model_len"] == 32768 and out["max_model_len_source"].startswith("config")


def test_vllm_log_source_fills_settings_and_checks_the_log(capsys):
    status, out = run_json(
        capsys,
        "--config",
        str(DATA_DIR / "models" / "deepseek-v2-lite.json"),
        "--vllm-log",
        str(LOGS / "vllm-20665-deepseek-v2-lite-pp2-tp2.log"),
        "--tp",
        "2",
        "--pp",
        "2",
        "--max-model-len",
        "1024",
        "--vllm-version",
        "0.9.2",
    )
    assert status == 0
    assert out["available_kv_source"] == "vllm log" and out["available_kv_gib"] == 11.33
    assert out["log_consistent"] is True and len(out["log_check"]) == 4
    low, high = out["kv_tokens_range"]
    assert low <= out["kv_tokens"] <= high


def test_scheduler_budget_comes_from_the_log_unless_given(capsys):
    gemma = str(DATA_DIR / "models" / "gemma-3-4b-it.json")
    log = str(LOGS / "orbit-ai-gemma-3-4b-rocm.log")
    status, out = run_json(capsys, "--config", gemma, "--vllm-log", log)
    assert status == 0 and out["max_num_batched_tokens"] == 8192
    assert out["log_consistent"] is True
    status, out = run_json(capsys, "--config", gemma, "--vllm-log", log, "--max-num-batched-tokens", "2048")
    assert status == 0 and out["max_num_batched_tokens"] == 2048
    assert out["log_consistent"] is False


def test_gpu_estimate_is_labelled(capsys):
    status, out = run_json(
        capsys, "--config", QWEN_AWQ, "--gpu", "A10", "--weights-gib", "5.2", "--gpu-memory-utilization", "0.9"
    )
    assert status == 0 and out["is_estimate"] is True
    assert out["available_kv_source"] == "estimate"
    assert out["estimate"]["typical_error_gib"] == 1.5 and "estimate" in out["estimate"]["note"]


def test_readable_table(capsys):
    assert main(["kv", "--config", QWEN_AWQ, "--available-kv-gib", "13.76", "--tokens-per-request", "1000"]) == 0
    out = capsys.readouterr().out
    assert "GPU KV cache size" in out and "57,344" in out


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--config", "missing.json", "--available-kv-gib", "10"], "no such file"),
        (["--config", QWEN_AWQ, "--available-kv-gib", "-3"], "> 0"),
        (["--config", QWEN_AWQ, "--available-kv-gib", "10", "--tp", "8"], "tensor_parallel_size 8"),
        (["--config", QWEN_AWQ, "--available-kv-gib", "10", "--pp", "40"], "at least one layer"),
        (["--config", QWEN_AWQ, "--gpu", "A11", "--weights-gib", "5"], "unknown GPU"),
        (
            ["--config", str(DATA_DIR / "models" / "gpt-oss-20b.json"), "--gpu", "A10"],
            "pass --weights-gib or --safetensors-index",
        ),
        (["--config", QWEN_AWQ, "--gpu", "A10", "--weights-gib", "40"], "no memory left"),
        (
            ["--config", QWEN_AWQ, "--vllm-log", str(LOGS / "vllm-13882-qwen2.5-7b-negative-memory.log")],
            "no memory left",
        ),
        (["--config", QWEN_AWQ, "--available-kv-gib", "10", "--vllm-version", "latest"], "vllm_version"),
        (["--config", QWEN_AWQ, "--available-kv-gib", "10", "--tokens-per-request", "0"], "> 0"),
    ],
)
def test_bad_input_exits_2_with_one_line(capsys, argv, message):
    status = main(["kv", *argv])
    err = capsys.readouterr().err
    assert status == 2
    assert message in err and "Traceback" not in err and err.count("\n") == 1


def test_unsupported_architecture_exits_2(capsys, tmp_path):
    config = tmp_path / "config.json"
    config.write_text(json.dumps({"model_type": "jamba", "num_hidden_layers": 32}))
    assert main(["kv", "--config", str(config), "--available-kv-gib", "10"]) == 2
    assert "Mamba" in capsys.readouterr().err


def test_usage_errors_exit_2(capsys):
    with pytest.raises(SystemExit) as exit_info:
        main(["kv", "--config", QWEN_AWQ])  # no memory source
    assert exit_info.value.code == 2
    with pytest.raises(SystemExit) as exit_info:
        main(["kv", "--config", QWEN_AWQ, "--available-kv-gib", "1", "--gpu", "A10"])
    assert exit_info.value.code == 2


def test_installed_console_script():
    script = shutil.which("planner") or str(__import__("pathlib").Path(sys.executable).parent / "planner")
    done = subprocess.run(
        [script, "kv", "--config", QWEN_AWQ, "--available-kv-gib", "13.76", "--tokens-per-request", "1000", "--json"],
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["bytes_per_token"] == 57_344
    bad = subprocess.run(
        [script, "kv", "--config", QWEN_AWQ, "--available-kv-gib", "0"], capture_output=True, text=True, check=False
    )
    assert bad.returncode == 2 and "Traceback" not in bad.stderr


def test_gpu_estimate_counts_weights_from_config_when_no_size_is_given(capsys):
    from planner.cli import main as cli_main

    status = cli_main(["kv", "--config", QWEN_AWQ, "--gpu", "A10", "--max-model-len", "32768", "--json"])
    out = json.loads(capsys.readouterr().out)
    assert status == 0 and out["is_estimate"] is True
    assert "7.62 B parameters from config.json" in out["estimate"]["weights_source"]
    # vLLM logged 13.76 GiB for this model on an A10 (W30); the estimate is within its stated error.
    assert abs(out["available_kv_gib"] - 13.76) <= out["estimate"]["typical_error_gib"]


def test_deepseek_log_with_its_command_line_gives_tp2_pp2(capsys, tmp_path):
    log = tmp_path / "deepseek.log"
    log.write_text(
        "$ vllm serve deepseek-ai/DeepSeek-V2-Lite --tensor-parallel-size=2 "
        "--pipeline-parallel-size=2 --max-model-len 1024\n"
        + (LOGS / "vllm-20665-deepseek-v2-lite-pp2-tp2.log").read_text()
    )
    status, out = run_json(
        capsys,
        "--config",
        str(DATA_DIR / "models" / "deepseek-v2-lite.json"),
        "--vllm-log",
        str(log),
        "--vllm-version",
        "0.9.2",
    )
    assert status == 0
    assert (out["tensor_parallel_size"], out["pipeline_parallel_size"]) == (2, 2)
    assert out["settings_source"]["tensor_parallel_size"] == "vllm log"
    assert out["log_consistent"] is True and out["log_mismatch"] == []


def test_deepseek_log_without_sizes_exits_2_naming_them(capsys):
    status = main(
        [
            "kv",
            "--config",
            str(DATA_DIR / "models" / "deepseek-v2-lite.json"),
            "--vllm-log",
            str(LOGS / "vllm-20665-deepseek-v2-lite-pp2-tp2.log"),
        ]
    )
    err = capsys.readouterr().err
    assert status == 2 and err.count("\n") == 1
    assert "4 workers" in err and "tensor_parallel_size 1 (default)" in err


def test_disagreement_names_the_field_and_both_values(capsys):
    assert (
        main(
            [
                "kv",
                "--config",
                str(DATA_DIR / "models" / "llama-3.1-8b-instruct.json"),
                "--vllm-log",
                str(LOGS / "lmcache-1739-qwen3-14b.log"),
            ]
        )
        == 0
    )
    out = capsys.readouterr().out
    assert "log consistent with model   NO" in out
    assert "the log printed 42,656, the model predicts" in out
    assert "num_hidden_layers: llama-3.1-8b-instruct.json says 32, the log implies 40" in out
