"""The ``planner`` command line: one subcommand per question, JSON on request.

Each subcommand lives in its own module under ``planner.cli`` and exposes
``register(subparsers)``, which adds its parser and sets ``func`` to a
callable taking the parsed arguments and returning an exit status.

Exit status: 0 on success, 2 on bad input (a clear one-line message on
stderr, never a traceback), 1 on an unexpected internal error.
"""

from __future__ import annotations

import argparse
import importlib
import sys

from planner.errors import PlannerInputError

# Subcommand modules, in the order `planner --help` lists them.
_COMMANDS: tuple[str, ...] = (
    "replicas",
    "grace",
    "kv",
    "knee",
    "metrics",
    "hpa",
    "simulate",
    "sweep",
    "oracle",
    "plan",
    "schedule",
    "lint",
    "manifests",
    "report",
)


def build_parser(only: str | None = None) -> argparse.ArgumentParser:
    """Return the top-level parser with every subcommand registered, or just ``only``.

    Registering a subcommand imports its module and what that needs (pandas
    for ``knee``, PyYAML for ``hpa``); a run of one command registers only
    that one so it starts without the others' imports.
    """
    parser = _Parser(
        prog="planner",
        description="Capacity planning for autoscaling LLM inference.",
    )
    parser.add_argument("--version", action=_VersionAction)
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    for name in _COMMANDS if only is None else (only,):
        importlib.import_module(f"planner.cli.{name}").register(subparsers)
    return parser


def main(argv: list[str] | None = None) -> int:
    """Run the command line and return its exit status."""
    argv = sys.argv[1:] if argv is None else list(argv)
    # The subcommand is the first word; anything else (--help, a typo) gets the full parser.
    first = argv[0] if argv else None
    parser = build_parser(first if first in _COMMANDS else None)
    args = parser.parse_args(argv)
    try:
        return int(args.func(args) or 0)
    except PlannerInputError as error:
        print(f"planner {args.command}: error: {_in_flags(error, parser, args.command)}", file=sys.stderr)
        return 2
    except BrokenPipeError:
        # The reader went away (`planner ... | head`); nothing more to say.
        sys.stderr.close()
        return 0
    except FileNotFoundError as error:
        print(f"planner {args.command}: error: no such file: {error.filename}", file=sys.stderr)
        return 2
    except IsADirectoryError as error:
        print(f"planner {args.command}: error: expected a file, got a directory: {error.filename}", file=sys.stderr)
        return 2


class _Parser(argparse.ArgumentParser):
    """argparse, but a usage error is one line (the usage text is one ``--help`` away)."""

    def error(self, message: str):
        self.exit(2, f"{self.prog}: error: {message} (see {self.prog} --help)\n")


def _in_flags(error: PlannerInputError, parser: argparse.ArgumentParser, command: str) -> str:
    """The error's message, naming the flag the user typed rather than the maths parameter."""
    if error.parameter is None:
        return str(error)
    module = importlib.import_module(f"planner.cli.{command}")
    flag = getattr(module, "PARAMETER_FLAGS", {}).get(error.parameter)
    if flag is None:
        subparser = _subparser(parser, command)
        flag = next(
            (
                action.option_strings[-1]
                for action in subparser._actions
                if action.dest == error.parameter and action.option_strings
            ),
            None,
        )
    if flag is None:
        return str(error)
    return f"{flag} must be {error.expected}, got {error.value!r}"


def _subparser(parser: argparse.ArgumentParser, command: str) -> argparse.ArgumentParser:
    action = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return action.choices[command]


class _VersionAction(argparse.Action):
    """``--version``, looked up only when asked (importlib.metadata is slow to import)."""

    def __init__(self, option_strings, dest, **kwargs):
        super().__init__(option_strings, dest, nargs=0, default=argparse.SUPPRESS, help="show the version and exit")

    def __call__(self, parser, namespace, values, option_string=None):
        print(_version())
        parser.exit()


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return f"planner {version('planner')}"
    except PackageNotFoundError:
        return "planner (not installed)"


if __name__ == "__main__":
    sys.exit(main())
