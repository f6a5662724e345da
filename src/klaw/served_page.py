"""The web page a running gateway serves on this home, for `klaw chat`'s refusal beside it and a library
program's (`library_arguments.talk_instead`): read from the
address file the gateway writes when it listens (`KlawHome.web_address_file`), and believed only when
something answers there (a gateway killed outright leaves its file behind). Read as klaw's small files are
(`read_small`): a FIFO put there never waited on, /dev/zero never read without end (decision 466).
Never engine.yaml's port: a service's environment may set another, and the configured port may be another
person's klaw, which the hint would then send the token to (newcomer20, decision 489)."""

from __future__ import annotations

import asyncio
import contextlib
from urllib.parse import urlsplit

from klaw.home import KlawHome
from klaw.small_file import read_small

ANSWERS_WITHIN = 1.0  # seconds: a page on this machine answers at once
MAX_BYTES = 4096  # an address: the gateway writes one line


async def served_page(home: KlawHome) -> str | None:
    """The running web page's address, or None when no gateway serves one here."""
    try:
        url = read_small(home.web_address_file, MAX_BYTES).decode("utf-8").strip()
    except (OSError, UnicodeDecodeError):
        return None
    parts = urlsplit(url)
    if not parts.hostname or not parts.port:
        return None
    try:
        async with asyncio.timeout(ANSWERS_WITHIN):
            _, writer = await asyncio.open_connection(parts.hostname, parts.port)
    except (OSError, TimeoutError):
        return None
    writer.close()
    with contextlib.suppress(OSError):
        await writer.wait_closed()
    return url
