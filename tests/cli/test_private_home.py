"""Everything klaw writes holds private text, so nobody else on the machine may read it: directories 0700,
files 0600, whatever the umask of the shell that started klaw and whichever command created them.

A real `klaw serve` (engine + gateway + web page) runs under umask 022 on a home nobody initialised,
a message goes through the web page to the model and back, a core memory is saved; then every path
in the home is checked. A home left readable by an older klaw is tightened at start, with a warning.
"""

from __future__ import annotations

import asyncio
import os
import re
import stat
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import httpx

from klaw.channels.web.auth import CSRF_HEADER
from klaw.home import KlawHome
from klaw.home_privacy import make_private
from klaw.llm.fake_server import FakeOpenAiServer
from tests.engine import short_socket_dir
from tests.serve_helpers import STARTS_WITHIN, running, serve_env, stop, web_page


def _umask_022() -> None:
    os.umask(0o022)


def write_config(home: Path, base_url: str) -> None:
    home.joinpath("engine.yaml").write_text(
        f"models:\n  fake/x:\n    baseUrl: {base_url}\n    maxRetries: 0\nrouting:\n  default: fake/x\n"
        "embedder:\n  backend: fake\n  dim: 32\nprocessing:\n  debounceMs: 0\nchannels:\n  web:\n    port: 0\n",
        encoding="utf-8",
    )


@asynccontextmanager
async def klaw_serve(home: Path) -> AsyncIterator[tuple[str, list[str], asyncio.subprocess.Process]]:
    """`klaw serve` started from a shell whose umask is 022; yields the page's URL and stdout lines so far."""
    async with running(env=serve_env(home, COLUMNS="200"), preexec_fn=_umask_022) as process:
        lines: list[str] = []
        url = await web_page(process, lines)
        yield url, lines, process
        assert await stop(process) == 0


async def say_on_the_page(url: str, token: str, text: str) -> None:
    async with httpx.AsyncClient(base_url=url) as client:
        page = await client.get("/login")
        found = re.search(r'name="csrf" value="([^"]+)"', page.text)
        assert found is not None
        signed = await client.post("/login", data={"token": token, "csrf": found.group(1)})
        assert signed.status_code == 303
        csrf = (await client.get("/api/session")).json()["csrf"]
        sent = await client.post("/api/messages", json={"text": text}, headers={CSRF_HEADER: csrf})
        assert sent.status_code == 200


def logged(home: Path) -> str:
    return "".join(path.read_text(encoding="utf-8") for path in home.glob("conversations/*/*.jsonl"))


def loose_paths(home: Path) -> list[str]:
    """Every path under home (home included) a user other than its owner could read, write or enter."""
    found = []
    for path in [home, *home.rglob("*")]:
        mode = path.lstat().st_mode
        expected = 0o700 if stat.S_ISDIR(mode) else 0o600
        if stat.S_IMODE(mode) != expected:
            found.append(f"{path.relative_to(home)} {stat.S_IMODE(mode):o}")
    return found


async def test_klaw_serve_under_umask_022_writes_nothing_others_can_read() -> None:
    with short_socket_dir() as directory:
        home = directory / "home"
        async with FakeOpenAiServer() as server:
            home.mkdir(mode=0o700)  # the config has to be somewhere; everything else klaw creates itself
            write_config(home, server.base_url)
            (home / "engine.yaml").chmod(0o600)
            server.reply_tool_calls([("memory_core_update", {"set": {"name": "Ada"}})])
            server.reply_text("Noted, Ada.")
            async with klaw_serve(home) as (url, _, process):
                token = (home / "web_token").read_text(encoding="utf-8").strip()
                await say_on_the_page(url, token, "my name is Ada")
                async with asyncio.timeout(STARTS_WITHIN):  # the reply is logged: the turn is over
                    while "Noted, Ada." not in logged(home):  # noqa: ASYNC110 - another process writes it
                        await asyncio.sleep(0.05)
                assert loose_paths(home) == []
            assert process.stderr is not None
            assert "warning" not in (await process.stderr.read()).decode()  # created private, not repaired
        created = {str(path.relative_to(home)) for path in home.rglob("*")}
        assert {"klaw.db", "scheduler.db", "web_token", "core_memory.json", "gateway/inbound.jsonl"} <= created
        assert any(name.startswith("conversations/web_main/") and name.endswith(".jsonl") for name in created)
        assert loose_paths(home) == []


async def test_a_home_others_can_read_is_made_private_at_start_with_a_warning() -> None:
    with short_socket_dir() as directory:
        home = directory / "home"
        async with FakeOpenAiServer() as server:
            home.mkdir(mode=0o755)
            write_config(home, server.base_url)
            (home / "engine.yaml").chmod(0o644)
            (home / "conversations" / "web" / "main").mkdir(parents=True, mode=0o755)
            diary = home / "conversations" / "web" / "main" / "2026-01-01.jsonl"
            diary.write_text("", encoding="utf-8")
            diary.chmod(0o644)
            os.chmod(home / "conversations", 0o755)
            async with klaw_serve(home) as (_, _, process):
                assert loose_paths(home) == []
            assert process.stderr is not None
            said = " ".join((await process.stderr.read()).decode().split())
        assert "warning: other users could read" in said
        assert "made them private (directories 0700, files 0600)" in said


def test_making_a_home_private_leaves_the_workspace_files_and_what_symlinks_point_to(tmp_path: Path) -> None:
    outside = tmp_path / "shared.txt"
    outside.write_text("a file of the person's, elsewhere", encoding="utf-8")
    outside.chmod(0o644)
    home = KlawHome(tmp_path / "home")
    (home.workspace / "notes").mkdir(parents=True)
    home.root.chmod(0o755)
    home.workspace.chmod(0o755)
    shared_note = home.workspace / "notes" / "shopping.md"
    shared_note.write_text("milk", encoding="utf-8")
    shared_note.chmod(0o644)
    (home.root / "link-out").symlink_to(outside)
    database = tmp_path / "elsewhere" / "klaw.db"
    database.parent.mkdir()
    database.write_bytes(b"")
    database.chmod(0o644)

    changed = make_private(home, [database, database.with_name("klaw.db-wal")])

    assert sorted(changed) == sorted([home.root, home.workspace, database])
    assert stat.S_IMODE(home.root.stat().st_mode) == 0o700
    assert stat.S_IMODE(database.stat().st_mode) == 0o600
    assert stat.S_IMODE(outside.stat().st_mode) == 0o644
    assert stat.S_IMODE(shared_note.stat().st_mode) == 0o644
    assert make_private(home, [database]) == []
