"""`klaw bench start --chats N`: the home started holds N idle chats, one exchange each (decision 477).

A program serving one chat per customer keeps thousands of chats nobody writes to, and each start walked
them all (40 s for 3,000, adversary27). Each chat is written as the engine leaves a turn: the person's
message, the exchange's open and close records, the reply, marked delivered; through `Ingestion`, so the
log and the store hold the same lines. Then every log file and record dates from an hour before: idle
chats, not ones a crash may have cut off.
"""

from __future__ import annotations

import os
import time
from datetime import timedelta

from klaw.home import KlawHome
from klaw.memory.conversation_log import ConversationLog
from klaw.memory.ingestion import Ingestion
from klaw.store.exchange_records import exchange_close_record, exchange_open_record
from klaw.store.records import ChatRef, ExchangeStatus, MessageRecord, Role, utc_now
from klaw.store.sqlite.store import SqliteStore

IDLE_FOR = timedelta(hours=1)
DATABASE = "klaw.db"  # engine.yaml's database.path as `klaw init` writes it


async def fill_idle_chats(home: KlawHome, count: int) -> None:
    """`count` library chats (`customer-<n>`) of one answered exchange each, last written `IDLE_FOR` ago."""
    at = utc_now() - IDLE_FOR
    store = await SqliteStore.open(home.database_file(DATABASE))
    try:
        ingestion = Ingestion(ConversationLog(home.conversations), store)
        replies: list[str] = []
        for number in range(count):
            chat = ChatRef("library", f"customer-{number}")
            asked = MessageRecord(chat, Role.USER, f"hello, this is customer {number}", created_at=at)
            opened = exchange_open_record(chat, asked.id, at, await store.exchanges.reserve_id())
            reply = MessageRecord(chat, Role.ASSISTANT, "hello, how can I help?", created_at=at)
            closed = exchange_close_record(opened, ExchangeStatus.COMPLETED, reply.id, at)
            await ingestion.accept_together([asked, opened, reply, closed])
            replies.append(reply.id or "")
        await store.exchanges.mark_delivered(replies)
    finally:
        await store.aclose()
    then = time.time() - IDLE_FOR.total_seconds()
    for path in home.conversations.rglob("*.jsonl"):
        os.utime(path, (then, then))
