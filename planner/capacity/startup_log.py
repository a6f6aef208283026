"""The ``startup_log`` module holds what a vLLM start-up log states and checks it against the model.

:class:`VllmStartupLog` is what :func:`planner.readers.vllm_log.read_vllm_log`
finds in a log (the KV-cache figures vLLM printed and the settings it shows);
:func:`cross_check` compares those figures with what
:mod:`planner.capacity.kv_cache` predicts, within the log's print rounding.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from dataclasses import dataclass, field

from planner.capacity.kv_cache import GIB_BYTES, KvCapacity, ModelSpec, ServingSpec, kv_capacity
from planner.errors import PlannerInputError

__all__ = ["LogCheck", "VllmStartupLog", "cross_check"]


@dataclass(frozen=True)
class VllmStartupLog:
    """The KV-cache figures and settings found in one vLLM start-up log.

    Memory figures are as printed (GiB rounded to two decimals), in the order
    the lines appear; ``*_workers`` give the worker label of each line, or
    ``""`` when the line names none.
    """

    source: str
    version: str | None = None
    engine: str | None = None
    available_kv_gib: tuple[float, ...] = ()
    available_kv_workers: tuple[str, ...] = ()
    available_kv_exact_bytes: tuple[int, ...] = ()
    kv_cache_tokens: tuple[int, ...] = ()
    max_concurrency: tuple[tuple[int, float], ...] = ()
    gpu_blocks: tuple[int, ...] = ()
    cpu_blocks: tuple[int, ...] = ()
    tensor_parallel_size: int | None = None
    pipeline_parallel_size: int | None = None
    max_model_len: int | None = None
    kv_cache_dtype: str | None = None
    block_size: int | None = None
    max_num_batched_tokens: int | None = None
    model: str | None = None
    gpu_memory_utilization: float | None = None
    total_gpu_memory_gib: float | None = None
    weights_gib: float | None = None
    padding_layers: int | None = None
    notes: tuple[str, ...] = field(default_factory=tuple)

    def workers_seen(self) -> tuple[int, int, int]:
        """Lower bounds the worker labels put on the parallel sizes.

        Returns
        -------
        (int, int, int)
            ``(tensor, pipeline, workers)``: one more than the highest TP and
            PP index in ``Worker_PP<p>_TP<t>`` labels, and one more than the
            highest worker number in any label (``rank=3`` means at least four
            GPUs). ``(1, 1, 1)`` when no line names its worker.
        """
        tensor = pipeline = workers = 1
        for worker in self.available_kv_workers:
            if match := re.fullmatch(r"pp(\d+)/tp(\d+)", worker):
                pipeline = max(pipeline, int(match.group(1)) + 1)
                tensor = max(tensor, int(match.group(2)) + 1)
                workers = max(workers, pipeline * tensor)
            elif match := re.fullmatch(r"rank=(\d+)", worker):
                workers = max(workers, int(match.group(1)) + 1)
        return tensor, pipeline, workers

    def stage_of(self, worker: str, tensor_parallel_size: int) -> int:
        """Pipeline stage of a worker label (``"pp1/tp0"`` or ``"rank=5"``); 0 when unknown."""
        match = re.fullmatch(r"pp(\d+)/tp\d+", worker)
        if match:
            return int(match.group(1))
        match = re.fullmatch(r"rank=(\d+)", worker)
        if match:
            return int(match.group(1)) // tensor_parallel_size
        return 0


@dataclass(frozen=True)
class LogCheck:
    """One printed figure against the interval the model predicts for it.

    ``low`` and ``high`` bound the prediction over the printed GiB's rounding
    interval; ``ok`` says whether the printed value lies within them.
    """

    figure: str
    worker: str
    printed: float
    low: float
    high: float

    @property
    def ok(self) -> bool:
        """True when the printed figure lies in the predicted interval."""
        return self.low <= self.printed <= self.high


def cross_check(log: VllmStartupLog, model: ModelSpec, serving: ServingSpec, decimals: int = 2) -> tuple[LogCheck, ...]:
    """Compare a log's token, block and concurrency lines with the model's prediction.

    Each printed "Available KV cache memory" stands for an interval (two
    decimals of GiB); the model's figures at both ends bound what vLLM could
    have printed. Worker lines are paired with pipeline stages through their
    rank labels; lines without labels count as stage 0.

    Returns
    -------
    tuple of LogCheck
        One per printed token, block or concurrency figure that can be
        checked; empty when the log has no memory line.
    """
    if not log.available_kv_gib:
        return ()
    tp = serving.tensor_parallel_size
    stages = serving.pipeline_parallel_size
    half = 0.5 * 10.0**-decimals
    per_stage: dict[int, list[float]] = {}
    for gib, worker in zip(log.available_kv_gib, log.available_kv_workers, strict=True):
        stage = min(log.stage_of(worker, tp), stages - 1)
        per_stage.setdefault(stage, []).append(gib)
    if any(g <= 0 for values in per_stage.values() for g in values):
        raise PlannerInputError(
            f"{log.source}: 'Available KV cache memory' is not positive "
            f"({min(log.available_kv_gib)} GiB): vLLM had no memory for the cache"
        )
    # A stage without its own line is assumed to have stage 0's memory.
    fallback = per_stage.get(0) or next(iter(per_stage.values()))
    lows, highs = [], []
    for stage in range(stages):
        values = per_stage.get(stage, fallback)
        lows.append((min(values) - half) * GIB_BYTES)
        highs.append((max(values) + half) * GIB_BYTES - 1)
    if log.available_kv_exact_bytes:
        # The exact lines name no stage; they bound every worker's own figure.
        lows = [float(min(log.available_kv_exact_bytes))] * stages
        highs = [float(max(log.available_kv_exact_bytes))] * stages
    low: KvCapacity = kv_capacity(model, serving, lows)
    high: KvCapacity = kv_capacity(model, serving, highs)
    # A printed line is explained by the engine's figure or, for versions that
    # print per worker, by one worker's own figure.
    token_ranges = [(low.kv_tokens, high.kv_tokens)] + [
        (lw.kv_tokens_logged, hw.kv_tokens_logged) for lw, hw in zip(low.workers, high.workers, strict=True)
    ]
    block_ranges = [(min(w.num_blocks for w in low.workers), min(w.num_blocks for w in high.workers))] + [
        (lw.num_blocks, hw.num_blocks) for lw, hw in zip(low.workers, high.workers, strict=True)
    ]
    concurrency_ranges = [(low.max_concurrency, high.max_concurrency)] + [
        (lw.max_concurrency_logged, hw.max_concurrency_logged) for lw, hw in zip(low.workers, high.workers, strict=True)
    ]
    checks = [_check("kv_cache_tokens", t, token_ranges) for t in log.kv_cache_tokens]
    checks += [_check("gpu_blocks", b, block_ranges) for b in log.gpu_blocks]
    for max_len, printed in log.max_concurrency:
        if max_len != low.max_model_len:
            continue
        # vLLM prints %.2f: compare with the rounded prediction.
        rounded = [(_round2(a), _round2(b)) for a, b in concurrency_ranges]
        checks.append(_check("max_concurrency", printed, rounded))
    return tuple(checks)


def _round2(value: float) -> float:
    return math.floor(value * 100 + 0.5) / 100


def _check(figure: str, printed: float, ranges: Sequence[tuple[float, float]]) -> LogCheck:
    for low, high in ranges:
        if low <= printed <= high:
            return LogCheck(figure, "", printed, low, high)
    low, high = min(ranges, key=lambda r: min(abs(printed - r[0]), abs(printed - r[1])))
    return LogCheck(figure, "", printed, low, high)
