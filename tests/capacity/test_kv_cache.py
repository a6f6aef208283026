"""KV-cache sizing as vLLM does it: W29-W31, version rules, hybrid grouping, properties."""

import doctest

import pytest
from hypothesis import given
from hypothesis import strategies as st

import planner.capacity.kv_cache as kv
from planner.capacity.kv_cache import (
    GIB_BYTES,
    RULE_RELEASES,
    ModelSpec,
    ServingSpec,
    available_kv_memory_estimate,
    concurrent_requests,
    kv_bytes_per_token,
    kv_cache_groups,
    kv_capacity,
    kv_capacity_for_printed_gib,
    kv_memory_for_concurrency_bytes,
    kv_memory_for_max_len_bytes,
    kv_memory_range_for_tokens,
    kv_rule,
    max_model_len_for_memory,
    pipeline_stage_layers,
)
from planner.errors import PlannerInputError
from planner.readers.model_config import read_model_config
from tests.conftest import DATA_DIR


def model(name):
    return read_model_config(DATA_DIR / "models" / f"{name}.json")


def test_docstring_examples():
    assert doctest.testmod(kv).failed == 0


# ---- W29-W31 (seed 003, Qwen2.5-7B-Instruct-AWQ on one A10) -------------------------------


def test_w29_bytes_per_token():
    assert kv_bytes_per_token(model("qwen2.5-7b-instruct-awq"), ServingSpec()) == 57_344


def test_w30_logged_tokens_lie_within_the_printed_gib():
    qwen = model("qwen2.5-7b-instruct-awq")
    low, high = kv_capacity_for_printed_gib(qwen, ServingSpec(vllm_version="0.11.0"), 13.76)
    assert low.kv_tokens <= 257_584 <= high.kv_tokens
    # From the rounded 13.76 itself: about 257,650, floored to whole blocks of 16.
    at_print = kv_capacity(qwen, ServingSpec(vllm_version="0.11.0"), 13.76 * GIB_BYTES)
    assert at_print.kv_tokens == 257_648 and at_print.kv_tokens % 16 == 0
    assert 13.76 * GIB_BYTES / 57_344 == pytest.approx(257_650, abs=1)


def test_w31_concurrent_requests_at_a_thousand_tokens():
    qwen = model("qwen2.5-7b-instruct-awq")
    memory = 257_584 // 16 * kv.page_size_bytes(qwen, ServingSpec()) * 28  # 16,099 blocks
    assert kv_capacity(qwen, ServingSpec(), memory).num_blocks * 16 == 257_584
    requests = concurrent_requests(qwen, ServingSpec(), memory, 1000)
    assert requests == pytest.approx(257.584) and round(requests) == 258


def test_w30_the_gap_to_the_log_is_print_rounding_under_every_rule():
    # The log printed 13.76 GiB and 257,584 tokens; 13.76 GiB itself gives 257,648 under every rule.
    qwen = model("qwen2.5-7b-instruct-awq")
    for rule, release in RULE_RELEASES.items():
        serving = ServingSpec(max_model_len=32768, vllm_version=release)
        assert kv_capacity(qwen, serving, 13.76 * GIB_BYTES).kv_tokens == 257_648, rule
        # 257,584 tokens are 16,099 blocks: memory in [16,099, 16,100) blocks, all printed as 13.76.
        low, high = kv_memory_range_for_tokens(qwen, serving, 257_584)
        assert (low, high) == (16_099 * 16 * 57_344, 16_100 * 16 * 57_344)
        assert round(low / GIB_BYTES, 2) == round((high - 1) / GIB_BYTES, 2) == 13.76
        assert kv_capacity(qwen, serving, low).kv_tokens == 257_584
        assert kv_capacity(qwen, serving, high - 1).kv_tokens == 257_584
        assert kv_capacity(qwen, serving, high).kv_tokens == 257_600
        assert kv_capacity(qwen, serving, low).group_tokens == 257_584


def test_the_release_rule_matters_when_max_model_len_is_not_whole_blocks():
    qwen = model("qwen2.5-7b-instruct-awq")
    memory = 13.76 * GIB_BYTES  # 16,103 blocks; 32,700 tokens need cdiv(32700, 16) = 2,044 blocks
    blocks = kv_capacity(qwen, ServingSpec(max_model_len=32_700, vllm_version=RULE_RELEASES["v1-blocks"]), memory)
    capacity = kv_capacity(qwen, ServingSpec(max_model_len=32_700), memory)
    assert blocks.kv_tokens == 16_103 * 16 == 257_648
    assert capacity.kv_tokens == int(16_103 / 2_044 * 32_700) == 257_616
    assert capacity.group_tokens == blocks.group_tokens == 257_648
    # Under the newer rule a count is not always a whole number of blocks, and still inverts.
    low, high = kv_memory_range_for_tokens(qwen, ServingSpec(max_model_len=32_700), 257_616)
    assert kv_capacity(qwen, ServingSpec(max_model_len=32_700), low).kv_tokens == 257_616
    assert kv_capacity(qwen, ServingSpec(max_model_len=32_700), high).kv_tokens > 257_616


def test_memory_range_for_hybrid_tokens_and_impossible_counts():
    gemma = model("gemma-3-27b-it")
    serving = ServingSpec(max_model_len=32768, vllm_version=RULE_RELEASES["v1-blocks"])
    printed = kv_capacity(gemma, serving, 20 * GIB_BYTES).kv_tokens
    low, high = kv_memory_range_for_tokens(gemma, serving, printed)
    assert low <= 20 * GIB_BYTES < high
    # Seven groups share the blocks: one printed count spans seven blocks of memory.
    assert (high - low) == 7 * kv.page_size_bytes(gemma, serving) * 10
    qwen = model("qwen2.5-7b-instruct-awq")
    with pytest.raises(PlannerInputError, match=r"no KV memory makes vLLM .* print 257,590 tokens"):
        kv_memory_range_for_tokens(qwen, ServingSpec(max_model_len=32768), 257_590)
    with pytest.raises(PlannerInputError, match="whole number >= 1"):
        kv_memory_range_for_tokens(qwen, ServingSpec(), 0)


# ---- geometry ------------------------------------------------------------------------------


def test_fp8_halves_and_tp_divides_with_replication():
    qwen3_moe = model("qwen3-30b-a3b")  # 32 query heads, 4 KV heads
    bf16 = kv_bytes_per_token(qwen3_moe, ServingSpec())
    assert bf16 == 2 * 48 * 4 * 128 * 2
    assert kv_bytes_per_token(qwen3_moe, ServingSpec(kv_cache_dtype="fp8")) == bf16 // 2
    assert kv_bytes_per_token(qwen3_moe, ServingSpec(tensor_parallel_size=2)) == bf16 // 2
    # TP 8 > 4 KV heads: each GPU still stores one whole head, not half of one.
    assert kv_bytes_per_token(qwen3_moe, ServingSpec(tensor_parallel_size=8)) == bf16 // 4


def test_tensor_parallel_sizes_vllm_refuses():
    with pytest.raises(PlannerInputError, match="28 attention heads must be divisible"):
        kv_bytes_per_token(model("qwen2.5-7b-instruct"), ServingSpec(tensor_parallel_size=8))
    odd = ModelSpec("odd", 4, 12, 4, 64)
    with pytest.raises(PlannerInputError, match="4 KV heads"):
        kv_bytes_per_token(odd, ServingSpec(tensor_parallel_size=6))


def test_mla_stores_one_latent_head_whatever_the_tp():
    deepseek = model("deepseek-v2-lite")
    one = kv_bytes_per_token(deepseek, ServingSpec())
    assert one == 27 * (512 + 64) * 2  # no K/V factor, one head
    assert kv_bytes_per_token(deepseek, ServingSpec(tensor_parallel_size=2)) == one


def test_weight_quantization_does_not_change_kv():
    assert kv_bytes_per_token(model("qwen2.5-7b-instruct-awq"), ServingSpec()) == kv_bytes_per_token(
        model("qwen2.5-7b-instruct"), ServingSpec()
    )


def test_pipeline_split_matches_vllm():
    assert [len(r) for r in pipeline_stage_layers(27, 2)] == [14, 13]
    assert [len(r) for r in pipeline_stage_layers(28, 3)] == [9, 10, 9]
    assert [len(r) for r in pipeline_stage_layers(80, 3)] == [27, 27, 26]
    with pytest.raises(PlannerInputError, match="at least one layer per stage"):
        pipeline_stage_layers(4, 8)


def test_draft_layers_share_the_pool():
    llama = model("llama-3.1-8b-instruct")
    assert kv_bytes_per_token(llama, ServingSpec(num_draft_layers=1)) == 33 * 4096


# ---- hybrid grouping and sliding-window caps ------------------------------------------------


def test_gemma3_groups_pad_eight_layers():
    gemma = model("gemma-3-27b-it")
    groups = kv_cache_groups(gemma, ServingSpec())
    assert [g.kind for g in groups].count("sliding") == 6 and len(groups) == 7
    capacity = kv_capacity(gemma, ServingSpec(max_model_len=32768, vllm_version="0.11.0"), 40 * GIB_BYTES)
    assert capacity.padding_layers == 8
    page = kv.page_size_bytes(gemma, ServingSpec())
    blocks = int(40 * GIB_BYTES // page // 10)
    assert capacity.num_blocks == blocks
    assert capacity.kv_tokens == blocks // 7 * 16
    naive = 40 * GIB_BYTES / kv_bytes_per_token(gemma, ServingSpec())
    assert naive / capacity.kv_tokens == pytest.approx(70 / 62, rel=1e-3)  # +12.9 %


def test_gpt_oss_concurrency_from_the_reference_example():
    # vllm-kv-logic.md: a gpt-oss-120b log printed 2,640,144 tokens and 284.25x at 16,384.
    oss = model("gpt-oss-120b")
    serving = ServingSpec(max_model_len=16384, vllm_version="0.11.0")
    page = kv.page_size_bytes(oss, serving)
    memory = 330_018 * page * 18  # 2 groups of 18 layers
    capacity = kv_capacity(oss, serving, memory)
    assert capacity.kv_tokens == 2_640_144
    assert f"{capacity.max_concurrency:.2f}" == "284.25"
    assert capacity.kv_tokens / 16384 < capacity.max_concurrency  # windows need few pages


def test_newer_versions_print_concurrency_times_length():
    qwen = model("qwen2.5-7b-instruct")
    memory = 10 * GIB_BYTES
    blocks = kv_capacity(qwen, ServingSpec(max_model_len=10_000, vllm_version="0.19.0"), memory)
    derived = kv_capacity(qwen, ServingSpec(max_model_len=10_000, vllm_version="0.24.0"), memory)
    assert blocks.num_blocks == derived.num_blocks
    assert blocks.kv_tokens == blocks.num_blocks * 16
    assert derived.kv_tokens == int(derived.num_blocks / 625 * 10_000) < blocks.kv_tokens


def test_v0_counts_every_layer_and_prints_blocks():
    gemma = model("gemma-3-27b-it")
    v0 = kv_capacity(gemma, ServingSpec(max_model_len=8192, vllm_version="0.6.3"), 20 * GIB_BYTES)
    assert v0.rule == "v0" and v0.num_groups == 1
    assert v0.num_blocks == int(20 * GIB_BYTES // (kv.page_size_bytes(gemma, ServingSpec()) * 62))


@pytest.mark.parametrize(
    ("version", "rule"),
    [
        ("0.6.3", "v0"),
        ("v0.7.3", "v0"),
        ("0.8.5", "v1-early"),
        ("0.9.2", "v1-blocks"),
        ("0.10.1.1", "v1-blocks"),
        ("0.11.0", "v1-blocks"),
        ("0.19.1rc1.dev301+g60995c05b", "v1-blocks"),
        ("0.24.0", "v1-capacity"),
        ("0.34.0", "v1-capacity"),
        ("v1-blocks", "v1-blocks"),
    ],
)
def test_version_rules(version, rule):
    assert kv_rule(version) == rule


def test_bad_serving_inputs_are_named():
    with pytest.raises(PlannerInputError, match="vllm_version"):
        ServingSpec(vllm_version="latest")
    with pytest.raises(PlannerInputError, match="kv_cache_dtype"):
        ServingSpec(kv_cache_dtype="fp4")
    with pytest.raises(PlannerInputError, match="no V0 engine"):
        kv_rule("0.11.0", "v0")
    with pytest.raises(PlannerInputError, match="must be > 0 bytes"):
        kv_capacity(model("qwen3-8b"), ServingSpec(), -2.14 * GIB_BYTES)
    with pytest.raises(PlannerInputError, match="pipeline stages"):
        kv_capacity(model("qwen3-8b"), ServingSpec(), [1e9, 1e9])


# ---- memory for targets, estimates ---------------------------------------------------------


def test_memory_for_concurrency_inverts_concurrent_requests():
    qwen = model("qwen3-8b")
    serving = ServingSpec()
    memory = kv_memory_for_concurrency_bytes(qwen, serving, 100, 2000)
    assert concurrent_requests(qwen, serving, memory, 2000) >= 100
    assert concurrent_requests(qwen, serving, memory - 2 * kv.page_size_bytes(qwen, serving) * 36, 2000) < 100


def test_max_len_memory_matches_vllm_check():
    llama = model("llama-3.1-8b-instruct")
    needed = kv_memory_for_max_len_bytes(llama, ServingSpec(max_model_len=29000))
    assert needed == 32 * 1813 * kv.page_size_bytes(llama, ServingSpec())
    assert (
        max_model_len_for_memory(llama, ServingSpec(max_model_len=29000), needed) == 29008
        or max_model_len_for_memory(llama, ServingSpec(max_model_len=29000), needed) == 29000
    )


def test_estimate_is_labelled_and_refuses_a_model_too_large():
    estimate = available_kv_memory_estimate(24.0, 0.9, 5.2)
    assert estimate.is_estimate and "estimate" in estimate.note
    assert estimate.available_kv_gib == pytest.approx(24 * 0.9 - 5.2 - 2.0 - 0.4)
    assert estimate.typical_error_gib == 1.5
    with pytest.raises(PlannerInputError, match="no memory left"):
        available_kv_memory_estimate(24.0, 0.9, 30.0)


# ---- properties ----------------------------------------------------------------------------

MODELS = ["qwen2.5-7b-instruct", "gemma-3-27b-it", "gpt-oss-20b", "deepseek-v2-lite", "llama-3.3-70b-instruct"]
VERSIONS = ["0.6.3", "0.11.0", "0.24.0"]


@given(name=st.sampled_from(MODELS), version=st.sampled_from(VERSIONS), gib=st.floats(0.5, 200), extra=st.floats(0, 50))
def test_tokens_and_concurrency_grow_with_memory(name, version, gib, extra):
    spec = model(name)
    serving = ServingSpec(max_model_len=8192, vllm_version=version)
    small = kv_capacity(spec, serving, gib * GIB_BYTES)
    large = kv_capacity(spec, serving, (gib + extra) * GIB_BYTES)
    assert small.kv_tokens <= large.kv_tokens
    assert small.max_concurrency <= large.max_concurrency


@given(name=st.sampled_from(MODELS[:3] + MODELS[4:]), tp=st.sampled_from([1, 2, 4]))
def test_fp8_kv_halves_bytes_per_token(name, tp):
    spec = model(name)
    auto = kv_bytes_per_token(spec, ServingSpec(tensor_parallel_size=tp))
    fp8 = kv_bytes_per_token(spec, ServingSpec(tensor_parallel_size=tp, kv_cache_dtype="fp8"))
    assert auto == 2 * fp8


@given(gib=st.floats(1, 100), tokens=st.floats(64, 32768))
def test_sliding_windows_never_lower_concurrency(gib, tokens):
    oss = model("gpt-oss-20b")
    serving = ServingSpec(max_model_len=32768, vllm_version="0.11.0")
    capacity = kv_capacity(oss, serving, gib * GIB_BYTES)
    assert capacity.max_concurrency >= capacity.kv_tokens / 32768 - 1e-9
    assert concurrent_requests(oss, serving, gib * GIB_BYTES, tokens) >= capacity.kv_tokens / tokens - 1e-9


@pytest.mark.parametrize(
    ("release", "rule"),
    [("0.20.0", "v1-blocks"), ("0.20.2", "v1-blocks"), ("0.21.0", "v1-capacity"), ("0.22.0", "v1-capacity")],
)
def test_the_printed_token_rule_switched_after_0_20(release, rule):
    # Read in the released wheels: 0.20.0 logs num_blocks // groups x block size, 0.22.0 logs
    # int(max_concurrency x max_model_len); 0.21.0 has no wheel and takes the newer rule.
    assert kv_rule(release) == rule
