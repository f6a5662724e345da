"""Which messages get a vector (MessageEmbeddingServiceTest's isEligible cases,
docs/decisions/009-carried-over-requirements.md)."""

from __future__ import annotations

import pytest

from klaw.memory.embedding_policy import should_embed
from klaw.store.records import ChatRef, MessageRecord, MessageType, Role

CHAT = ChatRef("console", "me")
LONG = "my grandmother's apple pie recipe uses cinnamon, nutmeg and a splash of lemon juice"  # ~21 tokens
MIN_TOKENS = 10


def record(role: Role, message_type: MessageType = MessageType.TEXT, content: str = LONG) -> MessageRecord:
    return MessageRecord(CHAT, role, content, type=message_type)


def test_user_text_with_enough_tokens_is_embedded() -> None:
    assert should_embed(record(Role.USER), MIN_TOKENS)


def test_assistant_text_with_enough_tokens_is_embedded() -> None:
    assert should_embed(record(Role.ASSISTANT), MIN_TOKENS)


def test_assistant_tool_call_is_not_embedded() -> None:
    assert not should_embed(record(Role.ASSISTANT, MessageType.TOOL_CALL), MIN_TOKENS)


def test_tool_role_is_not_embedded() -> None:
    assert not should_embed(record(Role.TOOL, MessageType.TOOL_RESULT), MIN_TOKENS)
    assert not should_embed(record(Role.TOOL), MIN_TOKENS)


@pytest.mark.parametrize("control", [MessageType.SESSION_BREAK, MessageType.MODEL_SWITCH])
def test_control_records_are_not_embedded(control: MessageType) -> None:
    assert not should_embed(record(Role.USER, control), MIN_TOKENS)
    assert not should_embed(record(Role.SYSTEM, control), MIN_TOKENS)


def test_system_role_is_not_embedded() -> None:
    assert not should_embed(record(Role.SYSTEM), MIN_TOKENS)


def test_content_below_min_message_tokens_is_not_embedded() -> None:
    assert not should_embed(record(Role.USER, content="thanks, ok"), MIN_TOKENS)
    assert not should_embed(record(Role.USER, content=""), 1)
    exactly = "a" * 4 * MIN_TOKENS  # 40 ASCII characters ≈ 10 tokens: the boundary counts
    assert should_embed(record(Role.USER, content=exactly), MIN_TOKENS)
    assert not should_embed(record(Role.USER, content=exactly[:-4]), MIN_TOKENS)
