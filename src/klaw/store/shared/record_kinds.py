"""`RecordKind` (store/records.py) as SQL conditions on a `messages` row, for queries that must not
load every row to ask `MessageRecord.kind`.

They are built from the same constants as the Python rule, and a test runs each against every
(type, role) pair in a real database and compares it with `MessageRecord.kind`, so the two cannot
drift. `alias` is the name the query gives `messages` ("" for none).
"""

from __future__ import annotations

from klaw.store.records import CONTROL_TYPES, CONVERSATION_ROLES, MessageType, Role


def _column(alias: str, name: str) -> str:
    return f"{alias}.{name}" if alias else name


def _listed(values: tuple[str, ...]) -> str:
    return "(" + ", ".join(f"'{value}'" for value in values) + ")"


def conversation_sql(alias: str = "m") -> str:
    """The row is user or assistant text (`MessageRecord.is_conversation`)."""
    return (
        f"{_column(alias, 'type')} = '{MessageType.TEXT.value}'"
        f" AND {_column(alias, 'role')} IN {_listed(CONVERSATION_ROLES)}"
    )


def user_message_sql(alias: str = "m") -> str:
    """The row is text a person wrote (`RecordKind.USER_MESSAGE`)."""
    return f"{_column(alias, 'role')} = '{Role.USER.value}' AND {_column(alias, 'type')} = '{MessageType.TEXT.value}'"


def control_sql(alias: str = "m") -> str:
    """The row is a control record (`MessageRecord.is_control`)."""
    return f"{_column(alias, 'type')} IN {_listed(CONTROL_TYPES)}"


def not_control_sql(alias: str = "m") -> str:
    """The row is anything a model may be shown: conversation and tool steps."""
    return f"{_column(alias, 'type')} NOT IN {_listed(CONTROL_TYPES)}"
