"""The web page's engine badge counts a message queued while the engine is down as soon as it is queued.

newcomer9 saw "engine offline — 0 message(s) buffered" in the header while the message just sent said
"queued: the engine is offline": the badge was refreshed only every 5 s. Here the page's 5-second timer is
switched off, so only a refresh the send itself asks for can update it."""

from __future__ import annotations

from tests.channels.browser import needs_chromium, opened_page, sign_in

pytestmark = needs_chromium


async def test_a_message_queued_while_the_engine_is_down_is_counted_at_once() -> None:
    async with opened_page() as session:
        page = session.page
        await page.add_init_script("window.setInterval = () => 0;")  # no periodic refresh of the badge
        await sign_in(session)
        await page.wait_for_selector("#engine-status.up")
        await session.stack.engine.shutdown(timeout_seconds=5)
        await page.fill("#input", "are you there?")
        await page.press("#input", "Enter")
        await page.locator(".msg.user .meta", has_text="queued: the engine is offline").wait_for()
        badge = page.locator("#engine-status.down", has_text="engine offline — 1 message(s) buffered")
        await badge.wait_for(timeout=10_000)
