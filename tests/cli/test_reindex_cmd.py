"""`klaw reindex` as a person runs it: a real subprocess on a temp KLAW_HOME with a log on disk."""

from __future__ import annotations

import asyncio
import logging
import socket
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from klaw.memory.conversation_log import ConversationLog
from klaw.store.records import ChatRef, MessageRecord, Role
from tests.cli.inited_home import init_home
from tests.cli.klaw_here import klaw_here
from tests.cli.test_cli import klaw

CHAT = ChatRef("console", "me")
T0 = datetime(2026, 3, 1, 10, 0, tzinfo=UTC)


def a_home(tmp_path: Path) -> Path:
    home = tmp_path / "home"
    init_home(home)
    (home / "engine.yaml").write_text("embedder:\n  backend: fake\n  dim: 32\n", encoding="utf-8")
    records = [
        MessageRecord(
            CHAT,
            Role.USER,
            f"message number {i} about the lighthouse on the northern island",
            created_at=T0 + timedelta(minutes=i),
        )
        for i in range(6)
    ]
    asyncio.run(ConversationLog(home / "conversations").append_many(records))
    return home


def test_reindex_rebuilds_and_reports(tmp_path: Path) -> None:
    """Its report names a malformed line once (the reader's warning held back while it runs), and the process's
    logging is as it was after: the reader's logger stayed at ERROR, a library user's warnings lost (473)."""
    home = a_home(tmp_path)
    log_file = next((home / "conversations").glob("*/*.jsonl"))
    with open(log_file, "ab") as handle:
        handle.write(b"{broken\n")
    reader = logging.getLogger("klaw.memory.conversation_log")
    result = klaw_here(home, "reindex")
    assert result.returncode == 0, result.stderr
    assert reader.level == logging.NOTSET and "invalid JSON" not in result.stderr
    out = result.stdout
    for expected in ("reading log files", "rebuilding rows", "embedding", "messages", "vectors", "total:"):
        assert expected in out
    assert f"{log_file}:7: invalid JSON" in out
    # into a pipe, where rich draws no bars, a line per stage as it starts and ends (adversary29, decision 503)
    for line in (
        "reading log files: 0 of 1",
        "reading log files: 1 of 1",
        "rebuilding rows: 7 of 7",
        "embedding: 6 of 6",
    ):
        assert line in out.splitlines(), out
    # and only those: the bars were drawn after them too, once, at the end (newcomer24, decision 537)
    assert "━" not in out and "1/1" not in out, out
    assert "northern island" not in out  # never a message's content
    info = klaw_here(home, "db", "info")
    assert "│ messages " in info.stdout and " 6 │" in info.stdout


def test_reindex_refuses_while_the_engine_listens(tmp_path: Path) -> None:
    """Refused, it says an interrupted reindex resumes only when one was interrupted (its build is there)."""
    home = a_home(tmp_path)
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        listener.bind(str(home / "engine.sock"))
        listener.listen()
        result = klaw(home, "reindex")
        (home / "klaw.db.reindex").write_bytes(b"")  # what an interrupted reindex leaves: its build
        after_an_interrupted_one = klaw(home, "reindex")
    finally:
        listener.close()
    assert result.returncode == 1
    assert "engine is running" in result.stderr and "stop it" in result.stderr
    assert "resumes" not in result.stderr and "interrupted" not in result.stderr  # nothing was interrupted
    assert not (home / "klaw.db").exists()
    assert after_an_interrupted_one.returncode == 1
    assert "The interrupted reindex resumes where it stopped." in " ".join(after_an_interrupted_one.stderr.split())


def test_db_info_names_the_build_a_killed_first_reindex_left(tmp_path: Path) -> None:
    """adversary29 (decision 503): a first `klaw reindex` (no klaw.db yet) killed left `klaw.db.reindex`, and
    `klaw db info` said only "klaw.db does not exist yet…", as if nothing were there."""
    from klaw.home import KlawHome
    from klaw.memory.reindex import reindex
    from tests.memory.test_reindex import Interrupted
    from tests.memory.test_reindex import config as reindex_config

    home = a_home(tmp_path)
    with pytest.raises(KeyboardInterrupt):  # Ctrl-C in its embedding stage, as kill -9 leaves it
        asyncio.run(reindex(KlawHome(home), reindex_config(), embedder=Interrupted()))
    assert (home / "klaw.db.reindex").exists() and not (home / "klaw.db").exists()
    info = klaw_here(home, "db", "info")
    said = " ".join(info.stdout.split())
    assert info.returncode == 0 and "klaw.db does not exist yet" in said, said
    assert "But an interrupted 'klaw reindex' left klaw.db.reindex" in said and "run 'klaw reindex' to finish" in said


def test_sigterm_stops_a_reindex_where_it_is_and_the_next_run_finishes(tmp_path: Path) -> None:
    """`kill PID` (a service stopping) during `klaw reindex`: stopped as Ctrl-C stops it, saying where and how to
    resume, exit 143 (decision 503; before, it died in silence). The stage is held by an embedding server that
    accepts and never answers, so the signal lands mid-stage whatever the machine's speed."""
    import os
    import signal
    import subprocess
    import sys

    home = a_home(tmp_path)
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as silent:
        silent.bind(("127.0.0.1", 0))
        silent.listen()
        port = silent.getsockname()[1]
        engine_yaml = home / "engine.yaml"
        engine_yaml.write_text(
            f"embedder:\n  backend: openai\n  baseUrl: http://127.0.0.1:{port}/v1\n  model: e\n  dim: 32\n",
            encoding="utf-8",
        )
        env = {**os.environ, "KLAW_HOME": str(home), "COLUMNS": "200"}
        with subprocess.Popen(
            [sys.executable, "-m", "klaw", "reindex"],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=env,
        ) as run:
            assert run.stdout is not None
            seen: list[str] = []
            for line in run.stdout:
                seen.append(line)
                if line.startswith("embedding: 0 of"):
                    break
            run.send_signal(signal.SIGTERM)
            out, err = run.communicate(timeout=60)
    said = " ".join(("".join(seen) + out).split())
    assert run.returncode == 143, (said, err)
    assert "stopped by SIGTERM at embedding" in said and "Run 'klaw reindex' again to resume." in said
    assert "Traceback" not in err
    engine_yaml.write_text("embedder:\n  backend: fake\n  dim: 32\n", encoding="utf-8")
    again = klaw_here(home, "reindex")
    assert again.returncode == 0, again.stderr
    assert " 6 │" in klaw_here(home, "db", "info").stdout
