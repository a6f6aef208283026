"""The KV chapter's comparison: the user's model beside bundled references, a table without
row numbers, and prose that follows the model."""

import numpy as np

from planner.capacity.kv_cache import RULE_RELEASES, ServingSpec
from planner.charts.kv_capacity import (
    REFERENCE_SETUPS,
    architecture_chart,
    architecture_grid,
    comparison_setups,
    comparison_table,
    geometry_text,
    prefix_sharing_chart,
    prefix_sharing_grid,
    rows_at_memory,
)
from planner.readers.model_config import read_bundled_model_config, read_model_config
from tests.conftest import DATA_DIR


def _references():
    return {stem: read_bundled_model_config(stem) for _, stem, _ in REFERENCE_SETUPS}


def test_comparison_puts_the_users_model_first_with_and_without_fp8():
    qwen = read_model_config(DATA_DIR / "models" / "qwen3-8b.json")
    serving = ServingSpec(max_model_len=8192, vllm_version="0.11.0")
    setups = comparison_setups("Qwen3-8B", qwen, serving, _references())
    labels = list(setups)
    assert labels[:2] == ["This model (Qwen3-8B)", "This model, fp8 KV"]
    assert setups["This model, fp8 KV"][1].kv_cache_dtype == "fp8"
    assert len(setups) == 2 + len(REFERENCE_SETUPS)
    # References follow the page's length and release, not their own defaults.
    assert {s.max_model_len for _, s in setups.values()} == {8192}
    # A model served in fp8 already gets no duplicate fp8 row.
    fp8 = comparison_setups("x", qwen, ServingSpec(kv_cache_dtype="fp8"), _references())
    assert "This model, fp8 KV" not in fp8


def test_comparison_table_hides_the_index_and_picks_the_nearest_memory():
    qwen = read_model_config(DATA_DIR / "models" / "qwen3-8b.json")
    setups = comparison_setups("Qwen3-8B", qwen, ServingSpec(), _references())
    grid = architecture_grid(setups, np.arange(2.0, 41.0, 2.0), 1000.0)
    table = comparison_table(grid, 21.0)
    html = table.to_html()
    assert "row_heading" not in html  # no stray 0, 1, 2 ... column
    assert table.data.columns[0] == "set-up" and len(table.data) == len(setups)
    at_20 = grid[grid["memory_gib"] == 20.0]
    assert list(table.data["GPU KV cache size (tokens)"]) == list(at_20["kv_tokens"])
    spec = architecture_chart(grid, 20.0, 1000.0).to_dict()
    assert spec["width"] <= 400  # leaves room for the labels in a 650 px column


def test_geometry_text_follows_the_model():
    assert geometry_text(read_bundled_model_config("qwen2.5-7b-instruct-awq")) == ("28 layers, 4 KV heads of 128")
    assert "latent vector of 576" in geometry_text(read_bundled_model_config("deepseek-v2-lite"))
    gemma = geometry_text(read_bundled_model_config("gemma-3-27b-it"))
    assert "62 layers" in gemma and "52 layers keep a 1,024-token window" in gemma


def _gemma_and_gpt_oss(serving, tokens_per_request):
    qwen = read_model_config(DATA_DIR / "models" / "qwen2.5-7b-instruct-awq.json")
    setups = comparison_setups("Qwen", qwen, serving, _references())
    rows = rows_at_memory(architecture_grid(setups, [20.0], tokens_per_request), 20.0)
    return rows, rows.loc["Sliding 5:1 (Gemma 3 27B)"], rows.loc["Sliding 1:1 (gpt-oss-20b)"]


def test_hybrids_hold_fewer_requests_than_printed_tokens_suggest_on_the_current_release():
    # From 0.21 on the printed tokens are max concurrency x max_model_len: they credit the sliding
    # layers' window cap, which requests far shorter than max_model_len never reach.
    rows, gemma, gpt_oss = _gemma_and_gpt_oss(ServingSpec(max_model_len=32768), 1000.0)
    assert gemma.concurrent_requests < 0.25 * gemma.tokens_over_length  # 37 against 167
    assert gpt_oss.concurrent_requests < gpt_oss.tokens_over_length
    # Uniform models: the division is right.
    uniform = rows.loc[["This model (Qwen)", "GQA (Llama 3.1 8B)", "MLA (DeepSeek-V2-Lite)"]]
    assert list(uniform.concurrent_requests.round(6)) == list(uniform.tokens_over_length.round(6))
    # Long requests fill the full-attention layers only: then a hybrid holds more than the division.
    _, gemma_long, gpt_oss_long = _gemma_and_gpt_oss(ServingSpec(max_model_len=32768), 16_000.0)
    assert gemma_long.concurrent_requests > gemma_long.tokens_over_length
    assert gpt_oss_long.concurrent_requests > gpt_oss_long.tokens_over_length


def test_hybrids_hold_at_least_printed_tokens_over_length_up_to_0_19():
    old = ServingSpec(max_model_len=32768, vllm_version=RULE_RELEASES["v1-blocks"])
    for length in (1000.0, 16_000.0):
        _, gemma, gpt_oss = _gemma_and_gpt_oss(old, length)
        assert gemma.concurrent_requests >= gemma.tokens_over_length
        assert gpt_oss.concurrent_requests >= gpt_oss.tokens_over_length


def test_comparison_table_shows_the_division_beside_the_count():
    qwen = read_model_config(DATA_DIR / "models" / "qwen3-8b.json")
    grid = architecture_grid(comparison_setups("Qwen3-8B", qwen, ServingSpec(), _references()), [20.0], 1000.0)
    columns = list(comparison_table(grid, 20.0).data.columns)
    assert columns[-2:] == ["tokens ÷ length", "requests held"]


def test_prefix_sharing_grid_and_chart():
    grid = prefix_sharing_grid(257_584, 1000.0, 800.0, np.arange(0.0, 0.951, 0.05))
    shared = grid[grid["case"] == "hits on prefixes held by requests in flight"]
    finished = grid[grid["case"] == "hits on prefixes of finished requests"]
    assert len(shared) == len(finished) == 20
    assert shared["requests"].is_monotonic_increasing and shared["requests"].iloc[0] == 257.584
    assert set(finished["requests"]) == {257.584}
    half = shared[np.isclose(shared["hit_frac"], 0.5)].iloc[0]
    assert half["requests"] == (257_584 - 400) / 600
    spec = prefix_sharing_chart(grid, 0.5).to_dict()
    assert spec["title"] == "Requests held as prompts share more of their prefix"
    assert spec["width"] <= 400
