"""newcomer24 (decision 539, item 13): after `/forget segment number 1 confirm` of a chat's open segment, the
next message went on in the same segment, so `klaw memory list` showed "segment 1 (id 1)" again and a stored
id 1 then named the new messages: `/forget segment 1` would erase them. A forgotten open segment is now ended
(a `session_break` in the log), so the next message starts a segment of a new id, on both backends, and a
`klaw reindex` of the SQLite home keeps it so. A real engine on the fake model, real SQLite and PostgreSQL."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.cli.klaw_here import klaw_here
from tests.conftest import new_database
from tests.engine.harness import CHAT, running_engine
from tests.engine.test_memory_tools_turns import command
from tests.pg_server import PgServer

VARIABLE = "KLAW_TEST_DATABASE_URL"


@pytest.fixture(params=["sqlite", "postgres"])
def database(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> dict[str, Any]:
    if request.param == "sqlite":
        return {}
    server: PgServer = request.getfixturevalue("postgres_server")
    monkeypatch.setenv(VARIABLE, server.dsn(new_database(server)))
    return {"backend": "postgres", "urlEnv": VARIABLE}


async def test_a_forgotten_open_segment_never_lends_its_id_to_the_next_messages(
    tmp_path: Path, database: dict[str, Any]
) -> None:
    async with running_engine(tmp_path, database=database) as h:
        await h.turn("first thing about the miso soup")
        await h.turn("second thing about the miso soup")
        (first,) = await h.engine.chats.sessions(CHAT)
        done = await command(h, "/forget segment number 1 confirm")
        assert done.startswith(f"Forgot segment 1 (id {first.id})"), done

        await h.turn("third thing, about the garden")

        ids = [session.id for session in await h.engine.chats.sessions(CHAT)]
        assert ids[0] == first.id and len(ids) == 2 and ids[1] > first.id, ids
        again = await command(h, f"/forget segment {first.id} confirm")  # a stored id names the forgotten one
        assert again == f"Cannot forget: segment 1 (id {first.id}) holds nothing left to forget.", again
        history = [entry.text for entry in await h.engine.chats.history(CHAT, session=ids[1])]
        assert "third thing, about the garden" in history, history
        if database:
            return
        home = h.home.root
    # SQLite: the log rebuilds the same segments (the break is in it), so the id is not given back by a reindex
    (home / "engine.yaml").write_text("embedder:\n  backend: fake\n  dim: 32\n", encoding="utf-8")
    assert klaw_here(home, "reindex").returncode == 0
    listed = klaw_here(home, "memory", "list", "--chat", str(CHAT))
    assert listed.returncode == 0, listed.stderr
    assert f"segment 2 (id {ids[1]})" in listed.stdout and "third thing" in listed.stdout, listed.stdout
