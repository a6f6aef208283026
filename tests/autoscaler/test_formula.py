"""Tests for planner.autoscaler.formula: the scalingModifiers subset of expr-lang, and what it refuses."""

from __future__ import annotations

import math

import pytest

from planner.autoscaler.formula import FormulaError, compile_formula

LLMD_QUEUE_GUARD = """let queue_per_replica = 1;
        let running_per_replica = 16;
        let demand = max(queue / queue_per_replica, running / running_per_replica);
        demand <= replicas
        ? demand
        : max(demand - (pending ?? 0), replicas)"""
NAMES = ["queue", "running", "pending", "replicas"]


@pytest.mark.parametrize(
    ("source", "expected"),
    [
        ("1 + 2 * 3", 7.0),
        ("(1 + 2) * 3", 9.0),
        ("2 ** 3 ** 2", 512.0),  # right-associative
        ("2 ^ 3", 8.0),
        ("-2 ** 2", -4.0),  # unary minus binds looser than **
        ("7 % 3", 1.0),
        ("-7 % 3", -1.0),  # Go: sign of the dividend
        ("10 / 4", 2.5),
        ("1 + 2 ?? 5", 3.0),
        ("nil ?? 5", 5.0),
        ("true ? 1 : 2", 1.0),
        ("1 > 2 ? 1 : 2 > 1 ? 3 : 4", 3.0),
        ("not true == false", True),  # (not true) == false
        ("1 < 2 and 2 < 3 || false", True),
        ("max(1, 5, 3) + min(4, 2)", 7.0),
        ("abs(-2) + ceil(1.2) + floor(1.8) + round(2.5) + round(-2.5)", 2 + 2 + 1 + 3 - 3),
        ("int(2.9) + float(1)", 3.0),
        ("1e3 + .5", 1000.5),
    ],
)
def test_evaluates_like_expr_lang(source, expected):
    assert compile_formula(source, []).evaluate({}) == expected


def test_llmd_queue_guard_formula():
    formula = compile_formula(LLMD_QUEUE_GUARD, NAMES)
    assert formula.names == frozenset(NAMES)
    assert formula.evaluate({"queue": -1.0, "running": -1.0, "pending": -1.0, "replicas": -1.0}) == 0.9375
    assert formula.evaluate({"queue": 10.0, "running": 32.0, "pending": 3.0, "replicas": 2.0}) == 7.0
    assert formula.evaluate({"queue": 10.0, "running": 32.0, "pending": None, "replicas": 2.0}) == 10.0
    assert formula.evaluate({"queue": 1.0, "running": 16.0, "pending": 0.0, "replicas": 2.0}) == 1.0


def test_let_names_shadow_and_stay_local():
    assert compile_formula("let a = x * 2; let b = a + 1; b * a", ["x"]).evaluate({"x": 3.0}) == 42.0


def test_division_by_zero_follows_go_floats():
    formula = compile_formula("a / b", ["a", "b"])
    assert formula.evaluate({"a": 1.0, "b": 0.0}) == math.inf
    assert math.isnan(formula.evaluate({"a": 0.0, "b": 0.0}))


@pytest.mark.parametrize(
    ("source", "message"),
    [
        ("__import__('os').system('rm -rf /')", "unexpected character"),
        ("__import__(1)", "function '__import__' at column 1 is not allowed"),
        ("queue.__class__", "unexpected character '.'"),
        ("queue[0]", "unexpected character '\\['"),
        ("exec(queue)", "function 'exec' at column 1 is not allowed"),
        ("eval(1)", "function 'eval' at column 1 is not allowed"),
        ("lambda: 1", "unexpected character ':'|unknown name 'lambda'|unexpected text"),
        ("open", "unknown name 'open'"),
        ("queue + foo", "unknown name 'foo'"),
        ("'a' + 'b'", "unexpected character"),
        ("1 +", "expected a number"),
        ("max(1", "expected '\\)'"),
        ("x = 1", "unexpected text after the expression"),
        ("", "formula is empty"),
        ("(" * 200 + "1" + ")" * 200, "nests deeper"),
        ("abs(1, 2)", "abs\\(\\) at column 1 got 2 arguments"),
        ("1 ; 2", "unexpected text"),
    ],
)
def test_rejects_anything_outside_the_subset(source, message):
    with pytest.raises(FormulaError, match=message):
        compile_formula(source, ["queue"])


@pytest.mark.parametrize(
    ("source", "values", "message"),
    [
        ("a + b", {"a": 1.0, "b": None}, "needs numbers, got nil"),
        ("a ? 1 : 2", {"a": 1.0, "b": 0.0}, "condition of \\?: must be true or false"),
        ("a and true", {"a": 1.0, "b": 0.0}, "needs true or false"),
        ("a % 0", {"a": 4.0, "b": 0.0}, "divide by zero"),
    ],
)
def test_runtime_errors_are_clear(source, values, message):
    with pytest.raises(FormulaError, match=message):
        compile_formula(source, ["a", "b"]).evaluate(values)


def test_missing_value_is_reported():
    with pytest.raises(FormulaError, match="no value for b"):
        compile_formula("a + b", ["a", "b"]).evaluate({"a": 1.0})
