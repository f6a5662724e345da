"""The web page in headless Chromium: history on open, Markdown rendered safely, task answers and messages
from another chat labelled, a phone-width header, a fast reply marked answered, a favicon, and the
inspector's picture of a turn.

Each test runs the whole stack (fake OpenAI server, engine, gateway with the web channel) and signs in
as a person would. Screenshots go to `test-artifacts/`.
"""

from __future__ import annotations

import re
from typing import Any

import httpx
import pytest

from klaw.store.records import ChatRef
from tests.channels.browser import ARTIFACTS, BROWSER_MODULE, say, sign_in, signed_in

pytestmark = BROWSER_MODULE


async def test_the_chat_so_far_is_shown_after_a_reload_and_a_new_sign_in() -> None:
    async with signed_in() as session:
        page, server = session.page, session.stack.server
        server.reply_text("Teal it is.")
        await say(page, "my favourite colour is teal", 1)
        await page.fill("#input", "/new")
        await page.press("#input", "Enter")
        await page.locator(".msg.notice", has_text="Started a new conversation").wait_for()
        server.reply_text("Hiking is great.")
        await say(page, "I like hiking", 3)  # `/new` counts: its notice answers it

        for again in ("reload", "sign in again"):
            if again == "reload":
                await page.reload()
                await page.wait_for_selector("body[data-ready=true]")
            else:
                await page.click("#logout-form button")
                await page.wait_for_url("**/login")
                await sign_in(session)
            bubbles = page.locator("#messages .msg")
            texts = [text.strip() for text in await bubbles.locator(".body").all_inner_texts()]
            assert texts == ["my favourite colour is teal", "Teal it is.", "I like hiking", "Hiking is great."], again
            assert await page.locator("#messages .divider", has_text="new conversation").count() == 1
            # The divider sits between the two conversations.
            order = await page.eval_on_selector_all("#messages > *", "nodes => nodes.map(n => n.className)")
            assert order.index("divider") == 2, order


MARKDOWN_REPLY = (
    "Here is **bold** and a list:\n\n- one\n- two\n\n```python\nprint('hi')\n```\n\n"
    "<script>window.__pwned = 'script'</script>\n\n"
    "<img src=x onerror=\"window.__pwned = 'onerror'\">\n\n"
    "[click me](javascript:window.__pwned='link') and [the docs](https://example.com/docs)"
)


async def check_rendered_safely(page: Any) -> None:
    reply = page.locator(".msg.assistant").last
    assert await reply.locator("strong").inner_text() == "bold"
    assert await reply.locator("li").count() == 2
    assert await reply.locator("pre code").inner_text() == "print('hi')\n"
    assert "window.__pwned = 'script'" in await reply.inner_text()  # shown as text, not run
    assert await page.locator("#messages script, #messages img, #messages [onerror]").count() == 0
    links = await reply.locator("a").evaluate_all("links => links.map(a => [a.textContent, a.href, a.target, a.rel])")
    assert links == [["the docs", "https://example.com/docs", "_blank", "noopener noreferrer nofollow"]]
    await reply.get_by_text("click me").click()
    assert await page.evaluate("window.__pwned") is None


async def test_replies_render_markdown_and_nothing_in_them_runs() -> None:
    async with signed_in() as session:
        page = session.page
        session.stack.server.reply_text(MARKDOWN_REPLY)
        await say(page, "show me some formatting", 1)
        await check_rendered_safely(page)
        await page.screenshot(path=str(ARTIFACTS / "web-markdown.png"), full_page=True)
        await page.reload()
        await page.wait_for_selector("body[data-ready=true]")
        await check_rendered_safely(page)  # the history renders the same way


async def test_a_scheduled_task_answer_is_labelled_with_its_task() -> None:
    async with signed_in() as session:
        page, engine = session.page, session.stack.engine
        origin = {"source": "task", "task": "morning digest", "origin": "schedule"}
        await engine.processor.inject(ChatRef("web", "main"), "Nothing new overnight.", origin)
        answer = page.locator(".msg.assistant.task", has_text="Nothing new overnight.")
        await answer.wait_for()
        assert await answer.locator(".task-label").inner_text() == "Scheduled task: morning digest"
        session.stack.server.reply_text("An ordinary reply.")
        await say(page, "hello", 1)
        assert await page.locator(".msg.assistant", has_text="An ordinary reply.").locator(".task-label").count() == 0
        await page.reload()
        await page.wait_for_selector("body[data-ready=true]")
        label = page.locator(".msg.assistant", has_text="Nothing new overnight.").locator(".task-label")
        assert await label.inner_text() == "Scheduled task: morning digest"
        assert await page.locator(".task-label").count() == 1

        # A one-off subagent_spawn run's answer is a subagent's, not a scheduled task's (decision 249).
        spawned = {"source": "task", "task": "bg", "origin": "spawn"}
        await engine.processor.inject(ChatRef("web", "main"), "The sources are in.", spawned)
        answer = page.locator(".msg.assistant.task", has_text="The sources are in.")
        await answer.wait_for()
        assert await answer.locator(".task-label").inner_text() == "Subagent: bg"
        await page.reload()
        await page.wait_for_selector("body[data-ready=true]")
        label = page.locator(".msg.assistant", has_text="The sources are in.").locator(".task-label")
        assert await label.inner_text() == "Subagent: bg"


async def test_a_message_the_agent_wrote_in_another_chat_is_labelled_with_that_chat() -> None:
    """fh9: a message `message_send` brought from the person's Telegram chat showed bare, as if it answered
    the page's last message; it is headed "From telegram:42", live and in the history after a reload."""
    channels = {"telegram": {"enabled": True, "allowedChatIds": [42]}}
    async with signed_in(channels=channels) as session:
        page, stack = session.page, session.stack
        stack.server.reply_tool_calls([("message_send", {"target": "web:main", "text": "hello web from telegram"})])
        stack.server.reply_text("Sent it to the web page.")
        await stack.engine.submit(ChatRef("telegram", "42"), "say hello on the web page")
        sent = page.locator(".msg.assistant.task", has_text="hello web from telegram")
        await sent.wait_for()
        assert await sent.locator(".task-label").inner_text() == "From telegram:42"
        await page.reload()
        await page.wait_for_selector("body[data-ready=true]")
        label = page.locator(".msg.assistant", has_text="hello web from telegram").locator(".task-label")
        assert await label.inner_text() == "From telegram:42"


async def test_at_phone_width_the_header_fits_and_every_tab_and_sign_out_are_visible() -> None:
    async with signed_in(width=390, height=844) as session:
        page = session.page
        await page.wait_for_selector("#engine-status.up")
        session.stack.server.reply_text("A reply with a long unbroken word: " + "x" * 200)
        await say(page, "hello from a phone", 1)
        await page.screenshot(path=str(ARTIFACTS / "web-phone.png"))
        for tab in ("chat", "settings", "inspector", "memory"):
            await page.click(f"nav button[data-tab={tab}]")
            await page.locator(f"#tab-{tab}.active").wait_for()
            sizes = await page.evaluate(
                "[document.documentElement.scrollWidth, document.querySelector('header').scrollWidth]"
            )
            assert max(sizes) <= 390, (tab, sizes)
        for target in ("nav button[data-tab=settings]", "#logout-form button", "#engine-status"):
            box = await page.locator(target).bounding_box()
            assert box is not None and await page.locator(target).is_visible(), target
            assert box["x"] >= 0 and box["x"] + box["width"] <= 390 and box["y"] + box["height"] <= 844, (target, box)
        await page.click("#logout-form button")
        await page.wait_for_url("**/login")


async def test_a_reply_faster_than_the_send_answer_still_marks_the_message_answered() -> None:
    async with signed_in() as session:
        page = session.page

        async def hold_the_answer(route: Any) -> None:
            response = await route.fetch()  # the message is sent; its reply event comes before this answer
            await page.locator(".msg.assistant", has_text="Quick!").wait_for()
            await route.fulfill(response=response)

        await page.route("**/api/messages", hold_the_answer)
        session.stack.server.reply_text("Quick!")
        await page.fill("#input", "be quick")
        await page.press("#input", "Enter")
        await page.locator(".msg.user.answered").wait_for()
        assert await page.locator(".msg.user .meta", has_text="sent").count() == 0


TIME = re.compile(r"\d{1,2}:\d{2}:\d{2}")  # the clock part of toLocaleString, whatever the locale's order


async def test_a_message_just_sent_shows_its_time_and_the_reply_lists_the_turn_s_tool_calls() -> None:
    """Before: the message just sent said "answered" where earlier ones show their time, and nothing
    said the reply's turn had called tools. Now its time, and "Tools used: …" under the reply, live and
    after a reload (the history names each reply's tools)."""
    async with signed_in() as session:
        page, server = session.page, session.stack.server
        server.reply_tool_calls([("current_time", {}), ("current_time", {"timezone": "UTC"})])
        server.reply_tool_calls([("file_list", {})])
        server.reply_text("It is noon, and the workspace holds the prompt files.")
        await page.fill("#input", "what time is it, and what is in the workspace?")
        await page.press("#input", "Enter")
        await page.locator(".msg.assistant", has_text="It is noon").wait_for()
        await page.locator(".msg.user .meta", has_text=TIME).wait_for(timeout=5_000)  # "answered" before
        for moment in ("live", "after a reload"):
            sent = await page.locator(".msg.user .meta").last.inner_text()
            assert TIME.search(sent) and "answered" not in sent, (moment, sent)
            reply = page.locator(".msg.assistant").last
            assert await reply.locator(".tools").inner_text() == "Tools used: current_time ×2, file_list", moment
            assert TIME.search(await reply.locator(".meta").inner_text()), moment
            await page.reload()
            await page.wait_for_selector("body[data-ready=true]")
        server.reply_text("Nothing to look up.")
        await say(page, "thanks", 2)  # the first is history now: shown with its time, marked answered (505)
        assert await page.locator(".msg.assistant").last.locator(".tools").count() == 0  # no tool, no line
        await page.screenshot(path=str(ARTIFACTS / "web-chat-times-and-tools.png"))


async def test_the_page_has_a_favicon_and_the_login_names_both_commands() -> None:
    async with signed_in() as session:
        page = session.page
        status = await page.evaluate("fetch(document.querySelector('link[rel=icon]').href).then(r => r.status)")
        assert status == 200
        async with httpx.AsyncClient(base_url=session.web.url, follow_redirects=True) as client:
            icon = await client.get("/favicon.ico")
            assert icon.status_code == 200 and icon.headers["content-type"].startswith("image/svg+xml")
            login = (await client.get("/login")).text
            assert "klaw serve" in login and "klaw gateway" in login and 'rel="icon"' in login
        assert session.not_found == []


async def test_the_inspector_draws_each_turn_against_its_budget() -> None:
    # A small window and a lenient relevance gate, so the third message's turn recalls the first (auto-RAG).
    overrides: dict[str, Any] = {"context": {"slidingWindow": 2}, "autoRag": {"relevanceThreshold": 2.0}}
    async with signed_in(**overrides) as session:
        page = session.page
        for n, text in enumerate(
            ["remember that my favourite colour is teal", "I also like hiking", "which colour do I like?"], start=1
        ):
            await say(page, text, n)
        await page.click("nav button[data-tab=inspector]")
        turn = page.locator(".turn").first
        await turn.locator("svg.context-bar").wait_for()
        drawn = await turn.locator("svg.context-bar rect.layer").evaluate_all(
            "rects => rects.map(r => [r.dataset.layer, Number(r.getAttribute('x')), Number(r.getAttribute('width'))])"
        )
        numbers = (
            await turn.locator("tbody")
            .first.locator("tr")
            .evaluate_all("rows => rows.map(r => [r.cells[1].textContent, Number(r.cells[2].textContent)])")
        )
        tokens = dict(numbers)
        budget = 3600
        assert {"system_prompt", "auto_rag", "sliding_window", "pending"} <= {name for name, _, _ in drawn}
        x = 0.0
        for name, left, width in drawn:  # blocks side by side, each as wide as its share of the budget
            assert left == pytest.approx(x, abs=0.01) and width == pytest.approx(1000 * tokens[name] / budget, abs=0.01)
            x += width
        assert x < 1000
        colours = page.locator(".turn svg.context-bar rect.layer[data-layer=tools]")
        classes = await colours.evaluate_all("rects => rects.map(r => r.getAttribute('class'))")
        assert len(classes) == 3 and len(set(classes)) == 1  # a layer has one colour in every turn
        hits = turn.locator(".score-fill")
        assert await hits.count() >= 1
        widths = await hits.evaluate_all("bars => bars.map(b => b.style.width)")
        assert widths[0] == "100%"  # the best hit fills its bar; the others are drawn against it
        await turn.locator("td.text", has_text="favourite colour is teal").first.wait_for()
        screenshot = ARTIFACTS / "web-inspector-picture.png"
        await turn.screenshot(path=str(screenshot))
        assert screenshot.stat().st_size > 5_000


async def test_settings_show_a_value_a_command_changed_and_say_so() -> None:
    async with signed_in() as session:
        page = session.page
        await page.fill("#input", "/rag set conversation_limit 5")
        await page.press("#input", "Enter")
        await page.locator(".msg.user.answered").wait_for()
        await page.click("nav button[data-tab=settings]")
        row = page.locator("#settings tr", has=page.locator("td", has_text="rag.conversationLimit"))
        await row.wait_for()
        cells = await row.locator("td").all_inner_texts()
        assert cells == ["rag.conversationLimit", "5", "set by /rag set (overrides default: 3)"]
        untouched = page.locator("#settings tr", has=page.locator("td", has_text="rag.maxTokens"))
        assert (await untouched.locator("td").all_inner_texts())[2] == "default"


async def test_settings_list_the_slash_commands_by_name_as_klaw_config_show_does() -> None:
    """`commands` (what /help and Telegram's menu list) was a JSON dump of every {name, description}
    in the settings tab, while `klaw config show` lists the names."""
    async with signed_in() as session:
        page = session.page
        await page.click("nav button[data-tab=settings]")
        row = page.locator("#settings tr", has=page.locator("td", has_text="commands"))
        await row.first.wait_for()
        cells = await row.first.locator("td").all_inner_texts()
        assert cells[0] == "commands"
        assert cells[1].startswith("/new /") and cells[1].endswith("/help (/help describes each)")
        assert "description" not in cells[1] and "{" not in cells[1]
