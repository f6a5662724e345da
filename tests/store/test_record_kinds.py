"""One rule tells conversation messages from tool steps and control records: `MessageRecord.kind`.

The SQLite queries cannot load every row to ask it, so they use SQL conditions built from the same
constants (store/sqlite/record_kinds.py). Here each condition is run against every (type, role)
pair in SQLite and must select exactly the rows the Python rule picks."""

from __future__ import annotations

from collections.abc import Callable

import apsw
import pytest

from klaw.store.records import ChatRef, MessageRecord, MessageType, RecordKind, Role
from klaw.store.shared.record_kinds import control_sql, conversation_sql, not_control_sql, user_message_sql

CHAT = ChatRef("console", "me")
PAIRS = [(t, r) for t in MessageType for r in Role]


def test_every_type_and_role_has_exactly_one_kind() -> None:
    kinds = {(t, r): MessageRecord(CHAT, r, "x", type=t).kind for t, r in PAIRS}
    assert kinds[MessageType.TEXT, Role.USER] is RecordKind.USER_MESSAGE
    assert kinds[MessageType.TEXT, Role.ASSISTANT] is RecordKind.REPLY
    assert kinds[MessageType.TEXT, Role.SYSTEM] is RecordKind.OTHER
    assert kinds[MessageType.TOOL_CALL, Role.ASSISTANT] is RecordKind.TOOL_STEP
    assert kinds[MessageType.TOOL_RESULT, Role.TOOL] is RecordKind.TOOL_STEP
    for control in (
        MessageType.EXCHANGE_OPEN,
        MessageType.MODEL_SWITCH,
        MessageType.FORGET,
        MessageType.SEGMENT_SUMMARY,
    ):
        assert {kinds[control, r] for r in Role} == {RecordKind.CONTROL}
    conversation = {pair for pair in PAIRS if MessageRecord(CHAT, pair[1], "x", type=pair[0]).is_conversation}
    assert conversation == {(MessageType.TEXT, Role.USER), (MessageType.TEXT, Role.ASSISTANT)}


def _python(rule: Callable[[MessageRecord], bool]) -> set[tuple[str, str]]:
    return {(t.value, r.value) for t, r in PAIRS if rule(MessageRecord(CHAT, r, "x", type=t))}


@pytest.mark.parametrize(
    ("condition", "rule"),
    [
        (conversation_sql, lambda record: record.is_conversation),
        (user_message_sql, lambda record: record.kind is RecordKind.USER_MESSAGE),
        (control_sql, lambda record: record.is_control),
        (not_control_sql, lambda record: not record.is_control),
    ],
)
@pytest.mark.parametrize("alias", ["m", ""])
def test_each_sql_condition_selects_what_the_python_rule_picks(
    condition: Callable[[str], str], rule: Callable[[MessageRecord], bool], alias: str
) -> None:
    connection = apsw.Connection(":memory:")
    connection.execute("CREATE TABLE messages (type TEXT NOT NULL, role TEXT NOT NULL)")
    connection.executemany("INSERT INTO messages VALUES (?, ?)", [(t.value, r.value) for t, r in PAIRS])
    sql = f"SELECT type, role FROM messages {alias} WHERE {condition(alias)}"
    selected = {(str(t), str(r)) for t, r in connection.execute(sql)}
    assert selected == _python(rule)
    assert selected  # a condition that selects nothing would agree with an empty rule
