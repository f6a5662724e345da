"""A log line that is valid JSON but whose metadata has a shape a turn cannot use (a tool call's
`tool_calls` that is no list of calls, a tool result's `name` that is no string, a task label that
is no string) is malformed for every reader: `klaw log check` names it (exit 1), `klaw reindex` skips
it and says so, and the chat's turns go on. Before, `"tool_calls": "notalist"` passed the check ("0
malformed lines"), reindex stored it, and every turn of that chat failed ("Sorry, something went
wrong": TypeError in engine/transcript.py) until the line left the window."""

from __future__ import annotations

import asyncio
import json
from datetime import timedelta
from pathlib import Path
from typing import Any

from klaw.store.records import MessageRecord, MessageType, Role
from tests.cli.klaw_here import klaw_here
from tests.cli.test_reindex_cmd import CHAT, T0, a_home
from tests.engine.harness import running_engine

BAD_METADATA: list[tuple[str, dict[str, Any], str]] = [
    ("tool_call", {"tool_calls": "notalist"}, "metadata.tool_calls of a tool_call record must be a list"),
    (
        "tool_call",
        {"tool_calls": [{"arguments": "{}"}]},
        "each of metadata.tool_calls must have an id and a name (strings)",
    ),
    ("tool_call", {"tool_calls": [7]}, "each of metadata.tool_calls must be an object"),
    (
        "tool_call",
        {"tool_calls": [{"id": "c", "name": "n", "arguments": {}}]},
        "metadata.tool_calls[].arguments must be a string",
    ),
    ("tool_result", {"tool_call_id": "c", "name": 5}, "metadata.tool_call_id and metadata.name of a tool_result"),
    ("text", {"source": "task", "task": ["x"]}, "metadata.task must be a string"),
]


def bad_line(number: int, record_type: str, metadata: dict[str, Any]) -> str:
    role = "tool" if record_type == "tool_result" else "assistant"
    at = (T0 + timedelta(minutes=10, seconds=number)).isoformat(timespec="milliseconds").replace("+00:00", "Z")
    record = {"id": f"bad{number}", "channel": CHAT.channel, "chat_id": CHAT.chat_id, "role": role}
    return json.dumps({**record, "type": record_type, "content": "PRIVATE", "created_at": at, "metadata": metadata})


async def test_bad_metadata_is_malformed_for_check_and_reindex_and_the_chat_still_answers(tmp_path: Path) -> None:
    home = await asyncio.to_thread(a_home, tmp_path)  # it runs a loop of its own
    log_file = next((home / "conversations").glob("*/*.jsonl"))
    with open(log_file, "a", encoding="utf-8") as handle:
        handle.writelines(bad_line(n, kind, metadata) + "\n" for n, (kind, metadata, _) in enumerate(BAD_METADATA))

    check = klaw_here(home, "log", "check")
    assert check.returncode == 1, check.stdout + check.stderr
    assert f"6 records, {len(BAD_METADATA)} malformed lines" in check.stdout
    said = " ".join(check.stdout.split())  # rich wraps long lines
    for number, (_, _, reason) in enumerate(BAD_METADATA, start=7):
        assert f"{log_file}:{number}: {reason}" in said
    reindex = klaw_here(home, "reindex")
    assert reindex.returncode == 0, reindex.stderr
    assert f"{len(BAD_METADATA)} malformed log line(s) skipped" in reindex.stdout
    assert "Traceback" not in check.stderr + reindex.stderr and "PRIVATE" not in check.stdout + reindex.stdout

    async with running_engine(tmp_path) as h:
        h.server.reply_text("the lighthouse, you said")
        reply = await h.turn("what did I say before?", CHAT)
        assert reply.kind == "reply" and reply.text == "the lighthouse, you said"
        sent = h.last_request_messages()
        assert not any(m.get("tool_calls") or m["role"] == "tool" for m in sent)
        assert "message number 5 about the lighthouse" in json.dumps(sent)


async def test_a_store_holding_such_a_record_from_before_leaves_it_out_of_the_context(tmp_path: Path) -> None:
    """A store an older klaw rebuilt from such a line still holds it: the transcript applies the same rule."""
    async with running_engine(tmp_path) as h:
        h.server.reply_text("first")
        await h.turn("hello", CHAT)
        for n, (kind, metadata, _) in enumerate(BAD_METADATA):
            role = Role.TOOL if kind == "tool_result" else Role.ASSISTANT
            record = MessageRecord(CHAT, role, "PRIVATE", type=MessageType(kind), id=f"old{n}", metadata=metadata)
            await h.engine.processor.ingestion.accept(record)
        h.server.reply_text("still answering")
        assert (await h.turn("are you there?", CHAT)).text == "still answering"
        assert "PRIVATE" not in json.dumps(h.last_request_messages())
