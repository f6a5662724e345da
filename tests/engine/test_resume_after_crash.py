"""Messages stored but never answered (the engine died first) get their turn at the next start."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

from klaw.engine.clock import ManualClock
from klaw.engine.transcript import UNKNOWN_RESULT, tool_calls_metadata
from klaw.home import KlawHome
from klaw.home_init import initialise_home
from klaw.llm.messages import ToolCall
from klaw.memory.conversation_log import ConversationLog
from klaw.memory.ingestion import Ingestion
from klaw.store.exchange_records import exchange_close_record, exchange_open_record
from klaw.store.records import ChatRef, ExchangeStatus, MessageRecord, MessageType, Role
from klaw.store.sqlite.store import SqliteStore
from tests.engine.harness import CHAT, running_engine

NOW = ManualClock().now()  # the harness clock's start


async def stored_before_start(tmp_path: Path, records: list[MessageRecord]) -> None:
    """What a previous run left: records in the log and the database, as the engine writes them."""
    home = KlawHome(tmp_path / "home")
    initialise_home(home)
    store = await SqliteStore.open(home.database_file("klaw.db"))
    try:
        ingestion = Ingestion(ConversationLog(home.conversations), store)
        for record in records:
            await ingestion.accept(record)
    finally:
        await store.aclose()


def said(text: str, minutes_ago: float, chat: ChatRef = CHAT, role: Role = Role.USER) -> MessageRecord:
    return MessageRecord(chat, role, text, created_at=NOW - timedelta(minutes=minutes_ago))


async def test_an_unanswered_message_is_answered_after_restart(tmp_path: Path) -> None:
    answered = said("first question", 10)
    opened = exchange_open_record(CHAT, answered.id, NOW - timedelta(minutes=10))
    reply = said("first answer", 9.9, role=Role.ASSISTANT)
    await stored_before_start(
        tmp_path,
        [
            answered,
            opened,
            reply,
            exchange_close_record(opened, ExchangeStatus.COMPLETED, reply.id, NOW - timedelta(minutes=9.9)),
            said("acknowledged, then the engine died", 2),
        ],
    )
    async with running_engine(tmp_path) as h:
        await h.clock.advance(h.engine.config.processing.debounce_ms / 1000)
        await h.wait_for_replies(1)
    # After shutdown (which drains every turn): nothing else was answered.
    assert [o.text for o in h.delivered] == ["echo: acknowledged, then the engine died"]
    assert len(h.server.chat_requests) == 1  # the answered question was not asked again


async def test_a_turn_cut_off_mid_way_is_run_again_but_old_and_failed_ones_are_not(tmp_path: Path) -> None:
    other = ChatRef("console", "other")
    failed = said("this one failed", 20, chat=other)
    failed_open = exchange_open_record(other, failed.id, NOW - timedelta(minutes=20))
    cut_off = said("cut off mid-turn", 3)
    await stored_before_start(
        tmp_path,
        [
            said("from yesterday, never answered", 24 * 60),
            failed,
            failed_open,
            exchange_close_record(failed_open, ExchangeStatus.FAILED, None, NOW - timedelta(minutes=20)),
            cut_off,
            exchange_open_record(CHAT, cut_off.id, NOW - timedelta(minutes=3)),  # never closed
        ],
    )
    async with running_engine(tmp_path) as h:
        await h.clock.advance(h.engine.config.processing.debounce_ms / 1000)
        await h.wait_for_replies(1)
    assert [o.text for o in h.delivered] == ["echo: cut off mid-turn"]
    assert len(h.server.chat_requests) == 1


async def test_every_unanswered_message_is_resumed_however_many(tmp_path: Path) -> None:
    """30 acknowledged messages (more than the 20-message window) all reach the model, in one turn."""
    texts = [f"unanswered message {n}" for n in range(30)]
    await stored_before_start(tmp_path, [said(text, 5 - n / 10) for n, text in enumerate(texts)])
    async with running_engine(tmp_path) as h:
        assert h.engine.config.context.sliding_window < len(texts)
        await h.clock.advance(h.engine.config.processing.debounce_ms / 1000)
        await h.wait_for_replies(1)
    assert len(h.server.chat_requests) == 1  # merged, as debounce would
    sent = h.last_request_messages()[-1]
    assert sent["role"] == "user"
    assert sent["content"].split("\n") == texts


async def test_a_message_arriving_live_is_not_resumed_as_well(tmp_path: Path) -> None:
    """A message taken live and still waiting for its turn is queued once, whatever resume finds."""
    async with running_engine(tmp_path) as h:
        await h.say("arrived while the engine was starting")
        assert await h.engine.processor.resuming.resume_unanswered() == 0
        await h.clock.advance(h.engine.config.processing.debounce_ms / 1000)
        await h.wait_for_replies(1)
    assert h.last_request_messages()[-1]["content"] == "arrived while the engine was starting"


async def test_a_turn_killed_while_its_tools_ran_shows_the_model_what_it_had_set_going(tmp_path: Path) -> None:
    """The engine died during a tool round: the calls were recorded, one result too, the other never
    (its tool still ran). The resumed turn's model sees both calls, the recorded result and, for the
    other, that its outcome is unknown: it is not asked afresh as if nothing had been done, which made
    a model send the message or run the command a second time. (The calls were dropped before.) They
    come after the person's message, as they were made: the model goes on from its own calls."""
    asked = said("text Ann that I am late, then run the backup", 3)
    opened = exchange_open_record(CHAT, asked.id, NOW - timedelta(minutes=3))
    calls = [
        ToolCall("call_send", "message_send", '{"target": "telegram:42", "text": "running late"}'),
        ToolCall("call_backup", "host_exec", '{"command": "backup --all"}'),
    ]
    call_record = MessageRecord(
        CHAT, Role.ASSISTANT, "", type=MessageType.TOOL_CALL, metadata=tool_calls_metadata(calls),
        created_at=NOW - timedelta(minutes=2.9),
    )  # fmt: skip
    sent = MessageRecord(
        CHAT, Role.TOOL, "Sent to telegram:42.", type=MessageType.TOOL_RESULT,
        metadata={"tool_call_id": "call_send", "name": "message_send", "is_error": False},
        created_at=NOW - timedelta(minutes=2.8),
    )  # fmt: skip
    await stored_before_start(tmp_path, [asked, opened, call_record, sent])
    async with running_engine(tmp_path) as h:
        await h.clock.advance(h.engine.config.processing.debounce_ms / 1000)
        await h.wait_for_replies(1)
    messages = h.last_request_messages()
    assert [m["role"] for m in messages[-4:]] == ["user", "assistant", "tool", "tool"]  # as it was made
    assert messages[-4]["content"] == "text Ann that I am late, then run the backup"
    [calling] = [m for m in messages if m["role"] == "assistant" and m.get("tool_calls")]
    assert [c["id"] for c in calling["tool_calls"]] == ["call_send", "call_backup"]
    results = {m["tool_call_id"]: m["content"] for m in messages if m["role"] == "tool"}
    assert results == {"call_send": "Sent to telegram:42.", "call_backup": UNKNOWN_RESULT}
    assert "may or may not have taken effect" in UNKNOWN_RESULT


async def test_a_message_sent_while_the_cut_off_tools_ran_comes_after_them(tmp_path: Path) -> None:
    """The person wrote again while the tools ran ("stop"), then the engine died: the resumed turn shows
    the first message, the calls with their unknown results, then the later message, as it happened,
    not the calls after both as if made once told to stop (adversary7)."""
    asked = said("run the backup", 3)
    opened = exchange_open_record(CHAT, asked.id, NOW - timedelta(minutes=3))
    calls = [ToolCall("call_backup", "host_exec", '{"command": "backup --all"}')]
    call_record = MessageRecord(
        CHAT, Role.ASSISTANT, "", type=MessageType.TOOL_CALL, metadata=tool_calls_metadata(calls),
        created_at=NOW - timedelta(minutes=2.9),
    )  # fmt: skip
    stop = said("STOP, do not run the backup, the disk is full", 2.8)
    await stored_before_start(tmp_path, [asked, opened, call_record, stop])
    async with running_engine(tmp_path) as h:
        await h.clock.advance(h.engine.config.processing.debounce_ms / 1000)
        await h.wait_for_replies(1)
    shown = [(m["role"], m.get("content")) for m in h.last_request_messages()[-4:]]
    assert shown == [
        ("user", "run the backup"),
        ("assistant", None),
        ("tool", UNKNOWN_RESULT),
        ("user", "STOP, do not run the backup, the disk is full"),
    ]
