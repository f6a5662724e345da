"""Slash commands (CommandHandlerTest and SessionManagerTest,
docs/decisions/009-carried-over-requirements.md), answered without the model."""

from __future__ import annotations

import json
from pathlib import Path

from klaw.command_syntax import ENGINE_COMMANDS, parse_command
from tests.engine.harness import CHAT, running_engine


def test_parse_command() -> None:
    assert parse_command("/model  fake/large ") is not None
    parsed = parse_command("/Model fake/large")
    assert parsed is not None and (parsed.name, parsed.args) == ("model", "fake/large")
    assert parse_command("hello /new") is None
    assert parse_command("/") is None
    assert parse_command("// not a command") is None


async def reply(h: object, text: str) -> str:
    from tests.engine.harness import Harness

    assert isinstance(h, Harness)
    result = await h.engine.submit(CHAT, text)
    assert result.command_reply is not None
    return result.command_reply


async def test_model_shows_switches_and_rejects_unknown(tmp_path: Path) -> None:
    async with running_engine(tmp_path) as h:
        assert await reply(h, "/model") == "Current model: fake/small"
        assert await reply(h, "/model fake/large") == "Switched this chat to fake/large."
        assert await reply(h, "/model") == "Current model: fake/large"
        error = await reply(h, "/model nope/x")
        assert "Unknown model 'nope/x'" in error and "fake/large, fake/small" in error
        await h.turn("hi")
        assert h.server.chat_requests[-1].body["model"] == "large"
        assert h.server.chat_requests == h.server.chat_requests[:1]  # commands never call the model


async def test_models_lists_budgets_and_marks_current(tmp_path: Path) -> None:
    async with running_engine(tmp_path) as h:
        text = await reply(h, "/models")
        assert "- fake/large: 32000" in text
        assert "- fake/small: 4000 (current)" in text


async def test_memory_status_help_context_and_unknown(tmp_path: Path) -> None:
    async with running_engine(tmp_path) as h:
        # `klaw chat` answers a piped typo before any engine by this list (decision 431): the same names
        assert h.engine.commands._handlers.keys() == ENGINE_COMMANDS
        assert (await reply(h, "/memory")).startswith("Core memory is empty.\nNo saved memories in this chat")
        h.home.core_memory_file.write_text(json.dumps({"city": "Porto"}), encoding="utf-8")
        assert '"city": "Porto"' in await reply(h, "/memory")
        await h.clock.advance(3725)
        status = await reply(h, "/status")
        assert "Uptime: 01:02:05" in status
        assert "Model: fake/small" in status and "LLM slots in use: 0/2" in status
        assert "Segment started:" in status and "Queue depth: 0" in status
        assert f"Store: SQLite, {h.home.database_file('klaw.db')}" in status.splitlines()  # decision 456
        assert "/new" in await reply(h, "/help")
        assert "No turn" in await reply(h, "/context")
        await h.turn("hello")
        context = await reply(h, "/context")
        assert "system_prompt" in context and "sliding_window" in context and "tokens" in context
        [pending] = [line for line in context.splitlines() if line.startswith("- pending:")]
        assert pending.endswith("(1 item(s)): the new message(s) the turn answered, sent after everything above")
        assert "Unknown command /frobnicate" in await reply(h, "/frobnicate")


async def test_memory_lists_the_chats_saved_memories_with_the_id_forget_takes(tmp_path: Path) -> None:
    async with running_engine(tmp_path) as h:
        h.server.reply_tool_calls([("memory_save", {"text": "the gate code is 2468"})])
        h.server.reply_text("Saved.")
        await h.turn("remember that the gate code is 2468")
        shown = await reply(h, "/memory")
        assert shown.startswith("Core memory is empty.\nSaved memories in this chat: 1 (newest first;"), shown
        [line] = [line for line in shown.splitlines() if "the gate code is 2468" in line]
        memory_id = line.removeprefix("- ").split(":")[0]
        assert (await reply(h, f"/forget memory {memory_id}")).startswith(f"Forgot memory {memory_id}")
        assert "No saved memories in this chat" in await reply(h, "/memory")


async def test_words_after_new_are_said_not_sent(tmp_path: Path) -> None:
    async with running_engine(tmp_path) as h:
        answer = await reply(h, "/new now please")
        assert answer.startswith("Started a new conversation.")
        assert "The words after /new were not sent ('now please'): send them as a message." in answer
        assert "not sent" not in await reply(h, "/new")
        assert h.server.chat_requests == []


async def test_sessions_survive_restart_and_a_lost_database(tmp_path: Path) -> None:
    async with running_engine(tmp_path) as h:
        await reply(h, "/model fake/large")
        await h.turn("before new")
        await reply(h, "/new")
        await h.turn("after new")
        db = h.home.database_file(h.engine.config.database.path)
    for suffix in ("", "-wal", "-shm"):
        Path(str(db) + suffix).unlink(missing_ok=True)  # the database is lost; the log remains
    async with running_engine(tmp_path) as h:
        assert await reply(h, "/model") == "Current model: fake/large"
        await h.turn("third")
        contents = [m["content"] for m in h.last_request_messages() if m["role"] != "system"]
        assert contents == ["after new", "echo: after new", "third"]


async def test_a_replayed_command_id_changes_nothing_twice(tmp_path: Path) -> None:
    """A gateway that lost an acknowledgement resends the frame with the same id."""
    async with running_engine(tmp_path) as h:
        await h.turn("hello")
        [first] = await h.engine.chats.sessions(CHAT)
        await h.engine.submit(CHAT, "/new", message_id="gw-1")
        second = (await h.engine.chats.sessions(CHAT))[-1]
        await h.engine.submit(CHAT, "/new", message_id="gw-1")
        assert (await h.engine.chats.sessions(CHAT))[-1].id == second.id != first.id
        await h.engine.submit(CHAT, "/new", message_id="gw-2")
        assert len(await h.engine.chats.sessions(CHAT)) == 3

        await h.engine.commands.handle(CHAT, "model", "fake/large", command_id="gw-3")
        await h.engine.commands.handle(CHAT, "model", "fake/small")
        await h.engine.commands.handle(CHAT, "model", "fake/large", command_id="gw-3")  # replay: ignored
        assert (await h.engine.sessions.get_or_create(CHAT)).model == "fake/small"


async def test_an_unknown_long_name_is_quoted_short(tmp_path: Path) -> None:
    """adversary28: `/model` with a 5,000-character name quoted it whole (3 Telegram messages); an unknown
    command's name the same. Now a prefix with an ellipsis, the configured models still listed."""
    async with running_engine(tmp_path) as h:
        error = await reply(h, "/model " + "z" * 5000)
        assert "Unknown model 'zzzz" in error and "…'" in error and "fake/large, fake/small" in error, error
        assert len(error) < 200, len(error)
        unknown = await reply(h, "/" + "q" * 5000)
        assert unknown.startswith("Unknown command /qqq") and "…" in unknown and len(unknown) < 200, unknown
        assert await reply(h, "/model fake/large") == "Switched this chat to fake/large."
