"""Read a Hugging Face ``config.json`` into a :class:`planner.capacity.kv_cache.ModelSpec`.

Field spellings follow vLLM's ``ModelConfig``: the text part of multimodal
wrappers (``text_config``), KV heads under their older names (``n_head_kv``,
``num_kv_heads``, ``multi_query_group_num``, Falcon's ``multi_query``, MPT and
DBRX's ``attn_config.kv_n_heads``), MLA geometry (``kv_lora_rank +
qk_rope_head_dim``, one head), sliding-window layers (``layer_types`` or the
model family's pattern), and the default ``max_model_len`` vLLM derives.

Models whose cache vLLM builds from something other than attention layers of
one geometry (Mamba or linear-attention hybrids, cross-attention, KV-sharing
layers, chunked local attention, sparse-indexer MLA) are refused with a
message naming what is unsupported, never sized wrongly.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from pathlib import Path
from typing import TypedDict

from planner.capacity.kv_cache import ModelSpec
from planner.capacity.weights import (
    DecoderShape,
    Quantization,
    decoder_parameter_count,
    weight_bytes_estimate,
)
from planner.errors import PlannerInputError

__all__ = [
    "BUNDLED_MODELS_DIR",
    "model_spec_from_config",
    "read_bundled_model_config",
    "read_model_config",
    "read_safetensors_index",
    "read_weights_gib",
]

# The published configs that ship with the planner (data/models), found from the
# package itself so that a user's config can live anywhere.
BUNDLED_MODELS_DIR = Path(__file__).resolve().parents[2] / "data" / "models"

# Sub-configs that hold the language model of multimodal wrappers.
_TEXT_CONFIG_KEYS = ("text_config", "llm_config", "language_config")

# vLLM's ModelConfig.get_total_num_kv_heads, in its order.
_KV_HEAD_KEYS = ("n_head_kv", "num_kv_heads", "num_key_value_heads", "multi_query_group_num")
_HEAD_KEYS = ("num_attention_heads", "n_head", "n_heads", "num_heads")
_LAYER_KEYS = ("num_hidden_layers", "n_layer", "n_layers", "num_layers")
_HIDDEN_KEYS = ("hidden_size", "n_embd", "d_model")
# vLLM's _get_and_verify_max_len: the smallest of these is the model's length.
_MAX_LEN_KEYS = (
    "max_position_embeddings",
    "n_positions",
    "max_seq_len",
    "seq_length",
    "model_max_length",
    "max_sequence_length",
    "max_seq_length",
    "seq_len",
)

_FALCON_TYPES = ("falcon", "RefinedWeb", "RefinedWebModel")

# Families whose cache is not (only) attention pages of one geometry.
_UNSUPPORTED_TYPES = {
    "mamba": "a Mamba (state-space) model",
    "mamba2": "a Mamba2 (state-space) model",
    "jamba": "a Mamba/attention hybrid (Jamba)",
    "bamba": "a Mamba/attention hybrid (Bamba)",
    "zamba": "a Mamba/attention hybrid (Zamba)",
    "zamba2": "a Mamba/attention hybrid (Zamba2)",
    "falcon_h1": "a Mamba/attention hybrid (Falcon-H1)",
    "falcon_mamba": "a Mamba model (Falcon-Mamba)",
    "nemotron_h": "a Mamba/attention hybrid (Nemotron-H)",
    "granitemoehybrid": "a Mamba/attention hybrid (Granite 4)",
    "plamo2": "a Mamba/attention hybrid (PLaMo 2)",
    "lfm2": "a convolution/attention hybrid (LFM2)",
    "qwen3_next": "a linear-attention hybrid (Qwen3-Next, Gated DeltaNet)",
    "minimax": "a linear-attention hybrid (MiniMax)",
    "minimax_m1": "a linear-attention hybrid (MiniMax-M1)",
    "minimax_text_01": "a linear-attention hybrid (MiniMax-Text-01)",
    "kimi_linear": "a linear-attention hybrid (Kimi Linear)",
    "rwkv": "a recurrent model (RWKV)",
    "mllama": "a cross-attention vision model (Llama 3.2 Vision): its cross-attention cache is sized by image tokens",
    "whisper": "an encoder-decoder model (Whisper)",
    "gemma3n": "a model with KV-sharing layers (Gemma 3n)",
    "gemma4": "a model with KV-sharing layers and per-layer head sizes (Gemma 4)",
    "gemma4_text": "a model with KV-sharing layers and per-layer head sizes (Gemma 4)",
    "deepseek_v32": "sparse-attention MLA with an extra indexer cache (DeepSeek-V3.2)",
    "deepseek_v4": "a multi-group compressed-attention model (DeepSeek-V4)",
    "llama4": "chunked local attention (Llama 4)",
    "llama4_text": "chunked local attention (Llama 4)",
}

_LAYER_TYPE_KINDS = {"full_attention": "full", "sliding_attention": "sliding"}

# Defaults of transformers' config classes that published config.json files omit
# (vLLM reads the config object, defaults filled in).
_FAMILY_DEFAULTS = {
    # Gemma3TextConfig; gemma-3-4b-it's text_config omits the head counts.
    "gemma3_text": {
        "max_position_embeddings": 131072,
        "sliding_window_pattern": 6,
        "sliding_window": 4096,
        "num_attention_heads": 8,
        "num_key_value_heads": 4,
        "head_dim": 256,
    },
}


def read_model_config(source, name: str | None = None) -> ModelSpec:
    """Read a ``config.json`` (path or already-parsed dict) into a ModelSpec.

    Parameters
    ----------
    source : str, pathlib.Path or Mapping
        Path to a ``config.json``, or its parsed contents.
    name : str, optional
        Label for messages; defaults to the file name or ``"config"``.

    Returns
    -------
    ModelSpec
        The text decoder's attention geometry.

    Raises
    ------
    PlannerInputError
        For an unreadable file, a missing or invalid field (named), or an
        architecture whose KV cache this planner does not model.
    """
    if isinstance(source, Mapping):
        return model_spec_from_config(source, name or "config")
    path = Path(source)
    return model_spec_from_config(_load_json_object(path), name or str(path))


def read_bundled_model_config(stem: str) -> ModelSpec:
    """Read one of the bundled published configs by file stem, e.g. ``"gpt-oss-20b"``.

    Raises
    ------
    PlannerInputError
        When the planner's data folder is not beside the package (an
        installation without it) or holds no such config.
    """
    path = BUNDLED_MODELS_DIR / f"{stem}.json"
    if not path.is_file():
        available = sorted(p.stem for p in BUNDLED_MODELS_DIR.glob("*.json"))
        raise PlannerInputError(
            f"bundled model config {stem!r} not found in {BUNDLED_MODELS_DIR}; "
            f"bundled: {', '.join(available) or 'none (the data folder is missing)'}"
        )
    return read_model_config(path, name=path.name)


def read_weights_gib(config_path, weights_gib: float = 0.0) -> tuple[float | None, str]:
    """Total checkpoint weights for an estimate, or why there is no figure. [GiB]

    Parameters
    ----------
    config_path : str or pathlib.Path
        The model's ``config.json``.
    weights_gib : float
        The size when the user knows it (> 0); 0 estimates it from the config.

    Returns
    -------
    tuple of (float or None, str)
        The weights in GiB (None when the config's layout is not covered) and
        how they were obtained, or why not.
    """
    if weights_gib > 0:
        return float(weights_gib), "as given"
    try:
        weight_bytes, how = read_weight_bytes_estimate(config_path, fallback="set weights_gib to the checkpoint's size")
    except PlannerInputError as error:
        return None, str(error)
    return weight_bytes / 2**30, how


def read_safetensors_index(path) -> float:
    """Total weight bytes from a ``model.safetensors.index.json``. [bytes]

    Reads ``metadata.total_size``, the sum of every tensor's bytes.
    """
    path = Path(path)
    index = _load_json_object(path, "a model.safetensors.index.json file")
    metadata = index.get("metadata")
    total = metadata.get("total_size") if isinstance(metadata, dict) else None
    if isinstance(total, bool) or not isinstance(total, int | float) or total <= 0:
        raise PlannerInputError(
            f"{path}: field 'metadata.total_size' must be a positive number of bytes, got {total!r}"
        )
    return float(total)


def model_spec_from_config(config: Mapping, name: str = "config") -> ModelSpec:
    """Build a ModelSpec from a parsed ``config.json``; see :func:`read_model_config`."""
    if not isinstance(config, Mapping):
        raise PlannerInputError(f"{name}: expected a JSON object, got {type(config).__name__}")
    text, prefix = _text_config(config)
    model_type = str(text.get("model_type") or config.get("model_type") or "")
    if model_type == "gemma3" and text is not config:
        model_type = "gemma3_text"
    text = {**_FAMILY_DEFAULTS.get(model_type, {}), **text}
    _refuse_unsupported(config, text, model_type, name)

    def field(key: str) -> str:
        return f"{name}: field '{prefix}{key}'"

    num_layers = _positive_int(text, _LAYER_KEYS, field)
    num_heads = _attention_heads(text, field)
    use_mla = text.get("kv_lora_rank") is not None
    if use_mla:
        kv_lora_rank = _required_int(text, "kv_lora_rank", field)
        rope_dim = _required_int(text, "qk_rope_head_dim", field)
        head_dim, num_kv_heads = kv_lora_rank + rope_dim, 1
    else:
        num_kv_heads = _kv_heads(text, model_type, num_heads, field)
        head_dim = _head_dim(text, num_heads, field)
    kinds, window = _layer_kinds(text, model_type, num_layers, field)
    return ModelSpec(
        name=name,
        num_layers=num_layers,
        num_attention_heads=num_heads,
        num_kv_heads=num_kv_heads,
        head_dim=head_dim,
        dtype=_dtype(text, config, field),
        use_mla=use_mla,
        layer_kinds=kinds,
        sliding_window=window,
        max_position_embeddings=_derived_max_model_len(text, field, model_type),
        model_type=model_type,
    )


def _text_config(config: Mapping) -> tuple[Mapping, str]:
    for key in _TEXT_CONFIG_KEYS:
        sub = config.get(key)
        if isinstance(sub, Mapping) and any(k in sub for k in _HEAD_KEYS + _LAYER_KEYS):
            return sub, f"{key}."
    return config, ""


def _refuse_unsupported(config: Mapping, text: Mapping, model_type: str, name: str) -> None:
    for candidate in (model_type, str(config.get("model_type") or "")):
        if candidate in _UNSUPPORTED_TYPES:
            raise PlannerInputError(
                f"{name}: model_type {candidate!r} is {_UNSUPPORTED_TYPES[candidate]}; its KV "
                "cache is not sized by this planner (only attention layers of one geometry, "
                "full or sliding window, are)"
            )
    for key, what in (
        ("layers_block_type", "Mamba/attention layer pattern"),
        ("attn_type_list", "linear/softmax attention pattern"),
        ("hybrid_override_pattern", "Mamba/attention layer pattern"),
        ("cross_attention_layers", "cross-attention layers"),
    ):
        if text.get(key) is not None or config.get(key) is not None:
            raise PlannerInputError(
                f"{name}: field '{key}' declares a {what}; hybrid Mamba, linear-attention "
                "and cross-attention models are not supported"
            )
    if text.get("is_encoder_decoder") or config.get("is_encoder_decoder"):
        raise PlannerInputError(f"{name}: encoder-decoder models are not supported (decoder-only only)")
    if text.get("attention_chunk_size"):
        raise PlannerInputError(
            f"{name}: field 'attention_chunk_size' means chunked local attention (Llama 4), which is not supported"
        )
    if text.get("num_kv_shared_layers"):
        raise PlannerInputError(
            f"{name}: field 'num_kv_shared_layers' means layers that share another layer's "
            "KV cache, which is not supported"
        )


def _first(mapping: Mapping, keys: tuple[str, ...]):
    for key in keys:
        if mapping.get(key) is not None:
            return key, mapping[key]
    return None, None


def _as_int(value, what: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int | float) or value != int(value):
        raise PlannerInputError(f"{what} must be a whole number, got {value!r}")
    if value < 1:
        raise PlannerInputError(f"{what} must be >= 1, got {value!r}")
    return int(value)


def _positive_int(text: Mapping, keys: tuple[str, ...], field) -> int:
    key, value = _first(text, keys)
    if key is None:
        raise PlannerInputError(
            f"{field(keys[0])} is missing (also looked for {', '.join(keys[1:])}); "
            "expected the number of decoder layers"
        )
    return _as_int(value, field(key))


def _required_int(text: Mapping, key: str, field) -> int:
    if text.get(key) is None:
        raise PlannerInputError(f"{field(key)} is missing; MLA models need it")
    return _as_int(text[key], field(key))


def _attention_heads(text: Mapping, field) -> int:
    key, value = _first(text, _HEAD_KEYS)
    if key is None:
        raise PlannerInputError(
            f"{field('num_attention_heads')} is missing (also looked for n_head, n_heads, "
            "num_heads); expected the number of query heads"
        )
    return _as_int(value, field(key))


def _kv_heads(text: Mapping, model_type: str, num_heads: int, field) -> int:
    # Falcon's original decoder has one KV head when multi_query is set.
    if (
        model_type in _FALCON_TYPES
        and not text.get("new_decoder_architecture", False)
        and text.get("multi_query", False)
    ):
        return 1
    if model_type in ("mpt", "dbrx"):
        attn = text.get("attn_config") or {}
        value = attn.get("kv_n_heads", num_heads) if isinstance(attn, Mapping) else num_heads
        return _as_int(value, field("attn_config.kv_n_heads"))
    key, value = _first(text, _KV_HEAD_KEYS)
    if key is None:
        return num_heads  # multi-head attention: as many KV heads as query heads
    return _as_int(value, field(key))


def _head_dim(text: Mapping, num_heads: int, field) -> int:
    if text.get("head_dim") is not None:
        return _as_int(text["head_dim"], field("head_dim"))
    key, hidden = _first(text, _HIDDEN_KEYS)
    if key is None:
        raise PlannerInputError(
            f"{field('head_dim')} is missing and so is {field('hidden_size')}; expected one of them to size a head"
        )
    hidden = _as_int(hidden, field(key))
    return hidden // num_heads


def _dtype(text: Mapping, config: Mapping, field) -> str:
    for source in (text, config):
        for key in ("torch_dtype", "dtype"):
            value = source.get(key)
            if value is None:
                continue
            value = str(value).removeprefix("torch.")
            if value not in ("bfloat16", "float16", "float32", "half", "float"):
                raise PlannerInputError(f"{field(key)} must be bfloat16, float16 or float32, got {value!r}")
            return value
    # vLLM serves a checkpoint without a dtype in 16 bits: KV is 2 bytes either way.
    return "bfloat16"


def _layer_kinds(text: Mapping, model_type: str, num_layers: int, field):
    window = text.get("sliding_window")
    layer_types = text.get("layer_types")
    if layer_types is not None:
        if not isinstance(layer_types, list) or len(layer_types) != num_layers:
            raise PlannerInputError(
                f"{field('layer_types')} must list one type per layer ({num_layers}), got {layer_types!r:.80}"
            )
        unknown = sorted(set(layer_types) - set(_LAYER_TYPE_KINDS))
        if unknown:
            raise PlannerInputError(
                f"{field('layer_types')} has layer type(s) {unknown}: only full_attention and "
                "sliding_attention are supported (no Mamba, linear or chunked attention)"
            )
        kinds = tuple(_LAYER_TYPE_KINDS[t] for t in layer_types)
        if "sliding" not in kinds:
            return (), None
        return kinds, _window(window, field)

    if window is None or text.get("use_sliding_window") is False:
        return (), None
    window = _window(window, field)
    if model_type == "gemma2":
        # Even layers are local (sliding), odd ones global.
        return tuple("sliding" if i % 2 == 0 else "full" for i in range(num_layers)), window
    pattern_key = next(
        (k for k in ("sliding_window_pattern", "_sliding_window_pattern") if text.get(k) is not None), None
    )
    if model_type in ("gemma3", "gemma3_text", "cohere2") or pattern_key:
        pattern = _as_int(
            text.get(pattern_key, 6 if model_type.startswith("gemma3") else 4),
            field(pattern_key or "sliding_window_pattern"),
        )
        # Every pattern-th layer is global, the others slide.
        return tuple("full" if (i + 1) % pattern == 0 else "sliding" for i in range(num_layers)), window
    if text.get("use_sliding_window") and text.get("max_window_layers") is not None:
        first = _as_int(text["max_window_layers"], field("max_window_layers")) if text["max_window_layers"] else 0
        if first >= num_layers:
            return (), None
        return tuple("sliding" if i >= first else "full" for i in range(num_layers)), window
    # Mistral-style: every layer uses the window.
    return ("sliding",) * num_layers, window


def _window(window, field) -> int:
    if window is None:
        raise PlannerInputError(f"{field('sliding_window')} is missing but layers slide")
    return _as_int(window, field("sliding_window"))


def _derived_max_model_len(text: Mapping, field, model_type: str = "") -> int | None:
    lengths = [
        text[k] for k in _MAX_LEN_KEYS if isinstance(text.get(k), int | float) and not isinstance(text.get(k), bool)
    ]
    if not lengths:
        return None
    derived = min(lengths)
    scaling = text.get("rope_scaling")
    # Gemma 3's max_position_embeddings is already the scaled length; vLLM
    # does not apply its linear rope factor again.
    if isinstance(scaling, Mapping) and "gemma3" not in model_type:
        rope_type = scaling.get("rope_type", scaling.get("type"))
        # vLLM scales the length for every rope type but these three.
        if rope_type not in ("su", "longrope", "llama3"):
            factor = scaling.get("factor") or 1.0
            if rope_type == "yarn" and scaling.get("original_max_position_embeddings"):
                derived = scaling["original_max_position_embeddings"]
            derived = derived * factor
    if not math.isfinite(derived) or derived < 1:
        raise PlannerInputError(f"{field('max_position_embeddings')} gives no valid length")
    return int(derived)


class _WeightLayout(TypedDict, total=False):
    qkv_bias: bool
    qk_norm: bool
    experts_key: str
    expert_width_key: str


# Decoder layouts whose parameter count planner.capacity.weights covers, and the
# config keys that switch on their optional parts.
_WEIGHT_LAYOUTS: dict[str, _WeightLayout] = {
    "llama": {},
    "mistral": {},
    "qwen2": {"qkv_bias": True},
    "qwen3": {"qk_norm": True},
    "mixtral": {"experts_key": "num_local_experts", "expert_width_key": "intermediate_size"},
    "qwen2_moe": {"qkv_bias": True, "experts_key": "num_experts", "expert_width_key": "moe_intermediate_size"},
    "qwen3_moe": {"qk_norm": True, "experts_key": "num_experts", "expert_width_key": "moe_intermediate_size"},
}


def read_weight_bytes_estimate(
    source, name: str | None = None, fallback: str = "pass --weights-gib or --safetensors-index instead"
) -> tuple[float, str]:
    """Estimate a checkpoint's weight bytes from its ``config.json``. [bytes]

    For when no ``model.safetensors.index.json`` is at hand. The parameter
    count is exact for the layouts covered (Llama, Mistral, Qwen2, Qwen3
    and their MoE variants); quantized linear layers (AWQ, GPTQ, FP8) are
    sized from ``quantization_config``, an estimate within a few percent.
    ``fallback`` ends every error message: what the caller's user can give
    instead (a flag on the command line, a parameter in the book).

    Returns
    -------
    tuple of (float, str)
        Bytes, and a one-line description of how they were obtained.

    Raises
    ------
    PlannerInputError
        For another layout, or a quantization method not covered; the
        message says to pass the weight size instead.
    """
    label = name or (str(source) if not isinstance(source, Mapping) else "config")
    config = source if isinstance(source, Mapping) else _load_json_object(Path(source))
    model = model_spec_from_config(config, label)
    text, prefix = _text_config(config)
    layout = _WEIGHT_LAYOUTS.get(model.model_type)
    if layout is None or model.use_mla:
        raise PlannerInputError(
            f"{label}: no parameter count for model_type {model.model_type!r} (covered: "
            f"{', '.join(sorted(_WEIGHT_LAYOUTS))}); {fallback}"
        )

    def size(key: str) -> int:
        if text.get(key) is None:
            raise PlannerInputError(f"{label}: field '{prefix}{key}' is missing; {fallback}")
        return _as_int(text[key], f"{label}: field '{prefix}{key}'")

    experts_key = layout.get("experts_key")
    num_experts = size(experts_key) if experts_key else 0
    if experts_key and (text.get("mlp_only_layers") or text.get("decoder_sparse_step", 1) != 1):
        raise PlannerInputError(f"{label}: dense layers mixed among MoE layers are not counted; {fallback}")
    shape = DecoderShape(
        vocab_size=size("vocab_size"),
        hidden_size=size("hidden_size"),
        num_layers=model.num_layers,
        num_attention_heads=model.num_attention_heads,
        num_kv_heads=model.num_kv_heads,
        head_dim=model.head_dim,
        intermediate_size=size(layout.get("expert_width_key", "intermediate_size")),
        num_experts=num_experts,
        shared_expert_intermediate_size=(int(text.get("shared_expert_intermediate_size") or 0) if experts_key else 0),
        tie_word_embeddings=bool(text.get("tie_word_embeddings", config.get("tie_word_embeddings", False))),
        qkv_bias=layout.get("qkv_bias", False),
        qk_norm=layout.get("qk_norm", False),
    )
    quantization, how = _quantization(config.get("quantization_config"), label, fallback)
    parameters = decoder_parameter_count(shape)
    total = weight_bytes_estimate(shape, 2.0, quantization)
    return total, f"{parameters / 1e9:.2f} B parameters from config.json, {how}"


def _quantization(settings, label: str, fallback: str):
    if not settings:
        return None, "16-bit weights"
    method = str(settings.get("quant_method", "")).lower()
    if method == "fp8":
        return Quantization(linear_bits=8.0), "FP8 linear layers (estimate)"
    if method in ("awq", "gptq"):
        bits = settings.get("bits", settings.get("w_bit"))
        group = settings.get("group_size", settings.get("q_group_size"))
        if not isinstance(bits, int) or not isinstance(group, int) or group < 1 or bits < 1:
            raise PlannerInputError(
                f"{label}: field 'quantization_config' needs integer 'bits' and 'group_size' for {method}; {fallback}"
            )
        # Per group and output column: a 16-bit scale and a packed zero point.
        return (
            Quantization(linear_bits=float(bits), group_size=group, scale_bytes=2 + bits / 8),
            f"{method.upper()} {bits}-bit linear layers, group {group} (estimate)",
        )
    raise PlannerInputError(
        f"{label}: quantization method {method!r} is not covered by the weight estimate; {fallback}"
    )


def _load_json_object(path: Path, what: str = "a config.json file") -> dict:
    """Parse a JSON file holding one object; errors name the file and what went wrong."""
    try:
        config = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise PlannerInputError(f"{path}: no such file") from None
    except IsADirectoryError:
        raise PlannerInputError(f"{path}: expected {what}, got a directory") from None
    except UnicodeDecodeError:
        raise PlannerInputError(f"{path}: not a UTF-8 text file") from None
    except json.JSONDecodeError as error:
        raise PlannerInputError(
            f"{path}: not valid JSON (line {error.lineno}, column {error.colno}: {error.msg})"
        ) from None
    if not isinstance(config, dict):
        raise PlannerInputError(f"{path}: expected a JSON object, got {type(config).__name__}")
    return config
