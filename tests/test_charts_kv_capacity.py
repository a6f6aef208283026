"""The KV chapter's comparison: the user's model beside bundled references, a table without
row numbers, and prose that follows the model."""

import numpy as np

from planner.charts.kv_capacity import (
    REFERENCE_SETUPS,
    architecture_chart,
    architecture_grid,
    comparison_setups,
    comparison_table,
    geometry_text,
)
from planner.kv_cache import ServingSpec
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
    assert geometry_text(read_bundled_model_config("qwen2.5-7b-instruct-awq")) == (
        "28 layers, 4 KV heads of 128")
    assert "latent vector of 576" in geometry_text(read_bundled_model_config("deepseek-v2-lite"))
    gemma = geometry_text(read_bundled_model_config("gemma-3-27b-it"))
    assert "62 layers" in gemma and "52 layers keep a 1,024-token window" in gemma
