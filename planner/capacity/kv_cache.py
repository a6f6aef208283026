"""The ``kv_cache`` module sizes vLLM's KV cache the way vLLM itself does.

Given a model (layers, KV heads, head size, attention kind of every layer)
and the serving settings (tensor and pipeline parallel sizes, KV dtype,
block size, max model length), it returns the numbers vLLM prints at start-up:
"GPU KV cache size: N tokens" and "Maximum concurrency for M tokens per
request: C x", for the vLLM version the caller names. The rules follow vLLM's
own code, version by version:

* V0 engine (``CacheEngine``, vLLM <= 0.7, or 0.8.x run with the V0 engine):
  every attention layer counts, ``blocks = avail // (layers x block bytes)``,
  concurrency ``blocks x block_size / max_model_len``.
* V1, 0.8.x: uniform models only, tokens ``blocks x block_size``.
* V1, 0.9 to 0.20 (rule ``"v1-blocks"``): layers are grouped by attention
  kind (full, sliding window); several kinds share ``group_size`` tensors and
  the last group of a kind is padded; tokens ``blocks // groups x block_size``;
  concurrency ``blocks / pages a max-length request needs``, where sliding
  layers need only ``cdiv(min(window - 1 + max_num_batched_tokens, max_len),
  block_size) + 1`` pages.
* V1, 0.21 and later (rule ``"v1-capacity"``): the same blocks and
  concurrency, but the printed tokens are ``int(concurrency x max_model_len)``,
  computed once after the minimum over workers. (The released wheels show
  the blocks rule in 0.20.0 and this one in 0.22.0; 0.21.0 has no wheel on
  PyPI and gets the newer rule.)

Every quantity is per GPU (per worker): each tensor-parallel rank holds
``max(1, kv_heads // tp)`` heads, each pipeline stage its own layers. Memory
in, tokens out, all in bytes and integer counts; nothing here reads files.

The one figure that is not exact is :func:`available_kv_memory_estimate`,
an estimate of what vLLM's memory profiler would find; it says so in its
result, with its typical error.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from dataclasses import dataclass, field

from planner.errors import (
    PlannerInputError,
    require_fraction,
    require_non_negative,
    require_positive,
)
from planner.vllm.release import CURRENT_VLLM_VERSION

__all__ = [
    "CURRENT_VLLM_VERSION",
    "GIB_BYTES",
    "KV_CACHE_DTYPES",
    "RULE_RELEASES",
    "KvCacheGroup",
    "KvCapacity",
    "KvMemoryEstimate",
    "ModelSpec",
    "ServingSpec",
    "WorkerKvCache",
    "available_kv_memory_estimate",
    "concurrent_requests",
    "kv_bytes_per_token",
    "kv_bytes_per_token_by_stage",
    "kv_cache_groups",
    "kv_capacity",
    "kv_capacity_for_printed_gib",
    "kv_dtype_bytes",
    "kv_memory_for_concurrency_bytes",
    "kv_memory_for_max_len_bytes",
    "kv_memory_range_for_tokens",
    "kv_rule",
    "kv_tokens",
    "max_concurrency",
    "max_model_len_for_memory",
    "page_size_bytes",
    "pipeline_stage_layers",
]

GIB_BYTES = 2**30

# vLLM's --kv-cache-dtype choices and their bytes per element
# (vllm/utils STR_DTYPE_TO_TORCH_DTYPE). "auto" follows the model dtype.
KV_CACHE_DTYPES: dict[str, int | None] = {
    "auto": None,
    "bfloat16": 2,
    "float16": 2,
    "half": 2,
    "float32": 4,
    "float": 4,
    "fp8": 1,
    "fp8_e4m3": 1,
    "fp8_e5m2": 1,
    "fp8_inc": 1,
    "int8": 1,
    "fp8_ds_mla": 1,
}

# DeepSeek-V3.2's packed MLA cache: 656 bytes per token per layer
# (512 fp8 latent values, 4 fp32 scales, 64 bf16 rope values).
FP8_DS_MLA_BYTES_PER_TOKEN = 656

# Model dtypes vLLM runs in. A float32 checkpoint is served in 16-bit unless
# --dtype float32 is forced, so "auto" KV for it is 2 bytes as well.
_MODEL_DTYPE_BYTES = {"bfloat16": 2, "float16": 2, "half": 2, "float32": 2, "float": 2}

LAYER_KINDS = ("full", "sliding")

RULES = ("v0", "v1-early", "v1-blocks", "v1-capacity")

# The newest release read for each rule, for pages and tests that set the rules side by side.
RULE_RELEASES = {"v0": "0.6.3", "v1-early": "0.8.5", "v1-blocks": "0.20.0", "v1-capacity": CURRENT_VLLM_VERSION}

# vllm serve's default max_num_batched_tokens on GPUs under 70 GiB, and on A100s (V1, chunked prefill on);
# on H100-class GPUs it is 8192 (vllm-project/vllm vllm/engine/arg_utils.py, EngineArgs.get_batch_defaults,
# UsageContext.OPENAI_API_SERVER, at 99d7eb5d). Sliding-window layers' page budget and the simulated
# replica's step budget (planner.simulate.replica.ReplicaSpec) depend on it.
DEFAULT_MAX_NUM_BATCHED_TOKENS = 2048


@dataclass(frozen=True)
class ModelSpec:
    """The attention geometry of a model's text decoder, as vLLM sees it.

    Parameters
    ----------
    name : str
        A label (the config's file name or model id).
    num_layers : int
        Decoder layers (``num_hidden_layers`` of the text config).
    num_attention_heads : int
        Query heads. [heads]
    num_kv_heads : int
        Key/value heads of the whole model (before tensor parallelism); 1 for
        MLA. [heads]
    head_dim : int
        Elements per head; for MLA ``kv_lora_rank + qk_rope_head_dim``.
    dtype : str
        The model dtype (``torch_dtype``), the KV dtype under ``"auto"``.
    use_mla : bool
        Multi-head latent attention: one latent vector per token and layer,
        no separate K and V.
    layer_kinds : tuple of str
        ``"full"`` or ``"sliding"`` for every layer; empty means all full.
    sliding_window : int or None
        Window of the sliding layers. [tokens]
    max_position_embeddings : int or None
        The longest context vLLM derives from the config, its default
        ``max_model_len``. [tokens]
    weight_bytes : float or None
        Total checkpoint weight bytes, all ranks together. [bytes]
    model_type : str
        The config's ``model_type``.
    """

    name: str
    num_layers: int
    num_attention_heads: int
    num_kv_heads: int
    head_dim: int
    dtype: str = "bfloat16"
    use_mla: bool = False
    layer_kinds: tuple[str, ...] = ()
    sliding_window: int | None = None
    max_position_embeddings: int | None = None
    weight_bytes: float | None = None
    model_type: str = ""

    def __post_init__(self):
        for name in ("num_layers", "num_attention_heads", "num_kv_heads", "head_dim"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise PlannerInputError(f"model {self.name!r}: {name} must be a whole number >= 1, got {value!r}")
        if self.dtype not in _MODEL_DTYPE_BYTES:
            raise PlannerInputError(
                f"model {self.name!r}: dtype must be one of {sorted(_MODEL_DTYPE_BYTES)}, got {self.dtype!r}"
            )
        if self.layer_kinds:
            if len(self.layer_kinds) != self.num_layers:
                raise PlannerInputError(
                    f"model {self.name!r}: layer_kinds has {len(self.layer_kinds)} entries for {self.num_layers} layers"
                )
            unknown = sorted(set(self.layer_kinds) - set(LAYER_KINDS))
            if unknown:
                raise PlannerInputError(
                    f"model {self.name!r}: unknown layer kind(s) {unknown}; expected {list(LAYER_KINDS)}"
                )
            if "sliding" in self.layer_kinds and not (self.sliding_window or 0) > 0:
                raise PlannerInputError(f"model {self.name!r}: sliding layers need a sliding_window > 0")
        for name in ("sliding_window", "max_position_embeddings"):
            value = getattr(self, name)
            if value is not None and (not isinstance(value, int) or value < 1):
                raise PlannerInputError(f"model {self.name!r}: {name} must be a whole number >= 1, got {value!r}")
        if self.weight_bytes is not None and not (math.isfinite(self.weight_bytes) and self.weight_bytes > 0):
            raise PlannerInputError(f"model {self.name!r}: weight_bytes must be > 0, got {self.weight_bytes!r}")

    @property
    def kinds(self) -> tuple[str, ...]:
        """The attention kind of every layer (all ``"full"`` when not given)."""
        return self.layer_kinds or ("full",) * self.num_layers

    @property
    def is_hybrid(self) -> bool:
        """True when layers of more than one attention kind share the cache."""
        return len(set(self.kinds)) > 1


@dataclass(frozen=True)
class ServingSpec:
    """How vLLM serves the model: parallelism, cache dtype, lengths, version.

    Parameters
    ----------
    tensor_parallel_size : int
        GPUs splitting every layer (``--tensor-parallel-size``).
    pipeline_parallel_size : int
        Pipeline stages splitting the layers (``--pipeline-parallel-size``).
    kv_cache_dtype : str
        ``--kv-cache-dtype``; ``"auto"`` is the model dtype.
    block_size : int
        Tokens per KV block (``--block-size``; 16 on CUDA unless an MLA
        backend forces 64 or 128). [tokens]
    max_model_len : int or None
        ``--max-model-len``; None means the model's own maximum, as vLLM does.
        [tokens]
    max_num_batched_tokens : int
        ``--max-num-batched-tokens``; only sliding-window caps depend on it.
        [tokens]
    num_draft_layers : int
        Speculative-decoding draft layers (EAGLE/MTP) with the model's own
        attention geometry, sharing the KV pool (on the last stage).
    vllm_version : str
        The vLLM release whose rule to follow, e.g. ``"0.11.0"``; or a rule
        name from :data:`RULES`.
    engine : str or None
        ``"v0"`` to force the V0 engine's rule for a 0.8-0.10 release that ran
        V0; None uses the release's default engine.
    disable_hybrid_kv_cache_manager : bool
        ``--disable-hybrid-kv-cache-manager``: sliding layers are sized as
        full attention.
    """

    tensor_parallel_size: int = 1
    pipeline_parallel_size: int = 1
    kv_cache_dtype: str = "auto"
    block_size: int = 16
    max_model_len: int | None = None
    max_num_batched_tokens: int = DEFAULT_MAX_NUM_BATCHED_TOKENS
    num_draft_layers: int = 0
    vllm_version: str = CURRENT_VLLM_VERSION
    engine: str | None = None
    disable_hybrid_kv_cache_manager: bool = False

    def __post_init__(self):
        for name in ("tensor_parallel_size", "pipeline_parallel_size", "block_size", "max_num_batched_tokens"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise PlannerInputError(f"{name} must be a whole number >= 1, got {value!r}")
        if self.max_model_len is not None and (
            isinstance(self.max_model_len, bool) or not isinstance(self.max_model_len, int) or self.max_model_len < 1
        ):
            raise PlannerInputError(f"max_model_len must be a whole number >= 1, got {self.max_model_len!r}")
        if not isinstance(self.num_draft_layers, int) or self.num_draft_layers < 0:
            raise PlannerInputError(f"num_draft_layers must be a whole number >= 0, got {self.num_draft_layers!r}")
        if self.kv_cache_dtype not in KV_CACHE_DTYPES:
            raise PlannerInputError(
                f"kv_cache_dtype must be one of {list(KV_CACHE_DTYPES)}, got {self.kv_cache_dtype!r}"
            )
        if self.engine not in (None, "v0", "v1"):
            raise PlannerInputError(f"engine must be 'v0', 'v1' or None, got {self.engine!r}")
        kv_rule(self.vllm_version, self.engine)  # validates the version string


@dataclass(frozen=True)
class KvCacheGroup:
    """One KV cache group: layers of one attention kind sharing block tables.

    ``layers`` are model layer indices (draft layers follow the model's).
    """

    kind: str
    layers: tuple[int, ...]


@dataclass(frozen=True)
class WorkerKvCache:
    """What one worker (one GPU of one pipeline stage) computes and logs.

    Attributes
    ----------
    stage : int
        Pipeline stage of the worker.
    layers : int
        Attention layers the worker holds (draft layers included).
    available_kv_bytes : float
        The worker's available KV memory. [bytes]
    num_blocks : int
        KV blocks the worker can hold before the engine takes the minimum.
    group_size : int
        Tensors shared by the groups (layers per group on this worker).
    kv_tokens_logged : int
        "GPU KV cache size" as this worker would print it under a per-worker
        rule (V1 0.9-0.11; later versions print once, see
        :attr:`KvCapacity.kv_tokens`). [tokens]
    max_concurrency_logged : float
        "Maximum concurrency" this worker would print, before rounding to two
        decimals. [requests]
    """

    stage: int
    layers: int
    available_kv_bytes: float
    num_blocks: int
    group_size: int
    kv_tokens_logged: int
    max_concurrency_logged: float


@dataclass(frozen=True)
class KvCapacity:
    """KV-cache capacity of one replica as vLLM reports it.

    Attributes
    ----------
    rule : str
        The rule applied (one of :data:`RULES`).
    block_size : int
        Tokens per block. [tokens]
    page_size_bytes : int
        Bytes of one block of one layer on one GPU. [bytes]
    bytes_per_token : int
        KV bytes one token takes on the busiest GPU, every layer it holds
        counted once. [bytes/token]
    num_groups : int
        KV cache groups (1 for uniform models).
    padding_layers : int
        Layers' worth of memory the grouping adds (hybrid models).
    max_model_len : int
        The max model length the concurrency refers to. [tokens]
    num_blocks : int
        Blocks per GPU the engine keeps: the minimum over workers.
    kv_tokens : int
        The "GPU KV cache size: N tokens" figure the engine keeps (the
        minimum over workers; V1 0.9-0.11 print one line per worker, see
        ``workers``). [tokens]
    max_concurrency : float
        "Maximum concurrency for max_model_len tokens per request", before
        vLLM's two-decimal rounding. [requests]
    workers : tuple of WorkerKvCache
        One entry per pipeline stage (tensor-parallel ranks of a stage are
        identical when their memory is).
    """

    rule: str
    block_size: int
    page_size_bytes: int
    bytes_per_token: int
    num_groups: int
    padding_layers: int
    max_model_len: int
    num_blocks: int
    kv_tokens: int
    max_concurrency: float
    workers: tuple[WorkerKvCache, ...] = field(default_factory=tuple)

    @property
    def group_tokens(self) -> int:
        """Tokens one KV cache group holds: blocks x block size. [tokens]

        For a uniform model this is the cache's token capacity whatever the
        release prints; for a hybrid it is one group's, each group holding
        every request's tokens of its own layers.
        """
        return self.num_blocks * self.block_size


@dataclass(frozen=True)
class KvMemoryEstimate:
    """An ESTIMATE of vLLM's "Available KV cache memory" from GPU size.

    vLLM measures the activation peak and non-torch memory by running a dummy
    forward pass; this estimate assumes typical values instead, so it is off
    by about ``typical_error_gib`` either way. Use a start-up log when one
    exists.
    """

    requested_gib: float
    weights_gib: float
    activation_gib: float
    non_torch_gib: float
    available_kv_gib: float
    typical_error_gib: float
    is_estimate: bool = True
    note: str = ""

    @property
    def available_kv_bytes(self) -> float:
        """The estimate in bytes. [bytes]"""
        return self.available_kv_gib * GIB_BYTES


# --------------------------------------------------------------------------------------
# Version rules


def kv_rule(vllm_version: str, engine: str | None = None) -> str:
    """Which of vLLM's sizing rules a release follows.

    Parameters
    ----------
    vllm_version : str
        A release such as ``"0.11.0"``, ``"v0.8.5"``, ``"0.19.1rc1.dev301"``,
        or a rule name (``"v0"``, ``"v1-early"``, ``"v1-blocks"``,
        ``"v1-capacity"``).
    engine : {"v0", "v1"} or None
        Force the engine; None takes the release's default (V1 from 0.8).

    Returns
    -------
    str
        The rule name.

    Examples
    --------
    >>> kv_rule("0.6.3"), kv_rule("0.8.5"), kv_rule("0.11.0"), kv_rule("0.24.0")
    ('v0', 'v1-early', 'v1-blocks', 'v1-capacity')
    """
    if vllm_version in RULES:
        return vllm_version
    match = re.fullmatch(r"v?(\d+)\.(\d+)(?:[.\w+-]*)", str(vllm_version).strip())
    if not match:
        raise PlannerInputError(
            f"vllm_version must look like '0.11.0' or be one of {list(RULES)}, got {vllm_version!r}"
        )
    major, minor = int(match.group(1)), int(match.group(2))
    if engine == "v0" and (major, minor) > (0, 10):
        raise PlannerInputError(f"vLLM {vllm_version} has no V0 engine (removed after 0.10)")
    if engine == "v0" or (major, minor) < (0, 8):
        return "v0"
    if (major, minor) < (0, 9):
        return "v1-early"
    if (major, minor) < (0, 21):
        return "v1-blocks"
    return "v1-capacity"


# --------------------------------------------------------------------------------------
# Geometry


def kv_dtype_bytes(model: ModelSpec, serving: ServingSpec) -> int:
    """Bytes per KV element: the model dtype under ``"auto"``, else the cache dtype's.

    Weight quantization (AWQ, GPTQ, FP8 weights) does not change it.
    """
    size = KV_CACHE_DTYPES[serving.kv_cache_dtype]
    return _MODEL_DTYPE_BYTES[model.dtype] if size is None else size


def _kv_heads_per_gpu(model: ModelSpec, serving: ServingSpec) -> int:
    """KV heads on one GPU: 1 for MLA, else ``max(1, heads // tp)`` (replicated when TP > heads)."""
    tp = serving.tensor_parallel_size
    if model.use_mla:
        return 1
    if model.num_attention_heads % tp:
        raise PlannerInputError(
            f"model {model.name!r}: vLLM refuses tensor_parallel_size {tp}: the "
            f"{model.num_attention_heads} attention heads must be divisible by it"
        )
    kv = model.num_kv_heads
    if (tp >= kv and tp % kv) or (tp < kv and kv % tp):
        raise PlannerInputError(
            f"model {model.name!r}: vLLM refuses tensor_parallel_size {tp} with {kv} KV heads: "
            "one must divide the other"
        )
    return max(1, kv // tp)


def _bytes_per_token_per_layer(model: ModelSpec, serving: ServingSpec) -> int:
    """KV bytes one token takes in one layer on one GPU. [bytes/token/layer]"""
    if serving.kv_cache_dtype == "fp8_ds_mla":
        if not model.use_mla:
            raise PlannerInputError(f"kv_cache_dtype 'fp8_ds_mla' applies only to MLA models; {model.name!r} is not")
        return FP8_DS_MLA_BYTES_PER_TOKEN
    coefficient = 1 if model.use_mla else 2  # MLA keeps one latent vector, no separate V
    return coefficient * _kv_heads_per_gpu(model, serving) * model.head_dim * kv_dtype_bytes(model, serving)


def page_size_bytes(model: ModelSpec, serving: ServingSpec) -> int:
    """Bytes of one block of one layer on one GPU (vLLM's ``page_size_bytes``). [bytes]

    Examples
    --------
    >>> qwen = ModelSpec("qwen2.5-7b", 28, 28, 4, 128, "bfloat16")
    >>> page_size_bytes(qwen, ServingSpec())
    32768
    """
    return serving.block_size * _bytes_per_token_per_layer(model, serving)


def pipeline_stage_layers(num_layers: int, pipeline_parallel_size: int) -> tuple[range, ...]:
    """Layer index ranges of each pipeline stage, split as vLLM's ``get_pp_indices``.

    Each stage gets ``num_layers // pp``; the remainder goes one layer each to
    the stages before the last, counting back from the second-to-last.

    Examples
    --------
    >>> [len(r) for r in pipeline_stage_layers(27, 2)]
    [14, 13]
    >>> [len(r) for r in pipeline_stage_layers(28, 3)]
    [9, 10, 9]
    """
    if pipeline_parallel_size > num_layers:
        raise PlannerInputError(
            f"pipeline_parallel_size {pipeline_parallel_size} exceeds the model's "
            f"{num_layers} layers; vLLM needs at least one layer per stage"
        )
    sizes = [num_layers // pipeline_parallel_size] * pipeline_parallel_size
    for i in range(2, num_layers % pipeline_parallel_size + 2):
        sizes[-i] += 1
    ranges, start = [], 0
    for size in sizes:
        ranges.append(range(start, start + size))
        start += size
    return tuple(ranges)


def _layer_kinds(model: ModelSpec, serving: ServingSpec) -> tuple[str, ...]:
    """Kinds of all cache-holding layers, draft layers appended as full attention."""
    kinds = model.kinds
    if serving.disable_hybrid_kv_cache_manager or kv_rule(serving.vllm_version, serving.engine) == "v0":
        kinds = ("full",) * len(kinds)  # no sliding-window savings in sizing
    return kinds + ("full",) * serving.num_draft_layers


def _stage_of_layers(model: ModelSpec, serving: ServingSpec) -> tuple[set[int], ...]:
    stages = [set(r) for r in pipeline_stage_layers(model.num_layers, serving.pipeline_parallel_size)]
    stages[-1].update(range(model.num_layers, model.num_layers + serving.num_draft_layers))
    return tuple(stages)


def kv_bytes_per_token_by_stage(model: ModelSpec, serving: ServingSpec) -> tuple[int, ...]:
    """KV bytes one token takes on one GPU of each pipeline stage. [bytes/token]

    Every cache-holding layer of the stage counts once (no grouping padding).
    """
    per_layer = _bytes_per_token_per_layer(model, serving)
    return tuple(per_layer * len(stage) for stage in _stage_of_layers(model, serving))


def kv_bytes_per_token(model: ModelSpec, serving: ServingSpec) -> int:
    """KV bytes one token takes on the busiest GPU. [bytes/token]

    For a dense model at TP 1: ``2 x layers x kv_heads x head_dim x dtype
    bytes``; the K/V factor is 1 for MLA, and TP divides the heads (never
    below one head per GPU).

    Examples
    --------
    Qwen2.5-7B in fp16: 2 x 28 x 4 x 128 x 2.

    >>> kv_bytes_per_token(ModelSpec("qwen2.5-7b", 28, 28, 4, 128, "float16"), ServingSpec())
    57344
    """
    return max(kv_bytes_per_token_by_stage(model, serving))


def kv_cache_groups(model: ModelSpec, serving: ServingSpec) -> tuple[KvCacheGroup, ...]:
    """KV cache groups as vLLM V1 forms them (``get_kv_cache_groups``), all stages merged.

    A model with one attention kind has one group of all its layers. With
    several kinds, ``group_size`` is the smallest kind's layer count; each
    kind with ``n`` layers is split round-robin into ``cdiv(n, group_size)``
    groups, so its last groups are padded up to ``group_size``.

    Examples
    --------
    Gemma-3-27B: 10 full and 52 sliding layers give 1 + 6 groups.

    >>> kinds = tuple("full" if (i + 1) % 6 == 0 else "sliding" for i in range(62))
    >>> gemma = ModelSpec("gemma-3-27b", 62, 32, 16, 128, layer_kinds=kinds, sliding_window=1024)
    >>> [g.kind for g in kv_cache_groups(gemma, ServingSpec())]
    ['sliding', 'sliding', 'sliding', 'sliding', 'sliding', 'sliding', 'full']
    """
    kinds = _layer_kinds(model, serving)
    by_kind: dict[str, list[int]] = {}
    for index, kind in enumerate(kinds):
        by_kind.setdefault(kind, []).append(index)  # first-seen order, as vLLM's dict
    if len(by_kind) == 1:
        ((kind, layers),) = by_kind.items()
        return (KvCacheGroup(kind, tuple(layers)),)
    group_size = min(len(layers) for layers in by_kind.values())
    groups: list[KvCacheGroup] = []
    for kind, layers in by_kind.items():
        num_groups = -(-len(layers) // group_size)
        groups.extend(KvCacheGroup(kind, tuple(layers[i::num_groups])) for i in range(num_groups))
    return tuple(groups)


def _pages_per_max_request(kind: str, model: ModelSpec, serving: ServingSpec, max_model_len: int) -> int:
    """Pages one max-length request needs in one layer of ``kind`` (``max_memory_usage_bytes``)."""
    block = serving.block_size
    if kind == "sliding":
        assert model.sliding_window is not None  # ModelSpec checks sliding layers have a window
        tokens = min(model.sliding_window - 1 + serving.max_num_batched_tokens, max_model_len)
        return -(-tokens // block) + 1
    return -(-max_model_len // block)


def _resolved_max_model_len(model: ModelSpec, serving: ServingSpec) -> int:
    if serving.max_model_len is not None:
        return serving.max_model_len
    if model.max_position_embeddings is None:
        raise PlannerInputError(f"model {model.name!r}: no max_model_len given and none derivable from the config")
    return model.max_position_embeddings


# --------------------------------------------------------------------------------------
# Capacity


def kv_capacity(model: ModelSpec, serving: ServingSpec, available_kv_bytes) -> KvCapacity:
    """KV blocks, the "GPU KV cache size" tokens and the maximum concurrency vLLM prints.

    Parameters
    ----------
    model : ModelSpec
        The model.
    serving : ServingSpec
        Parallelism, KV dtype, block size, max model length and vLLM version.
    available_kv_bytes : float or sequence of float
        "Available KV cache memory" of one GPU, or one value per pipeline
        stage (each stage's GPUs). [bytes]

    Returns
    -------
    KvCapacity
        The engine's figures (minimum over workers) and each stage's own.

    Examples
    --------
    Qwen2.5-7B-Instruct-AWQ, fp16 KV, on an A10 whose log printed "Available KV cache memory:
    13.76 GiB" (the printed, rounded figure) on vLLM 0.11:

    >>> qwen = ModelSpec("qwen2.5-7b-awq", 28, 28, 4, 128, "float16", max_position_embeddings=32768)
    >>> kv_capacity(qwen, ServingSpec(vllm_version="0.11.0"), 13.76 * GIB_BYTES).kv_tokens
    257648
    """
    rule = kv_rule(serving.vllm_version, serving.engine)
    max_len = _resolved_max_model_len(model, serving)
    stages = _stage_of_layers(model, serving)
    memory = _per_stage(available_kv_bytes, len(stages))
    page = page_size_bytes(model, serving)
    groups = kv_cache_groups(model, serving)
    if rule == "v1-early" and len(groups) > 1:
        raise PlannerInputError(
            f"model {model.name!r} mixes attention kinds; the vLLM 0.8 V1 rule for hybrid "
            "models was not documented here: pick vllm_version 0.9 or later, or engine 'v0'"
        )
    pages_per_request = sum(_pages_per_max_request(g.kind, model, serving, max_len) for g in groups)
    block = serving.block_size

    workers = []
    for stage, (layers, avail) in enumerate(zip(stages, memory, strict=True)):
        if rule == "v0":
            group_size = len(layers)
            num_blocks = int(avail // (page * group_size))
            tokens = num_blocks * block
            concurrency = tokens / max_len
        else:
            group_size = max(sum(1 for layer in g.layers if layer in layers) for g in groups)
            num_blocks = int(avail // page // group_size)
            if rule == "v1-early":
                tokens = num_blocks * block
                concurrency = tokens / max_len
            else:
                tokens = num_blocks // len(groups) * block
                concurrency = num_blocks / pages_per_request
        workers.append(WorkerKvCache(stage, len(layers), float(avail), num_blocks, group_size, tokens, concurrency))

    engine = min(workers, key=lambda w: w.num_blocks)
    if rule == "v1-capacity":
        concurrency = engine.num_blocks / pages_per_request
        tokens = int(concurrency * max_len)
    else:
        concurrency, tokens = engine.max_concurrency_logged, engine.kv_tokens_logged
    group_layers = max(len(g.layers) for g in groups) if rule != "v0" else 0
    padding = len(groups) * group_layers - sum(len(g.layers) for g in groups) if group_layers else 0
    return KvCapacity(
        rule=rule,
        block_size=block,
        page_size_bytes=page,
        bytes_per_token=kv_bytes_per_token(model, serving),
        num_groups=len(groups),
        padding_layers=padding,
        max_model_len=max_len,
        num_blocks=engine.num_blocks,
        kv_tokens=tokens,
        max_concurrency=concurrency,
        workers=tuple(workers),
    )


def _per_stage(available_kv_bytes, num_stages: int) -> list[float]:
    if isinstance(available_kv_bytes, Sequence) and not isinstance(available_kv_bytes, str):
        values = list(available_kv_bytes)
        if len(values) != num_stages:
            raise PlannerInputError(f"available_kv_bytes has {len(values)} values for {num_stages} pipeline stages")
    else:
        values = [available_kv_bytes] * num_stages
    checked = []
    for value in values:
        try:
            number = float(value)
        except (TypeError, ValueError):
            raise PlannerInputError(f"available KV memory must be a number of bytes, got {value!r}") from None
        if not math.isfinite(number) or number <= 0:
            raise PlannerInputError(
                f"available KV memory must be > 0 bytes, got {value!r} "
                f"({number / GIB_BYTES:.2f} GiB): vLLM stops with 'No available memory "
                "for the cache blocks'"
            )
        checked.append(number)
    return checked


def kv_tokens(model: ModelSpec, serving: ServingSpec, available_kv_bytes) -> int:
    """The "GPU KV cache size: N tokens" figure vLLM prints. [tokens]

    See :func:`kv_capacity`.
    """
    return kv_capacity(model, serving, available_kv_bytes).kv_tokens


def max_concurrency(model: ModelSpec, serving: ServingSpec, available_kv_bytes) -> float:
    """ "Maximum concurrency for max_model_len tokens per request" as vLLM computes it. [requests]

    Sliding-window layers need only their window's pages, so a hybrid model's
    concurrency exceeds ``kv_tokens / max_model_len``.
    """
    return kv_capacity(model, serving, available_kv_bytes).max_concurrency


def kv_capacity_for_printed_gib(
    model: ModelSpec, serving: ServingSpec, printed_gib, decimals: int = 2
) -> tuple[KvCapacity, KvCapacity]:
    """Capacities at both ends of the interval a printed GiB figure stands for.

    vLLM prints "Available KV cache memory" rounded to ``decimals`` places, so
    13.76 GiB means [13.755, 13.765) GiB; the true token count lies between
    the two returned capacities.

    Parameters
    ----------
    printed_gib : float or sequence of float
        The printed figure(s), one per pipeline stage or one for all. [GiB]
    decimals : int
        Decimal places printed.

    Returns
    -------
    (KvCapacity, KvCapacity)
        At the lower and the upper end of the interval.
    """
    half = 0.5 * 10.0**-decimals
    if isinstance(printed_gib, Sequence):
        low = [(g - half) * GIB_BYTES for g in printed_gib]
        high = [(g + half) * GIB_BYTES - 1 for g in printed_gib]
    else:
        low = (printed_gib - half) * GIB_BYTES
        high = (printed_gib + half) * GIB_BYTES - 1
    return kv_capacity(model, serving, low), kv_capacity(model, serving, high)


def kv_memory_range_for_tokens(model: ModelSpec, serving: ServingSpec, kv_tokens_printed: int) -> tuple[float, float]:
    """The available KV memory per GPU that makes vLLM print exactly ``kv_tokens_printed``. [bytes]

    The inverse of :func:`kv_capacity` for one memory figure shared by every
    stage: vLLM keeps whole blocks, so one printed token count stands for a
    range of memory one block wide (several blocks under rules that divide
    blocks among groups). A start-up log's token count therefore pins the
    memory more tightly than its "Available KV cache memory" figure, which is
    rounded to 0.01 GiB.

    Parameters
    ----------
    kv_tokens_printed : int
        "GPU KV cache size: N tokens" as a log printed it. [tokens]

    Returns
    -------
    (float, float)
        ``(low, high)``: every memory in ``[low, high)`` prints that count. [bytes]

    Raises
    ------
    PlannerInputError
        When no memory prints that count for this model and version (for
        example a count that is not a whole number of blocks under a
        blocks rule): the model, a setting or the version differs from the run.

    Examples
    --------
    A log's 257,584 tokens of Qwen2.5-7B-Instruct-AWQ are 16,099 blocks of 16:

    >>> qwen = ModelSpec("qwen2.5-7b-awq", 28, 28, 4, 128, "float16", max_position_embeddings=32768)
    >>> low, high = kv_memory_range_for_tokens(qwen, ServingSpec(), 257_584)
    >>> round(low / GIB_BYTES, 4), round(high / GIB_BYTES, 4)
    (13.7565, 13.7573)
    """
    if isinstance(kv_tokens_printed, bool) or not isinstance(kv_tokens_printed, int) or kv_tokens_printed < 1:
        raise PlannerInputError(f"kv_tokens_printed must be a whole number >= 1, got {kv_tokens_printed!r}")
    rule = kv_rule(serving.vllm_version, serving.engine)
    groups = kv_cache_groups(model, serving)
    # Bytes one block takes on the busiest stage: the engine keeps that stage's block count.
    unit = page_size_bytes(model, serving) * max(
        len(layers) if rule == "v0" else max(sum(1 for layer in g.layers if layer in layers) for g in groups)
        for layers in _stage_of_layers(model, serving)
    )

    def printed(num_blocks: int) -> int:
        return kv_capacity(model, serving, num_blocks * unit).kv_tokens

    def first_block_count(at_least: int) -> int:
        # The smallest block count printing at least `at_least` tokens (printed() never falls).
        low, high = 1, 1
        while printed(high) < at_least:
            low, high = high, high * 2
        while low < high:
            middle = (low + high) // 2
            if printed(middle) >= at_least:
                high = middle
            else:
                low = middle + 1
        return low

    first = first_block_count(kv_tokens_printed)
    if printed(first) != kv_tokens_printed:
        raise PlannerInputError(
            f"no KV memory makes vLLM (rule {rule}) print {kv_tokens_printed:,} tokens for model "
            f"{model.name!r}: {first - 1:,} blocks print {printed(first - 1) if first > 1 else 0:,} "
            f"and {first:,} print {printed(first):,}; the config, a setting or the version "
            "differs from the run that printed it"
        )
    after = first_block_count(kv_tokens_printed + 1)
    return float(first * unit), float(after * unit)


# --------------------------------------------------------------------------------------
# Requests of a mean length, and memory for a target


def _mean_tokens_held(kind: str, model: ModelSpec, tokens_per_request: float) -> float:
    if kind == "sliding":
        assert model.sliding_window is not None  # ModelSpec checks sliding layers have a window
        return min(tokens_per_request, model.sliding_window)
    return tokens_per_request


def _check_tokens_per_request(tokens_per_request) -> float:
    try:
        value = float(tokens_per_request)
    except (TypeError, ValueError):
        raise PlannerInputError(f"tokens_per_request must be a number > 0, got {tokens_per_request!r}") from None
    if not math.isfinite(value) or value <= 0:
        raise PlannerInputError(f"tokens_per_request must be a number > 0, got {tokens_per_request!r}")
    return value


def concurrent_requests(model: ModelSpec, serving: ServingSpec, available_kv_bytes, tokens_per_request: float) -> float:
    """Requests of a mean length (prompt + output) the KV cache holds at once. [requests]

    Mean-field: each request holds ``tokens_per_request`` tokens in every
    full-attention group and at most the window in every sliding group, with
    no partial-block rounding (which costs up to one block per request and
    group: ``block_size / tokens_per_request``, 1.6 % at 1,000 tokens and
    block 16). For a uniform model this is ``kv_tokens / tokens_per_request``.

    Examples
    --------
    A log's 257,584 tokens at about 1,000 tokens per request.

    >>> qwen = ModelSpec("qwen2.5-7b-awq", 28, 28, 4, 128, "float16", max_position_embeddings=32768)
    >>> round(concurrent_requests(qwen, ServingSpec(), 16099 * 28 * 32768, 1000.0), 3)
    257.584
    """
    tokens_per_request = _check_tokens_per_request(tokens_per_request)
    capacity = kv_capacity(model, serving, available_kv_bytes)
    held = sum(_mean_tokens_held(g.kind, model, tokens_per_request) for g in kv_cache_groups(model, serving))
    if capacity.rule == "v0":
        held = tokens_per_request
    return capacity.num_blocks * capacity.block_size / held


def kv_memory_for_concurrency_bytes(
    model: ModelSpec, serving: ServingSpec, concurrency: float, tokens_per_request: float
) -> float:
    """Available KV memory per GPU needed to hold ``concurrency`` requests of a mean length. [bytes]

    The inverse of :func:`concurrent_requests`: whole blocks, each
    ``page_size x group_size`` bytes, on the busiest stage.
    """
    tokens_per_request = _check_tokens_per_request(tokens_per_request)
    try:
        concurrency = float(concurrency)
    except (TypeError, ValueError):
        raise PlannerInputError(f"concurrency must be a number > 0, got {concurrency!r}") from None
    if not math.isfinite(concurrency) or concurrency <= 0:
        raise PlannerInputError(f"concurrency must be a number > 0, got {concurrency!r}")
    groups = kv_cache_groups(model, serving)
    held = sum(_mean_tokens_held(g.kind, model, tokens_per_request) for g in groups)
    rule = kv_rule(serving.vllm_version, serving.engine)
    if rule == "v0":
        held = tokens_per_request
    blocks = math.ceil(round(concurrency * held / serving.block_size, 9))
    page = page_size_bytes(model, serving)
    worst = 0
    for layers in _stage_of_layers(model, serving):
        group_size = (
            len(layers) if rule == "v0" else max(sum(1 for layer in g.layers if layer in layers) for g in groups)
        )
        worst = max(worst, blocks * page * group_size)
    return float(worst)


def kv_memory_for_max_len_bytes(model: ModelSpec, serving: ServingSpec, max_model_len: int | None = None) -> int:
    """KV memory one GPU needs for one request of ``max_model_len`` tokens. [bytes]

    vLLM V1's start-up check (``check_enough_kv_cache_memory``): the sum over
    the GPU's layers of each layer's worst-case pages, so sliding layers count
    only their window. vLLM refuses to start ("... GiB KV cache is needed,
    which is larger than the available KV cache memory") below it.
    """
    max_len = max_model_len if max_model_len is not None else _resolved_max_model_len(model, serving)
    if isinstance(max_len, bool) or not isinstance(max_len, int) or max_len < 1:
        raise PlannerInputError(f"max_model_len must be a whole number >= 1, got {max_len!r}")
    page = page_size_bytes(model, serving)
    kinds = _layer_kinds(model, serving)
    return max(
        sum(_pages_per_max_request(kinds[layer], model, serving, max_len) * page for layer in stage)
        for stage in _stage_of_layers(model, serving)
    )


def max_model_len_for_memory(model: ModelSpec, serving: ServingSpec, available_kv_bytes: float) -> int:
    """The longest ``max_model_len`` whose single request fits, as vLLM estimates it. [tokens]

    vLLM's ``estimate_max_model_len``: a binary search for the largest length
    whose :func:`kv_memory_for_max_len_bytes` fits in the available memory
    (printed as "the estimated maximum model length is K").
    """
    (available,) = _per_stage(available_kv_bytes, 1)
    upper = max(
        _resolved_max_model_len(model, serving) if (serving.max_model_len or model.max_position_embeddings) else 1, 1
    )
    if kv_memory_for_max_len_bytes(model, serving, 1) > available:
        return 0
    # Grow the bracket past the configured length if memory allows; vLLM stops at it.
    low, high = 1, upper
    if kv_memory_for_max_len_bytes(model, serving, high) <= available:
        return high
    while low < high:
        middle = (low + high + 1) // 2
        if kv_memory_for_max_len_bytes(model, serving, middle) <= available:
            low = middle
        else:
            high = middle - 1
    return low


# --------------------------------------------------------------------------------------
# Where the memory comes from when there is no log

# Typical profiler results of vLLM V1 on one GPU, read from public start-up logs
# (7B-70B models, max_num_batched_tokens 2048-8192): activation peak 1-3 GiB,
# non-torch memory 0.2-0.6 GiB (more with NCCL under TP), CUDA graphs up to ~1 GiB.
DEFAULT_ACTIVATION_GIB = 2.0
DEFAULT_NON_TORCH_GIB = 0.4
TYPICAL_ESTIMATE_ERROR_GIB = 1.5


def available_kv_memory_estimate(
    gpu_memory_gib: float,
    gpu_memory_utilization: float,
    weights_per_gpu_gib: float,
    activation_gib: float = DEFAULT_ACTIVATION_GIB,
    non_torch_gib: float = DEFAULT_NON_TORCH_GIB,
) -> KvMemoryEstimate:
    """ESTIMATE vLLM's "Available KV cache memory" of one GPU from its size.

    vLLM computes ``total x gpu_memory_utilization - (weights + activation
    peak + non-torch memory)``, measuring the last two in a profiling run.
    This function takes typical values for them, so the result is an
    estimate, typically within ``TYPICAL_ESTIMATE_ERROR_GIB`` (1.5 GiB) of
    what vLLM logs; read the real figure from the start-up log when you can.

    Parameters
    ----------
    gpu_memory_gib : float
        Total GPU memory as CUDA reports it (a little under the nominal size). [GiB]
    gpu_memory_utilization : float
        ``--gpu-memory-utilization``, in (0, 1]. [fraction]
    weights_per_gpu_gib : float
        Weights one GPU holds (total / (tp x pp) for a dense model). [GiB]
    activation_gib : float
        Assumed activation peak of the profiling run. [GiB]
    non_torch_gib : float
        Assumed non-torch memory (CUDA context, NCCL, cuBLAS workspaces). [GiB]

    Returns
    -------
    KvMemoryEstimate
        Labelled as an estimate, with its typical error.

    Raises
    ------
    PlannerInputError
        When nothing would be left for the KV cache.
    """
    gpu_memory_gib = require_positive("gpu_memory_gib", gpu_memory_gib)
    gpu_memory_utilization = require_fraction("gpu_memory_utilization", gpu_memory_utilization)
    weights_per_gpu_gib = require_non_negative("weights_per_gpu_gib", weights_per_gpu_gib)
    activation_gib = require_non_negative("activation_gib", activation_gib)
    non_torch_gib = require_non_negative("non_torch_gib", non_torch_gib)
    requested = gpu_memory_gib * gpu_memory_utilization
    available = requested - weights_per_gpu_gib - activation_gib - non_torch_gib
    if available <= 0:
        raise PlannerInputError(
            f"no memory left for the KV cache: {gpu_memory_gib:.2f} GiB x "
            f"{gpu_memory_utilization} = {requested:.2f} GiB, minus weights "
            f"{weights_per_gpu_gib:.2f} GiB and overheads {activation_gib + non_torch_gib:.2f} "
            f"GiB leaves {available:.2f} GiB; use more GPUs (tensor parallelism) or a larger GPU"
        )
    return KvMemoryEstimate(
        requested_gib=requested,
        weights_gib=weights_per_gpu_gib,
        activation_gib=activation_gib,
        non_torch_gib=non_torch_gib,
        available_kv_gib=available,
        typical_error_gib=TYPICAL_ESTIMATE_ERROR_GIB,
        note=(
            f"estimate: GPU memory x utilization - weights - assumed activation "
            f"({activation_gib:g} GiB) and non-torch ({non_torch_gib:g} GiB) overheads; "
            f"typically within +-{TYPICAL_ESTIMATE_ERROR_GIB:g} GiB of vLLM's own "
            "'Available KV cache memory'"
        ),
    )
