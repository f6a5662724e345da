"""`/forget segment number N` typed in a chat forgets the chat's segment N, the number its page's Memory tab
and `klaw memory list` show (`Segment 1 (id 2)`), where `/forget segment N` takes the id (decision 415).
Through a real engine: the fake model server, a real SQLite file and the chat's log files."""

from __future__ import annotations

from pathlib import Path

from klaw.store.records import ChatRef
from tests.engine.harness import CHAT, running_engine
from tests.engine.test_memory_tools_turns import command
from tests.memory.archive_helpers import log_text


async def test_forget_segment_number_takes_the_pages_number_and_names_what_the_chat_has(tmp_path: Path) -> None:
    async with running_engine(tmp_path) as h:
        await h.turn("a segment of another chat first, so numbers and ids differ", chat=ChatRef("console", "other"))
        await h.turn("the heron nests by the mill pond")
        await command(h, "/new")
        await h.turn("the kestrel hunts over the ring road")
        first, _second = await h.engine.chats.sessions(CHAT)
        assert first.id != 1  # segment number 1 of this chat is not id 1

        assert await command(h, "/forget segment number 9") == (
            f"Cannot forget: {CHAT} has no segment number 9: it has segments 1 to 2; `klaw memory list --chat"
            f" {CHAT}` shows each one's number and id."
        )
        assert await command(h, "/forget segment number x") == (
            "Cannot forget: a segment's number is a whole number from 1, as the Memory tab and `klaw memory list`"
            " show it, not 'x'."
        )
        huge = "9" * 5000  # int() refuses more than 4,300 digits with a ValueError (adversary20)
        assert await command(h, f"/forget segment number {huge}") == (
            "Cannot forget: a segment's number is a whole number from 1, as the Memory tab and `klaw memory list`"
            " show it, not '999999999999999999999999'… (5000 characters)."
        )
        refused = await command(h, f"/forget exchange {huge}")
        assert refused.startswith("Cannot forget: '999999999999999999999999'… (5000 characters) is not an exchange")
        assert "heron" in log_text(h.home)

        assert await command(h, "/forget segment number") == (
            "Cannot forget: which segment? Give its number: /forget segment number N (the Memory tab and"
            " `klaw memory list` show the numbers)."
        )
        answer = await command(h, "/forget segment number 1 confirm")  # asked first without it (decision 526)
        assert answer.startswith(f"Forgot segment 1 (id {first.id}): "), answer  # the number typed, and the id
        assert await command(h, "/forget segment number 1") == (
            f"Cannot forget: segment 1 (id {first.id}) holds nothing left to forget."
        )
        assert "heron" not in log_text(h.home) and "kestrel" in log_text(h.home)
