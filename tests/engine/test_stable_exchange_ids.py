"""Exchange ids a person reads and types back stay the same across `/forget` and `klaw reindex`, and
are never handed out twice (docs/decisions/100-stable-exchange-ids.md): a real engine answers over
the fake OpenAI server, `klaw memory forget` and `klaw reindex` run as commands, a new engine reads
the rebuilt database."""

from __future__ import annotations

import asyncio
import os
import sys
from pathlib import Path

from klaw.home import KlawHome
from tests.engine.harness import CHAT, Harness, running_engine

SAID = ("first apple", "second banana", "third cherry")


async def command(h: Harness, text: str) -> str:
    result = await h.engine.submit(CHAT, text)
    assert result.command_reply is not None
    return result.command_reply


async def exchanges_by_id(h: Harness) -> dict[int, str]:
    """Each exchange of the chat, by id, with the user message that opened it."""
    found: dict[int, str] = {}
    for session in await h.engine.chats.sessions(CHAT):
        said = {m.id: m.text for m in await h.engine.chats.history(CHAT, session=session.id)}
        for turn in await h.engine.chats.turns(CHAT, session=session.id):
            assert turn.message is not None
            found[turn.id] = said[turn.message]
    return found


async def klaw(home: KlawHome, *args: str) -> str:
    """`klaw ARGS` on the home, as a person runs it: a process of its own."""
    done = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "klaw",
        *args,
        env={**os.environ, "KLAW_HOME": str(home.root), "COLUMNS": "200"},
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    async with asyncio.timeout(120):
        out, err = await done.communicate()
    assert done.returncode == 0, (out, err)
    return out.decode()


async def test_exchange_ids_survive_forget_and_reindex_and_are_never_reused(tmp_path: Path) -> None:
    async with running_engine(tmp_path) as h:
        for text in SAID:
            await h.turn(text)
        assert await exchanges_by_id(h) == {1: SAID[0], 2: SAID[1], 3: SAID[2]}
        assert "Forgot exchange 1" in await command(h, "/forget exchange 1")
    home = h.home
    home.config_file.write_text("embedder:\n  backend: fake\n  dim: 32\nsummarizer:\n  enabled: false\n")
    assert "Forgot exchange 3" in await klaw(home, "memory", "forget", "exchange", "3", "--chat", "console:me", "--yes")

    await klaw(home, "reindex")

    async with running_engine(tmp_path) as h:
        assert await exchanges_by_id(h) == {2: SAID[1]}  # the banana is still exchange 2
        await h.turn("fourth date")  # a new exchange takes neither a forgotten id (1, 3) nor a kept one
        assert await exchanges_by_id(h) == {2: SAID[1], 4: "fourth date"}
        assert "Forgot exchange 2" in await command(h, "/forget exchange 2")  # the same exchange as before
        assert await exchanges_by_id(h) == {4: "fourth date"}
    await klaw(home, "reindex")
    async with running_engine(tmp_path) as h:
        assert await exchanges_by_id(h) == {4: "fourth date"}
        await h.turn("fifth elderberry")
        assert await exchanges_by_id(h) == {4: "fourth date", 5: "fifth elderberry"}


async def test_segment_ids_survive_forgetting_a_segment_and_reindex(tmp_path: Path) -> None:
    async with running_engine(tmp_path) as h:
        for text in SAID:
            await h.turn(text)
            await command(h, "/new")
        segments = {s.id: s for s in await h.engine.chats.sessions(CHAT)}
        assert sorted(segments) == [1, 2, 3, 4]
        assert "Forgot segment 2" in await command(h, "/forget segment 2 confirm")
    h.home.config_file.write_text("embedder:\n  backend: fake\n  dim: 32\nsummarizer:\n  enabled: false\n")
    await klaw(h.home, "reindex")
    async with running_engine(tmp_path) as h:
        assert await exchanges_by_id(h) == {1: SAID[0], 3: SAID[2]}
        # the third message is still in segment 3
        assert [turn.id for turn in await h.engine.chats.turns(CHAT, session=3)] == [3]
        assert "Forgot segment 3" in await command(h, "/forget segment 3 confirm")
        assert await exchanges_by_id(h) == {1: SAID[0]}
