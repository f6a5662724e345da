"""Text others wrote, shown on a terminal or in a log line, is shown and never obeyed (decision 296): an
MCP server whose `initialize` fails with a message holding an OSC title escape, colours, a right-to-left
override and a CR LF followed by a look-alike log line; a skill whose name and description hold the
same. `klaw tools` (piped and on a terminal), `echo … | klaw chat`'s log (logs/chat.log, and stderr
with --verbose) and `klaw skills list` print each as one line of stand-ins (␛, ␍␊, \\u202e)."""

from __future__ import annotations

import asyncio
import json
import logging
import os
import re
import sys
from pathlib import Path

from klaw import FunctionModel, Klaw
from klaw.llm.fake_server import FakeOpenAiServer
from tests.cli.chat_terminal import chat_env, init_home
from tests.cli.piped_chat import CHAT_SECONDS
from tests.engine import short_socket_dir

HOSTILE = "boom \x1b]0;PWNED-TITLE\x07\x1b[31mRED\x1b[0m \u202eevil\u202c \r\nWARNING klaw.engine: FAKE LINE"
SERVER = f"""
import json, sys
for line in sys.stdin:
    message = json.loads(line)
    if "id" in message:
        error = {{"code": -32000, "message": {HOSTILE!r}}}
        print(json.dumps({{"jsonrpc": "2.0", "id": message["id"], "error": error}}), flush=True)
"""
MCP = {"servers": {"evil": {"command": sys.executable, "args": ["-c", SERVER]}}, "startWaitSeconds": 20}
RAW = ("\x1b", "\x07", "\r", "\u202e")
COLOURS = re.compile("\x1b\\[[0-9;]*m")


def obeyed(text: str) -> list[str]:
    return [char for char in RAW if char in text]


async def klaw(env: dict[str, str], *args: str, stdin: bytes | None = None) -> tuple[int, str, str]:
    process = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "klaw", *args, stdin=-1, stdout=-1, stderr=-1, env=env
    )
    out, err = await asyncio.wait_for(process.communicate(stdin), timeout=CHAT_SECONDS)
    return process.returncode or 0, out.decode(), err.decode()


def lines_with(text: str, needle: str) -> list[str]:
    return [line for line in text.splitlines() if needle in line]


async def test_klaw_tools_shows_an_mcp_servers_error_on_its_own_row() -> None:
    config = {
        "embedder": {"backend": "fake", "dim": 32},
        "summarizer": {"enabled": False},
        "tools": {"enabled": ["clock", "mcp:evil"]},
        "mcp": MCP,
    }
    with short_socket_dir() as root:
        home = root / "home"
        async with Klaw(home, config=config, model=FunctionModel(lambda _m, _i: "ok"), listen=True):
            env = {**os.environ, "KLAW_HOME": str(home), "COLUMNS": "400"}
            for extra in ({}, {"FORCE_COLOR": "1", "TTY_COMPATIBLE": "1"}):  # piped, then as on a terminal
                code, out, err = await klaw({**env, **extra}, "tools")
                assert code == 0, err  # an unavailable server is no failed group
                assert obeyed(COLOURS.sub("", out)) == [], out  # rich's own colours on a terminal aside
                assert "␛]0;PWNED-TITLE␇␛[31mRED" in out and "\\u202eevil" in out
                [row] = lines_with(out, "PWNED-TITLE")
                assert "FAKE LINE" in row  # on the server's row, not a line of its own


async def test_a_chats_log_lines_hold_an_mcp_servers_error_on_one_line(tmp_path: Path) -> None:
    home = tmp_path / "home"
    init_home(home)
    async with FakeOpenAiServer() as model:
        model.reply_text("ok")
        env = {
            **chat_env(home, model.base_url),
            "KLAW__TOOLS__ENABLED": '["mcp:evil"]',
            "KLAW__MCP__SERVERS": json.dumps(MCP["servers"]),
        }
        code, out, err = await klaw(env, "--verbose", "chat", stdin=b"hi\n")
        assert (code, out) == (0, "ok\n"), err
        log = (home / "logs" / "chat.log").read_text(encoding="utf-8")
        for text in (log, err):
            assert obeyed(text) == [], text
            assert "PWNED-TITLE" in text
            assert not any(line.startswith("WARNING klaw.engine: FAKE LINE") for line in text.splitlines())
            for line in lines_with(text, "PWNED-TITLE"):
                assert "␍␊WARNING klaw.engine: FAKE LINE" in line


async def test_klaw_skills_list_shows_a_skills_description_and_a_bad_name(tmp_path: Path) -> None:
    home = tmp_path / "home"
    init_home(home)
    good = home / "workspace" / "skills" / "notes"
    good.mkdir(parents=True)
    description = "Notes \x1b]0;SKILL-TITLE\x07\x1b[32mGREEN\x1b[0m \u202eevil"
    (good / "SKILL.md").write_text(f"---\nname: notes\ndescription: {json.dumps(description)}\n---\nbody\n")
    bad = home / "workspace" / "skills" / "Bad\x1b[2J\u202ename"
    bad.mkdir()
    (bad / "SKILL.md").write_text("---\nname: x\ndescription: d\n---\n")
    code, out, err = await klaw({**os.environ, "KLAW_HOME": str(home), "COLUMNS": "400"}, "skills", "list")
    assert code == 0, err
    assert obeyed(out) == [], out
    assert "␛]0;SKILL-TITLE␇" in out and "\\u202eevil" in out
    assert "Bad␛[2J\\u202ename" in out


def test_an_exceptions_own_words_cannot_forge_a_log_line_in_its_traceback() -> None:
    """A traceback keeps its frames' lines, but the exception's message (an MCP server's, a plugin's) is
    one line: `ValueError('x\\n… WARNING klaw.engine: forged')` printed a line of its own (adversary7)."""
    from klaw.log_format import FORMAT, SafeFormatter

    record = logging.LogRecord("klaw.tools", logging.ERROR, __file__, 1, "a tool failed", None, None)
    try:
        try:
            raise OSError("cause\r\n2026-11-28 01:00:00,000 WARNING klaw.engine: forged cause")
        except OSError as cause:
            raise ValueError("boom\n2026-11-28 01:00:00,000 WARNING klaw.engine: forged line") from cause
    except ValueError:
        record.exc_info = sys.exc_info()
    text = SafeFormatter(FORMAT).format(record)
    lines = text.splitlines()
    assert lines[0] == "ERROR klaw.tools: a tool failed" and lines[1] == "Traceback (most recent call last):"
    assert not [line for line in lines if line.startswith("2026")], text
    assert "ValueError: boom␊2026-11-28 01:00:00,000 WARNING klaw.engine: forged line" in lines
    assert "OSError: cause␍␊2026-11-28 01:00:00,000 WARNING klaw.engine: forged cause" in lines
    assert any(line.startswith("  File ") for line in lines)  # the frames keep their lines
