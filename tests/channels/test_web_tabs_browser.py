"""Many tabs of the page in one real Chromium: a browser keeps at most 6 connections to a host, and each
tab held its own event stream, so from the 6th tab on every request of every tab waited for good
(adversary12). The tabs now share one stream (decision 368): with 8 of them, a message sent from one
is answered and shown in all, and closing the tab that streams hands the stream to another."""

from __future__ import annotations

from typing import Any

from tests.channels.browser import BROWSER_MODULE, say, signed_in

pytestmark = BROWSER_MODULE

TABS = 8


async def shown_everywhere(tabs: list[Any], text: str) -> None:
    for tab in tabs:
        await tab.locator(".msg.assistant", has_text=text).wait_for()


async def test_eight_tabs_each_show_a_reply_to_a_message_sent_from_one() -> None:
    async with signed_in() as session:
        stack, web, first = session.stack, session.web, session.page
        tabs = [first]
        for _ in range(TABS - 1):
            tab = await first.context.new_page()
            tab.set_default_timeout(15_000)
            await tab.goto(web.url)  # the old page: tab 7 never got past loading its history
            await tab.wait_for_selector("body[data-ready=true]")
            tabs.append(tab)
        assert web.hub.subscribers == 1  # one stream for the whole browser, not one per tab

        stack.server.reply_text("Answered in every tab.")
        await say(tabs[-1], "hello from the last tab", answered=1)
        await shown_everywhere(tabs, "Answered in every tab.")
        for tab in tabs[:-1]:  # shown once each, not once per tab passing it on
            assert await tab.locator(".msg.assistant", has_text="Answered in every tab.").count() == 1

        # The tab holding the stream goes: another takes it over, and replies keep reaching every tab.
        await first.close()
        tabs = tabs[1:]
        stack.server.reply_text("Still answered after the first tab closed.")
        await say(tabs[0], "and now?", answered=1)
        await shown_everywhere(tabs, "Still answered after the first tab closed.")
        assert web.hub.subscribers == 1  # the closed tab's stream went with it; the new one streams alone
