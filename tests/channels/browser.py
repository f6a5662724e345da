"""The browser tests' shared steps: the whole stack with the web channel, Debian's Chromium driven by
Playwright, and a person's sign-in with the page's token.

One Chromium serves a module's tests (`one_chromium`, tests/channels/conftest.py; the modules run on one event
loop for it, `BROWSER_MODULE`): starting Playwright's driver and a browser cost ~1.7 s of CPU, paid by each of
the 26 browser tests before (decision 485). Each test still starts from a known state: its own browser context, as a
new browser profile (no cookies, no localStorage, no cache), closed at the test's end. A test run without the
fixture starts its own browser as before.

Every browser test signs in the way a person does (the token typed into the form, the button
clicked); only the first test of test_web_browser.py types a wrong token first, so it opens the page
without signing in.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack, asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from klaw.channels.web.channel import WebChannel
from klaw.config import WebChannelConfig
from klaw.config_loader import LoadedConfig
from klaw.home import KlawHome
from klaw.llm.fake_server import FakeOpenAiServer
from tests.channels.stack import Stack, running_stack

CHROMIUM = Path("/usr/bin/chromium")
ARTIFACTS = Path(__file__).resolve().parents[2] / "test-artifacts"

needs_chromium = pytest.mark.skipif(
    not CHROMIUM.exists(),
    reason="browser tests need Debian's chromium at /usr/bin/chromium (apt-get install chromium; .ci/run does it)",
)
# A browser test module's marks: Chromium needed, the module's tests on one loop with its one browser.
BROWSER_MODULE = [needs_chromium, pytest.mark.asyncio(loop_scope="module"), pytest.mark.usefixtures("one_chromium")]

_shared: dict[asyncio.AbstractEventLoop, Any] = {}  # the browser `one_chromium` started, by the loop it runs on


@asynccontextmanager
async def launched() -> AsyncIterator[Any]:
    """Playwright's driver and a Chromium started, closed after."""
    playwright_api = pytest.importorskip("playwright.async_api")
    async with playwright_api.async_playwright() as pw:
        browser = await pw.chromium.launch(executable_path=str(CHROMIUM), args=["--no-sandbox"])
        try:
            yield browser
        finally:
            await browser.close()


@asynccontextmanager
async def shared_chromium() -> AsyncIterator[None]:
    """One browser for the tests run on this loop meanwhile (`opened_page` takes it)."""
    loop = asyncio.get_running_loop()
    async with launched() as browser:
        _shared[loop] = browser
        try:
            yield
        finally:
            del _shared[loop]


# Counts the server-sent events the page receives, by kind, so a test can see a reply was streamed.
COUNT_EVENTS = """
window.__events = {};
const original = EventSource.prototype.addEventListener;
EventSource.prototype.addEventListener = function (kind, listener, options) {
  return original.call(this, kind, (event) => {
    window.__events[kind] = (window.__events[kind] || 0) + 1;
    listener(event);
  }, options);
};
"""


def web_channel(holder: list[WebChannel]) -> Any:
    """A channel factory for `running_stack` that also hands the web channel to the test."""

    def make(home: KlawHome, loaded: LoadedConfig, server: FakeOpenAiServer) -> list[WebChannel]:
        holder.append(WebChannel(home, WebChannelConfig(port=0), loaded))
        return holder

    return make


@dataclass
class Session:
    stack: Stack
    web: WebChannel
    page: Any
    not_found: list[str] = field(default_factory=list)


@asynccontextmanager
async def opened_page(width: int = 1200, height: int = 900, **overrides: Any) -> AsyncIterator[Session]:
    """The stack running (config `overrides` applied) and a Chromium page on nothing yet; the page
    counts its server-sent events and notes every URL answered 404."""
    ARTIFACTS.mkdir(exist_ok=True)
    holder: list[WebChannel] = []
    async with running_stack(web_channel(holder), **overrides) as stack, AsyncExitStack() as closing:
        browser: Any = _shared.get(asyncio.get_running_loop())
        if browser is None:
            browser = await closing.enter_async_context(launched())
        context = await browser.new_context(viewport={"width": width, "height": height})
        try:
            page = await context.new_page()  # more tabs of this browser: `page.context.new_page()`
            page.set_default_timeout(15_000)
            await page.add_init_script(COUNT_EVENTS)
            session = Session(stack, holder[0], page)

            def note_missing(response: Any) -> None:
                if response.status == 404:
                    session.not_found.append(response.url)

            page.on("response", note_missing)
            yield session
        finally:
            await context.close()


@asynccontextmanager
async def signed_in(width: int = 1100, height: int = 800, **overrides: Any) -> AsyncIterator[Session]:
    """`opened_page`, then signed in with the page's token and its history loaded."""
    async with opened_page(width, height, **overrides) as session:
        await sign_in(session)
        yield session


async def sign_in(session: Session) -> None:
    page = session.page
    await page.goto(session.web.url)
    await page.fill("#token", session.web.token)
    await page.click("#sign-in")
    await page.wait_for_selector("body[data-ready=true]")


async def say(page: Any, text: str, answered: int) -> None:
    """Type a message and wait until `answered` messages show as answered."""
    await page.fill("#input", text)
    await page.press("#input", "Enter")
    await page.locator(".msg.user.answered").nth(answered - 1).wait_for()


@asynccontextmanager
async def approval_page(**tools: Any) -> AsyncIterator[Session]:
    """`signed_in` with `file_write` held for approval (more `tools` settings applied), the engine up."""
    async with signed_in(1000, 800, tools={"approval": ["file_write"], **tools}) as session:
        await session.page.wait_for_selector("#engine-status.up")
        yield session


async def ask_to_write(session: Session, typed: str, path: str, content: str, reply: str) -> Any:
    """The person types `typed`; the model calls `file_write(path, content)`, then answers `reply`. Returns
    the approval question's notice, once shown."""
    session.stack.server.reply_tool_calls([("file_write", {"path": path, "content": content})])
    session.stack.server.reply_text(reply)
    await session.page.fill("#input", typed)
    await session.page.press("#input", "Enter")
    question = session.page.locator(".msg.notice", has_text=f"path: {path}")
    await question.wait_for()
    return question
