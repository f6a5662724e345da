"""`klaw memory list` shows the ids `klaw memory forget` needs: segments and exchanges with dates and
first words, after real turns through the engine; a listed id is the one forget erases."""

from __future__ import annotations

import re
from pathlib import Path

from tests.cli.klaw_here import klaw_here
from tests.engine.harness import CHAT, running_engine


async def test_list_shows_segments_and_exchanges_with_ids_and_first_words(tmp_path: Path) -> None:
    async with running_engine(tmp_path) as h:
        await h.turn("[urgent] book the dentist for tuesday")
        await h.engine.submit(CHAT, "/new")
        await h.turn("what is the weather like in Lisbon")
    home = tmp_path / "home"
    result = klaw_here(home, "memory", "list", "--chat", str(CHAT))
    assert result.returncode == 0, result.stderr
    out = result.stdout
    assert "segment 1 (id 1):" in out and "segment 2 (id 2):" in out and "(current)" in out
    when = r"\d{4}-\d\d-\d\d \d\d:\d\d"  # the zone follows the times, then what the segment is
    assert re.search(rf"segment 1 \(id 1\): {when} – {when} UTC, \d message", out), out
    assert re.search(rf"segment 2 \(id 2\): {when} UTC \(current\), \d message", out), out
    assert "exchange 1:" in out and "[urgent] book the dentist for tuesday" in out
    assert "exchange 2:" in out and "what is the weather like in Lisbon" in out
    first, second = out.index("segment 1 (id"), out.index("segment 2 (id")
    assert first < out.index("exchange 1:") < second < out.index("exchange 2:")


async def test_search_after_new_finds_what_was_said_before_it(tmp_path: Path) -> None:
    """`klaw memory search` looks through the whole chat by default: a person looking for last week's words
    after a `/new` found nothing (it searched the current segment unless given --segment all)."""
    async with running_engine(tmp_path) as h:
        await h.turn("the plumber comes on thursday at nine")
        await h.engine.submit(CHAT, "/new")
        await h.turn("what is the weather like in Lisbon")
    home = tmp_path / "home"
    found = klaw_here(home, "memory", "search", "plumber thursday")
    assert found.returncode == 0, found.stderr
    assert "the plumber comes on thursday at nine" in found.stdout and f"{CHAT}: all segments" in found.stdout
    narrower = klaw_here(home, "memory", "search", "plumber thursday", "--segment", "current")
    assert "the plumber comes" not in narrower.stdout
    assert "add --segment all to search them too" in " ".join(narrower.stdout.split())
    helped = " ".join(klaw_here(home, "memory", "search", "--help").stdout.split())
    assert "all: the whole chat, every segment" in helped and "[default: all]" in helped


def test_list_without_a_database_says_so(tmp_path: Path) -> None:
    result = klaw_here(tmp_path, "memory", "list")
    assert result.returncode == 1
    assert "does not exist yet" in result.stderr


async def test_list_and_search_default_to_the_console_chat_when_the_agent_wrote_elsewhere_too(tmp_path: Path) -> None:
    """Once another chat was stored, `klaw memory list`/`search` refused ("several chats are stored") while
    `klaw tools` defaults to the person's console chat; now they all do, and say which chat they read."""
    import getpass

    from klaw.store.records import ChatRef

    mine = ChatRef("console", getpass.getuser() or "local")
    web = ChatRef("web", "main")
    async with running_engine(tmp_path) as h:
        await h.turn("the plumber comes on thursday at nine", chat=mine)
        await h.turn("the plumber also fixes the web sink", chat=web)
    home = tmp_path / "home"
    listed = klaw_here(home, "memory", "list")
    assert listed.returncode == 0, listed.stderr
    assert listed.stdout.startswith(str(mine)) and "thursday at nine" in listed.stdout
    assert "web sink" not in listed.stdout
    found = klaw_here(home, "memory", "search", "plumber")
    assert found.returncode == 0, found.stderr
    assert f"{mine}: all segments" in found.stdout and "web sink" not in found.stdout
    other = klaw_here(home, "memory", "list", "--chat", str(web))
    assert other.returncode == 0 and "web sink" in other.stdout
