"""engine.yaml edited while klaw starts (check51, decision 474): the engine noted the file's bytes at the end of
its start, not when it read them, so an edit made in between (while its plugins were imported, its MCP servers
started: seconds on a loaded machine) was taken for what it ran on, and `klaw config check` said "valid" with no
word of a restart. The engine now compares with the bytes the loader parsed. The edit is made by a tool plugin's
import, which the start runs after the load: a hook at the very moment, not a race."""

from __future__ import annotations

import asyncio
import gc
from pathlib import Path

import pytest
import yaml

from klaw import FunctionModel, Klaw
from klaw.cli.context import load_or_exit, start_engine_or_exit
from klaw.home import KlawHome
from tests.cli.klaw_here import klaw_here
from tests.engine import short_socket_dir
from tests.tools.conftest import install

CHANGED = "engine.yaml changed since klaw started: restart it to apply"

# Imported by the engine's start, after engine.yaml was read: the person's edit lands then (once: a later
# import in another process, `klaw config check`'s own, finds it made).
EDITS_AT_IMPORT = """
from pathlib import Path

CONFIG = Path({config!r})
EDIT = "processing: {{debounceMs: 7}}\\n"
if EDIT not in CONFIG.read_text():
    CONFIG.write_text(CONFIG.read_text() + EDIT)


def provide(setup):
    return []
"""


@pytest.fixture
def site(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A folder on sys.path to install the plugin into."""
    path = tmp_path / "site"
    path.mkdir()
    monkeypatch.syspath_prepend(str(path))
    return path


def _home(root: Path, site: Path, module: str) -> Path:
    """A home whose engine.yaml enables the group `edits`, a plugin whose import edits that engine.yaml."""
    home = root / "home"
    home.mkdir(mode=0o700)
    config = home / "engine.yaml"
    settings = {
        "embedder": {"backend": "fake", "dim": 32},
        "summarizer": {"enabled": False},
        "tools": {"enabled": ["clock", "edits"]},
    }
    config.write_text(yaml.safe_dump(settings), encoding="utf-8")
    install(site, "edits", module, EDITS_AT_IMPORT.format(config=str(config)), "provide")
    return home


async def test_an_edit_while_a_library_engine_starts_is_said_needing_a_restart(site: Path) -> None:
    with short_socket_dir() as root:
        home = _home(root, site, "klaw_edits_config_library")
        async with Klaw(home, model=FunctionModel(lambda _m, _i: "ok"), listen=True) as agent:
            assert "debounceMs: 7" in (home / "engine.yaml").read_text()  # the edit came after the load
            assert (await agent.ask("alice", "/status")).startswith(CHANGED)
            checked = await asyncio.to_thread(klaw_here, home, "config", "check")
        assert checked.returncode == 0 and checked.stdout.strip().endswith(": valid"), checked
        assert f"warning: {CHANGED} (a program using klaw's library API" in checked.stderr, checked.stderr


async def test_an_edit_while_klaw_serve_starts_is_said_by_klaw_config_check(site: Path) -> None:
    """`klaw serve`, `klaw engine` and `klaw chat` start their engine with `start_engine_or_exit` on what
    `load_or_exit` read: called here as they call it, in this process (a `klaw` process costs seconds of CPU)."""
    threshold = gc.get_threshold()
    with short_socket_dir() as root:
        home = _home(root, site, "klaw_edits_config_cli")
        try:
            engine = await start_engine_or_exit(KlawHome(home), load_or_exit(KlawHome(home)))
            try:
                assert "debounceMs: 7" in (home / "engine.yaml").read_text()
                checked = await asyncio.to_thread(klaw_here, home, "config", "check")
            finally:
                await engine.shutdown(timeout_seconds=10)
        finally:  # what the start froze for the collector, given back to the other tests
            gc.unfreeze()
            gc.set_threshold(*threshold)
    assert checked.returncode == 0 and checked.stdout.strip().endswith(": valid"), checked
    assert f"warning: {CHANGED} (" in checked.stderr, checked.stderr
