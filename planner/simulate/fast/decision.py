"""The autoscaler's decision, compiled: :meth:`planner.simulate.control.Control.decide` for one tick, in numba.

The numba twin of what ``Control.decide`` runs on a tick where something is
due, number for number and with the same controller history:

* a ScaledObject: KEDA's poll (:meth:`planner.autoscaler.keda.KedaController.poll`:
  ``evaluate_triggers`` without fallback, ``request_scale``, the metrics cache
  of ``useCachedMetrics`` triggers), then, when replicas are left, the
  reconcile of the HPA KEDA owns (:meth:`planner.autoscaler.keda.KedaController.reconcile`:
  ``served_values``, failure counts, ``_fallback`` / ``_fallback_replicas`` /
  ``_fallback_value_milli``, one External reading per trigger; with
  ``scalingModifiers``, one reading of the composite metric, ``_composite``'s
  formula over the triggers' readings, its fallback and its activation, for a
  formula of numbers, trigger names, ``+ - * /``, ``max``, ``min`` and ``abs``:
  :func:`formula_milli`). A ``cron``
  trigger reads no query: the caller hands in its reading at ``now_s``
  (``KedaController.cron_readings``: ``desiredReplicas`` or 0, its window as
  its activity, or a failed zone), computed ahead from the clock alone
  (:func:`planner.autoscaler.cron_scaler.cron_reading_runs`);
* a plain HPA: ``HorizontalController.reconcile_autoscaler`` on Pods, Object
  and External readings built as ``Control._reading`` builds them.

The HPA half ports :mod:`planner.autoscaler.horizontal` (``reconcileAutoscaler``,
``computeReplicasForMetrics``, ``computeReplicasForMetric``),
:mod:`planner.autoscaler.behavior` (the legacy normalization and the behaviors path:
stabilization windows, Pods/Percent policies, ``selectPolicy``,
``storeScaleEvent`` with outdated-slot reuse) and :mod:`planner.autoscaler.replica_calculator`
(``calcPlainMetricReplicas`` for a Pods metric, the Object and External
calculators, ``getUsageRatioReplicaCount``). Function names are the Python
port's, branches keep its order (and so ``horizontal.go``'s).

Python's integers never overflow; here every integer a decision computes is
kept within +/- 2**62 (query values within :data:`QUANTITY_LIMIT`, replica
counts and policy values within int32, targets below 2**52 milli-units), and
a value outside those ranges makes :func:`decide` return a negative code
instead of a different number. The codes (all below -100, so the engine can
tell them from its own):

* :data:`QUANTITY_OUT_OF_RANGE`: a query value too large to round to
  milli-units exactly (``abs(value) >= 2**52 / 1000``, about 4.5e12);
* :data:`INT_OUT_OF_RANGE`: an intermediate integer (a sum of milli-values,
  a rate limit, a fallback value) beyond +/- 2**62;
* :data:`HISTORY_FULL`: a recommendation or scale-event history outgrew
  its arrays (see :func:`new_state`);
* :data:`NO_SCRAPE`: a Pods metric answered before the first scrape, where
  the Python side raises ``IndexError`` reading the scrape time.

On any of them the state may be partly updated: re-run the configuration in
Python from the start.

Layout, for speed: numba increfs and decrefs every array a function receives
(each array inside a tuple too) unless the call is inlined, about 5 ns per
array per call. So the spec's scalars travel in :data:`Config` (free), its
arrays are packed into four and the history into six, and the helpers that
take many arrays are inlined into :func:`decide` (``inline="always"``); the
small leaves stay separate, which keeps the first compile near 8 s.
"""

from __future__ import annotations

import math
from collections import namedtuple
from dataclasses import dataclass
from typing import Any

import numpy as np
from numba import njit

from planner.autoscaler.behavior import (
    DISABLED_POLICY_SELECT,
    MIN_CHANGE_POLICY_SELECT,
    PERCENT_SCALING_POLICY,
    PODS_SCALING_POLICY,
    get_longest_policy_period,
)
from planner.autoscaler.horizontal import (
    SCALE_TO_ZERO_CONDITION,
    SCALE_TO_ZERO_DISABLED,
    SCALE_TO_ZERO_LEGACY,
    has_object_or_external_metrics,
)
from planner.autoscaler.hpa_spec import AVERAGE_VALUE, EXTERNAL, OBJECT, PODS, VALUE
from planner.autoscaler.keda import COMPOSITE_METRIC_NAME, validate_scaled_object
from planner.simulate.fast.metrics import python_sum

__all__ = [
    "CRON_ACTIVE",
    "CRON_FAILED",
    "CRON_INACTIVE",
    "CRON_NONE",
    "HISTORY_FULL",
    "HORIZON_S",
    "INT_OUT_OF_RANGE",
    "NO_SCRAPE",
    "QUANTITY_LIMIT",
    "QUANTITY_OUT_OF_RANGE",
    "CompiledControl",
    "Config",
    "NotCompilable",
    "State",
    "Tables",
    "compile_control",
    "decide",
    "keda_quantity_milli",
    "new_state",
    "tables",
]

# decide's error codes.
QUANTITY_OUT_OF_RANGE = -101
INT_OUT_OF_RANGE = -102
HISTORY_FULL = -103
NO_SCRAPE = -104

QUANTITY_LIMIT = 2.0**52 / 1000.0
"""Largest ``abs(value)`` (exclusive) :func:`keda_quantity_milli` rounds; beyond it returns the error marker."""
HORIZON_S = 2 * 86400.0
"""Windows and policy periods are sized for at most this much history. [s]"""

MAX_INT32 = 2**31 - 1
MIN_INT32 = -(2**31)
MAX_INT64 = 2**63 - 1
_SAFE = 2**62  # every integer stays strictly inside +/- _SAFE
_SAFE_F = 2.0**62
_BAD = -(2**63)  # a helper's "outside the safe range" result (no legitimate value equals it)
_EXACT_MILLI_F = 2.0**52  # value * 1000 below this: half-integers are representable
_NONE_KEY = np.full(1, -1, dtype=np.int64)  # the series key of a number result, ``()``

# Metric sources, target types (Tables.metric columns M_SOURCE, M_TARGET_TYPE).
SOURCE_PODS, SOURCE_OBJECT, SOURCE_EXTERNAL = 0, 1, 2
TARGET_VALUE, TARGET_AVERAGE_VALUE, TARGET_OTHER = 0, 1, 2
# selectPolicy and policy types. Anything but Min or Disabled selects as Max, as the Python port does.
SELECT_MAX, SELECT_MIN, SELECT_DISABLED = 0, 1, 2
POLICY_PODS, POLICY_PERCENT, POLICY_OTHER = 0, 1, 2
# fallback.behavior.
FALLBACK_STATIC, FALLBACK_CURRENT, FALLBACK_IF_HIGHER, FALLBACK_IF_LOWER = 0, 1, 2, 3
_FALLBACK_CODES = {
    "static": FALLBACK_STATIC,
    "currentReplicas": FALLBACK_CURRENT,
    "currentReplicasIfHigher": FALLBACK_IF_HIGHER,
    "currentReplicasIfLower": FALLBACK_IF_LOWER,
}
# res_kind (as the metrics kernel returns it).
RES_NUMBER, RES_VECTOR = 0, 1
# Query.scalar's outcomes.
_SCALAR_VALUE, _SCALAR_EMPTY, _SCALAR_ERROR = 0, 1, 2
# A metric proposal's status (negative: an error code).
_VALID, _INVALID = 0, 1
_LEAVE = -1  # request_scale leaves the count to the HPA (Python's ``None``)

# Columns of Tables.metric (one row per HPA metric, in spec.metrics order).
M_SOURCE, M_TARGET_TYPE, M_HAS_VALUE, M_VALUE_MILLI, M_HAS_AVERAGE, M_AVERAGE_MILLI, M_TRIGGER = range(7)
# Columns of Tables.policy (the scaleUp policies first, then the scaleDown ones).
P_TYPE, P_VALUE, P_PERIOD = range(3)
# Columns of Tables.trigger (one row per trigger, in spec.triggers order).
T_IGNORE_NULL, T_METRIC, T_CACHED = range(3)
# State.count slots (SCALED_TO_ZERO: the HPA's ScaledToZero condition); the scale-event directions
# (State.events rows, count[1 + direction]).
REC_N, UP_N, DOWN_N, SCALED_TO_ZERO = 0, 1, 2, 3
UP, DOWN = 0, 1
# Columns of State.events and State.keda (K_CACHE: the last poll's record of a useCachedMetrics trigger,
# CACHE_*; K_CACHE_MILLI its value).
E_CHANGE, E_OUTDATED = 0, 1
K_FAILURES, K_READING_OK, K_READING_MILLI, K_CACHE, K_CACHE_MILLI = range(5)
CACHE_EMPTY, CACHE_VALUE, CACHE_FAILED, CACHE_OUT_OF_RANGE = 0, 1, 2, 3
# A trigger's cron reading at now_s (decide's cron_state): not a cron trigger (read its query), outside its
# window, inside it, or its zone does not load (KEDA's "unable to load timezone": a failed trigger).
CRON_NONE, CRON_INACTIVE, CRON_ACTIVE, CRON_FAILED = 0, 1, 2, 3
# A scalingModifiers formula as postfix code (Tables.formula rows: opcode, argument; Tables.formula_consts):
# a number, a trigger's value (the argument: its row), unary minus, + - * /, max/min of the argument's count
# of operands, abs. Unary plus and float() emit nothing.
F_NUMBER, F_TRIGGER, F_NEGATE, F_ADD, F_SUBTRACT, F_MULTIPLY, F_DIVIDE, F_MAX, F_MIN, F_ABS = range(10)
_FORMULA_BINARY = {"+": F_ADD, "-": F_SUBTRACT, "*": F_MULTIPLY, "/": F_DIVIDE}
_EXACT_INT_F = 2.0**53  # a composite's milli-units below this divide by 1000 as Python's int / int does
# Config.scale_to_zero: planner.autoscaler.horizontal's SCALE_TO_ZERO_* modes.
STZ_CONDITION, STZ_DISABLED, STZ_LEGACY = 0, 1, 2
_STZ_CODES = {
    SCALE_TO_ZERO_CONDITION: STZ_CONDITION,
    SCALE_TO_ZERO_DISABLED: STZ_DISABLED,
    SCALE_TO_ZERO_LEGACY: STZ_LEGACY,
}


class NotCompilable(Exception):
    """The autoscaler uses something this kernel does not port; run it in Python."""


Config = namedtuple(
    "Config",
    [
        "is_keda",  # bool: a ScaledObject (KEDA poll + its HPA), else a plain HPA
        # --- the HPA (the ScaledObject's own, or the manifest's)
        "min_replicas",  # int: HPA minReplicas (KEDA: minReplicaCount, or 1 when 0)
        "max_replicas",  # int
        "tol_down",
        "tol_up",  # float: per-direction tolerances [fraction]
        "has_behavior",  # bool: spec.behavior set (behaviors path), else the legacy path
        "legacy_window_s",  # float: --horizontal-pod-autoscaler-downscale-stabilization [s]
        "scale_up_limit_factor",
        "scale_up_limit_minimum",  # float: legacy scale-up limit
        "up_window_s",
        "down_window_s",  # float: stabilization windows (down filled from the flag) [s]
        "up_select",
        "down_select",  # int: SELECT_*
        "n_up_policies",  # int: Tables.policy rows before the scaleDown ones
        "up_longest_s",
        "down_longest_s",  # int: longest policy period per direction [s]
        # --- KEDA's operator (dummies for a plain HPA)
        "keda_min_replicas",  # int: minReplicaCount (default 0)
        "has_idle",
        "idle_replicas",  # bool, int: idleReplicaCount
        "cooldown_s",
        "initial_cooldown_s",
        "created_s",  # float [s]
        "has_fallback",
        "fallback_threshold",
        "fallback_replicas",
        "fallback_behavior",  # bool, int, int, int
        # --- scale to zero (the HPA)
        "scale_to_zero",  # int: STZ_*
        "has_object_or_external",  # bool: hasObjectOrExternalMetrics
        # --- scalingModifiers (dummies without a formula)
        "has_formula",  # bool: the HPA reads one composite metric, the formula's value
        "formula_value_target",  # bool: its metricType is Value (else AverageValue)
        "formula_target",  # float: scalingModifiers.target [metric units]
        "activation_target",  # float: scalingModifiers.activationTarget (0 when unset) [metric units]
    ],
)
"""The scalars of the spec (a tuple of scalars costs nothing to hand to a helper)."""

Tables = namedtuple(
    "Tables",
    [
        "config",  # Config
        "metric",  # int64 (metrics, 7): columns M_*; targets in milli-units
        "policy",  # int64 (policies, 3): columns P_* (type, value [pods or %], periodSeconds [s])
        "trig_activation",  # float64 (triggers,): activationThreshold [metric units]
        "trigger",  # int64 (triggers, 3): columns T_* (ignoreNullValues, the HPA metric it becomes, useCachedMetrics)
        "formula",  # int64 (instructions, 2): the formula's code (F_* and its argument); no rows without one
        "formula_consts",  # float64 (instructions,): each instruction's number (F_NUMBER)
    ],
)
"""What :func:`decide` reads, from :func:`tables`. Few arrays: each costs reference counting per call."""

State = namedtuple(
    "State",
    [
        "count",  # int64 (4,): recommendations, scale-up and scale-down events held (REC_N, UP_N, DOWN_N),
        #           and the ScaledToZero condition (SCALED_TO_ZERO, 0 or 1)
        "rec_replicas",
        "rec_t",  # int64, float64 (slots,): TimestampedRecommendation [replicas, s]
        "events",  # int64 (2, slots, 2): TimestampedScaleEvent per direction (UP, DOWN): change, outdated
        "event_t",  # float64 (2, slots): their timestamps [s]
        "keda",  # int64 (triggers, 5): columns K_*: consecutive failures; scratch: each trigger's reading;
        #          the metrics cache. With a formula, one row more: the composite metric's reading
        "last_active_s",  # float64 (1,): KEDA's status.lastActiveTime, NaN while never active [s]
        "formula_stack",  # float64 (formula rows, at least 1,): scratch for formula_milli's operands
    ],
)
"""The controller history :func:`decide` mutates, from :func:`new_state`.

``count[REC_N] == 0`` is the Python ``recommendations is None`` (not seeded yet).
"""


@dataclass(frozen=True, eq=False)
class CompiledControl:
    """A :class:`~planner.simulate.control.Control`'s autoscaler as numbers (see :data:`Tables` for the fields).

    ``sync_period_s`` and ``polling_interval_s`` are the Control's, as given
    (the engine decides when :func:`decide` runs); ``n_queries`` is the number
    of result rows :func:`decide` reads (triggers, or HPA metrics).
    """

    is_keda: bool
    sync_period_s: float
    polling_interval_s: float
    n_queries: int
    min_replicas: int
    max_replicas: int
    tol_down: float
    tol_up: float
    has_behavior: bool
    legacy_window_s: float
    scale_up_limit_factor: float
    scale_up_limit_minimum: float
    up_window_s: float
    down_window_s: float
    up_select: int
    down_select: int
    up_pol_type: np.ndarray
    up_pol_value: np.ndarray
    up_pol_period: np.ndarray
    down_pol_type: np.ndarray
    down_pol_value: np.ndarray
    down_pol_period: np.ndarray
    up_longest_s: int
    down_longest_s: int
    metric_source: np.ndarray
    metric_target_type: np.ndarray
    metric_has_value: np.ndarray
    metric_value_milli: np.ndarray
    metric_has_average: np.ndarray
    metric_average_milli: np.ndarray
    metric_trigger: np.ndarray
    keda_min_replicas: int
    has_idle: bool
    idle_replicas: int
    cooldown_s: float
    initial_cooldown_s: float
    created_s: float
    has_fallback: bool
    fallback_threshold: int
    fallback_replicas: int
    fallback_behavior: int
    trig_activation: np.ndarray
    trig_ignore_null: np.ndarray
    trig_metric: np.ndarray
    trig_cached: np.ndarray
    has_formula: bool
    formula_value_target: bool
    formula_target: float
    activation_target: float
    formula_code: np.ndarray
    formula_consts: np.ndarray
    scale_to_zero: int
    has_object_or_external: bool
    scaled_to_zero: bool


# ---- Python side --------------------------------------------------------------------------------


def _ints(values) -> np.ndarray:
    return np.asarray(list(values), dtype=np.int64).reshape(-1)


def _bounded(value: int, what: str, low: int = 0, high: int = MAX_INT32) -> int:
    if not low <= value <= high:
        raise NotCompilable(f"{what} = {value} is outside [{low}, {high}]")
    return int(value)


def _target_milli(value: int | None, what: str) -> int:
    # A target the kernel divides by: Python raises ZeroDivisionError on 0; large ones leave int64.
    if value is None:
        return 0
    if not 0 < value < 2**52:
        raise NotCompilable(f"{what} = {value} milli-units is outside (0, 2**52)")
    return int(value)


def _legacy_constant(value: float, what: str, limit: float) -> float:
    # calculate_scale_up_limit's int() must stay within int64 for any int32 replica count.
    if not abs(float(value)) <= limit:
        raise NotCompilable(f"{what} = {value} is outside [-{limit:g}, {limit:g}]")
    return float(value)


def _select(policy: str | None) -> int:
    if policy == DISABLED_POLICY_SELECT:
        return SELECT_DISABLED
    if policy == MIN_CHANGE_POLICY_SELECT:
        return SELECT_MIN
    return SELECT_MAX


def _policies(rules, what: str) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    policies = rules.policies or ()
    kinds = [
        POLICY_PODS
        if p.type == PODS_SCALING_POLICY
        else POLICY_PERCENT
        if p.type == PERCENT_SCALING_POLICY
        else POLICY_OTHER
        for p in policies
    ]
    values = [_bounded(p.value, f"{what} policy value") for p in policies]
    periods = [_bounded(p.period_seconds, f"{what} policy periodSeconds") for p in policies]
    return _ints(kinds), _ints(values), _ints(periods)


def _no_formula() -> dict[str, Any]:
    """CompiledControl's formula fields without a formula."""
    return dict(
        has_formula=False,
        formula_value_target=False,
        formula_target=0.0,
        activation_target=0.0,
        formula_code=np.zeros((0, 2), dtype=np.int64),
        formula_consts=np.zeros(0),
    )


def _formula_program(formula, rows: dict[str, int]) -> tuple[np.ndarray, np.ndarray]:
    """The formula's tree (:attr:`planner.autoscaler.formula.Formula.tree`) as postfix code.

    ``rows`` maps each trigger name to its row (its position in ``spec.triggers``).
    """
    code: list[tuple[int, int]] = []
    consts: list[float] = []

    def emit(op: int, argument: int = 0, number: float = 0.0) -> None:
        code.append((op, argument))
        consts.append(number)

    def walk(node: tuple) -> None:
        kind = node[0]
        if kind == "number":
            emit(F_NUMBER, number=float(node[1]))
        elif kind == "name":
            emit(F_TRIGGER, rows[node[1]])
        elif kind == "unary" and node[1] in ("-", "+"):
            walk(node[2])
            if node[1] == "-":
                emit(F_NEGATE)
        elif kind == "binary" and node[1] in _FORMULA_BINARY:
            walk(node[2])
            walk(node[3])
            emit(_FORMULA_BINARY[node[1]])
        elif kind == "call" and node[1] in ("max", "min", "abs", "float"):
            for argument in node[2]:
                walk(argument)
            if node[1] in ("max", "min"):
                emit(F_MAX if node[1] == "max" else F_MIN, len(node[2]))
            elif node[1] == "abs":
                emit(F_ABS)
        else:
            what = node[1] if kind in ("unary", "binary", "call") else kind
            raise NotCompilable(f"the formula's {what!r} is not compiled (numbers, names, + - * /, max, min, abs are)")

    walk(formula.tree)
    return np.asarray(code, dtype=np.int64).reshape(-1, 2), np.asarray(consts, dtype=np.float64)


def compile_control(control) -> CompiledControl:
    """Encode ``control``'s autoscaler for :func:`decide`.

    Parameters
    ----------
    control : planner.simulate.control.Control
        Freshly built (its controllers have not run yet).

    Returns
    -------
    CompiledControl

    Raises
    ------
    NotCompilable
        A ``scalingModifiers`` formula beyond numbers, trigger names,
        ``+ - * /``, ``max``, ``min`` and ``abs``; a controller that has already run; counts,
        policy values or periods outside int32; a target of 0 milli-units
        (the Python controller divides by it) or of 2**52 or more.
    """
    if control.keda is not None:
        keda = control.keda
        so = keda.so
        if keda.last_active_s is not None or keda.failures or keda.metrics_cache:
            raise NotCompilable("the KEDA controller has already run")
        controller = keda.controller
        triggers = so.triggers
        cron = keda.cron_scalers
        if cron and keda.start_epoch_s is None:
            raise NotCompilable("a cron trigger without a wall clock reads its value from the caller")
        if list(control.queries) != [t.index for t in triggers if t.index not in cron] or len(cron) + len(
            control.queries
        ) != len(triggers):
            raise NotCompilable("the queries are not one per non-cron trigger in spec.triggers order")
        names = [m.name for m in controller.spec.metrics]
        modifiers = so.scaling_modifiers if so.is_using_modifiers else None
        formula_part = _no_formula()
        if modifiers is not None:
            # The HPA reads one External metric, the composite, from the row after the triggers' own.
            if names != [COMPOSITE_METRIC_NAME] or any(t.is_resource for t in triggers):
                raise NotCompilable("the ScaledObject's HPA is not the composite metric alone")
            formula = validate_scaled_object(so)
            assert formula is not None  # is_using_modifiers
            rows = {t.name: row for row, t in enumerate(triggers) if t.name}
            code, consts = _formula_program(formula, rows)
            formula_part = dict(
                has_formula=True,
                formula_value_target=modifiers.metric_type == VALUE,
                formula_target=float(modifiers.target),
                activation_target=float(modifiers.activation_target) if modifiers.activation_target else 0.0,
                formula_code=code,
                formula_consts=consts,
            )
            trig_metric = [0] * len(triggers)  # (read only by the per-trigger fallback, which a formula skips)
            metric_trigger = [len(triggers)]
        elif (
            any(m.type != EXTERNAL for m in controller.spec.metrics)
            or sorted(names) != sorted(t.metric_name for t in triggers)
            or len(set(names)) != len(names)
        ):
            raise NotCompilable("the ScaledObject's HPA is not one External metric per trigger")
        else:
            trig_metric = [names.index(t.metric_name) for t in triggers]
            metric_trigger = [trig_metric.index(i) for i in range(len(names))]
        fallback = so.fallback
        if fallback is not None and fallback.behavior not in _FALLBACK_CODES:
            raise NotCompilable(f"fallback.behavior {fallback.behavior!r}")
        # CompiledControl's KEDA and behavior fields, by name (mixed types: checked by the constructor's
        # keywords at run time, not by mypy).
        keda_part: dict[str, Any] = dict(
            keda_min_replicas=_bounded(so.effective_min_replica_count, "minReplicaCount"),
            has_idle=so.idle_replica_count is not None,
            idle_replicas=_bounded(so.idle_replica_count or 0, "idleReplicaCount"),
            cooldown_s=float(so.effective_cooldown_period_s),
            initial_cooldown_s=float(so.effective_initial_cooldown_period_s),
            created_s=float(keda.created_s),
            has_fallback=fallback is not None,
            fallback_threshold=_bounded(
                fallback.failure_threshold if fallback else 0, "failureThreshold", high=_SAFE - 1
            ),
            fallback_replicas=_bounded(fallback.replicas if fallback else 0, "fallback.replicas"),
            fallback_behavior=_FALLBACK_CODES[fallback.behavior] if fallback else FALLBACK_STATIC,
            trig_activation=np.asarray([float(t.activation_threshold) for t in triggers], dtype=float),
            trig_ignore_null=np.asarray([bool(t.ignore_null_values) for t in triggers], dtype=np.bool_),
            trig_metric=_ints(trig_metric),
            trig_cached=np.asarray([bool(t.use_cached_metrics) for t in triggers], dtype=np.bool_),
            **formula_part,
        )
        n_queries = len(triggers)
    else:
        controller = control.hpa
        metric_trigger = [0] * len(controller.spec.metrics)
        keda_part = dict(
            keda_min_replicas=0,
            has_idle=False,
            idle_replicas=0,
            cooldown_s=0.0,
            initial_cooldown_s=0.0,
            created_s=0.0,
            has_fallback=False,
            fallback_threshold=0,
            fallback_replicas=0,
            fallback_behavior=FALLBACK_STATIC,
            trig_activation=np.zeros(0),
            trig_ignore_null=np.zeros(0, np.bool_),
            trig_metric=_ints([]),
            trig_cached=np.zeros(0, np.bool_),
            **_no_formula(),
        )
        n_queries = len(control.metric_queries)
    if controller.recommendations is not None or controller.scale_up_events or controller.scale_down_events:
        raise NotCompilable("the HPA controller has already run")
    spec = controller.spec
    if len(spec.metrics) != (1 if keda_part["has_formula"] else n_queries):
        raise NotCompilable("the queries are not one per HPA metric")
    sources = {PODS: SOURCE_PODS, OBJECT: SOURCE_OBJECT, EXTERNAL: SOURCE_EXTERNAL}
    if any(m.type not in sources for m in spec.metrics):
        raise NotCompilable("only Pods, Object and External metrics are compiled")
    targets = {VALUE: TARGET_VALUE, AVERAGE_VALUE: TARGET_AVERAGE_VALUE}
    behavior = controller.behavior
    empty = (_ints([]), _ints([]), _ints([]))
    if behavior is not None:
        up, down = behavior.scale_up, behavior.scale_down
        down_window = down.stabilization_window_seconds
        if down_window is None:  # maybeInitScaleDownStabilizationWindow
            down_window = int(controller.downscale_stabilization_window_s)
        up_policies, down_policies = _policies(up, "scaleUp"), _policies(down, "scaleDown")
        behavior_part: dict[str, Any] = dict(
            up_window_s=float(_bounded(up.stabilization_window_seconds, "scaleUp.stabilizationWindowSeconds")),
            down_window_s=float(_bounded(down_window, "scaleDown.stabilizationWindowSeconds")),
            up_select=_select(up.select_policy),
            down_select=_select(down.select_policy),
            up_longest_s=get_longest_policy_period(up),
            down_longest_s=get_longest_policy_period(down),
        )
    else:
        up_policies = down_policies = empty
        behavior_part = dict(
            up_window_s=0.0,
            down_window_s=0.0,
            up_select=SELECT_MAX,
            down_select=SELECT_MAX,
            up_longest_s=0,
            down_longest_s=0,
        )
    metrics = spec.metrics
    return CompiledControl(
        is_keda=control.keda is not None,
        sync_period_s=float(control.sync_period_s),
        polling_interval_s=float(control.polling_interval_s),
        n_queries=n_queries,
        min_replicas=_bounded(spec.effective_min_replicas, "minReplicas"),
        max_replicas=_bounded(spec.max_replicas, "maxReplicas"),
        tol_down=float(controller.tolerances.scale_down),
        tol_up=float(controller.tolerances.scale_up),
        has_behavior=behavior is not None,
        legacy_window_s=float(controller.downscale_stabilization_window_s),
        scale_up_limit_factor=_legacy_constant(controller.scale_up_limit_factor, "scale_up_limit_factor", 2.0**20),
        scale_up_limit_minimum=_legacy_constant(controller.scale_up_limit_minimum, "scale_up_limit_minimum", 2.0**61),
        up_pol_type=up_policies[0],
        up_pol_value=up_policies[1],
        up_pol_period=up_policies[2],
        down_pol_type=down_policies[0],
        down_pol_value=down_policies[1],
        down_pol_period=down_policies[2],
        metric_source=_ints(sources[m.type] for m in metrics),
        metric_target_type=_ints(targets.get(m.target.type, TARGET_OTHER) for m in metrics),
        metric_has_value=np.asarray([m.target.value_milli is not None for m in metrics], dtype=np.bool_),
        metric_value_milli=_ints(_target_milli(m.target.value_milli, f"{m.name} target.value") for m in metrics),
        metric_has_average=np.asarray([m.target.average_value_milli is not None for m in metrics], dtype=np.bool_),
        metric_average_milli=_ints(
            _target_milli(m.target.average_value_milli, f"{m.name} target.averageValue") for m in metrics
        ),
        metric_trigger=_ints(metric_trigger),
        scale_to_zero=_STZ_CODES[controller.scale_to_zero],
        has_object_or_external=has_object_or_external_metrics(spec),
        scaled_to_zero=bool(controller.scaled_to_zero),
        **behavior_part,
        **keda_part,
    )


def tables(compiled: CompiledControl) -> Tables:
    """The named tuple :func:`decide` takes as its first argument."""
    c = compiled
    config = Config(
        is_keda=bool(c.is_keda),
        min_replicas=int(c.min_replicas),
        max_replicas=int(c.max_replicas),
        tol_down=float(c.tol_down),
        tol_up=float(c.tol_up),
        has_behavior=bool(c.has_behavior),
        legacy_window_s=float(c.legacy_window_s),
        scale_up_limit_factor=float(c.scale_up_limit_factor),
        scale_up_limit_minimum=float(c.scale_up_limit_minimum),
        up_window_s=float(c.up_window_s),
        down_window_s=float(c.down_window_s),
        up_select=int(c.up_select),
        down_select=int(c.down_select),
        n_up_policies=len(c.up_pol_type),
        up_longest_s=int(c.up_longest_s),
        down_longest_s=int(c.down_longest_s),
        keda_min_replicas=int(c.keda_min_replicas),
        has_idle=bool(c.has_idle),
        idle_replicas=int(c.idle_replicas),
        cooldown_s=float(c.cooldown_s),
        initial_cooldown_s=float(c.initial_cooldown_s),
        created_s=float(c.created_s),
        has_fallback=bool(c.has_fallback),
        fallback_threshold=int(c.fallback_threshold),
        fallback_replicas=int(c.fallback_replicas),
        fallback_behavior=int(c.fallback_behavior),
        scale_to_zero=int(c.scale_to_zero),
        has_object_or_external=bool(c.has_object_or_external),
        has_formula=bool(c.has_formula),
        formula_value_target=bool(c.formula_value_target),
        formula_target=float(c.formula_target),
        activation_target=float(c.activation_target),
    )
    metric = np.stack(
        [
            c.metric_source,
            c.metric_target_type,
            c.metric_has_value,
            c.metric_value_milli,
            c.metric_has_average,
            c.metric_average_milli,
            c.metric_trigger,
        ],
        axis=1,
    ).astype(np.int64)
    policy = np.stack(
        [
            np.concatenate([c.up_pol_type, c.down_pol_type]),
            np.concatenate([c.up_pol_value, c.down_pol_value]),
            np.concatenate([c.up_pol_period, c.down_pol_period]),
        ],
        axis=1,
    ).astype(np.int64)
    trigger = np.stack([c.trig_ignore_null, c.trig_metric, c.trig_cached], axis=1).astype(np.int64).reshape(-1, 3)
    return Tables(
        config,
        np.ascontiguousarray(metric.reshape(-1, 7)),
        np.ascontiguousarray(policy.reshape(-1, 3)),
        np.ascontiguousarray(c.trig_activation, dtype=float),
        np.ascontiguousarray(trigger),
        np.ascontiguousarray(c.formula_code, dtype=np.int64).reshape(-1, 2),
        np.ascontiguousarray(c.formula_consts, dtype=float),
    )


def _capacity(window_s: float, sync_period_s: float) -> int:
    # Records newer than the window, at reconciles at least 2/3 of a sync period apart (Control.is_due
    # rounds the period to whole ticks), plus the one appended and a margin.
    return int(1.5 * min(max(window_s, 0.0), HORIZON_S) / max(sync_period_s, 0.1)) + 4


def new_state(compiled: CompiledControl) -> State:
    """A fresh controller history for :func:`decide`.

    The histories are sized from the windows and policy periods (at most
    :data:`HORIZON_S` of them) and the sync period: a recommendation or event
    older than its window or longest period is replaced before another is
    appended, so they cannot fill on ``Control.is_due``'s cadence unless a
    window exceeds :data:`HORIZON_S` (then :data:`HISTORY_FULL`).
    """
    if compiled.has_behavior:
        window_s = max(compiled.up_window_s, compiled.down_window_s)
    else:
        window_s = compiled.legacy_window_s
    n_rec = _capacity(window_s, compiled.sync_period_s)
    n_events = max(
        _capacity(float(compiled.up_longest_s), compiled.sync_period_s),
        _capacity(float(compiled.down_longest_s), compiled.sync_period_s),
    )
    count = np.zeros(4, dtype=np.int64)
    count[SCALED_TO_ZERO] = int(compiled.scaled_to_zero)
    return State(
        count=count,
        rec_replicas=np.zeros(n_rec, dtype=np.int64),
        rec_t=np.zeros(n_rec),
        events=np.zeros((2, n_events, 2), dtype=np.int64),
        event_t=np.zeros((2, n_events)),
        keda=np.zeros((max(len(compiled.trig_metric) + int(compiled.has_formula), 1), 5), dtype=np.int64),
        last_active_s=np.full(1, np.nan),
        formula_stack=np.zeros(max(len(compiled.formula_code), 1)),
    )


# ---- exact integer helpers ----------------------------------------------------------------------


@njit(cache=True, nogil=True)
def _product_error_1000(value, product):
    # value * 1000 - product exactly (Dekker's product; 1000 needs no split), for product = fl(value * 1000).
    c = 134217729.0 * value  # 2**27 + 1
    high = c - (c - value)
    low = value - high
    return (high * 1000.0 - product) + low * 1000.0


@njit(cache=True, nogil=True)
def keda_quantity_milli(value):
    """:func:`planner.autoscaler.keda.keda_quantity_milli`: ``value`` rounded to milli-units, ties to even.

    Python rounds the exact binary value (``f"{value:.3f}"``). Here
    ``product = fl(value * 1000)`` is rounded half to even; the two can only
    differ when ``product`` is exactly a half-integer, and then the sign of
    the exact product error decides. Exact for ``abs(value) <`` :data:`QUANTITY_LIMIT`
    (half-integers are representable there); beyond it returns ``-2**63``.

    Parameters
    ----------
    value : float
        [metric units]

    Returns
    -------
    int
        [milli-units]; 0 for NaN and infinities.
    """
    if math.isnan(value) or math.isinf(value):
        return 0
    product = value * 1000.0
    if not abs(product) < _EXACT_MILLI_F:
        return _BAD
    rounded = np.rint(product)
    half = product - rounded  # exact
    if half == 0.5 or half == -0.5:
        error = _product_error_1000(value, product)
        if half == 0.5 and error > 0.0:
            rounded += 1.0
        elif half == -0.5 and error < 0.0:
            rounded -= 1.0
    return int(rounded)


@njit(cache=True, nogil=True)
def _int_of(x):
    # Python's int(x) for a float, or _BAD outside the safe range (NaN included).
    if not abs(x) < _SAFE_F:
        return _BAD
    return int(x)


@njit(cache=True, nogil=True)
def _ceil_of(x):
    # math.ceil(x) for a float, or _BAD outside the safe range.
    if not abs(x) < _SAFE_F:
        return _BAD
    return int(np.ceil(x))


@njit(cache=True, nogil=True)
def _checked(total):
    # A sum of safe integers (cannot wrap), or _BAD once it leaves the safe range.
    if total >= _SAFE or total <= -_SAFE:
        return _BAD
    return total


@njit(cache=True, nogil=True)
def _go_div(numerator, denominator):
    # hpa._go_div: integer division truncated toward zero.
    quotient = abs(numerator) // abs(denominator)
    return quotient if (numerator >= 0) == (denominator >= 0) else -quotient


@njit(cache=True, nogil=True)
def _safe_ratio(numerator, denominator):
    # hpa._safe_ratio: Go's float64 division, +Inf or NaN where Python would raise.
    if denominator == 0.0:
        if numerator == 0.0:
            return math.nan
        return math.copysign(math.inf, numerator)
    return numerator / denominator


@njit(cache=True, nogil=True)
def _is_within(tol_down, tol_up, usage_ratio):
    # Tolerances.is_within: both ends included; NaN is never within.
    return (1.0 - tol_down) <= usage_ratio and usage_ratio <= (1.0 + tol_up)


# ---- replica calculators (planner.autoscaler.replica_calculator) ---------------------------------------------


@njit(cache=True, nogil=True)
def _get_ready_pods_count(pod_ready, n_pods):
    # get_ready_pods_count: Running (every pod here is) and Ready.
    count = 0
    for j in range(n_pods):
        if pod_ready[j]:
            count += 1
    return count


@njit(cache=True, nogil=True)
def get_usage_ratio_replica_count(current_replicas, usage_ratio, tol_down, tol_up, pod_ready, n_pods):
    """``get_usage_ratio_replica_count``: (status, replicas); no pods makes the metric invalid."""
    if current_replicas != 0:
        if _is_within(tol_down, tol_up, usage_ratio):
            # return the current replicas if the change would be too small
            return _VALID, current_replicas
        if n_pods == 0:  # "unable to calculate ready pods: no pods returned by selector ..."
            return _INVALID, 0
        ready_pod_count = _get_ready_pods_count(pod_ready, n_pods)
        replica_count_float = usage_ratio * float(ready_pod_count)
        if replica_count_float > MAX_INT32:
            return _VALID, MAX_INT32
        count = _ceil_of(replica_count_float)
        return (INT_OUT_OF_RANGE, 0) if count == _BAD else (_VALID, count)
    # Scale to zero or n pods depending on usageRatio
    count = _ceil_of(usage_ratio)
    return (INT_OUT_OF_RANGE, 0) if count == _BAD else (_VALID, count)


@njit(cache=True, nogil=True)
def get_object_metric_replicas(current_replicas, target_usage_milli, usage_milli, tol_down, tol_up, pod_ready, n_pods):
    """``get_object_metric_replicas`` (Object, Value target): (status, replicas)."""
    usage_ratio = float(usage_milli) / float(target_usage_milli)
    return get_usage_ratio_replica_count(current_replicas, usage_ratio, tol_down, tol_up, pod_ready, n_pods)


@njit(cache=True, nogil=True)
def get_object_per_pod_metric_replicas(status_replicas, target_average_usage_milli, usage_milli, tol_down, tol_up):
    """``get_object_per_pod_metric_replicas`` (Object, AverageValue target): (status, replicas)."""
    replica_count = status_replicas
    usage_ratio = _safe_ratio(float(usage_milli), float(target_average_usage_milli) * float(replica_count))
    if not _is_within(tol_down, tol_up, usage_ratio):
        # update number of replicas if change is large enough
        replica_count = _ceil_of(float(usage_milli) / float(target_average_usage_milli))
        if replica_count == _BAD:
            return INT_OUT_OF_RANGE, 0
    return _VALID, replica_count


@njit(cache=True, nogil=True)
def _external_usage(vals, n):
    # The sum of the series' milli-values, capped at MaxInt64: (status, usage). Go's
    # get_external_metric_replicas caps before an addition would pass MaxInt64 and
    # get_external_per_pod_metric_replicas after it; on int64 both give MaxInt64 at the same value.
    usage = 0
    for j in range(n):
        value = keda_quantity_milli(vals[j])
        if value == _BAD:
            return QUANTITY_OUT_OF_RANGE, 0
        # Cap at MaxInt64 for positive overflow
        if value > 0 and usage > MAX_INT64 - value:
            return _VALID, MAX_INT64
        usage = _checked(usage + value)
        if usage == _BAD:
            return INT_OUT_OF_RANGE, 0
    return _VALID, usage


@njit(cache=True, nogil=True)
def get_external_metric_replicas(current_replicas, target_usage_milli, usage, tol_down, tol_up, pod_ready, n_pods):
    """``get_external_metric_replicas`` (External, Value target) on the summed ``usage``: (status, replicas)."""
    usage_ratio = float(usage) / float(target_usage_milli)
    return get_usage_ratio_replica_count(current_replicas, usage_ratio, tol_down, tol_up, pod_ready, n_pods)


@njit(cache=True, nogil=True)
def get_external_per_pod_metric_replicas(status_replicas, target_usage_per_pod_milli, usage, tol_down, tol_up):
    """``get_external_per_pod_metric_replicas`` (External, AverageValue target): (status, replicas)."""
    replica_count = status_replicas
    usage_ratio = _safe_ratio(float(usage), float(target_usage_per_pod_milli) * float(replica_count))
    if not _is_within(tol_down, tol_up, usage_ratio):
        # update number of replicas if the change is large enough
        replica_count_result = np.ceil(float(usage) / float(target_usage_per_pod_milli))
        if replica_count_result > MAX_INT32:
            replica_count = MAX_INT32
        else:
            replica_count = _ceil_of(replica_count_result)
            if replica_count == _BAD:
                return INT_OUT_OF_RANGE, 0
    return _VALID, replica_count


@njit(cache=True, nogil=True)
def _pod_samples(keys, vals, n, pod_ids, n_pods):
    # The PodMetricsReading Control._reading builds, as calc_plain_metric_replicas reads it:
    # (status, sum of the samples [milli], samples, pods with a sample). A sample is named "pod-{key}",
    # the key () "pod-0": when both appear the later value wins and they are one sample.
    j_none = -1
    j_zero = -1
    ascending = True
    previous = -1
    for j in range(n):
        key = keys[j]
        if key < 0:
            j_none = j
            continue
        if key == 0:
            j_zero = j
        if key <= previous:
            ascending = False
        previous = key
    shadowed = min(j_none, j_zero) if j_none >= 0 and j_zero >= 0 else -1
    total = 0
    n_samples = 0
    for j in range(n):
        value = keda_quantity_milli(vals[j])
        if value == _BAD:
            return QUANTITY_OUT_OF_RANGE, 0, 0, 0
        if j == shadowed:
            continue
        total = _checked(total + value)
        if total == _BAD:
            return INT_OUT_OF_RANGE, 0, 0, 0
        n_samples += 1
    # groupPods with resource "": every pod is Running and not deleted, so a pod is ready with a
    # sample and missing without one.
    ready_pod_count = 0
    if ascending:
        i = 0
        for p in range(n_pods):
            pod = pod_ids[p]
            while i < n and (keys[i] < 0 or keys[i] < pod):
                i += 1
            if (i < n and keys[i] == pod) or (pod == 0 and j_none >= 0):
                ready_pod_count += 1
    else:
        for p in range(n_pods):
            pod = pod_ids[p]
            found = pod == 0 and j_none >= 0
            for j in range(n):
                if keys[j] == pod:
                    found = True
                    break
            if found:
                ready_pod_count += 1
    return _VALID, total, n_samples, ready_pod_count


@njit(cache=True, nogil=True)
def get_metric_replicas(current_replicas, target_usage_milli, tol_down, tol_up, pod_ids, n_pods, keys, vals, n):
    """``get_metric_replicas`` / ``calc_plain_metric_replicas`` for a Pods metric: (status, replicas).

    The samples are the query's series (``keys``, ``vals``, ``n`` >= 1). No
    pod is unready or ignored (resource ``""``, pods Running and not
    deleted), so only missing pods are filled: at the target on a
    scale-down, at 0 on a scale-up.
    """
    if n_pods == 0:  # "no pods returned by selector while calculating replica count"
        return _INVALID, 0
    status, metrics_total, n_metrics, ready_pod_count = _pod_samples(keys, vals, n, pod_ids, n_pods)
    if status != _VALID:
        return status, 0
    missing_pods = n_pods - ready_pod_count
    # get_metric_usage_ratio
    usage = _go_div(metrics_total, n_metrics)
    usage_ratio = float(usage) / float(target_usage_milli)

    scale_up_with_unready = False  # no unready pods for a Pods metric
    if not scale_up_with_unready and missing_pods == 0:
        if _is_within(tol_down, tol_up, usage_ratio):
            # return the current replicas if the change would be too small
            return _VALID, current_replicas
        # if we don't have any unready or missing pods, we can calculate the new replica count now
        count = _ceil_of(usage_ratio * float(ready_pod_count))
        return (INT_OUT_OF_RANGE, 0) if count == _BAD else (_VALID, count)

    if missing_pods > 0:
        if usage_ratio < 1.0:
            # on a scale-down, treat missing pods as using exactly the target amount
            if float(missing_pods) * float(target_usage_milli) >= _SAFE_F:
                return INT_OUT_OF_RANGE, 0
            metrics_total = _checked(metrics_total + missing_pods * target_usage_milli)
            if metrics_total == _BAD:
                return INT_OUT_OF_RANGE, 0
            n_metrics += missing_pods
        elif usage_ratio > 1.0:
            # on a scale-up, treat missing pods as using 0% of the resource request
            n_metrics += missing_pods

    # re-run the usage calculation with our new numbers
    new_usage_ratio = float(_go_div(metrics_total, n_metrics)) / float(target_usage_milli)

    if (
        _is_within(tol_down, tol_up, new_usage_ratio)
        or (usage_ratio < 1.0 and new_usage_ratio > 1.0)
        or (usage_ratio > 1.0 and new_usage_ratio < 1.0)
    ):
        # return the current replicas if the change would be too small,
        # or if the new usage ratio would cause a change in scale direction
        return _VALID, current_replicas

    new_replicas = _ceil_of(new_usage_ratio * float(n_metrics))
    if new_replicas == _BAD:
        return INT_OUT_OF_RANGE, 0
    if (new_usage_ratio < 1.0 and new_replicas > current_replicas) or (
        new_usage_ratio > 1.0 and new_replicas < current_replicas
    ):
        # return the current replicas if the change of metrics length would cause a change in scale direction
        return _VALID, current_replicas

    # return the result, where the number of replicas considered is
    # however many replicas factored into our calculation
    return _VALID, new_replicas


# ---- the HPA controller (planner.autoscaler.horizontal) ------------------------------------------------


@njit(cache=True, nogil=True)
def _reading_present(res_kind, res_n, m):
    # Control._reading: a number is one series; an empty vector is a FailedReading.
    return res_kind[m] == RES_NUMBER or res_n[m] > 0


@njit(cache=True, nogil=True, inline="always")
def compute_replicas_for_metric(
    c, metric, keda, i, spec_replicas, status_replicas, pod_ids, pod_ready, n_pods, res_kind, res_n, res_keys, res_vals
):
    """``compute_replicas_for_metric`` for metric ``i``: (status, replicas).

    A ScaledObject's metric reads its trigger's reading (``keda``); a plain
    HPA's reads result row ``i``.
    """
    source = metric[i, M_SOURCE]
    target_type = metric[i, M_TARGET_TYPE]
    has_value = metric[i, M_HAS_VALUE] != 0
    has_average = metric[i, M_HAS_AVERAGE] != 0
    if c.is_keda:
        trigger = metric[i, M_TRIGGER]
        if keda[trigger, K_READING_OK] == 0:
            return _INVALID, 0
        usage = keda[trigger, K_READING_MILLI]  # ExternalReading((value,)): a one-series sum
        n = 1
    else:
        if not _reading_present(res_kind, res_n, i):
            return _INVALID, 0
        n = 1 if res_kind[i] == RES_NUMBER else res_n[i]
        usage = 0
    if source == SOURCE_PODS:
        if not has_average:  # "invalid pods metric source: no average value target was set"
            return _INVALID, 0
        if res_kind[i] == RES_NUMBER:  # {(): value}
            return get_metric_replicas(
                spec_replicas,
                metric[i, M_AVERAGE_MILLI],
                c.tol_down,
                c.tol_up,
                pod_ids,
                n_pods,
                _NONE_KEY,
                res_vals[i],
                1,
            )
        return get_metric_replicas(
            spec_replicas,
            metric[i, M_AVERAGE_MILLI],
            c.tol_down,
            c.tol_up,
            pod_ids,
            n_pods,
            res_keys[i],
            res_vals[i],
            n,
        )
    if source == SOURCE_OBJECT:
        # ObjectReading: the sum over the series (Python's built-in sum), in milli-units
        value_milli = keda_quantity_milli(python_sum(res_vals[i], 0, n))
        if value_milli == _BAD:
            return QUANTITY_OUT_OF_RANGE, 0
        if target_type == TARGET_VALUE and has_value:
            return get_object_metric_replicas(
                spec_replicas, metric[i, M_VALUE_MILLI], value_milli, c.tol_down, c.tol_up, pod_ready, n_pods
            )
        if target_type == TARGET_AVERAGE_VALUE and has_average:
            return get_object_per_pod_metric_replicas(
                status_replicas, metric[i, M_AVERAGE_MILLI], value_milli, c.tol_down, c.tol_up
            )
        return _INVALID, 0
    # External: an AverageValue target wins when both are set, as in horizontal.go.
    if has_average:
        if not c.is_keda:
            status, usage = _external_usage(res_vals[i], n)
            if status != _VALID:
                return status, 0
        return get_external_per_pod_metric_replicas(
            status_replicas, metric[i, M_AVERAGE_MILLI], usage, c.tol_down, c.tol_up
        )
    if has_value:
        if not c.is_keda:
            status, usage = _external_usage(res_vals[i], n)
            if status != _VALID:
                return status, 0
        return get_external_metric_replicas(
            spec_replicas, metric[i, M_VALUE_MILLI], usage, c.tol_down, c.tol_up, pod_ready, n_pods
        )
    return _INVALID, 0


@njit(cache=True, nogil=True, inline="always")
def compute_replicas_for_metrics(
    c, metric, keda, spec_replicas, status_replicas, pod_ids, pod_ready, n_pods, res_kind, res_n, res_keys, res_vals
):
    """``compute_replicas_for_metrics``: (status, replicas, blocked).

    ``blocked`` is the Python ``replicas == -1`` with an error (every metric
    invalid, or some invalid while the valid ones would scale down).
    """
    n_metrics = metric.shape[0]
    replicas = 0
    invalid_metrics_count = 0
    for i in range(n_metrics):
        status, count = compute_replicas_for_metric(
            c,
            metric,
            keda,
            i,
            spec_replicas,
            status_replicas,
            pod_ids,
            pod_ready,
            n_pods,
            res_kind,
            res_n,
            res_keys,
            res_vals,
        )
        if status < 0:
            return status, 0, False
        if status == _INVALID:
            invalid_metrics_count += 1
            continue
        if replicas == 0 or count > replicas:
            replicas = count
    # If all metrics are invalid or some are invalid and we would scale down,
    # return an error and set the condition of the hpa based on the first invalid metric.
    if invalid_metrics_count >= n_metrics or (invalid_metrics_count > 0 and replicas < spec_replicas):
        return _VALID, -1, True
    return _VALID, replicas, False


@njit(cache=True, nogil=True)
def _record(count, rec_replicas, rec_t, found_old_sample, old_sample_index, recommendation, now_s):
    # The new recommendation replaces the old sample found, or is appended; False when the arrays are full.
    if found_old_sample:
        rec_replicas[old_sample_index] = recommendation
        rec_t[old_sample_index] = now_s
        return True
    n = count[REC_N]
    if n >= rec_replicas.shape[0]:
        return False
    rec_replicas[n] = recommendation
    rec_t[n] = now_s
    count[REC_N] = n + 1
    return True


@njit(cache=True, nogil=True)
def stabilize_recommendation(
    count, rec_replicas, rec_t, prenormalized_desired_replicas, now_s, downscale_stabilization_window_s
):
    """``stabilize_recommendation`` (legacy): the highest recommendation in the window; records the new one."""
    max_recommendation = prenormalized_desired_replicas
    found_old_sample = False
    old_sample_index = 0
    cutoff_s = now_s - downscale_stabilization_window_s
    for i in range(count[REC_N]):
        if rec_t[i] < cutoff_s:
            found_old_sample = True
            old_sample_index = i
        elif rec_replicas[i] > max_recommendation:
            max_recommendation = rec_replicas[i]
    if not _record(
        count, rec_replicas, rec_t, found_old_sample, old_sample_index, prenormalized_desired_replicas, now_s
    ):
        return HISTORY_FULL
    return max_recommendation


@njit(cache=True, nogil=True)
def convert_desired_replicas_with_rules(
    current_replicas,
    desired_replicas,
    hpa_min_replicas,
    hpa_max_replicas,
    scale_up_limit_factor,
    scale_up_limit_minimum,
):
    """``convert_desired_replicas_with_rules``: clamp to [min, min(max, scale-up limit)]."""
    minimum_allowed_replicas = hpa_min_replicas
    # calculate_scale_up_limit
    scale_up_limit = int(max(scale_up_limit_factor * float(current_replicas), scale_up_limit_minimum))
    if hpa_max_replicas > scale_up_limit:
        maximum_allowed_replicas = scale_up_limit
    else:
        maximum_allowed_replicas = hpa_max_replicas
    if desired_replicas < minimum_allowed_replicas:
        return minimum_allowed_replicas
    if desired_replicas > maximum_allowed_replicas:
        return maximum_allowed_replicas
    return desired_replicas


@njit(cache=True, nogil=True)
def stabilize_recommendation_with_behaviors(
    count, rec_replicas, rec_t, current_replicas, desired_replicas, now_s, up_window_s, down_window_s
):
    """``stabilize_recommendation_with_behaviors``: current clamped into the windows' [min, max]; records desired."""
    found_old_sample = False
    old_sample_index = 0
    up_recommendation = desired_replicas
    up_cutoff_s = now_s - up_window_s
    down_recommendation = desired_replicas
    down_cutoff_s = now_s - down_window_s
    # Calculate the upper and lower stabilization limits.
    for i in range(count[REC_N]):
        timestamp_s = rec_t[i]
        if timestamp_s > up_cutoff_s:
            up_recommendation = min(rec_replicas[i], up_recommendation)
        if timestamp_s > down_cutoff_s:
            down_recommendation = max(rec_replicas[i], down_recommendation)
        if timestamp_s < up_cutoff_s and timestamp_s < down_cutoff_s:
            found_old_sample = True
            old_sample_index = i
    # Bring the recommendation to within the upper and lower limits (stabilize).
    recommendation = current_replicas
    if recommendation < up_recommendation:
        recommendation = up_recommendation
    if recommendation > down_recommendation:
        recommendation = down_recommendation
    # Record the unstabilized recommendation.
    if not _record(count, rec_replicas, rec_t, found_old_sample, old_sample_index, desired_replicas, now_s):
        return HISTORY_FULL
    return recommendation


@njit(cache=True, nogil=True)
def get_replicas_change_per_period(period_seconds, events, event_t, direction, n, now_s):
    """``get_replicas_change_per_period``: the changes strictly after ``now_s - period_seconds``."""
    cutoff_s = now_s - float(period_seconds)
    total = 0
    for i in range(n):
        if event_t[direction, i] > cutoff_s:
            total += events[direction, i, E_CHANGE]
    return total


@njit(cache=True, nogil=True)
def _period_start_replicas(count, events, event_t, current_replicas, period_seconds, now_s):
    replicas_added_in_current_period = get_replicas_change_per_period(
        period_seconds, events, event_t, UP, count[UP_N], now_s
    )
    replicas_deleted_in_current_period = get_replicas_change_per_period(
        period_seconds, events, event_t, DOWN, count[DOWN_N], now_s
    )
    return current_replicas - replicas_added_in_current_period + replicas_deleted_in_current_period


@njit(cache=True, nogil=True)
def calculate_scale_up_limit_with_scaling_rules(
    select_policy, policy, first, stop, count, events, event_t, current_replicas, now_s
):
    """``calculate_scale_up_limit_with_scaling_rules`` over ``policy[first:stop]`` (or ``_BAD``)."""
    if select_policy == SELECT_DISABLED:
        return current_replicas  # Scaling is disabled
    use_min = select_policy == SELECT_MIN
    # For scaling up, the lowest change ('min' policy) produces a minimum value
    result = MAX_INT32 if use_min else MIN_INT32
    proposed = 0
    for k in range(first, stop):
        period_start_replicas = _period_start_replicas(
            count, events, event_t, current_replicas, policy[k, P_PERIOD], now_s
        )
        if policy[k, P_TYPE] == POLICY_PODS:
            proposed = period_start_replicas + policy[k, P_VALUE]
        elif policy[k, P_TYPE] == POLICY_PERCENT:
            # the proposal has to be rounded up because the proposed change might not
            # increase the replica count causing the target to never scale up
            proposed = _ceil_of(float(period_start_replicas) * (1.0 + float(policy[k, P_VALUE]) / 100.0))
            if proposed == _BAD:
                return _BAD
        result = min(result, proposed) if use_min else max(result, proposed)
    return result


@njit(cache=True, nogil=True)
def calculate_scale_down_limit_with_behaviors(
    select_policy, policy, first, stop, count, events, event_t, current_replicas, now_s
):
    """``calculate_scale_down_limit_with_behaviors`` over ``policy[first:stop]`` (or ``_BAD``)."""
    if select_policy == SELECT_DISABLED:
        return current_replicas  # Scaling is disabled
    use_max = select_policy == SELECT_MIN
    # For scaling down, the lowest change ('min' policy) produces a maximum value
    result = MIN_INT32 if use_max else MAX_INT32
    proposed = 0
    for k in range(first, stop):
        period_start_replicas = _period_start_replicas(
            count, events, event_t, current_replicas, policy[k, P_PERIOD], now_s
        )
        if policy[k, P_TYPE] == POLICY_PODS:
            proposed = period_start_replicas - policy[k, P_VALUE]
        elif policy[k, P_TYPE] == POLICY_PERCENT:
            proposed = _int_of(float(period_start_replicas) * (1.0 - float(policy[k, P_VALUE]) / 100.0))
            if proposed == _BAD:
                return _BAD
        result = max(result, proposed) if use_max else min(result, proposed)
    return result


@njit(cache=True, nogil=True, inline="always")
def convert_desired_replicas_with_behavior_rate(
    c, policy, count, events, event_t, current_replicas, desired_replicas, min_replicas, max_replicas, now_s
):
    """``convert_desired_replicas_with_behavior_rate``: the rate policies and min/max on the side it moves to."""
    if desired_replicas > current_replicas:
        scale_up_limit = calculate_scale_up_limit_with_scaling_rules(
            c.up_select, policy, 0, c.n_up_policies, count, events, event_t, current_replicas, now_s
        )
        if scale_up_limit == _BAD:
            return INT_OUT_OF_RANGE
        if scale_up_limit < current_replicas:
            # We shouldn't scale up further until the scaleUpEvents will be cleaned up
            scale_up_limit = current_replicas
        maximum_allowed_replicas = max_replicas
        if maximum_allowed_replicas > scale_up_limit:
            maximum_allowed_replicas = scale_up_limit
        if desired_replicas > maximum_allowed_replicas:
            return maximum_allowed_replicas
    elif desired_replicas < current_replicas:
        scale_down_limit = calculate_scale_down_limit_with_behaviors(
            c.down_select, policy, c.n_up_policies, policy.shape[0], count, events, event_t, current_replicas, now_s
        )
        if scale_down_limit == _BAD:
            return INT_OUT_OF_RANGE
        if scale_down_limit > current_replicas:
            # We shouldn't scale down further until the scaleDownEvents will be cleaned up
            scale_down_limit = current_replicas
        minimum_allowed_replicas = min_replicas
        if minimum_allowed_replicas < scale_down_limit:
            minimum_allowed_replicas = scale_down_limit
        if desired_replicas < minimum_allowed_replicas:
            return minimum_allowed_replicas
    return desired_replicas


@njit(cache=True, nogil=True)
def _replace_or_append(count, events, event_t, direction, longest_policy_period, replica_change, now_s):
    # mark_scale_events_outdated, then the new event in the last outdated slot, or appended; 0 or HISTORY_FULL.
    cutoff_s = now_s - float(longest_policy_period)
    n = count[1 + direction]
    old_sample_index = -1
    for i in range(n):
        if event_t[direction, i] < cutoff_s:
            events[direction, i, E_OUTDATED] = 1
        if events[direction, i, E_OUTDATED] != 0:
            old_sample_index = i
    index = old_sample_index
    if index < 0:
        if n >= event_t.shape[1]:
            return HISTORY_FULL
        index = n
        count[1 + direction] = n + 1
    events[direction, index, E_CHANGE] = replica_change
    events[direction, index, E_OUTDATED] = 0
    event_t[direction, index] = now_s
    return 0


@njit(cache=True, nogil=True, inline="always")
def store_scale_event(c, count, events, event_t, prev_replicas, new_replicas, now_s):
    """``store_scale_event``: nothing without ``behavior`` (the legacy path reads no events); 0 or an error code."""
    if not c.has_behavior:
        return 0  # we should not store any event as they will not be used
    if new_replicas > prev_replicas:
        return _replace_or_append(count, events, event_t, UP, c.up_longest_s, new_replicas - prev_replicas, now_s)
    return _replace_or_append(count, events, event_t, DOWN, c.down_longest_s, prev_replicas - new_replicas, now_s)


@njit(cache=True, nogil=True, inline="always")
def reconcile_autoscaler(
    c,
    metric,
    policy,
    keda,
    count,
    rec_replicas,
    rec_t,
    events,
    event_t,
    now_s,
    spec_replicas,
    status_replicas,
    pod_ids,
    pod_ready,
    n_pods,
    res_kind,
    res_n,
    res_keys,
    res_vals,
):
    """``HorizontalController.reconcile_autoscaler``: the desired replicas (or an error code); updates the history."""
    current_replicas = spec_replicas
    if count[REC_N] == 0:  # record_initial_recommendation
        rec_replicas[0] = current_replicas
        rec_t[0] = now_s
        count[REC_N] = 1
    min_replicas = c.min_replicas
    max_replicas = c.max_replicas
    desired_replicas = 0
    rescale = True
    legacy = c.scale_to_zero == STZ_LEGACY
    scale_to_zero_feature_enabled = c.scale_to_zero == STZ_CONDITION
    scaled_to_zero_condition = scale_to_zero_feature_enabled and count[SCALED_TO_ZERO] != 0
    can_scale_from_zero = scaled_to_zero_condition and c.has_object_or_external
    needs_metric_computation = True
    if current_replicas == 0 and (not legacy or min_replicas != 0):
        # shouldComputeMetricsForZeroReplicas (legacy: disabled whenever minReplicas is not 0)
        if not legacy and ((min_replicas != 0 and scaled_to_zero_condition) or can_scale_from_zero):
            needs_metric_computation = True
        else:
            needs_metric_computation = False
            # Autoscaling is disabled for this resource
            desired_replicas = 0
            rescale = False
    elif current_replicas > max_replicas:
        desired_replicas = max_replicas
        needs_metric_computation = False
    elif current_replicas < min_replicas:
        desired_replicas = min_replicas
        needs_metric_computation = False
    if needs_metric_computation:
        status, metric_desired, blocked = compute_replicas_for_metrics(
            c,
            metric,
            keda,
            spec_replicas,
            status_replicas,
            pod_ids,
            pod_ready,
            n_pods,
            res_kind,
            res_n,
            res_keys,
            res_vals,
        )
        if status < 0:
            return status
        if blocked:
            return current_replicas
        if metric_desired > desired_replicas:
            desired_replicas = metric_desired
        if not c.has_behavior:
            # _normalize_desired_replicas
            stabilized = stabilize_recommendation(
                count, rec_replicas, rec_t, desired_replicas, now_s, c.legacy_window_s
            )
            if stabilized < 0:
                return stabilized
            desired_replicas = convert_desired_replicas_with_rules(
                current_replicas,
                stabilized,
                min_replicas,
                max_replicas,
                c.scale_up_limit_factor,
                c.scale_up_limit_minimum,
            )
        else:
            # _normalize_desired_replicas_with_behaviors
            stabilized = stabilize_recommendation_with_behaviors(
                count, rec_replicas, rec_t, current_replicas, desired_replicas, now_s, c.up_window_s, c.down_window_s
            )
            if stabilized < 0:
                return stabilized
            desired_replicas = convert_desired_replicas_with_behavior_rate(
                c, policy, count, events, event_t, current_replicas, stabilized, min_replicas, max_replicas, now_s
            )
            if desired_replicas < 0:
                return desired_replicas
        if current_replicas == 0 and min_replicas != 0 and scaled_to_zero_condition and desired_replicas < min_replicas:
            desired_replicas = min_replicas
        rescale = desired_replicas != current_replicas
    if rescale:
        code = store_scale_event(c, count, events, event_t, current_replicas, desired_replicas, now_s)
        if code < 0:
            return code
        if scale_to_zero_feature_enabled:  # the ScaledToZero condition
            to_zero = current_replicas > 0 and desired_replicas == 0 and min_replicas == 0 and c.has_object_or_external
            count[SCALED_TO_ZERO] = 1 if to_zero else 0
    else:
        desired_replicas = current_replicas
    return desired_replicas


# ---- KEDA (planner.autoscaler.keda) ------------------------------------------------------------------------


@njit(cache=True, nogil=True)
def _scalar(res_kind, res_n, res_vals, m):
    # Query.scalar as Control reads it: a value, an empty result, or the "multiple elements" error.
    if res_kind[m] == RES_NUMBER:
        return _SCALAR_VALUE, res_vals[m, 0]
    n = res_n[m]
    if n == 0:
        return _SCALAR_EMPTY, math.nan
    if n > 1:
        return _SCALAR_ERROR, math.nan
    return _SCALAR_VALUE, res_vals[m, 0]


@njit(cache=True, nogil=True)
def _trigger_value(ignore_null_values, m, res_kind, res_n, res_vals):
    # The Prometheus scaler's value handling: (failed, value); an empty or non-finite result is 0 with
    # ignoreNullValues, else an error (what KedaController._failed counts).
    status, raw = _scalar(res_kind, res_n, res_vals, m)
    if status == _SCALAR_ERROR:
        return True, 0.0
    if status == _SCALAR_EMPTY or math.isnan(raw) or math.isinf(raw):
        if ignore_null_values:
            return False, 0.0
        return True, 0.0
    return False, raw


@njit(cache=True, nogil=True)
def _fallback_replicas(c, current_replicas):
    # doFallback's switch on fallback.behavior.
    if c.fallback_behavior == FALLBACK_CURRENT:
        return current_replicas
    if c.fallback_behavior == FALLBACK_IF_HIGHER:
        return max(current_replicas, c.fallback_replicas)
    if c.fallback_behavior == FALLBACK_IF_LOWER:
        return min(current_replicas, c.fallback_replicas)
    return c.fallback_replicas


@njit(cache=True, nogil=True)
def _fallback_value_milli(replicas, target, value_target, ready_replicas):
    # normalisationValue x 1000 x replicas (divided by Ready replicas for a Value target):
    # (status, milli-units); _INVALID is Python's None ("status.readyReplicas is 0").
    replicas_float = float(replicas)
    if value_target:
        if ready_replicas <= 0:
            return _INVALID, 0
        replicas_float /= float(ready_replicas)
    value = _int_of(target * 1000.0 * replicas_float)
    return (INT_OUT_OF_RANGE, 0) if value == _BAD else (_VALID, value)


@njit(cache=True, nogil=True)
def formula_milli(formula, formula_consts, keda, stack):
    """``_composite``'s formula over each trigger's reading (``keda[row, K_READING_MILLI] / 1000``).

    ``stack`` holds the operands (as many entries as the formula has rows).

    Returns (``_VALID``, ``int(value * 1000)``), or (``_INVALID``, 0) where
    Python's formula errs (a non-finite result: "error trying to run custom
    formula"), or (``INT_OUT_OF_RANGE``, 0) for a result of 2**53
    milli-units or more.
    """
    top = 0
    for i in range(formula.shape[0]):
        op = formula[i, 0]
        if op == F_NUMBER:
            stack[top] = formula_consts[i]
            top += 1
        elif op == F_TRIGGER:
            stack[top] = float(keda[formula[i, 1], K_READING_MILLI]) / 1000.0
            top += 1
        elif op == F_NEGATE:
            stack[top - 1] = -stack[top - 1]
        elif op == F_ABS:
            stack[top - 1] = abs(stack[top - 1])
        elif op == F_MAX or op == F_MIN:
            # Python's max()/min(): the first of equal values, never replaced on a comparison with NaN.
            n = formula[i, 1]
            best = stack[top - n]
            for j in range(top - n + 1, top):
                if (stack[j] > best) if op == F_MAX else (stack[j] < best):
                    best = stack[j]
            top -= n - 1
            stack[top - 1] = best
        else:
            a, b = stack[top - 2], stack[top - 1]
            top -= 1
            if op == F_ADD:
                stack[top - 1] = a + b
            elif op == F_SUBTRACT:
                stack[top - 1] = a - b
            elif op == F_MULTIPLY:
                stack[top - 1] = a * b
            elif b == 0.0:  # formula._divide: Go's float division
                if a == 0.0 or math.isnan(a):
                    stack[top - 1] = math.nan
                else:
                    stack[top - 1] = math.copysign(math.inf, a) * math.copysign(1.0, b)
            else:
                stack[top - 1] = a / b
    out = stack[0]
    status, milli = _VALID, 0
    if not math.isfinite(out):
        status = _INVALID
    elif not abs(out * 1000) < _EXACT_INT_F:
        status = INT_OUT_OF_RANGE
    else:
        milli = int(out * 1000)
    return status, milli + 0 * (formula.size + formula_consts.size + keda.size + stack.size)


@njit(cache=True, nogil=True, inline="always")
def keda_poll(
    c,
    trig_activation,
    trigger,
    formula,
    formula_consts,
    stack,
    keda,
    last_active,
    now_s,
    current_replicas,
    res_kind,
    res_n,
    res_vals,
    cron_state,
    cron_value,
):
    """``KedaController.poll``: the count KEDA writes, -1 to leave it to the HPA, or an error code.

    Updates ``last_active``. The poll applies no fallback (failures count as
    0), so a failing trigger makes it an error poll; the values' milli-units
    are needed for the metrics cache of ``useCachedMetrics`` triggers, which
    it refreshes in ``keda``, and for a formula.
    A cron trigger (``cron_state``) is active inside its window, whatever its
    value (``_with_cron``: the scaler's own activity, not ``activationThreshold``).
    With a formula, the composite alone says active or failed (``_composite``).
    """
    is_active = False
    is_error = False
    unheld = False  # a formula's reading too large for milli-units
    for i in range(trig_activation.shape[0]):
        if cron_state[i] != CRON_NONE:  # never cached: KEDA refuses useCachedMetrics on a cron trigger
            failed, value = cron_state[i] == CRON_FAILED, cron_value[i]
            if cron_state[i] == CRON_ACTIVE:
                is_active = True
        else:
            failed, value = _trigger_value(trigger[i, T_IGNORE_NULL] != 0, i, res_kind, res_n, res_vals)
            if not failed and value > trig_activation[i]:
                is_active = True
        is_error = is_error or failed  # 0 failures never exceed failureThreshold: no fallback
        milli = _BAD
        if not failed and (c.has_formula or trigger[i, T_CACHED] != 0):
            milli = keda_quantity_milli(value)
        if trigger[i, T_CACHED] != 0:
            keda[i, K_CACHE] = CACHE_FAILED if failed else CACHE_OUT_OF_RANGE if milli == _BAD else CACHE_VALUE
            if not failed:
                keda[i, K_CACHE_MILLI] = milli
        if c.has_formula and not failed:
            unheld = unheld or milli == _BAD
            keda[i, K_READING_MILLI] = milli  # scratch: the reconcile writes its own readings
    if c.has_formula:
        # _composite: a failed trigger fails it (the poll counts no failures, so no fallback), else the formula
        is_active = False
        if not is_error:
            if unheld:
                return QUANTITY_OUT_OF_RANGE
            status, milli = formula_milli(formula, formula_consts, keda, stack)
            if status < 0:
                return status
            is_error = status == _INVALID
            is_active = status == _VALID and float(milli) / 1000.0 > c.activation_target
    # request_scale
    last_active_s = last_active[0]
    min_replicas = c.keda_min_replicas
    if is_active:
        if (c.has_idle and current_replicas < min_replicas) or current_replicas == 0:
            last_active[0] = now_s
            return min_replicas if min_replicas > 0 else 1  # scaleFromZeroOrIdle
        if is_error:
            return _LEAVE  # PartialTriggerError: lastActiveTime stays
        last_active[0] = now_s
        return _LEAVE  # active: scaling above the minimum is left to the HPA
    if is_error and c.has_fallback and c.fallback_replicas != 0:
        return _LEAVE
    if is_error and not c.has_fallback:
        return _LEAVE
    if (c.has_idle and current_replicas > c.idle_replicas) or (current_replicas > 0 and min_replicas == 0):
        if math.isnan(last_active_s):
            cooled = c.created_s + c.initial_cooldown_s < now_s
        else:
            cooled = last_active_s + c.cooldown_s < now_s
        if cooled:
            return c.idle_replicas if c.has_idle else min_replicas  # scaleToZeroOrIdle
        return _LEAVE  # ScalerCooldown
    if current_replicas < min_replicas and not c.has_idle:
        return min_replicas
    return _LEAVE


@njit(cache=True, nogil=True, inline="always")
def keda_readings(
    c,
    metric,
    trigger,
    formula,
    formula_consts,
    stack,
    keda,
    current_replicas,
    ready_replicas,
    res_kind,
    res_n,
    res_vals,
    cron_state,
    cron_value,
):
    """``KedaController.reconcile``'s failure counts and each trigger's reading (with fallback) into ``keda``.

    A cron trigger's value is its reading at now (``_with_cron`` replaces
    whatever the metrics server would serve); a zone that does not load is a
    failure like a failed query. With a formula, no trigger falls back on its
    own; the composite's reading goes to the row after the triggers'
    (``_composite``: the formula, or with a failed trigger the fallback value
    once failures pass the threshold). Returns 0, or an error code.
    """
    for i in range(trigger.shape[0]):
        cache = keda[i, K_CACHE] if trigger[i, T_CACHED] != 0 else CACHE_EMPTY
        if cron_state[i] != CRON_NONE:  # _with_cron: the cron scaler's reading
            failed, value = cron_state[i] == CRON_FAILED, cron_value[i]
        elif cache == CACHE_EMPTY:  # served_values: a fresh query
            failed, value = _trigger_value(trigger[i, T_IGNORE_NULL] != 0, i, res_kind, res_n, res_vals)
        else:  # the last poll's record
            failed, value = cache == CACHE_FAILED, 0.0
        keda[i, K_FAILURES] = keda[i, K_FAILURES] + 1 if failed else 0
        if not failed:
            milli = keda_quantity_milli(value) if cache == CACHE_EMPTY else keda[i, K_CACHE_MILLI]
            if cache == CACHE_OUT_OF_RANGE or milli == _BAD:
                return QUANTITY_OUT_OF_RANGE
            keda[i, K_READING_OK] = 1
            keda[i, K_READING_MILLI] = milli
            continue
        # _fallback
        keda[i, K_READING_OK] = 0
        if not c.has_fallback or c.has_formula or keda[i, K_FAILURES] <= c.fallback_threshold:
            continue
        m = trigger[i, T_METRIC]
        value_target = metric[m, M_TARGET_TYPE] == TARGET_VALUE
        target_milli = metric[m, M_VALUE_MILLI] if value_target else metric[m, M_AVERAGE_MILLI]
        status, fallback_milli = _fallback_value_milli(
            _fallback_replicas(c, current_replicas), float(target_milli) / 1000.0, value_target, ready_replicas
        )
        if status < 0:
            return status
        if status == _VALID:
            keda[i, K_READING_OK] = 1
            keda[i, K_READING_MILLI] = fallback_milli
    if c.has_formula:
        composite = trigger.shape[0]
        failures = -1  # the most failures of a failed trigger; -1: none failed
        for i in range(composite):
            if keda[i, K_READING_OK] == 0:
                failures = max(failures, keda[i, K_FAILURES])
        keda[composite, K_READING_OK] = 0
        if failures < 0:
            status, milli = formula_milli(formula, formula_consts, keda, stack)
            if status < 0:
                return status
            if status == _VALID:
                keda[composite, K_READING_OK] = 1
                keda[composite, K_READING_MILLI] = milli
        elif c.has_fallback and failures > c.fallback_threshold:
            status, milli = _fallback_value_milli(
                _fallback_replicas(c, current_replicas), c.formula_target, c.formula_value_target, ready_replicas
            )
            if status < 0:
                return status
            if status == _VALID:
                keda[composite, K_READING_OK] = 1
                keda[composite, K_READING_MILLI] = milli
    return 0


# ---- one tick -----------------------------------------------------------------------------------


@njit(cache=True, nogil=True)
def decide(
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
):
    """``Control.decide`` at ``now_s``: run whatever is due and return ``spec.replicas`` after it.

    Parameters
    ----------
    t : Tables
        :func:`tables` of the compiled control.
    s : State
        :func:`new_state`; mutated in place (history, KEDA activity and failures).
    now_s : float
        The tick start. [s]
    poll, reconcile : bool
        ``Control.is_due(now_s, tick_s)``: KEDA poll due, HPA reconcile due.
    spec_replicas : int
        ``scale.spec.replicas`` now. [replicas]
    ready_replicas : int
        Live Ready pods (KEDA's fallback for Value targets). [replicas]
    pod_ids, pod_ready, pod_start_s, pod_transition_s : numpy.ndarray
        The pods the HPA sees, ascending ids, the first ``n_pods`` entries:
        id, Ready, start time and Ready transition time [s] (the times feed
        only the CPU rules, which no compiled metric uses).
    n_pods : int
    res_kind, res_n, res_keys, res_vals : numpy.ndarray
        Per trigger (ScaledObject) or metric (HPA), the query result as the
        metrics kernel returns it: kind 0 a number ``res_vals[m, 0]``, kind 1
        ``res_n[m]`` series keyed ``res_keys[m, :n]`` (pod id, -1 for ``()``).
    stamp_s : float
        Time of the latest scrape at ``now_s``, NaN before the first. [s]
    cron_state, cron_value : numpy.ndarray
        Per trigger (a ScaledObject; unread for an HPA), its cron reading at
        ``now_s``: ``CRON_NONE`` for a trigger that reads its query, else
        ``CRON_INACTIVE``, ``CRON_ACTIVE`` or ``CRON_FAILED``, and the value
        (``desiredReplicas`` in the window, else 0). [replicas]

    Returns
    -------
    int
        The new ``spec.replicas`` [replicas], or a negative code (module docstring).
    """
    if not (poll or reconcile):
        return spec_replicas
    c = t.config
    metric = t.metric
    replicas = spec_replicas
    if c.is_keda:
        trigger = t.trigger
        keda = s.keda
        if poll:
            wanted = keda_poll(
                c,
                t.trig_activation,
                trigger,
                t.formula,
                t.formula_consts,
                s.formula_stack,
                keda,
                s.last_active_s,
                now_s,
                replicas,
                res_kind,
                res_n,
                res_vals,
                cron_state,
                cron_value,
            )
            if wanted < _LEAVE:
                return wanted  # an error code
            if wanted != _LEAVE:
                replicas = wanted
        if reconcile and replicas > 0:
            code = keda_readings(
                c,
                metric,
                trigger,
                t.formula,
                t.formula_consts,
                s.formula_stack,
                keda,
                replicas,
                ready_replicas,
                res_kind,
                res_n,
                res_vals,
                cron_state,
                cron_value,
            )
            if code < 0:
                return code
            # KEDA's HPA reads status.replicas as spec.replicas (Control passes no status_replicas).
            replicas = reconcile_autoscaler(
                c,
                metric,
                t.policy,
                keda,
                s.count,
                s.rec_replicas,
                s.rec_t,
                s.events,
                s.event_t,
                now_s,
                replicas,
                replicas,
                pod_ids,
                pod_ready,
                n_pods,
                res_kind,
                res_n,
                res_keys,
                res_vals,
            )
        return replicas
    if not reconcile:
        return replicas
    # Control._reading stamps a Pods metric's samples with the latest scrape's time; before the first
    # scrape the Python side raises.
    if math.isnan(stamp_s):
        for i in range(metric.shape[0]):
            if metric[i, M_SOURCE] == SOURCE_PODS and _reading_present(res_kind, res_n, i):
                return NO_SCRAPE
    return reconcile_autoscaler(
        c,
        metric,
        t.policy,
        s.keda,
        s.count,
        s.rec_replicas,
        s.rec_t,
        s.events,
        s.event_t,
        now_s,
        replicas,
        n_pods,
        pod_ids,
        pod_ready,
        n_pods,
        res_kind,
        res_n,
        res_keys,
        res_vals,
    )
