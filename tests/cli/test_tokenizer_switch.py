"""A home's full-text tokenizer as a person meets it: `klaw init --language`, a database refusing a
`database.tokenizer` it was not built with (a clear message, how to fix it, no traceback), and
`klaw reindex` switching it. klaw's entry point in this process (tests/cli/klaw_here.py) on a temp
KLAW_HOME with a log on disk."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta
from pathlib import Path

from klaw.config_loader import load_config
from klaw.memory.conversation_log import ConversationLog
from klaw.store.records import ChatRef, MessageRecord, Role
from tests.cli.klaw_here import klaw_here

CHAT = ChatRef("console", "me")
T0 = datetime(2026, 3, 1, 10, 0, tzinfo=UTC)
DUCK = "上周我们在全聚德吃了北京烤鸭，味道很好。"
SAID = [DUCK, "明天要下雨，记得带伞。", "我的猫叫Mimi，它很喜欢晒太阳。"]


def a_chinese_home(tmp_path: Path) -> Path:
    """A home made without --language (porter, the English default), whose log holds Chinese."""
    home = tmp_path / "home"
    assert klaw_here(home, "init").returncode == 0
    (home / "engine.yaml").write_text("embedder:\n  backend: fake\n  dim: 32\n", encoding="utf-8")
    records = [
        MessageRecord(CHAT, Role.USER, text, created_at=T0 + timedelta(minutes=i)) for i, text in enumerate(SAID)
    ]
    asyncio.run(ConversationLog(home / "conversations").append_many(records))
    assert klaw_here(home, "reindex").returncode == 0
    return home


def set_tokenizer(home: Path, tokenizer: str) -> None:
    (home / "engine.yaml").write_text(
        f"embedder:\n  backend: fake\n  dim: 32\ndatabase:\n  tokenizer: {tokenizer}\n", encoding="utf-8"
    )


def test_a_mismatched_tokenizer_is_refused_and_reindex_switches_it(tmp_path: Path) -> None:
    home = a_chinese_home(tmp_path)
    set_tokenizer(home, "trigram")
    refused = klaw_here(home, "memory", "search", "北京烤鸭")
    assert refused.returncode != 0
    said = " ".join(refused.stderr.split())
    assert "porter tokenizer" in said and "database.tokenizer: trigram" in said
    assert "klaw reindex" in said and "Traceback" not in refused.stderr

    assert klaw_here(home, "reindex").returncode == 0
    # A dish inside a sentence: porter kept the clause as one word, trigram finds it by its characters.
    after = klaw_here(home, "memory", "search", "北京烤鸭")
    assert after.returncode == 0, after.stderr
    assert "全聚德" in after.stdout
    assert "full text: tokenizer trigram" in klaw_here(home, "db", "info").stdout


def test_init_language_writes_the_tokenizer_and_the_embedder(tmp_path: Path) -> None:
    for code, tokenizer, backend in [("ru", "unicode61", "e5"), ("zh", "trigram", "e5"), ("en", "porter", "minilm")]:
        home = tmp_path / code
        result = klaw_here(home, "init", "--language", code)
        assert result.returncode == 0, result.stderr
        config = load_config(home / "engine.yaml", env={}).config
        assert (config.database.tokenizer, config.embedder.backend) == (tokenizer, backend), code
        text = (home / "engine.yaml").read_text(encoding="utf-8")
        assert "# full text: porter (English)" in text  # the comments are kept
    kept = klaw_here(tmp_path / "ru", "init", "--language", "zh")
    assert kept.returncode == 2 and "--force" in kept.stderr
    unknown = klaw_here(tmp_path / "new", "init", "--language", "Chinese please")
    assert unknown.returncode == 2 and "language code" in unknown.stderr
    assert not (tmp_path / "new").exists()
