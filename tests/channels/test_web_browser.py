"""The web page in a real headless Chromium (Debian's /usr/bin/chromium driven by Playwright).

Signs in with the token, chats through the gateway, the engine and the fake OpenAI server (the reply
arrives streamed), runs `/new`, opens the inspector, the memory browser and search, and the
settings. A screenshot of the inspector is saved to `test-artifacts/web-inspector.png`.
"""

from __future__ import annotations

from typing import Any

from tests.channels.browser import ARTIFACTS, BROWSER_MODULE, opened_page, say, signed_in

pytestmark = BROWSER_MODULE

# The page's own appendPiece (events.js, the module app.js imported) given 1,000 pieces of 41 characters that
# each end with a line break, as a model writing line by line sends them: [blocks, characters, the largest
# block]. Blocks of about 8 KB each, nothing lost; the old code put every piece in one block (decision 466).
STREAMED_IN_BLOCKS = """(async () => {
  const events = await import(new URL("events.js", document.querySelector("script[type=module]").src));
  const body = document.createElement("div");
  for (let i = 0; i < 1000; i++) events.appendPiece(body, "a line of a listing, forty characters...\\n");
  const sizes = [...body.children].map((block) => block.textContent.length);
  return [sizes.length, body.textContent.length, Math.max(...sizes)];
})()"""


async def test_sign_in_chat_new_segment_and_inspect_in_chromium() -> None:
    # A small window and a lenient relevance gate, so the third message's turn recalls the first (auto-RAG).
    overrides: dict[str, Any] = {"context": {"slidingWindow": 2}, "autoRag": {"relevanceThreshold": 2.0}}
    async with opened_page(**overrides) as session:
        stack, web, page = session.stack, session.web, session.page
        await page.goto(web.url)
        assert page.url.endswith("/login")
        await page.fill("#token", "wrong")
        await page.click("#sign-in")
        await page.wait_for_selector("text=That token is not right")
        await page.fill("#token", web.token)
        await page.click("#sign-in")
        await page.wait_for_selector("body[data-ready=true]")
        await page.wait_for_selector("#engine-status.up")

        stack.server.reply_text("Hello from the fake model, streamed word by word.")
        await page.fill("#input", "hi klaw, remember that my favourite colour is teal")
        await page.press("#input", "Enter")
        reply = page.locator(".msg.assistant", has_text="streamed word by word")
        await reply.wait_for()
        assert await page.evaluate("window.__events.delta") > 1
        assert await page.evaluate(STREAMED_IN_BLOCKS) == [5, 41_000, 8_200]
        assert await page.locator(".msg.user.answered").count() == 1
        for n, text in enumerate(["I also like hiking in the mountains", "which colour do I like best?"], start=2):
            await page.fill("#input", text)
            await page.press("#input", "Enter")
            await page.locator(".msg.user.answered").nth(n - 1).wait_for()

        await page.fill("#input", "/new")
        await page.press("#input", "Enter")
        await page.locator(".msg.notice", has_text="Started a new conversation").wait_for()

        await page.click("nav button[data-tab=inspector]")
        turn = page.locator(".turn").first
        await turn.wait_for()
        await turn.locator("td", has_text="system_prompt").wait_for()
        await turn.locator("td", has_text="auto_rag").wait_for()
        await turn.locator("td.text", has_text="favourite colour is teal").first.wait_for()
        assert "of 3600 tokens" in await turn.locator("h3").inner_text()
        await turn.locator("details.tool-parts summary").click()  # the tools layer, tool by tool
        await turn.locator("details.tool-parts td", has_text="web_fetch").wait_for()
        screenshot = ARTIFACTS / "web-inspector.png"
        await page.screenshot(path=str(screenshot), full_page=True)
        print(f"screenshot: {screenshot}")

        await page.click("nav button[data-tab=memory]")
        await page.locator("#segments tbody tr").nth(1).wait_for()
        assert await page.locator("#segments tbody tr").count() == 2
        # Numbered within the chat, newest first (decision 275), each with its id beside it (decision 402).
        assert await page.locator("#segments tbody tr td:first-child").all_inner_texts() == ["2", "1"]
        assert await page.locator("#segments thead th:nth-child(2)").inner_text() == "id"
        assert await page.locator("#segments tbody tr td:nth-child(2)").all_inner_texts() == ["2", "1"]
        await page.locator("#segments tbody tr").nth(1).click()
        await page.locator("#segment-detail td", has_text="favourite colour is teal").first.wait_for()
        # named as `klaw memory list` names it, number and id (decision 402)
        assert await page.locator("#segment-detail h2").inner_text() == "Segment 1 (id 1)"
        await page.fill("#search-text", "teal colour")
        await page.press("#search-text", "Enter")
        await page.locator("#search-results td", has_text="favourite colour").first.wait_for()
        await page.screenshot(path=str(ARTIFACTS / "web-memory.png"), full_page=True)

        await page.click("nav button[data-tab=settings]")
        await page.locator("#settings td", has_text="channels.web.host").wait_for()

        await page.click("#logout-form button")
        await page.wait_for_url("**/login")
    assert screenshot.stat().st_size > 10_000


async def test_a_reply_arriving_while_the_history_loads_is_shown_once_in_chromium() -> None:
    """The page loads the chat's history, then opens its event stream: a reply published in between
    (held here by making the stream's request wait until the engine has answered) must still show."""
    async with signed_in(1200, 900) as session:
        stack, web, page = session.stack, session.web, session.page
        stack.server.reply_text("earlier answer")
        await page.fill("#input", "an earlier question")
        await page.press("#input", "Enter")
        await page.locator(".msg.assistant", has_text="earlier answer").wait_for()

        async def reply_before_the_stream_opens(route: Any) -> None:
            async with web.hub.subscribe() as events:
                stack.server.reply_text("the answer that came in between")
                await stack.gateway.submit("web", "main", "asked from another tab")
                while (event := await events.next()) is not None and event.kind != "reply":
                    pass
            await route.continue_()

        await page.route("**/api/events*", reply_before_the_stream_opens)
        await page.reload()
        await page.wait_for_selector("body[data-ready=true]")
        await page.locator(".msg.assistant", has_text="the answer that came in between").wait_for(timeout=5_000)
        # A second load after it: the reply is in the history now and in the replayed events, shown once.
        await page.unroute("**/api/events*")
        await page.reload()
        await page.wait_for_selector("body[data-ready=true]")
        await page.locator(".msg.assistant", has_text="the answer that came in between").wait_for()
        assert await page.locator(".msg.assistant", has_text="earlier answer").count() == 1
        assert await page.locator(".msg.assistant", has_text="the answer that came in between").count() == 1


async def test_forget_last_takes_the_erased_exchange_off_the_page_in_chromium() -> None:
    """`/forget last` on the page: the question and the reply it erased leave the page (it reloads the
    chat's history), the earlier exchange stays, and the notice saying what was forgotten is shown."""
    async with signed_in(1200, 900) as session:
        stack, page = session.stack, session.page
        for question, answer in [("first question", "kept answer"), ("my locker code?", "it is HUNTER2")]:
            stack.server.reply_text(answer)
            await page.fill("#input", question)
            await page.press("#input", "Enter")
            await page.locator(".msg.assistant", has_text=answer).wait_for()

        await page.fill("#input", "/forget last")
        await page.press("#input", "Enter")
        await page.locator(".msg.notice", has_text="erased from klaw.db").wait_for()
        await page.locator(".msg", has_text="HUNTER2").wait_for(state="detached")
        assert await page.locator(".msg.user", has_text="my locker code?").count() == 0
        assert await page.locator(".msg.assistant", has_text="kept answer").count() == 1


async def test_a_failed_turns_tool_calls_stay_with_it_in_the_history_in_chromium() -> None:
    """fh9: a turn that called tools and then failed left its calls to be listed under the next reply in
    the history ("Tools used: current_time" under a reply whose turn called none). They are listed with
    the message the failed turn was answering, saying so, and the next reply lists its own calls only."""
    async with signed_in() as session:
        page, server = session.page, session.stack.server
        server.reply_tool_calls([("current_time", {})])
        server.reply_error(500, message="the model server broke")
        await say(page, "what time is it?", 1)
        await page.locator(".msg.error").wait_for()  # the apology, live
        server.reply_text("All good now.")
        await say(page, "are you there?", 2)
        assert await page.locator(".msg.assistant", has_text="All good now.").locator(".tools").count() == 0

        await page.reload()
        await page.wait_for_selector("body[data-ready=true]")
        reply = page.locator(".msg.assistant", has_text="All good now.")
        await reply.wait_for()
        assert await reply.locator(".tools").count() == 0  # before: "Tools used: current_time"
        asked = page.locator(".msg.user", has_text="what time is it?")
        assert await asked.locator(".tools").inner_text() == "Tools used before its turn failed: current_time"
        assert await page.locator(".msg.user", has_text="are you there?").locator(".tools").count() == 0


async def test_a_reply_quoting_a_tabulate_table_keeps_its_rule_line_in_chromium() -> None:
    """lows19: tabulate's rule line `-  -` was read as an empty list, and the reply showed an empty bullet
    where the line was; it shows as sent, one line of the reply between the header and the row."""
    async with signed_in(1200, 900) as session:
        stack, page = session.stack, session.page
        stack.server.reply_text("a  b\n-  -\n1  2")
        await page.fill("#input", "a table please")
        await page.press("#input", "Enter")
        bubble = page.locator(".msg.assistant", has_text="1")
        await bubble.wait_for()
        assert await bubble.locator("li").count() == 0
        lines = [" ".join(line.split()) for line in (await bubble.inner_text()).splitlines()]
        assert lines[:3] == ["a b", "- -", "1 2"], lines  # then the bubble's time
