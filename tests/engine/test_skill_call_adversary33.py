"""What adversary33 found in skills called by name and commands (decision 543), through the engine (`Engine.submit`,
what the console and the library call) and the fake OpenAI-protocol server showing what the model received:
a `$5` or `${2}` the person typed reached the model filled in turn (the positional pass ran over the text just put
in for `$ARGUMENTS`); a newline, tab or non-breaking space after a name made the whole line an unknown name."""

from __future__ import annotations

from pathlib import Path

from tests.engine.harness import running_engine
from tests.engine.test_skill_called_by_name import received

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
