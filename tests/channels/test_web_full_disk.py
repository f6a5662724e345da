"""The gateway's disk is full: the web page gets a clear 503 saying so, never a bare 500, and nothing is half-written.

The failure is the kernel's own ENOSPC: the buffer file is pointed at /dev/full, where every write fails
with "No space left on device", just as on a full file system.
"""

from __future__ import annotations

import logging
import os
from pathlib import Path

import httpx
import pytest

from klaw.channels.web.auth import CSRF_HEADER
from klaw.channels.web.channel import WebChannel
from klaw.gateway.buffer import BufferUnavailable
from tests.channels.stack import running_stack
from tests.channels.test_web_app import session_csrf
from tests.channels.test_web_guard import sign_in_with, web_channel


def disk_full(buffer_file: Path) -> None:
    buffer_file.unlink(missing_ok=True)
    os.symlink("/dev/full", buffer_file)


async def test_a_full_disk_is_a_clear_503_and_the_next_message_goes_through(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG)
    holder: list[WebChannel] = []
    async with running_stack(web_channel(holder)) as stack:
        web = holder[0]
        buffer_file = stack.gateway.buffer.path
        async with httpx.AsyncClient(base_url=web.url.rstrip("/")) as client:
            await sign_in_with(client, web.token)
            headers = {CSRF_HEADER: await session_csrf(client)}
            disk_full(buffer_file)
            refused = await client.post("/api/messages", json={"text": "my secret diary entry"}, headers=headers)
            assert refused.status_code == 503, refused.text
            detail = refused.json()["detail"]
            assert "No space left on device" in detail and "Free some disk space" in detail
            assert "diary" not in refused.text
            assert len(stack.gateway.buffer) == 0
            buffer_file.unlink()  # space again
            ok = await client.post("/api/messages", json={"text": "after the clean-up"}, headers=headers)
            assert ok.status_code == 200, ok.text
    logged = [r.getMessage() + (r.exc_text or "") for r in caplog.records]
    assert not [line for line in logged if "diary" in line], logged


async def test_submit_says_what_to_do_when_the_buffer_cannot_be_written() -> None:
    holder: list[WebChannel] = []
    async with running_stack(web_channel(holder)) as stack:
        disk_full(stack.gateway.buffer.path)
        with pytest.raises(BufferUnavailable, match="could not save this message") as raised:
            await stack.gateway.submit("web", "main", "private words")
        assert "private" not in str(raised.value)
