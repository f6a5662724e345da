"""`klaw mcp serve` as another MCP client meets it: the official SDK's own client starts the real command
(a subprocess) over stdio, or connects over streamable HTTP, lists klaw's memory tools and calls them on a
home whose chat was filled through the library. With an engine running the calls go through its socket;
without one the command opens the home itself. The desktop configuration in docs/mcp.md is run exactly as
written. Writes are refused without --allow-write; HTTP without the web token is refused."""

from __future__ import annotations

import asyncio
import json
import os
import re
import signal
import sys
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack, asynccontextmanager
from pathlib import Path
from typing import Any

import httpx
import httpx2
import pytest
from mcp import Client, StdioServerParameters
from mcp.client.stdio import stdio_client
from mcp.client.streamable_http import streamable_http_client
from mcp.types import CallToolResult, TextContent

from klaw import Klaw
from klaw.config_loader import load_config
from klaw.distribution import klaw_version
from klaw.engine.runtime import Engine
from klaw.home import KlawHome
from klaw.llm.fake_server import FakeOpenAiServer
from klaw.store.records import ChatRef
from tests.cli.inited_home import init_home
from tests.cli.test_start_imports import PROGRAM
from tests.engine import short_socket_dir
from tests.serve_helpers import STARTS_WITHIN, exit_status, serve_config, write_serve_home

CHAT = ChatRef("telegram", "123456789")
DOCS = Path(__file__).resolve().parents[2] / "docs" / "mcp.md"
KLAW = str(Path(sys.executable).with_name("klaw"))
READ_TOOLS = ["fetch_conversation_details", "memory_core_get", "memory_search"]


def text(result: CallToolResult) -> str:
    return "\n".join(block.text for block in result.content if isinstance(block, TextContent))


@asynccontextmanager
async def filled_home() -> AsyncIterator[KlawHome]:
    """A home (short path: it holds the engine's socket) whose chat told klaw where the spare key is,
    with a fact in core memory; fake model and embedder, as engine.yaml says."""
    with short_socket_dir() as root:
        home = KlawHome(root / "home")
        async with FakeOpenAiServer() as server:
            write_serve_home(home.root, serve_config(server.base_url, channels=None))
            async with Klaw(home) as agent:
                await agent.ask(CHAT, "the spare key is under the blue flowerpot")
            home.core_memory_file.write_text(json.dumps({"city": "Porto"}), encoding="utf-8")
            yield home


@asynccontextmanager
async def running_engine(home: KlawHome) -> AsyncIterator[Engine]:
    engine = await Engine.start(home, load_config(home.config_file).config, listen=True)
    try:
        yield engine
    finally:
        await engine.shutdown(timeout_seconds=5)


def desktop_config() -> dict[str, Any]:
    """The `mcpServers` JSON block of docs/mcp.md, as a person would paste it."""
    blocks = re.findall(r"```json\n(.*?)```", DOCS.read_text(encoding="utf-8"), re.S)
    configs = [json.loads(block) for block in blocks if "mcpServers" in block]
    assert len(configs) == 1
    server = configs[0]["mcpServers"]["klaw-memory"]
    assert isinstance(server, dict)
    return server


async def test_the_desktop_configuration_in_the_docs_runs_as_written_and_is_read_only(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    entry = desktop_config()
    assert entry["command"] == "klaw" and entry["args"] == ["mcp", "serve", "--chat", str(CHAT)]
    monkeypatch.setenv("PATH", f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}")
    async with filled_home() as home:  # no engine runs: the command opens the home itself
        env = {**entry["env"], "KLAW_HOME": str(home.root)}  # the person's home, here the test's
        if "PYTHONPATH" in os.environ:  # the klaw under test (a worktree's src), not the installed one
            env["PYTHONPATH"] = os.environ["PYTHONPATH"]
        async with Client(StdioServerParameters(command=entry["command"], args=entry["args"], env=env)) as client:
            tools = (await client.list_tools()).tools
            assert sorted(tool.name for tool in tools) == READ_TOOLS
            assert all("\n " not in (tool.description or "") for tool in tools)  # before: "best\n        first"
            info = client.server_info
            assert info is not None and (info.name, info.version) == ("klaw", klaw_version())
            found = await client.call_tool("memory_search", {"query": "where is the spare key"})
            assert not found.is_error and "under the blue flowerpot" in text(found)
            over = await client.call_tool("memory_search", {"query": "key", "limit": 50})
            assert over.is_error and text(over).startswith("invalid arguments:\n- limit: ")  # as the agent's tools
            assert "pydantic" not in text(over) and "validation error" not in text(over)  # before: pydantic's text
            core = await client.call_tool("memory_core_get", {})
            assert json.loads(text(core))["memory"] == {"city": "Porto"}
            segment = json.loads(text(found))[0]["segment_id"]
            details = await client.call_tool("fetch_conversation_details", {"segment_id": segment})
            assert not details.is_error and "blue flowerpot" in text(details)
            huge = await client.call_tool("fetch_conversation_details", {"exchange_id": 10**30})
            assert huge.is_error and "exchange_id" in text(huge) and "9223372036854775807" in text(huge)
            assert "OverflowError" not in text(huge)  # before: "OverflowError: int too big to convert"
            refused = await client.call_tool("memory_save", {"text": "the code is 1234"})
            assert refused.is_error and "read-only" in text(refused) and "--allow-write" in text(refused)
            assert "Unknown tool" not in text(refused)  # before: only "Unknown tool: memory_save"
        # the engine it opened is closed: a later engine starts on the home
        async with running_engine(home) as engine:
            assert engine.memory_access is not None


async def test_with_an_engine_running_calls_go_through_its_socket_and_allow_write_saves(tmp_path: Path) -> None:
    """Forwarding to the engine loads none of the engine's modules: no store, no numpy, no tools (they were
    1.3-1.5 s of this command's CPU before its first answer: decision 457). The command runs as the `klaw`
    script does, with a probe writing the modules it loaded as it exits."""
    names = tmp_path / "modules.json"
    async with filled_home() as home, running_engine(home) as engine, AsyncExitStack() as stack:
        errors = stack.enter_context((tmp_path / "stderr.txt").open("w+"))
        env = {"KLAW_HOME": str(home.root)}
        if "PYTHONPATH" in os.environ:  # the klaw under test (a worktree's src), not the installed one
            env["PYTHONPATH"] = os.environ["PYTHONPATH"]
        args = ["-c", PROGRAM, str(names), "mcp", "serve", "--chat", str(CHAT), "--allow-write"]
        params = StdioServerParameters(command=sys.executable, args=args, env=env)
        client = await stack.enter_async_context(Client(stdio_client(params, errlog=errors)))
        assert sorted(tool.name for tool in (await client.list_tools()).tools) == sorted([*READ_TOOLS, "memory_save"])
        saved = await client.call_tool("memory_save", {"text": "the wifi password is on the fridge"})
        assert re.fullmatch(r"Saved as memory [0-9a-f]{8}\.", text(saved))
        assert engine.memory_access is not None  # the engine's own search finds what the other client saved
        found = await engine.memory_access.call(CHAT, "memory_search", {"query": "wifi password"})
        assert "on the fridge" in found.content
        task_log = await engine.memory_access.call(ChatRef("scheduler", "digest"), "memory_save", {"text": "x"})
        assert task_log.is_error and "holds task logs" in task_log.content
        again = await client.call_tool("memory_search", {"query": "where is the spare key"})
        assert "under the blue flowerpot" in text(again)
        errors.seek(0)
        assert "using the engine running on" in errors.read()
    modules = set(json.loads(names.read_text(encoding="utf-8")))
    engines = {
        "numpy",
        "apsw",
        "httpx",
        "klaw.library",
        "klaw.engine.runtime",
        "klaw.store.sqlite",
        "klaw.tools.registry",
    }
    assert "mcp" in modules and not modules & engines, modules & engines


async def test_http_needs_the_web_token_before_anything_is_read(tmp_path: Path) -> None:
    async with filled_home() as home, running_engine(home):
        process = await asyncio.create_subprocess_exec(
            KLAW, "mcp", "serve", "--chat", str(CHAT), "--http", "--port", "0",
            env={**os.environ, "KLAW_HOME": str(home.root)},
            stdin=asyncio.subprocess.DEVNULL, stdout=asyncio.subprocess.DEVNULL, stderr=asyncio.subprocess.PIPE,
        )  # fmt: skip
        try:
            url = await _served_url(process)
            token = home.web_token_file.read_text(encoding="utf-8").strip()
            async with httpx.AsyncClient() as http:
                for headers in ({}, {"Authorization": "Bearer wrong"}):
                    refused = await http.post(url, headers=headers, content=b"x" * 100_000)
                    assert refused.status_code == 401
            # headers announcing a body that never comes: refused at once, so the body was never waited for
            host, port = url.removeprefix("http://").removesuffix("/mcp").split(":")
            reader, writer = await asyncio.open_connection(host, int(port))
            writer.write(f"POST /mcp HTTP/1.1\r\nHost: {host}:{port}\r\nContent-Length: 1000000\r\n\r\n".encode())
            async with asyncio.timeout(60):
                assert (await reader.readline()).startswith(b"HTTP/1.1 401")
            writer.close()
            with pytest.raises(Exception):  # noqa: B017, PT011 (the SDK's client fails in its own ways)
                async with Client(url):
                    pass
            async with (
                httpx2.AsyncClient(headers={"Authorization": f"Bearer {token}"}) as keyed,
                Client(streamable_http_client(url, http_client=keyed)) as client,
            ):
                assert sorted(tool.name for tool in (await client.list_tools()).tools) == READ_TOOLS
                found = await client.call_tool("memory_search", {"query": "spare key"})
                assert "under the blue flowerpot" in text(found)
        finally:
            process.send_signal(signal.SIGTERM)
            assert await exit_status(process) == 0


async def _served_url(process: asyncio.subprocess.Process) -> str:
    assert process.stderr is not None
    async with asyncio.timeout(STARTS_WITHIN):
        while line := (await process.stderr.readline()).decode():
            found = re.search(r"http://127\.0\.0\.1:\d+/mcp", line)
            if found:
                return found.group(0)
    raise AssertionError("klaw mcp serve --http did not say where it listens")


def test_a_port_without_http_is_refused_rather_than_ignored(tmp_path: Path) -> None:
    from tests.cli.test_cli import klaw

    home = tmp_path / "home"
    init_home(home)
    result = klaw(home, "mcp", "serve", "--chat", "console:me", "--port", "9999")
    assert result.returncode == 2 and "--port is for --http" in " ".join(result.stderr.split())


def test_a_home_never_started_is_refused_with_nothing_made_in_it(tmp_path: Path) -> None:
    """adversary27 L1: on a home never started, the command opened it (an engine's start: klaw.db, scheduler.db,
    engine.lock made), then refused the chat. Now it asks the store as it is first (decision 478); the
    PostgreSQL home's case is tests/cli/test_db_postgres_home.py's."""
    from tests.cli.klaw_here import klaw_here

    home = tmp_path / "home"
    init_home(home)
    before = sorted(path.name for path in home.iterdir())
    result = klaw_here(home, "mcp", "serve", "--chat", "web:main")
    assert result.returncode == 2
    said = " ".join(result.stderr.split())
    assert "no chat web:main has any messages (no chat has messages yet)" in said and "opening it" not in said
    assert sorted(path.name for path in home.iterdir()) == before


async def test_a_call_piped_in_after_initialize_is_answered_before_the_server_ends() -> None:
    """`printf '<initialize>\\n<initialized>\\n<tools/call>\\n' | klaw mcp serve --chat …`: stdin ends right
    after the call. The call is still answered (it used to get "Connection closed": the SDK ends the
    session at stdin's end and cancels what runs), and the command then exits 0."""
    messages = [
        {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "printf", "version": "1"}}},
        {"jsonrpc": "2.0", "method": "notifications/initialized"},
        {"jsonrpc": "2.0", "id": 2, "method": "tools/call",
         "params": {"name": "memory_search", "arguments": {"query": "where is the spare key"}}},
    ]  # fmt: skip
    async with filled_home() as home:
        process = await asyncio.create_subprocess_exec(
            KLAW, "mcp", "serve", "--chat", str(CHAT), env={**os.environ, "KLAW_HOME": str(home.root)},
            stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.DEVNULL,
        )  # fmt: skip
        piped = "".join(json.dumps(message) + "\n" for message in messages).encode()
        async with asyncio.timeout(STARTS_WITHIN):
            out, _ = await process.communicate(piped)  # writes, then closes stdin
        assert process.returncode == 0
    answers = {answer["id"]: answer for answer in map(json.loads, out.decode().splitlines())}
    assert "error" not in answers[2], answers[2]
    assert "under the blue flowerpot" in answers[2]["result"]["content"][0]["text"]


async def _refused_start(home: KlawHome, chat: str) -> str:
    process = await asyncio.create_subprocess_exec(
        KLAW, "mcp", "serve", "--chat", chat, "--allow-write", env={**os.environ, "KLAW_HOME": str(home.root)},
        stdin=asyncio.subprocess.DEVNULL, stdout=asyncio.subprocess.DEVNULL, stderr=asyncio.subprocess.PIPE,
    )  # fmt: skip
    async with asyncio.timeout(STARTS_WITHIN):
        _, err = await process.communicate()
    assert process.returncode == 2
    return " ".join(err.decode().split())


async def test_a_chat_without_messages_is_refused_at_start_as_schedule_add_refuses_it() -> None:
    """`--chat telegram:12345678` (a digit short) used to be served: searches found nothing, silently, and
    memory_save started that chat. Now the command refuses at start, engine running or not, with
    `klaw schedule add --inject-into`'s sentence naming the chats that have messages."""
    typo = "telegram:12345678"
    expected = f"no chat {typo} has any messages (the chats with messages: {CHAT})"
    async with filled_home() as home:
        said = await _refused_start(home, typo)  # no engine: the command would open the home itself
        assert expected in said and "Traceback" not in said
        async with running_engine(home) as engine:
            said = await _refused_start(home, typo)
            assert expected in said and "Traceback" not in said
            assert list(await engine.store.segments.chats()) == [CHAT]  # nothing was written to a new chat
