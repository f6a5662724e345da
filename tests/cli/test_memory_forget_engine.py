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

from klaw.config_loader import load_config
from klaw.engine.runtime import Engine
from klaw.home import KlawHome
from klaw.home_init import initialise_home
from klaw.llm.fake_server import FakeOpenAiServer
from klaw.store.records import ChatRef
from tests.engine import short_socket_dir
from tests.engine.test_forget_what_was_sent import CHAT, DEBOUNCE_SECONDS, KEPT, running
from tests.serve_helpers import serve_config, write_serve_home

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
            write_serve_home(home.root, serve_config(server.base_url, channels=None))
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


async def test_a_turn_stopped_by_the_command_line_is_not_told_of_a_forget_typed_in_its_chat() -> None:
    """The chat's turn under way when `klaw memory forget` arrives through the socket is stopped, as by
    `/forget`; its message used to be told "/forget was sent while this message waited…", which nobody
    typed in that chat."""
    asked, released = asyncio.Event(), asyncio.Event()

    async def hold() -> None:
        asked.set()
        await released.wait()

    with short_socket_dir() as root:
        home = KlawHome(root / "home")
        initialise_home(home)
        async with FakeOpenAiServer() as server, running(home, server) as r:
            access = r.engine.memory_access
            assert access is not None
            saved = await access.call(CHAT, "memory_save", {"text": "the alarm code is 4711"})
            match = re.fullmatch(r"Saved as memory ([0-9a-f]{8})\.", saved.content)
            assert match, saved.content
            server.reply_text("a slow answer", before=hold)
            await r.send("m-1", "a slow question")
            await r.clock.advance(DEBOUNCE_SECONDS)
            await asyncio.wait_for(asked.wait(), 30)  # m-1's turn is under way, held by the model

            code, said = await forget(home, "memory", match.group(1), "--chat", str(CHAT), "--yes")
            released.set()

            assert code == 0, said
            stopped = await r.outbound_until("m-1")
            assert [(f.kind, f.text) for f in stopped] == [("error", KEPT)]
            assert "/forget" not in KEPT
