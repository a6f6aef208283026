"""``planner kv``: KV-cache capacity of one replica, as vLLM reports it.

The available KV memory comes from one of three places: the number itself
(``--available-kv-gib``), the user's vLLM start-up log (``--vllm-log``, whose
printed figures are also checked against the model), or an ESTIMATE from the
GPU's size (``--gpu``), labelled as such in the output.
"""

from __future__ import annotations

import math
from pathlib import Path

from planner.cli.output import print_json, print_table
from planner.errors import PlannerInputError
from planner.kv_cache import (
    CURRENT_VLLM_VERSION,
    DEFAULT_MAX_NUM_BATCHED_TOKENS,
    GIB_BYTES,
    KV_CACHE_DTYPES,
    ServingSpec,
    available_kv_memory_estimate,
    concurrent_requests,
    kv_capacity,
    kv_capacity_for_printed_gib,
    kv_dtype_bytes,
    kv_rule,
)
from planner.readers.gpus import gpu_memory
from planner.readers.model_config import (
    read_model_config,
    read_safetensors_index,
    read_weight_bytes_estimate,
)
from planner.readers.vllm_log import cross_check, read_vllm_log

DEFAULT_GPUS_CSV = Path(__file__).resolve().parents[2] / "data" / "gpus.csv"
_CLI_KV_DTYPES = ("auto", "fp8", "fp8_e4m3", "fp8_e5m2", "bfloat16", "float16")


def register(subparsers) -> None:
    """Add the ``kv`` subcommand."""
    parser = subparsers.add_parser(
        "kv",
        help="KV-cache tokens and concurrency of one replica, exact to vLLM's log",
        description=(
            "KV-cache capacity of one vLLM replica from the model's config.json: bytes per "
            "token per GPU, 'GPU KV cache size' tokens and 'Maximum concurrency' as vLLM "
            "prints them, and concurrent requests at a mean request length."),
    )
    parser.add_argument("--config", required=True, metavar="PATH",
                        help="the model's config.json")
    parser.add_argument("--tp", type=int, default=None, metavar="N",
                        help="tensor-parallel size (default 1, or the log's)")
    parser.add_argument("--pp", type=int, default=None, metavar="N",
                        help="pipeline-parallel size (default 1, or the log's)")
    parser.add_argument("--kv-cache-dtype", choices=_CLI_KV_DTYPES, default=None,
                        help="KV cache dtype (default auto = model dtype, or the log's)")
    parser.add_argument("--block-size", type=int, default=None, metavar="N",
                        help="tokens per KV block (default 16)")
    parser.add_argument("--max-model-len", type=int, default=None, metavar="N",
                        help="max model length [tokens] (default: the log's, else the config's)")
    parser.add_argument("--tokens-per-request", type=float, default=None, metavar="N",
                        help="mean prompt + output tokens per request")
    parser.add_argument("--max-num-batched-tokens", type=int, default=None, metavar="N",
                        help="scheduler token budget; caps sliding-window pages (default: "
                             f"the log's, else {DEFAULT_MAX_NUM_BATCHED_TOKENS})")
    parser.add_argument("--num-draft-layers", type=int, default=0, metavar="N",
                        help="speculative draft layers sharing the KV pool (EAGLE: 1)")
    parser.add_argument("--vllm-version", default=None, metavar="X.Y.Z",
                        help=f"vLLM release whose rule to follow (default: the log's, else "
                             f"{CURRENT_VLLM_VERSION})")
    source = parser.add_mutually_exclusive_group(required=True)
    source.add_argument("--available-kv-gib", type=float, metavar="X",
                        help="vLLM's 'Available KV cache memory' of one GPU [GiB]")
    source.add_argument("--vllm-log", metavar="FILE",
                        help="a vLLM start-up log to read the available memory from")
    source.add_argument("--gpu", metavar="NAME",
                        help="estimate the memory from this GPU's size (see data/gpus.csv)")
    parser.add_argument("--gpu-memory-utilization", type=float, default=0.9, metavar="F",
                        help="with --gpu: fraction of GPU memory vLLM may use (default 0.9)")
    parser.add_argument("--weights-gib", type=float, default=None, metavar="X",
                        help="with --gpu: total weight size of the checkpoint [GiB]")
    parser.add_argument("--safetensors-index", metavar="FILE", default=None,
                        help="with --gpu: model.safetensors.index.json for the weight size")
    parser.add_argument("--gpus-csv", metavar="FILE", default=str(DEFAULT_GPUS_CSV),
                        help="GPU memory table (default: the bundled data/gpus.csv)")
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    parser.set_defaults(func=run)


def run(args) -> int:
    """Compute and print the KV-cache capacity; return the exit status."""
    model = read_model_config(args.config)
    log = read_vllm_log(args.vllm_log) if args.vllm_log else None

    def pick(flag, from_log, default):
        if flag is not None:
            return flag, "argument"
        if from_log is not None:
            return from_log, "vllm log"
        return default, "default"

    tp, _ = pick(args.tp, log and log.tensor_parallel_size, 1)
    pp, _ = pick(args.pp, log and log.pipeline_parallel_size, 1)
    kv_dtype, _ = pick(args.kv_cache_dtype, log and log.kv_cache_dtype, "auto")
    block, _ = pick(args.block_size, log and log.block_size, 16)
    version, _ = pick(args.vllm_version, log and log.version, CURRENT_VLLM_VERSION)
    batched, _ = pick(args.max_num_batched_tokens, log and log.max_num_batched_tokens,
                      DEFAULT_MAX_NUM_BATCHED_TOKENS)
    max_len, max_len_source = pick(args.max_model_len, log and log.max_model_len,
                                   model.max_position_embeddings)
    if max_len_source == "default":
        max_len_source = "config (as vLLM derives it)"
    if kv_dtype not in KV_CACHE_DTYPES:
        raise PlannerInputError(f"kv cache dtype {kv_dtype!r} from the log is not one vLLM "
                                f"documents; pass --kv-cache-dtype")
    # A log written by the V0 engine (0.8-0.10 could still run it) follows V0's rule.
    engine = "v0" if (log and log.engine == "v0") else None
    try:
        kv_rule(version, engine)
    except PlannerInputError:
        engine = None
    serving = ServingSpec(
        tensor_parallel_size=tp, pipeline_parallel_size=pp, kv_cache_dtype=kv_dtype,
        block_size=block, max_model_len=max_len,
        max_num_batched_tokens=batched,
        num_draft_layers=args.num_draft_layers, vllm_version=version, engine=engine)

    result: dict = {
        "model": model.name,
        "model_type": model.model_type,
        "tensor_parallel_size": tp,
        "pipeline_parallel_size": pp,
        "kv_cache_dtype": kv_dtype,
        "kv_dtype_bytes": kv_dtype_bytes(model, serving),
        "block_size": block,
        "vllm_version": version,
        "max_model_len": max_len,
        "max_model_len_source": max_len_source,
        "max_num_batched_tokens": batched,
    }
    estimate = None
    if args.available_kv_gib is not None:
        available_gib = _positive("--available-kv-gib", args.available_kv_gib)
        memory_source = "argument"
        capacity = kv_capacity(model, serving, available_gib * GIB_BYTES)
    elif log is not None:
        if not log.available_kv_gib:
            raise PlannerInputError(
                f"{log.source}: no 'Available KV cache memory' line (nor the V0 equivalents); "
                "pass --available-kv-gib instead")
        per_stage = _log_memory_per_stage(log, tp, pp)
        available_gib = min(per_stage)
        memory_source = "vllm log"
        capacity = kv_capacity(model, serving, [g * GIB_BYTES for g in per_stage])
        low, high = kv_capacity_for_printed_gib(model, serving, per_stage)
        result["kv_tokens_range"] = [low.kv_tokens, high.kv_tokens]
        checks = cross_check(log, model, serving)
        result["log_check"] = [
            {"figure": c.figure, "printed": c.printed, "predicted_low": c.low,
             "predicted_high": c.high, "ok": c.ok} for c in checks]
        result["log_consistent"] = all(c.ok for c in checks)
    else:
        estimate, weights_source = _estimate(args, model, tp, pp)
        available_gib = estimate.available_kv_gib
        memory_source = "estimate"
        capacity = kv_capacity(model, serving, estimate.available_kv_bytes)
        result["estimate"] = {
            "gpu": args.gpu, "requested_gib": estimate.requested_gib,
            "weights_per_gpu_gib": estimate.weights_gib, "weights_source": weights_source,
            "activation_gib": estimate.activation_gib, "non_torch_gib": estimate.non_torch_gib,
            "typical_error_gib": estimate.typical_error_gib, "note": estimate.note}

    result.update({
        "available_kv_gib": available_gib,
        "available_kv_source": memory_source,
        "is_estimate": memory_source == "estimate",
        "rule": capacity.rule,
        "bytes_per_token": capacity.bytes_per_token,
        "page_size_bytes": capacity.page_size_bytes,
        "num_kv_cache_groups": capacity.num_groups,
        "padding_layers": capacity.padding_layers,
        "num_blocks": capacity.num_blocks,
        "kv_tokens": capacity.kv_tokens,
        "max_concurrency": capacity.max_concurrency,
        "max_concurrency_printed": f"{capacity.max_concurrency:.2f}x",
    })
    if args.tokens_per_request is not None:
        tokens = _positive("--tokens-per-request", args.tokens_per_request)
        result["tokens_per_request"] = tokens
        result["concurrent_requests"] = concurrent_requests(
            model, serving, [w.available_kv_bytes for w in capacity.workers], tokens)
    if args.json:
        print_json(result)
    else:
        _print_readable(result, estimate)
    return 0


def _positive(flag: str, value: float) -> float:
    if not math.isfinite(value) or value <= 0:
        raise PlannerInputError(f"{flag} must be a number > 0, got {value!r}")
    return value


def _log_memory_per_stage(log, tp: int, pp: int) -> list[float]:
    """The smallest printed memory of each stage's workers (vLLM keeps the minimum)."""
    per_stage: dict[int, list[float]] = {}
    for gib, worker in zip(log.available_kv_gib, log.available_kv_workers, strict=True):
        per_stage.setdefault(min(log.stage_of(worker, tp), pp - 1), []).append(gib)
    if min(min(v) for v in per_stage.values()) <= 0:
        raise PlannerInputError(
            f"{log.source}: 'Available KV cache memory' is {min(log.available_kv_gib)} GiB: "
            "vLLM had no memory left for the KV cache (weights and activations took it all)")
    fallback = min(per_stage.get(0) or next(iter(per_stage.values())))
    return [min(per_stage[s]) if s in per_stage else fallback for s in range(pp)]


def _estimate(args, model, tp: int, pp: int):
    gpu_gib = gpu_memory(args.gpu, Path(args.gpus_csv)).usable_gib
    if args.weights_gib is not None:
        weights_gib = _positive("--weights-gib", args.weights_gib)
        weights_source = "--weights-gib"
    elif args.safetensors_index:
        weights_gib = read_safetensors_index(args.safetensors_index) / GIB_BYTES
        weights_source = f"metadata.total_size of {args.safetensors_index}"
    else:
        weight_bytes, weights_source = read_weight_bytes_estimate(args.config)
        weights_gib = weight_bytes / GIB_BYTES
    estimate = available_kv_memory_estimate(gpu_gib, args.gpu_memory_utilization,
                                            weights_gib / (tp * pp))
    return estimate, weights_source


def _print_readable(result: dict, estimate) -> None:
    rows = [
        ("model", f"{result['model']} ({result['model_type']})"),
        ("parallelism", f"TP {result['tensor_parallel_size']} x PP "
                        f"{result['pipeline_parallel_size']}"),
        ("KV dtype", f"{result['kv_cache_dtype']} ({result['kv_dtype_bytes']} B)"),
        ("vLLM rule", f"{result['rule']} (vLLM {result['vllm_version']})"),
        ("available KV memory", f"{result['available_kv_gib']:.2f} GiB per GPU "
                                f"({result['available_kv_source']})"),
        ("bytes per token per GPU", result["bytes_per_token"]),
        ("KV cache groups", f"{result['num_kv_cache_groups']} "
                            f"({result['padding_layers']} padding layers)"),
        ("GPU KV cache size", f"{result['kv_tokens']:,} tokens"),
        (f"max concurrency @ {result['max_model_len']:,}", result["max_concurrency_printed"]),
    ]
    if "concurrent_requests" in result:
        rows.append((f"requests @ {result['tokens_per_request']:,.0f} tokens",
                     f"{result['concurrent_requests']:.1f}"))
    if "kv_tokens_range" in result:
        low, high = result["kv_tokens_range"]
        rows.append(("tokens over print rounding", f"{low:,} - {high:,}"))
        rows.append(("log consistent with model", "yes" if result["log_consistent"] else "NO"))
    print_table(rows, title="KV-cache capacity of one replica")
    if estimate is not None:
        print(f"  ESTIMATE: {estimate.note}")
        print(f"  weights: {estimate.weights_gib:.2f} GiB per GPU ({result['estimate']['weights_source']})")
