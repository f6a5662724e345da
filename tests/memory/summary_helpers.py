"""Exchanges written straight into a real store as a turn writes them (user message, exchange_open,
reply, exchange_close), for the summary store, summarizer and retrieval tests."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import UTC, datetime, timedelta
from typing import Any

from klaw.llm.fake_server import Reply, TextReply, echo_last_user_message
from klaw.memory.summaries.prompts import BATCH_INSTRUCTIONS, EXCHANGE_INSTRUCTIONS, SEGMENT_INSTRUCTIONS
from klaw.store.exchange_records import exchange_close_record, exchange_open_record
from klaw.store.protocol import Storage
from klaw.store.records import ChatRef, Exchange, ExchangeStatus, MessageRecord, MessageType, Role

ALICE = ChatRef("console", "alice")
T0 = datetime(2026, 3, 1, 9, 0, tzinfo=UTC)


class Turns:
    """Appends turns a few seconds apart; `open_turn` leaves one in progress."""

    def __init__(self, store: Storage, chat: ChatRef = ALICE) -> None:
        self.store = store
        self.chat = chat
        self._tick = 0

    def now(self) -> datetime:
        self._tick += 1
        return T0 + timedelta(seconds=5 * self._tick)

    async def turn(
        self, question: str, answer: str | None, status: ExchangeStatus = ExchangeStatus.COMPLETED
    ) -> Exchange:
        opened = await self.open_turn(question)
        final_id = None
        if answer is not None:
            final = await self.store.messages.append(
                MessageRecord(self.chat, Role.ASSISTANT, answer, created_at=self.now())
            )
            final_id = final.record.id
        await self.store.messages.append(exchange_close_record(opened, status, final_id, self.now()))
        return await self.latest()

    async def open_turn(self, question: str) -> MessageRecord:
        user = await self.store.messages.append(MessageRecord(self.chat, Role.USER, question, created_at=self.now()))
        opened = exchange_open_record(self.chat, user.record.id, self.now())
        await self.store.messages.append(opened)
        return opened

    async def close(self, opened: MessageRecord, answer: str) -> Exchange:
        final = await self.store.messages.append(
            MessageRecord(self.chat, Role.ASSISTANT, answer, created_at=self.now())
        )
        await self.store.messages.append(
            exchange_close_record(opened, ExchangeStatus.COMPLETED, final.record.id, self.now())
        )
        return await self.latest()

    async def new_segment(self) -> int:
        await self.store.messages.append(
            MessageRecord(self.chat, Role.SYSTEM, "", type=MessageType.SESSION_BREAK, created_at=self.now())
        )
        return (await self.store.segments.current(self.chat)).id

    async def latest(self) -> Exchange:
        segments = await self.store.segments.list(self.chat)
        for segment in reversed(segments):
            exchanges = await self.store.exchanges.for_segment(segment.id)
            if exchanges:
                return max(exchanges, key=lambda e: e.id)
        raise AssertionError("no exchange stored")


def summarizing_reply(body: Mapping[str, Any]) -> Reply:
    """A fake model that summarizes like the prompts ask, deterministically, keeping the topic's words
    (so the fake embedder finds related summaries); any other request is echoed as usual."""
    messages = [m for m in body.get("messages") or [] if isinstance(m, dict)]
    system = str(messages[0].get("content") or "") if messages else ""
    user = str(messages[-1].get("content") or "") if messages else ""
    if system == EXCHANGE_INSTRUCTIONS:
        asked = user.split("The person wrote:\n", 1)[1].split("\n\n", 1)[0]
        return TextReply(f"Summary: The person asked: {asked}")
    if system == BATCH_INSTRUCTIONS:  # "### Exchange N" parts, answered "N. …" one line each
        parts = user.split("### Exchange ")[1:]
        lines = [f"{n}. The person asked: {_asked(part)}" for n, part in enumerate(parts, start=1)]
        return TextReply("\n".join(lines))
    if system == SEGMENT_INSTRUCTIONS:
        so_far = user.split("Summary so far:\n", 1)[1].split("\n\n", 1)[0]
        new = user.split("New exchanges, oldest first:\n", 1)[1].splitlines()
        parts = [] if so_far == "(none yet)" else [so_far]
        parts += [line.split(". ", 1)[1] for line in new]
        return TextReply(" ".join(parts))
    return echo_last_user_message(body)


def _asked(part: str) -> str:
    return part.split("The person wrote:\n", 1)[1].split("\n\n", 1)[0]


def is_summary_request(body: Any) -> bool:
    messages = body.get("messages") if isinstance(body, dict) else None
    if not messages:
        return False
    return messages[0].get("content") in (EXCHANGE_INSTRUCTIONS, BATCH_INSTRUCTIONS, SEGMENT_INSTRUCTIONS)
