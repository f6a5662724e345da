"""`current_time`: the model cannot know the time by itself, and users ask for it in their own zone.

The time comes from the engine's clock when the context carries one (`extras["clock"]`), so tests
and replays see a fixed time; otherwise from the system clock.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Annotated, Any
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from pydantic import Field

from klaw.tools.calls import ToolRefusal
from klaw.tools.schema import ToolContext

CLOCK_EXTRA = "clock"


async def current_time(
    context: ToolContext,
    timezone: Annotated[str, Field(description="IANA zone, e.g. 'Europe/Berlin'")] = "UTC",
) -> dict[str, str]:
    """Current date, time and weekday."""
    zone = _zone(timezone)
    now = _now(context).astimezone(zone)
    return {"time": now.isoformat(timespec="seconds"), "weekday": now.strftime("%A"), "timezone": timezone}


def _zone(name: str) -> ZoneInfo:
    try:
        return ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError):  # ValueError: not even a well-formed key ("../x", "")
        raise ToolRefusal(
            f"unknown time zone {name!r}: use an IANA name such as 'UTC', 'Europe/Berlin' or 'Asia/Tokyo'"
        ) from None


def _now(context: ToolContext) -> datetime:
    clock: Any = context.extras.get(CLOCK_EXTRA)
    now = clock.now() if clock is not None else datetime.now(UTC)
    if not isinstance(now, datetime):
        raise TypeError(f"the clock returned a {type(now).__name__}, not a datetime")
    # The engine's clocks speak UTC; a naive value is read as UTC rather than as the host's local time.
    return now if now.tzinfo is not None else now.replace(tzinfo=UTC)
