"""The time zone cron expressions are read in: `scheduler.timezone`, else the host's own zone.

"0 8 * * *" should mean eight in the morning where the person lives, so the default is the host's
IANA zone (from `TZ`, then the /etc/localtime link, then /etc/timezone), which keeps DST right; a
fixed UTC offset would not. UTC when none can be found.
"""

from __future__ import annotations

import contextlib
import os
from datetime import UTC, tzinfo
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
