"""`echo … | klaw chat` does before its reply only what the one message needs (decision 499): its turn starts
without waiting out `processing.debounceMs` (nothing else can join it), a local embedder is not loaded when
the turn searches nothing (a new chat), and the message's and reply's vectors are made after the reply, before
the process exits. Real processes, a real SQLite file; asserted on what the process did, never on a time."""

from __future__ import annotations

from pathlib import Path

import apsw

from klaw.llm.fake_server import FakeOpenAiServer
from tests.cli.chat_terminal import chat_env, init_home
from tests.cli.piped_chat import piped
from tests.cli.test_start_imports import loaded

LONG = "the tomatoes in the garden grew tall this summer and the basil beside them did well too"


async def test_a_piped_message_is_answered_without_waiting_for_the_debounce(tmp_path: Path) -> None:
    """A debounce of ten minutes: the old code answered after it (the test's 120 s wait ran out first)."""
    home = tmp_path / "home"
    init_home(home)
    async with FakeOpenAiServer() as model:
        env = {**chat_env(home, model.base_url), "KLAW__PROCESSING__DEBOUNCEMS": "600000"}
        code, out, err = await piped(env, "hi")
    assert (code, out) == (0, "echo: hi\n"), err


async def test_a_piped_chat_whose_turn_searches_nothing_loads_no_local_model(tmp_path: Path) -> None:
    """A new chat (nothing to search) and a message too short to be embedded: MiniLM's runtime is never
    imported (the old engine loaded it at every start, ~0.4-0.7 s of CPU: decision 260)."""
    home = tmp_path / "home"
    init_home(home)
    async with FakeOpenAiServer() as model:
        env = {**chat_env(home, model.base_url), "KLAW__EMBEDDER__BACKEND": "minilm"}
        del env["KLAW__EMBEDDER__DIM"]
        modules = await loaded(tmp_path, env, "chat", stdin="hi\n")
    assert "klaw" in modules and not modules & {"onnxruntime", "tokenizers"}, modules


async def test_a_piped_chats_message_and_reply_are_embedded_before_it_exits(tmp_path: Path) -> None:
    """Both are long enough to be embedded: their vectors are stored when the process ends, none left queued
    (the old engine left the reply's for the next start, whose queue then ran beside that start's turn)."""
    home = tmp_path / "home"
    init_home(home)
    async with FakeOpenAiServer() as model:
        env = chat_env(home, model.base_url)
        code, out, err = await piped(env, LONG)
        assert (code, out) == (0, f"echo: {LONG}\n"), err
    connection = apsw.Connection(str(home / "klaw.db"), flags=apsw.SQLITE_OPEN_READONLY)
    try:
        (jobs,) = connection.execute("SELECT count(*) FROM embedding_jobs").fetchone() or (None,)
        (vectors,) = connection.execute("SELECT count(*) FROM vec_messages_rowids").fetchone() or (None,)
    finally:
        connection.close()
    assert (jobs, vectors) == (0, 2)
