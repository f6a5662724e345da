"""When a task fires: a standard 5-field crontab expression, or a fixed interval (`every 10m`).

Cron maths is cronsim's (it follows Debian cron: 0 and 7 are Sunday, day-of-month and day-of-week
are ORed when both are restricted, the DST quirks of cron). APScheduler 3 was not used: its
`from_crontab` reads weekday 0 as Monday (its issue #286, unfixable in 3.x) and ANDs the two day
fields, and its scheduler loop runs on wall time, which the engine's injected clock replaces.

Cron expressions are evaluated in the scheduler's time zone; intervals are counted from an anchor
(the task's first fire time, creation + interval), so they stay on the same grid across restarts.
An interval is elapsed time: a wall clock set back does not hold the next run back by the step (the
scheduler brings a next run more than one interval away back onto the grid, decision 466); cron times
are the wall clock's, so a clock set back an hour runs 09:00 when the clock says 09:00 again.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta, tzinfo
from typing import Literal

from cronsim import CronSim, CronSimError

from klaw.ascii_digits import digits
from klaw.errors import KlawError
from klaw.scheduling.zones import gap_around, offset_text, other_offset

ScheduleKind = Literal["cron", "every", "at"]
MIN_INTERVAL_SECONDS = 60
MAX_INTERVAL_SECONDS = 3650 * 86400
"""Ten years: longer is no schedule a person means, and is kept far from the dates
Python's datetime can hold (year 9999), which a task's next fire time is."""
_UNITS = {"d": 86400, "h": 3600, "m": 60, "s": 1}
_EVERY = re.compile(r"^(?:\d+[dhms])+$")
_EVERY_PART = re.compile(r"(\d+)([dhms])")
_CRON_HELP = "five fields: minute hour day-of-month month day-of-week, e.g. '0 8 * * 1-5' (08:00 on weekdays)"
_CRON_FIELDS = {
    "minute": (1, "0-59"),
    "hour": (2, "0-23"),
    "day-of-month": (3, "1-31 (a day the month has: no 30 February)"),
    "month": (4, "1-12 or jan-dec"),
    "day-of-week": (5, "0-7 (0 and 7 are Sunday) or sun-sat"),
}
_CRON_RANGES = "minute 0-59, hour 0-23, day-of-month 1-31, month 1-12, day-of-week 0-7 (0 and 7 are Sunday)"


class InvalidSchedule(KlawError, ValueError):
    """A cron expression or interval that cannot be used; the message says why and what works."""


@dataclass(frozen=True)
class TaskSchedule:
    kind: ScheduleKind
    expression: str  # the crontab expression, or the interval in seconds

    @classmethod
    def cron(cls, expression: str) -> TaskSchedule:
        text = " ".join(expression.split())
        if len(text.split(" ")) != 5:
            raise InvalidSchedule(f"invalid cron expression {expression!r}: expected {_CRON_HELP}")
        try:
            CronSim(text, datetime(2000, 1, 1, tzinfo=UTC))
        except CronSimError as exc:
            # CronSim names the field ("Bad minute"): said as klaw says it, with the field's place and range.
            field = str(exc).removeprefix("Bad ").strip()
            if field in _CRON_FIELDS:
                place, values = _CRON_FIELDS[field]
                value = text.split(" ")[place - 1]
                raise InvalidSchedule(
                    f"invalid cron expression {expression!r}: the {field} (field {place} of 5) is {value!r};"
                    f" it takes {values}, a list (1,15), a range (1-5) or a step (*/10); the form: {_CRON_HELP}"
                ) from None
            raise InvalidSchedule(
                f"invalid cron expression {expression!r}: {exc} (a field's values: {_CRON_RANGES});"
                f" the form: {_CRON_HELP}"
            ) from None
        return cls("cron", text)

    @classmethod
    def every(cls, text: str) -> TaskSchedule:
        """`90s`, `10m`, `2h`, `1d`, `1h30m`: at least one minute, at most ten years (3650d)."""
        compact = text.strip().lower().replace(" ", "")
        if not _EVERY.match(compact):
            raise InvalidSchedule(
                f"invalid interval {_clip(text)!r}: use a number and a unit (s, m, h, d), e.g. 10m or 1h30m"
            )
        parts = [(n.lstrip("0") or "0", unit) for n, unit in _EVERY_PART.findall(compact)]
        # A number longer than the longest interval has digits is over it: never converted (int() of
        # 5,000 digits is refused, and a huge interval overflowed datetime: an OverflowError traceback).
        too_long = any(len(n) > len(str(MAX_INTERVAL_SECONDS)) for n, _ in parts)
        seconds = MAX_INTERVAL_SECONDS + 1 if too_long else sum(int(n) * _UNITS[unit] for n, unit in parts)
        if seconds < MIN_INTERVAL_SECONDS:
            raise InvalidSchedule(f"invalid interval {text!r}: the shortest interval is {MIN_INTERVAL_SECONDS} seconds")
        if seconds > MAX_INTERVAL_SECONDS:
            raise InvalidSchedule(
                f"invalid interval {_clip(text)!r}: the longest interval is {MAX_INTERVAL_SECONDS // 86400}d"
                " (10 years); for a date once a year use cron, e.g. '0 9 14 3 *' (09:00 every 14 March)"
            )
        return cls("every", str(seconds))

    @classmethod
    def at(cls, text: str, zone: tzinfo, now: datetime) -> TaskSchedule:
        """Once, at `text` ("2030-12-01 17:00", read in `zone`, or ISO 8601 with its own offset), after `now`:
        a one-off task, which runs once and is then done (newcomer23: a yearly cron stood in for it, decision 526).
        The refusal's example is tomorrow at 17:00: a fixed date would itself be refused once past (536)."""
        try:
            moment = datetime.fromisoformat(" ".join(text.split()))
        except ValueError:
            day = f"{(now.astimezone(zone) + timedelta(days=1)):%Y-%m-%d}"
            raise InvalidSchedule(
                f"invalid time {_clip(text)!r}: give a date and time as YYYY-MM-DD HH:MM, e.g. '{day} 17:00'"
                f" (the scheduler's time zone), or with an offset, '{day}T17:00+01:00'"
            ) from None
        if moment.tzinfo is None and (gap := gap_around(moment.replace(second=0, microsecond=0), zone)):
            before, after = gap
            jump = before + timedelta(minutes=1)
            to = f"{after:%H:%M}" if after.date() == jump.date() else f"{after:%Y-%m-%d %H:%M}"
            raise InvalidSchedule(
                f"{_clip(text)!r} is no time in {zone}: its clocks go from {jump:%Y-%m-%d %H:%M} straight to {to};"
                f" give '{before:%Y-%m-%d %H:%M}' or '{after:%Y-%m-%d %H:%M}'"
            )
        moment = (moment.replace(tzinfo=zone) if moment.tzinfo is None else moment).astimezone(UTC)
        if moment <= now:
            raise InvalidSchedule(
                f"{_clip(text)!r} is {moment.astimezone(zone):%Y-%m-%d %H:%M} ({zone}), which has passed; a one-off"
                " time is in the future"
            )
        if moment - now > timedelta(seconds=MAX_INTERVAL_SECONDS):
            raise InvalidSchedule(f"{_clip(text)!r} is more than ten years away; give a nearer time")
        return cls("at", str(int(moment.timestamp())))

    @classmethod
    def stored(cls, kind: str, expression: str) -> TaskSchedule:
        """A schedule as scheduler.db keeps it (validated again: the file may have been edited)."""
        if kind == "cron":
            return cls.cron(expression)
        if kind == "every" and digits(expression):
            return cls.every(f"{expression}s")
        if kind == "at" and digits(expression) and len(expression) <= 11:
            return cls("at", expression)
        raise InvalidSchedule(f"unknown schedule {kind!r} {expression!r}")

    @property
    def interval(self) -> timedelta:
        if self.kind != "every":
            raise ValueError("a cron schedule has no fixed interval")
        return timedelta(seconds=int(self.expression))

    @property
    def moment(self) -> datetime:
        """A one-off task's time (UTC)."""
        if self.kind != "at":
            raise ValueError("only a one-off schedule has one time")
        return datetime.fromtimestamp(int(self.expression), UTC)

    def describe(self, zone: tzinfo = UTC) -> str:
        if self.kind == "cron":
            return f"cron '{self.expression}'"
        if self.kind == "at":
            local = self.moment.astimezone(zone)
            if (other := other_offset(local)) is None:
                return f"once at {local:%Y-%m-%d %H:%M}"
            which = "first" if local.fold == 0 else "second"  # a time shown twice: which one (decision 542)
            return (
                f"once at {local:%Y-%m-%d %H:%M}{offset_text(local)} (the {which} {local:%H:%M} of the night the"
                f" clocks go back; the other is '{local:%Y-%m-%dT%H:%M}{other}')"
            )
        return f"every {format_interval(int(self.expression))}"

    def first_fire(self, created_at: datetime, zone: tzinfo) -> datetime | None:
        """The first fire time of a task created at `created_at`."""
        if self.kind == "every":
            return created_at + self.interval
        return self.next_after(created_at, anchor=created_at, zone=zone)

    def next_after(self, moment: datetime, *, anchor: datetime, zone: tzinfo) -> datetime | None:
        """The first fire time strictly after `moment` (UTC); None if there is none in 50 years.

        `anchor` is the task's creation time: interval tasks fire at anchor + k × interval (k ≥ 1); the grid
        goes on before it for a wall clock set back past the creation (the first point after `moment`, so
        an interval is never waited for more than once: decision 466).
        """
        if self.kind == "every":
            interval = self.interval
            first = anchor + interval
            return first + ((moment - first) // interval + 1) * interval
        if self.kind == "at":  # once: none after it (done)
            return self.moment if self.moment > moment else None
        try:
            fire = next(CronSim(self.expression, moment.astimezone(zone)))
        except StopIteration:
            return None
        return fire.astimezone(UTC)

    def runs_per_day(self, start: datetime, zone: tzinfo, *, at_most: int) -> int:
        """How many times it fires in the 24 hours after `start`, counted up to `at_most` + 1 (enough to
        tell a schedule over a daily cap; `* * * * *` alone is 1440)."""
        if self.kind == "every":
            return min(-(-86_400 // int(self.expression)), at_most + 1)
        end = start + timedelta(days=1)
        if self.kind == "at":
            return int(start <= self.moment <= end)
        count = 0
        for fire in CronSim(self.expression, start.astimezone(zone)):
            if fire > end or count > at_most:
                break
            count += 1
        return count

    def latest_at_or_before(self, moment: datetime, *, anchor: datetime, zone: tzinfo) -> datetime | None:
        """The last fire time at or before `moment` (UTC): how late a missed task really is."""
        if self.kind == "every":
            interval = self.interval
            first = anchor + interval
            if moment < first:
                return None
            return first + ((moment - first) // interval) * interval
        if self.kind == "at":
            return self.moment if self.moment <= moment else None
        # cronsim's reverse iteration starts one second before its start: start a second after `moment`.
        start = moment.replace(microsecond=0) + timedelta(seconds=1)
        try:
            fire = next(CronSim(self.expression, start.astimezone(zone), reverse=True))
        except StopIteration:
            return None
        return fire.astimezone(UTC)


def _clip(text: str) -> str:
    """An interval as the error quotes it: a 5,000-digit one is not repeated whole."""
    return text if len(text) <= 40 else f"{text[:37]}..."


def format_interval(seconds: int) -> str:
    """600 → '10m', 5400 → '1h30m'."""
    parts = []
    for unit, size in _UNITS.items():
        count, seconds = divmod(seconds, size)
        if count:
            parts.append(f"{count}{unit}")
    return "".join(parts) or "0s"


def other_runs(
    tasks: Iterable[tuple[str, TaskSchedule]], name: str, start: datetime, zone: tzinfo, *, cap: int
) -> tuple[int, int]:
    """The runs a day of the tasks other than `name` (each at most `cap`) and how many they are, for
    `day_share_warning`'s sum."""
    counts = [min(schedule.runs_per_day(start, zone, at_most=cap), cap) for other, schedule in tasks if other != name]
    return sum(counts), sum(1 for count in counts if count)  # a one-off task done, or not today, is not named


def day_share_warning(runs: int, max_runs_per_day: int, *, others: int = 0, other_tasks: int = 0) -> str | None:
    """What to say when all tasks together take more than half of `scheduler.maxRunsPerDay` (newcomer22: `--every
    1m` is 1440 runs, all of the default, after which every `schedule_add` the agent tries is refused), or None.
    `runs` is this task's (`TaskSchedule.runs_per_day`'s count, at most the cap + 1: "1440+"), `others` the sum of
    the `other_tasks` tasks already there, each at most the cap: two `--every 1m` tasks each warned 100 %, never
    the 200 % they take together (newcomer23, decision 526). Said by `klaw schedule add` and in `schedule_add`'s
    answer; the task is kept either way (decision 513)."""
    total = runs + others
    if max_runs_per_day <= 0 or total * 2 <= max_runs_per_day:
        return None
    cause = (
        "other tasks' runs are skipped once the day's runs are used and the agent cannot add more; give it a longer"
        " interval"
    )
    if others <= 0:
        return (
            f"this task runs {_count(runs, max_runs_per_day)} times a day, {_share(runs, max_runs_per_day)} % of the"
            f" {max_runs_per_day} runs all tasks may start in a day (scheduler.maxRunsPerDay): {cause}, or raise"
            " scheduler.maxRunsPerDay in engine.yaml"
        )
    together = min(runs, max_runs_per_day) + others
    over = "over the cap, so some runs are skipped every day" if together > max_runs_per_day else "most of them"
    tasks = "task" if other_tasks == 1 else "tasks"
    return (
        f"this task runs {_count(runs, max_runs_per_day)} times a day and the other {other_tasks} {tasks} {others}:"
        f" together {together} times a day, {round(together * 100 / max_runs_per_day)} % of the {max_runs_per_day}"
        f" runs all tasks may start in a day (scheduler.maxRunsPerDay), {over}; {cause}, remove a task (`klaw"
        " schedule list` shows them), or raise scheduler.maxRunsPerDay in engine.yaml"
    )


def _count(runs: int, cap: int) -> str:
    """A count `runs_per_day` stopped at the cap + 1: "1440+"."""
    return f"{cap}+" if runs > cap else str(runs)


def _share(runs: int, cap: int) -> int:
    """Runs as a percentage of scheduler.maxRunsPerDay, a count past the cap read as the cap."""
    return round(min(runs, cap) * 100 / cap)
