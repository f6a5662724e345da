"""The web page across an upgrade and a restart of klaw, in a real Chromium (newcomer22, decision 512).

After an upgrade, reloading the open tab showed an empty page: the browser had kept the old app.js from its
cache (served with last-modified, no Cache-Control) and ran it with the new index.html. The page's files are now
served `Cache-Control: no-cache`: a reload asks again and gets the new one. Here the files are a copy whose
first version is a year old (as an installed release's may be: Chromium then reuses them for weeks), and a
reload after app.js changed must run the new one.

Every lost connection threw in the page: the event stream's own connection error (no data) went through the
listener of the server's `error` events, JSON.parse(undefined) threw and the page's event cursor became NaN.
Here klaw stops with the page open and comes back on the same port: no error in the page, no `since=NaN`, and
the chat goes on.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import time
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest

from klaw.channels.web import app as web_app
from klaw.channels.web.channel import WebChannel
from klaw.config import WebChannelConfig
from klaw.engine.runtime import Engine
from klaw.gateway.link import Backoff
from klaw.gateway.service import Gateway
from tests.channels.browser import BROWSER_MODULE, opened_page, say, sign_in

pytestmark = BROWSER_MODULE

A_YEAR = 365 * 24 * 3600
NEW_LINE = '\ndocument.documentElement.dataset.build = "new";\n'


def copied_static(tmp_path: Path) -> Path:
    """The page's files copied, each dated a year back (the installed release)."""
    copy = tmp_path / "static"
    shutil.copytree(web_app.STATIC_DIRECTORY, copy)
    old = time.time() - A_YEAR
    for path in copy.iterdir():
        os.utime(path, (old, old))
    return copy


async def test_a_reload_after_an_upgrade_runs_the_new_app_js(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    static = copied_static(tmp_path)
    monkeypatch.setattr(web_app, "STATIC_DIRECTORY", static)
    async with opened_page() as session:
        page = session.page
        await sign_in(session)
        assert await page.evaluate("document.documentElement.dataset.build") is None
        answered: dict[str, Any] = {}

        def note(response: Any) -> None:
            if response.url.endswith("/static/app.js"):
                answered["app.js"] = response.headers.get("cache-control")

        page.on("response", note)
        (static / "app.js").write_text((static / "app.js").read_text() + NEW_LINE)  # the upgrade: now-dated
        await page.reload()
        await page.wait_for_selector("body[data-ready=true]")
        assert await page.evaluate("document.documentElement.dataset.build") == "new"
        assert answered["app.js"] == "no-cache"
        assert session.not_found == []


async def test_klaw_stopped_and_back_with_the_page_open_throws_nothing_and_the_chat_goes_on() -> None:
    async with opened_page() as session:
        stack, page = session.stack, session.page
        errors: list[str] = []
        page.on("pageerror", lambda error: errors.append(str(error)))
        streams: list[str] = []
        page.on("request", lambda request: streams.append(request.url) if "/api/events" in request.url else None)
        await sign_in(session)
        await page.wait_for_selector("#engine-status.up")
        stack.server.reply_text("Before the stop.")
        await say(page, "first words", answered=1)
        port = urlsplit(session.web.url).port
        assert port is not None

        await stack.engine.shutdown(timeout_seconds=5)  # klaw serve stopped: the page's server is gone too
        await stack.gateway.stop()
        await asyncio.sleep(5)  # the stream tries again every 2 s (its `retry`): each try fails
        assert errors == []

        engine = await Engine.start(stack.home, stack.loaded.config)
        web = WebChannel(stack.home, WebChannelConfig(port=port), stack.loaded)
        gateway = Gateway(stack.home, [web], backoff=Backoff(initial=0.05, maximum=0.5))
        try:
            await gateway.start()
            async with asyncio.timeout(10):
                await gateway.link.connected.wait()
            await page.wait_for_selector("#engine-status.up")
            stack.server.reply_text("After the restart.")
            await say(page, "second words", answered=2)
            await page.locator(".msg.assistant", has_text="After the restart.").wait_for()
            texts = await page.locator("#messages .msg .body").all_inner_texts()
            assert texts == ["first words", "Before the stop.", "second words", "After the restart."]
            assert errors == []
            assert not [url for url in streams if "NaN" in url]
        finally:
            await engine.shutdown(timeout_seconds=5)
            await gateway.stop()
