"""The channel tests' fixtures: one Chromium for a browser test module (tests/channels/browser.py)."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest_asyncio

from tests.channels.browser import shared_chromium


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def one_chromium() -> AsyncIterator[None]:
    """One browser for the module's tests, each in a context of its own (`BROWSER_MODULE` asks for it)."""
    async with shared_chromium():
        yield
