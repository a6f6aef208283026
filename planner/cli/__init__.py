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
_COMMANDS: tuple[str, ...] = ("replicas", "grace", "kv", "knee", "metrics", "hpa", "report")


def build_parser() -> argparse.ArgumentParser:
    """Return the top-level parser with every subcommand registered."""
    parser = argparse.ArgumentParser(
        prog="planner",
        description="Capacity planning for autoscaling LLM inference.",
    )
    parser.add_argument("--version", action="version", version=_version())
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    for name in _COMMANDS:
        importlib.import_module(f"planner.cli.{name}").register(subparsers)
    return parser


def main(argv: list[str] | None = None) -> int:
    """Run the command line and return its exit status."""
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        return int(args.func(args) or 0)
    except PlannerInputError as error:
        print(f"planner {args.command}: error: {error}", file=sys.stderr)
        return 2
    except FileNotFoundError as error:
        print(f"planner {args.command}: error: no such file: {error.filename}", file=sys.stderr)
        return 2
    except IsADirectoryError as error:
        print(f"planner {args.command}: error: expected a file, got a directory: {error.filename}",
              file=sys.stderr)
        return 2


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return f"planner {version('planner')}"
    except PackageNotFoundError:
        return "planner (not installed)"


if __name__ == "__main__":
    sys.exit(main())
