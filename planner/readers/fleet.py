"""Read FLEET.yaml: the replica and fleet parameters of a simulation, every key optional.

Keys and defaults (units in the names; see :class:`planner.simulate.fleet.FleetSpec`
and :class:`planner.simulate.replica.ReplicaSpec` for their meaning)::

    fixed_ms: 6.0                  # step time = fixed_ms + per_sequence_ms x batch
    per_sequence_ms: 0.25
    prefill_ms_per_token: 0.0576   # a step's time per prompt token it carries (0: folded into the step time)
    max_num_batched_tokens: 2048   # vLLM --max-num-batched-tokens (null: prefill delays only its own request)
    max_num_seqs: 64               # vLLM --max-num-seqs
    kv_tokens: 200000              # vLLM's "GPU KV cache size" in tokens
    block_size_tokens: 16
    warmup_s: 60                   # pod request -> Ready
    warmup_distribution: fixed     # fixed | uniform | lognormal
    warmup_spread_s: 0
    gpus_per_replica: 1
    usd_per_gpu_hour: 4.0
    initial_replicas: null         # null = the autoscaler's minimum
    ttft_slo_s: 2.0
    itl_slo_ms: null
    scrape_interval_s: 15
    router: least-loaded           # least-loaded | round-robin
    termination_grace_period_s: 30
    pre_stop_s: 0
    shutdown_timeout_s: 0          # vLLM --shutdown-timeout (0 aborts at SIGTERM)
    tick_s: 1
    hpa_sync_period_s: 15
    seed: 0
    signals: {}                    # query or metric name -> simulated expression

Where the GPUs come from (optional; see :mod:`planner.simulate.supply`). Without
``nodes:`` every pod finds a GPU at once and ``warmup_s`` is its whole cold start::

    nodes:
      gpus_per_node: 8
      usd_per_node_hour: null      # null = gpus_per_node x usd_per_gpu_hour
      max_nodes: null              # quota; null = no limit
      initial_nodes: null          # null = what the initial pods and placeholders need
      provision_s: 0               # node request -> registered
      provision_distribution: fixed
      provision_spread_s: 0
      node_init_s: 0               # registered -> GPUs allocatable
      autoscaler: cluster-autoscaler   # or karpenter
      cluster_autoscaler: {scan_interval_s: 10, gpu_pod_scale_up_delay_s: 30,
                           scale_down_unneeded_s: 600, scale_down_delay_after_add_s: 600}
      karpenter: {batch_idle_s: 1, batch_max_s: 10, consolidate_after_s: 0}
      capacity_failure_frac: 0
      capacity_retry_s: 60
    pod:
      image_pull_s: 0              # on a node that has not run the image
      weights_load_s: 0
      warmup_s: 60                 # compile and CUDA graphs (the same key as above)
    placeholders: 0                # low-priority pause pods holding warm GPUs

The prefill cost is the fit of :func:`planner.simulate.calibration.fit_prefill`
on ``vllm_bench/aurotripathy-llama3.1-8b-fp8-l40s-concurrency-sweep`` of the
real-world corpus (Llama-3.1-8B-Instruct in FP8 on one L40S, ``vllm bench
serve``): 95.6 ms TTFT p50 at concurrency 1, less its 14.4 ms decode step,
over its 1,409.5-token prompts (:data:`planner.simulate.replica.DEFAULT_PREFILL_MS_PER_TOKEN`).
The token budget is ``vllm serve``'s default on GPUs under 70 GiB
(``vllm/engine/arg_utils.py``, ``EngineArgs.get_batch_defaults``; 8192 on
H100-class GPUs).

An unknown key, a wrong type or an out-of-range value is a
:class:`~planner.errors.PlannerInputError` naming the file and the key.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping
from pathlib import Path

import yaml

from planner.dynamics.cold_start import ClusterAutoscalerSettings, KarpenterSettings
from planner.errors import PlannerInputError
from planner.simulate.fleet import FleetSpec
from planner.simulate.replica import ReplicaSpec
from planner.simulate.supply import NodePoolSpec

__all__ = ["FLEET_KEYS", "fleet_mapping", "fleet_spec_from_mapping", "read_fleet"]

_POD_KEYS = ("image_pull_s", "weights_load_s", "warmup_s")
_REPLICA_KEYS = {f.name for f in dataclasses.fields(ReplicaSpec)}
_FLEET_KEYS = (
    {f.name for f in dataclasses.fields(FleetSpec)} - {"replica", "image_pull_s", "weights_load_s", "source"}
) | {"pod"}
FLEET_KEYS = tuple(sorted(_REPLICA_KEYS | _FLEET_KEYS))
_INTEGER_KEYS = {
    "max_num_seqs",
    "max_num_batched_tokens",
    "kv_tokens",
    "block_size_tokens",
    "gpus_per_replica",
    "initial_replicas",
    "seed",
    "placeholders",
    "gpus_per_node",
    "max_nodes",
    "initial_nodes",
}
_STRING_KEYS = {"router", "warmup_distribution", "autoscaler", "provision_distribution"}
_NULLABLE_KEYS = {
    "initial_replicas",
    "itl_slo_ms",
    "usd_per_node_hour",
    "max_nodes",
    "initial_nodes",
    "max_num_batched_tokens",
}
_NODE_SETTINGS = {"cluster_autoscaler": ClusterAutoscalerSettings, "karpenter": KarpenterSettings}


def read_fleet(path: str | Path) -> FleetSpec:
    """Read FLEET.yaml into a :class:`FleetSpec` (an empty file gives the defaults)."""
    path = Path(path)
    try:
        data = yaml.safe_load(path.read_text())
    except yaml.YAMLError as error:
        raise PlannerInputError(f"{path}: not valid YAML ({error.__class__.__name__})") from None
    if data is None:
        data = {}
    return fleet_spec_from_mapping(data, str(path))


def fleet_spec_from_mapping(data, source: str = "fleet") -> FleetSpec:
    """Build a :class:`FleetSpec` from a mapping of FLEET.yaml keys, checking each."""
    if not isinstance(data, Mapping):
        raise PlannerInputError(f"{source}: expected a mapping of parameters, got {type(data).__name__}")
    replica: dict = {}
    fleet: dict = {}
    for key, value in data.items():
        if key not in _REPLICA_KEYS and key not in _FLEET_KEYS:
            raise PlannerInputError(f"{source}: unknown key {key!r} (known: {', '.join(FLEET_KEYS)})")
        if key == "nodes":
            fleet["nodes"] = _node_pool(source, value)
        elif key == "pod":
            for pod_key, pod_value in _section(source, "pod", value, _POD_KEYS).items():
                if pod_key == "warmup_s" and "warmup_s" in data:
                    raise PlannerInputError(f"{source}: pod.warmup_s: warmup_s is set at the top level too; keep one")
                fleet[pod_key] = _checked(source, f"pod.{pod_key}", pod_value)
        else:
            checked = _checked(source, key, value)
            (replica if key in _REPLICA_KEYS else fleet)[key] = checked
    try:
        return FleetSpec(replica=ReplicaSpec(**replica), **fleet, source=source)
    except PlannerInputError as error:
        raise PlannerInputError(f"{source}: {error}") from None


def fleet_mapping(spec: FleetSpec) -> dict:
    """The FLEET.yaml keys that give ``spec`` back through :func:`fleet_spec_from_mapping`.

    ``signals`` is left out when empty, ``nodes:`` and ``pod:`` appear only with a node pool.
    """
    mapping: dict = dataclasses.asdict(spec.replica)
    skipped = {"replica", "signals", "source", "nodes", "image_pull_s", "weights_load_s"}
    mapping |= {f.name: getattr(spec, f.name) for f in dataclasses.fields(spec) if f.name not in skipped}
    if spec.signals:
        mapping["signals"] = dict(spec.signals)
    if spec.nodes is not None:
        mapping["nodes"] = dataclasses.asdict(spec.nodes)
        mapping["pod"] = {"image_pull_s": spec.image_pull_s, "weights_load_s": spec.weights_load_s}
    else:
        mapping.pop("placeholders")
    return mapping


def _section(source: str, name: str, value, known) -> Mapping:
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise PlannerInputError(f"{source}: {name}: expected a mapping of keys, got {type(value).__name__}")
    for key in value:
        if key not in known:
            raise PlannerInputError(f"{source}: {name}: unknown key {key!r} (known: {', '.join(sorted(known))})")
    return value


def _node_pool(source: str, value) -> NodePoolSpec:
    fields = {f.name for f in dataclasses.fields(NodePoolSpec)}
    options: dict = {}
    for key, item in _section(source, "nodes", value, fields).items():
        if key in _NODE_SETTINGS:
            settings = _NODE_SETTINGS[key]
            known = {f.name for f in dataclasses.fields(settings)}
            section = _section(source, f"nodes.{key}", item, known)
            checked = {name: _checked(source, f"nodes.{key}.{name}", v) for name, v in section.items()}
            try:
                options[key] = settings(**checked)
            except PlannerInputError as error:
                raise PlannerInputError(f"{source}: nodes.{key}.{error}") from None
        else:
            options[key] = _checked(source, f"nodes.{key}", item)
    try:
        return NodePoolSpec(**options)
    except PlannerInputError as error:
        raise PlannerInputError(f"{source}: {error}") from None


def _checked(source: str, key: str, value):
    if key == "signals":
        if value is None:
            return ()
        if not isinstance(value, Mapping) or not all(
            isinstance(k, str) and isinstance(v, str) for k, v in value.items()
        ):
            raise PlannerInputError(f"{source}: signals: expected a mapping of query -> expression strings")
        return tuple(value.items())
    name = key.rsplit(".", 1)[-1]
    if name in _STRING_KEYS:
        if not isinstance(value, str):
            raise PlannerInputError(f"{source}: {key}: expected a string, got {value!r}")
        return value
    if value is None and name in _NULLABLE_KEYS:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise PlannerInputError(f"{source}: {key}: expected a number, got {value!r}")
    if not math.isfinite(value):
        raise PlannerInputError(f"{source}: {key}: expected a finite number, got {value!r}")
    if name in _INTEGER_KEYS:
        if value != int(value):
            raise PlannerInputError(f"{source}: {key}: expected a whole number, got {value!r}")
        return int(value)
    return float(value)
