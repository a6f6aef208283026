"""The compiled HPA/KEDA decision equals planner.simulate.control.Control.decide, step by step and in its history."""

from __future__ import annotations

import math
from decimal import Decimal
from fractions import Fraction

import numpy as np
import pytest
from hypothesis import HealthCheck, assume, example, given, settings
from hypothesis import strategies as st
from numba import njit

from planner.autoscaler.behavior import TimestampedRecommendation, TimestampedScaleEvent
from planner.autoscaler.keda import keda_quantity_milli, validate_scaled_object
from planner.autoscaler.replica_calculator import POD_RUNNING, Pod
from planner.errors import PlannerInputError
from planner.readers.manifest import load_autoscaler
from planner.simulate.control import Control
from planner.simulate.fast import decision
from planner.simulate.fast.decision import (
    CACHE_EMPTY,
    CRON_ACTIVE,
    CRON_FAILED,
    CRON_INACTIVE,
    CRON_NONE,
    DOWN,
    DOWN_N,
    HISTORY_FULL,
    K_CACHE,
    K_FAILURES,
    NO_SCRAPE,
    QUANTITY_LIMIT,
    QUANTITY_OUT_OF_RANGE,
    REC_N,
    SCALED_TO_ZERO,
    UP,
    UP_N,
    NotCompilable,
    compile_control,
    new_state,
    tables,
)
from planner.simulate.metrics import MetricStore, Query

CAPACITY = 16  # pod ids the fleets draw from; result rows hold CAPACITY + 1 series
EXTRA_IDS = (20, 31)  # scraped pods the HPA does not see (terminating ones), beyond the fleet's ids
NO_CRON = (np.full(4, CRON_NONE, dtype=np.int64), np.zeros(4))  # decide's cron readings: no trigger is one


# ---- keda_quantity_milli ------------------------------------------------------------------------

BAD = -(2**63)


def _exact_milli(value: float) -> int:
    # The definition, with exact rationals: round half to even of value * 1000.
    product = Fraction(value) * 1000
    floor = math.floor(product)
    rest = product - floor
    if rest > Fraction(1, 2) or (rest == Fraction(1, 2) and floor % 2 == 1):
        return floor + 1
    return floor


def _near_thousandths(k: int, ulps: int, half: bool) -> float:
    value = k / 2000 if half else k / 1000
    for _ in range(abs(ulps)):
        value = float(np.nextafter(value, math.inf if ulps > 0 else -math.inf))
    return value


boundary_floats = st.builds(_near_thousandths, st.integers(-(10**12), 10**12), st.integers(-2, 2), st.booleans())


@given(
    st.one_of(
        st.floats(allow_nan=True, allow_infinity=True),
        boundary_floats,
        st.floats(-1e4, 1e4),
        st.floats(-QUANTITY_LIMIT * 1.01, QUANTITY_LIMIT * 1.01),
    )
)
@settings(max_examples=3000, deadline=None)
@example(0.0005)
@example(-0.0005)
@example(0.0625)
@example(-0.0625)
@example(0.0015)
@example(2.5e-3)
@example(-0.0)
@example(5e-324)
@example(QUANTITY_LIMIT)
@example(float(np.nextafter(QUANTITY_LIMIT, 0.0)))
def test_keda_quantity_milli_rounds_the_exact_value_like_python(value):
    got = decision.keda_quantity_milli(value)
    if math.isfinite(value) and not abs(value * 1000.0) < 2.0**52:
        assert got == BAD
        return
    assert got == keda_quantity_milli(value)
    if math.isfinite(value):
        assert got == _exact_milli(value)


def test_keda_quantity_milli_ties_and_specials():
    assert [decision.keda_quantity_milli(v) for v in (0.0005, 0.0625, -0.0625, 0.0015, 0.0025, 1.0005)] == [
        keda_quantity_milli(v) for v in (0.0005, 0.0625, -0.0625, 0.0015, 0.0025, 1.0005)
    ]
    assert decision.keda_quantity_milli(0.0005) == 1  # rint(0.0005 * 1000.0) would give 0
    assert decision.keda_quantity_milli(0.0625) == 62  # an exact tie goes to even
    assert decision.keda_quantity_milli(math.nan) == 0
    assert decision.keda_quantity_milli(-math.inf) == 0
    assert int(Decimal(f"{QUANTITY_LIMIT * 0.999:.3f}") * 1000) == decision.keda_quantity_milli(QUANTITY_LIMIT * 0.999)


# ---- manifests ----------------------------------------------------------------------------------


def _rules_yaml(rules: dict | None, indent: str) -> str:
    if rules is None:
        return ""
    lines = []
    if rules.get("window") is not None:
        lines.append(f"stabilizationWindowSeconds: {rules['window']}")
    if rules.get("select") is not None:
        lines.append(f"selectPolicy: {rules['select']}")
    if rules.get("tolerance") is not None:
        lines.append(f"tolerance: '{rules['tolerance']}'")
    if rules.get("policies"):
        lines.append("policies:")
        for kind, value, period in rules["policies"]:
            lines += [f"- type: {kind}", f"  value: {value}", f"  periodSeconds: {period}"]
    if not lines:
        lines = ["selectPolicy: Max"]
    return "".join(f"{indent}{line}\n" for line in lines)


def _behavior_yaml(behavior: dict | None, indent: str) -> str:
    if behavior is None:
        return ""
    text = f"{indent}behavior:\n"
    for key in ("scaleUp", "scaleDown"):
        if behavior.get(key) is not None:
            text += f"{indent}  {key}:\n" + _rules_yaml(behavior[key], indent + "    ")
    if behavior.get("scaleUp") is None and behavior.get("scaleDown") is None:
        text += f"{indent}  scaleUp: {{}}\n"
    return text


policies = st.lists(
    st.tuples(
        st.sampled_from(["Pods", "Percent"]),
        st.sampled_from([1, 2, 4, 10, 50, 100, 200]),
        st.sampled_from([15, 30, 60, 120, 300]),
    ),
    min_size=1,
    max_size=3,
)
rules = st.none() | st.fixed_dictionaries(
    {},
    optional={
        "window": st.sampled_from([0, 15, 30, 60, 120, 300]),
        "select": st.sampled_from(["Max", "Min", "Disabled"]),
        "tolerance": st.sampled_from(["0", "0.05", "0.1", "0.2", "0.5"]),
        "policies": policies,
    },
)
behaviors = st.none() | st.fixed_dictionaries({"scaleUp": rules, "scaleDown": rules})
thresholds = st.sampled_from([0.5, 1, 2, 2.5, 3, 5, 7.5, 10, 0.25, 0.0015, 100, 0.333])


# Cron windows that open and close within the runs' 15 minutes: every few minutes, a broken zone, a DST zone.
CRON_WINDOWS = [
    ("*/5 * * * *", "2-59/5 * * * *", "UTC"),
    ("*/3 * * * *", "1-59/3 * * * *", "Europe/Dublin"),
    ("4-59/6 * * * *", "*/6 * * * *", "America/New_York"),  # wraps: open from minute 4 to the next 0
    ("*/5 * * * *", "2-59/5 * * * *", "Europe/Dublyn"),  # a zone Go cannot load: every query fails
    ("0 8 * * *", "0 18 * * *", "UTC"),
]


def _cron_trigger(draw) -> str:
    start, end, zone = draw(st.sampled_from(CRON_WINDOWS))
    desired = draw(st.sampled_from([1, 2, 4, 7, -2]))
    trigger = "  - type: cron\n"
    if draw(st.booleans()):
        trigger += f"    metricType: {draw(st.sampled_from(['AverageValue', 'Value']))}\n"
    return trigger + (
        f"    metadata:\n      start: '{start}'\n      end: '{end}'\n      timezone: {zone}\n"
        f"      desiredReplicas: '{desired}'\n"
    )


FORMULA_NUMBERS = ("2", "0.5", "8", "0", "1e9", "3.25")


def _formula_text(draw, names: list[str], depth: int = 0) -> str:
    # An expression of the compiled subset: names, numbers, + - * /, max, min, abs, unary minus and plus, float().
    choice = draw(st.integers(0, 9 if depth < 3 else 1))
    if choice == 0:
        return draw(st.sampled_from(names))
    if choice == 1:
        return draw(st.sampled_from(FORMULA_NUMBERS))
    if choice <= 5:
        op = draw(st.sampled_from("+-*/"))
        return f"({_formula_text(draw, names, depth + 1)} {op} {_formula_text(draw, names, depth + 1)})"
    if choice == 6:
        arguments = [_formula_text(draw, names, depth + 1) for _ in range(draw(st.integers(1, 3)))]
        return f"{draw(st.sampled_from(['max', 'min']))}({', '.join(arguments)})"
    function = draw(st.sampled_from(["abs(", "-(", "+(", "float("]))
    return f"{function}{_formula_text(draw, names, depth + 1)})"


@st.composite
def scaled_objects(draw, cron=False, formula=False):
    n = draw(st.integers(1, 3))
    triggers = []
    for i in range(n):
        if cron and (i == n - 1 or draw(st.booleans())):  # at least one
            triggers.append(_cron_trigger(draw))
            continue
        metadata = [f"query: 'sum(vllm:num_requests_waiting) + {i}'", f"threshold: '{draw(thresholds)}'"]
        if draw(st.booleans()):
            metadata.append(f"activationThreshold: '{draw(st.sampled_from([0, 0.5, 1, 3, 10, -1]))}'")
        null = draw(st.sampled_from([None, "false", "true"]))
        if null is not None:
            metadata.append(f"ignoreNullValues: '{null}'")
        metric_type = draw(st.sampled_from([None, "AverageValue", "Value"]))
        trigger = "  - type: prometheus\n"
        if draw(st.booleans()):
            trigger += f"    useCachedMetrics: {draw(st.sampled_from(['true', 'false']))}\n"
        if formula or draw(st.booleans()):
            trigger += f"    name: t{i}\n"
        if metric_type is not None:
            trigger += f"    metricType: {metric_type}\n"
        trigger += "    metadata:\n" + "".join(f"      {line}\n" for line in metadata)
        triggers.append(trigger)
    lines = []
    min_count = draw(st.sampled_from([None, 0, 0, 1, 2, 3]))
    if min_count is not None:
        lines.append(f"minReplicaCount: {min_count}")
    max_count = draw(st.sampled_from([None, 4, 6, 10, 20]))
    if max_count is not None:
        max_count = max(max_count, min_count or 1)
        lines.append(f"maxReplicaCount: {max_count}")
    lines.append(f"pollingInterval: {draw(st.sampled_from([5, 10, 15, 30]))}")
    if draw(st.booleans()):
        lines.append(f"cooldownPeriod: {draw(st.sampled_from([0, 15, 30, 60, 120]))}")
    if draw(st.booleans()):
        lines.append(f"initialCooldownPeriod: {draw(st.sampled_from([0, 30, 90]))}")
    if min_count and draw(st.booleans()):
        lines.append(f"idleReplicaCount: {draw(st.integers(0, min_count - 1))}")
    if draw(st.booleans()):
        lines += [
            "fallback:",
            f"  failureThreshold: {draw(st.integers(0, 3))}",
            f"  replicas: {draw(st.sampled_from([0, 1, 3, 6]))}",
        ]
        behavior = draw(
            st.sampled_from([None, "static", "currentReplicas", "currentReplicasIfHigher", "currentReplicasIfLower"])
        )
        if behavior is not None:
            lines.append(f"  behavior: {behavior}")
    behavior = draw(behaviors)
    text = (
        "apiVersion: keda.sh/v1alpha1\nkind: ScaledObject\nmetadata:\n  name: chat\nspec:\n"
        "  scaleTargetRef:\n    name: chat\n" + "".join(f"  {line}\n" for line in lines)
    )
    if behavior is not None or formula:
        text += "  advanced:\n"
    if behavior is not None:
        text += "    horizontalPodAutoscalerConfig:\n" + _behavior_yaml(behavior, "      ")
    if formula:
        expression = _formula_text(draw, [f"t{i}" for i in range(n)])
        text += f"    scalingModifiers:\n      formula: '{expression}'\n      target: '{draw(thresholds)}'\n"
        if draw(st.booleans()):
            text += f"      metricType: {draw(st.sampled_from(['AverageValue', 'Value']))}\n"
        if draw(st.booleans()):
            text += f"      activationTarget: '{draw(st.sampled_from([0, 0.5, 2, -1]))}'\n"
    return text + "  triggers:\n" + "".join(triggers)


quantities = st.sampled_from(["1", "2", "5", "10", "500m", "1500m", "2.5", "0.8", "100", "3"])
metric_names = st.sampled_from(
    ["vllm:num_requests_waiting", "vllm:num_requests_running", "vllm:kv_cache_usage_perc", "num_requests_waiting"]
)


@st.composite
def hpas(draw):
    n = draw(st.integers(1, 3))
    metrics = []
    for _ in range(n):
        kind = draw(st.sampled_from(["Pods", "Object", "External"]))
        target = "AverageValue" if kind == "Pods" else draw(st.sampled_from(["AverageValue", "Value"]))
        field = "averageValue" if target == "AverageValue" else "value"
        body = f"    {kind.lower()}:\n      metric:\n        name: {draw(metric_names)}\n"
        if kind == "Object":
            body += "      describedObject:\n        apiVersion: v1\n        kind: Service\n        name: chat\n"
        body += f"      target:\n        type: {target}\n        {field}: '{draw(quantities)}'\n"
        metrics.append((kind, f"  - type: {kind}\n" + body))
    scale_to_zero = any(kind != "Pods" for kind, _ in metrics)
    min_replicas = draw(st.sampled_from([None, 1, 2, 3] + ([0, 0] if scale_to_zero else [])))
    max_replicas = max(draw(st.sampled_from([3, 5, 8, 12, 20])), min_replicas or 1)
    text = (
        "apiVersion: autoscaling/v2\nkind: HorizontalPodAutoscaler\nmetadata:\n  name: chat\nspec:\n"
        "  scaleTargetRef:\n    apiVersion: apps/v1\n    kind: Deployment\n    name: chat\n"
        + (f"  minReplicas: {min_replicas}\n" if min_replicas is not None else "")
        + f"  maxReplicas: {max_replicas}\n"
    )
    text += _behavior_yaml(draw(behaviors), "  ")
    return text + "  metrics:\n" + "".join(body for _, body in metrics)


def _load(tmp_path, text):
    path = tmp_path / "autoscaler.yaml"
    path.write_text(text)
    return load_autoscaler(path)


# ---- the Python side's inputs -------------------------------------------------------------------


class _Results:
    """Query results chosen by the test, per row, as ``Query.evaluate`` returns them."""

    def __init__(self, n_rows: int) -> None:
        self.rows: list = [{} for _ in range(n_rows)]


class _StubQuery:
    """A query whose ``evaluate`` returns the test's chosen result; ``scalar`` is ``Query.scalar`` itself."""

    scalar = Query.scalar

    def __init__(self, results: _Results, row: int, text: str) -> None:
        self.results, self.row, self.text = results, row, text

    def evaluate(self, store, now_s):
        return self.results.rows[self.row]


class _Store:
    """The surface of a MetricStore that Control.decide reads itself: ``times_s`` and ``_last_index``."""

    _last_index = MetricStore._last_index

    def __init__(self) -> None:
        self.times_s: list[float] = []


def _stubbed(control: Control) -> _Results:
    if control.keda is not None:
        results = _Results(len(control.queries))
        control.queries = {
            index: _StubQuery(results, row, query.text) for row, (index, query) in enumerate(control.queries.items())
        }
    else:
        results = _Results(len(control.metric_queries))
        control.metric_queries = [
            (kind, _StubQuery(results, row, query.text)) for row, (kind, query) in enumerate(control.metric_queries)
        ]
    return results


def _value(rng, scale: float) -> float:
    return float(_number(rng, scale))  # query results are Python floats


def _number(rng, scale: float):
    kind = rng.integers(14)
    if kind == 0:
        return 0.0
    if kind == 1:
        return float(rng.integers(0, 5 * max(scale, 1.0) + 1))
    if kind == 2:  # a thousandth, or a tie between two, give or take an ulp
        value = rng.integers(0, int(4000 * max(scale, 1.0))) / (1000.0 if rng.random() < 0.5 else 2000.0)
        for _ in range(rng.integers(0, 3)):
            value = float(np.nextafter(value, math.inf if rng.random() < 0.5 else -math.inf))
        return value
    if kind == 3:
        return float(rng.uniform(0.0, 4.0 * scale))
    if kind == 4:
        return -float(rng.uniform(0.0, scale))
    if kind == 5:
        return math.nan if rng.random() < 0.6 else (math.inf if rng.random() < 0.5 else -math.inf)
    if kind == 6:  # near the tolerance band of a multiple of the target
        return scale * rng.integers(0, 5) * float(rng.choice([0.85, 0.9, 0.95, 1.0, 1.05, 1.1, 1.15]))
    return scale * float(rng.integers(0, 9)) / 2.0


def _result(rng, kind: str, fleet_ids: list[int], scale: float):
    """A query result as Query.evaluate returns it: a float, or a dict in some order."""
    roll = rng.random()
    if roll < 0.15:
        return _value(rng, scale)
    if roll < 0.25:
        return {}
    if kind == "keda" and roll < 0.8:  # mostly one series, as sum(...) gives
        return {(() if rng.random() < 0.7 else (int(rng.choice(fleet_ids or [0])),)): _value(rng, scale)}
    pool = list(fleet_ids) + list(EXTRA_IDS) + [-1]
    if fleet_ids and rng.random() < 0.6:
        pool = list(fleet_ids)  # the usual case: one series per scraped pod
    n = int(rng.integers(1, len(pool) + 1))
    keys = list(rng.choice(pool, n, replace=False))
    if rng.random() < 0.7:
        keys.sort()
    return {(() if k == -1 else (int(k),)): _value(rng, scale) for k in keys}


def _rows(results: list) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    n_rows = max(len(results), 1)
    res_kind = np.zeros(n_rows, dtype=np.int64)
    res_n = np.zeros(n_rows, dtype=np.int64)
    res_keys = np.full((n_rows, CAPACITY + 1 + len(EXTRA_IDS)), 7, dtype=np.int64)  # junk beyond n
    res_vals = np.full((n_rows, CAPACITY + 1 + len(EXTRA_IDS)), 123.0)
    for m, result in enumerate(results):
        if isinstance(result, float):
            res_kind[m] = 0
            res_vals[m, 0] = result
            continue
        res_kind[m] = 1
        res_n[m] = len(result)
        for j, (key, value) in enumerate(result.items()):
            res_keys[m, j] = key[0] if key else -1
            res_vals[m, j] = value
    return res_kind, res_n, res_keys, res_vals


def _history(control: Control):
    controller = control.keda.controller if control.keda is not None else control.hpa
    recs = controller.recommendations
    keda = None
    if control.keda is not None:
        keda = (
            control.keda.last_active_s,
            [control.keda.failures.get(t.index, 0) for t in control.keda.so.triggers],
            sorted(control.keda.metrics_cache),
        )
    return (
        None if recs is None else list(recs),
        list(controller.scale_up_events),
        list(controller.scale_down_events),
        keda,
        controller.scaled_to_zero,
    )


def _kernel_history(control: Control, state):
    n_rec = int(state.count[REC_N])
    recs = (
        None
        if n_rec == 0
        else [
            TimestampedRecommendation(int(r), float(t))
            for r, t in zip(state.rec_replicas[:n_rec], state.rec_t[:n_rec], strict=True)
        ]
    )
    events = []
    for direction, slot in ((UP, UP_N), (DOWN, DOWN_N)):
        n = int(state.count[slot])
        events.append(
            [
                TimestampedScaleEvent(int(change), float(t), bool(outdated))
                for (change, outdated), t in zip(
                    state.events[direction, :n].tolist(), state.event_t[direction, :n], strict=True
                )
            ]
        )
    keda = None
    if control.keda is not None:
        last = float(state.last_active_s[0])
        n = len(control.keda.so.triggers)
        keda = (
            None if math.isnan(last) else last,
            [int(f) for f in state.keda[:n, K_FAILURES]],
            [i for i in range(n) if state.keda[i, K_CACHE] != CACHE_EMPTY],
        )
    return recs, events[0], events[1], keda, bool(state.count[SCALED_TO_ZERO])


def _cron_inputs(control: Control, now_s: float) -> tuple[np.ndarray, np.ndarray]:
    """decide's cron readings at ``now_s``, by trigger position, from ``KedaController.cron_readings``."""
    n = len(control.keda.so.triggers) if control.keda is not None else 0
    state, value = np.full(max(n, 1), CRON_NONE, dtype=np.int64), np.full(max(n, 1), 1e300)
    if control.keda is not None:
        positions = [t.index for t in control.keda.so.triggers]
        for index, reading in control.keda.cron_readings(now_s).items():
            slot = positions.index(index)
            state[slot] = CRON_FAILED if reading.error is not None else CRON_ACTIVE if reading.active else CRON_INACTIVE
            value[slot] = reading.value
    return state, value


def _slot_rows(control: Control, rows: list) -> list:
    """Query results by decision row: a ScaledObject's cron triggers get junk the kernel must not read."""
    if control.keda is None:
        return rows
    by_index = dict(zip(control.queries, rows, strict=True))
    return [by_index.get(t.index, 1e300) for t in control.keda.so.triggers]


def _run_side_by_side(control: Control, seed: int, tick_s: float, n_ticks: int) -> dict:
    """Drive Control.decide and the kernel through the same ticks; assert equal counts and history."""
    compiled = compile_control(control)
    t, s = tables(compiled), new_state(compiled)
    results = _stubbed(control)
    store = _Store()
    rng = np.random.default_rng(seed)
    is_keda = control.keda is not None
    kinds = ["keda"] * len(control.queries) if is_keda else [kind for kind, _ in control.metric_queries]
    if is_keda:
        hpa = control.keda.hpa
        scales = [float(m.target.value_milli or m.target.average_value_milli) / 1000 for m in hpa.metrics]
        by_name = dict(zip([m.name for m in hpa.metrics], scales, strict=True))
        # (With a formula the HPA reads the composite alone: a trigger's values scale with its threshold.)
        triggers = [t for t in control.keda.so.triggers if t.index in control.queries]
        scales = [by_name.get(t.metric_name, float(t.threshold)) for t in triggers]
    else:
        scales = [float(m.target.value_milli or m.target.average_value_milli) / 1000 for m in control.hpa.spec.metrics]
    spec_replicas = int(rng.integers(0, 6))
    pod_ids = np.zeros(CAPACITY, dtype=np.int64)
    pod_ready = np.zeros(CAPACITY, dtype=np.bool_)
    pod_start_s = np.zeros(CAPACITY)
    pod_transition_s = np.zeros(CAPACITY)
    seen = {"calls": 0, "changes": 0, "cron": set()}
    for k in range(n_ticks):
        now_s = k * tick_s
        if rng.random() < 0.7:  # a scrape at the end of the previous tick
            if k > 0 and (not store.times_s or store.times_s[-1] < now_s):
                store.times_s.append(now_s)
        poll, reconcile = control.is_due(now_s, tick_s)
        if not (poll or reconcile):
            continue
        if rng.random() < 0.12:  # the count moved by someone else (or the first sync)
            spec_replicas = int(rng.integers(0, t.config.max_replicas + 4))
        n_pods = int(np.clip(spec_replicas + rng.integers(-2, 3), 0, 10))
        if rng.random() < 0.05:
            n_pods = 0
        ids = sorted(int(i) for i in rng.choice(CAPACITY, n_pods, replace=False))
        ready = [bool(rng.random() < 0.75) for _ in ids]
        pods = [
            Pod(
                f"pod-{p}",
                phase=POD_RUNNING,
                ready=r,
                start_time_s=now_s - 100.0,
                ready_transition_s=now_s - 40.0 if r else now_s - 100.0,
            )
            for p, r in zip(ids, ready, strict=True)
        ]
        pod_ids[:n_pods] = ids
        pod_ready[:n_pods] = ready
        ready_replicas = sum(ready)
        scraped = [p for p, r in zip(ids, ready, strict=True) if r]
        results.rows = [
            _result(rng, kind, scraped if rng.random() < 0.8 else ids, scale)
            for kind, scale in zip(kinds, scales, strict=True)
        ]
        res_kind, res_n, res_keys, res_vals = _rows(_slot_rows(control, results.rows))
        cron_state, cron_value = _cron_inputs(control, now_s)
        seen["cron"].update(cron_state.tolist())
        last = store._last_index(now_s)
        stamp_s = store.times_s[last] if last >= 0 else math.nan
        try:
            expected = control.decide(now_s, tick_s, spec_replicas, lambda pods=pods: pods, ready_replicas, store)
        except IndexError:  # a Pods metric answered before any scrape
            expected = NO_SCRAPE
        got = decision.decide(
            t,
            s,
            now_s,
            poll,
            reconcile,
            spec_replicas,
            ready_replicas,
            pod_ids,
            pod_ready,
            pod_start_s,
            pod_transition_s,
            n_pods,
            res_kind,
            res_n,
            res_keys,
            res_vals,
            stamp_s,
            cron_state,
            cron_value,
        )
        if got == decision.INT_OUT_OF_RANGE and t.config.has_formula:
            # The kernel declines a composite it cannot hold exactly (the engine re-runs the configuration in
            # Python): only where the formula's value on the readings it had is 2**53 milli-units or more.
            names = {trigger.name: row for row, trigger in enumerate(control.keda.so.triggers) if trigger.name}
            formula = validate_scaled_object(control.keda.so)
            out = formula.evaluate({name: s.keda[row, decision.K_READING_MILLI] / 1000 for name, row in names.items()})
            assert not abs(out * 1000) < 2**53, (k, now_s, out)
            break
        assert got == expected, (k, now_s, poll, reconcile, spec_replicas, ready, results.rows, cron_state)
        if expected == NO_SCRAPE:
            break
        assert _kernel_history(control, s) == _history(control), (k, now_s)
        seen["calls"] += 1
        seen["changes"] += expected != spec_replicas
        spec_replicas = expected
    return seen


@given(
    text=scaled_objects(),
    seed=st.integers(0, 2**32 - 1),
    tick_s=st.sampled_from([1.0, 5.0, 15.0]),
    sync_s=st.sampled_from([15.0, 10.0, 30.0]),
)
@settings(
    max_examples=1500, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow]
)
def test_scaled_objects_decide_as_control_does(tmp_path, text, seed, tick_s, sync_s):
    control = Control(_load(tmp_path, text), sync_period_s=sync_s)
    _run_side_by_side(control, seed, tick_s, int(900 / tick_s))


@given(
    text=scaled_objects(formula=True),
    seed=st.integers(0, 2**32 - 1),
    tick_s=st.sampled_from([1.0, 5.0, 15.0]),
    sync_s=st.sampled_from([15.0, 10.0, 30.0]),
)
@settings(
    max_examples=600, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow]
)
def test_scaled_objects_with_a_formula_decide_as_control_does(tmp_path, text, seed, tick_s, sync_s):
    # scalingModifiers: the composite metric from the triggers' values, its fallback, its activation.
    try:
        autoscaler = _load(tmp_path, text)
        control = Control(autoscaler, sync_period_s=sync_s)
    except PlannerInputError as error:  # KEDA's admission: the formula at -1 everywhere is not a number
        assume("formula" not in str(error))
        raise
    _run_side_by_side(control, seed, tick_s, int(900 / tick_s))


@given(
    text=scaled_objects(cron=True),
    seed=st.integers(0, 2**32 - 1),
    tick_s=st.sampled_from([1.0, 5.0, 15.0]),
    start_s=st.sampled_from([1704067200.0, 1710052200.0, 1730595600.0 - 300.0]),
)
@settings(
    max_examples=600, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow]
)
def test_scaled_objects_with_cron_triggers_decide_as_control_does(tmp_path, text, seed, tick_s, start_s):
    # Cron triggers beside Prometheus ones, their windows opening and closing within the 15 minutes, started
    # on a Monday 00:00 UTC, at the spring-forward in New York (2024-03-10 06:30 UTC) and five minutes
    # before its fall-back (2024-11-03 06:00 UTC).
    control = Control(_load(tmp_path, text), start_epoch_s=start_s)
    seen = _run_side_by_side(control, seed, tick_s, int(900 / tick_s))
    assert seen["cron"] - {CRON_NONE}  # some cron reading was handed in


def test_cron_readings_open_close_fail_and_hold_the_floor(tmp_path):
    # The kernel against Control at every 15 s tick of half an hour: a 5-minute window from 00:00 and a
    # broken zone beside a queue trigger, from a Monday 00:00 UTC; the count holds the floor in the windows.
    text = (
        "apiVersion: keda.sh/v1alpha1\nkind: ScaledObject\nmetadata: {name: chat}\nspec:\n"
        "  scaleTargetRef: {name: chat}\n  minReplicaCount: 0\n  maxReplicaCount: 10\n  pollingInterval: 15\n"
        "  cooldownPeriod: 30\n  triggers:\n"
        "  - type: prometheus\n    metadata: {query: 'sum(vllm:num_requests_waiting)', threshold: '5'}\n"
        "  - type: cron\n    metadata: {start: '0,20 0 * * *', end: '5,25 0 * * *', timezone: UTC, "
        "desiredReplicas: '4'}\n"
    )
    pair = _Pair(Control(_load(tmp_path, text), start_epoch_s=1704067200.0))
    replicas = [0]
    for k in range(120):
        replicas.append(pair.step(15.0 * k, replicas[-1], replicas[-1], {(): 0.0}))
    # From zero: KEDA activates to 1, then its HPA takes the max over metrics, the cron floor of 4.
    assert replicas[1] == 4 and set(replicas[1:23]) == {4}  # 00:00 to 00:05, then cooldownPeriod
    assert replicas[23] == 0 and set(replicas[23:81]) == {0}  # no activity: to zero, until 00:20
    assert replicas[81] == 4
    broken = text.replace("timezone: UTC", "timezone: Europe/Dublyn")
    pair = _Pair(Control(_load(tmp_path, broken), start_epoch_s=1704067200.0))
    # Every query of the cron trigger fails: an error poll keeps 2 replicas where they are, and the HPA holds
    # (one metric invalid while the other would scale down).
    assert [pair.step(15.0 * k, 2, 2, {(): 0.0}) for k in range(8)] == [2] * 8


@given(
    text=hpas(),
    seed=st.integers(0, 2**32 - 1),
    tick_s=st.sampled_from([1.0, 5.0, 15.0]),
    sync_s=st.sampled_from([15.0, 10.0, 30.0]),
)
@settings(
    max_examples=1500, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow]
)
def test_hpas_decide_as_control_does(tmp_path, text, seed, tick_s, sync_s):
    control = Control(_load(tmp_path, text), sync_period_s=sync_s)
    _run_side_by_side(control, seed, tick_s, int(900 / tick_s))


# ---- targeted cases -----------------------------------------------------------------------------

SO_FALLBACK = """apiVersion: keda.sh/v1alpha1
kind: ScaledObject
metadata: {name: chat}
spec:
  scaleTargetRef: {name: chat}
  minReplicaCount: 0
  maxReplicaCount: 10
  pollingInterval: 15
  cooldownPeriod: 30
  fallback: {failureThreshold: 1, replicas: 4, behavior: currentReplicasIfHigher}
  triggers:
  - type: prometheus
    metricType: Value
    metadata: {query: 'sum(vllm:num_requests_waiting)', threshold: '5', ignoreNullValues: 'false'}
"""


class _Pair:
    """A Python Control and the kernel fed the same tick (``is_due`` on a 15 s tick), compared at every call."""

    def __init__(self, control: Control) -> None:
        compiled = compile_control(control)
        self.control, self.t, self.s = control, tables(compiled), new_state(compiled)
        self.results = _stubbed(control)
        self.store = _Store()

    def step(self, now_s, spec_replicas, ready, result, *, scraped=True):
        if scraped and not self.store.times_s:
            self.store.times_s.append(0.0)
        rows = result if isinstance(result, list) else [result]  # one result per query, or a list of them
        self.results.rows = rows
        res_kind, res_n, res_keys, res_vals = _rows(_slot_rows(self.control, rows))
        size = max(CAPACITY, spec_replicas)
        ids = np.arange(size)
        flags = ids < ready
        pods = [Pod(f"pod-{p}", phase=POD_RUNNING, ready=bool(flags[p])) for p in range(spec_replicas)]
        poll, reconcile = self.control.is_due(now_s, 15.0)
        try:
            expected = self.control.decide(now_s, 15.0, spec_replicas, lambda: pods, ready, self.store)
        except IndexError:
            expected = NO_SCRAPE
        got = decision.decide(
            self.t,
            self.s,
            now_s,
            poll,
            reconcile,
            spec_replicas,
            ready,
            ids,
            flags,
            np.zeros(size),
            np.zeros(size),
            spec_replicas,
            res_kind,
            res_n,
            res_keys,
            res_vals,
            self.store.times_s[-1] if self.store.times_s else math.nan,
            *_cron_inputs(self.control, now_s),
        )
        if got > QUANTITY_OUT_OF_RANGE:  # not an error code: the same count and history
            assert got == expected
            assert _kernel_history(self.control, self.s) == _history(self.control)
        return got


def test_fallback_holds_after_failures_and_cooldown_scales_to_zero(tmp_path):
    pair = _Pair(Control(_load(tmp_path, SO_FALLBACK)))
    assert pair.step(0.0, 0, 0, {(): 12.0}) == 1  # activation from zero; the HPA does not run at 0
    assert pair.step(15.0, 1, 1, {(): 12.0}) == 3  # Value 12 over a 5 target on 1 Ready pod
    assert pair.step(30.0, 3, 3, {}) == 3  # first failure: within failureThreshold, the metric is invalid
    assert list(pair.s.keda[:1, K_FAILURES]) == [1]
    # Second failure: fallback, max(current 3, 4) replicas over 3 Ready pods -> the HPA computes 4.
    assert pair.step(45.0, 3, 3, {}) == 4
    assert pair.step(45.0 + 15.0, 4, 4, {(): 0.0}) == 0  # inactive, 30 s cooldownPeriod since 15 s passed
    assert list(pair.s.keda[:1, K_FAILURES]) == [2]  # the HPA did not run at 0 replicas
    assert pair.step(75.0, 0, 0, {(): 0.0}) == 0


@pytest.mark.parametrize(
    "formula", ["a > 1 ? a : 2", "a % 2", "a ** 2", "ceil(a)", "let b = a; b", "a ?? 1", "round(a)", "int(a)"]
)
def test_formulas_beyond_the_compiled_subset_are_refused(tmp_path, formula):
    modifiers = SO_FALLBACK.replace(
        "  triggers:", f"  advanced:\n    scalingModifiers:\n      formula: '{formula}'\n      target: '2'\n  triggers:"
    ).replace("  - type: prometheus\n", "  - type: prometheus\n    name: a\n")
    with pytest.raises(NotCompilable, match="formula"):
        compile_control(Control(_load(tmp_path, modifiers)))


def test_refused_configurations(tmp_path):
    tiny = SO_FALLBACK.replace("threshold: '5'", "threshold: '0.0001'")  # 0 milli-units: Python divides by it
    with pytest.raises(NotCompilable, match="milli-units"):
        compile_control(Control(_load(tmp_path, tiny)))
    used = Control(_load(tmp_path, SO_FALLBACK))
    used.keda.last_active_s = 3.0
    with pytest.raises(NotCompilable, match="already run"):
        compile_control(used)


def test_a_pods_metric_before_the_first_scrape_is_the_python_error(tmp_path):
    text = (
        "apiVersion: autoscaling/v2\nkind: HorizontalPodAutoscaler\nmetadata: {name: chat}\nspec:\n"
        "  scaleTargetRef: {kind: Deployment, name: chat}\n  maxReplicas: 5\n  metrics:\n"
        "  - type: Pods\n    pods:\n      metric: {name: num_requests_waiting}\n"
        "      target: {type: AverageValue, averageValue: '2'}\n"
    )
    pair = _Pair(Control(_load(tmp_path, text)))
    assert pair.step(0.0, 2, 2, 3.0, scraped=False) == NO_SCRAPE
    assert pair.step(0.0, 2, 2, {}, scraped=False) == 2  # empty: a failed reading, the HPA holds
    assert pair.step(15.0, 2, 2, {(0,): 10.0, (1,): 10.0}) == 4


def test_an_absurd_value_is_an_error_code_not_a_wrong_number(tmp_path):
    pair = _Pair(Control(_load(tmp_path, SO_FALLBACK)))
    assert pair.step(0.0, 2, 2, {(): 1e15}) == QUANTITY_OUT_OF_RANGE


def test_a_day_of_syncs_with_long_policy_periods_fits_the_history(tmp_path):
    text = (
        "apiVersion: autoscaling/v2\nkind: HorizontalPodAutoscaler\nmetadata: {name: chat}\nspec:\n"
        "  scaleTargetRef: {kind: Deployment, name: chat}\n  maxReplicas: 50\n"
        "  behavior:\n    scaleUp:\n      stabilizationWindowSeconds: 60\n"
        "      policies: [{type: Pods, value: 1, periodSeconds: 1800}]\n"
        "    scaleDown:\n      stabilizationWindowSeconds: 120\n"
        "      policies: [{type: Pods, value: 1, periodSeconds: 1800}, {type: Percent, value: 10, periodSeconds: 60}]\n"
        "  metrics:\n  - type: External\n    external:\n      metric: {name: num_requests_waiting}\n"
        "      target: {type: AverageValue, averageValue: '1'}\n"
    )
    pair = _Pair(Control(_load(tmp_path, text)))
    replicas = 5
    for k in range(86400 // 15):
        wanted = pair.step(15.0 * k, replicas, replicas, {(): float(1 + (k * 7919) % 40)})
        assert wanted >= 0, (k, wanted)
        replicas = wanted
    s = pair.s
    assert s.count[REC_N] > 4 and s.count[UP_N] > 1 and s.count[DOWN_N] > 1


def _hpa(metrics: str, *, max_replicas: int = 5, behavior: str = "") -> str:
    return (
        "apiVersion: autoscaling/v2\nkind: HorizontalPodAutoscaler\nmetadata: {name: chat}\nspec:\n"
        f"  scaleTargetRef: {{kind: Deployment, name: chat}}\n  maxReplicas: {max_replicas}\n{behavior}"
        "  metrics:\n" + metrics
    )


EXTERNAL_VALUE = (
    "  - type: External\n    external:\n      metric: {name: num_requests_waiting}\n"
    "      target: {type: Value, value: '1'}\n"
)
EXTERNAL_AVERAGE = EXTERNAL_VALUE.replace("type: Value, value", "type: AverageValue, averageValue")
OBJECT_VALUE = (
    "  - type: Object\n    object:\n      metric: {name: num_requests_waiting}\n"
    "      describedObject: {apiVersion: v1, kind: Service, name: chat}\n"
    "      target: {type: Value, value: '1'}\n"
)
PODS_AVERAGE = (
    "  - type: Pods\n    pods:\n      metric: {name: num_requests_waiting}\n"
    "      target: {type: AverageValue, averageValue: '2'}\n"
)


@pytest.mark.parametrize("metric", [EXTERNAL_VALUE, EXTERNAL_AVERAGE, OBJECT_VALUE])
def test_proposals_beyond_int32_are_capped_as_python_caps_them(tmp_path, metric):
    behavior = "  behavior:\n    scaleUp:\n      policies: [{type: Pods, value: 100000, periodSeconds: 15}]\n"
    pair = _Pair(Control(_load(tmp_path, _hpa(metric, max_replicas=2**31 - 1, behavior=behavior))))
    assert pair.step(0.0, 2, 2, {(): 3e9}) == 100002


def test_a_scale_down_limit_above_the_current_count_holds_it(tmp_path):
    # Above maxReplicas the HPA scales 9 -> 5 in one step; that scale-down event then leaves the Pods
    # policy's limit (9 - 1 = 8) above the current 5, so the count holds.
    behavior = (
        "  behavior:\n    scaleDown:\n      stabilizationWindowSeconds: 0\n"
        "      policies: [{type: Pods, value: 1, periodSeconds: 60}]\n"
    )
    pair = _Pair(Control(_load(tmp_path, _hpa(EXTERNAL_AVERAGE, behavior=behavior))))
    assert pair.step(0.0, 9, 9, {(): 2.0}) == 5
    assert pair.step(15.0, 5, 5, {(): 2.0}) == 5
    assert pair.step(75.0, 5, 5, {(): 2.0}) == 4


def test_a_pods_metric_exactly_at_target_with_missing_pods_fills_nothing(tmp_path):
    pair = _Pair(Control(_load(tmp_path, _hpa(PODS_AVERAGE))))
    assert pair.step(0.0, 4, 4, {(0,): 2.0, (1,): 2.0}) == 4
    assert pair.step(15.0, 4, 4, {(0,): 1.0, (1,): 1.0, (31,): 4.0}) == 4  # (1 + 1 + 4) / 3 = 2 with a stranger
    assert pair.step(30.0, 4, 4, {(): 9.0, (0,): 1.0}) == 4  # () is pod-0 too: one sample, the later value


def test_a_history_never_overflows_its_arrays(tmp_path):
    # Reconciling every second on a 15 s sync period keeps more recommendations than the arrays hold:
    # the kernel says so instead of writing past them.
    behavior = "  behavior:\n    scaleDown:\n      stabilizationWindowSeconds: 300\n"
    compiled = compile_control(Control(_load(tmp_path, _hpa(EXTERNAL_AVERAGE, behavior=behavior))))
    t, s = tables(compiled), new_state(compiled)
    res_kind, res_n, res_keys, res_vals = _rows([{(): 2.0}])
    ids = np.arange(CAPACITY)
    ready = np.ones(CAPACITY, dtype=np.bool_)
    codes = [
        decision.decide(
            t,
            s,
            float(k),
            False,
            True,
            3,
            3,
            ids,
            ready,
            np.zeros(CAPACITY),
            np.zeros(CAPACITY),
            3,
            res_kind,
            res_n,
            res_keys,
            res_vals,
            0.0,
            *NO_CRON,
        )
        for k in range(300)
    ]
    assert HISTORY_FULL in codes and s.count[REC_N] == s.rec_replicas.shape[0]


@njit(cache=False)
def _decide_many(t, s, n, ids, flags, zeros, res_kind, res_n, res_keys, res_vals, cron_state, cron_value):
    # Typed values, as the engine passes: literal ones would have numba compile decide once more for them.
    replicas = np.int64(3)
    for k in range(n):
        res_vals[0, 0] = float(k % 40)
        replicas = decision.decide(
            t,
            s,
            15.0 * k,
            np.bool_(True),
            np.bool_(True),
            replicas,
            replicas,
            ids,
            flags,
            zeros,
            zeros,
            replicas,
            res_kind,
            res_n,
            res_keys,
            res_vals,
            15.0 * k,
            cron_state,
            cron_value,
        )
        if replicas < 0:
            return replicas
    return replicas


def test_the_kernel_runs_inside_another_kernel(tmp_path):
    control = Control(_load(tmp_path, SO_FALLBACK))
    compiled = compile_control(control)
    t, s = tables(compiled), new_state(compiled)
    res_kind, res_n, res_keys, res_vals = _rows([{(): 1.0}])
    ids = np.arange(CAPACITY)
    assert (
        _decide_many(
            t,
            s,
            200,
            ids,
            np.ones(CAPACITY, np.bool_),
            np.zeros(CAPACITY),
            res_kind,
            res_n,
            res_keys,
            res_vals,
            *NO_CRON,
        )
        >= 0
    )


def test_scaled_objects_and_hpas_share_one_compiled_decide(tmp_path):
    keda = _Pair(Control(_load(tmp_path, SO_FALLBACK)))
    keda.step(0.0, 2, 2, {(): 1.0})
    signatures = set(decision.decide.signatures)
    behavior = "  behavior:\n    scaleUp:\n      policies: [{type: Percent, value: 50, periodSeconds: 30}]\n"
    hpa = _Pair(Control(_load(tmp_path, _hpa(PODS_AVERAGE + OBJECT_VALUE, behavior=behavior))))
    assert hpa.step(0.0, 2, 2, [{(0,): 1.0, (1,): 9.0}, 5.0]) == 3  # +50 % of 2, rounded up
    assert set(decision.decide.signatures) == signatures


# ---- useCachedMetrics and HPA scale to zero (issue 20) --------------------------------------------

SO_CACHED = """apiVersion: keda.sh/v1alpha1
kind: ScaledObject
metadata: {name: chat}
spec:
  scaleTargetRef: {name: chat}
  minReplicaCount: 1
  maxReplicaCount: 10
  pollingInterval: 30
  triggers:
  - type: prometheus
    useCachedMetrics: true
    metadata: {query: 'sum(vllm:num_requests_waiting)', threshold: '5', ignoreNullValues: 'false'}
"""


@pytest.mark.parametrize("cached", [True, False])
def test_cached_metrics_serve_the_last_poll_to_the_hpa(tmp_path, cached):
    text = SO_CACHED if cached else SO_CACHED.replace("    useCachedMetrics: true\n", "")
    pair = _Pair(Control(_load(tmp_path, text)))
    assert pair.step(0.0, 1, 1, {(): 10.0}) == 2  # poll and sync: both read 10, ceil(10 / 5) = 2
    # A sync between polls: with the cache the HPA still sees the poll's 10 (2 replicas hold); without it,
    # a fresh 40 asks for 8, held to max(2 x 2, 4) = 4 by the scale-up limit.
    assert pair.step(15.0, 2, 2, {(): 40.0}) == (2 if cached else 4)
    # A failing query between polls is no failure while the cache serves the poll's value.
    assert pair.step(30.0, 2, 2, {(): 40.0}) == 4  # the poll refreshes the cache
    assert pair.step(45.0, 4, 4, {}) == (8 if cached else 4)
    assert list(pair.s.keda[:1, K_FAILURES]) == [0 if cached else 1]


HPA_TO_ZERO = """apiVersion: autoscaling/v2
kind: HorizontalPodAutoscaler
metadata: {name: chat}
spec:
  scaleTargetRef: {apiVersion: apps/v1, kind: Deployment, name: chat}
  minReplicas: 0
  maxReplicas: 10
  behavior:
    scaleDown: {stabilizationWindowSeconds: 0}
  metrics:
  - type: External
    external:
      metric: {name: vllm:num_requests_waiting}
      target: {type: AverageValue, averageValue: '5'}
"""


def test_an_hpa_scales_to_zero_and_back_with_its_condition(tmp_path):
    pair = _Pair(Control(_load(tmp_path, HPA_TO_ZERO)))
    assert pair.control.hpa.scaled_to_zero and pair.s.count[SCALED_TO_ZERO] == 1  # a run may start at 0
    assert pair.step(0.0, 0, 0, {(): 12.0}) == 3  # from zero: ceil(12 / 5)
    assert pair.s.count[SCALED_TO_ZERO] == 0
    assert pair.step(15.0, 3, 3, {(): 0.0}) == 0
    assert pair.s.count[SCALED_TO_ZERO] == 1  # ScaledToZero True: the HPA took it to zero
    assert pair.step(30.0, 0, 0, {(): 20.0}) == 4
    # Scaled to zero by someone else, the HPA holds it there (ScalingDisabled) in both engines.
    assert pair.step(45.0, 0, 0, {(): 20.0}) == 0
