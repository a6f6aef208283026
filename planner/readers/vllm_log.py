"""Read the KV-cache figures out of a vLLM start-up log, whatever the version.

vLLM has printed its KV-cache sizing in several forms over the years:

* V1 (0.9 and later): "Available KV cache memory: 13.76 GiB" (one line per
  worker), "GPU KV cache size: 257,584 tokens", "Maximum concurrency for
  32,768 tokens per request: 7.86x" (0.34 joins the last two in one line);
  0.10.2 also printed "Current kv cache memory in use is N bytes".
* V1 before February 2025: "# GPU blocks: N".
* V0, late 2024: "Memory profiling results: ... kv_cache_size=3.81GiB ...".
* V0, 0.7-0.8: "... the rest of the memory reserved for KV Cache is 8.69GiB."
* V0: "# GPU blocks: N, # CPU blocks: M" ("# cuda blocks" in 0.8).

The tensor and pipeline parallel sizes are read wherever the log shows them:
the engine's "with config:" dump (``tensor_parallel_size=2,
pipeline_parallel_size=2``), the "non-default args: {...}" line, and a
command line (``--tensor-parallel-size 2``, ``--tensor-parallel-size=2``,
``-tp 2``, ``-pp 2``), in that order of trust. Worker labels such as
``Worker_PP1_TP0`` or ``rank=3`` give lower bounds (see
:meth:`VllmStartupLog.workers_seen`).

:func:`read_vllm_log` collects all of them, with the worker each came from
when the line says so, and the settings the log reveals (version, tensor and
pipeline parallel sizes, max model length, KV dtype, block size, scheduler
token budget).
:func:`planner.capacity.startup_log.cross_check` compares the figures with what
:mod:`planner.capacity.kv_cache` predicts for a model, within the printed rounding.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

from planner.capacity.startup_log import VllmStartupLog
from planner.errors import PlannerInputError

__all__ = ["parse_vllm_log", "read_vllm_log"]

_ANSI = re.compile(r"\x1b\[[0-9;]*m|\^\[\[[0-9;]*m")
_NUMBER = r"(-?[0-9][0-9,]*(?:\.[0-9]+)?)"

_AVAILABLE = re.compile(r"Available KV cache memory:\s*" + _NUMBER + r"\s*GiB")
_V0_REST = re.compile(r"the rest of the memory reserved for KV Cache is\s*" + _NUMBER + r"\s*GiB")
_V0_PROFILE = re.compile(r"kv_cache_size=" + _NUMBER + r"\s*GiB")
_EXACT_BYTES = re.compile(r"kv cache memory in use is\s*" + _NUMBER + r"\s*bytes", re.I)
_TOKENS = re.compile(r"GPU(?: \+ host)? KV cache size:\s*" + _NUMBER + r"\s*tokens")
_CONCURRENCY = re.compile(r"Maximum concurrency for\s*" + _NUMBER + r"\s*tokens per request:\s*" + _NUMBER + r"\s*x")
_GPU_BLOCKS = re.compile(r"#?\s*(?:GPU|gpu|cuda|CUDA) blocks:\s*" + _NUMBER)
_CPU_BLOCKS = re.compile(r"#\s*CPU blocks:\s*" + _NUMBER)
_VERSION_PATTERNS = (
    re.compile(r"vLLM API server version\s+v?([0-9][\w.+-]*)"),
    re.compile(r"Initializing an? (?:V1 )?LLM engine \(v([0-9][\w.+-]*)\)"),
    re.compile(r"\bversion\s+v?(0\.[0-9]+[\w.+-]*)"),
)
_WORKER_PATTERNS = (
    # V1 multiprocess workers: "Worker" plus _DP<n>, _PP<n>, _TP<n>, _EP<n> parts for the
    # dimensions larger than one ("Worker_PP1_TP0", "Worker_TP3_EP3", "Worker_PP1").
    re.compile(r"\(Worker((?:_[A-Z]+\d+)+)[ )]"),
    re.compile(r"\((?:VllmWorker|RayWorkerWrapper|Worker)[^)]*?rank=(\d+)"),
)
_MAX_LEN = re.compile(r"Using max model len\s*" + _NUMBER)
_WEIGHTS = re.compile(r"(?:Model loading took|Loading model weights took)\s*" + _NUMBER + r"\s*(GiB|GB)")
_TOTAL_GPU = re.compile(r"total_gpu_memory[ =(]*" + _NUMBER + r"\s*GiB")
_UTILIZATION = re.compile(r"gpu_memory_utilization[ =(']*:?\s*" + _NUMBER)
# "Chunked prefill is enabled with max_num_batched_tokens=8192." (the last one is final)
_BATCHED_TOKENS = re.compile(r"max_num_batched_tokens=" + _NUMBER)
_MAMBA_BLOCK = re.compile(r"Setting attention block size to\s*" + _NUMBER + r"\s*tokens")
_PADDING = re.compile(r"Add\s*" + _NUMBER + r"\s*padding layers")
# key=value settings of the "with config:" dump, and the "non-default args: {...}" dict
_CONFIG_DUMP = re.compile(r"with config:\s*(.*)$")
_NON_DEFAULT = re.compile(r"non-default args:\s*(\{.*\})\s*$")
# A command line in the log: "--tensor-parallel-size 2", "--tensor-parallel-size=2",
# "-tp 2", a YAML or JSON argument list ("--tensor-parallel-size", "2"); argparse also
# takes underscores and unambiguous prefixes ("--tensor_parallel 2").
# "tensor_parallel_size=2" or "'pipeline_parallel_size': 2" on any line (engine config,
# engine args, parallel config), not only after "with config:".
_PARALLEL_PAIR = re.compile(r"(?<![\w.])['\"]?(tensor|pipeline)_parallel_size['\"]?\s*[=:]\s*(\d+)(?![\w.])")
_ARG_SEP = r"""(?:\s*=\s*|['"]?(?:\s*,\s*|\s+)['"]?)"""
_COMMAND_LINE = {
    "tensor_parallel_size": (
        re.compile(r"(?<![\w-])(?:--tensor[-_]parallel(?:[-_]size)?|-tp)" + _ARG_SEP + r"(\d+)(?![\w.])"),
        int,
    ),
    "pipeline_parallel_size": (
        re.compile(r"(?<![\w-])(?:--pipeline[-_]parallel(?:[-_]size)?|-pp)" + _ARG_SEP + r"(\d+)(?![\w.])"),
        int,
    ),
    "max_model_len": (re.compile(r"(?<![\w-])--max[-_]model[-_]len" + _ARG_SEP + r"(\d+)(?![\w.])"), int),
    "block_size": (re.compile(r"(?<![\w-])--block[-_]size" + _ARG_SEP + r"(\d+)(?![\w.])"), int),
    "max_num_batched_tokens": (
        re.compile(r"(?<![\w-])--max[-_]num[-_]batched[-_]tokens" + _ARG_SEP + r"(\d+)(?![\w.])"),
        int,
    ),
    "kv_cache_dtype": (re.compile(r"(?<![\w-])--kv[-_]cache[-_]dtype" + _ARG_SEP + r"([a-z0-9_]+)"), str),
}


def read_vllm_log(path) -> VllmStartupLog:
    """Read a vLLM start-up log file; see :func:`parse_vllm_log`."""
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8", errors="replace")
    except FileNotFoundError:
        raise PlannerInputError(f"{path}: no such file") from None
    except IsADirectoryError:
        raise PlannerInputError(f"{path}: expected a log file, got a directory") from None
    return parse_vllm_log(text, source=str(path))


def parse_vllm_log(text: str, source: str = "log") -> VllmStartupLog:
    """Collect the KV-cache lines and serving settings of a vLLM start-up log.

    Parameters
    ----------
    text : str
        The log text (ANSI colours and container prefixes are fine).
    source : str
        Name used in messages.

    Returns
    -------
    VllmStartupLog

    Raises
    ------
    PlannerInputError
        When the text holds none of the KV-cache lines vLLM prints.
    """
    found: dict[str, list] = {
        k: [] for k in ("gib", "workers", "exact", "tokens", "concurrency", "gpu_blocks", "cpu_blocks", "notes")
    }
    settings: dict[str, object] = {}
    command_line: dict[str, object] = {}
    engine = None
    for raw in text.splitlines():
        line = _ANSI.sub("", raw)
        worker = _worker(line)
        for pattern, is_v0 in ((_AVAILABLE, False), (_V0_REST, True), (_V0_PROFILE, True)):
            match = pattern.search(line)
            if match:
                found["gib"].append(_float(match.group(1)))
                found["workers"].append(worker)
                engine = engine or ("v0" if is_v0 else "v1")
                break
        if match := _EXACT_BYTES.search(line):
            found["exact"].append(int(_float(match.group(1))))
        if match := _TOKENS.search(line):
            found["tokens"].append(int(_float(match.group(1))))
            engine = "v1"
        if match := _CONCURRENCY.search(line):
            found["concurrency"].append((int(_float(match.group(1))), _float(match.group(2))))
        if (match := _GPU_BLOCKS.search(line)) and "KV cache" not in line:
            found["gpu_blocks"].append(int(_float(match.group(1))))
            if cpu := _CPU_BLOCKS.search(line):
                found["cpu_blocks"].append(int(_float(cpu.group(1))))
                engine = engine or "v0"
        _settings(line, settings)
        _from_command_line(line, command_line)
        if match := _MAMBA_BLOCK.search(line):
            found["notes"].append(
                f"attention block size raised to {match.group(1)} tokens for Mamba layers: "
                "a hybrid model this planner does not size"
            )
        if match := _PADDING.search(line):
            settings["padding_layers"] = int(_float(match.group(1)))
    if not (found["gib"] or found["tokens"] or found["gpu_blocks"]):
        raise PlannerInputError(
            f"{source}: no KV-cache lines found; expected vLLM's 'Available KV cache memory', "
            "'GPU KV cache size' or '# GPU blocks' start-up lines"
        )
    merged = {**command_line, **settings}  # what the engine printed beats what the user typed
    if "max_model_len" not in merged and found["concurrency"]:
        # "Maximum concurrency for 1,024 tokens per request" names the max model length.
        merged["max_model_len"] = found["concurrency"][-1][0]
    return VllmStartupLog(
        source=source,
        engine=engine,
        available_kv_gib=tuple(found["gib"]),
        available_kv_workers=tuple(found["workers"]),
        available_kv_exact_bytes=tuple(found["exact"]),
        kv_cache_tokens=tuple(found["tokens"]),
        max_concurrency=tuple(found["concurrency"]),
        gpu_blocks=tuple(found["gpu_blocks"]),
        cpu_blocks=tuple(found["cpu_blocks"]),
        notes=tuple(found["notes"]),
        version=_text_setting(merged, "version"),
        tensor_parallel_size=_int_setting(merged, "tensor_parallel_size"),
        pipeline_parallel_size=_int_setting(merged, "pipeline_parallel_size"),
        max_model_len=_int_setting(merged, "max_model_len"),
        kv_cache_dtype=_text_setting(merged, "kv_cache_dtype"),
        block_size=_int_setting(merged, "block_size"),
        max_num_batched_tokens=_int_setting(merged, "max_num_batched_tokens"),
        model=_text_setting(merged, "model"),
        gpu_memory_utilization=_number_setting(merged, "gpu_memory_utilization"),
        total_gpu_memory_gib=_number_setting(merged, "total_gpu_memory_gib"),
        weights_gib=_number_setting(merged, "weights_gib"),
        padding_layers=_int_setting(merged, "padding_layers"),
    )


# The settings dict holds what the patterns parsed, plus the "non-default args" dict as
# literal_eval read it; a value of another type than the field's is not a setting vLLM printed.
def _int_setting(settings: dict[str, object], key: str) -> int | None:
    value = settings.get(key)
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _number_setting(settings: dict[str, object], key: str) -> float | None:
    value = settings.get(key)
    return value if isinstance(value, int | float) and not isinstance(value, bool) else None


def _text_setting(settings: dict[str, object], key: str) -> str | None:
    value = settings.get(key)
    return value if isinstance(value, str) else None


def _float(text: str) -> float:
    return float(text.replace(",", ""))


def _worker(line: str) -> str:
    match = _WORKER_PATTERNS[0].search(line)
    if match:
        parts = dict(re.findall(r"_([A-Z]+)(\d+)", match.group(1)))
        if "PP" in parts or "TP" in parts:
            return f"pp{parts.get('PP', '0')}/tp{parts.get('TP', '0')}"
    match = _WORKER_PATTERNS[1].search(line)
    if match:
        return f"rank={match.group(1)}"
    return ""


def _settings(line: str, settings: dict) -> None:
    if "version" not in settings:
        for pattern in _VERSION_PATTERNS:
            if match := pattern.search(line):
                settings["version"] = match.group(1).rstrip(".,)")
                break
    if match := _MAX_LEN.search(line):
        settings["max_model_len"] = int(_float(match.group(1)))
    if (match := _WEIGHTS.search(line)) and "weights_gib" not in settings:
        value = _float(match.group(1))
        # "GB" in these vLLM lines is GiB (it divides by 2**30).
        settings["weights_gib"] = value
    if match := _BATCHED_TOKENS.search(line):
        settings["max_num_batched_tokens"] = int(_float(match.group(1)))
    if match := _TOTAL_GPU.search(line):
        settings["total_gpu_memory_gib"] = _float(match.group(1))
    if match := _CONFIG_DUMP.search(line):
        _from_pairs(match.group(1), settings)
    for match in _PARALLEL_PAIR.finditer(line):
        settings.setdefault(f"{match.group(1)}_parallel_size", int(match.group(2)))
    if match := _NON_DEFAULT.search(line):
        _from_dict(match.group(1), settings)
    if "gpu_memory_utilization" not in settings and (match := _UTILIZATION.search(line)):
        settings["gpu_memory_utilization"] = _float(match.group(1))


_PAIR_KEYS = {
    "tensor_parallel_size": ("tensor_parallel_size", int),
    "pipeline_parallel_size": ("pipeline_parallel_size", int),
    "max_seq_len": ("max_model_len", int),
    "kv_cache_dtype": ("kv_cache_dtype", str),
    "block_size": ("block_size", int),
    "model": ("model", str),
}


def _from_pairs(text: str, settings: dict) -> None:
    for key, (name, kind) in _PAIR_KEYS.items():
        match = re.search(rf"(?<![\w.]){key}=('?)([^,')]+)\1", text)
        if match and match.group(2) not in ("None", ""):
            try:
                settings.setdefault(name, kind(match.group(2)))
            except ValueError:
                continue


def _from_command_line(line: str, found: dict) -> None:
    for name, (pattern, kind) in _COMMAND_LINE.items():
        for match in pattern.finditer(line):
            found[name] = kind(match.group(1))  # the last one given wins, as in argparse


def _from_dict(text: str, settings: dict) -> None:
    try:
        args = ast.literal_eval(text)
    except (ValueError, SyntaxError):
        # Values such as AttentionConfig(...) are not literals; read key by key.
        args = {}
        for key in (
            "tensor_parallel_size",
            "pipeline_parallel_size",
            "max_model_len",
            "block_size",
            "kv_cache_dtype",
            "model",
            "gpu_memory_utilization",
            "max_num_batched_tokens",
        ):
            match = re.search(rf"'{key}':\s*('([^']*)'|[0-9.]+)", text)
            if match:
                args[key] = (
                    match.group(2)
                    if match.group(2) is not None
                    else (float(match.group(1)) if "." in match.group(1) else int(match.group(1)))
                )
    if not isinstance(args, dict):
        return
    for key in (
        "tensor_parallel_size",
        "pipeline_parallel_size",
        "max_model_len",
        "block_size",
        "kv_cache_dtype",
        "model",
        "gpu_memory_utilization",
        "max_num_batched_tokens",
    ):
        if key in args and args[key] is not None:
            settings[key] = args[key]


# --------------------------------------------------------------------------------------
# Cross-check against a model
