"""A command MCP server's error output, as a person looks for it after a crash: `KLAW_HOME/mcp/<name>.log` keeps
what every run wrote (the crashed run's last words survive klaw's restart), a line marks each start, the file
stays 0600 and is cut to its tail when it grows past about 1 MB; the warning and /status name the file."""

from __future__ import annotations

import asyncio
import logging
import math
import os
import sys
from pathlib import Path

import pytest

from klaw.tools.mcp.server_link import LinkStatus, ServerLink
from klaw.tools.mcp.server_log import RATE_BYTES, TAIL_BYTES
from tests.engine.harness import CHAT, running_engine
from tests.tools.mcp_client.test_mcp_tools_in_turns import notes, status, tool_result, wait_ready


async def test_a_crashed_servers_last_words_outlive_its_restart_and_the_warning_names_the_log(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    fast = {"debounceMs": 100}  # a turn moves the clock 0.1 s, short of the first backoff (1 s)
    with caplog.at_level(logging.WARNING, logger="klaw.tools.mcp.server_link"):
        async with running_engine(tmp_path, tools={"enabled": ["mcp:notes"]}, mcp=notes(), processing=fast) as h:
            log_file = h.home.root / "mcp" / "notes.log"
            h.server.reply_tool_calls([("notes__crash", {})])
            h.server.reply_text("it crashed")
            await h.turn("crash it")
            assert "stopped during the call to crash" in tool_result(h)
            assert f"it stopped during a call (its error output: {log_file})" in " ".join((await status(h)).split())
            await h.clock.advance(1.0)
            await wait_ready(h)  # restarted: the log was opened again for the new run
            text = log_file.read_text()
    assert "notes server: about to crash" in text
    starts = [line for line in text.splitlines() if line.startswith("--- klaw started MCP server 'notes' at ")]
    assert len(starts) == 2
    assert text.index("about to crash") > text.index(starts[0])
    assert log_file.stat().st_mode & 0o777 == 0o600
    warned = [r.getMessage() for r in caplog.records if "is unavailable" in r.getMessage()]
    assert any(str(log_file) in message for message in warned), warned


async def test_a_log_past_a_megabyte_keeps_its_tail_and_stays_private(tmp_path: Path) -> None:
    logs = tmp_path / "home" / "mcp"
    logs.mkdir(parents=True)
    old = logs / "notes.log"
    old.write_text("".join(f"old line {n:07d}\n" for n in range(120_000)))  # ~2 MB
    os.chmod(old, 0o644)  # a copy made by hand: klaw makes it private again
    async with running_engine(tmp_path, tools={"enabled": ["mcp:notes"]}, mcp=notes()) as h:
        assert "MCP notes: ready" in await status(h)
        text = (h.home.root / "mcp" / "notes.log").read_text()
    assert 400_000 < len(text) < 1_000_000
    assert "old line 0119999\n" in text and "old line 0000000" not in text
    assert text.splitlines()[1].startswith("old line ")  # cut at a line's start, after a line saying so
    assert "earlier output cut" in text.splitlines()[0]
    assert "--- klaw started MCP server 'notes' at " in text
    assert old.stat().st_mode & 0o777 == 0o600


async def test_a_chatty_servers_output_past_the_rate_is_skipped_to_its_newest_lines(tmp_path: Path) -> None:
    """A server writing 3.3 MB to stderr at once, then serving: each second's output past a quarter megabyte
    is skipped, a line saying how many bytes were, followed by the newest lines from a line's start up to the
    last one; the engine drains the pipe all the same and the server answers. (Copying it all cost the
    engine's loop half a CPU while a server spewed.) On a loaded machine the pipe may take more than one
    second to drain: each second then keeps its own quarter megabyte, so the bound counts the seconds."""
    lines = 50_000  # 3.3 MB of stderr
    line_bytes = len("notes server: chatter line 0000000 of a debug log that goes on\n")
    last = f"notes server: chatter line {lines - 1:07d} of a debug log that goes on\n"
    loop = asyncio.get_running_loop()
    began = loop.time()
    async with running_engine(tmp_path, tools={"enabled": ["mcp:notes"]}, mcp=notes("--chatter", str(lines))) as h:
        log_file = h.home.root / "mcp" / "notes.log"
        await wait_ready(h)
        async with asyncio.timeout(20):
            while not (text := log_file.read_text()).endswith(last):  # the end may still be in the pipe
                assert len(text) <= 1_000_000
                await asyncio.sleep(0.05)
        seconds = math.ceil(loop.time() - began) + 1  # the windows the output can have spread over
        assert 200_000 < len(text) <= seconds * (RATE_BYTES + TAIL_BYTES + 100)
        rows = text.splitlines()
        notes_at = [n for n, line in enumerate(rows) if line.startswith("[klaw skipped ")]
        assert notes_at and rows[notes_at[-1] + 1 :]  # the newest lines follow the last note
        for n in notes_at:
            before, note, after = rows[n - 1 : n + 2]
            assert before.startswith("notes server: chatter line ") and before.endswith("goes on")
            assert after.startswith("notes server: chatter line ")  # from a line's start
            assert note.endswith("bytes of output: more than 256000 a second]")
        kept = sum(1 for line in rows if line.startswith("notes server: chatter line "))
        skipped = sum(int(rows[n].split()[2]) for n in notes_at)
        assert kept * line_bytes + skipped == lines * line_bytes  # every byte either kept or counted as skipped
        assert skipped > 2_500_000 - (seconds - 2) * RATE_BYTES
        assert log_file.stat().st_mode & 0o777 == 0o600
        h.server.reply_tool_calls([("notes__add", {"a": 2, "b": 3})])
        h.server.reply_text("still there")
        await h.turn("add")
        assert tool_result(h) == "5"


CRASH = "import sys\nprint('loading plugins', file=sys.stderr)\nimport nonexistent_module_xyz\n"


async def _down_again(link: ServerLink, failures: int) -> LinkStatus:
    """The link's status once its start failed `failures` times (a fresh Python each time: seconds under load)."""
    async with asyncio.timeout(60):
        while not ((said := link.status()).failures >= failures and said.phase == "unavailable"):  # noqa: ASYNC110 - `down` stays set between two failures; the count is what changes
            await asyncio.sleep(0.02)
    return said


async def test_a_server_that_crashes_at_start_is_said_with_its_last_line_and_waited_for_longer(
    tmp_path: Path,
) -> None:
    """newcomer21 (decision 501): "it failed to start: MCPError: Connection closed (its error output: <file>)"
    in /status, `klaw tools` and the model's refusal sent the person to a file for one line. The last line the
    server wrote is quoted now (only the last: its traceback's earlier lines, what it printed before, stay in the
    file), and each failure the same way waits twice as long as the one before (1 s, 2 s, 4 s)."""
    crash = tmp_path / "crash.py"
    crash.write_text(CRASH, encoding="utf-8")
    server = {"servers": {"crash": {"command": sys.executable, "args": [str(crash)]}}}
    async with running_engine(tmp_path, tools={"enabled": ["clock", "mcp:crash"]}, mcp=server) as h:
        link = h.engine.mcp_servers.links["crash"]
        log_file = h.home.root / "mcp" / "crash.log"
        first = await _down_again(link, 1)
        said = "it said: ModuleNotFoundError: No module named 'nonexistent_module_xyz'"
        assert first.reason is not None and said in first.reason, first.reason
        assert f"{said} (its error output: {log_file})" in " ".join((await status(h)).split())
        assert "loading plugins" not in first.reason and "Traceback" not in first.reason
        rows = (await h.engine.tool_listing.inventory(CHAT)).rows
        assert any(said in row.reason for row in rows if row.state == "unavailable"), rows
        assert said in link.unavailable()  # the model's refusal of a call
        waits = []
        for failures in (1, 2, 3):
            down = await _down_again(link, failures)
            assert down.retry_at is not None
            waits.append((down.retry_at - h.clock.now()).total_seconds())
            # to the retry exactly: advanced 0.01 s past it, the waits read 1.99 s and 3.99 s on Debian's python3.11
            # under load (2 runs of 9; a restart that failed while the advance let the woken code run is dated at
            # the retry time, then the clock steps 0.01 s on); decision 537
            await h.clock.advance(waits[-1])
        assert waits == pytest.approx([1.0, 2.0, 4.0]), waits  # the engine's clock stood still while it started


SAYS_ITS_KEY = (
    "import os, sys\nprint('invalid API key ' + os.environ['KLAW_REVIEW_MCP_KEY'], file=sys.stderr)\nsys.exit(1)\n"
)


async def test_a_server_that_fails_saying_the_key_it_was_given_is_quoted_without_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """review54 (decision 506): the last line a server wrote before failing is quoted in /status, chat.log and the
    model's refusal (decision 501). A server that fails naming the key klaw passed it (its `env`) put that key
    there: into the log, the terminal and the model's context. The values of its `env` variables are masked."""
    secret = "sk-review54-0123456789abcdef"
    monkeypatch.setenv("KLAW_REVIEW_MCP_KEY", secret)
    script = tmp_path / "says_its_key.py"
    script.write_text(SAYS_ITS_KEY, encoding="utf-8")
    server = {"servers": {"keyed": {"command": sys.executable, "args": [str(script)], "env": ["KLAW_REVIEW_MCP_KEY"]}}}
    caplog.set_level(logging.INFO)
    async with running_engine(tmp_path, tools={"enabled": ["clock", "mcp:keyed"]}, mcp=server) as h:
        link = h.engine.mcp_servers.links["keyed"]
        down = await _down_again(link, 1)
        assert down.reason is not None and "it said: invalid API key ••••••" in down.reason, down.reason
        shown = [down.reason, await status(h), link.unavailable(), caplog.text]
        assert not [where for where in shown if secret in where], shown
    assert secret in (h.home.root / "mcp" / "keyed.log").read_text(encoding="utf-8")  # its own log, 0600, keeps it
