"""`klaw memory search` through typer's CliRunner, on a store filled with fake-embedder vectors."""

from __future__ import annotations

import asyncio
import re
from pathlib import Path

import pytest
from typer.testing import CliRunner

from klaw.cli.app import app
from klaw.cli.memory_cmd import SHORT_SAMPLE
from klaw.home import KlawHome
from klaw.llm.fake_server import FakeOpenAiServer
from klaw.memory.embedder.fake import FakeEmbedder
from klaw.store.records import Role
from klaw.store.sqlite.store import SqliteStore
from tests.cli.chat_terminal import chat_env, init_home
from tests.cli.piped_chat import piped
from tests.memory.recall_helpers import ALICE, BOB, DIM, Conversation

DEPLOY = "the deploy moves to friday night after the database migration"


def fill(home: KlawHome, *, second_chat: bool = False, embedder: FakeEmbedder | None = None) -> None:
    async def write() -> None:
        store = await SqliteStore.open(home.database_file("klaw.db"))
        try:
            chat = await Conversation(store, embedder).bind()
            await chat.say("[bold]deploy[/bold] plan for friday? let's talk", Role.USER)
            await chat.new_segment()
            await chat.say(DEPLOY, Role.ASSISTANT)
            await chat.say("lunch is at noon", Role.USER)
            if second_chat:
                await chat.say("deploy on saturday", chat=BOB)
        finally:
            await store.aclose()

    asyncio.run(write())


@pytest.fixture
def home(tmp_path: Path) -> KlawHome:
    home = KlawHome(tmp_path / "home")
    home.root.mkdir(parents=True)
    home.config_file.write_text(f"embedder:\n  backend: fake\n  dim: {DIM}\n", encoding="utf-8")
    return home


def run(home: KlawHome, *args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(app, ["memory", "search", *args], env={"KLAW_HOME": str(home.root), "COLUMNS": "200"})
    assert result.exception is None or isinstance(result.exception, SystemExit), result.exception
    return result.exit_code, result.stdout, result.stderr


def test_searches_the_only_chat_current_segment_with_scores(home: KlawHome) -> None:
    fill(home)
    code, out, _ = run(home, "what did we decide about the deploy on friday?", "--segment", "current")
    assert code == 0
    assert "console:alice: current segment" in out
    assert DEPLOY[:60] in out
    assert "[bold]" not in out and "lunch" not in out.split(DEPLOY[:20])[0]
    for column in ("score", "distance", "FTS rank", "role", "segment"):
        assert column in out
    assert re.search(r"\b[01]\.\d{4}\b", out) and "assistant" in out  # fused score: 0..1 plus neighbours' share
    assert "vector side: fake-hash-32" in out
    assert "too short" not in out and "shorter than autoRag.minMessageTokens" not in out


def test_all_segments_and_limit(home: KlawHome) -> None:
    fill(home)
    code, out, _ = run(home, "deploy friday", "--segment", "all", "--limit", "5")
    assert code == 0
    assert "[bold]deploy[/bold]" in out  # the older segment's message, its markup shown as text
    assert DEPLOY[:40] in out
    code, out, _ = run(home, "deploy friday", "--segment", "all", "--limit", "1")
    assert code == 0 and out.count("deploy") == 1


def test_several_chats_need_chat_and_it_is_checked(home: KlawHome) -> None:
    fill(home, second_chat=True)
    code, _, err = run(home, "deploy")
    assert code == 1
    assert "--chat" in err and "console:alice" in err and "telegram:bob" in err
    code, out, _ = run(home, "deploy", "--chat", str(BOB))
    assert code == 0 and "saturday" in out
    code, _, err = run(home, "deploy", "--chat", "console:nobody")
    assert code == 1 and "no chat console:nobody" in err
    code, _, err = run(home, "deploy", "--chat", "no-colon")
    assert code == 1 and "channel:chat_id" in err
    assert "Traceback" not in err


def test_syntax_characters_never_fail_and_unrelated_neighbours_are_explained(home: KlawHome) -> None:
    fill(home)
    for text in ['"unbalanced (NEAR', "🚀", "a AND OR NOT", "col:x*", "zebra"]:
        code, out, err = run(home, text, "--chat", str(ALICE))
        assert code == 0, err
        assert "Traceback" not in err
    assert "beyond the relevance threshold (0.5)" in out  # KNN always has nearest neighbours
    # Into a pipe nothing is dimmed: the legend names the mark those hits carry (newcomer20, decision 490).
    assert "marked [beyond threshold]: found by vectors alone" in " ".join(out.split()) and "dimmed" not in out
    assert out.count("[beyond threshold]") >= 2, out  # the legend and at least one hit
    # A hit without the searched word is explained: its neighbours' words count too (decision 194).
    assert "FTS rank also counts the words of the messages just before and after" in " ".join(out.split())


def test_nothing_found_says_so(home: KlawHome) -> None:
    fill(home, embedder=FakeEmbedder(dim=16))  # full text only: see below
    code, out, _ = run(home, "zebra")
    assert code == 0 and "No message of console:alice" in out and "matches" in out


def test_the_current_segment_search_points_to_the_older_ones(home: KlawHome) -> None:
    """A person searching for what they said before their last /new found nothing and no reason why."""
    fill(home, embedder=FakeEmbedder(dim=16))  # full text only: the plan is in the older segment
    code, out, _ = run(home, "plan", "--segment", "current")
    said = " ".join(out.split())
    assert code == 0 and "No message of console:alice" in said
    assert "Searched the current segment only; 1 older segment of this chat: add --segment all" in said
    code, out, _ = run(home, "plan")  # the whole chat unless told otherwise
    assert code == 0 and "plan for friday" in out and "console:alice: all segments" in out
    assert "--segment all" not in out


def test_missing_database_is_a_clear_error(home: KlawHome) -> None:
    code, _, err = run(home, "deploy")
    assert code == 1 and "does not exist yet" in err


def test_vectors_of_another_embedder_mean_full_text_only(home: KlawHome) -> None:
    fill(home, embedder=FakeEmbedder(dim=16))
    code, out, _ = run(home, "deploy friday")
    assert code == 0
    assert "vector side off" in out and "klaw reindex" in out
    assert DEPLOY[:40] in out


def test_at_80_columns_the_message_gets_the_width(home: KlawHome) -> None:
    """The figures stay on one line each; the message wraps across the width they leave, not a word per line."""
    fill(home)
    terminal = {"KLAW_HOME": str(home.root), "COLUMNS": "80", "TTY_COMPATIBLE": "1"}  # a terminal, 80 wide
    result = CliRunner().invoke(app, ["memory", "search", "deploy friday"], env=terminal)
    assert result.exit_code == 0, result.stdout
    shown = re.sub(r"\x1b\[[0-9;]*m", "", result.stdout)  # as the terminal shows it, styles applied
    assert "the deploy moves to friday night" in shown, shown  # not a word per line
    assert "score" in shown and "distance" in shown and "segment 2" in shown
    assert all(len(line) <= 80 for line in shown.splitlines())


async def test_a_chat_of_short_messages_says_they_are_too_short_to_embed(tmp_path: Path) -> None:
    """lows20: a chat whose messages were all under autoRag.minMessageTokens had no vectors, and the search
    said "vector side: fake-hash-32" above results without a distance, which looked like a broken embedder.
    The messages come in through `klaw chat` (its own ingestion decides what is embedded)."""
    home = tmp_path / "home"
    init_home(home)
    async with FakeOpenAiServer() as model:
        env = chat_env(home, model.base_url)
        for said, reply in (("my pin is 4711", "Noted."), ("what is my pin?", "It is 4711.")):
            model.reply_text(reply)
            assert (await piped(env, said))[:2] == (0, f"{reply}\n")
    search = {"KLAW_HOME": str(home), "COLUMNS": "200", **{k: v for k, v in env.items() if "EMBEDDER" in k}}
    result = await asyncio.to_thread(CliRunner().invoke, app, ["memory", "search", "pin"], env=search)
    said = " ".join(result.stdout.split())
    assert result.exit_code == 0, said
    assert "vector side: fake-hash-32" in said and "my pin is 4711" in said
    assert (
        "No result shown came from the vector side: 4 of the 4 messages searched are shorter than"
        " autoRag.minMessageTokens (10 estimated tokens), so never embedded; full text finds them." in said
    )


def test_a_long_chat_of_short_messages_is_counted_from_its_newest_messages(home: KlawHome) -> None:
    """The line of the test above read every message of the chat (1.8 s and 147 MB for 100,000 short
    ones, most of the command's time); it now reads the newest `SHORT_SAMPLE` and says so."""

    async def write() -> None:
        store = await SqliteStore.open(home.database_file("klaw.db"))
        try:
            chat = await Conversation(store).bind()
            for text in ("ok", "fine", "sure"):
                await chat.say(text, Role.USER, embed=False)
            await chat.new_segment()
            for number in range(SHORT_SAMPLE):
                await chat.say(f"ok {number}", Role.USER if number % 2 else Role.ASSISTANT, embed=False)
        finally:
            await store.aclose()

    asyncio.run(write())
    code, out, _ = run(home, "sure")
    said = " ".join(out.split())
    assert code == 0, said
    assert (
        f"No result shown came from the vector side: {SHORT_SAMPLE} of the newest {SHORT_SAMPLE} messages searched"
        " are shorter than autoRag.minMessageTokens" in said
    ), said
