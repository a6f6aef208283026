"""Real vLLM start-up logs, read and reproduced within the rounding of the printed GiB."""

from dataclasses import dataclass

import pytest

from planner.capacity.kv_cache import (
    GIB_BYTES,
    ServingSpec,
    kv_bytes_per_token,
    kv_capacity,
    kv_memory_for_max_len_bytes,
    max_model_len_for_memory,
)
from planner.capacity.startup_log import cross_check
from planner.errors import PlannerInputError
from planner.readers.model_config import read_model_config
from planner.readers.vllm_log import parse_vllm_log, read_vllm_log
from tests.conftest import DATA_DIR, TEST_DATA_DIR

LOGS = TEST_DATA_DIR / "vllm_logs"


@dataclass(frozen=True)
class Case:
    log: str
    model: str
    serving: ServingSpec
    tokens: tuple[int, ...] = ()
    concurrency: tuple[float, ...] = ()
    blocks: tuple[int, ...] = ()


# Settings come from the issue text or the log itself (see tests/data/vllm_logs/README.md).
CASES = [
    Case(
        "lmcache-1739-qwen3-14b.log",
        "qwen3-14b",
        ServingSpec(max_model_len=32768, vllm_version="0.10.2"),
        (42_656,),
        (1.30,),
    ),
    Case(
        "vllm-25350-qwen3-30b-a3b-fp8-kv.log",
        "qwen3-30b-a3b",
        ServingSpec(max_model_len=100_000, kv_cache_dtype="fp8", vllm_version="0.10.2"),
        (230_528,),
        (2.31,),
    ),
    Case(
        "vllm-20665-deepseek-v2-lite-pp2-tp2.log",
        "deepseek-v2-lite",
        ServingSpec(tensor_parallel_size=2, pipeline_parallel_size=2, max_model_len=1024, vllm_version="0.9.2"),
        (807_792, 807_792),
        (788.86, 788.86),
    ),
    Case(
        "vllm-10517-llama-3.1-8b-v0-20k.log",
        "llama-3.1-8b-instruct",
        ServingSpec(max_model_len=20_000, vllm_version="0.6.4"),
        (),
        (1.56,),
        (1952,),
    ),
    Case(
        "vllm-10517-llama-3.1-8b-v0-29k.log",
        "llama-3.1-8b-instruct",
        ServingSpec(max_model_len=29_000, vllm_version="0.6.4"),
        (),
        (0.82,),
        (1478,),
    ),
    Case(
        "vllm-19996-llama-3.1-8b-eagle.log",
        "llama-3.1-8b-instruct",
        ServingSpec(max_model_len=131_072, num_draft_layers=1, vllm_version="0.9.1"),
        (410_128,),
        (3.13,),
    ),
    Case(
        "dennislee22-gpt-oss-120b-tp4.log",
        "gpt-oss-120b",
        ServingSpec(tensor_parallel_size=4, max_model_len=16_384, vllm_version="0.10.1.1"),
        (2_640_144,) * 4,
        (284.25,) * 4,
    ),
    Case(
        "orbit-ai-gemma-3-4b-rocm.log",
        "gemma-3-4b-it",
        ServingSpec(max_model_len=8192, max_num_batched_tokens=8192, vllm_version="0.23.0"),
        (1_217_591,),
        (148.63,),
    ),
    Case(
        "joshi004-qwen3-vl-235b-fp8-tp8.log",
        "qwen3-vl-235b-a22b-thinking-fp8",
        ServingSpec(tensor_parallel_size=8, max_model_len=131_072, max_num_batched_tokens=8192, vllm_version="0.11.2"),
        (798_736,),
        (6.09,) * 8,
    ),
]


@pytest.mark.parametrize("case", CASES, ids=[c.log for c in CASES])
def test_log_is_reproduced_within_print_rounding(case):
    log = read_vllm_log(LOGS / case.log)
    assert log.kv_cache_tokens == case.tokens
    assert tuple(value for _, value in log.max_concurrency) == case.concurrency
    assert log.gpu_blocks == case.blocks
    checks = cross_check(log, read_model_config(DATA_DIR / "models" / f"{case.model}.json"), case.serving)
    assert len(checks) == len(case.tokens) + len(case.concurrency) + len(case.blocks)
    assert all(check.ok for check in checks), [c for c in checks if not c.ok]


def test_eagle_log_needs_the_draft_layer():
    log = read_vllm_log(LOGS / "vllm-19996-llama-3.1-8b-eagle.log")
    llama = read_model_config(DATA_DIR / "models" / "llama-3.1-8b-instruct.json")
    without = cross_check(log, llama, ServingSpec(max_model_len=131_072, vllm_version="0.9.1"))
    assert not all(check.ok for check in without)  # 3.1 % off without it


def test_pipeline_stage_memory_is_paired_by_rank():
    log = read_vllm_log(LOGS / "vllm-20665-deepseek-v2-lite-pp2-tp2.log")
    assert log.available_kv_gib == (11.33, 11.33, 12.13, 12.13)
    assert [log.stage_of(w, 2) for w in log.available_kv_workers] == [1, 1, 0, 0]
    deepseek = read_model_config(DATA_DIR / "models" / "deepseek-v2-lite.json")
    # Treated as one stage holding all 27 layers, the figures no longer match.
    wrong = cross_check(log, deepseek, ServingSpec(tensor_parallel_size=4, max_model_len=1024, vllm_version="0.9.2"))
    assert not all(check.ok for check in wrong)


def test_gemma3_log_groups_and_sliding_pages():
    log = read_vllm_log(LOGS / "orbit-ai-gemma-3-4b-rocm.log")
    assert log.max_num_batched_tokens == 8192 and log.padding_layers == 1
    gemma = read_model_config(DATA_DIR / "models" / "gemma-3-4b-it.json")
    serving = ServingSpec(max_model_len=8192, max_num_batched_tokens=8192, vllm_version="0.23.0")
    capacity = kv_capacity(gemma, serving, 162.84 * GIB_BYTES)
    # 5 full + 29 sliding layers: 7 groups of 5, one padding layer, as the log warns.
    assert (capacity.num_groups, capacity.padding_layers) == (7, 1)
    # 0.23 prints the tokens as int(concurrency x max_model_len), not blocks x 16.
    assert capacity.max_concurrency * 8192 == pytest.approx(capacity.kv_tokens, abs=1)
    # With vLLM's small-GPU budget (2048) the sliding pages, and the printed line, differ.
    small = cross_check(log, gemma, ServingSpec(max_model_len=8192, vllm_version="0.23.0"))
    assert [c.figure for c in small if not c.ok] == ["kv_cache_tokens", "max_concurrency"]
    # At 8,192 tokens a window of 1,024 plus an 8,192 budget covers the whole request, so
    # sliding layers save nothing here and the padding layer costs 3 %: sized as 34
    # uniform layers (hybrid manager off) the figures no longer match the log.
    off = ServingSpec(
        max_model_len=8192, max_num_batched_tokens=8192, vllm_version="0.23.0", disable_hybrid_kv_cache_manager=True
    )
    assert kv_capacity(gemma, off, 162.84 * GIB_BYTES).kv_tokens > 1.03 * capacity.kv_tokens
    assert not any(check.ok for check in cross_check(log, gemma, off))


def test_gpt_oss_windows_raise_concurrency_above_tokens_per_length():
    log = read_vllm_log(LOGS / "dennislee22-gpt-oss-120b-tp4.log")
    assert (log.tensor_parallel_size, log.max_num_batched_tokens) == (4, 2048)
    # 2,640,144 tokens / 16,384 is 161 requests; the 128-token windows make it 284.25.
    assert log.kv_cache_tokens[0] / 16_384 < 0.6 * log.max_concurrency[0][1]
    oss = read_model_config(DATA_DIR / "models" / "gpt-oss-120b.json")
    off = ServingSpec(
        tensor_parallel_size=4, max_model_len=16_384, vllm_version="0.10.1.1", disable_hybrid_kv_cache_manager=True
    )
    checks = cross_check(log, oss, off)
    assert all(c.ok for c in checks if c.figure == "kv_cache_tokens")  # 2 x 18 layers: same
    assert not any(c.ok for c in checks if c.figure == "max_concurrency")


def test_tp8_on_four_kv_heads_keeps_one_whole_head_per_gpu():
    log = read_vllm_log(LOGS / "joshi004-qwen3-vl-235b-fp8-tp8.log")
    assert log.tensor_parallel_size == 8 and log.max_num_batched_tokens == 8192
    qwen = read_model_config(DATA_DIR / "models" / "qwen3-vl-235b-a22b-thinking-fp8.json")
    assert qwen.num_kv_heads == 4
    tp8 = ServingSpec(tensor_parallel_size=8, max_model_len=131_072, vllm_version="0.11.2")
    tp4 = ServingSpec(tensor_parallel_size=4, max_model_len=131_072, vllm_version="0.11.2")
    # Each rank stores one full head (vLLM replicates), not half of one.
    assert kv_bytes_per_token(qwen, tp8) == kv_bytes_per_token(qwen, tp4) == 2 * 94 * 128 * 2
    # Halving the heads per GPU (4 / 8) would predict twice the printed tokens.
    naive_tokens = 35.80 * GIB_BYTES / (2 * 94 * 0.5 * 128 * 2)
    assert naive_tokens > 1.9 * log.kv_cache_tokens[0]


def test_fp8_log_needs_the_fp8_byte():
    log = read_vllm_log(LOGS / "vllm-25350-qwen3-30b-a3b-fp8-kv.log")
    qwen = read_model_config(DATA_DIR / "models" / "qwen3-30b-a3b.json")
    auto = cross_check(log, qwen, ServingSpec(max_model_len=100_000, vllm_version="0.10.2"))
    assert not all(check.ok for check in auto)


def test_start_up_check_and_estimated_length_match_the_error_message():
    text = (LOGS / "vllm-25350-qwen3-30b-a3b-fp8-kv-221000-error.log").read_text()
    assert "(10.12 GiB KV cache is needed" in text and "length is 122080" in text
    qwen = read_model_config(DATA_DIR / "models" / "qwen3-30b-a3b.json")
    serving = ServingSpec(max_model_len=221_000, kv_cache_dtype="fp8", vllm_version="0.10.2")
    assert f"{kv_memory_for_max_len_bytes(qwen, serving) / GIB_BYTES:.2f}" == "10.12"
    low = max_model_len_for_memory(qwen, serving, 5.585 * GIB_BYTES)
    high = max_model_len_for_memory(qwen, serving, 5.595 * GIB_BYTES - 1)
    assert low <= 122_080 <= high


def test_v0_log_settings_and_profile_figures():
    log = read_vllm_log(LOGS / "vllm-10517-llama-3.1-8b-v0-20k.log")
    assert log.engine == "v0"
    assert log.available_kv_gib == (3.81,)
    assert log.total_gpu_memory_gib == 23.58 and log.gpu_memory_utilization == 0.90
    assert log.weights_gib == pytest.approx(14.9888)


def test_early_v1_lines_agree_with_each_other():
    log = read_vllm_log(LOGS / "vllm-13596-v1-early-blocks.log")
    assert log.gpu_blocks == (127_626,)
    assert log.kv_cache_tokens == (127_626 * 16,)
    assert all(f"{127_626 * 16 / 2048:.2f}" == f"{c:.2f}" for _, c in log.max_concurrency)


def test_negative_memory_log_is_a_clear_error():
    log = read_vllm_log(LOGS / "vllm-13882-qwen2.5-7b-negative-memory.log")
    assert log.available_kv_gib == (-1.05,) and log.gpu_blocks == (0,)
    qwen = read_model_config(DATA_DIR / "models" / "qwen2.5-7b-instruct.json")
    with pytest.raises(PlannerInputError, match="not positive"):
        cross_check(log, qwen, ServingSpec(max_model_len=4096, vllm_version="0.7.3"))


def test_settings_from_a_v1_config_dump_and_non_default_args():
    text = "\n".join(
        [
            "INFO 02-16 14:52:15 [utils.py:325]        █     █     █▄   ▄█  version 0.15.1",
            "(APIServer pid=1) INFO [utils.py:261] non-default args: {'model': 'm', "
            "'max_model_len': 128000, 'tensor_parallel_size': 2, 'kv_cache_dtype': 'fp8'}",
            "(EngineCore_DP0 pid=2) INFO [core.py:96] Initializing a V1 LLM engine (v0.15.1) with "
            "config: model='m', dtype=torch.float16, max_seq_len=128000, tensor_parallel_size=2, "
            "pipeline_parallel_size=1, kv_cache_dtype=fp8, device_config=cuda",
            "\x1b[0;36m(Worker_PP0_TP1 pid=3)\x1b[0;0m INFO [gpu_worker.py:356] Available KV cache memory: 26.54 GiB",
            "GPU KV cache size: 217,376 tokens, Maximum concurrency for 128,000 tokens per request: 1.70x",
        ]
    )
    log = parse_vllm_log(text)
    assert log.version == "0.15.1"
    assert (log.tensor_parallel_size, log.pipeline_parallel_size) == (2, 1)
    assert log.max_model_len == 128_000 and log.kv_cache_dtype == "fp8"
    assert log.available_kv_workers == ("pp0/tp1",)
    assert log.kv_cache_tokens == (217_376,) and log.max_concurrency == ((128_000, 1.70),)


def test_exact_byte_lines_explain_every_workers_own_token_line():
    # 0.10 prints one token line per worker; with exact bytes per worker, each rank's
    # line must be explained by its own memory, not only by the smallest one.
    qwen = read_model_config(DATA_DIR / "models" / "qwen3-vl-235b-a22b-thinking-fp8.json")
    serving = ServingSpec(tensor_parallel_size=8, max_model_len=32_768, vllm_version="0.10.2")
    exact = (11_423_138_508, 11_467_178_700)
    tokens = [kv_capacity(qwen, serving, b).workers[0].kv_tokens_logged for b in exact]
    assert tokens[0] < tokens[1]
    text = "\n".join(
        [
            f"(Worker_TP{r}_EP{r} pid=1) INFO Available KV cache memory: {b / GIB_BYTES:.2f} GiB"
            for r, b in enumerate(exact)
        ]
        + [f"INFO GPU KV cache size: {t:,} tokens" for t in tokens]
        + [f"INFO Current kv cache memory in use is {b} bytes." for b in exact]
    )
    checks = cross_check(parse_vllm_log(text), qwen, serving)
    assert [c.ok for c in checks] == [True, True]


def test_text_without_kv_lines_is_refused(tmp_path):
    with pytest.raises(PlannerInputError, match="no KV-cache lines"):
        parse_vllm_log("INFO starting server\n", source="server.log")
    with pytest.raises(PlannerInputError, match="no such file"):
        read_vllm_log(tmp_path / "missing.log")


# The DeepSeek-V2-Lite PP2 x TP2 log, behind each way vLLM (or the user's shell) shows the
# parallel sizes. The fixture itself names no sizes, only worker ranks 0-3.
_DEEPSEEK_LINES = (LOGS / "vllm-20665-deepseek-v2-lite-pp2-tp2.log").read_text()


@pytest.mark.parametrize(
    "header",
    [
        "$ vllm serve deepseek-ai/DeepSeek-V2-Lite --tensor-parallel-size=2 --pipeline-parallel-size=2",
        "vllm serve deepseek-ai/DeepSeek-V2-Lite --tensor-parallel-size 2 --pipeline-parallel-size 2",
        "vllm serve deepseek-ai/DeepSeek-V2-Lite -tp 2 -pp 2",
        "vllm serve deepseek-ai/DeepSeek-V2-Lite --tensor_parallel 2 --pipeline-parallel-size=2",
        '  args: ["--tensor-parallel-size", "2", "--pipeline-parallel-size", "2"]',
        "INFO 07-09 09:47:01 [cli_args.py:325] non-default args: {'model': 'deepseek-ai/DeepSeek-V2-Lite',"
        " 'tensor_parallel_size': 2, 'pipeline_parallel_size': 2, 'max_model_len': 1024}",
        "INFO 07-09 09:47:05 [core.py:69] Initializing a V1 LLM engine (v0.9.2) with config: "
        "model='deepseek-ai/DeepSeek-V2-Lite', dtype=torch.bfloat16, max_seq_len=1024, "
        "tensor_parallel_size=2, pipeline_parallel_size=2, disable_custom_all_reduce=False",
        "INFO 07-09 09:47:05 [arg_utils.py:1200] engine args: tensor_parallel_size=2, "
        "pipeline_parallel_size=2, data_parallel_size=1",
    ],
    ids=[
        "cmd-equals",
        "cmd-space",
        "cmd-short",
        "cmd-prefix",
        "yaml-args",
        "non-default-args",
        "engine-config",
        "key-value-anywhere",
    ],
)
def test_parallel_sizes_are_read_wherever_printed(header):
    log = parse_vllm_log(header + "\n" + _DEEPSEEK_LINES)
    assert (log.tensor_parallel_size, log.pipeline_parallel_size) == (2, 2)


def test_engine_config_beats_the_command_line():
    text = (
        "vllm serve m --tensor-parallel-size 4\n"
        "INFO Initializing a V1 LLM engine (v0.9.2) with config: model='m', "
        "tensor_parallel_size=2, pipeline_parallel_size=2\n" + _DEEPSEEK_LINES
    )
    assert parse_vllm_log(text).tensor_parallel_size == 2


def test_command_line_settings_other_than_parallelism():
    log = parse_vllm_log(
        "vllm serve m --max-model-len=1024 --kv-cache-dtype fp8 "
        "--block-size 64 --max-num-batched-tokens 4096\n" + _DEEPSEEK_LINES
    )
    assert (log.max_model_len, log.kv_cache_dtype, log.block_size, log.max_num_batched_tokens) == (
        1024,
        "fp8",
        64,
        4096,
    )
    # "32k" is vLLM shorthand this reader does not expand: not misread as 32; the length
    # comes from the "Maximum concurrency for 1,024 tokens per request" line instead.
    assert parse_vllm_log("--max-model-len 32k\n" + _DEEPSEEK_LINES).max_model_len == 1024


def test_worker_labels_bound_the_parallel_sizes():
    assert read_vllm_log(LOGS / "vllm-20665-deepseek-v2-lite-pp2-tp2.log").workers_seen() == (1, 1, 4)
    log = parse_vllm_log(
        "(Worker_PP1_TP1 pid=5) INFO Available KV cache memory: 10.00 GiB\n"
        "(Worker_PP0_TP0 pid=2) INFO Available KV cache memory: 11.00 GiB\n"
    )
    assert log.workers_seen() == (2, 2, 4)
    assert read_vllm_log(LOGS / "lmcache-1739-qwen3-14b.log").workers_seen() == (1, 1, 1)
    # Newer workers name only the dimensions larger than one, expert parallel included.
    log = parse_vllm_log(
        "(Worker_TP3_EP3 pid=5) INFO Available KV cache memory: 10.00 GiB\n"
        "(Worker_PP1 pid=7) INFO Available KV cache memory: 10.00 GiB\n"
    )
    assert log.available_kv_workers == ("pp0/tp3", "pp1/tp0")
    assert log.workers_seen() == (4, 2, 8)
