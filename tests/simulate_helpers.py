"""Small seeded traces and fleets for the simulator tests (not a scenario library)."""

from __future__ import annotations

import numpy as np

from planner.simulate.traffic import RequestTrace


def steady_trace(
    rate_rps: float, duration_s: float, input_tokens: int, output_tokens: int, start_s: float = 0.0
) -> RequestTrace:
    """Evenly spaced arrivals, as a load generator with a fixed interval sends them."""
    arrival_s = start_s + np.arange(0.0, duration_s, 1.0 / rate_rps)
    n = len(arrival_s)
    return RequestTrace(arrival_s, np.full(n, input_tokens), np.full(n, output_tokens), f"steady {rate_rps} req/s")


def poisson_trace(
    rate_rps, duration_s: float, input_tokens: int, output_tokens: int, seed: int = 0, tick_s: float = 1.0
) -> RequestTrace:
    """Poisson arrivals at ``rate_rps`` (a number, or a function of time evaluated per tick)."""
    rng = np.random.default_rng(seed)
    rate = rate_rps if callable(rate_rps) else (lambda t: rate_rps)
    arrivals = []
    for t in np.arange(0.0, duration_s, tick_s):
        n = rng.poisson(rate(t) * tick_s)
        arrivals.extend(np.sort(t + rng.uniform(0.0, tick_s, n)))
    arrival_s = np.asarray(arrivals, dtype=float)
    n = len(arrival_s)
    return RequestTrace(arrival_s, np.full(n, input_tokens), np.full(n, output_tokens), f"poisson seed {seed}")


def scaled_object(
    name: str,
    query: str,
    threshold: float,
    *,
    min_replicas: int = 1,
    max_replicas: int = 16,
    polling_s: int = 15,
    down_window_s: int | None = None,
    down_policy: str = "",
    cached: bool = False,
) -> str:
    """A KEDA ScaledObject with one Prometheus trigger (``useCachedMetrics`` when ``cached``), as YAML text."""
    behavior = ""
    if down_window_s is not None or down_policy:
        behavior = (
            "  advanced:\n    horizontalPodAutoscalerConfig:\n      behavior:\n        scaleDown:\n"
            + (f"          stabilizationWindowSeconds: {down_window_s}\n" if down_window_s is not None else "")
            + down_policy
        )
    return (
        "apiVersion: keda.sh/v1alpha1\nkind: ScaledObject\n"
        f"metadata:\n  name: {name}\nspec:\n  scaleTargetRef:\n    name: {name}\n"
        f"  minReplicaCount: {min_replicas}\n  maxReplicaCount: {max_replicas}\n  pollingInterval: {polling_s}\n"
        + behavior
        + "  triggers:\n  - type: prometheus\n"
        + ("    useCachedMetrics: true\n" if cached else "")
        + "    metadata:\n      serverAddress: http://prometheus:9090\n"
        f"      query: '{query}'\n      threshold: '{threshold}'\n"
    )


def pods_hpa(name: str, metric: str, average_value: float, *, min_replicas: int = 1, max_replicas: int = 16) -> str:
    """An autoscaling/v2 HPA on one Pods metric, as YAML text."""
    return (
        "apiVersion: autoscaling/v2\nkind: HorizontalPodAutoscaler\n"
        f"metadata:\n  name: {name}\nspec:\n  scaleTargetRef:\n    apiVersion: apps/v1\n    kind: Deployment\n"
        f"    name: {name}\n  minReplicas: {min_replicas}\n  maxReplicas: {max_replicas}\n  metrics:\n"
        f"  - type: Pods\n    pods:\n      metric:\n        name: {metric}\n      target:\n"
        f"        type: AverageValue\n        averageValue: {average_value}\n"
    )


def external_hpa(
    name: str,
    metric: str,
    average_value: float,
    *,
    min_replicas: int = 0,
    max_replicas: int = 16,
    down_window_s: int = 0,
) -> str:
    """An autoscaling/v2 HPA on one External metric (a fleet total), as YAML text; it may scale to zero."""
    return (
        "apiVersion: autoscaling/v2\nkind: HorizontalPodAutoscaler\n"
        f"metadata:\n  name: {name}\nspec:\n  scaleTargetRef:\n    apiVersion: apps/v1\n    kind: Deployment\n"
        f"    name: {name}\n  minReplicas: {min_replicas}\n  maxReplicas: {max_replicas}\n"
        f"  behavior:\n    scaleDown:\n      stabilizationWindowSeconds: {down_window_s}\n  metrics:\n"
        f"  - type: External\n    external:\n      metric:\n        name: {metric}\n      target:\n"
        f"        type: AverageValue\n        averageValue: {average_value}\n"
    )


def write_manifest(folder, text: str, name: str = "autoscaler.yaml"):
    """Write YAML text to ``folder/name`` and load it as the simulator reads manifests."""
    from planner.readers.manifest import load_autoscaler

    path = folder / name
    path.write_text(text)
    return load_autoscaler(path)


def cron_scaled_object(
    name: str,
    query: str,
    threshold: float,
    windows: list[tuple[str, str, str, int]],
    *,
    min_replicas: int = 1,
    max_replicas: int = 16,
    up_policy: str = "",
) -> str:
    """A KEDA ScaledObject with one Prometheus trigger and a cron trigger per ``(start, end, timezone, desired)``,
    with ``up_policy`` (e.g. ``Pods:1:60``) as its only scale-up policy when given; YAML text."""
    behavior = ""
    if up_policy:
        kind, value, period = up_policy.split(":")
        behavior = (
            "  advanced:\n    horizontalPodAutoscalerConfig:\n      behavior:\n        scaleUp:\n"
            f"          policies:\n          - type: {kind}\n            value: {value}\n"
            f"            periodSeconds: {period}\n"
        )
    crons = "".join(
        f"  - type: cron\n    metadata:\n      start: '{start}'\n      end: '{end}'\n"
        f"      timezone: {timezone}\n      desiredReplicas: '{desired}'\n"
        for start, end, timezone, desired in windows
    )
    return (
        "apiVersion: keda.sh/v1alpha1\nkind: ScaledObject\n"
        f"metadata:\n  name: {name}\nspec:\n  scaleTargetRef:\n    name: {name}\n"
        f"  minReplicaCount: {min_replicas}\n  maxReplicaCount: {max_replicas}\n  pollingInterval: 15\n"
        + behavior
        + "  triggers:\n  - type: prometheus\n    metadata:\n      serverAddress: http://prometheus:9090\n"
        f"      query: '{query}'\n      threshold: '{threshold}'\n" + crons
    )
