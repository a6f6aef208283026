"""Read published cold starts (``data/cold_starts.yaml``): each case's source, kind, phases and figures.

The file holds one list, ``cases``; each case is a mapping::

    - id: kaito-2325                 # unique, used to pick a case
      title: "kaito issue 2325: ..."
      url: https://github.com/...    # the source; ``also:`` lists more
      kind: measurement              # see KINDS
      runs: 1                        # measurements only: how many runs the figures come from
      setup: "..."                   # what was measured, in the source's terms
      phases:                        # measurements only, in the source's order
        - {name: GPU node provisioning, duration_s: 284, counts_as: provision_s}
      figures: {total_s: 966}        # named numbers from the source

Each phase counts toward one of the planner's phases
(:class:`planner.dynamics.cold_start.ColdStartPhases`), so a case gives the
model's phases by summing (:meth:`ColdStartCase.model_phases`). A bad file is a
:class:`~planner.errors.PlannerInputError` naming the file, the case and the key.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

import yaml

from planner.dynamics.cold_start import ColdStartPhases
from planner.errors import PlannerInputError

__all__ = ["KINDS", "MODEL_PHASES", "ColdStartCase", "MeasuredPhase", "cold_start_case", "read_cold_start_cases"]

KINDS = ("measurement", "user report", "estimate", "code default", "simulator issue", "design proposal")
"""What a case's figures are: a measurement is timed by its author; a user report is what a user saw."""

MODEL_PHASES = ("provision_s", "node_init_s", "image_pull_s", "weights_load_s", "warmup_s")
"""The :class:`~planner.dynamics.cold_start.ColdStartPhases` fields a measured phase may count toward."""

_CASE_KEYS = {"id", "title", "url", "also", "kind", "runs", "setup", "phases", "figures"}
_PHASE_KEYS = {"name", "duration_s", "counts_as"}


@dataclass(frozen=True)
class MeasuredPhase:
    """One phase as a source measured it.

    Attributes
    ----------
    name : str
        The source's name for it.
    duration_s : float
        [s]
    counts_as : str
        The planner phase it belongs to, one of :data:`MODEL_PHASES`.
    """

    name: str
    duration_s: float
    counts_as: str


@dataclass(frozen=True)
class ColdStartCase:
    """One published case.

    Attributes
    ----------
    id, title, url, kind, setup : str
        As in the file; ``kind`` is one of :data:`KINDS`.
    also : tuple of str
        More sources (a pull request after its issue).
    runs : int or None
        For a measurement, how many runs its figures come from.
    phases : tuple of MeasuredPhase
        In the source's order; empty unless a measurement lists them.
    figures : tuple of (str, float)
        Named numbers from the source.
    file : str
        The file the case was read from.
    source : str
        The file and the case, for messages: ``data/cold_starts.yaml: cases[0] (kaito-2325)``.
    """

    id: str
    title: str
    url: str
    kind: str
    setup: str
    also: tuple[str, ...]
    runs: int | None
    phases: tuple[MeasuredPhase, ...]
    figures: tuple[tuple[str, float], ...]
    file: str
    source: str

    def figure(self, name: str) -> float:
        """The figure ``name``; a missing one is an error naming the file, the case and the key."""
        for key, value in self.figures:
            if key == name:
                return value
        known = ", ".join(key for key, _ in self.figures) or "none"
        raise PlannerInputError(f"{self.source}: figures.{name}: not in this case (its figures: {known})")

    def model_phases(self) -> ColdStartPhases:
        """The planner's phases: each measured phase added to the one it counts toward; 0 where none does.

        Raises
        ------
        PlannerInputError
            For a case without phases.
        """
        if not self.phases:
            raise PlannerInputError(f"{self.source}: phases: this {self.kind} lists no phases")
        totals = dict.fromkeys(MODEL_PHASES, 0.0)
        for phase in self.phases:
            totals[phase.counts_as] += phase.duration_s
        return ColdStartPhases(**totals)


def read_cold_start_cases(path: str | Path) -> tuple[ColdStartCase, ...]:
    """Every case in ``path``, in file order, checked.

    Raises
    ------
    PlannerInputError
        A missing file, invalid YAML, an unknown key, a missing or mistyped
        value, a repeated id, an unknown kind or planner phase, or phases that
        do not add up to ``figures.total_s``; the message names the file, the
        case and the key.
    """
    path = Path(path)
    if not path.is_file():
        raise PlannerInputError(f"{path}: no such file (the published cold starts)")
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
    except yaml.YAMLError as error:
        mark = getattr(error, "problem_mark", None)
        where = f" at line {mark.line + 1}" if mark is not None else ""
        raise PlannerInputError(f"{path}: not valid YAML{where}") from None
    if not isinstance(data, Mapping) or not isinstance(data.get("cases"), list) or not data["cases"]:
        raise PlannerInputError(f"{path}: expected a mapping with a non-empty list 'cases'")
    unknown = set(data) - {"cases"}
    if unknown:
        raise PlannerInputError(f"{path}: unknown key {sorted(unknown)[0]!r} (expected only 'cases')")
    cases: list[ColdStartCase] = []
    for index, entry in enumerate(data["cases"]):
        case = _case(path, index, entry)
        if any(case.id == earlier.id for earlier in cases):
            raise PlannerInputError(f"{case.source}: id: {case.id!r} is used by an earlier case")
        cases.append(case)
    return tuple(cases)


def cold_start_case(cases: tuple[ColdStartCase, ...], case_id: str) -> ColdStartCase:
    """The case called ``case_id``; an unknown id is an error that lists the file's ids."""
    for case in cases:
        if case.id == case_id:
            return case
    where = cases[0].file if cases else "cold starts"
    known = ", ".join(case.id for case in cases)
    raise PlannerInputError(f"{where}: no case {case_id!r} (cases: {known})")


def _case(path: Path, index: int, entry) -> ColdStartCase:
    where = f"{path}: cases[{index}]"
    if not isinstance(entry, Mapping):
        raise PlannerInputError(f"{where}: expected a mapping, got {type(entry).__name__}")
    case_id = entry.get("id")
    if isinstance(case_id, str) and case_id:
        where = f"{where} ({case_id})"
    for key in entry:
        if key not in _CASE_KEYS:
            raise PlannerInputError(f"{where}: unknown key {key!r} (known: {', '.join(sorted(_CASE_KEYS))})")
    case_id, title, kind = (_text(where, entry, key) for key in ("id", "title", "kind"))
    url = _url(where, "url", entry.get("url"))
    also = entry.get("also", [])
    if not isinstance(also, list):
        raise PlannerInputError(f"{where}: also: expected a list of URLs, got {also!r}")
    also_urls = tuple(_url(where, f"also[{i}]", value) for i, value in enumerate(also))
    if kind not in KINDS:
        raise PlannerInputError(f"{where}: kind: expected one of {', '.join(KINDS)}, got {kind!r}")
    setup = entry.get("setup", "")
    if not isinstance(setup, str):
        raise PlannerInputError(f"{where}: setup: expected text, got {setup!r}")
    runs = entry.get("runs")
    if runs is not None and (isinstance(runs, bool) or not isinstance(runs, int) or runs < 1):
        raise PlannerInputError(f"{where}: runs: expected a whole number >= 1, got {runs!r}")
    phases = _phases(where, entry.get("phases", []))
    if phases and kind != "measurement":
        raise PlannerInputError(f"{where}: phases: only a measurement lists phases, and this is a {kind}")
    figures = _figures(where, entry.get("figures"))
    case = ColdStartCase(case_id, title, url, kind, setup.strip(), also_urls, runs, phases, figures, str(path), where)
    total = dict(figures).get("total_s")
    if phases and total is not None:
        added = math.fsum(phase.duration_s for phase in phases)
        if not math.isclose(added, total, abs_tol=1e-9):
            raise PlannerInputError(f"{where}: phases add up to {added:g} s, but figures.total_s is {total:g} s")
    return case


def _text(where: str, entry: Mapping, key: str, *, label: str | None = None) -> str:
    value = entry.get(key)
    if not isinstance(value, str) or not value.strip():
        raise PlannerInputError(f"{where}: {label or key}: expected non-empty text, got {value!r}")
    return value.strip()


def _url(where: str, key: str, value) -> str:
    if not isinstance(value, str) or not value.startswith("https://"):
        raise PlannerInputError(f"{where}: {key}: expected an https:// URL, got {value!r}")
    return value


def _number(where: str, key: str, value) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value) or value < 0:
        raise PlannerInputError(f"{where}: {key}: expected a number >= 0, got {value!r}")
    return float(value)


def _phases(where: str, value) -> tuple[MeasuredPhase, ...]:
    if not isinstance(value, list):
        raise PlannerInputError(f"{where}: phases: expected a list of phases, got {value!r}")
    phases = []
    for i, item in enumerate(value):
        key = f"phases[{i}]"
        if not isinstance(item, Mapping):
            raise PlannerInputError(f"{where}: {key}: expected a mapping with name, duration_s and counts_as")
        for name in item:
            if name not in _PHASE_KEYS:
                raise PlannerInputError(
                    f"{where}: {key}: unknown key {name!r} (known: {', '.join(sorted(_PHASE_KEYS))})"
                )
        name = _text(where, item, "name", label=f"{key}.name")
        duration_s = _number(where, f"{key}.duration_s", item.get("duration_s"))
        counts_as = item.get("counts_as")
        if counts_as not in MODEL_PHASES:
            raise PlannerInputError(
                f"{where}: {key}.counts_as: expected one of {', '.join(MODEL_PHASES)}, got {counts_as!r}"
            )
        phases.append(MeasuredPhase(name, duration_s, counts_as))
    return tuple(phases)


def _figures(where: str, value) -> tuple[tuple[str, float], ...]:
    if value is None:
        raise PlannerInputError(f"{where}: figures: missing; give the source's numbers, or {{}} if it has none")
    if not isinstance(value, Mapping):
        raise PlannerInputError(f"{where}: figures: expected a mapping of name: number, got {value!r}")
    figures = []
    for name, number in value.items():
        if not isinstance(name, str) or not name.endswith(("_s", "_count")):
            raise PlannerInputError(f"{where}: figures.{name}: a figure's name must end in _s or _count")
        figures.append((name, _number(where, f"figures.{name}", number)))
    return tuple(figures)
