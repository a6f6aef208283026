"""The ``formula`` module parses and evaluates KEDA ``scalingModifiers.formula`` strings, safely.

KEDA compiles the formula with expr-lang (``github.com/expr-lang/expr``) over
a map of trigger values. This module implements the numeric subset of that
language that scaling formulas use, with its own tokenizer and parser, and
never hands the string to Python's ``eval``:

* numbers, ``true``, ``false``, ``nil`` and the names of triggers (or of
  ``let`` bindings);
* ``+ - * / % ** ^``, unary ``- + ! not``, comparisons ``== != < <= > >=``,
  ``and or && ||``, the conditional ``c ? a : b`` and nil-coalescing ``??``;
* ``let name = expr; ...`` bindings before the final expression;
* calls to ``max``, ``min``, ``abs``, ``ceil``, ``floor``, ``round``,
  ``float`` and ``int`` only.

Anything else (strings, member access, indexing, other functions, unknown
names) is rejected with a :class:`FormulaError` that says where and why.
Operator precedence and associativity follow expr-lang's
``parser/operator/operator.go``. Arithmetic is float64; division by zero
gives +-Inf or NaN as in Go, and a non-finite result is an error.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass

from planner.errors import PlannerInputError

__all__ = ["ALLOWED_FUNCTIONS", "Formula", "FormulaError", "compile_formula"]

_MAX_LENGTH = 10_000
_MAX_DEPTH = 100

# Binary operators: precedence and right-associativity (expr-lang operator.go).
_BINARY = {
    "or": (10, False),
    "||": (10, False),
    "and": (15, False),
    "&&": (15, False),
    "==": (20, False),
    "!=": (20, False),
    "<": (20, False),
    ">": (20, False),
    ">=": (20, False),
    "<=": (20, False),
    "+": (30, False),
    "-": (30, False),
    "*": (60, False),
    "/": (60, False),
    "%": (60, False),
    "**": (100, True),
    "^": (100, True),
    "??": (500, False),
}
_UNARY = {"not": 50, "!": 50, "-": 90, "+": 90}
_KEYWORDS = {"true", "false", "nil", "let", "and", "or", "not"}


def _call_round(x: float) -> float:
    # Go's math.Round: half away from zero (Python's round is half to even).
    return math.copysign(math.floor(abs(x) + 0.5), x)


ALLOWED_FUNCTIONS: dict[str, Callable[..., float]] = {
    "max": lambda *xs: max(xs),
    "min": lambda *xs: min(xs),
    "abs": abs,
    "ceil": math.ceil,
    "floor": math.floor,
    "round": _call_round,
    "float": float,
    "int": lambda x: float(int(x)),
}
_ARITY = {"abs": 1, "ceil": 1, "floor": 1, "round": 1, "float": 1, "int": 1}

_ALLOWED_TEXT = (
    "numbers, trigger names, + - * / % ** ^, comparisons, and/or/not, c ? a : b, ??, "
    "let name = ...; and the functions " + ", ".join(ALLOWED_FUNCTIONS)
)

_TOKEN = re.compile(
    r"""
    (?P<space>\s+)
  | (?P<number>(?:\d+\.\d*|\.\d+|\d+)(?:[eE][+-]?\d+)?)
  | (?P<name>[A-Za-z_][A-Za-z0-9_]*)
  | (?P<op>\?\?|\*\*|==|!=|<=|>=|&&|\|\||[-+*/%^<>!?:(),;=])
    """,
    re.VERBOSE,
)


class FormulaError(PlannerInputError):
    """A formula that is not in the allowed subset, or that cannot be evaluated."""


@dataclass(frozen=True)
class _Token:
    kind: str
    text: str
    column: int


def _tokenize(source: str) -> list[_Token]:
    tokens = []
    position = 0
    while position < len(source):
        match = _TOKEN.match(source, position)
        if match is None:
            char = source[position]
            raise FormulaError(
                f"unexpected character {char!r} at column {position + 1}: only {_ALLOWED_TEXT} are allowed"
            )
        kind = match.lastgroup
        assert kind is not None  # every alternative of _TOKEN is a named group
        if kind != "space":
            text = match.group()
            if kind == "name" and text in ("and", "or", "not"):
                kind = "op"
            tokens.append(_Token(kind, text, position + 1))
        position = match.end()
    tokens.append(_Token("end", "", len(source) + 1))
    return tokens


class _Parser:
    """Recursive descent over the token list, producing nested tuples."""

    def __init__(self, source: str):
        self.tokens = _tokenize(source)
        self.index = 0
        self.depth = 0

    @property
    def token(self) -> _Token:
        return self.tokens[self.index]

    def advance(self) -> _Token:
        token = self.tokens[self.index]
        self.index += 1
        return token

    def expect(self, text: str) -> None:
        if self.token.text != text:
            raise self.error(f"expected {text!r}")
        self.advance()

    def error(self, what: str) -> FormulaError:
        token = self.token
        found = "the end of the formula" if token.kind == "end" else repr(token.text)
        return FormulaError(f"{what} at column {token.column}, found {found}")

    def parse(self):
        bindings = []
        while self.token.kind == "name" and self.token.text == "let":
            self.advance()
            if self.token.kind != "name" or self.token.text in _KEYWORDS:
                raise self.error("expected a name after 'let'")
            name = self.advance().text
            self.expect("=")
            bindings.append((name, self.conditional()))
            self.expect(";")
        body = self.conditional()
        if self.token.kind != "end":
            raise self.error("unexpected text after the expression")
        for name, value in reversed(bindings):
            body = ("let", name, value, body)
        return body

    def conditional(self):
        self.depth += 1
        if self.depth > _MAX_DEPTH:
            raise FormulaError(f"formula nests deeper than {_MAX_DEPTH} levels")
        condition = self.binary(0)
        if self.token.text == "?":
            self.advance()
            then = self.conditional()
            self.expect(":")
            otherwise = self.conditional()
            condition = ("if", condition, then, otherwise)
        self.depth -= 1
        return condition

    def binary(self, min_precedence: int):
        left = self.unary()
        while self.token.kind == "op" and self.token.text in _BINARY:
            precedence, right_assoc = _BINARY[self.token.text]
            if precedence < min_precedence:
                break
            op = self.advance().text
            right = self.binary(precedence if right_assoc else precedence + 1)
            left = ("binary", op, left, right)
        return left

    def unary(self):
        token = self.token
        if token.kind == "op" and token.text in _UNARY:
            self.advance()
            operand = self.binary(_UNARY[token.text])
            return ("unary", token.text, operand)
        return self.primary()

    def primary(self):
        token = self.token
        if token.kind == "number":
            self.advance()
            return ("number", float(token.text))
        if token.kind == "name":
            self.advance()
            if token.text in ("true", "false"):
                return ("const", token.text == "true")
            if token.text == "nil":
                return ("const", None)
            if token.text == "let":
                raise FormulaError(f"'let' is only allowed at the start of the formula (column {token.column})")
            if self.token.text == "(":
                if token.text not in ALLOWED_FUNCTIONS:
                    raise FormulaError(
                        f"function {token.text!r} at column {token.column} is not allowed; "
                        f"allowed functions: {', '.join(ALLOWED_FUNCTIONS)}"
                    )
                self.advance()
                args = []
                if self.token.text != ")":
                    args.append(self.conditional())
                    while self.token.text == ",":
                        self.advance()
                        args.append(self.conditional())
                self.expect(")")
                expected = _ARITY.get(token.text)
                if (expected is not None and len(args) != expected) or not args:
                    raise FormulaError(f"{token.text}() at column {token.column} got {len(args)} arguments")
                return ("call", token.text, tuple(args))
            return ("name", token.text, token.column)
        if token.text == "(":
            self.advance()
            inner = self.conditional()
            self.expect(")")
            return inner
        raise self.error("expected a number, a name, a function call or '('")


def _free_names(node, bound=frozenset()) -> set[str]:
    kind = node[0]
    if kind == "name":
        return set() if node[1] in bound else {node[1]}
    if kind == "let":
        return _free_names(node[2], bound) | _free_names(node[3], bound | {node[1]})
    names: set[str] = set()
    for child in node[1:]:
        if isinstance(child, tuple):
            if child and isinstance(child[0], str):
                names |= _free_names(child, bound)
            else:
                for item in child:
                    names |= _free_names(item, bound)
    return names


@dataclass(frozen=True)
class Formula:
    """A parsed formula.

    Attributes
    ----------
    source : str
        The formula as written.
    names : frozenset of str
        Trigger names it reads.
    """

    source: str
    names: frozenset[str]
    _tree: tuple

    @property
    def tree(self) -> tuple:
        """The parsed formula as nested tuples: ``("number", x)``, ``("name", name, column)``,
        ``("unary", op, operand)``, ``("binary", op, left, right)``, ``("call", function, args)``,
        ``("const", value)``, ``("if", condition, then, otherwise)``, ``("let", name, value, body)``."""
        return self._tree

    def evaluate(self, values: Mapping[str, float | None]):
        """Evaluate with trigger values (``None`` for a trigger excluded by fallback).

        Returns
        -------
        float, bool or None
        """
        missing = self.names - set(values)
        if missing:
            raise FormulaError(f"no value for {', '.join(sorted(missing))}")
        return _evaluate(self._tree, dict(values))


def compile_formula(source: str, known_names: Iterable[str]) -> Formula:
    """Parse ``source`` and check that it reads only ``known_names``.

    Parameters
    ----------
    source : str
        ``scalingModifiers.formula``.
    known_names : iterable of str
        Names of the ScaledObject's triggers (expr-lang's compile-time environment).

    Raises
    ------
    FormulaError
        Syntax outside the allowed subset, or an unknown name.
    """
    if not isinstance(source, str) or not source.strip():
        raise FormulaError("formula is empty")
    if len(source) > _MAX_LENGTH:
        raise FormulaError(f"formula is longer than {_MAX_LENGTH} characters")
    tree = _Parser(source).parse()
    names = _free_names(tree)
    unknown = names - set(known_names)
    if unknown:
        raise FormulaError(
            f"unknown name {', '.join(repr(n) for n in sorted(unknown))}: the formula can read only the "
            f"triggers' names ({', '.join(sorted(known_names)) or 'none'}) and names bound with let"
        )
    return Formula(source, frozenset(names), tree)


def _number(value, what: str) -> float:
    if isinstance(value, bool) or value is None:
        raise FormulaError(f"{what} needs numbers, got {_show(value)}")
    return value


def _show(value) -> str:
    if value is None:
        return "nil"
    if isinstance(value, bool):
        return "true" if value else "false"
    return repr(value)


def _divide(a: float, b: float) -> float:
    if b == 0.0:
        if a == 0.0 or math.isnan(a):
            return math.nan
        return math.copysign(math.inf, a) * math.copysign(1.0, b)
    return a / b


def _power(a: float, b: float) -> float:
    try:
        result = a**b
    except OverflowError:
        return math.inf
    except ZeroDivisionError:
        return math.inf
    if isinstance(result, complex):
        return math.nan
    return result


def _evaluate(node, env: dict):
    kind = node[0]
    if kind == "number" or kind == "const":
        return node[1]
    if kind == "name":
        return env[node[1]]
    if kind == "let":
        inner = dict(env)
        inner[node[1]] = _evaluate(node[2], env)
        return _evaluate(node[3], inner)
    if kind == "if":
        condition = _evaluate(node[1], env)
        if not isinstance(condition, bool):
            raise FormulaError(f"the condition of ?: must be true or false, got {_show(condition)}")
        return _evaluate(node[2] if condition else node[3], env)
    if kind == "unary":
        op, value = node[1], _evaluate(node[2], env)
        if op in ("!", "not"):
            if not isinstance(value, bool):
                raise FormulaError(f"{op} needs true or false, got {_show(value)}")
            return not value
        value = _number(value, f"unary {op}")
        return -value if op == "-" else value
    if kind == "call":
        args = [_number(_evaluate(arg, env), f"{node[1]}()") for arg in node[2]]
        if node[1] == "int" and not math.isfinite(args[0]):
            raise FormulaError(f"int() of {args[0]} is not a number")
        return float(ALLOWED_FUNCTIONS[node[1]](*args))
    # binary
    op = node[1]
    if op == "??":
        left = _evaluate(node[2], env)
        return _evaluate(node[3], env) if left is None else left
    if op in ("and", "&&", "or", "||"):
        left = _evaluate(node[2], env)
        if not isinstance(left, bool):
            raise FormulaError(f"{op} needs true or false, got {_show(left)}")
        if (op in ("and", "&&")) != left:
            return left
        right = _evaluate(node[3], env)
        if not isinstance(right, bool):
            raise FormulaError(f"{op} needs true or false, got {_show(right)}")
        return right
    left, right = _evaluate(node[2], env), _evaluate(node[3], env)
    if op == "==":
        return left == right
    if op == "!=":
        return left != right
    a, b = _number(left, op), _number(right, op)
    if op == "+":
        return a + b
    if op == "-":
        return a - b
    if op == "*":
        return a * b
    if op == "/":
        return _divide(a, b)
    if op == "%":
        if not (math.isfinite(a) and math.isfinite(b)) or a != int(a) or b != int(b):
            raise FormulaError("% needs whole numbers")
        if b == 0:
            raise FormulaError("integer divide by zero in %")
        return math.fmod(a, b)
    if op in ("**", "^"):
        return _power(a, b)
    if op == "<":
        return a < b
    if op == "<=":
        return a <= b
    if op == ">":
        return a > b
    return a >= b
