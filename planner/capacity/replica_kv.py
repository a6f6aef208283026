"""The ``replica_kv`` module: one replica's KV capacity from a model, the settings and a log.

This is the one computation behind both ``planner kv`` and the chapter "How
many requests fit". Each serving setting comes from the caller when given,
else from the vLLM start-up log when it shows one, else from vLLM's default;
the available KV memory comes from the caller, the log, or an ESTIMATE from
the GPU's size. When a log is given, its printed figures are checked against
the model, and a disagreement is explained by the single config field or
setting that would remove it ("num_key_value_heads: config.json says 8, the
log implies 4").

Nothing here reads files: the caller parses the config and the log (see
:mod:`planner.readers`) and passes the results in.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import PurePath

from planner.capacity.kv_cache import (
    CURRENT_VLLM_VERSION,
    DEFAULT_MAX_NUM_BATCHED_TOKENS,
    GIB_BYTES,
    KV_CACHE_DTYPES,
    RULE_RELEASES,
    KvCapacity,
    KvMemoryEstimate,
    ModelSpec,
    ServingSpec,
    available_kv_memory_estimate,
    concurrent_requests,
    kv_capacity,
    kv_capacity_for_printed_gib,
    kv_dtype_bytes,
    kv_rule,
)
from planner.capacity.startup_log import LogCheck, VllmStartupLog, cross_check
from planner.errors import PlannerInputError, require_non_negative, require_positive

__all__ = [
    "DEFAULT_BLOCK_SIZE",
    "GpuEstimate",
    "ReplicaKv",
    "estimate_on_gpu",
    "explain_log_mismatch",
    "model_label",
    "replica_kv",
]

# vLLM's default --block-size on CUDA.
DEFAULT_BLOCK_SIZE = 16

# Values tried when looking for the one field or setting that explains a log.
_TRY_PARALLEL = (1, 2, 4, 8, 16)
_TRY_KV_DTYPES = ("auto", "fp8", "float32")
_TRY_BLOCK_SIZES = (16, 32, 64, 128)
_TRY_BATCHED_TOKENS = (2048, 4096, 8192, 16384)
_TRY_DRAFT_LAYERS = (0, 1, 2, 3)
_TRY_VERSIONS = tuple(RULE_RELEASES.values())  # one release per sizing rule
_TRY_KV_HEADS = (1, 2, 4, 8, 16, 32, 64, 128)
_TRY_HEAD_DIMS = (64, 80, 96, 112, 128, 160, 192, 256, 512, 576)


@dataclass(frozen=True)
class ReplicaKv:
    """KV capacity of one replica, with where every input came from.

    Attributes
    ----------
    model : ModelSpec
        The model as read from its config.
    serving : ServingSpec
        The settings used.
    sources : tuple of (str, str)
        For each setting, where its value came from: ``"argument"``,
        ``"vllm log"``, ``"vllm log worker labels"``, ``"default"`` or
        ``"config"``.
    available_kv_gib_per_stage : tuple of float
        Available KV memory of each pipeline stage's smallest worker. [GiB]
    memory_source : str
        ``"argument"``, ``"vllm log"`` or ``"estimate"``.
    capacity : KvCapacity
        What vLLM prints for this memory.
    kv_tokens_range : tuple of int or None
        Token counts at both ends of the printed memory's rounding, when the
        memory came from a log. [tokens]
    log_checks : tuple of LogCheck
        The log's printed figures against the prediction.
    log_mismatch : tuple of str
        When a check fails: the failing figure, then each single field or
        setting that would make every check pass.
    estimate : KvMemoryEstimate or None
        The memory estimate, when the memory came from the GPU's size.
    tokens_per_request : float or None
        Mean request length asked about. [tokens]
    concurrent_requests : float or None
        Requests of that length held at once. [requests]
    model_label : str
        A name for the model: the one the log serves, else the config's file
        (or folder, for a file called ``config.json``).
    """

    model: ModelSpec
    serving: ServingSpec
    sources: tuple[tuple[str, str], ...]
    available_kv_gib_per_stage: tuple[float, ...]
    memory_source: str
    capacity: KvCapacity
    kv_tokens_range: tuple[int, int] | None = None
    log_checks: tuple[LogCheck, ...] = ()
    log_mismatch: tuple[str, ...] = ()
    estimate: KvMemoryEstimate | None = None
    tokens_per_request: float | None = None
    concurrent_requests: float | None = None
    model_label: str = ""

    @property
    def available_kv_gib(self) -> float:
        """The smallest stage's available KV memory, as the log prints it. [GiB]"""
        return min(self.available_kv_gib_per_stage)

    @property
    def log_consistent(self) -> bool | None:
        """True when every printed figure is reproduced; None without a log."""
        if self.memory_source != "vllm log" and not self.log_checks:
            return None
        return all(check.ok for check in self.log_checks)

    def log_summary(self) -> str:
        """One paragraph on the log: reproduced, or which field would explain it."""
        if self.memory_source != "vllm log" and not self.log_checks:
            return "No start-up log was given, so nothing is checked; the memory is the figure passed in."
        if not self.log_checks:
            return "The log printed no token, block or concurrency figure to check."
        units = {"kv_cache_tokens": " tokens", "max_concurrency": "x"}
        printed = ", ".join(
            dict.fromkeys(  # one mention per distinct line
                f'"{_FIGURES.get(c.figure, c.figure)}: {_number(c.printed)}{units.get(c.figure, "")}"'
                for c in self.log_checks
            )
        )
        if self.log_consistent:
            return (
                f"The log printed {printed}; the planner reproduces every figure within "
                "the rounding of the printed memory."
            )
        first, *rest = self.log_mismatch
        text = f"The log and the model disagree. {first}."
        if rest and not rest[0].startswith("no single"):
            text += " Each of these alone would make them agree: " + "; ".join(rest) + "."
        elif rest:
            text += f" {rest[0].capitalize()}."
        return text

    def source(self, name: str) -> str:
        """Where the setting ``name`` came from."""
        return dict(self.sources)[name]

    def as_dict(self) -> dict:
        """The fields ``planner kv --json`` prints, in plain JSON types."""
        serving, capacity = self.serving, self.capacity
        result: dict = {
            "model": self.model.name,
            "model_label": self.model_label,
            "model_type": self.model.model_type,
            "tensor_parallel_size": serving.tensor_parallel_size,
            "pipeline_parallel_size": serving.pipeline_parallel_size,
            "kv_cache_dtype": serving.kv_cache_dtype,
            "kv_dtype_bytes": kv_dtype_bytes(self.model, serving),
            "block_size": serving.block_size,
            "vllm_version": serving.vllm_version,
            "max_model_len": capacity.max_model_len,
            "max_model_len_source": self.source("max_model_len"),
            "max_num_batched_tokens": serving.max_num_batched_tokens,
            "settings_source": dict(self.sources),
        }
        if self.kv_tokens_range is not None:
            result["kv_tokens_range"] = list(self.kv_tokens_range)
        if self.memory_source == "vllm log" or self.log_checks:
            result["log_check"] = [
                {"figure": c.figure, "printed": c.printed, "predicted_low": c.low, "predicted_high": c.high, "ok": c.ok}
                for c in self.log_checks
            ]
            result["log_consistent"] = self.log_consistent
            result["log_mismatch"] = list(self.log_mismatch)
        if self.estimate is not None:
            result["estimate"] = {
                "requested_gib": self.estimate.requested_gib,
                "weights_per_gpu_gib": self.estimate.weights_gib,
                "activation_gib": self.estimate.activation_gib,
                "non_torch_gib": self.estimate.non_torch_gib,
                "typical_error_gib": self.estimate.typical_error_gib,
                "note": self.estimate.note,
            }
        result.update(
            {
                "available_kv_gib": self.available_kv_gib,
                "available_kv_source": self.memory_source,
                "is_estimate": self.memory_source == "estimate",
                "rule": capacity.rule,
                "bytes_per_token": capacity.bytes_per_token,
                "page_size_bytes": capacity.page_size_bytes,
                "num_kv_cache_groups": capacity.num_groups,
                "padding_layers": capacity.padding_layers,
                "num_blocks": capacity.num_blocks,
                "kv_tokens": capacity.kv_tokens,
                "max_concurrency": capacity.max_concurrency,
                "max_concurrency_printed": f"{capacity.max_concurrency:.2f}x",
            }
        )
        if self.tokens_per_request is not None:
            result["tokens_per_request"] = self.tokens_per_request
            result["concurrent_requests"] = self.concurrent_requests
        return result


def replica_kv(
    model: ModelSpec,
    *,
    log: VllmStartupLog | None = None,
    available_kv_gib: float | None = None,
    default_available_kv_gib: float | None = None,
    gpu_memory_gib: float | None = None,
    weights_gib: float | None = None,
    gpu_memory_utilization: float = 0.9,
    tensor_parallel_size: int | None = None,
    pipeline_parallel_size: int | None = None,
    kv_cache_dtype: str | None = None,
    block_size: int | None = None,
    max_model_len: int | None = None,
    max_num_batched_tokens: int | None = None,
    num_draft_layers: int = 0,
    vllm_version: str | None = None,
    tokens_per_request: float | None = None,
) -> ReplicaKv:
    """KV-cache capacity of one replica, as vLLM prints it, from every input at hand.

    A setting left as None is taken from ``log`` when the log shows it, else
    from vLLM's default (TP 1, PP 1, ``auto``, block 16, the config's
    max length, 2,048 batched tokens, the newest release read).

    Parameters
    ----------
    model : ModelSpec
        The model, from :func:`planner.readers.model_config.read_model_config`.
    log : VllmStartupLog, optional
        A parsed vLLM start-up log: settings, memory and figures to check.
    available_kv_gib : float, optional
        "Available KV cache memory" of one GPU; beats the log's. [GiB]
    default_available_kv_gib : float, optional
        The memory to use only when neither ``available_kv_gib`` nor the log
        gives one (the book's parameter, which a log replaces). [GiB]
    gpu_memory_gib, weights_gib : float, optional
        Without memory from the argument or log: the GPU's memory as CUDA
        reports it and the checkpoint's total weights, for an ESTIMATE. [GiB]
    gpu_memory_utilization : float
        ``--gpu-memory-utilization`` for the estimate. [fraction]
    tensor_parallel_size, pipeline_parallel_size, block_size, max_model_len,
    max_num_batched_tokens, num_draft_layers : int, optional
        vLLM's settings of the same names (lengths in tokens).
    kv_cache_dtype, vllm_version : str, optional
        ``--kv-cache-dtype`` and the vLLM release whose rule to follow.
    tokens_per_request : float, optional
        Mean prompt + output tokens of a request. [tokens]

    Returns
    -------
    ReplicaKv

    Raises
    ------
    PlannerInputError
        For no memory source, a setting vLLM refuses, a log whose workers
        outnumber the GPUs the settings give, or memory vLLM would not have.
    """
    sources: dict[str, str] = {}

    def pick(name, given, from_log, default, default_source="default"):
        if given is not None:
            sources[name] = "argument"
            return given
        if from_log is not None:
            sources[name] = "vllm log"
            return from_log
        sources[name] = default_source
        return default

    tp = pick("tensor_parallel_size", tensor_parallel_size, log.tensor_parallel_size if log else None, 1)
    pp = pick("pipeline_parallel_size", pipeline_parallel_size, log.pipeline_parallel_size if log else None, 1)
    if log is not None:
        tp, pp = _parallel_from_workers(log, tp, pp, sources)
    kv_dtype = pick("kv_cache_dtype", kv_cache_dtype, log.kv_cache_dtype if log else None, "auto")
    block = pick("block_size", block_size, log.block_size if log else None, DEFAULT_BLOCK_SIZE)
    version = pick("vllm_version", vllm_version, log.version if log else None, CURRENT_VLLM_VERSION)
    if sources["vllm_version"] == "default" and log is not None and log.engine == "v0":
        # No release printed, but the lines are the V0 engine's: follow its rule.
        version, sources["vllm_version"] = "v0", "vllm log (V0 engine lines)"
    batched = pick(
        "max_num_batched_tokens",
        max_num_batched_tokens,
        log.max_num_batched_tokens if log else None,
        DEFAULT_MAX_NUM_BATCHED_TOKENS,
    )
    max_len = pick(
        "max_model_len",
        max_model_len,
        log.max_model_len if log else None,
        model.max_position_embeddings,
        "config (as vLLM derives it)",
    )
    sources["num_draft_layers"] = "argument" if num_draft_layers else "default"
    if kv_dtype not in KV_CACHE_DTYPES:
        raise PlannerInputError(
            f"kv_cache_dtype {kv_dtype!r} ({sources['kv_cache_dtype']}) is not one vLLM "
            f"documents; expected one of {list(KV_CACHE_DTYPES)}"
        )
    # A log written by the V0 engine (0.8-0.10 could still run it) follows V0's rule.
    engine = "v0" if (log and log.engine == "v0") else None
    try:
        kv_rule(version, engine)
    except PlannerInputError:
        engine = None
    serving = ServingSpec(
        tensor_parallel_size=tp,
        pipeline_parallel_size=pp,
        kv_cache_dtype=kv_dtype,
        block_size=block,
        max_model_len=max_len,
        max_num_batched_tokens=batched,
        num_draft_layers=num_draft_layers,
        vllm_version=version,
        engine=engine,
    )

    estimate = None
    kv_range = None
    checks: tuple[LogCheck, ...] = ()
    if available_kv_gib is not None:
        memory_source = "argument"
        per_stage = [require_positive("available_kv_gib", available_kv_gib)] * pp
    elif log is not None and log.available_kv_gib:
        memory_source = "vllm log"
        per_stage = _log_memory_per_stage(log, tp, pp)
    elif default_available_kv_gib is not None:
        memory_source = "argument"
        per_stage = [require_positive("available_kv_gib", default_available_kv_gib)] * pp
    elif log is not None:
        raise PlannerInputError(
            f"{log.source}: no 'Available KV cache memory' line (nor the V0 equivalents); "
            "give the available KV memory instead"
        )
    elif gpu_memory_gib is not None and weights_gib is not None:
        memory_source = "estimate"
        estimate = available_kv_memory_estimate(
            gpu_memory_gib, gpu_memory_utilization, require_non_negative("weights_gib", weights_gib) / (tp * pp)
        )
        per_stage = [estimate.available_kv_gib] * pp
    else:
        raise PlannerInputError(
            "no KV memory to size: give the available KV memory, a vLLM log, or a GPU's memory and the weights' size"
        )
    capacity = kv_capacity(model, serving, [g * GIB_BYTES for g in per_stage])
    mismatch: tuple[str, ...] = ()
    if log is not None:
        checks = cross_check(log, model, serving)
        if memory_source == "vllm log":
            low, high = kv_capacity_for_printed_gib(model, serving, per_stage)
            kv_range = (low.kv_tokens, high.kv_tokens)
        mismatch = explain_log_mismatch(log, model, serving, sources)
    requests = None
    if tokens_per_request is not None:
        tokens_per_request = require_positive("tokens_per_request", tokens_per_request)
        requests = concurrent_requests(
            model, serving, [w.available_kv_bytes for w in capacity.workers], tokens_per_request
        )
    return ReplicaKv(
        model=model,
        serving=serving,
        sources=tuple(sources.items()),
        available_kv_gib_per_stage=tuple(per_stage),
        memory_source=memory_source,
        capacity=capacity,
        kv_tokens_range=kv_range,
        log_checks=checks,
        log_mismatch=mismatch,
        estimate=estimate,
        tokens_per_request=tokens_per_request,
        concurrent_requests=requests,
        model_label=model_label(model, log),
    )


def model_label(model: ModelSpec, log: VllmStartupLog | None = None) -> str:
    """The model's name: the log's served model, else the config file's stem or folder."""
    if log is not None and log.model:
        return log.model
    path = PurePath(model.name)
    if path.stem == "config" and path.parent.name not in ("", "."):
        return path.parent.name
    return path.stem or model.name


@dataclass(frozen=True)
class GpuEstimate:
    """An ESTIMATE of the replica on a GPU before any log exists, or why there is none.

    ``replica`` is None when no estimate can be made; ``reason`` then says why
    (weights unknown, or nothing left for the cache).
    """

    gpu_name: str
    replica: ReplicaKv | None
    reason: str = ""

    def summary(self) -> str:
        """One sentence: the estimate and its error, or why there is none."""
        if self.replica is None:
            return f"No estimate for the {self.gpu_name}: {self.reason}."
        estimate = self.replica.estimate
        assert estimate is not None  # the replica was sized from the GPU's memory
        return (
            f"On the {self.gpu_name} the estimate is {estimate.available_kv_gib:.1f} GiB "
            f"of KV memory per GPU (give or take about {estimate.typical_error_gib:.1f} "
            f"GiB), or about {self.replica.capacity.kv_tokens:,} tokens."
        )


def estimate_on_gpu(
    replica: ReplicaKv,
    gpu_name: str,
    gpu_memory_gib: float,
    gpu_memory_utilization: float,
    weights_gib: float | None,
    weights_note: str = "",
) -> GpuEstimate:
    """The same replica, its memory estimated from the GPU's size instead of measured.

    Parameters
    ----------
    replica : ReplicaKv
        The measured replica whose settings to keep.
    gpu_name : str
        The GPU's name, for the text.
    gpu_memory_gib : float
        The GPU's memory as CUDA reports it. [GiB]
    gpu_memory_utilization : float
        ``--gpu-memory-utilization``. [fraction]
    weights_gib : float or None
        Total checkpoint weights, all GPUs; None when unknown. [GiB]
    weights_note : str
        Why the weights are unknown, when they are.

    Returns
    -------
    GpuEstimate
    """
    if weights_gib is None:
        return GpuEstimate(gpu_name, None, f"the weights' size is unknown ({weights_note})")
    serving = replica.serving
    try:
        estimated = replica_kv(
            replica.model,
            gpu_memory_gib=gpu_memory_gib,
            weights_gib=weights_gib,
            gpu_memory_utilization=gpu_memory_utilization,
            tensor_parallel_size=serving.tensor_parallel_size,
            pipeline_parallel_size=serving.pipeline_parallel_size,
            kv_cache_dtype=serving.kv_cache_dtype,
            block_size=serving.block_size,
            max_model_len=replica.capacity.max_model_len,
            max_num_batched_tokens=serving.max_num_batched_tokens,
            num_draft_layers=serving.num_draft_layers,
            vllm_version=serving.vllm_version,
            tokens_per_request=replica.tokens_per_request,
        )
    except PlannerInputError as error:
        return GpuEstimate(gpu_name, None, str(error))
    return GpuEstimate(gpu_name, estimated)


def explain_log_mismatch(
    log: VllmStartupLog, model: ModelSpec, serving: ServingSpec, sources: dict[str, str] | None = None
) -> tuple[str, ...]:
    """Say which printed figure disagrees, and which one field or setting would fix it.

    Every config field and serving setting the KV figures depend on is
    changed alone, over the values models and deployments commonly use; each
    change after which every printed figure is reproduced is one explanation.

    Parameters
    ----------
    log : VllmStartupLog
        The parsed log.
    model, serving : ModelSpec, ServingSpec
        What the figures were predicted from.
    sources : dict of str to str, optional
        Where each setting came from, quoted in the messages.

    Returns
    -------
    tuple of str
        Empty when the log agrees (or has nothing to check). Otherwise the
        first failing figure with its printed and predicted values, then one
        line per explanation, e.g. ``"num_key_value_heads: config.json says
        8, the log implies 4"``; or a line saying no single change explains it.
    """
    checks = _checks(log, model, serving)
    if checks is None or all(check.ok for check in checks):
        return ()
    sources = sources or {}
    failed = next(check for check in checks if not check.ok)
    lines = [
        f"{_FIGURES.get(failed.figure, failed.figure)}: the log printed "
        f"{_number(failed.printed)}, the model predicts {_range(failed.low, failed.high)}"
    ]
    config_name = PurePath(model.name).name or "the config"

    def setting(name: str, value, implied) -> str:
        where = sources.get(name, "")
        return f"{name}: the planner used {value}{f' ({where})' if where else ''}, the log implies {implied}"

    # A setting the log states itself is not second-guessed.
    fixed = {name for name, where in sources.items() if where.startswith("vllm log")}
    tps = (serving.tensor_parallel_size,) if "tensor_parallel_size" in fixed else _TRY_PARALLEL
    pps = (serving.pipeline_parallel_size,) if "pipeline_parallel_size" in fixed else _TRY_PARALLEL[:4]
    for tp in tps:
        for pp in pps:
            if (tp, pp) == (serving.tensor_parallel_size, serving.pipeline_parallel_size):
                continue
            if _fits(log, model, serving, tensor_parallel_size=tp, pipeline_parallel_size=pp):
                parts = []
                if tp != serving.tensor_parallel_size:
                    parts.append(setting("tensor_parallel_size", serving.tensor_parallel_size, tp))
                if pp != serving.pipeline_parallel_size:
                    parts.append(setting("pipeline_parallel_size", serving.pipeline_parallel_size, pp))
                lines.append(" and ".join(parts))
    for name, values in (
        ("kv_cache_dtype", _TRY_KV_DTYPES),
        ("block_size", _TRY_BLOCK_SIZES),
        ("max_num_batched_tokens", _TRY_BATCHED_TOKENS),
        ("num_draft_layers", _TRY_DRAFT_LAYERS),
    ):
        if name in fixed:
            continue
        current = getattr(serving, name)
        for value in values:
            if value != current and _fits(log, model, serving, **{name: value}):
                lines.append(setting(name, current, value))
    current_rule = kv_rule(serving.vllm_version, serving.engine)
    for version in () if "vllm_version" in fixed else _TRY_VERSIONS:
        rule = kv_rule(version)
        if rule != current_rule and _fits(log, model, serving, vllm_version=version, engine=None):
            lines.append(
                setting("vllm_version", serving.vllm_version, f"a release with the {rule!r} rule (e.g. {version})")
            )

    def field(key: str, attribute: str, values) -> None:
        current = getattr(model, attribute)
        for value in values:
            if value == current:
                continue
            try:
                changed = replace(model, **{attribute: value})
            except PlannerInputError:
                continue
            if _fits_model(log, changed, serving):
                lines.append(f"{key}: {config_name} says {current}, the log implies {value}")

    layers = model.num_layers
    field("num_hidden_layers", "num_layers", range(max(1, layers // 2), 2 * layers + 1))
    if not model.use_mla:
        field("num_key_value_heads", "num_kv_heads", [h for h in _TRY_KV_HEADS if h <= model.num_attention_heads])
        field("head_dim", "head_dim", _TRY_HEAD_DIMS)
    else:
        field("kv_lora_rank + qk_rope_head_dim", "head_dim", _TRY_HEAD_DIMS)
    if len(lines) == 1:
        lines.append("no single config field or setting explains it")
    return tuple(lines)


_FIGURES = {
    "kv_cache_tokens": "GPU KV cache size",
    "gpu_blocks": "# GPU blocks",
    "max_concurrency": "Maximum concurrency",
}


def _number(value: float) -> str:
    return f"{value:,.2f}" if value != int(value) else f"{int(value):,}"


def _range(low: float, high: float) -> str:
    if _number(low) == _number(high):
        return _number(low)
    return f"{_number(low)} to {_number(high)}"


def _checks(log, model, serving) -> tuple[LogCheck, ...] | None:
    try:
        return cross_check(log, model, serving)
    except PlannerInputError:
        return None


def _fits(log, model, serving, **changes) -> bool:
    try:
        changed = replace(serving, **changes)
    except PlannerInputError:
        return False
    return _fits_model(log, model, changed)


def _fits_model(log, model, serving) -> bool:
    try:
        checks = _checks(log, model, serving)
    except PlannerInputError:
        return False
    if not checks:
        return False
    return all(check.ok for check in checks)


def _parallel_from_workers(log: VllmStartupLog, tp: int, pp: int, sources: dict[str, str]) -> tuple[int, int]:
    """Fill the parallel sizes from worker labels, or refuse settings the labels rule out."""
    label_tp, label_pp, workers = log.workers_seen()
    if sources["tensor_parallel_size"] == "default" and label_tp > tp:
        tp, sources["tensor_parallel_size"] = label_tp, "vllm log worker labels"
    if sources["pipeline_parallel_size"] == "default" and label_pp > pp:
        pp, sources["pipeline_parallel_size"] = label_pp, "vllm log worker labels"
    if tp * pp < workers or tp < label_tp or pp < label_pp:
        named = [name for name in ("tensor_parallel_size", "pipeline_parallel_size") if sources[name] == "vllm log"]
        hint = (
            "the log names neither size: give both"
            if not named
            else f"the log itself names {' and '.join(named)}: check it is the whole log"
        )
        raise PlannerInputError(
            f"{log.source}: KV memory lines come from {workers} workers (labels up to "
            f"{workers - 1}), so one replica has at least {workers} GPUs, but "
            f"tensor_parallel_size {tp} ({sources['tensor_parallel_size']}) x "
            f"pipeline_parallel_size {pp} ({sources['pipeline_parallel_size']}) is {tp * pp}; "
            f"{hint} (tensor x pipeline = GPUs of one replica)"
        )
    return tp, pp


def _log_memory_per_stage(log: VllmStartupLog, tp: int, pp: int) -> list[float]:
    """The smallest printed memory of each stage's workers (vLLM keeps the minimum)."""
    per_stage: dict[int, list[float]] = {}
    for gib, worker in zip(log.available_kv_gib, log.available_kv_workers, strict=True):
        per_stage.setdefault(min(log.stage_of(worker, tp), pp - 1), []).append(gib)
    if min(min(v) for v in per_stage.values()) <= 0:
        raise PlannerInputError(
            f"{log.source}: 'Available KV cache memory' is {min(log.available_kv_gib)} GiB: "
            "vLLM had no memory left for the KV cache (weights and activations took it all)"
        )
    fallback = min(per_stage.get(0) or next(iter(per_stage.values())))
    return [min(per_stage[s]) if s in per_stage else fallback for s in range(pp)]
