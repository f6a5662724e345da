"""The web page while the engine is down and when it comes back, in a real Chromium.

newcomer9 saw "engine offline — 0 message(s) buffered" in the header while the message just sent said
"queued: the engine is offline": the badge was refreshed only every 5 s. Here the page's 5-second timer is
switched off, so only a refresh the send itself asks for can update it.

newcomer16 (item 5, decision 446) opened the page while the engine was down: "Earlier messages could not
be shown: the engine is not running…". The engine came back and answered the queued message, but the line
stayed and the earlier messages were missing until a reload; and the queued message showed the browser's
time of sending live but the time it was stored (when the engine came back) after the reload. Now the
history takes the line's place once a reply shows the engine is back (the timer being off here), nothing
twice, and the queued message shows its stored time both ways.

A second tab that had loaded its history before the engine went (decision 452) got the reply to the message
the first tab queued, but never the message itself (only replies are streamed): a reply answering a message
the page does not show, or the engine seen back, now has it read the history and put what it lacks in order.
"""

from __future__ import annotations

import asyncio

from klaw.engine.runtime import Engine
from tests.channels.browser import BROWSER_MODULE, opened_page, say, sign_in

pytestmark = BROWSER_MODULE


async def test_a_queued_message_is_counted_at_once_and_the_history_comes_back_with_the_engine() -> None:
    async with opened_page() as session:
        stack, page = session.stack, session.page
        await page.add_init_script("window.setInterval = () => 0;")  # no periodic refresh of the badge
        await sign_in(session)
        await page.wait_for_selector("#engine-status.up")
        stack.server.reply_text("Noted before the outage.")
        await say(page, "remember the red kite", answered=1)
        keeper = await page.context.new_page()  # a tab whose history was read with the engine up
        keeper.set_default_timeout(15_000)
        await keeper.add_init_script("window.setInterval = () => 0;")
        await keeper.goto(session.web.url)
        await keeper.locator(".msg.assistant", has_text="Noted before the outage.").wait_for()
        await stack.engine.shutdown(timeout_seconds=5)
        await page.reload()  # opened while the engine is down: no history
        await page.wait_for_selector("body[data-ready=true]")
        await page.locator(".hint", has_text="Earlier messages could not be shown").wait_for()
        await page.fill("#input", "are you back?")
        await page.press("#input", "Enter")
        await page.locator(".msg.user .meta", has_text="queued: the engine is offline").wait_for()
        badge = page.locator("#engine-status.down", has_text="engine offline — 1 message(s) buffered")
        await badge.wait_for(timeout=10_000)
        await asyncio.sleep(1.1)  # the engine comes back a while later: it stores the message then

        stack.server.reply_text("Back again.")
        engine = await Engine.start(stack.home, stack.loaded.config)
        try:
            await page.locator(".msg.user.answered", has_text="are you back?").wait_for()
            await page.locator(".msg.user", has_text="remember the red kite").wait_for()
            assert await page.locator(".hint", has_text="could not be shown").count() == 0
            order = await page.locator("#messages .msg .body").all_inner_texts()
            assert order == ["remember the red kite", "Noted before the outage.", "are you back?", "Back again."]
            live = await page.locator(".msg.user", has_text="are you back?").locator(".meta").inner_text()
            await keeper.locator(".msg.user", has_text="are you back?").wait_for()  # old page: only the reply
            assert await keeper.locator("#messages .msg .body").all_inner_texts() == order

            await page.reload()
            await page.wait_for_selector("body[data-ready=true]")
            assert await page.locator("#messages .msg .body").all_inner_texts() == order
            stored = await page.locator(".msg.user", has_text="are you back?").locator(".meta").inner_text()
            assert live == stored  # the old page: the browser's time of sending live, the stored one here
        finally:
            await engine.shutdown(timeout_seconds=5)
