"""What adversary33 found in skills called by name and commands (decision 543), through the engine (`Engine.submit`,
what the console and the library call) and the fake OpenAI-protocol server showing what the model received:
a `$5` or `${2}` the person typed reached the model filled in turn (the positional pass ran over the text just put
in for `$ARGUMENTS`); a newline, tab or non-breaking space after a name made the whole line an unknown name."""

from __future__ import annotations

from pathlib import Path

from tests.engine.harness import CHAT, running_engine
from tests.engine.test_skill_called_by_name import received, write_skills

PAY = """---
name: pay
description: Pay someone.
---
Pay exactly: $ARGUMENTS. First word $1.
"""


async def test_what_the_person_typed_is_filled_in_once(tmp_path: Path) -> None:
    async with running_engine(tmp_path) as h:
        (h.home.skills_dir / "pay").mkdir(parents=True)
        (h.home.skills_dir / "pay" / "SKILL.md").write_text(PAY, encoding="utf-8")
        h.server.reply_text("Paid.")
        await h.turn("/pay $5 to Bob for ${2} and $1")
        system, user = received(h.server.chat_requests[-1].body)
        assert user == "/pay $5 to Bob for ${2} and $1"
        assert "Pay exactly: $5 to Bob for ${2} and $1. First word $5." in system, system


async def test_any_whitespace_ends_a_name(tmp_path: Path) -> None:
    """Shift+Enter or a paste puts a newline after the name; a tab or a non-breaking space come from pasting."""
    async with running_engine(tmp_path) as h:
        write_skills(h.home.skills_dir)
        h.server.reply_text("Oslo: 3 C.")
        reply = await h.turn("/weather-report\nOslo\tmetric")
        assert reply.text == "Oslo: 3 C."
        system, _ = received(h.server.chat_requests[-1].body)
        assert "Report the weather for Oslo in metric units." in system, system
        asked = len(h.server.chat_requests)
        status = (await h.engine.submit(CHAT, "/status\nplease")).command_reply
        assert status is not None and "Uptime" in status, status
        help_ = (await h.engine.submit(CHAT, "/help\u00a0weather-report")).command_reply
        assert help_ is not None and help_.startswith("/weather-report [words]"), help_
        forget = (await h.engine.submit(CHAT, "/forget\tlast")).command_reply
        assert forget is not None and "Unknown command" not in forget, forget
        assert len(h.server.chat_requests) == asked
