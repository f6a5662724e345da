"""`klaw memory forget` through typer's CliRunner, on a home written through real ingestion."""

from __future__ import annotations

import asyncio
import errno
import logging
import os
import signal
import socket
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from klaw.cli.app import app
from klaw.home import KlawHome
from klaw.memory.conversation_log import ConversationLog
from klaw.memory.reindex import reindex
from klaw.store.records import ChatRef
from klaw.store.sqlite.store import SqliteStore
from tests.memory.archive_helpers import DIM, ME, OTHER, ScriptedChat, config, database_bytes, log_text

SECRET = "cassowarymarmalade"


@pytest.fixture
def home(tmp_path: Path) -> KlawHome:
    home = KlawHome(tmp_path / "home")
    home.root.mkdir(parents=True)
    home.config_file.write_text(f"embedder:\n  backend: fake\n  dim: {DIM}\n", encoding="utf-8")
    return home


def fill(home: KlawHome) -> dict[str, int]:
    async def write() -> dict[str, int]:
        store = await SqliteStore.open(home.database_file("klaw.db"))
        try:
            chat = ScriptedChat(home, store)
            gone = await chat.turn(f"the safe combination is {SECRET}", reply="noted")
            await chat.new_segment()
            await chat.turn("what is for lunch", reply="soup")
            theirs = await chat.turn("something of theirs", reply="ok", chat=OTHER)
            exchange_id = await chat.exchange_id(gone)
            their_segment = theirs.opened.segment_id
            return {"segment": gone.opened.segment_id, "exchange": exchange_id, "their_segment": their_segment}
        finally:
            await store.aclose()

    return asyncio.run(write())


def run(home: KlawHome, *args: str, answer: str | None = None) -> tuple[int, str, str]:
    result = CliRunner().invoke(
        app, ["memory", "forget", *args], input=answer, env={"KLAW_HOME": str(home.root), "COLUMNS": "200"}
    )
    assert result.exception is None or isinstance(result.exception, SystemExit), result.exception
    return result.exit_code, result.stdout, result.stderr


def test_forget_a_segment_with_confirmation(home: KlawHome) -> None:
    ids = fill(home)
    code, out, _ = run(home, "segment", str(ids["segment"]), answer="n\n")
    assert code == 1 and "This erases segment" in out and "1 exchange(s)" in out and "Nothing was forgotten" in out
    assert SECRET in log_text(home)
    code, out, _ = run(home, "segment", str(ids["segment"]), "--chat", str(ME), answer="y\n")
    assert code == 0 and f"Forgot segment {ids['segment']}" in out and "1 log file(s) rewritten" in out
    assert SECRET not in log_text(home) and "lunch" in log_text(home)


def test_forget_an_exchange_with_yes_and_refusals(home: KlawHome) -> None:
    ids = fill(home)
    code, _, err = run(home, "segment", str(ids["their_segment"]), "--chat", "console:me", "--yes")
    assert code == 1 and f"there is no segment {ids['their_segment']} in this chat" in err
    # numbers are global, not per chat: the refusal says where this chat's numbers are shown
    assert "`klaw memory list --chat console:me` shows its ids" in " ".join(err.split())
    code, _, err = run(home, "exchange", "9999", "--yes")
    assert code == 1 and "there is no exchange 9999" in err
    assert "`klaw memory list --chat CHANNEL:CHAT_ID` shows its ids" in " ".join(err.split())
    code, _, err = run(home, "exchange", "1", "--chat", "not-a-chat", "--yes")
    assert code == 2 and "channel:chat_id" in err
    code, _, err = run(home, "message", "1")
    assert code == 2
    code, out, _ = run(home, "exchange", str(ids["exchange"]), "-y")
    assert code == 0 and "Forgot exchange" in out and SECRET not in log_text(home)


def test_reindex_honours_the_commands_tombstone_even_from_a_log_restored_from_before(home: KlawHome) -> None:
    ids = fill(home)
    before = {path: path.read_bytes() for path in home.conversations.rglob("*.jsonl")}
    assert run(home, "exchange", str(ids["exchange"]), "--yes")[0] == 0
    [holder] = [path for path in home.conversations.rglob("*.jsonl") if b'"type":"forget"' in path.read_bytes()]
    tombstones = [line for line in holder.read_bytes().splitlines(keepends=True) if b'"type":"forget"' in line]
    assert len(tombstones) == 1 and SECRET.encode() not in tombstones[0]
    for path, content in before.items():  # a backup of the log from before the forget is put back…
        path.write_bytes(content)
    holder.write_bytes(before.get(holder, b"") + b"".join(tombstones))  # …with the tombstone written since
    assert SECRET in log_text(home)

    asyncio.run(reindex(home, config()))

    async def search(text: str) -> list[str]:
        store = await SqliteStore.open(home.database_file("klaw.db"))
        try:
            return [hit.message.content for hit in await store.search.full_text(ME, text, limit=5)]
        finally:
            await store.aclose()

    assert asyncio.run(search(SECRET)) == [] and "what is for lunch" in asyncio.run(search("lunch"))
    assert SECRET.encode() not in database_bytes(home.database_file("klaw.db"))


def test_an_engine_that_does_not_answer_on_its_socket_is_said(home: KlawHome, monkeypatch: pytest.MonkeyPatch) -> None:
    """A running engine is asked to forget over its socket (test_memory_forget_engine.py); one that accepts
    but never answers is said, with the `/forget` to type in the chat the target belongs to."""
    monkeypatch.setattr("klaw.cli.memory_forget_socket.PLAN_TIMEOUT_SECONDS", 0.5)
    ids = fill(home)
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        listener.bind(str(home.socket_path))
        listener.listen()
        code, _, err = run(home, "segment", str(ids["segment"]), "--yes")
    finally:
        listener.close()
    said = " ".join(err.split())
    assert code == 1 and "an engine is running" in said and f"/forget segment {ids['segment']}` in the chat" in said
    assert SECRET in log_text(home)


def test_a_home_without_a_database(tmp_path: Path) -> None:
    home = KlawHome(tmp_path / "empty")
    home.root.mkdir()
    code, _, err = run(home, "segment", "1", "--yes")
    assert code == 1 and "nothing to forget" in err


def test_log_check_says_it_could_not_look_for_an_interrupted_forget(home: KlawHome) -> None:
    """The unfinished forgets are read from klaw.db: one that cannot be opened skipped that check silently, exit 0
    (decision 460). The log itself is still checked."""
    fill(home)
    home.database_file("klaw.db").write_bytes(b"not a database " * 400)
    check = CliRunner().invoke(app, ["log", "check"], env={"KLAW_HOME": str(home.root), "COLUMNS": "300"})
    said = " ".join(check.stdout.split())
    assert check.exit_code == 1, said
    assert "records, 0 malformed lines" in said
    assert "Not checked: whether an interrupted forget left text a person erased in the log" in said
    assert "is not a klaw database or is damaged" in said


def test_an_id_past_sqlites_range_is_a_usage_error_not_a_traceback(home: KlawHome) -> None:
    fill(home)
    code, _, err = run(home, "exchange", "99999999999999999999", "--yes")
    assert code == 2 and "Invalid value for 'ID'" in err and "Traceback" not in err


def test_the_confirmation_shows_a_chat_id_as_written(home: KlawHome) -> None:
    """`burst:one` followed by the sentence's colon is not rich's emoji code `:one:` (adversary9), and
    brackets in a chat id are not markup."""

    async def write() -> int:
        store = await SqliteStore.open(home.database_file("klaw.db"))
        try:
            chat = ScriptedChat(home, store)
            turn = await chat.turn("hello", reply="hi", chat=ChatRef("burst", "one"))
            return await chat.exchange_id(turn)
        finally:
            await store.aclose()

    exchange_id = asyncio.run(write())
    code, out, _ = run(home, "exchange", str(exchange_id), answer="n\n")
    assert code == 1 and f"This erases exchange {exchange_id} of burst:one for good: " in " ".join(out.split()), out


def test_a_segment_is_named_by_its_number_in_the_chat_and_its_id(home: KlawHome) -> None:
    """The web page's Memory tab numbers a chat's segments from 1; ids run across all chats (decision 275).
    The CLI now says both, `segment 1 (id 3)`, and forgets by either, with words that say which (decision
    402): the id stays the bare argument, as scripts pass it; the number needs --number and --chat."""
    ids = fill(home)
    theirs = ids["their_segment"]
    assert theirs != 1  # the other chat's first segment: number 1, a later id
    listed = CliRunner().invoke(app, ["memory", "list", "--chat", str(OTHER)], env={"KLAW_HOME": str(home.root)})
    assert listed.exit_code == 0 and f"segment 1 (id {theirs}):" in listed.stdout, listed.stdout

    code, out, _ = run(home, "segment", str(ids["segment"]), answer="n\n")  # an id, as before
    assert code == 1 and f"This erases segment 1 (id {ids['segment']}) of {ME} for good:" in " ".join(out.split()), out
    code, _, err = run(home, "segment", "1", "--chat", str(OTHER), "--yes")  # still an id: the ME chat's
    assert code == 1 and "there is no segment 1 in this chat" in err
    code, _, err = run(home, "segment", "--chat", str(OTHER), "--number", "2", "--yes")
    assert code == 1 and f"{OTHER} has no segment number 2: it has segment 1" in " ".join(err.split()), err
    code, _, err = run(home, "segment", "--chat", "web:mian", "--number", "1", "--yes")  # a typo: the chats named
    said = " ".join(err.split())
    assert code == 1 and "no chat web:mian is stored (the stored chats: " in said and str(OTHER) in said, said
    code, _, err = run(home, "segment", "--number", "1", "--yes")
    assert code == 2 and "add --chat CHANNEL:CHAT_ID" in " ".join(err.split()), err
    code, _, err = run(home, "segment", str(theirs), "--chat", str(OTHER), "--number", "1", "--yes")
    assert code == 2 and "not both" in err
    code, _, err = run(home, "exchange", "--chat", str(OTHER), "--number", "1", "--yes")
    assert code == 2 and "a exchange is named by its id" in " ".join(err.split()), err
    code, _, err = run(home, "segment", "--yes")
    assert code == 2 and "--chat CHANNEL:CHAT_ID --number N" in " ".join(err.split()), err

    code, out, _ = run(home, "segment", "--chat", str(OTHER), "--number", "1", "--yes")
    assert code == 0 and f"Forgot segment 1 (id {theirs}):" in out, out
    assert "something of theirs" not in log_text(home) and SECRET in log_text(home)


class _Killed(Exception):
    """The process killed (SIGKILL) right after the tombstone was stored, before the log files were rewritten."""


def test_a_forget_killed_before_the_log_rewrite_is_named_and_finished_without_an_engine(
    home: KlawHome, monkeypatch: pytest.MonkeyPatch
) -> None:
    """adversary25 M2 (decision 454): the text stayed in the log, `klaw log check` said nothing, the same
    forget again said 'there is no exchange N' and `klaw reindex` left it: only an engine start finished it."""
    ids = fill(home)
    rewrite = ConversationLog.remove_records

    async def killed(*_args: object, **_kwargs: object) -> list[Path]:
        raise _Killed

    def interrupted(*args: str) -> None:
        monkeypatch.setattr(ConversationLog, "remove_records", killed)
        result = CliRunner().invoke(app, ["memory", "forget", *args, "--yes"], env={"KLAW_HOME": str(home.root)})
        assert isinstance(result.exception, _Killed)
        monkeypatch.setattr(ConversationLog, "remove_records", rewrite)

    interrupted("exchange", str(ids["exchange"]))
    assert SECRET in log_text(home)
    check = CliRunner().invoke(app, ["log", "check"], env={"KLAW_HOME": str(home.root), "COLUMNS": "300"})
    said = " ".join(check.stdout.split())
    assert check.exit_code == 1 and f"the text of exchange {ids['exchange']} of {ME}: gone from the database" in said
    assert f"`klaw memory forget exchange {ids['exchange']} --yes` finishes it" in said
    code, out, _ = run(home, "exchange", str(ids["exchange"]), "--yes")  # the same command again finishes it
    assert code == 0 and f"the text of exchange {ids['exchange']} of {ME} is out of the log now" in " ".join(
        out.split()
    )
    assert SECRET not in log_text(home)

    interrupted("segment", str(ids["their_segment"]))
    assert "something of theirs" in log_text(home)
    reindexed = CliRunner().invoke(app, ["reindex"], env={"KLAW_HOME": str(home.root), "COLUMNS": "300"})
    assert (
        reindexed.exit_code == 0 and f"segment {ids['their_segment']} of {OTHER} is out of the log" in reindexed.stdout
    )
    assert "something of theirs" not in log_text(home) and "what is for lunch" in log_text(home)
    assert CliRunner().invoke(app, ["log", "check"], env={"KLAW_HOME": str(home.root)}).exit_code == 0


def test_ctrl_c_after_the_tombstone_lets_the_log_rewrite_end(home: KlawHome, monkeypatch: pytest.MonkeyPatch) -> None:
    """A Ctrl-C (SIGINT) as the log files are about to be rewritten: the rewrite ends, exit 130 says so."""
    ids = fill(home)
    rewrite = ConversationLog.remove_records

    async def ctrl_c_first(self: ConversationLog, *args: Any) -> list[Path]:
        os.kill(os.getpid(), signal.SIGINT)
        await asyncio.sleep(0.05)  # asyncio.run's handler cancels the command's task meanwhile
        return await rewrite(self, *args)

    monkeypatch.setattr(ConversationLog, "remove_records", ctrl_c_first)
    code, out, _ = run(home, "exchange", str(ids["exchange"]), "--yes")
    assert code == 130 and f"Interrupted, once exchange {ids['exchange']} was forgotten: it is out of" in out
    assert SECRET not in log_text(home)


def test_a_forget_leaves_the_forgetting_log_lines_on(home: KlawHome, caplog: pytest.LogCaptureFixture) -> None:
    """Finishing an interrupted forget quiets its own warning, and only while it runs: set to ERROR for the
    rest of the process, the forget's own line ("forgot exchange 7 …", `--verbose`) was dropped (review51)."""
    ids = fill(home)
    caplog.set_level(logging.INFO, logger="klaw.memory.forgetting")
    code, _, _ = run(home, "exchange", str(ids["exchange"]), "--yes")
    assert code == 0
    assert any(r.getMessage().startswith(f"forgot exchange {ids['exchange']} of chat") for r in caplog.records)
    assert logging.getLogger("klaw.memory.forgetting").level == logging.INFO


def test_a_forget_stopped_before_clearing_its_note_is_said_finished(
    home: KlawHome, monkeypatch: pytest.MonkeyPatch
) -> None:
    """adversary26 L5 (decision 468): killed after the log rewrite, before its note was dropped, `klaw log check`
    said the log still held the text (exit 1), while it did not; it says the forget finished now (exit 0)."""
    from klaw.memory.forgetting import Forgetting

    ids = fill(home)
    note = Forgetting._note_pending

    async def killed_before_unnote(self: Forgetting, tombstone_id: str, *, add: bool) -> None:
        if not add:
            raise _Killed
        await note(self, tombstone_id, add=add)

    monkeypatch.setattr(Forgetting, "_note_pending", killed_before_unnote)
    result = CliRunner().invoke(app, ["memory", "forget", "exchange", str(ids["exchange"]), "--yes"], env=ENV(home))
    assert isinstance(result.exception, _Killed)
    monkeypatch.setattr(Forgetting, "_note_pending", note)
    assert SECRET not in log_text(home)
    check = CliRunner().invoke(app, ["log", "check"], env=ENV(home))
    said = " ".join(check.stdout.split())
    assert check.exit_code == 0, said
    assert f"A forget of exchange {ids['exchange']} of {ME} was stopped after it finished" in said
    assert "still holding" not in said
    code, _, _ = run(home, "segment", str(ids["their_segment"]), "--yes")  # any forget clears the note
    assert code == 0
    assert "was stopped after it finished" not in CliRunner().invoke(app, ["log", "check"], env=ENV(home)).stdout


def test_a_forget_whose_tombstone_reached_the_log_not_the_database_is_named(
    home: KlawHome, monkeypatch: pytest.MonkeyPatch
) -> None:
    """adversary26 L6 (decision 468): the disk full once the tombstone's line was written, the database kept the
    text; `klaw memory forget` said only "no space left" and `klaw log check` nothing (exit 0). Both say the
    forget did not finish and how it finishes; the same command again finishes it."""
    from klaw.memory.ingestion import Ingestion
    from klaw.store.records import MessageType

    ids = fill(home)
    append = Ingestion._append

    async def full_after_the_log(self: Ingestion, logged: Any, embed: Any, write: Any) -> Any:
        if logged[0].type is MessageType.FORGET:
            write()  # the line is durable in the log; then the database's write fails
            raise OSError(errno.ENOSPC, "No space left on device")
        return await append(self, logged, embed, write)

    monkeypatch.setattr(Ingestion, "_append", full_after_the_log)
    result = CliRunner().invoke(app, ["memory", "forget", "exchange", str(ids["exchange"]), "--yes"], env=ENV(home))
    monkeypatch.setattr(Ingestion, "_append", append)
    assert isinstance(result.exception, OSError)  # worded by `klaw`'s main as any full disk is ("no space left")
    told = " ".join(result.stdout.split())
    assert f"A forget of exchange {ids['exchange']} of {ME} did not finish: its tombstone reached the log" in told
    assert SECRET in log_text(home) and '"type":"forget"' in log_text(home)
    check = CliRunner().invoke(app, ["log", "check"], env=ENV(home))
    said = " ".join(check.stdout.split())
    assert check.exit_code == 1, said  # was 0, and nothing said
    assert "its text is still in the database, search and the log. The next engine start finishes it" in said
    code, out, _ = run(home, "exchange", str(ids["exchange"]), "--yes")
    assert code == 0 and f"Forgot exchange {ids['exchange']}" in out
    assert SECRET not in log_text(home)
    assert CliRunner().invoke(app, ["log", "check"], env=ENV(home)).exit_code == 0


def ENV(home: KlawHome) -> dict[str, str]:
    return {"KLAW_HOME": str(home.root), "COLUMNS": "300"}


def test_a_mistyped_chat_on_a_home_of_many_names_the_closest_few(home: KlawHome) -> None:
    """`klaw memory list --chat library:nope` on a home of 3,000 chats printed all of them, 47 KB
    (adversary27 L3): past 20 the closest 5 are named and the rest counted (decision 479)."""

    async def write() -> None:
        store = await SqliteStore.open(home.database_file("klaw.db"))
        try:
            chat = ScriptedChat(home, store)
            for n in range(40):
                await chat.turn("hello", reply="hi", chat=ChatRef("library", f"shelf{n}"))
        finally:
            await store.aclose()

    asyncio.run(write())
    env = {"KLAW_HOME": str(home.root), "COLUMNS": "200"}
    listed = CliRunner().invoke(app, ["memory", "list", "--chat", "library:shelf7x"], env=env)
    said = " ".join(listed.stderr.split())
    assert listed.exit_code != 0 and "library:shelf7" in said and "and 35 more of the 40 chats stored" in said, said
    assert "library:shelf21" not in said
    code, _, err = run(home, "segment", "--chat", "library:shelf7x", "--number", "1", "--yes")
    said = " ".join(err.split())
    assert code == 1 and "library:shelf7," in said and "and 35 more of the 40 chats stored" in said, said
    assert "library:shelf21" not in said


def test_forget_discards_the_build_an_interrupted_reindex_left(home: KlawHome) -> None:
    """adversary29 (decision 503): `klaw reindex` killed mid-way left `klaw.db.reindex` (and its WAL) holding
    the text; `klaw memory forget` erased it everywhere else, and `grep -r` still found it there. Now the
    unfinished build is discarded (a build read from the log before a forget cannot be finished) and said."""
    from tests.memory.test_reindex import Interrupted

    ids = fill(home)
    with pytest.raises(KeyboardInterrupt):  # Ctrl-C in its embedding stage: the build stays, to resume
        asyncio.run(reindex(home, config(), embedder=Interrupted()))
    build = home.database_file("klaw.db.reindex")
    assert build.exists()

    def holding() -> list[str]:
        return sorted(p.name for p in home.root.rglob("*") if p.is_file() and SECRET.encode() in p.read_bytes())

    assert "klaw.db.reindex" in " ".join(holding())
    code, out, _ = run(home, "exchange", str(ids["exchange"]), "--yes")
    said = " ".join(out.split())
    assert code == 0 and "Forgot exchange" in said, said
    assert f"The unfinished build an interrupted 'klaw reindex' left ({build}) held it too and was discarded" in said
    assert holding() == [] and not build.exists()
    asyncio.run(reindex(home, config()))  # and a reindex starts over from the log, without it
    assert SECRET.encode() not in database_bytes(home.database_file("klaw.db"))
