"""The ``control`` module lets the manifest's own autoscaler decide, through the planner's exact port.

A ScaledObject is run by :class:`planner.autoscaler.keda.KedaController`: KEDA's
operator polls every ``pollingInterval`` (activation, scale to and from
zero, and the metrics cache) and the HPA it owns reconciles every sync period
(15 s) on the values KEDA's metrics server returns: a fresh query at that
instant, or, for a trigger with ``useCachedMetrics``, the value cached at the
last poll (:meth:`planner.autoscaler.keda.KedaController.served_values`). A plain HPA is
run by :class:`planner.autoscaler.horizontal.HorizontalController` every sync
period, scaling to and from zero as Kubernetes 1.37 does (the ``ScaledToZero``
condition); an HPA with ``minReplicas: 0`` starts as if it had taken the
target to zero itself, so a run that starts at 0 replicas can come back.
Nothing here decides a replica count; it only reads the simulated Prometheus
and hands the controller what the Go controller would fetch:

* KEDA Prometheus triggers: the query's value (empty result -> ``None``; a
  result with several series -> the scaler's "multiple elements" error);
* ``Pods`` metrics: one sample per scraped pod, with its scrape time;
* ``Object`` metrics: the sum over pods (what an adapter's
  ``sum(...) by (service)`` rule returns);
* ``External`` metrics: one series per pod (the HPA sums them);
* the pods themselves: Ready or not, start and readiness times, so the
  controller's missing- and unready-pod rules apply.

KEDA cron triggers read no metric: the controller asks KEDA's cron scaler
(:mod:`planner.autoscaler.cron_scaler`) at the wall-clock instant
``start_epoch_s + now_s``, the only place simulated time meets the calendar.
"""

from __future__ import annotations

from collections.abc import Callable

from planner.autoscaler.defaults import DEFAULT_SYNC_PERIOD_S
from planner.autoscaler.horizontal import (
    ExternalReading,
    FailedReading,
    HorizontalController,
    ObjectReading,
    PodMetricsReading,
)
from planner.autoscaler.hpa_spec import EXTERNAL, OBJECT, PODS
from planner.autoscaler.keda import KedaController, keda_quantity_milli
from planner.autoscaler.replica_calculator import Pod, PodMetric
from planner.autoscaler.spec import Autoscaler
from planner.errors import PlannerInputError
from planner.simulate.fleet import DEFAULT_START_EPOCH_S
from planner.simulate.metrics import MetricStore, Query, metric_column, parse_query

__all__ = ["Control"]


class Control:
    """The autoscaler of one manifest, driven on its own cadence.

    Parameters
    ----------
    autoscaler : Autoscaler
        From :func:`planner.readers.manifest.load_autoscaler`.
    signals : dict, optional
        FLEET.yaml ``signals``: query or metric name -> simulated expression.
    sync_period_s : float
        HPA sync period. [s]
    start_epoch_s : float
        Wall-clock instant (UTC epoch) of ``now_s = 0``, for cron triggers. [s]

    Raises
    ------
    PlannerInputError
        A query or metric the simulator cannot interpret, or a cron trigger KEDA
        would not build, naming it.
    """

    def __init__(
        self,
        autoscaler: Autoscaler,
        signals: dict[str, str] | None = None,
        sync_period_s: float = DEFAULT_SYNC_PERIOD_S,
        start_epoch_s: float = DEFAULT_START_EPOCH_S,
    ) -> None:
        self.autoscaler = autoscaler
        self.sync_period_s = float(sync_period_s)
        signals = signals or {}
        self.keda: KedaController | None = None
        self.hpa: HorizontalController | None = None
        self.queries: dict[int, Query] = {}
        self.metric_queries: list[tuple[str, Query]] = []
        if autoscaler.scaled_object is not None:
            so = autoscaler.scaled_object
            for trigger in so.triggers:
                if trigger.is_resource:
                    raise _unsupported(
                        f"{trigger.type} trigger {trigger.label}", "CPU and memory are not simulated", trigger.type
                    )
                if trigger.type == "cron":
                    continue  # KEDA's cron scaler answers from the wall clock, not from Prometheus
                if trigger.type != "prometheus" and trigger.query == "" and trigger.label not in signals:
                    raise _unsupported(
                        f"{trigger.type} trigger {trigger.label}",
                        "only Prometheus triggers are simulated",
                        trigger.label,
                    )
                text = trigger.query or signals.get(trigger.label, "")
                self.queries[trigger.index] = parse_query(text, signals)
            try:
                self.keda = KedaController(so, start_epoch_s=float(start_epoch_s))
            except PlannerInputError as error:
                raise PlannerInputError(f"{autoscaler.source}: {error}") from None
            self.polling_interval_s = so.effective_polling_interval_s
            self.min_replicas = so.effective_min_replica_count
            self.max_replicas = self.keda.hpa.max_replicas
        else:
            spec = autoscaler.hpa
            for metric in spec.metrics:
                if metric.type not in (PODS, OBJECT, EXTERNAL):
                    raise _unsupported(
                        f"{metric.type} metric {metric.name}",
                        "resource metrics (CPU, memory) are not simulated",
                        metric.name,
                    )
                mapped = signals.get(metric.name)
                if mapped is not None:
                    query = parse_query(mapped)
                elif (column := metric_column(metric.name)) is not None:
                    query = parse_query(column)
                else:
                    raise _unsupported(
                        f"{metric.type} metric {metric.name}",
                        "not a metric the simulated vLLM pods export",
                        metric.name,
                    )
                self.metric_queries.append((metric.type, query))
            self.hpa = HorizontalController(spec, scaled_to_zero=spec.effective_min_replicas == 0)
            self.min_replicas = spec.effective_min_replicas
            self.max_replicas = spec.max_replicas
            self.polling_interval_s = self.sync_period_s

    @property
    def history_s(self) -> float:
        """How far back the queries read (:attr:`planner.simulate.metrics.Query.history_s`), 0 without any. [s]"""
        queries = [*self.queries.values(), *(query for _, query in self.metric_queries)]
        return max((query.history_s for query in queries), default=0.0)

    def is_due(self, now_s: float, tick_s: float) -> tuple[bool, bool]:
        """(KEDA poll due, HPA reconcile due) at ``now_s``, on a ``tick_s`` grid."""

        def due(period_s: float) -> bool:
            k = round(now_s / tick_s)
            every = max(round(period_s / tick_s), 1)
            return k % every == 0

        reconcile = due(self.sync_period_s)
        poll = self.keda is not None and due(self.polling_interval_s)
        return poll, reconcile

    def signal(self, store: MetricStore, now_s: float) -> float | None:
        """The first trigger's value (a Pods metric: its average over pods), for charts."""
        if self.keda is not None:
            query = self.queries.get(min(self.queries)) if self.queries else None
            return None if query is None else query.scalar(store, now_s)[0]
        if not self.metric_queries:
            return None
        kind, query = self.metric_queries[0]
        result = query.evaluate(store, now_s)
        if isinstance(result, float):
            return result
        if not result:
            return None
        values = list(result.values())
        return sum(values) / len(values) if kind == PODS else sum(values)

    def decide(
        self,
        now_s: float,
        tick_s: float,
        spec_replicas: int,
        pods: Callable[[], list[Pod]],
        ready: int,
        store: MetricStore,
    ) -> int:
        """Run whatever is due at ``now_s`` and return ``spec.replicas`` after it.

        ``pods`` is called only when a controller runs: it returns the pods the HPA sees.
        """
        poll, reconcile = self.is_due(now_s, tick_s)
        if not (poll or reconcile):
            return spec_replicas
        replicas = spec_replicas
        if self.keda is not None:
            if not (poll or reconcile):
                return replicas
            values: dict[int, float | None] = {}
            errors: dict[int, str] = {}
            for index, query in self.queries.items():
                value, error = query.scalar(store, now_s)
                if error is not None:
                    errors[index] = error
                else:
                    values[index] = value
            if poll:
                decision = self.keda.poll(now_s, replicas, values, ready_replicas=ready, errors=errors or None)
                if decision.replicas is not None:
                    replicas = decision.replicas
            if reconcile and replicas > 0:
                result = self.keda.reconcile(
                    now_s, replicas, values, ready_replicas=ready, pods=pods(), errors=errors or None
                )
                replicas = result.desired_replicas
            return replicas
        if not reconcile:
            return replicas
        assert self.hpa is not None  # set whenever the autoscaler is not a ScaledObject
        readings = [self._reading(kind, query, store, now_s) for kind, query in self.metric_queries]
        seen = pods()
        result = self.hpa.reconcile_autoscaler(now_s, replicas, readings, status_replicas=len(seen), pods=seen)
        return result.desired_replicas

    @staticmethod
    def _reading(kind: str, query: Query, store: MetricStore, now_s: float):
        result = query.evaluate(store, now_s)
        if isinstance(result, float):
            result = {(): result}
        if kind == PODS:
            if not result:
                return FailedReading("no metrics returned from custom metrics API")
            stamp = store.times_s[store._last_index(now_s)]
            return PodMetricsReading(
                {
                    f"pod-{key[0] if key else 0}": PodMetric(keda_quantity_milli(value), timestamp_s=stamp)
                    for key, value in result.items()
                }
            )
        if not result:
            return FailedReading("no metrics returned from external metrics API")
        if kind == OBJECT:
            return ObjectReading(keda_quantity_milli(sum(result.values())))
        return ExternalReading(tuple(keda_quantity_milli(v) for v in result.values()))


def _unsupported(what: str, why: str, key: str):
    return PlannerInputError(
        f"{what} cannot be simulated: {why}; map it to a simulated signal in FLEET.yaml, "
        f"e.g. signals: {{'{key}': 'sum(vllm:num_requests_waiting)'}}"
    )
