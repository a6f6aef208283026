"""``planner kv``: KV-cache capacity of one replica, as vLLM reports it.

The available KV memory comes from one of three places: the number itself
(``--available-kv-gib``), the user's vLLM start-up log (``--vllm-log``, whose
printed figures are also checked against the model), or an ESTIMATE from the
GPU's size (``--gpu``), labelled as such in the output.
"""

from __future__ import annotations

import math
from pathlib import Path

from planner.capacity.kv_cache import (
    CURRENT_VLLM_VERSION,
    DEFAULT_MAX_NUM_BATCHED_TOKENS,
    GIB_BYTES,
)
from planner.capacity.replica_kv import replica_kv
from planner.cli.output import print_json, print_table
from planner.errors import PlannerInputError
from planner.readers.gpus import gpu_memory
from planner.readers.model_config import (
    read_model_config,
    read_safetensors_index,
    read_weight_bytes_estimate,
)
from planner.readers.vllm_log import read_vllm_log

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
            "prints them, and concurrent requests at a mean request length."
        ),
    )
    parser.add_argument("--config", required=True, metavar="PATH", help="the model's config.json")
    parser.add_argument(
        "--tp", type=int, default=None, metavar="N", help="tensor-parallel size (default 1, or the log's)"
    )
    parser.add_argument(
        "--pp", type=int, default=None, metavar="N", help="pipeline-parallel size (default 1, or the log's)"
    )
    parser.add_argument(
        "--kv-cache-dtype",
        choices=_CLI_KV_DTYPES,
        default=None,
        help="KV cache dtype (default auto = model dtype, or the log's)",
    )
    parser.add_argument("--block-size", type=int, default=None, metavar="N", help="tokens per KV block (default 16)")
    parser.add_argument(
        "--max-model-len",
        type=int,
        default=None,
        metavar="N",
        help="max model length [tokens] (default: the log's, else the config's)",
    )
    parser.add_argument(
        "--tokens-per-request", type=float, default=None, metavar="N", help="mean prompt + output tokens per request"
    )
    parser.add_argument(
        "--max-num-batched-tokens",
        type=int,
        default=None,
        metavar="N",
        help="scheduler token budget; caps sliding-window pages (default: "
        f"the log's, else {DEFAULT_MAX_NUM_BATCHED_TOKENS})",
    )
    parser.add_argument(
        "--num-draft-layers",
        type=int,
        default=0,
        metavar="N",
        help="speculative draft layers sharing the KV pool (EAGLE: 1)",
    )
    parser.add_argument(
        "--vllm-version",
        default=None,
        metavar="X.Y.Z",
        help=f"vLLM release whose rule to follow (default: the log's, else {CURRENT_VLLM_VERSION})",
    )
    source = parser.add_mutually_exclusive_group(required=True)
    source.add_argument(
        "--available-kv-gib", type=float, metavar="X", help="vLLM's 'Available KV cache memory' of one GPU [GiB]"
    )
    source.add_argument("--vllm-log", metavar="FILE", help="a vLLM start-up log to read the available memory from")
    source.add_argument("--gpu", metavar="NAME", help="estimate the memory from this GPU's size (see data/gpus.csv)")
    parser.add_argument(
        "--gpu-memory-utilization",
        type=float,
        default=0.9,
        metavar="F",
        help="with --gpu: fraction of GPU memory vLLM may use (default 0.9)",
    )
    parser.add_argument(
        "--weights-gib",
        type=float,
        default=None,
        metavar="X",
        help="with --gpu: total weight size of the checkpoint [GiB]",
    )
    parser.add_argument(
        "--safetensors-index",
        metavar="FILE",
        default=None,
        help="with --gpu: model.safetensors.index.json for the weight size",
    )
    parser.add_argument(
        "--gpus-csv",
        metavar="FILE",
        default=str(DEFAULT_GPUS_CSV),
        help="GPU memory table (default: the bundled data/gpus.csv)",
    )
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    parser.set_defaults(func=run)


def run(args) -> int:
    """Compute and print the KV-cache capacity; return the exit status."""
    model = read_model_config(args.config)
    log = read_vllm_log(args.vllm_log) if args.vllm_log else None
    gpu_gib = weights_gib = weights_source = None
    if args.gpu:
        gpu_gib = gpu_memory(args.gpu, Path(args.gpus_csv)).usable_gib
        weights_gib, weights_source = _weights_gib(args)
    tokens = None
    if args.tokens_per_request is not None:
        tokens = _positive("--tokens-per-request", args.tokens_per_request)
    replica = replica_kv(
        model,
        log=log,
        available_kv_gib=(
            None if args.available_kv_gib is None else _positive("--available-kv-gib", args.available_kv_gib)
        ),
        gpu_memory_gib=gpu_gib,
        weights_gib=weights_gib,
        gpu_memory_utilization=args.gpu_memory_utilization,
        tensor_parallel_size=args.tp,
        pipeline_parallel_size=args.pp,
        kv_cache_dtype=args.kv_cache_dtype,
        block_size=args.block_size,
        max_model_len=args.max_model_len,
        max_num_batched_tokens=args.max_num_batched_tokens,
        num_draft_layers=args.num_draft_layers,
        vllm_version=args.vllm_version,
        tokens_per_request=tokens,
    )
    result = replica.as_dict()
    if replica.estimate is not None:
        result["estimate"].update(gpu=args.gpu, weights_source=weights_source)
    if args.json:
        print_json(result)
    else:
        _print_readable(result, replica.estimate)
    return 0


def _positive(flag: str, value: float) -> float:
    if not math.isfinite(value) or value <= 0:
        raise PlannerInputError(f"{flag} must be a number > 0, got {value!r}")
    return value


def _weights_gib(args) -> tuple[float, str]:
    """Total checkpoint weights [GiB] and where the figure came from."""
    if args.weights_gib is not None:
        return _positive("--weights-gib", args.weights_gib), "--weights-gib"
    if args.safetensors_index:
        return (
            read_safetensors_index(args.safetensors_index) / GIB_BYTES,
            f"metadata.total_size of {args.safetensors_index}",
        )
    weight_bytes, source = read_weight_bytes_estimate(args.config)
    return weight_bytes / GIB_BYTES, source


def _print_readable(result: dict, estimate) -> None:
    rows = [
        ("model", f"{result['model']} ({result['model_type']})"),
        (
            "parallelism",
            f"TP {result['tensor_parallel_size']} x PP "
            f"{result['pipeline_parallel_size']} "
            f"({result['settings_source']['tensor_parallel_size']})",
        ),
        ("KV dtype", f"{result['kv_cache_dtype']} ({result['kv_dtype_bytes']} B)"),
        ("vLLM rule", f"{result['rule']} (vLLM {result['vllm_version']}, {result['settings_source']['vllm_version']})"),
        ("available KV memory", f"{result['available_kv_gib']:.2f} GiB per GPU ({result['available_kv_source']})"),
        ("bytes per token per GPU", result["bytes_per_token"]),
        ("KV cache groups", f"{result['num_kv_cache_groups']} ({result['padding_layers']} padding layers)"),
        ("GPU KV cache size", f"{result['kv_tokens']:,} tokens"),
        (f"max concurrency @ {result['max_model_len']:,}", result["max_concurrency_printed"]),
    ]
    if "concurrent_requests" in result:
        rows.append((f"requests @ {result['tokens_per_request']:,.0f} tokens", f"{result['concurrent_requests']:.1f}"))
    if "kv_tokens_range" in result:
        low, high = result["kv_tokens_range"]
        rows.append(("tokens over print rounding", f"{low:,} - {high:,}"))
        rows.append(("log consistent with model", "yes" if result["log_consistent"] else "NO"))
    print_table(rows, title="KV-cache capacity of one replica")
    mismatch = result.get("log_mismatch") or []
    if mismatch:
        print(f"  log and model disagree. {mismatch[0]}.")
        if mismatch[1].startswith("no single"):
            print(f"  {mismatch[1].capitalize()}.")
        else:
            print("  Each of these alone would make them agree:")
            for line in mismatch[1:]:
                print(f"    - {line}")
    if estimate is not None:
        print(f"  ESTIMATE: {estimate.note}")
        print(f"  weights: {estimate.weights_gib:.2f} GiB per GPU ({result['estimate']['weights_source']})")
