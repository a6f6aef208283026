"""One replica's KV capacity from every input: settings' sources, log checks, explanations."""

import json

import pytest

from planner.capacity.kv_cache import GIB_BYTES, ServingSpec, kv_capacity
from planner.capacity.replica_kv import explain_log_mismatch, replica_kv
from planner.errors import PlannerInputError
from planner.readers.model_config import read_model_config
from planner.readers.vllm_log import parse_vllm_log, read_vllm_log
from tests.conftest import DATA_DIR, TEST_DATA_DIR

LOGS = TEST_DATA_DIR / "vllm_logs"
MODELS = DATA_DIR / "models"


def test_settings_come_from_the_argument_then_the_log_then_the_default():
    gemma = read_model_config(MODELS / "gemma-3-4b-it.json")
    log = read_vllm_log(LOGS / "orbit-ai-gemma-3-4b-rocm.log")
    replica = replica_kv(gemma, log=log)
    assert replica.serving.max_num_batched_tokens == 8192
    assert replica.source("max_num_batched_tokens") == "vllm log"
    assert replica.source("block_size") == "default"
    assert replica.log_consistent is True and replica.log_mismatch == ()
    given = replica_kv(gemma, log=log, max_num_batched_tokens=4096)
    assert given.serving.max_num_batched_tokens == 4096
    assert given.source("max_num_batched_tokens") == "argument"
    # Without a log the memory must come from somewhere.
    with pytest.raises(PlannerInputError, match="no KV memory"):
        replica_kv(gemma)


def test_argument_memory_equals_kv_capacity():
    qwen = read_model_config(MODELS / "qwen2.5-7b-instruct-awq.json")
    replica = replica_kv(qwen, available_kv_gib=13.76, vllm_version="0.11.0", tokens_per_request=1000.0)
    direct = kv_capacity(qwen, ServingSpec(max_model_len=32768, vllm_version="0.11.0"), 13.76 * GIB_BYTES)
    assert replica.capacity == direct
    assert replica.log_consistent is None and replica.memory_source == "argument"
    assert round(replica.concurrent_requests) == 258


def test_deepseek_workers_need_parallel_sizes():
    deepseek = read_model_config(MODELS / "deepseek-v2-lite.json")
    log = read_vllm_log(LOGS / "vllm-20665-deepseek-v2-lite-pp2-tp2.log")
    with pytest.raises(PlannerInputError, match=r"4 workers.*tensor_parallel_size 1"):
        replica_kv(deepseek, log=log)
    given = replica_kv(deepseek, log=log, tensor_parallel_size=2, pipeline_parallel_size=2, vllm_version="0.9.2")
    assert given.log_consistent is True
    text = (
        "$ vllm serve deepseek-ai/DeepSeek-V2-Lite --tensor-parallel-size=2 "
        "--pipeline-parallel-size=2 --max-model-len 1024\n"
        + (LOGS / "vllm-20665-deepseek-v2-lite-pp2-tp2.log").read_text()
    )
    read = replica_kv(deepseek, log=parse_vllm_log(text, "log"), vllm_version="0.9.2")
    assert (read.serving.tensor_parallel_size, read.serving.pipeline_parallel_size) == (2, 2)
    assert read.source("tensor_parallel_size") == "vllm log"
    assert read.capacity == given.capacity
    assert read.available_kv_gib_per_stage == (12.13, 11.33)


def test_worker_labels_fill_unnamed_parallel_sizes():
    llama = read_model_config(MODELS / "llama-3.1-8b-instruct.json")
    log = parse_vllm_log(
        "(Worker_PP1_TP0 pid=5) INFO Available KV cache memory: 10.00 GiB\n"
        "(Worker_PP0_TP0 pid=2) INFO Available KV cache memory: 11.00 GiB\n"
    )
    replica = replica_kv(llama, log=log)
    assert replica.serving.pipeline_parallel_size == 2
    assert replica.source("pipeline_parallel_size") == "vllm log worker labels"
    with pytest.raises(PlannerInputError, match="at least 2 GPUs"):
        replica_kv(llama, log=log, pipeline_parallel_size=1)


def test_mismatch_names_the_config_field_and_both_values(tmp_path):
    config = json.loads((MODELS / "qwen3-14b.json").read_text())
    assert config["num_key_value_heads"] == 8
    config["num_key_value_heads"] = 4
    (tmp_path / "config.json").write_text(json.dumps(config))
    wrong = read_model_config(tmp_path / "config.json")
    replica = replica_kv(wrong, log=read_vllm_log(LOGS / "lmcache-1739-qwen3-14b.log"), max_model_len=32768)
    assert replica.log_consistent is False
    assert replica.log_mismatch[0].startswith("GPU KV cache size: the log printed 42,656, the model predicts")
    assert "num_key_value_heads: config.json says 4, the log implies 8" in replica.log_mismatch


def test_mismatch_names_a_setting_and_its_source():
    qwen = read_model_config(MODELS / "qwen3-30b-a3b.json")
    log = read_vllm_log(LOGS / "vllm-25350-qwen3-30b-a3b-fp8-kv.log")
    serving = ServingSpec(max_model_len=100_000, vllm_version="0.10.2")
    lines = explain_log_mismatch(log, qwen, serving, {"kv_cache_dtype": "argument"})
    assert "kv_cache_dtype: the planner used auto (argument), the log implies fp8" in lines
    # The wrong model entirely: the layer count that explains the log is Qwen3-14B's.
    llama = read_model_config(MODELS / "llama-3.1-8b-instruct.json")
    lines = replica_kv(llama, log=read_vllm_log(LOGS / "lmcache-1739-qwen3-14b.log")).log_mismatch
    assert "num_hidden_layers: llama-3.1-8b-instruct.json says 32, the log implies 40" in lines


def test_settings_the_log_states_are_not_second_guessed():
    gemma = read_model_config(MODELS / "gemma-3-4b-it.json")
    log = read_vllm_log(LOGS / "orbit-ai-gemma-3-4b-rocm.log")
    lines = replica_kv(gemma, log=log, max_num_batched_tokens=2048).log_mismatch
    assert any(
        line.startswith("max_num_batched_tokens: the planner used 2048 (argument), the log implies 8192")
        for line in lines
    )
    assert not any(line.startswith(("tensor_parallel_size", "vllm_version")) for line in lines)


def test_estimate_from_the_gpu_is_labelled():
    qwen = read_model_config(MODELS / "qwen2.5-7b-instruct-awq.json")
    replica = replica_kv(qwen, gpu_memory_gib=22.07, weights_gib=5.2)
    assert replica.memory_source == "estimate" and replica.estimate.is_estimate
    assert replica.as_dict()["is_estimate"] is True


def test_gemma_3_27b_concurrency_follows_the_scheduler_budget():
    # A Gemma-3-27B start-up log on ROCm (vLLM 0.11.0rc2, max_num_batched_tokens 8192)
    # printed 109.86 GiB, 205,696 tokens and 50.05x at 4,096 tokens. The budget only moves
    # the sliding layers' pages: at vLLM's small-GPU default of 2048 it would be 63.65x.
    gemma = read_model_config(MODELS / "gemma-3-27b-it.json")
    args = {"available_kv_gib": 109.86, "max_model_len": 4096, "vllm_version": "0.11.0"}
    served = replica_kv(gemma, max_num_batched_tokens=8192, **args)
    assert served.capacity.kv_tokens == 205_696
    assert f"{served.capacity.max_concurrency:.2f}" == "50.05"
    assert f"{replica_kv(gemma, **args).capacity.max_concurrency:.2f}" == "63.65"


def test_log_summary_and_model_label(tmp_path):
    gemma = read_model_config(MODELS / "gemma-3-4b-it.json")
    log = read_vllm_log(LOGS / "orbit-ai-gemma-3-4b-rocm.log")
    replica = replica_kv(gemma, log=log)
    assert replica.model_label == "google/gemma-3-4b-it"  # the log names the served model
    assert replica.log_summary() == (
        'The log printed "GPU KV cache size: 1,217,591 tokens", "Maximum concurrency: 148.63x"; '
        "the planner reproduces every figure within the rounding of the printed memory."
    )
    wrong = replica_kv(gemma, log=log, max_num_batched_tokens=2048).log_summary()
    assert wrong.startswith("The log and the model disagree. GPU KV cache size")
    assert "max_num_batched_tokens: the planner used 2048 (argument)" in wrong
    plain = replica_kv(gemma, available_kv_gib=10.0)
    assert plain.model_label == "gemma-3-4b-it" and "No start-up log" in plain.log_summary()
    (tmp_path / "my-model").mkdir()
    (tmp_path / "my-model" / "config.json").write_text((MODELS / "qwen3-8b.json").read_text())
    own = read_model_config(tmp_path / "my-model" / "config.json")
    assert replica_kv(own, available_kv_gib=10.0).model_label == "my-model"


def test_estimate_on_gpu_says_why_there_is_none():
    from planner.capacity.replica_kv import estimate_on_gpu

    qwen = read_model_config(MODELS / "qwen2.5-7b-instruct-awq.json")
    replica = replica_kv(qwen, available_kv_gib=13.76)
    made = estimate_on_gpu(replica, "A10", 22.07, 0.9, 5.2)
    assert made.replica.memory_source == "estimate"
    assert made.summary().startswith("On the A10 the estimate is")
    unknown = estimate_on_gpu(replica, "A10", 22.07, 0.9, None, "no parameter count")
    assert unknown.summary() == ("No estimate for the A10: the weights' size is unknown (no parameter count).")
    too_big = estimate_on_gpu(replica, "A10", 22.07, 0.9, 40.0)
    assert too_big.replica is None and "no memory left" in too_big.summary()


def test_a_v0_log_without_a_release_follows_the_v0_rule():
    llama = read_model_config(MODELS / "llama-3.1-8b-instruct.json")
    log = read_vllm_log(LOGS / "vllm-10517-llama-3.1-8b-v0-20k.log")
    replica = replica_kv(llama, log=log)
    assert replica.capacity.rule == "v0"
    assert replica.source("vllm_version") == "vllm log (V0 engine lines)"
    assert replica.capacity.num_blocks * 16 == replica.capacity.kv_tokens
    assert replica.log_consistent is True  # "# GPU blocks: 1952" and 1.56x
