"""The ``cron_schedule`` module parses cron schedules and finds their next firing, as KEDA's cron scaler does.

KEDA's cron scaler (``pkg/scalers/cron_scaler.go``) parses ``start`` and
``end`` with ``github.com/robfig/cron/v3`` (``NewParser(Minute | Hour | Dom |
Month | Dow)``, v3.0.1) and asks each schedule for its next firing after now.
This module ports the parts it uses, by function name:

* ``Parser.Parse`` and ``normalizeFields`` (``parser.go``): exactly five
  whitespace-separated fields (minute, hour, day of month, month, day of
  week); an optional ``TZ=Zone`` or ``CRON_TZ=Zone`` prefix; no ``@daily``
  style descriptors (KEDA's parser does not enable them);
* ``getField`` / ``getRange``: comma lists (empty items dropped), ``a-b``
  ranges, ``/step`` (``N/step`` means ``N-max/step``), ``*`` and ``?``;
  month names ``jan``-``dec`` and day names ``sun``-``sat`` in any case;
  day of week 0-6 only (``7`` is out of range, unlike Vixie cron); numbers
  as Go's ``strconv.Atoi`` reads them (an optional sign, decimal digits);
* ``SpecSchedule.Next`` (``spec.go``): the first firing strictly after the
  given instant, searched field by field in the schedule's zone, with Go's
  wall-clock arithmetic (``time.Date``, ``AddDate``, whole-hour steps across
  a daylight-saving change), so a firing in a skipped hour moves as robfig's
  does and one in a repeated hour fires twice; no firing within five years
  is ``None`` (Go's zero time);
* Go's ``time.LoadLocation`` (:func:`load_location`): ``""`` and ``UTC`` are
  UTC; ``Local`` is the KEDA operator's own zone, UTC in its container image
  unless the pod sets ``TZ`` (read here as UTC); any other name is looked up
  in the IANA database (``zoneinfo``, from the pinned ``tzdata`` package
  where the system has none).

Why not a cron library from PyPI: ``croniter`` and ``cronsim`` accept what
robfig refuses (``7`` for Sunday, ``L``, ``#``, ``@daily``) and step through
daylight-saving changes their own way, so a schedule would be valid here and
refused by KEDA, or fire at another instant. The port is small and follows
robfig's code line by line.

Instants are UTC epoch seconds; the functions are pure.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from datetime import UTC, date, datetime, tzinfo
from functools import lru_cache
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from planner.errors import PlannerInputError

__all__ = [
    "CronSchedule",
    "CronSyntaxError",
    "load_location",
    "next_fire_s",
    "parse_cron_schedule",
    "timezone_problem",
]

STAR_BIT = 1 << 63
"""Set on a field written ``*`` or ``?`` (robfig's ``starBit``): it changes how day of month and week combine."""

_SECONDS = (0, 59, None)
_MINUTES = (0, 59, None)
_HOURS = (0, 23, None)
_DOM = (1, 31, None)
_MONTHS = (
    1,
    12,
    {"jan": 1, "feb": 2, "mar": 3, "apr": 4, "may": 5, "jun": 6, "jul": 7, "aug": 8, "sep": 9, "oct": 10, "nov": 11,
     "dec": 12},
)  # fmt: skip
_DOW = (0, 6, {"sun": 0, "mon": 1, "tue": 2, "wed": 3, "thu": 4, "fri": 5, "sat": 6})
_ATOI = re.compile(r"[+-]?[0-9]+")
_EPOCH_ORDINAL = date(1970, 1, 1).toordinal()
_YEAR_LIMIT = 5  # Next gives up after five years


class CronSyntaxError(PlannerInputError):
    """A schedule robfig/cron v3 refuses; the message is robfig's own."""


@dataclass(frozen=True)
class CronSchedule:
    """A parsed schedule: one bit per allowed value of each field (robfig's ``SpecSchedule``).

    Attributes
    ----------
    second, minute, hour, dom, month, dow : int
        Bit sets; bit ``v`` set when value ``v`` fires, :data:`STAR_BIT` when the field was ``*`` or ``?``.
    location : str or None
        The zone of a ``TZ=`` / ``CRON_TZ=`` prefix; ``None``: the zone of the instant asked about.
    spec : str
        The schedule as written.
    """

    second: int
    minute: int
    hour: int
    dom: int
    month: int
    dow: int
    location: str | None = None
    spec: str = ""


def parse_cron_schedule(spec: str, *, seconds: bool = False) -> CronSchedule:
    """Parse ``spec`` as KEDA's cron scaler does (robfig ``NewParser(Minute | Hour | Dom | Month | Dow)``).

    Parameters
    ----------
    spec : str
        Five fields ``minute hour day-of-month month day-of-week``, optionally after ``TZ=Zone``.
    seconds : bool, optional
        Parse robfig's ``Second | Minute | Hour | Dom | Month | DowOptional`` form instead (a leading
        seconds field, day of week optional), the form robfig's own tests are written in.

    Raises
    ------
    CronSyntaxError
        With robfig's message, e.g. ``expected exactly 5 fields, found 6: [0 0 8 * * *]``.
    """
    if len(spec) == 0:
        raise CronSyntaxError("empty spec string")
    location = None
    if spec.startswith(("TZ=", "CRON_TZ=")):
        space = spec.find(" ")
        if space < 0:
            # Go slices spec[eq+1:-1] and panics; KEDA's typed config recovers it as an error.
            raise CronSyntaxError(f"no schedule after the time zone in {spec!r}")
        name = spec[spec.find("=") + 1 : space]
        problem = timezone_problem(name)
        if problem is not None:
            raise CronSyntaxError(f"provided bad location {name}: {problem}")
        location = name
        spec = spec[space:].strip()
    if spec.startswith("@"):
        raise CronSyntaxError(f"parser does not accept descriptors: {spec}")
    fields = spec.split()
    if seconds:
        if not 5 <= len(fields) <= 6:
            raise CronSyntaxError(f"expected 5 to 6 fields, found {len(fields)}: [{' '.join(fields)}]")
        if len(fields) == 5:
            fields.append("*")
    else:
        if len(fields) != 5:
            raise CronSyntaxError(f"expected exactly 5 fields, found {len(fields)}: [{' '.join(fields)}]")
        fields = ["0", *fields]
    bounds = (_SECONDS, _MINUTES, _HOURS, _DOM, _MONTHS, _DOW)
    second, minute, hour, dom, month, dow = (_field(text, limits) for text, limits in zip(fields, bounds, strict=True))
    return CronSchedule(second, minute, hour, dom, month, dow, location=location, spec=spec)


def _field(field: str, limits) -> int:
    """``getField``: the OR of each comma-separated range (``strings.FieldsFunc`` drops empty items)."""
    bits = 0
    for expr in (part for part in field.split(",") if part):
        bits |= _range(expr, limits)
    return bits


def _range(expr: str, limits) -> int:
    """``getRange``: ``number | number "-" number [ "/" number ]``, or ``*`` / ``?``."""
    low, high, names = limits
    range_and_step = expr.split("/")
    low_and_high = range_and_step[0].split("-")
    single = len(low_and_high) == 1
    extra = 0
    if low_and_high[0] in ("*", "?"):
        start, end, extra = low, high, STAR_BIT
    else:
        start = _int_or_name(low_and_high[0], names)
        if len(low_and_high) == 1:
            end = start
        elif len(low_and_high) == 2:
            end = _int_or_name(low_and_high[1], names)
        else:
            raise CronSyntaxError(f"too many hyphens: {expr}")
    if len(range_and_step) == 1:
        step = 1
    elif len(range_and_step) == 2:
        step = _atoi(range_and_step[1])
        if single:  # "N/step" means "N-max/step"
            end = high
        if step > 1:
            extra = 0
    else:
        raise CronSyntaxError(f"too many slashes: {expr}")
    if start < low:
        raise CronSyntaxError(f"beginning of range ({start}) below minimum ({low}): {expr}")
    if end > high:
        raise CronSyntaxError(f"end of range ({end}) above maximum ({high}): {expr}")
    if start > end:
        raise CronSyntaxError(f"beginning of range ({start}) beyond end of range ({end}): {expr}")
    if step == 0:
        raise CronSyntaxError(f"step of range should be a positive number: {expr}")
    bits = 0
    for value in range(start, end + 1, step):
        bits |= 1 << value
    return bits | extra


def _int_or_name(expr: str, names) -> int:
    if names is not None and expr.lower() in names:
        return names[expr.lower()]
    return _atoi(expr)


def _atoi(expr: str) -> int:
    """``mustParseInt``: Go's ``strconv.Atoi``, then no negatives."""
    if not _ATOI.fullmatch(expr):
        raise CronSyntaxError(f'failed to parse int from {expr}: strconv.Atoi: parsing "{expr}": invalid syntax')
    number = int(expr)
    if number < 0:
        raise CronSyntaxError(f"negative number ({number}) not allowed: {expr}")
    return number


def timezone_problem(name: str) -> str | None:
    """Why Go's ``time.LoadLocation(name)`` fails, or ``None`` when it loads.

    Examples
    --------
    >>> timezone_problem("Europe/Dublin") is None, timezone_problem("Europe/Dublyn")
    (True, 'unknown time zone Europe/Dublyn')
    """
    try:
        load_location(name)
    except PlannerInputError as error:
        return str(error)
    return None


def load_location(name: str) -> tzinfo:
    """The zone Go's ``time.LoadLocation(name)`` returns; ``Local`` is read as UTC (KEDA's image sets no zone).

    Raises
    ------
    PlannerInputError
        ``unknown time zone NAME`` (Go's message), or ``time: invalid location name``.
    """
    if name in ("", "UTC", "Local"):
        return UTC
    if ".." in name or name[0] in "/\\":
        raise PlannerInputError("time: invalid location name")
    return _zone(name)


@lru_cache(maxsize=256)
def _zone(name: str) -> tzinfo:
    try:
        return ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError, OSError):
        raise PlannerInputError(f"unknown time zone {name}") from None


def next_fire_s(schedule: CronSchedule, now_s: float, zone: tzinfo) -> int | None:
    """The first firing of ``schedule`` strictly after ``now_s`` (robfig ``SpecSchedule.Next``).

    Parameters
    ----------
    schedule : CronSchedule
    now_s : float
        The instant to search from, UTC epoch. [s]
    zone : tzinfo
        The zone of that instant (KEDA passes the trigger's ``timezone``); a ``TZ=`` prefix overrides it.

    Returns
    -------
    int or None
        UTC epoch seconds, or ``None`` when nothing fires within five years. [s]
    """
    loc = zone if schedule.location is None else load_location(schedule.location)
    t = math.floor(now_s) + 1  # "the upcoming second"
    added = False
    year_limit = _local(t, loc).year + _YEAR_LIMIT
    while True:  # robfig's WRAP label
        lt = _local(t, loc)
        if lt.year > year_limit:
            return None
        wrapped = False
        while not (1 << lt.month) & schedule.month:
            if not added:
                added = True
                t = _go_date(lt.year, lt.month, 1, 0, 0, 0, loc)
                lt = _local(t, loc)
            t = _go_date(lt.year, lt.month + 1, lt.day, lt.hour, lt.minute, lt.second, loc)  # AddDate(0, 1, 0)
            lt = _local(t, loc)
            if lt.month == 1:
                wrapped = True
                break
        if wrapped:
            continue
        while not _day_matches(schedule, lt):
            if not added:
                added = True
                t = _go_date(lt.year, lt.month, lt.day, 0, 0, 0, loc)
                lt = _local(t, loc)
            t = _go_date(lt.year, lt.month, lt.day + 1, lt.hour, lt.minute, lt.second, loc)  # AddDate(0, 0, 1)
            lt = _local(t, loc)
            # Midnight may not exist on a daylight-saving day: back to the hour robfig aims at.
            if lt.hour != 0:
                t += (24 - lt.hour) * 3600 if lt.hour > 12 else -lt.hour * 3600
                lt = _local(t, loc)
            if lt.day == 1:
                wrapped = True
                break
        if wrapped:
            continue
        if not (1 << lt.hour) & schedule.hour:
            if not added:
                added = True
                t = _go_date(lt.year, lt.month, lt.day, lt.hour, 0, 0, loc)
            t, lt, wrapped = _step_to_match(t, lt.hour, loc, schedule.hour, 3600, 24)
            if wrapped:
                continue
        if not (1 << lt.minute) & schedule.minute:
            if not added:
                added = True
                t -= t % 60  # Truncate(time.Minute), on absolute time
            t, lt, wrapped = _step_to_match(t, lt.minute, loc, schedule.minute, 60, 60)
            if wrapped:
                continue
        if not (1 << lt.second) & schedule.second:
            added = True  # Truncate(time.Second) changes nothing: t is whole seconds
            t, lt, wrapped = _step_to_match(t, lt.second, loc, schedule.second, 1, 60)
            if wrapped:
                continue
        return t


_FIELD = {3600: "hour", 60: "minute", 1: "second"}


def _step_to_match(t: int, value: int, loc: tzinfo, bits: int, step_s: int, wrap: int) -> tuple[int, datetime, bool]:
    """robfig's loop over one clock field: add ``step_s`` to ``t`` until the field's value is in ``bits`` or wraps to 0.

    ``value`` is the field at ``t`` (the loop entered because it is not in ``bits``).
    While the zone's offset holds, each step moves the field on by one, so the loop
    stops at the next value in ``bits`` or at the wrap, and one jump lands where
    its steps would. An offset change within the jump (at most one: no zone
    changes twice within a day) either leaves every step's field as it was
    (whole minutes on the second field, whole hours on the minute field, +30 min on the hour field)
    or makes the field at the landing differ from the one aimed at; in that
    case the loop is stepped, as robfig does.

    Returns
    -------
    tuple of (int, datetime, bool)
        The instant the loop stops at, its wall time in ``loc``, and whether the field wrapped to 0.
    """
    field = _FIELD[step_s]
    above = (bits & ((1 << wrap) - 1)) >> (value + 1)
    target = value + (above & -above).bit_length() if above else wrap
    landed_t = t + (target - value) * step_s
    landed = _local(landed_t, loc)
    if getattr(landed, field) == target % wrap:
        return landed_t, landed, target == wrap
    while True:
        t += step_s
        lt = _local(t, loc)
        if getattr(lt, field) == 0:
            return t, lt, True
        if (1 << getattr(lt, field)) & bits:
            return t, lt, False


def _local(t: int, loc: tzinfo) -> datetime:
    return datetime.fromtimestamp(t, loc)


def _day_matches(schedule: CronSchedule, lt: datetime) -> bool:
    """``dayMatches``: both must match when either field is a star, else either."""
    dom = bool((1 << lt.day) & schedule.dom)
    dow = bool((1 << lt.isoweekday() % 7) & schedule.dow)  # Go: Sunday is 0
    if schedule.dom & STAR_BIT or schedule.dow & STAR_BIT:
        return dom and dow
    return dom or dow


def _offset_s(t: int, loc: tzinfo) -> int:
    offset = datetime.fromtimestamp(t, loc).utcoffset()
    return 0 if offset is None else int(offset.total_seconds())


def _go_date(year: int, month: int, day: int, hour: int, minute: int, second: int, loc: tzinfo) -> int:
    """Go's ``time.Date``: out-of-range fields carry over; a wall time a zone skips or repeats is
    resolved with the offset Go's lookup finds (a skipped 02:30 becomes 01:30 standard time)."""
    year += (month - 1) // 12
    month = (month - 1) % 12 + 1
    days = date(year, month, 1).toordinal() - _EPOCH_ORDINAL + day - 1
    wall = days * 86400 + hour * 3600 + minute * 60 + second
    # Go looks up the offset in force at `wall` read as UTC, and again at the instant that gives.
    return wall - _offset_s(wall - _offset_s(wall, loc), loc)
