"""Is an engine serving this KLAW_HOME? Its socket answers a connect.

Maintenance that replaces the database (`klaw reindex`) must not run under a live engine, which
holds klaw.db open and keeps writing it. A socket file nobody listens on is a stale leftover of a
crash and does not count. Lives at the top level because both the engine's neighbours (`cli`) and
`memory` ask, and `memory` must not import `engine`.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import stat
from pathlib import Path

CONNECT_TIMEOUT_SECONDS = 2.0


async def engine_answers(socket_path: Path, timeout_seconds: float = CONNECT_TIMEOUT_SECONDS) -> bool:
    """True when something accepts a connection on `socket_path` (or is too busy to, or refuses us
    permission: then it is not ours to stop, but it is running)."""
    try:
        if not stat.S_ISSOCK(os.lstat(socket_path).st_mode):
            return False
    except FileNotFoundError:
        return False
    try:
        async with asyncio.timeout(timeout_seconds):
            _, writer = await asyncio.open_unix_connection(str(socket_path))
    except (ConnectionRefusedError, FileNotFoundError):
        return False
    except (TimeoutError, PermissionError):
        return True
    except OSError:
        return False  # e.g. a path too long to connect to, which no engine could have bound either
    writer.close()
    with contextlib.suppress(OSError):
        await writer.wait_closed()
    return True
