"""Messages typed on the web page while klaw cannot be reached are kept and sent when it is back (decision 464).

newcomer18 signed in to `klaw serve`, stopped it with Ctrl-C and sent a message: the bubble said the
browser's "not sent: Failed to fetch", the box was emptied, and nothing was sent once serve was back; the red
bubble stayed after "engine connected". Here every request of the page is refused by the browser (as when
nothing listens on the port: the same TypeError), two messages are typed, then klaw answers again.
"""

from __future__ import annotations

from tests.channels.browser import needs_chromium, opened_page, sign_in

pytestmark = needs_chromium

UNSENT = "not sent yet: klaw is not running — it will be sent when it is back"


async def test_messages_typed_while_klaw_is_away_are_sent_in_order_when_it_is_back() -> None:
    async with opened_page() as session:
        stack, page = session.stack, session.page
        # The page reads klaw's status every 5 s; here every 0.3 s, so the test need not wait.
        await page.add_init_script("const every = window.setInterval; window.setInterval = (f) => every(f, 300);")
        await sign_in(session)
        await page.wait_for_selector("#engine-status.up")
        await page.route("**/api/**", lambda route: route.abort())  # klaw gone: nothing answers
        for text in ("first while away", "second while away"):
            await page.fill("#input", text)
            await page.press("#input", "Enter")
            await page.locator(".msg.user.unsent", has_text=text).locator(".meta", has_text=UNSENT).wait_for()
        await page.locator("#engine-status.down", has_text="klaw not reachable").wait_for()
        assert await page.locator(".msg.error").count() == 0
        assert "Failed to fetch" not in await page.locator("#messages").inner_text()

        stack.server.reply_text("Got the first.")
        stack.server.reply_text("Got the second.")
        await page.unroute("**/api/**")  # klaw is back
        await page.locator(".msg.user.answered", has_text="second while away").wait_for()
        assert await page.locator(".msg.unsent").count() == 0
        assert await page.locator(".msg.user .body").all_inner_texts() == ["first while away", "second while away"]
        await page.reload()  # each was sent once, in the order typed
        await page.wait_for_selector("body[data-ready=true]")
        assert await page.locator(".msg.user .body").all_inner_texts() == ["first while away", "second while away"]
