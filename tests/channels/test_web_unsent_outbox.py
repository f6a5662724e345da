"""Messages typed on the web page while klaw cannot be reached are kept and sent when it is back (decision 464).

newcomer18 signed in to `klaw serve`, stopped it with Ctrl-C and sent a message: the bubble said the
browser's "not sent: Failed to fetch", the box was emptied, and nothing was sent once serve was back; the red
bubble stayed after "engine connected". Here every request of the page is refused by the browser (as when
nothing listens on the port: the same TypeError), two messages are typed, then klaw answers again.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest

from tests.channels.browser import BROWSER_MODULE, Session, opened_page, sign_in

pytestmark = BROWSER_MODULE

UNSENT = "not sent yet: klaw is not running — it will be sent when it is back"
# The page reads klaw's status every 5 s; here every 0.3 s, so the test need not wait (and a wait for the next
# reading is not 5 s of a locator's 15).
EVERY_300_MS = "const every = window.setInterval; window.setInterval = (f) => every(f, 300);"


async def test_messages_typed_while_klaw_is_away_are_sent_in_order_when_it_is_back() -> None:
    async with opened_page() as session:
        stack, page = session.stack, session.page
        await page.add_init_script(EVERY_300_MS)
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

        # The page sends them one after the other: within the engine's debounce (20 ms) they are one turn, else
        # two. The model echoes each turn's last message, so either way nothing scripted is left over for the
        # message below (CI110: two scripted replies, one turn, and "Got it once." came a turn late).
        await page.unroute("**/api/**")  # klaw is back
        await page.locator(".msg.user.answered", has_text="second while away").wait_for()
        await page.locator(".msg.assistant", has_text="second while away").wait_for()  # the echo of the last turn
        assert await page.locator(".msg.unsent").count() == 0
        assert await page.locator(".msg.user .body").all_inner_texts() == ["first while away", "second while away"]
        await page.reload()  # each was sent once, in the order typed
        await page.wait_for_selector("body[data-ready=true]")
        assert await page.locator(".msg.user .body").all_inner_texts() == ["first while away", "second while away"]

        # The outbox sent only `{text}`: a POST klaw stored whose response was lost (a dropped connection, a
        # proxy's 504) was sent again and stored twice (adversary27 L4). The page's own id for the message
        # goes with it, and klaw takes it once (decision 479).
        dropped: list[str] = []

        async def drop_the_first_response(route: Any) -> None:
            if route.request.method == "POST" and not dropped:
                await route.fetch()  # klaw takes the message…
                dropped.append(route.request.post_data or "")
                await route.abort()  # …and the page never hears so
            else:
                await route.continue_()

        await page.route("**/api/messages*", drop_the_first_response)
        statuses = record_calls(page)  # for a failure's message
        errors: list[str] = []
        page.on("pageerror", lambda error: errors.append(str(error)))
        stack.server.reply_text("Got it once.")
        await page.fill("#input", "sent, its answer lost")
        await page.press("#input", "Enter")
        try:
            await page.locator(".msg.user.answered", has_text="sent, its answer lost").wait_for()
        except Exception as exc:  # 3 of 24 runs under load (decision 509): say what the page held
            held = await what_the_page_holds(page)
            raise AssertionError(f"not answered; the page held {held}, its POSTs {statuses}, errors {errors}") from exc
        await page.locator(".msg.assistant", has_text="Got it once.").wait_for()
        assert all(await page.locator(".msg.user.answered .meta").all_inner_texts())  # each with its time
        assert len(dropped) == 1 and '"client_id":' in dropped[0]
        await page.reload()
        await page.wait_for_selector("body[data-ready=true]")
        said = await page.locator(".msg.user .body").all_inner_texts()
        assert said == ["first while away", "second while away", "sent, its answer lost"]
        replies = await page.locator(".msg.assistant .body").all_inner_texts()
        assert replies[-1] == "Got it once." and replies.count("Got it once.") == 1, replies


async def test_a_message_typed_while_klaw_is_away_is_sent_by_the_next_page_after_its_tab_is_closed() -> None:
    """The outbox lived only in its page: closing the tab (past the prompt) lost what was typed (decision 464).
    It is kept in the browser's localStorage; the next page of this klaw takes it over and sends it, once; so
    is one typed as the session ended, sent once the person has signed in again (decision 473)."""
    async with opened_page() as session:
        stack, page = session.stack, session.page
        await page.context.add_init_script(EVERY_300_MS)  # this tab's and the next one's
        await sign_in(session)
        await page.wait_for_selector("#engine-status.up")
        await page.route("**/api/**", lambda route: route.abort())  # klaw gone: nothing answers
        await page.fill("#input", "typed before closing")
        await page.press("#input", "Enter")
        await page.locator(".msg.user.unsent .meta", has_text=UNSENT).wait_for()
        context = page.context
        await page.close(run_before_unload=True)  # no prompt: the browser keeps it

        stack.server.reply_text("Got it after all.")
        again = await context.new_page()  # klaw is back; the session's cookie signs this page in
        await again.goto(session.web.url)
        try:
            await again.locator(".msg.user.answered", has_text="typed before closing").wait_for()
        except Exception as exc:  # failed once in ~33 runs under load (decision 505): say what the page held
            raise AssertionError(f"not answered; the page held {await what_the_page_holds(again)}") from exc
        await again.locator(".msg.assistant", has_text="Got it after all.").wait_for()
        await again.reload()  # sent once; nothing left to send
        await again.wait_for_selector("body[data-ready=true]")
        assert await again.locator(".msg.user .body").all_inner_texts() == ["typed before closing"]
        assert await again.evaluate("Object.keys(localStorage).filter((k) => k.startsWith('klaw-outbox:'))") == []

        # The session ends while a message waits: the page goes to the sign-in form and the message is kept.
        await again.route("**/api/**", lambda route: route.abort())
        await again.fill("#input", "typed as the session ended")
        await again.press("#input", "Enter")
        await again.locator(".msg.user.unsent .meta", has_text=UNSENT).wait_for()
        await context.clear_cookies()
        stack.server.reply_text("Got that one too.")
        await again.unroute("**/api/**")
        await again.wait_for_selector("#token")  # signed out, found at the next status reading: the form
        await again.fill("#token", session.web.token)
        await again.click("#sign-in")
        await again.locator(".msg.user.answered", has_text="typed as the session ended").wait_for()
        await again.reload()
        await again.wait_for_selector("body[data-ready=true]")
        texts = await again.locator(".msg.user .body").all_inner_texts()
        assert texts == ["typed before closing", "typed as the session ended"]


# The page's pagehide handlers never run in this tab, as when Chromium skips them for a tab closed under load.
NO_PAGEHIDE = """const listen = window.addEventListener;
window.addEventListener = function (kind, ...rest) {
  if (kind !== "pagehide") return listen.call(this, kind, ...rest);
};"""


@pytest.mark.parametrize("ending", ["crashed", "closed without pagehide"])
async def test_a_tab_that_ends_without_a_word_has_its_message_sent_at_once_by_the_next_page(ending: str) -> None:
    """A tab killed, crashed, or closed while Chromium skipped its pagehide never marked its outbox left, so the
    next page took it for an open tab's and sent its message only after 90 s of quiet (decision 505's cause).
    Each tab holds a Web Lock while it lives; the browser releases a dead tab's, and the next page takes its
    outbox at once (decision 509). Sent once, shown once, after a reload too."""
    async with opened_page() as session:
        stack, page = session.stack, session.page
        await page.context.add_init_script(EVERY_300_MS)
        if ending != "crashed":
            await page.add_init_script(NO_PAGEHIDE)  # this tab's only
        await sign_in(session)
        await page.wait_for_selector("#engine-status.up")
        await page.route("**/api/**", lambda route: route.abort())  # klaw gone: nothing answers
        await page.fill("#input", "typed before it died")
        await page.press("#input", "Enter")
        await shown(page.locator(".msg.user.unsent .meta", has_text=UNSENT), page)
        context = page.context
        if ending == "crashed":
            crashed: asyncio.Future[None] = asyncio.get_running_loop().create_future()
            page.once("crash", lambda _: crashed.set_result(None))
            cdp = await context.new_cdp_session(page)
            asyncio.ensure_future(cdp.send("Page.crash")).add_done_callback(lambda done: done.exception())
            await crashed  # the renderer is gone: no handler of the page ran
        await page.close(run_before_unload=False)

        # What the tab left: its entry still says it was alive a moment ago (it never said it left).
        peek = await context.new_page()
        await peek.goto(f"{session.web.url}/static/favicon.svg")  # the origin's storage, without the app
        left = await peek.evaluate(OUTBOX_ENTRIES)
        await peek.close()
        assert len(left) == 1 and left[0]["n"] == 1 and 0 < left[0]["ago"] < 90_000, left

        stack.server.reply_text("Got it at once.")
        again = await context.new_page()  # klaw is back; the session's cookie signs this page in
        again.set_default_timeout(15_000)  # far below the 90 s the page waited before
        posts = record_posts(again)
        await again.goto(session.web.url)
        await shown(again.locator(".msg.user.answered", has_text="typed before it died"), again)
        await shown(again.locator(".msg.assistant", has_text="Got it at once."), again)
        assert posts == ["typed before it died"]
        await again.reload()
        await again.wait_for_selector("body[data-ready=true]")
        assert await again.locator(".msg.user .body").all_inner_texts() == ["typed before it died"]
        assert await again.locator(".msg.assistant .body").all_inner_texts() == ["Got it at once."]
        assert await again.evaluate(OUTBOX_ENTRIES) == []
        assert len(stack.server.chat_requests) == 1


async def test_an_open_tab_keeps_its_own_message_and_sends_it_when_klaw_is_back() -> None:
    """Two tabs open, one of them cut off from klaw with a message waiting: the other, reading the status and
    looking for gone tabs' outboxes every 0.3 s, leaves it alone (its tab's Web Lock is held), and it is sent
    once, by its own tab, when klaw answers that tab again; both tabs show it once (decision 509)."""
    async with opened_page() as session:
        stack, page = session.stack, session.page
        await page.context.add_init_script(EVERY_300_MS)
        await sign_in(session)
        await page.wait_for_selector("#engine-status.up")
        other = await page.context.new_page()
        other.set_default_timeout(15_000)
        posts = record_posts(other)
        await other.goto(session.web.url)
        await other.wait_for_selector("#engine-status.up")

        await page.route("**/api/**", lambda route: route.abort())  # klaw gone, for this tab only
        await page.fill("#input", "mine to send")
        await page.press("#input", "Enter")
        await shown(page.locator(".msg.user.unsent .meta", has_text=UNSENT), page, other)
        assert [entry["n"] for entry in await other.evaluate(OUTBOX_ENTRIES)] == [1]
        for _ in range(3):  # three of the other tab's status readings, each after it looked for gone tabs
            async with other.expect_request("**/api/status"):
                pass
        assert await other.locator(".msg.user").count() == 0 and posts == []
        assert [entry["n"] for entry in await other.evaluate(OUTBOX_ENTRIES)] == [1]

        stack.server.reply_text("Sent by its own tab.")
        await page.unroute("**/api/**")
        await shown(page.locator(".msg.user.answered", has_text="mine to send"), page, other)
        await shown(other.locator(".msg.assistant", has_text="Sent by its own tab."), page, other)
        await shown(other.locator(".msg.user", has_text="mine to send"), page, other)
        for tab in (page, other):
            await tab.reload()
            await tab.wait_for_selector("body[data-ready=true]")
            assert await tab.locator(".msg.user .body").all_inner_texts() == ["mine to send"]
        assert posts == [] and await other.evaluate(OUTBOX_ENTRIES) == []
        assert len(stack.server.chat_requests) == 1


async def shown(locator: Any, *pages: Any) -> None:
    """Wait for `locator`; when it does not show, say what each of `pages` held (its outbox, bubbles, locks)."""
    try:
        await locator.wait_for()
    except Exception as exc:
        held = [await what_the_page_holds(page) for page in pages]
        raise AssertionError(f"{locator} did not show; the pages held {held}") from exc


def record_calls(page: Any) -> list[str]:
    """The page's message posts and history reads as they end: method, path, and how (a status, or failed)."""
    calls: list[str] = []
    started = asyncio.get_running_loop().time()

    def note(request: Any, how: str) -> None:
        if "/api/messages" in request.url or "/api/history" in request.url:
            at = asyncio.get_running_loop().time() - started
            calls.append(f"{at:.1f}s {request.method} {request.url.split('/api/')[-1]} {how}")

    async def finished(request: Any) -> None:
        try:
            response = await request.response()
        except Exception:  # the page closed meanwhile (the test's end): an error here would fail the next test
            return
        note(request, str(response.status if response else "?"))

    page.on("requestfinished", finished)
    page.on("requestfailed", lambda request: note(request, "failed"))
    return calls


def record_posts(page: Any) -> list[str]:
    """The texts of the messages `page` posts, as they are sent."""
    texts: list[str] = []

    def note(request: Any) -> None:
        if request.method == "POST" and request.url.endswith("/api/messages"):
            texts.append(json.loads(request.post_data or "{}").get("text", ""))

    page.on("request", note)
    return texts


async def test_every_message_a_turn_answered_shows_answered_live_and_after_a_reload() -> None:
    """The outbox sends its messages back to back; within the engine's debounce they are one turn, whose reply
    names them all (`answers`) but replies to the last (`reply_to`). Only that one was marked answered, live and
    after a reload; the others looked unanswered for good (a queued one kept "queued: the engine is offline"),
    as if lost (decision 505). The model is held so the test sees the turn before and after its reply."""
    async with opened_page(debounce_ms=5000) as session:  # one turn even at a load of 40 (2.5 s split one)
        stack, page = session.stack, session.page
        await page.add_init_script(EVERY_300_MS)
        await sign_in(session)
        await page.wait_for_selector("#engine-status.up")
        answered = page.locator(".msg.user.answered")

        first = await held_burst(session, ["first of a burst", "second of a burst"], "Both, in one turn.")
        await page.locator(".msg.assistant", has_text="Both, in one turn.").wait_for()
        await answered.nth(1).wait_for()  # live: the bubbles the page sent
        assert await answered.locator(".body").all_inner_texts() == ["first of a burst", "second of a burst"]
        await page.reload()
        await page.wait_for_selector("body[data-ready=true]")
        assert await answered.locator(".body").all_inner_texts() == ["first of a burst", "second of a burst"]

        # A reload while the turn is held shows them waiting (not answered); its reply marks both on the
        # bubbles the history placed, each keeping its time.
        second = await held_burst(session, ["third, held", "fourth, held"], "The next two.", reload=True)
        assert await answered.count() == 2
        second.set()
        await page.locator(".msg.assistant", has_text="The next two.").wait_for()
        await answered.nth(3).wait_for()
        assert all(await answered.locator(".meta").all_inner_texts())  # a time under each, not emptied
        await page.reload()
        await page.wait_for_selector("body[data-ready=true]")
        assert await answered.count() == await page.locator(".msg.user").count() == 4
        assert len(stack.server.chat_requests) == 2, "each burst was one turn"
        assert first.is_set()


# The outbox entries in localStorage: each tab's, with how long ago it said it was alive and its message count.
OUTBOX_ENTRIES = """Object.keys(localStorage).filter((k) => k.startsWith("klaw-outbox:")).map((k) => {
  const entry = JSON.parse(localStorage.getItem(k));
  return { tab: k.split(":").pop(), ago: Date.now() - entry.at, n: entry.texts.length, lock: entry.lock || null };
})"""
# The outbox entries and the user bubbles.
PAGE_HOLDS = (
    "(async () => ({ outbox: "
    + OUTBOX_ENTRIES
    + """,
  bubbles: [...document.querySelectorAll("#messages .msg")]
    .map((b) => `${b.className} [${b.dataset.id || ""}] ${b.innerText}`),
  ready: document.body.dataset.ready || "", status: document.getElementById("engine-status")?.textContent,
  locks: navigator.locks ? (await navigator.locks.query()).held.map((lock) => lock.name) : null,
  events: window.__events,
}))()"""
)


async def what_the_page_holds(page: Any) -> Any:
    try:
        return await page.evaluate(PAGE_HOLDS)
    except Exception as exc:  # the page itself gone: say so rather than hide the first failure
        return f"(could not be read: {exc})"


async def held_burst(session: Session, texts: list[str], reply: str, *, reload: bool = False) -> asyncio.Event:
    """`texts` typed while klaw is away, then sent by the page back to back; the model's `reply` waits for
    the returned event (set here unless `reload`: the page is reloaded first, the turn still held)."""
    page = session.page
    release = asyncio.Event()
    session.stack.server.reply_text(reply, before=release.wait)
    await page.route("**/api/**", lambda route: route.abort())
    for text in texts:
        await page.fill("#input", text)
        await page.press("#input", "Enter")
        await page.locator(".msg.user.unsent", has_text=text).wait_for()
    sent = await page.locator(".msg.user[data-id]").count() + len(texts)  # each gets its id once klaw took it
    await page.unroute("**/api/**")
    await page.locator(".msg.user[data-id]").nth(sent - 1).wait_for()
    if reload:
        await page.reload()
        await page.wait_for_selector("body[data-ready=true]")
        await page.locator(".msg.user .body", has_text=texts[-1]).wait_for()
    else:
        release.set()
    return release
