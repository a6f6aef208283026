"""The simulated Prometheus, compiled: a parsed query run as postfix code over the scrapes in arrays.

The numba twin of the evaluation half of :mod:`planner.simulate.metrics`
(``MetricStore.instant``/``window``/``_last_index``, ``Query.evaluate``/
``scalar`` and the helpers they call), bit for bit: the same values, the same
series in the same order as the Python dict holds them (sums over series are
taken in that order downstream). Parsing stays in Python: :func:`compile_query`
turns ``Query.node`` into postfix code, folding every number-only subtree
into a constant with the Python evaluator itself, and :func:`evaluate` runs
it on a stack of vectors held in a :data:`Workspace`. An ``offset`` on a
selector or a range (``x offset 1d``, ``rate(x[5m] offset 1d)``) is an
instruction before it that moves its evaluation time back.

A subquery (``f(expr[range:step] offset d, params)``, the form the forecasts
write) is its inner expression's code between an ``OP_SUBQUERY`` header and an
``OP_SUBQUERY_END``: :func:`evaluate` runs that block once per step, at the
step's time, and folds each step's value into ``f``'s running state, as
``_subquery_series`` and ``_apply_range`` do over the list of points. Compiled
when the inner expression is at most one series without a pod (an aggregation
over all pods, ``vector(N)``, and arithmetic or ``or`` of these) and ``f`` is
``avg_over_time``, ``max_over_time``, ``min_over_time``, ``predict_linear``,
``holt_winters`` or ``double_exponential_smoothing``. Subqueries of per-pod
series, nested subqueries, ``rate``-like functions of a subquery,
``predict_linear`` or ``holt_winters`` of a plain range, and histograms are not
compiled (:func:`compile_query` refuses them, and the lockstep engine runs them).

The store is laid out as the engine fills it (arrays may be longer than the
scrapes so far):

* ``scrape_time_s[k]``: time of scrape ``k`` [s], strictly ascending;
  ``n_scrapes`` scrapes so far;
* ``scrape_rows[k]:scrape_rows[k + 1]``: the rows of scrape ``k`` in
  ``sample_pod`` (pod ids >= 0, ascending within a scrape) and
  ``sample_values`` (shape (rows, 8), columns in
  :data:`planner.simulate.metrics.COLUMNS` order);
* ``existing_rows[k]:existing_rows[k + 1]``: the pods that exist at scrape
  ``k`` (``kube_pod_info``) in ``existing_pod``.

(:class:`StoreArrays` keeps these arrays under short names: ``scr_t``,
``n_scr``, ``scr_off``, ``smp_pod``, ``smp_val``, ``ex_off``, ``ex_pod``.)

A vector's series key is the pod id, or -1 for the Python key ``()``.
"""

from __future__ import annotations

import math
from collections import namedtuple
from dataclasses import dataclass

import numpy as np
from numba import njit

from planner.simulate.metrics import COLUMNS, POD_INFO, STALENESS_S, MetricStore, Query
from planner.simulate.promql_functions import kahan_sum_inc

__all__ = [
    "EMPTY",
    "MAX_DEPTH",
    "MULTIPLE",
    "NOT_A_POD",
    "NO_ROOM",
    "NUMBER",
    "OUT_OF_ROOM",
    "RAISES",
    "STALENESS_S",
    "VALUE",
    "VECTOR",
    "ZERO_DIVISION",
    "CompiledQuery",
    "NotCompilable",
    "StoreArrays",
    "Workspace",
    "as_python",
    "compile_query",
    "evaluate",
    "fresh_index",
    "last_index",
    "python_sum",
    "scalar",
    "store_arrays",
    "workspace",
    "workspace_arrays",
]

NOT_A_POD = -1  # the series key of a result without a pod label (Python's ``()``)
MAX_DEPTH = 16  # operand stack levels a workspace holds by default; deeper queries are refused
# evaluate's kinds.
NUMBER, VECTOR, OUT_OF_ROOM, ZERO_DIVISION = 0, 1, -1, -2
# scalar's statuses.
VALUE, EMPTY, MULTIPLE, NO_ROOM, RAISES = 0, 1, 2, 3, 4
# Opcodes (code[i, 0]); code[i, 1:3] and consts[i] are their arguments.
OP_CONST = 0  # the whole query is a number: consts[i]
OP_SELECT = 1  # instant vector of column code[i, 1] (POD_INFO_COLUMN: kube_pod_info)
OP_RANGE = 2  # range function code[i, 1] of column code[i, 2] over consts[i] seconds
OP_VECTOR = 3  # vector(consts[i])
OP_AGGREGATE = 4  # aggregation code[i, 1]; code[i, 2] = 1 keeps one series per pod
OP_OR = 5  # pops right then left, pushes left or right
OP_BINARY_VV = 6  # vector op vector, operator code[i, 1]
OP_BINARY_VN = 7  # vector op consts[i]
OP_BINARY_NV = 8  # consts[i] op vector
OP_OFFSET = 9  # the next selector or range reads at now_s - consts[i] (an ``offset``)
# A subquery: function code[i, 1] of the block up to its OP_SUBQUERY_END (code[i, 2] rows on) over
# consts[i] seconds; the next SUBQUERY_PARAMS rows (OP_PARAM) hold its step [s], its offset [s] and the
# function's two numbers (0 where it takes fewer); the inner block follows them.
OP_SUBQUERY = 10
OP_PARAM = 11
OP_SUBQUERY_END = 12
SUBQUERY_PARAMS = 4
POD_INFO_COLUMN = len(COLUMNS)
ADD, SUB, MUL, DIV = 0, 1, 2, 3
SUM, AVG, MAX, MIN, COUNT = 0, 1, 2, 3, 4
RATE, IRATE, INCREASE, AVG_OVER_TIME, MAX_OVER_TIME, MIN_OVER_TIME = 0, 1, 2, 3, 4, 5
PREDICT_LINEAR, DOUBLE_EXPONENTIAL_SMOOTHING = 6, 7

_OPERATORS = {"+": ADD, "-": SUB, "*": MUL, "/": DIV}
_AGGREGATIONS = {"sum": SUM, "avg": AVG, "max": MAX, "min": MIN, "count": COUNT}
_FUNCTIONS = {
    "rate": RATE,
    "irate": IRATE,
    "increase": INCREASE,
    "avg_over_time": AVG_OVER_TIME,
    "max_over_time": MAX_OVER_TIME,
    "min_over_time": MIN_OVER_TIME,
}
# Functions of a subquery the kernel folds step by step (under Prometheus 3 both Holt names are one function).
_SUBQUERY_FUNCTIONS = {
    "avg_over_time": AVG_OVER_TIME,
    "max_over_time": MAX_OVER_TIME,
    "min_over_time": MIN_OVER_TIME,
    "predict_linear": PREDICT_LINEAR,
    "holt_winters": DOUBLE_EXPONENTIAL_SMOOTHING,
    "double_exponential_smoothing": DOUBLE_EXPONENTIAL_SMOOTHING,
}
# Python 3.12 made the built-in sum() of floats compensated (Neumaier); 3.11 adds left to right.
# Baked into the kernels when they compile (numba's cache is kept per interpreter version).
COMPENSATED_SUM = sum([1e16, 1.0, -1e16]) != 0.0

# Rows of Workspace.acc, per series of a range function.
_A, _B, _C, _D, _LAST_T, _LAST_V = range(6)
# Slots of Workspace.fold, a subquery function's state: points so far, then the function's own.
_POINTS = 0
_BEST = _TOTAL = _N = 1  # max/min: the extreme so far; avg: the running sum; predict_linear: the count
_CARRY = _INIT_Y = 2  # avg: the sum's compensation; predict_linear: the first value
_CONST_Y = 3  # predict_linear: 1.0 while every value equals the first
_SUM_X, _C_X, _SUM_Y, _C_Y, _SUM_XY, _C_XY, _SUM_X2, _C_X2 = range(4, 12)  # predict_linear's Kahan sums
_FIRST, _S0, _S1, _TREND = 1, 2, 3, 4  # Holt: the first value, the last two levels, the trend
FOLD_SLOTS = 12

Workspace = namedtuple(
    "Workspace",
    [
        "stack_keys",  # int64 (depth, capacity): series keys of each stacked vector
        "stack_vals",  # float64 (depth, capacity): their values
        "stack_n",  # int64 (depth,): series per stacked vector
        "slot_pod",  # int64 (capacity,): a range function's series, in the Python dict's order
        "sorted_pod",  # int64 (capacity,): the same pods ascending ...
        "sorted_slot",  # int64 (capacity,): ... and where each sits in slot_pod
        "acc_n",  # int64 (capacity,): samples seen per series
        "acc",  # float64 (6, capacity): per-series accumulators
        "fold",  # float64 (FOLD_SLOTS,): a subquery function's running state (_fold_start)
    ],
)


class NotCompilable(Exception):
    """A query whose Python evaluation raises (or that is deeper than :data:`MAX_DEPTH`): run it in Python."""


@dataclass(frozen=True, eq=False)
class CompiledQuery:
    """A query as postfix code for :func:`evaluate`.

    Attributes
    ----------
    text : str
        The query as parsed.
    code : numpy.ndarray
        int64, shape (instructions, 3): opcode and two integer arguments.
    consts : numpy.ndarray
        float64, shape (instructions,): each instruction's number (a constant, or a window [s]).
    depth : int
        Operand stack levels the code needs (a workspace must have at least as many).
    has_range : bool
        The query uses a range function or an offset, so its value changes between scrapes.
    """

    text: str
    code: np.ndarray
    consts: np.ndarray
    depth: int
    has_range: bool


@dataclass(frozen=True, eq=False)
class StoreArrays:
    """A :class:`~planner.simulate.metrics.MetricStore` in the engine's layout (see the module docstring)."""

    scr_t: np.ndarray
    n_scr: int
    scr_off: np.ndarray
    smp_pod: np.ndarray
    smp_val: np.ndarray
    ex_off: np.ndarray
    ex_pod: np.ndarray

    def args(self) -> tuple:
        """The store arguments of :func:`evaluate`, in order."""
        return self.scr_t, self.n_scr, self.scr_off, self.smp_pod, self.smp_val, self.ex_off, self.ex_pod


# ---- compiling ----------------------------------------------------------------------------------


def compile_query(query: Query) -> CompiledQuery:
    """Postfix code for ``query``.

    Raises
    ------
    NotCompilable
        Python's evaluation of the query raises ``PlannerInputError`` at every
        ``now_s`` (an aggregation of a number, ``or`` with a number side,
        ``kube_pod_info`` in a range function); the query needs more than
        :data:`MAX_DEPTH` stack levels; or it uses what the kernel does not
        cover (see the module docstring: some subqueries, histograms).
    """
    emitter = _Emitter()
    try:
        number = emitter.emit(query.node)
    except NotCompilable as error:
        raise NotCompilable(f"query {query.text!r}: {error}") from None
    if number is not None:
        emitter.rows.append((OP_CONST, 0, 0, number))
    if emitter.max_depth > MAX_DEPTH:
        raise NotCompilable(f"query {query.text!r} needs {emitter.max_depth} stack levels (at most {MAX_DEPTH})")
    rows = emitter.rows
    return CompiledQuery(
        text=query.text,
        code=np.array([row[:3] for row in rows], dtype=np.int64).reshape(len(rows), 3),
        consts=np.array([row[3] for row in rows], dtype=np.float64),
        depth=emitter.max_depth,
        has_range=any(row[0] in (OP_RANGE, OP_OFFSET, OP_SUBQUERY) for row in rows),
    )


class _Emitter:
    def __init__(self) -> None:
        self.rows: list[tuple[int, int, int, float]] = []
        self.depth = 0
        self.max_depth = 0

    def push(self, row: tuple[int, int, int, float]) -> None:
        self.rows.append(row)
        self.depth += 1
        self.max_depth = max(self.max_depth, self.depth)

    def emit(self, node: tuple) -> float | None:
        # The value of a number-only subtree (no code), or None once the vector's code is emitted.
        kind = node[0]
        if kind == "number":
            return float(node[1])
        if kind == "selector":
            column = POD_INFO_COLUMN if node[1] == POD_INFO else COLUMNS.index(node[1])
            self.push((OP_SELECT, column, 0, 0.0))
            return None
        if kind == "range":
            _, function, column, window_s = node
            if column == POD_INFO:
                raise NotCompilable("kube_pod_info cannot be used in a range function")
            self.push((OP_RANGE, _FUNCTIONS[function], COLUMNS.index(column), float(window_s)))
            return None
        if kind == "vector":
            self.push((OP_VECTOR, 0, 0, float(node[1])))
            return None
        if kind == "instant":  # a selector with an offset
            _, column, offset_s = node
            if column != POD_INFO and column not in COLUMNS:
                raise NotCompilable("histogram buckets are not in the compiled kernels")
            self.rows.append((OP_OFFSET, 0, 0, float(offset_s)))
            self.push((OP_SELECT, POD_INFO_COLUMN if column == POD_INFO else COLUMNS.index(column), 0, 0.0))
            return None
        if kind == "frange":  # a range function over x[w] offset d, or over a subquery
            _, function, source, params = node
            if source[0] == "subquery":
                self.emit_subquery(function, source, params)
                return None
            if function not in _FUNCTIONS:
                raise NotCompilable(f"{function}() is not in the compiled kernels")
            _, column, window_s, offset_s = source
            if column == POD_INFO:
                raise NotCompilable("kube_pod_info cannot be used in a range function")
            if column not in COLUMNS:
                raise NotCompilable("histogram buckets are not in the compiled kernels")
            if offset_s != 0.0:
                self.rows.append((OP_OFFSET, 0, 0, float(offset_s)))
            self.push((OP_RANGE, _FUNCTIONS[function], COLUMNS.index(column), float(window_s)))
            return None
        if kind == "aggregate":
            _, op, grouping, inner = node
            if self.emit(inner) is not None:
                raise NotCompilable(f"{op}() of a number is not a vector")
            self.rows.append((OP_AGGREGATE, _AGGREGATIONS[op], int(grouping == "pod"), 0.0))
            return None
        if kind == "or":
            left, right = self.emit(node[1]), self.emit(node[2])
            if left is not None or right is not None:
                raise NotCompilable("'or' needs vectors on both sides")
            self.rows.append((OP_OR, 0, 0, 0.0))
            self.depth -= 1
            return None
        if kind == "binary":
            _, op, left_node, right_node = node
            left, right = self.emit(left_node), self.emit(right_node)
            if left is not None and right is not None:
                # A number-only subtree never reads the store: let the Python evaluator fold it (to a number).
                value: object = Query("", node).evaluate(MetricStore(), 0.0)
                if not isinstance(value, (int, float)):
                    raise NotCompilable("a number-only subtree did not fold to a number")
                return float(value)
            if left is not None:
                self.rows.append((OP_BINARY_NV, _OPERATORS[op], 0, left))
            elif right is not None:
                self.rows.append((OP_BINARY_VN, _OPERATORS[op], 0, right))
            else:
                self.rows.append((OP_BINARY_VV, _OPERATORS[op], 0, 0.0))
                self.depth -= 1
            return None
        raise NotCompilable(f"unknown node {kind!r}")

    def emit_subquery(self, function: str, source: tuple, params: tuple) -> None:
        # Header, its parameter rows, the inner block at the stack level the result will take, the end.
        _, inner, range_s, step_s, offset_s = source
        if function not in _SUBQUERY_FUNCTIONS:
            raise NotCompilable(f"{function}() of a subquery is not in the compiled kernels")
        if not _at_most_one_series(inner):
            raise NotCompilable("a subquery of per-pod series is not in the compiled kernels")
        block = _Emitter()
        if block.emit(inner) is not None:
            raise NotCompilable("a subquery needs an instant vector, not a number")
        if any(row[0] == OP_SUBQUERY for row in block.rows):
            raise NotCompilable("nested subqueries are not in the compiled kernels")
        numbers = [float(p) for p in params] + [0.0] * (2 - len(params))
        header = len(self.rows)
        self.rows.append((OP_SUBQUERY, _SUBQUERY_FUNCTIONS[function], 0, float(range_s)))
        for number in (float(step_s), float(offset_s), *numbers):
            self.rows.append((OP_PARAM, 0, 0, number))
        self.rows.extend(block.rows)
        self.rows.append((OP_SUBQUERY_END, 0, 0, 0.0))
        self.rows[header] = (OP_SUBQUERY, _SUBQUERY_FUNCTIONS[function], len(self.rows) - 1 - header, float(range_s))
        # The block runs on the levels from the result's up.
        self.max_depth = max(self.max_depth, self.depth + block.max_depth)
        self.depth += 1


def _at_most_one_series(node: tuple) -> bool:
    # Whether the node's value has at most one series, keyed () (or is a number): what the kernel folds.
    kind = node[0]
    if kind in ("number", "vector"):
        return True
    if kind == "aggregate":
        return node[2] != "pod"
    if kind == "binary":
        return _at_most_one_series(node[2]) and _at_most_one_series(node[3])
    if kind == "or":
        return _at_most_one_series(node[1]) and _at_most_one_series(node[2])
    if kind == "frange" and node[2][0] == "subquery":
        return _at_most_one_series(node[2][1])
    return False


# ---- workspace and store ------------------------------------------------------------------------


@njit(cache=True, nogil=True)
def workspace_arrays(max_series, depth=MAX_DEPTH):
    """Scratch arrays for :func:`evaluate`, for a store with at most ``max_series`` distinct pod ids.

    Holds ``max_series + 1`` series per vector (the pods and the pod-less
    series ``or vector(N)`` adds) and ``depth`` stack levels
    (:attr:`CompiledQuery.depth`; the default fits every compiled query).
    """
    capacity = max_series + 1
    return Workspace(
        np.zeros((depth, capacity), dtype=np.int64),
        np.zeros((depth, capacity), dtype=np.float64),
        np.zeros(depth, dtype=np.int64),
        np.zeros(capacity, dtype=np.int64),
        np.zeros(capacity, dtype=np.int64),
        np.zeros(capacity, dtype=np.int64),
        np.zeros(capacity, dtype=np.int64),
        np.zeros((6, capacity), dtype=np.float64),
        np.zeros(FOLD_SLOTS, dtype=np.float64),
    )


def workspace(compiled: CompiledQuery, max_series: int) -> Workspace:
    """:func:`workspace_arrays` sized for ``compiled``; ``max_series`` >= distinct pod ids in the store."""
    return workspace_arrays(int(max_series), max(int(compiled.depth), 1))


def store_arrays(store: MetricStore, spare: int = 0) -> StoreArrays:
    """``store`` in the engine's layout, with ``spare`` unused scrapes of garbage after the real ones."""
    n_scr = len(store.times_s)
    sizes = [len(p) for p in store.pods] + [1] * spare
    exist_sizes = [len(p) for p in store.existing] + [1] * spare
    scr_off = np.zeros(n_scr + spare + 1, dtype=np.int64)
    scr_off[1:] = np.cumsum(sizes)
    ex_off = np.zeros(n_scr + spare + 1, dtype=np.int64)
    ex_off[1:] = np.cumsum(exist_sizes)
    junk_pod = np.zeros(spare, dtype=np.int64)
    rows = [*store.values, np.full((spare, len(COLUMNS)), 1e300)]
    return StoreArrays(
        scr_t=np.concatenate([np.asarray(store.times_s, dtype=np.float64), np.full(spare, -1e300)]),
        n_scr=n_scr,
        scr_off=scr_off,
        smp_pod=np.concatenate([*store.pods, junk_pod]).astype(np.int64),
        smp_val=np.ascontiguousarray(np.concatenate(rows).reshape(-1, len(COLUMNS)), dtype=np.float64),
        ex_off=ex_off,
        ex_pod=np.concatenate([*store.existing, junk_pod]).astype(np.int64),
    )


def as_python(kind: int, n: int, out_keys: np.ndarray, out_vals: np.ndarray):
    """:func:`evaluate`'s result as ``Query.evaluate`` returns it: a float, or a dict keyed ``(pod,)`` / ``()``."""
    if kind == NUMBER:
        return float(out_vals[0])
    if kind == ZERO_DIVISION:
        raise ZeroDivisionError("float division by zero")
    if kind != VECTOR:
        raise ValueError(f"evaluate ran out of room (kind {kind})")
    return {
        (() if key == NOT_A_POD else (int(key),)): float(value)
        for key, value in zip(out_keys[:n].tolist(), out_vals[:n].tolist(), strict=True)
    }


# ---- the store ----------------------------------------------------------------------------------
#
# Every kernel below that takes arrays returns in one place and touches each of them there: numba
# then pairs each array's reference-count increment on entry with one decrement at that exit and
# prunes both, which early returns or an array last used inside a branch defeat (about 10 ns per
# array per call: most of a small query's cost). The touch is ``+ 0 * a.size`` on an int result,
# a never-taken branch on a float one. Subviews of the workspace are avoided for the same reason:
# rows are indexed in place.


@njit(cache=True, nogil=True)
def last_index(scrape_time_s, n_scrapes, now_s):
    """``MetricStore._last_index``: the latest scrape at or before ``now_s`` (within 1e-9 s), -1 if none."""
    lo, hi = 0, n_scrapes
    while lo < hi:
        mid = (lo + hi) // 2
        if scrape_time_s[mid] <= now_s + 1e-9:
            lo = mid + 1
        else:
            hi = mid
    return lo - 1


@njit(cache=True, nogil=True)
def _latest_and_fresh(scrape_time_s, n_scrapes, now_s):
    # (last_index at now_s, that scrape or -1 once older than STALENESS_S): what a range and a selector read.
    k = last_index(scrape_time_s, n_scrapes, now_s)
    fresh = k
    if k < 0 or now_s - scrape_time_s[k] > STALENESS_S:
        fresh = -1
    return k, fresh + 0 * scrape_time_s.size


@njit(cache=True, nogil=True)
def fresh_index(scrape_time_s, n_scrapes, now_s):
    """The scrape an instant selector reads at ``now_s``: :func:`last_index`, or -1 once older than ``STALENESS_S``."""
    return _latest_and_fresh(scrape_time_s, n_scrapes, now_s)[1]


@njit(cache=True, nogil=True)
def _instant(column, k, scrape_rows, sample_pod, sample_values, existing_rows, existing_pod, keys, vals, row):
    # MetricStore.instant at the fresh scrape k (-1: none) into keys/vals[row]: series in row order.
    # Returns how many, -1 if out of room.
    n = 0
    if k >= 0 and column == POD_INFO_COLUMN:
        lo = existing_rows[k]
        n = existing_rows[k + 1] - lo
        if n > keys.shape[1]:
            n = -1
        for i in range(n):
            keys[row, i] = existing_pod[lo + i]
            vals[row, i] = 1.0
    elif k >= 0:
        lo = scrape_rows[k]
        n = scrape_rows[k + 1] - lo
        if n > keys.shape[1]:
            n = -1
        for i in range(n):
            keys[row, i] = sample_pod[lo + i]
            vals[row, i] = sample_values[lo + i, column]
    return n + 0 * (
        scrape_rows.size
        + sample_pod.size
        + sample_values.size
        + existing_rows.size
        + existing_pod.size
        + keys.size
        + vals.size
    )


# ---- arithmetic ---------------------------------------------------------------------------------


@njit(cache=True, nogil=True)
def _sum_add(total, carry, x):
    # One step of the built-in sum() over floats: (running total, compensation) after adding x.
    t = total + x
    if COMPENSATED_SUM:
        if abs(total) >= abs(x):
            carry += (total - t) + x
        else:
            carry += (x - t) + total
    return t, carry


@njit(cache=True, nogil=True)
def _sum_end(total, carry):
    # The built-in sum()'s result: the compensation is added only when non-zero and finite.
    if COMPENSATED_SUM and carry != 0.0 and math.isfinite(carry):
        return total + carry
    return total


@njit(cache=True, nogil=True)
def _row_sum(values, row, start, n):
    # Python's sum() of values[row, start:start + n] (n >= 1): from the int 0, so -0.0 alone gives 0.0.
    total = 0.0 + values[row, start]
    carry = 0.0
    for i in range(start + 1, start + n):
        total, carry = _sum_add(total, carry, values[row, i])
    total = _sum_end(total, carry)
    return total if values.size >= 0 else math.nan  # (an int would turn -0.0 into 0.0)


@njit(cache=True, nogil=True)
def python_sum(values, start, n):
    """Python's built-in ``sum(values[start:start + n].tolist())`` for floats, bit for bit (0.0 when ``n`` is 0).

    Starts from the int 0 (so a lone -0.0 sums to 0.0) and adds left to right,
    with the Neumaier compensation Python 3.12 and later apply.
    """
    total = 0.0
    if n > 0:
        total = 0.0 + values[start]
        carry = 0.0
        for i in range(start + 1, start + n):
            total, carry = _sum_add(total, carry, values[i])
        total = _sum_end(total, carry)
    return total if values.size >= 0 else math.nan


@njit(cache=True, nogil=True)
def _aggregate(op, values, row, start, n):
    # metrics._aggregate over values[row, start:start + n] (n >= 1): max/min keep the first of equal
    # values and never replace on a comparison with NaN, as Python's max()/min() do.
    result = float(n)  # count
    if op == SUM:
        result = _row_sum(values, row, start, n)
    elif op == AVG:
        result = _row_sum(values, row, start, n) / max(n, 1)  # (n >= 1: the bound spares a raise path)
    elif op == MAX:
        result = values[row, start]
        for i in range(start + 1, start + n):
            if values[row, i] > result:
                result = values[row, i]
    elif op == MIN:
        result = values[row, start]
        for i in range(start + 1, start + n):
            if values[row, i] < result:
                result = values[row, i]
    return result if values.size >= 0 else math.nan  # (adding 0 would turn -0.0 into 0.0)


@njit(cache=True, nogil=True)
def _apply(op, a, b):
    # metrics._apply: x / 0 is NaN for 0 / 0, else an infinity with the numerator's sign.
    if op == ADD:
        return a + b
    if op == SUB:
        return a - b
    if op == MUL:
        return a * b
    if b == 0.0:
        return math.nan if a == 0.0 else math.copysign(math.inf, a)
    return a / b


@njit(cache=True, nogil=True)
def _extrapolated_rate(result, first_t, first_v, last_t, last_v, n_samples, range_start_s, range_end_s, is_rate):
    # metrics._extrapolated_rate after its reset loop (result = last - first + every value before a
    # reset), in the same float order. Returns (rate, False) where Python divides by zero (two
    # samples at one time, outside the store's contract) instead of raising.
    sampled_s = last_t - first_t
    range_s = range_end_s - range_start_s
    defined = sampled_s != 0.0 and range_s != 0.0
    if defined:
        to_start_s = first_t - range_start_s
        to_end_s = range_end_s - last_t
        average_gap_s = sampled_s / max(n_samples - 1, 1)
        if result > 0 and first_v >= 0 and result != 0.0:  # (!= 0 spares a raise path)
            to_zero_s = sampled_s * (first_v / result)
            if to_zero_s < to_start_s:
                to_start_s = to_zero_s
        threshold_s = average_gap_s * 1.1
        extrapolate_to_s = sampled_s
        extrapolate_to_s += to_start_s if to_start_s < threshold_s else average_gap_s / 2
        extrapolate_to_s += to_end_s if to_end_s < threshold_s else average_gap_s / 2
        result *= extrapolate_to_s / sampled_s
        if is_rate:
            result /= range_s
    return result, defined


# ---- range functions ----------------------------------------------------------------------------


@njit(cache=True, nogil=True)
def _range(function, column, window_s, k, now_s, scrape_time_s, scrape_rows, sample_pod, sample_values, work, row):
    # MetricStore.window + _range_value for every series, into the stack's row; returns how many, or
    # OUT_OF_ROOM, or ZERO_DIVISION where Python divides by zero (two scrapes at one time). window() meets
    # the series walking back from scrape k, so the dict order is the pods of the latest scrape first;
    # each series' first-met sample is its last one.
    keys, vals = work.stack_keys, work.stack_vals
    slot_pod, sorted_pod, sorted_slot = work.slot_pod, work.sorted_pod, work.sorted_slot
    acc_n, acc = work.acc_n, work.acc
    room = min(slot_pod.shape[0], keys.shape[1])
    first = k
    while first >= 0 and scrape_time_s[first] > now_s - window_s + 1e-9:
        first -= 1
    first += 1
    # Walk back: new pods of each scrape get the next slots, then join the ascending index.
    m = 0
    fits = True
    for j in range(k, first - 1, -1):
        i = 0
        q = m
        for r in range(scrape_rows[j], scrape_rows[j + 1]):
            p = sample_pod[r]
            while i < m and sorted_pod[i] < p:
                i += 1
            if i < m and sorted_pod[i] == p:
                continue
            if q >= room:
                fits = False
                break
            slot_pod[q] = p
            acc_n[q] = 0
            acc[_LAST_T, q] = scrape_time_s[j]
            acc[_LAST_V, q] = sample_values[r, column]
            q += 1
        if not fits:
            break
        a, b, w = m - 1, q - 1, q - 1
        while b >= m:
            if a >= 0 and sorted_pod[a] > slot_pod[b]:
                sorted_pod[w] = sorted_pod[a]
                sorted_slot[w] = sorted_slot[a]
                a -= 1
            else:
                sorted_pod[w] = slot_pod[b]
                sorted_slot[w] = b
                b -= 1
            w -= 1
        m = q
    if not fits:
        m = 0
        first = k + 1
    # Walk forward: each series' samples in time order, as _range_value reads the reversed lists.
    for j in range(first, k + 1):
        t_s = scrape_time_s[j]
        i = 0
        for r in range(scrape_rows[j], scrape_rows[j + 1]):
            p = sample_pod[r]
            while sorted_pod[i] < p:
                i += 1
            s = sorted_slot[i]
            v = sample_values[r, column]
            seen = acc_n[s]
            if function == IRATE:
                acc[_A, s] = acc[_C, s]
                acc[_B, s] = acc[_D, s]
                acc[_C, s] = t_s
                acc[_D, s] = v
            elif function == RATE or function == INCREASE:
                if seen == 0:
                    acc[_A, s] = t_s
                    acc[_B, s] = v
                    acc[_C, s] = v  # previous
                    acc[_D, s] = acc[_LAST_V, s] - v  # result
                else:
                    if v < acc[_C, s]:
                        acc[_D, s] += acc[_C, s]
                    acc[_C, s] = v
            elif function == AVG_OVER_TIME:
                if seen == 0:
                    acc[_A, s] = 0.0 + v
                    acc[_B, s] = 0.0
                else:
                    acc[_A, s], acc[_B, s] = _sum_add(acc[_A, s], acc[_B, s], v)
            elif function == MAX_OVER_TIME:
                if seen == 0 or v > acc[_A, s]:
                    acc[_A, s] = v
            elif seen == 0 or v < acc[_A, s]:
                acc[_A, s] = v
            acc_n[s] = seen + 1
    n = 0
    defined = True
    for s in range(m):
        samples = acc_n[s]
        if function == IRATE:
            if samples < 2:
                continue
            v1, v2 = acc[_B, s], acc[_D, s]
            delta = v2 - v1 if v2 >= v1 else v2
            gap_s = acc[_C, s] - acc[_A, s]
            value = math.nan
            if gap_s != 0.0:
                value = delta / gap_s
            else:
                defined = False
        elif function == RATE or function == INCREASE:
            if samples < 2:
                continue
            value, ok = _extrapolated_rate(
                acc[_D, s],
                acc[_A, s],
                acc[_B, s],
                acc[_LAST_T, s],
                acc[_LAST_V, s],
                samples,
                now_s - window_s,
                now_s,
                function == RATE,
            )
            defined = defined and ok
        elif function == AVG_OVER_TIME:
            value = _sum_end(acc[_A, s], acc[_B, s]) / max(samples, 1)
        else:
            value = acc[_A, s]
        keys[row, n] = slot_pod[s]
        vals[row, n] = value
        n += 1
    if not fits:
        n = OUT_OF_ROOM
    elif not defined:
        n = ZERO_DIVISION
    return n + 0 * (
        scrape_time_s.size
        + scrape_rows.size
        + sample_pod.size
        + sample_values.size
        + keys.size
        + vals.size
        + slot_pod.size
        + sorted_pod.size
        + sorted_slot.size
        + acc_n.size
        + acc.size
    )


# ---- subqueries ---------------------------------------------------------------------------------


@njit(cache=True, nogil=True)
def _ms(t_s):
    # metrics._ms: round(t_s * 1000), halves to even, as an int.
    return np.int64(np.rint(t_s * 1000.0))


@njit(cache=True, nogil=True)
def subquery_steps_ms(eval_ms, range_ms, step_ms, offset_ms):
    """The first and last steps of ``expr[range:step] offset d`` at ``eval_ms`` (Prometheus 3). [ms]

    ``promql_functions.subquery_steps_ms(..., major=3)``: multiples of
    ``step_ms`` after ``eval_ms - offset_ms - range_ms`` (Go's truncating
    division), up to ``eval_ms - offset_ms``. First > last: no step.
    """
    lower = eval_ms - offset_ms - range_ms
    quotient = abs(lower) // step_ms * (1 if lower >= 0 else -1)
    first = step_ms * quotient
    if first <= lower:
        first += step_ms
    return first, eval_ms - offset_ms


# The reference's own Kahan-Neumaier step, compiled (one definition for both engines).
_kahan_inc = njit(cache=True, nogil=True)(kahan_sum_inc)


@njit(cache=True, nogil=True)
def _fold_start(fold):
    for j in range(fold.shape[0]):
        fold[j] = 0.0


@njit(cache=True, nogil=True)
def _fold_add(fold, function, t_ms, y, eval_ms, smoothing_frac, trend_frac):
    # One more point (t_ms, y), in time order, into the function's state (see the _POINTS slots).
    # eval_ms: predict_linear's intercept time; the two factors: Holt's.
    seen = fold[_POINTS]
    if function == MAX_OVER_TIME:
        if seen == 0 or y > fold[_BEST]:
            fold[_BEST] = y
    elif function == MIN_OVER_TIME:
        if seen == 0 or y < fold[_BEST]:
            fold[_BEST] = y
    elif function == AVG_OVER_TIME:
        if seen == 0:
            fold[_TOTAL] = 0.0 + y
        else:
            fold[_TOTAL], fold[_CARRY] = _sum_add(fold[_TOTAL], fold[_CARRY], y)
    elif function == PREDICT_LINEAR:
        # linear_regression's loop, x in seconds from the evaluation time.
        if seen == 0:
            fold[_INIT_Y] = y
            fold[_CONST_Y] = 1.0
        elif y != fold[_INIT_Y]:
            fold[_CONST_Y] = 0.0
        fold[_N] += 1.0
        x = float(t_ms - eval_ms) / 1e3
        fold[_SUM_X], fold[_C_X] = _kahan_inc(x, fold[_SUM_X], fold[_C_X])
        fold[_SUM_Y], fold[_C_Y] = _kahan_inc(y, fold[_SUM_Y], fold[_C_Y])
        fold[_SUM_XY], fold[_C_XY] = _kahan_inc(x * y, fold[_SUM_XY], fold[_C_XY])
        fold[_SUM_X2], fold[_C_X2] = _kahan_inc(x * x, fold[_SUM_X2], fold[_C_X2])
    else:
        # double_exponential_smoothing's loop: the level starts at the first value, the trend at
        # the first difference, which the first step keeps.
        if seen == 0:
            fold[_FIRST] = y
            fold[_S1] = y
        else:
            if seen == 1:
                fold[_TREND] = y - fold[_FIRST]
            else:
                fold[_TREND] = trend_frac * (fold[_S1] - fold[_S0]) + (1 - trend_frac) * fold[_TREND]
            level = smoothing_frac * y + (1 - smoothing_frac) * (fold[_S1] + fold[_TREND])
            fold[_S0] = fold[_S1]
            fold[_S1] = level
    fold[_POINTS] = seen + 1


@njit(cache=True, nogil=True)
def _fold_end(fold, function, ahead_s):
    # (value, 1), or (NaN, 0) for too few points (no series), or (NaN, ZERO_DIVISION) where Python raises.
    points = fold[_POINTS]
    value = math.nan
    status = 1
    if points == 0 or (points < 2 and (function == PREDICT_LINEAR or function == DOUBLE_EXPONENTIAL_SMOOTHING)):
        status = 0
    elif function == MAX_OVER_TIME or function == MIN_OVER_TIME:
        value = fold[_BEST]
    elif function == AVG_OVER_TIME:
        value = _sum_end(fold[_TOTAL], fold[_CARRY]) / points
    elif function == PREDICT_LINEAR:
        n = fold[_N]
        if fold[_CONST_Y] == 1.0:
            slope, intercept = 0.0, fold[_INIT_Y]
            if math.isinf(fold[_INIT_Y]):
                slope, intercept = math.nan, math.nan
            value = slope * ahead_s + intercept
        else:
            sum_x = fold[_SUM_X] + fold[_C_X]
            sum_y = fold[_SUM_Y] + fold[_C_Y]
            sum_xy = fold[_SUM_XY] + fold[_C_XY]
            sum_x2 = fold[_SUM_X2] + fold[_C_X2]
            cov_xy = sum_xy - sum_x * sum_y / n
            var_x = sum_x2 - sum_x * sum_x / n
            if var_x == 0.0:
                status = ZERO_DIVISION
            else:
                slope = cov_xy / var_x
                intercept = sum_y / n - slope * sum_x / n
                value = slope * ahead_s + intercept
    else:
        value = fold[_S1]
    return value, status + 0 * fold.size


# ---- evaluation ---------------------------------------------------------------------------------


@njit(cache=True, nogil=True)
def _find(keys, row, n, key, hint):
    # Position of key in keys[row, :n] (unique keys), -1 if absent; tries hint first (sides often align).
    at = -1
    if hint < n and keys[row, hint] == key:
        at = hint
    else:
        for j in range(n):
            if keys[row, j] == key:
                at = j
                break
    return at + 0 * keys.size


@njit(cache=True, nogil=True)
def evaluate(
    code,
    consts,
    scrape_time_s,
    n_scrapes,
    scrape_rows,
    sample_pod,
    sample_values,
    existing_rows,
    existing_pod,
    now_s,
    work,
    out_keys,
    out_vals,
):
    """``Query.evaluate`` at ``now_s``, bit for bit and in the dict's order.

    Parameters
    ----------
    code, consts : numpy.ndarray
        :attr:`CompiledQuery.code` and :attr:`CompiledQuery.consts`.
    scrape_time_s, n_scrapes, scrape_rows, sample_pod, sample_values, existing_rows, existing_pod
        The store (see the module docstring); times in [s].
    now_s : float
        Evaluation time. [s]
    work : Workspace
        From :func:`workspace_arrays`; overwritten.
    out_keys, out_vals : numpy.ndarray
        int64 and float64, the result; ``max_series + 1`` entries always suffice.

    Returns
    -------
    kind, n : int, int
        ``(NUMBER, 0)``: a number, in ``out_vals[0]``. ``(VECTOR, n)``: ``n``
        series, keys (pod id, or ``NOT_A_POD`` for ``()``) in ``out_keys[:n]``
        and values in ``out_vals[:n]``. ``(OUT_OF_ROOM, 0)``: the workspace or
        the outputs are too small. ``(ZERO_DIVISION, 0)``: Python raises
        ``ZeroDivisionError`` (a rate over two scrapes at one time, which a
        store with strictly ascending times never holds).
    """
    keys, vals, stack_n = work.stack_keys, work.stack_vals, work.stack_n
    kind = VECTOR
    if code[0, 0] == OP_CONST:
        kind = NUMBER if out_vals.shape[0] >= 1 else OUT_OF_ROOM
        if kind == NUMBER:
            out_vals[0] = consts[0]
    else:
        at_now_s = now_s  # what selectors read at: now_s, or inside a subquery its step's time
        k, fresh = _latest_and_fresh(scrape_time_s, n_scrapes, now_s)
        now_k, now_fresh = k, fresh  # restored after a subquery
        # Typed zeros below: a literal 0 passed on would have numba compile each callee once more for it.
        top = np.int64(0)  # stack levels in use
        offset_s = 0.0  # an OP_OFFSET's, for the next selector or range
        # The subquery being run (one at a time: nested ones are not compiled): the stack level of its
        # result, its block's first row and its end row, its function and numbers, the step [ms] the
        # block last ran at and the last step.
        sub_row = sub_begin = sub_end = sub_function = np.int64(0)
        param_a = param_b = 0.0
        step_ms = last_step_ms = stride_ms = eval_ms = np.int64(0)
        fold = work.fold
        i = 0
        while i < code.shape[0]:
            op = code[i, 0]
            if op == OP_OFFSET:
                offset_s = consts[i]
            elif op == OP_SUBQUERY:
                if top >= stack_n.shape[0]:
                    kind = OUT_OF_ROOM
                    break
                sub_row, sub_begin, sub_end, sub_function = top, i + 1 + SUBQUERY_PARAMS, i + code[i, 2], code[i, 1]
                stride_ms = _ms(consts[i + 1])
                param_a, param_b = consts[i + 3], consts[i + 4]
                eval_ms = _ms(now_s)
                step_ms, last_step_ms = subquery_steps_ms(eval_ms, _ms(consts[i]), stride_ms, _ms(consts[i + 2]))
                _fold_start(fold)
                if step_ms > last_step_ms:
                    i = sub_end  # no step: the end row finishes an empty series
                    continue
                at_now_s = step_ms / 1000
                k, fresh = _latest_and_fresh(scrape_time_s, n_scrapes, at_now_s)
                i = sub_begin
                continue
            elif op == OP_SUBQUERY_END:
                if step_ms <= last_step_ms:
                    # The block's value at step_ms is on the result's level: at most one series, keyed ().
                    if stack_n[sub_row] > 0:
                        _fold_add(fold, sub_function, step_ms, vals[sub_row, 0], eval_ms, param_a, param_b)
                    step_ms += stride_ms
                    top = sub_row
                    if step_ms <= last_step_ms:
                        at_now_s = step_ms / 1000
                        k, fresh = _latest_and_fresh(scrape_time_s, n_scrapes, at_now_s)
                        i = sub_begin
                        continue
                value, n = _fold_end(fold, sub_function, param_a)
                if n < 0:
                    kind = n  # ZERO_DIVISION
                    break
                keys[sub_row, 0] = NOT_A_POD
                vals[sub_row, 0] = value
                stack_n[sub_row] = n
                top = sub_row + 1
                at_now_s, k, fresh = now_s, now_k, now_fresh
            elif op == OP_SELECT or op == OP_RANGE or op == OP_VECTOR:
                if top >= stack_n.shape[0]:
                    kind = OUT_OF_ROOM
                    break
                at_s = at_now_s  # the "instant" and "frange" nodes: at_now_s - offset_s
                at_k = k
                at_fresh = fresh
                if offset_s != 0.0:
                    at_s = at_now_s - offset_s
                    at_k, at_fresh = _latest_and_fresh(scrape_time_s, n_scrapes, at_s)
                    offset_s = 0.0
                if op == OP_SELECT:
                    n = _instant(
                        code[i, 1],
                        at_fresh,
                        scrape_rows,
                        sample_pod,
                        sample_values,
                        existing_rows,
                        existing_pod,
                        keys,
                        vals,
                        top,
                    )
                elif op == OP_RANGE:
                    n = _range(
                        code[i, 1],
                        code[i, 2],
                        consts[i],
                        at_k,
                        at_s,
                        scrape_time_s,
                        scrape_rows,
                        sample_pod,
                        sample_values,
                        work,
                        top,
                    )
                else:
                    keys[top, 0] = NOT_A_POD
                    vals[top, 0] = consts[i]
                    n = 1
                if n < 0:
                    kind = n  # OUT_OF_ROOM or ZERO_DIVISION
                    break
                stack_n[top] = n
                top += 1
            elif op == OP_AGGREGATE:
                d = top - 1
                n = stack_n[d]
                if code[i, 2] == 1:
                    for j in range(n):
                        vals[d, j] = _aggregate(code[i, 1], vals, d, j, 1)
                elif n > 0:
                    vals[d, 0] = _aggregate(code[i, 1], vals, d, 0, n)
                    keys[d, 0] = NOT_A_POD
                    stack_n[d] = 1
            elif op == OP_BINARY_VN:
                d = top - 1
                for j in range(stack_n[d]):
                    vals[d, j] = _apply(code[i, 1], vals[d, j], consts[i])
            elif op == OP_BINARY_NV:
                d = top - 1
                for j in range(stack_n[d]):
                    vals[d, j] = _apply(code[i, 1], consts[i], vals[d, j])
            elif op == OP_BINARY_VV:
                # Left's order; a series missing on the right drops out.
                d = top - 2
                nr = stack_n[d + 1]
                w = 0
                for j in range(stack_n[d]):
                    at = _find(keys, d + 1, nr, keys[d, j], j)
                    if at >= 0:
                        value = _apply(code[i, 1], vals[d, j], vals[d + 1, at])
                        keys[d, w] = keys[d, j]
                        vals[d, w] = value
                        w += 1
                stack_n[d] = w
                top -= 1
            elif op == OP_OR:
                # {**right, **left}: right's keys in right's order with left's values, then left-only
                # keys; built in the right's row, then moved down.
                d = top - 2
                nr = stack_n[d + 1]
                n = nr
                for j in range(stack_n[d]):
                    at = _find(keys, d + 1, nr, keys[d, j], j)
                    if at >= 0:
                        vals[d + 1, at] = vals[d, j]
                    elif n < keys.shape[1]:
                        keys[d + 1, n] = keys[d, j]
                        vals[d + 1, n] = vals[d, j]
                        n += 1
                    else:
                        kind = OUT_OF_ROOM
                        break
                for j in range(n):
                    keys[d, j] = keys[d + 1, j]
                    vals[d, j] = vals[d + 1, j]
                stack_n[d] = n
                top -= 1
                if kind == OUT_OF_ROOM:
                    break
            i += 1
    n = 0
    if kind == VECTOR:
        n = stack_n[0]
        if n > out_keys.shape[0] or n > out_vals.shape[0]:
            kind = OUT_OF_ROOM
            n = 0
        for j in range(n):
            out_keys[j] = keys[0, j]
            out_vals[j] = vals[0, j]
    held = (
        code.size
        + consts.size
        + scrape_time_s.size
        + scrape_rows.size
        + sample_pod.size
        + sample_values.size
        + existing_rows.size
        + existing_pod.size
        + keys.size
        + vals.size
        + stack_n.size
        + work.acc.size
        + work.fold.size
        + out_keys.size
        + out_vals.size
    )
    return kind, n + 0 * held


@njit(cache=True, nogil=True)
def scalar(
    code,
    consts,
    scrape_time_s,
    n_scrapes,
    scrape_rows,
    sample_pod,
    sample_values,
    existing_rows,
    existing_pod,
    now_s,
    work,
    out_keys,
    out_vals,
):
    """``Query.scalar`` (as KEDA's Prometheus scaler reads a query); arguments as :func:`evaluate`.

    Returns
    -------
    value, status : float, int
        ``VALUE`` (0): the number, or the one series' value. ``EMPTY`` (1): no
        series (Python's ``(None, None)``). ``MULTIPLE`` (2): the "returned
        multiple elements" error. ``NO_ROOM`` (3): :func:`evaluate` ran out
        of room. ``RAISES`` (4): Python raises ``ZeroDivisionError``. ``value``
        is NaN unless the status is ``VALUE``.
    """
    kind, n = evaluate(
        code,
        consts,
        scrape_time_s,
        n_scrapes,
        scrape_rows,
        sample_pod,
        sample_values,
        existing_rows,
        existing_pod,
        now_s,
        work,
        out_keys,
        out_vals,
    )
    value = math.nan
    status = VALUE
    if kind == OUT_OF_ROOM:
        status = NO_ROOM
    elif kind == ZERO_DIVISION:
        status = RAISES
    elif kind == NUMBER or n == 1:
        value = out_vals[0]
    elif n == 0:
        status = EMPTY
    else:
        status = MULTIPLE
    held = (
        code.size
        + consts.size
        + scrape_time_s.size
        + scrape_rows.size
        + sample_pod.size
        + sample_values.size
        + existing_rows.size
        + existing_pod.size
        + work.acc.size
        + out_keys.size
        + out_vals.size
    )
    return value, status + 0 * held
