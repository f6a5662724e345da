"""Approval on the web page in a real headless Chromium: the question to run a held tool (`file_write`)
arrives as a notice with Approve and Deny buttons; Approve sends `/approve ID` through the gateway while
the turn waits, the file is written and the reply follows; Deny refuses the next one."""

from __future__ import annotations

from typing import Any

from tests.channels.browser import needs_chromium, signed_in

pytestmark = needs_chromium


async def test_approve_and_deny_buttons_answer_the_question_in_chromium() -> None:
    overrides: dict[str, Any] = {"tools": {"approval": ["file_write"]}}
    async with signed_in(1000, 800, **overrides) as session:
        stack, page = session.stack, session.page
        await page.wait_for_selector("#engine-status.up")

        stack.server.reply_tool_calls([("file_write", {"path": "yes.txt", "content": "approved <b>text</b>"})])
        stack.server.reply_text("Wrote yes.txt.")
        await page.fill("#input", "write yes.txt")
        await page.press("#input", "Enter")
        question = page.locator(".msg.notice", has_text="The agent wants to run file_write:")
        await question.wait_for()
        # The arguments are shown literally (text, not HTML), the buttons under them, in a code block as
        # klaw chat shows them: no ``` fence lines (before, the notice showed them as plain text).
        assert "content: approved <b>text</b>" in await question.locator("pre").inner_text()
        assert "```" not in await question.inner_text()
        assert not (stack.home.workspace / "yes.txt").exists()
        await question.locator("button.approve").click()
        await page.locator(".msg.notice", has_text="Approved: file_write runs now.").wait_for()
        await page.locator(".msg.assistant", has_text="Wrote yes.txt.").wait_for()
        assert (stack.home.workspace / "yes.txt").read_text(encoding="utf-8") == "approved <b>text</b>"
        assert await question.locator("button.approve").is_disabled()

        stack.server.reply_tool_calls([("file_write", {"path": "no.txt", "content": "refused"})])
        stack.server.reply_text("I did not write it.")
        await page.fill("#input", "write no.txt")
        await page.press("#input", "Enter")
        second = page.locator(".msg.notice", has_text="path: no.txt")
        await second.wait_for()
        await second.locator("button.deny").click()
        await page.locator(".msg.notice", has_text="Denied: file_write will not run.").wait_for()
        await page.locator(".msg.assistant", has_text="I did not write it.").wait_for()
        assert not (stack.home.workspace / "no.txt").exists()
