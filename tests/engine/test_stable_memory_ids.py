"""A saved memory's id, as `/memory` shows it, names the same memory after `klaw reindex` and after
`klaw db migrate --to postgres` (docs/decisions/245-stable-memory-ids.md): a real engine saves
memories through the model's `memory_save` over the fake OpenAI server, the maintenance commands run
as a person runs them (processes of their own), and the ids noted before are typed back after."""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from klaw.llm.fake_server import Reply, TextReply, ToolCallsReply, echo_last_user_message
from klaw.store.records import ChatRef
from tests.cli.klaw_here import klaw_here
from tests.conftest import new_database
from tests.engine.harness import CHAT, Harness, running_engine
from tests.pg_server import PgServer

OTHER = ChatRef("console", "someone-else")
LOCKER = "my locker is number 42 in the blue corridor"
BOAT = "the boat is moored at pier seven"
VARIABLE = "KLAW_TEST_DATABASE_URL"
FAKE_EMBEDDER = "embedder:\n  backend: fake\n  dim: 32\nsummarizer:\n  enabled: false\n"


def model_that_saves(body: Mapping[str, Any]) -> Reply:
    """`please remember X` saves X; `look up Y` searches for Y; a tool's result is said back."""
    last = body["messages"][-1]
    content = str(last.get("content") or "")
    if last.get("role") == "user" and content.startswith("please remember "):
        arguments = json.dumps({"text": content.removeprefix("please remember ")})
        return ToolCallsReply((("call_save", "memory_save", arguments),))
    if last.get("role") == "user" and content.startswith("look up "):
        arguments = json.dumps({"query": content.removeprefix("look up ")})
        return ToolCallsReply((("call_search", "memory_search", arguments),))
    if last.get("role") == "tool":
        return TextReply(f"tool said: {last['content']}")
    return echo_last_user_message(body)


async def command(h: Harness, text: str) -> str:
    result = await h.engine.submit(CHAT, text)
    assert result.command_reply is not None
    return result.command_reply


async def memories_shown(h: Harness) -> dict[str, str]:
    """`/memory`'s saved memories: the first words of each, by the id shown."""
    lines = (await command(h, "/memory")).splitlines()
    shown = [re.fullmatch(r"- (\S+): (.*) \(\d{4}-\d\d-\d\d\)", line) for line in lines]
    return {found[2]: found[1] for found in shown if found}


def listed(home: Path, *env: tuple[str, str]) -> dict[str, str]:
    """`klaw memory list`'s saved memories: the first words of each, by id."""
    result = klaw_here(home, "memory", "list", "--chat", str(CHAT), env=dict(env))
    assert result.returncode == 0, result.stderr
    found = [
        re.fullmatch(r"  memory (\S+): [-\d: ]+, segment \d+ \(id \d+\): (.*)", line)
        for line in result.stdout.splitlines()
    ]
    return {match[2]: match[1] for match in found if match}


async def test_an_id_noted_before_a_reindex_and_a_migration_still_forgets_that_memory(
    tmp_path: Path, postgres_server: PgServer
) -> None:
    async with running_engine(tmp_path) as h:
        h.server.default_reply = model_that_saves
        await h.turn("the weather is nice today")
        await h.turn("my own business", chat=OTHER)
        saved = await h.turn(f"please remember {LOCKER}")
        await h.turn(f"please remember {BOAT}")
        await h.turn("something else of mine", chat=OTHER)
        assert (await command(h, "/forget exchange 1")).startswith("Forgot exchange 1")
        noted = await memories_shown(h)
        assert set(noted) == {LOCKER, BOAT}
        assert saved.text == f"tool said: Saved as memory {noted[LOCKER]}."  # what the model was told
        found = json.loads((await h.turn("look up locker corridor")).text.removeprefix("tool said: "))
        assert next(r for r in found if r["kind"] == "memory")["memory_id"] == noted[LOCKER]
        assert all(re.fullmatch(r"[0-9a-f]{8}", memory_id) for memory_id in noted.values())
    home = h.home.root
    h.home.config_file.write_text(FAKE_EMBEDDER, encoding="utf-8")

    assert klaw_here(home, "reindex").returncode == 0  # every row renumbered, the forgotten exchange's gone

    assert listed(home) == noted
    gone = klaw_here(home, "memory", "forget", "memory", noted[BOAT], "--chat", str(CHAT), "--yes")
    assert gone.returncode == 0, gone.stderr
    assert f"Forgot memory {noted[BOAT]}" in gone.stdout
    async with running_engine(tmp_path) as h:
        assert await memories_shown(h) == {LOCKER: noted[LOCKER]}
        assert [m.text for m in await h.engine.chats.saved_memories(CHAT, "boat pier")] == [LOCKER]
        assert await command(h, f"/forget memory {noted[BOAT]}") == (
            f"Cannot forget: there is no memory {noted[BOAT]} in this chat"
            " (/memory in the chat or `klaw memory list` shows each one's id)."
        )

    env = (VARIABLE, postgres_server.dsn(new_database(postgres_server)))
    moved = klaw_here(home, "db", "migrate", "--to", "postgres", "--url-env", VARIABLE, env=dict([env]))
    assert moved.returncode == 0, moved.stderr
    h.home.config_file.write_text(
        f"{FAKE_EMBEDDER}database:\n  backend: postgres\n  urlEnv: {VARIABLE}\n", encoding="utf-8"
    )
    assert listed(home, env) == {LOCKER: noted[LOCKER]}  # the same id in PostgreSQL
    gone = klaw_here(home, "memory", "forget", "memory", noted[LOCKER].upper(), "--yes", env=dict([env]))
    assert gone.returncode == 0, gone.stderr
    assert f"Forgot memory {noted[LOCKER]}" in gone.stdout


async def test_an_old_numeric_id_is_refused_with_what_to_type(tmp_path: Path) -> None:
    async with running_engine(tmp_path) as h:
        h.server.default_reply = model_that_saves
        await h.turn(f"please remember {LOCKER}")
        memory_id = next(iter((await memories_shown(h)).values()))
        said = await command(h, "/forget memory 7")
        assert said == (
            "Cannot forget: saved memories no longer have numbers for ids (as 7 was): an id is 8 letters and digits,"
            " like 3f9a1c2e, and /memory in the chat or `klaw memory list` shows each one's id."
        )
    h.home.config_file.write_text(FAKE_EMBEDDER, encoding="utf-8")
    refused = klaw_here(h.home.root, "memory", "forget", "memory", "7", "--yes")
    assert refused.returncode == 2 and "no longer have numbers" in refused.stderr
    assert "Traceback" not in refused.stderr
    assert LOCKER in klaw_here(h.home.root, "memory", "list").stdout
    kept = klaw_here(h.home.root, "memory", "forget", "memory", memory_id, "--chat", str(OTHER), "--yes")
    assert kept.returncode == 1 and f"there is no memory {memory_id} in this chat" in kept.stderr
