"""Read FLEET.yaml: the replica and fleet parameters of a simulation, every key optional.

Keys and defaults (units in the names; see :class:`planner.simulate.fleet.FleetSpec`
and :class:`planner.simulate.replica.ReplicaSpec` for their meaning)::

    fixed_ms: 6.0                  # step time = fixed_ms + per_sequence_ms x batch
    per_sequence_ms: 0.25
    prefill_ms_per_token: 0.0
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

An unknown key, a wrong type or an out-of-range value is a
:class:`~planner.errors.PlannerInputError` naming the file and the key.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping
from pathlib import Path

import yaml

from planner.errors import PlannerInputError
from planner.simulate.fleet import FleetSpec
from planner.simulate.replica import ReplicaSpec

__all__ = ["FLEET_KEYS", "fleet_spec_from_mapping", "read_fleet"]

_REPLICA_KEYS = {f.name for f in dataclasses.fields(ReplicaSpec)}
_FLEET_KEYS = {f.name for f in dataclasses.fields(FleetSpec)} - {"replica"}
FLEET_KEYS = tuple(sorted(_REPLICA_KEYS | _FLEET_KEYS))
_INTEGER_KEYS = {"max_num_seqs", "kv_tokens", "block_size_tokens", "gpus_per_replica", "initial_replicas", "seed"}
_STRING_KEYS = {"router", "warmup_distribution"}


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
        checked = _checked(source, key, value)
        (replica if key in _REPLICA_KEYS else fleet)[key] = checked
    try:
        return FleetSpec(replica=ReplicaSpec(**replica), **fleet)
    except PlannerInputError as error:
        raise PlannerInputError(f"{source}: {error}") from None


def _checked(source: str, key: str, value):
    if key == "signals":
        if value is None:
            return ()
        if not isinstance(value, Mapping) or not all(isinstance(k, str) and isinstance(v, str)
                                                     for k, v in value.items()):
            raise PlannerInputError(f"{source}: signals: expected a mapping of query -> expression strings")
        return tuple(value.items())
    if key in _STRING_KEYS:
        if not isinstance(value, str):
            raise PlannerInputError(f"{source}: {key}: expected a string, got {value!r}")
        return value
    if value is None and key in ("initial_replicas", "itl_slo_ms"):
        return None
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise PlannerInputError(f"{source}: {key}: expected a number, got {value!r}")
    if not math.isfinite(value):
        raise PlannerInputError(f"{source}: {key}: expected a finite number, got {value!r}")
    if key in _INTEGER_KEYS:
        if value != int(value):
            raise PlannerInputError(f"{source}: {key}: expected a whole number, got {value!r}")
        return int(value)
    return float(value)
