"""The note for messages alone over the model's budget (decision 285) measures a turn's messages as the
context builder does: joined. Two messages sent close together, each within the budget and over it
together, are said as such, before the answer; a turn within the budget gets no note. In process, with
the fake OpenAI server as the model."""

from __future__ import annotations

from pathlib import Path

from tests.engine.harness import running_engine

HALF = "a line of the pasted log\n" * 50  # 1,250 characters: ~300 tokens, under the 450-token budget


async def test_two_messages_over_the_budget_together_are_said_together_before_the_answer(tmp_path: Path) -> None:
    small = {"fake/small": {"contextBudget": 500, "maxRetries": 0}}
    async with running_engine(tmp_path, models=small, tools={"enabled": []}) as h:
        for name in ("SOUL.md", "IDENTITY.md", "AGENTS.md"):  # within a file's share of 450 tokens (decision 473)
            (h.home.workspace / name).write_text("Be brief.\n", encoding="utf-8")
        h.server.reply_text("short answer")
        assert (await h.turn("a short question")).text == "short answer"
        assert [o.kind for o in h.delivered] == ["reply"]  # within the budget: nothing said

        h.server.reply_text("That is a long log.")
        await h.say(HALF)
        await h.say(HALF)  # within the debounce: one turn answers both
        await h.clock.advance(h.engine.config.processing.debounce_ms / 1000)
        await h.wait_for_replies(3)
        note, reply = h.delivered[1:]
        assert (note.kind, note.reply_to) == ("notice", None)
        assert note.text.startswith("These 2 messages are ~") and "over the 450-token budget of fake/small" in note.text
        assert (reply.kind, reply.text) == ("reply", "That is a long log.")
