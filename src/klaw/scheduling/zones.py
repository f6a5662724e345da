"""The time zone cron expressions are read in: `scheduler.timezone`, else the host's own zone.

"0 8 * * *" should mean eight in the morning where the person lives, so the default is the host's
IANA zone (from `TZ`, then the /etc/localtime link, then /etc/timezone), which keeps DST right; a
fixed UTC offset would not. UTC when none can be found.
"""

from __future__ import annotations

import contextlib
import os
from datetime import UTC, datetime, timedelta, tzinfo
from pathlib import Path
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError


def scheduler_zone(name: str | None) -> tzinfo:
    """The configured zone (validated by the config), or the host's."""
    if name:
        return ZoneInfo(name)
    for candidate in _host_zone_names():
        try:
            return ZoneInfo(candidate)
        except (ZoneInfoNotFoundError, ValueError):
            continue
    return UTC


def _host_zone_names() -> list[str]:
    names = []
    if tz := os.environ.get("TZ", "").lstrip(":"):
        names.append(tz)
    try:
        target = os.readlink("/etc/localtime")
    except OSError:
        target = ""
    if "zoneinfo/" in target:
        names.append(target.split("zoneinfo/", 1)[1])
    with contextlib.suppress(OSError):
        names.append(Path("/etc/timezone").read_text(encoding="utf-8").strip())
    return [n for n in names if n]


def gap_around(wall: datetime, zone: tzinfo) -> tuple[datetime, datetime] | None:
    """None when the naive `wall` is a time `zone`'s clocks show; else the last minute they show before it and
    the first after: it falls in the hour skipped as the clocks go forward (decision 542: "02:30" on such a
    night was moved to 03:30 without a word)."""
    if _shown(wall, zone):
        return None
    before = after = wall.replace(second=0, microsecond=0)
    for _ in range(_GAP_MINUTES_AT_MOST):
        if _shown(before := before - _MINUTE, zone):
            break
    for _ in range(_GAP_MINUTES_AT_MOST):
        if _shown(after := after + _MINUTE, zone):
            break
    return before, after


def other_offset(local: datetime) -> str | None:
    """When the aware `local` time is one its zone's clocks show twice (the hour repeated as they go back): the
    UTC offset of the other one ("+01:00"); None otherwise."""
    other = local.replace(fold=1 - local.fold)
    return None if other.utcoffset() == local.utcoffset() else offset_text(other)


def offset_text(moment: datetime) -> str:
    """`moment`'s UTC offset as ISO 8601 writes it: "+02:00" (strftime's %:z is Python 3.12's)."""
    text = moment.strftime("%z") or "+0000"
    return f"{text[:3]}:{text[3:5]}"


def _shown(wall: datetime, zone: tzinfo) -> bool:
    """Whether the naive `wall` is a time `zone`'s clocks show: read there, it comes back the same."""
    return wall.replace(tzinfo=zone).astimezone(UTC).astimezone(zone).replace(tzinfo=None) == wall


_MINUTE = timedelta(minutes=1)
_GAP_MINUTES_AT_MOST = 2 * 24 * 60  # the widest skip on record is a day (Samoa, 2011)
