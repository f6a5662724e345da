"""`klaw memory forget` while an engine runs: the real command (a subprocess) asks the engine over its
socket, as `klaw tools` and `klaw mcp serve` do. It used to refuse and say to type `/forget memory ID`
in "one of its chats", and in `klaw chat` (console:root) that answered "there is no memory ID in this
chat": the memory was web:main's."""

from __future__ import annotations

import asyncio
import os
import re
import sys
from pathlib import Path

import yaml

from klaw.config_loader import load_config
from klaw.engine.runtime import Engine
from klaw.home import KlawHome
from klaw.llm.fake_server import FakeOpenAiServer
from klaw.store.records import ChatRef
from tests.engine import short_socket_dir

KLAW = str(Path(sys.executable).with_name("klaw"))
WEB = ChatRef("web", "main")


async def forget(home: KlawHome, *args: str, answer: bytes = b"") -> tuple[int, str]:
    process = await asyncio.create_subprocess_exec(
        KLAW, "memory", "forget", *args, env={**os.environ, "KLAW_HOME": str(home.root), "COLUMNS": "200"},
        stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT,
    )  # fmt: skip
    async with asyncio.timeout(90):
        out, _ = await process.communicate(answer)
    assert process.returncode is not None
    return process.returncode, " ".join(out.decode().split())


async def test_a_saved_memory_is_forgotten_through_the_running_engine() -> None:
    with short_socket_dir() as root:
        home = KlawHome(root / "home")
        async with FakeOpenAiServer() as server:
            home.root.mkdir()
            config = {
                "models": {"fake/small": {"baseUrl": server.base_url, "contextBudget": 4000, "maxRetries": 0}},
                "routing": {"default": "fake/small"},
                "embedder": {"backend": "fake", "dim": 32},
                "summarizer": {"enabled": False},
            }
            home.config_file.write_text(yaml.safe_dump(config), encoding="utf-8")
            engine = await Engine.start(home, load_config(home.config_file).config, listen=True)
            try:
                access = engine.memory_access
                assert access is not None
                saved = await access.call(WEB, "memory_save", {"text": "the alarm code is 4711"})
                match = re.fullmatch(r"Saved as memory ([0-9a-f]{8})\.", saved.content)
                assert match, saved.content
                memory_id = match.group(1)

                code, said = await forget(home, "memory", memory_id, "--chat", "console:root", "--yes")
                assert code == 1 and f"cannot forget: there is no memory {memory_id} in this chat" in said

                code, said = await forget(home, "memory", memory_id, "--chat", str(WEB), answer=b"n\n")
                assert code == 1 and f"This erases memory {memory_id} of {WEB}" in said
                assert "Nothing was forgotten" in said

                code, said = await forget(home, "memory", memory_id, "--chat", str(WEB), "--yes")
                assert code == 0, said
                assert f"Forgot memory {memory_id} through the engine running on {home.root}" in said
                found = await access.call(WEB, "memory_search", {"query": "alarm code"})
                assert "4711" not in found.content
            finally:
                await engine.shutdown(timeout_seconds=5)
