"""``planner report``: re-run a book chapter on your inputs and keep it as one offline page."""

from __future__ import annotations

import argparse
import sys

from planner.cli.output import print_json
from planner.errors import PlannerInputError


def register(subparsers) -> None:
    """Add the ``report`` subcommand."""
    parser = subparsers.add_parser(
        "report",
        help="run a chapter on your inputs; write its notebook and one offline HTML page",
        description=(
            "Run book/CHAPTER.ipynb with papermill on your parameters, then write "
            "CHAPTER.ipynb (executed) and CHAPTER.html (one self-contained page that opens "
            "offline: charts, glued values, widgets) into --out. A relative *_path value is "
            "taken from the current directory (from the YAML file's folder in --params). "
            "Nothing is written unless the whole chapter runs; a failing cell exits 2 "
            "with its message."
        ),
    )
    parser.add_argument("chapter", metavar="CHAPTER", help="chapter name, e.g. loadtest_thresholds (see book/*.ipynb)")
    parser.add_argument(
        "--param",
        "-p",
        action="append",
        default=[],
        metavar="NAME=VALUE",
        help="set one parameter of the chapter's parameters cell (repeatable)",
    )
    parser.add_argument(
        "--params", metavar="FILE.yaml", help="a YAML mapping of parameters; --param values override it"
    )
    parser.add_argument("--out", metavar="DIR", help="output folder (not inside book/ and not an input's folder)")
    parser.add_argument("--list", action="store_true", help="list the chapter's parameters and exit")
    parser.add_argument("--quiet", action="store_true", help="no progress display")
    parser.add_argument("--json", action="store_true", help="print one JSON object when done")
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    # Imported here: papermill and the book toolchain are slow to import, and
    # other subcommands must start fast.
    from planner.workflows import report

    notebook = report.chapter_path(args.chapter)
    parameters = report.chapter_parameters(notebook)
    if args.list:
        for p in parameters.values():
            print(f"{p.name}: {p.type_name} = {p.default!r}  # {p.help}")
        return 0
    if not args.out:
        raise PlannerInputError("--out DIR is required: the folder to write the report into")
    values = report.resolve_parameters(parameters, args.param, args.params)
    out = report.check_output_dir(args.out, notebook.stem, report.input_paths(parameters, values))

    def log(line: str) -> None:
        if not args.quiet:
            print(f"planner report: {line}", file=sys.stderr)

    written = report.write_report(notebook.stem, values, out, progress=not args.quiet, log=log)
    if args.json:
        print_json({"notebook": str(written.notebook), "page": str(written.page), "parameters": written.parameters})
    else:
        print(f"wrote {written.notebook}")
        print(f"wrote {written.page}  (open it in a browser; it needs no network)")
    return 0
