"""The web page a running gateway serves on this home, for `klaw chat`'s refusal beside it: read from the
address file the gateway writes when it listens (`KlawHome.web_address_file`), and believed only when
something answers there (a gateway killed outright leaves its file behind). Read as klaw's small files are
(`read_small`): a FIFO put there never waited on, /dev/zero never read without end (decision 466)."""

from __future__ import annotations

import asyncio
import contextlib
from urllib.parse import urlsplit

from klaw.config_loader import LoadedConfig
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


def configured_page(loaded: LoadedConfig) -> str:
    """The page's address as this shell reads the config, and where its port was set: a service's own
    environment may set another, which this shell cannot see."""
    web = loaded.config.channels.web
    source = loaded.sources.get("channels.web.port", "")
    where = f"by {source.removeprefix('env ')} in this shell" if source.startswith("env ") else f"in {loaded.path}"
    return f"http://{web.host}:{web.port}/ by channels.web.port {where}, unless its service sets another"
