"""newcomer23 (decision 526): `/forget segment number 1` erased 98 messages at once, with no confirmation, and
`/forget segment 1` (one word less) names another segment, by its id. A segment of more than one message is now
asked about first: what would go (counts, dates), by number and id, and the same words with `confirm` erase it.
A real engine on the fake OpenAI-protocol server, a real SQLite file and the chat's log files."""

from __future__ import annotations

from pathlib import Path

from klaw.store.records import ChatRef
from tests.engine.harness import CHAT, running_engine
from tests.engine.test_memory_tools_turns import command
from tests.memory.archive_helpers import log_text


async def test_forgetting_a_segment_asks_first_and_names_the_other_spelling(tmp_path: Path) -> None:
    async with running_engine(tmp_path) as h:
        await h.turn("a segment of another chat first, so numbers and ids differ", chat=ChatRef("console", "other"))
        await h.turn("the heron nests by the mill pond")
        await h.turn("and the otter swims below it")
        await command(h, "/new")
        await h.turn("the kestrel hunts over the ring road")
        first, second = await h.engine.chats.sessions(CHAT)
        assert (first.id, second.id) == (2, 3)

        asked = await command(h, "/forget segment number 1")
        assert asked.startswith(
            f"/forget segment number 1 would erase segment 1 (id {first.id}): 4 message(s), 2 exchange(s), from "
        ), asked
        assert "Nothing is erased yet: send `/forget segment number 1 confirm` to erase it for good." in asked
        assert "heron" not in asked  # no content: the question stays in the chat's history
        assert "heron" in log_text(h.home)  # nothing erased

        by_id = await command(h, "/forget segment 2")  # id 2 is segment number 1; segment number 2 is id 3
        assert by_id.startswith(f"/forget segment 2 would erase segment 1 (id {first.id}): 4 message(s)"), by_id
        assert (
            "`/forget segment 2` takes a segment's id; the segment the Memory tab and `klaw memory list` number 2"
            f" is id {second.id}: `/forget segment number 2` names that one." in by_id
        ), by_id
        assert "heron" in log_text(h.home)

        done = await command(h, "/forget segment number 1 confirm")
        assert done.startswith(f"Forgot segment 1 (id {first.id}): 4 message(s), 2 exchange(s)"), done
        assert "heron" not in log_text(h.home) and "kestrel" in log_text(h.home)
        last = await command(h, "/forget last")  # one exchange: at once, as before
        assert last.startswith("Forgot exchange "), last
        assert "kestrel" not in log_text(h.home)


def test_the_readme_names_the_confirm_a_segment_asks_for() -> None:
    """Review of session 56 (decision 528): README.md's slash-command line gave /forget's forms but not the
    `confirm` a segment now asks for, nor `/help NAME` (decision 527)."""
    readme = (Path(__file__).parents[1] / "README.md").read_text(encoding="utf-8")
    line = next(line for line in readme.splitlines() if line.startswith("`/context`"))
    assert "/forget last|" in line and "`confirm`" in line, line
    assert "`/help [NAME]`" in readme
