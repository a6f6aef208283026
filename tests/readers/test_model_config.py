"""config.json -> ModelSpec: published configs, spellings, sliding windows, refusals."""

import json

import pytest

from planner.errors import PlannerInputError
from planner.readers.model_config import (
    model_spec_from_config,
    read_model_config,
    read_safetensors_index,
)
from tests.conftest import DATA_DIR

MODELS = DATA_DIR / "models"

# (file, layers, kv heads, head dim, dtype, mla, sliding layers, window, default max len)
EXPECTED = [
    ("qwen2.5-7b-instruct", 28, 4, 128, "bfloat16", False, 0, None, 32768),
    ("qwen2.5-7b-instruct-awq", 28, 4, 128, "float16", False, 0, None, 32768),
    ("qwen2.5-vl-7b-instruct", 28, 4, 128, "bfloat16", False, 0, None, 128000),
    ("llama-3.1-8b-instruct", 32, 8, 128, "bfloat16", False, 0, None, 131072),
    ("llama-3.3-70b-instruct", 80, 8, 128, "bfloat16", False, 0, None, 131072),
    ("qwen3-8b", 36, 8, 128, "bfloat16", False, 0, None, 40960),
    ("qwen3-14b", 40, 8, 128, "bfloat16", False, 0, None, 40960),
    ("qwen3-30b-a3b", 48, 4, 128, "bfloat16", False, 0, None, 40960),
    ("mistral-7b-instruct-v0.3", 32, 8, 128, "bfloat16", False, 0, None, 32768),
    ("mixtral-8x7b-instruct-v0.1", 32, 8, 128, "bfloat16", False, 0, None, 32768),
    ("gemma-3-27b-it", 62, 16, 128, "bfloat16", False, 52, 1024, 131072),
    ("gemma-3-4b-it", 34, 4, 256, "bfloat16", False, 29, 1024, 131072),
    ("qwen3-vl-235b-a22b-thinking-fp8", 94, 4, 128, "bfloat16", False, 0, None, 262144),
    ("gpt-oss-20b", 24, 8, 64, "bfloat16", False, 12, 128, 131072),
    ("gpt-oss-120b", 36, 8, 64, "bfloat16", False, 18, 128, 131072),
    ("deepseek-v2-lite", 27, 1, 576, "bfloat16", True, 0, None, 163840),
]


@pytest.mark.parametrize("row", EXPECTED, ids=[r[0] for r in EXPECTED])
def test_published_configs(row):
    name, layers, kv_heads, head_dim, dtype, mla, sliding, window, max_len = row
    spec = read_model_config(MODELS / f"{name}.json")
    assert (spec.num_layers, spec.num_kv_heads, spec.head_dim) == (layers, kv_heads, head_dim)
    assert (spec.dtype, spec.use_mla) == (dtype, mla)
    assert spec.kinds.count("sliding") == sliding and spec.sliding_window == window
    assert spec.max_position_embeddings == max_len


def test_gemma3_global_layers_every_sixth():
    spec = read_model_config(MODELS / "gemma-3-27b-it.json")
    assert [i for i, k in enumerate(spec.kinds) if k == "full"] == list(range(5, 62, 6))
    assert spec.model_type == "gemma3_text"


def test_gemma3_head_counts_default_as_in_transformers():
    # gemma-3-4b-it's published text_config names no head counts; Gemma3TextConfig's
    # defaults (8 query heads, 4 KV heads of 256) apply, as they do in vLLM.
    spec = read_model_config(MODELS / "gemma-3-4b-it.json")
    assert (spec.num_attention_heads, spec.num_kv_heads, spec.head_dim) == (8, 4, 256)
    assert spec.kinds.count("full") == 5


def test_gemma2_alternates_from_a_sliding_first_layer():
    spec = model_spec_from_config(
        {
            "model_type": "gemma2",
            "num_hidden_layers": 4,
            "num_attention_heads": 16,
            "num_key_value_heads": 8,
            "head_dim": 256,
            "sliding_window": 4096,
        }
    )
    assert spec.kinds == ("sliding", "full", "sliding", "full")


def test_mistral_v01_window_applies_to_every_layer():
    spec = model_spec_from_config(
        {
            "model_type": "mistral",
            "num_hidden_layers": 32,
            "num_attention_heads": 32,
            "num_key_value_heads": 8,
            "hidden_size": 4096,
            "sliding_window": 4096,
        }
    )
    assert set(spec.kinds) == {"sliding"} and spec.head_dim == 128


def test_older_kv_head_spellings():
    base = {"num_hidden_layers": 2, "num_attention_heads": 32, "hidden_size": 4096}
    assert model_spec_from_config({**base, "n_head_kv": 8}).num_kv_heads == 8
    assert model_spec_from_config({**base, "multi_query_group_num": 2}).num_kv_heads == 2
    falcon = {"model_type": "falcon", "n_layer": 2, "n_head": 71, "hidden_size": 4544, "multi_query": True}
    assert model_spec_from_config(falcon).num_kv_heads == 1
    mpt = {"model_type": "mpt", "n_layers": 2, "n_heads": 32, "d_model": 4096, "attn_config": {"kv_n_heads": 8}}
    assert model_spec_from_config(mpt).num_kv_heads == 8
    assert model_spec_from_config(base).num_kv_heads == 32  # plain multi-head attention


def test_derived_max_len_follows_vllm_rope_rules():
    base = {"num_hidden_layers": 2, "num_attention_heads": 8, "hidden_size": 512, "max_position_embeddings": 32768}
    yarn = {"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 32768}
    assert model_spec_from_config({**base, "rope_scaling": yarn}).max_position_embeddings == 131072
    llama3 = {"rope_type": "llama3", "factor": 8.0}
    assert model_spec_from_config({**base, "rope_scaling": llama3}).max_position_embeddings == 32768
    assert model_spec_from_config({**base, "seq_length": 4096}).max_position_embeddings == 4096


@pytest.mark.parametrize(
    ("config", "message"),
    [
        ({"model_type": "jamba", "num_hidden_layers": 32}, "Mamba/attention hybrid"),
        ({"model_type": "qwen3_next", "num_hidden_layers": 48}, "linear-attention hybrid"),
        ({"model_type": "mllama", "text_config": {}}, "cross-attention"),
        (
            {
                "num_hidden_layers": 2,
                "num_attention_heads": 8,
                "hidden_size": 512,
                "layer_types": ["linear_attention", "full_attention"],
            },
            "linear_attention",
        ),
        (
            {"num_hidden_layers": 2, "num_attention_heads": 8, "hidden_size": 512, "attention_chunk_size": 8192},
            "chunked local attention",
        ),
        (
            {
                "num_hidden_layers": 2,
                "num_attention_heads": 8,
                "hidden_size": 512,
                "layers_block_type": ["mamba", "attention"],
            },
            "layers_block_type",
        ),
    ],
)
def test_unsupported_architectures_are_named(config, message):
    with pytest.raises(PlannerInputError, match=message):
        model_spec_from_config(config, "cfg.json")


@pytest.mark.parametrize(
    ("config", "message"),
    [
        ({"num_attention_heads": 8, "hidden_size": 512}, "'num_hidden_layers' is missing"),
        ({"num_hidden_layers": 2, "hidden_size": 512}, "'num_attention_heads' is missing"),
        ({"num_hidden_layers": 2, "num_attention_heads": 8}, "'hidden_size'"),
        ({"num_hidden_layers": -2, "num_attention_heads": 8, "hidden_size": 512}, ">= 1"),
        ({"num_hidden_layers": "two", "num_attention_heads": 8, "hidden_size": 512}, "whole number"),
        ({"num_hidden_layers": 2, "num_attention_heads": 8, "hidden_size": 512, "torch_dtype": "int4"}, "torch_dtype"),
        (
            {"model_type": "deepseek_v2", "num_hidden_layers": 2, "num_attention_heads": 8, "kv_lora_rank": 512},
            "'qk_rope_head_dim' is missing",
        ),
        ({"text_config": {"num_hidden_layers": 2, "num_attention_heads": 8}}, "'text_config.hidden_size'"),
    ],
)
def test_missing_or_bad_fields_are_named(config, message):
    with pytest.raises(PlannerInputError, match=message):
        model_spec_from_config(config, "cfg.json")


def test_file_errors(tmp_path):
    with pytest.raises(PlannerInputError, match="no such file"):
        read_model_config(tmp_path / "config.json")
    broken = tmp_path / "broken.json"
    broken.write_text('{"num_hidden_layers": 2,')
    with pytest.raises(PlannerInputError, match="not valid JSON"):
        read_model_config(broken)
    listed = tmp_path / "list.json"
    listed.write_text("[1, 2]")
    with pytest.raises(PlannerInputError, match="expected a JSON object"):
        read_model_config(listed)
    with pytest.raises(PlannerInputError, match="directory"):
        read_model_config(tmp_path)


def test_safetensors_index(tmp_path):
    index = tmp_path / "model.safetensors.index.json"
    index.write_text(json.dumps({"metadata": {"total_size": 15231233024}, "weight_map": {}}))
    assert read_safetensors_index(index) == 15231233024
    index.write_text(json.dumps({"weight_map": {}}))
    with pytest.raises(PlannerInputError, match=r"metadata\.total_size"):
        read_safetensors_index(index)


def test_bundled_configs_are_found_from_the_package():
    from planner.readers.model_config import BUNDLED_MODELS_DIR, read_bundled_model_config

    assert BUNDLED_MODELS_DIR == DATA_DIR / "models"
    assert read_bundled_model_config("gpt-oss-20b").name == "gpt-oss-20b.json"
    with pytest.raises(PlannerInputError, match=r"'llama-9'.*bundled: deepseek-v2-lite"):
        read_bundled_model_config("llama-9")


def test_weights_for_an_estimate_or_why_not():
    from planner.readers.model_config import read_weights_gib

    assert read_weights_gib(DATA_DIR / "models" / "gemma-3-4b-it.json", 8.6) == (8.6, "as given")
    gib, how = read_weights_gib(DATA_DIR / "models" / "qwen2.5-7b-instruct-awq.json")
    assert 5.0 < gib < 5.4 and "AWQ" in how
    gib, why = read_weights_gib(DATA_DIR / "models" / "gemma-3-4b-it.json")
    assert gib is None and "gemma3_text" in why and "set weights_gib" in why
