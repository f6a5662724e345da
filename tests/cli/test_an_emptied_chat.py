"""A chat whose only segment was forgotten has no messages, and the commands that want a chat with messages
say so (newcomer20, decision 490): `klaw schedule add --inject-into` and `klaw mcp serve --chat` listed it
among "the chats with messages" after `klaw memory forget segment … --yes` emptied it."""

from __future__ import annotations

import asyncio
from pathlib import Path

from klaw.llm.fake_server import FakeOpenAiServer
from tests.cli.chat_terminal import USER, chat_env, init_home
from tests.cli.klaw_here import klaw_here
from tests.cli.piped_chat import piped


async def test_an_emptied_chat_is_not_one_with_messages(tmp_path: Path) -> None:
    home = tmp_path / "home"
    init_home(home)
    chat = f"console:{USER}"
    async with FakeOpenAiServer() as model:
        env = chat_env(home, model.base_url)
        assert (await piped(env, "hello there\n"))[0] == 0
    kept = await asyncio.to_thread(
        klaw_here, home, "schedule", "add", "b", "--every", "1h", "-m", "x", "--inject-into", chat
    )
    assert kept.returncode == 0, kept.stderr  # a chat with messages: accepted
    assert (await asyncio.to_thread(klaw_here, home, "schedule", "remove", "b")).returncode == 0
    forgot = await asyncio.to_thread(
        klaw_here, home, "memory", "forget", "segment", "--chat", chat, "--number", "1", "--yes"
    )
    assert forgot.returncode == 0, forgot.stdout + forgot.stderr
    refused = await asyncio.to_thread(
        klaw_here, home, "schedule", "add", "b", "--every", "1h", "-m", "x", "--inject-into", chat
    )
    said = " ".join(refused.stderr.split())
    assert refused.returncode == 2 and f"no chat {chat} has any messages (no chat has messages yet)" in said, said
