"""Parameter counts from config.json against the counts the model publishers state."""

import pytest

from planner.capacity.weights import (
    DecoderShape,
    Quantization,
    decoder_parameter_count,
    weight_bytes_estimate,
)
from planner.errors import PlannerInputError
from planner.readers.model_config import read_weight_bytes_estimate
from tests.conftest import DATA_DIR

MODELS = DATA_DIR / "models"


@pytest.mark.parametrize(
    ("config", "published_parameters"),
    [
        # Parameter counts as shown on each model's published card.
        ("llama-3.1-8b-instruct.json", 8_030_261_248),
        ("llama-3.3-70b-instruct.json", 70_553_706_496),
        ("qwen2.5-7b-instruct.json", 7_615_616_512),
        ("mistral-7b-instruct-v0.3.json", 7_248_023_552),
        ("mixtral-8x7b-instruct-v0.1.json", 46_702_792_704),
        ("qwen3-30b-a3b.json", 30_532_122_624),
        ("qwen3-8b.json", 8_190_735_360),
    ],
)
def test_parameter_count_matches_the_published_count(config, published_parameters):
    weight_bytes, how = read_weight_bytes_estimate(MODELS / config)
    assert weight_bytes == 2 * published_parameters  # 16-bit checkpoints
    assert f"{published_parameters / 1e9:.2f} B parameters" in how


def test_awq_checkpoint_is_about_a_third_of_the_16_bit_one():
    weight_bytes, how = read_weight_bytes_estimate(MODELS / "qwen2.5-7b-instruct-awq.json")
    # The published AWQ checkpoint's safetensors total about 5.58 GB.
    assert weight_bytes == pytest.approx(5.58e9, rel=0.02)
    assert "AWQ 4-bit" in how and "estimate" in how


def test_fp8_linear_layers_halve_them():
    shape = DecoderShape(1000, 64, 2, 4, 2, 16, 256)
    full = weight_bytes_estimate(shape, 2.0)
    fp8 = weight_bytes_estimate(shape, 2.0, Quantization(linear_bits=8.0))
    embeddings_and_norms = 2 * (2 * 1000 * 64 + 2 * 2 * 64 + 64)
    assert fp8 - embeddings_and_norms / 2 == pytest.approx((full - embeddings_and_norms) / 2 + embeddings_and_norms / 2)
    assert decoder_parameter_count(shape) * 2 == full


@pytest.mark.parametrize("config", ["gpt-oss-20b.json", "deepseek-v2-lite.json", "gemma-3-27b-it.json"])
def test_uncovered_layouts_say_what_to_pass_instead(config):
    with pytest.raises(PlannerInputError, match="pass --weights-gib or --safetensors-index"):
        read_weight_bytes_estimate(MODELS / config)


def test_unknown_quantization_is_refused():
    config = {
        "model_type": "llama",
        "num_hidden_layers": 2,
        "num_attention_heads": 4,
        "num_key_value_heads": 2,
        "hidden_size": 64,
        "intermediate_size": 128,
        "vocab_size": 100,
        "quantization_config": {"quant_method": "bitsandbytes"},
    }
    with pytest.raises(PlannerInputError, match="'bitsandbytes' is not covered"):
        read_weight_bytes_estimate(config)


def test_missing_size_field_is_named():
    config = {
        "model_type": "llama",
        "num_hidden_layers": 2,
        "num_attention_heads": 4,
        "num_key_value_heads": 2,
        "hidden_size": 64,
        "vocab_size": 100,
    }
    with pytest.raises(PlannerInputError, match="'intermediate_size' is missing"):
        read_weight_bytes_estimate(config)
