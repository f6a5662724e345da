"""A turn's context never goes over the model's budget, whatever a message's size (adversary28, decision 488).

A hand-edited 10 MB message, recovered and answered, built 2,502,451 tokens for a 7,372-token model, which
answered with an error. The window was always fitted to the budget, but a turn's own messages went whole.
Now the largest are cut, at a line that says so, until the context fits; the person is told first, as
before (message_budget.py)."""

from __future__ import annotations

from pathlib import Path

from klaw.llm.tokens import approximate_token_count
from tests.engine.harness import CHAT, running_engine

BUDGET = 4000  # fake/small's contextBudget in the harness; the builder keeps 90 % of it


async def test_a_message_far_over_the_budget_is_cut_with_a_marker_and_the_context_fits(tmp_path: Path) -> None:
    async with running_engine(tmp_path) as h:
        h.server.reply_text("I read the start of it.")
        pasted = "".join(f"line {n}: the quick brown fox jumps over the lazy dog\n" for n in range(1500))
        before = len(h.delivered)
        await h.say(pasted)
        await h.clock.advance(h.engine.config.processing.debounce_ms / 1000)
        await h.wait_for_replies(before + 2)  # the over-budget notice, then the reply

        sent = h.last_request_messages()
        tokens = sum(approximate_token_count(str(m.get("content") or "")) + 4 for m in sent)
        assert tokens <= BUDGET * 0.9
        last = str(sent[-1]["content"])
        assert last.startswith("line 0: the quick brown fox")  # the start of what the person sent
        assert "klaw cut this message here" in last and f"{len(pasted):,} characters" in last
        assert (h.delivered[-1].kind, h.delivered[-1].text) == ("reply", "I read the start of it.")

        # /context's pending layer is what the model was sent, said cut, with the whole size (decision 500)
        said = (await h.engine.submit(CHAT, "/context")).command_reply or ""
        line = next(line for line in said.splitlines() if line.startswith("- pending:"))
        shown = int(line.split("- pending: ")[1].split(" tokens")[0])
        whole = int(line.split("cut from ")[1].split(" tokens")[0])
        assert shown == approximate_token_count(last) + 4, line  # the user message as sent, mark included
        assert abs(whole - approximate_token_count(pasted)) <= 5 and whole > shown * 3, line  # the paste whole
        assert "the model was sent the start of the message" in line, line
        assert sum(int(x.split(": ")[1].split(" tokens")[0]) for x in said.splitlines() if x.startswith("- ")) <= (
            BUDGET * 0.9
        ), said


async def test_a_message_within_the_budget_is_not_said_cut(tmp_path: Path) -> None:
    async with running_engine(tmp_path) as h:
        h.server.reply_text("ok")
        await h.turn("a short question")
        said = (await h.engine.submit(CHAT, "/context")).command_reply or ""
        line = next(line for line in said.splitlines() if line.startswith("- pending:"))
        assert "cut" not in line, line
