"""What a person types to name a saved memory, on SQLite and PostgreSQL (memory/forget_targets.py,
docs/decisions/245-stable-memory-ids.md): the id shown (the start of its log record's id), longer
starts of it in any case, a whole short id from a hand-edited log; an ambiguous start refused with
longer forms to type, an old numeric id refused with where the ids are shown."""

from __future__ import annotations

from dataclasses import replace

import pytest

from klaw.home import KlawHome
from klaw.memory.forgetting import ForgetError, ForgetKind, Forgetting
from klaw.store.archival_records import memory_saved_record
from klaw.store.protocol import Storage
from tests.memory.archive_helpers import ME, OTHER, ScriptedChat

TWINS = ("3f9a1c2e" + "0" * 24, "3f9a1c2e" + "f" * 24)  # two ids the shown 8 characters cannot tell apart


async def saved(chat: ScriptedChat, record_id: str, text: str, *, where: object = ME) -> None:
    record = memory_saved_record(ME if where is ME else OTHER, text, chat.tick())
    await chat.accept(replace(record, id=record_id))


async def test_a_memory_is_named_by_the_start_of_its_id(home: KlawHome, storage: Storage) -> None:
    chat = ScriptedChat(home, storage)
    await saved(chat, TWINS[0], "the bike is in the shed")
    await saved(chat, TWINS[1], "the kayak is in the garage")
    await saved(chat, "77aa" + "1" * 28, "someone else's secret", where=OTHER)
    await saved(chat, "note1", "a memory from a hand-edited log")
    forgetting = Forgetting(chat.ingestion, chat.tick)

    with pytest.raises(ForgetError) as ambiguous:
        await forgetting.plan(ForgetKind.MEMORY, "3f9a1c2e", ME)
    assert str(ambiguous.value) == (
        "memory 3f9a1c2e is the start of 2 memories' ids (3f9a1c2e0, 3f9a1c2ef): type more of it"
    )
    kayak = await forgetting.plan(ForgetKind.MEMORY, "3F9A1C2EF", ME)
    assert kayak.label == "memory 3f9a1c2ef" and [m.record.id for m in kayak.records] == [TWINS[1]]
    whole = await forgetting.plan(ForgetKind.MEMORY, TWINS[0], None)
    assert [m.record.content for m in whole.records] == [""]  # the text lives in memory_chunks alone
    assert (await forgetting.plan(ForgetKind.MEMORY, "note1", ME)).records[0].record.id == "note1"

    for typed, said in (
        ("77aa1111", "there is no memory 77aa1111 in this chat (/memory in the chat or `klaw memory list`"),
        ("3f9a", "there is no memory 3f9a in this chat"),  # shorter than shown: only a whole id
        ("42", "saved memories no longer have numbers for ids (as 42 was)"),
        ("3f9a;drop", "'3f9a;drop' is not a memory id"),
        # adversary21: a 90,000-character paste was echoed whole; now cut, and no id is that long
        ("ab" * 45_000, "'abababababababababababab'… (90000 characters) is not a memory id"),
    ):
        with pytest.raises(ForgetError, match=r"^" + said.replace("(", r"\(").replace(")", r"\)")):
            await forgetting.plan(ForgetKind.MEMORY, typed, ME)
    assert [m.record.id for m in (await forgetting.plan(ForgetKind.MEMORY, "77aa1111", None)).records] == [
        "77aa" + "1" * 28
    ]
