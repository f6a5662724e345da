"""An engine.yaml an older `klaw init` wrote, after an upgrade (newcomer19, decision 476): its tools.enabled
named the five groups of its day, so messaging, skills, web, websearch, code, host and docs were off with no
word (`klaw tools` listed 13 offered tools and nothing else), and it pinned defaults changed since
(database.vectorCacheMb 256, now 512; summarizer.rollingEvery 3, now 6). `klaw config check` now notes
them and `klaw tools` lists each group not offered with the list to write; the file is left as it is."""

from __future__ import annotations

import re
from pathlib import Path

from klaw.config import ALL_TOOL_GROUPS
from tests.cli.klaw_here import klaw_here

README = Path(__file__).resolve().parents[2] / "README.md"
# The lines of ed71c1b's template (2026-11-25) that matter here, as its `klaw init` wrote them.
OLD_INIT = """\
models:
  stand-in/echo:
    baseUrl: http://127.0.0.1:8999/v1
routing:
  default: stand-in/echo
summarizer:
  rollingEvery: 3                           # > 0; roll the open segment's summary forward after this many exchanges
embedder:
  backend: fake
database:
  backend: sqlite
  vectorCacheMb: 256                        # exact in-memory vector search; ~1.5 MB per 1000 messages
tools:
  enabled: [clock, files, memory, scheduler, subagents]  # drop groups a small model does not need; [] = no tools
"""
NEWER = ("messaging", "skills", "web", "websearch", "code", "host", "docs")


def _home(tmp_path: Path, text: str) -> Path:
    home = tmp_path / "home"
    home.mkdir(mode=0o700)
    (home / "engine.yaml").write_text(text, encoding="utf-8")
    (home / "engine.yaml").chmod(0o600)
    return home


def test_an_old_init_file_is_noted_by_config_check_and_its_groups_listed_by_klaw_tools(tmp_path: Path) -> None:
    home = _home(tmp_path, OLD_INIT)
    checked = klaw_here(home, "config", "check")
    said = " ".join(checked.stderr.split())
    assert checked.returncode == 0 and checked.stdout.endswith(": valid\n"), said
    assert "note: database.vectorCacheMb is 256 in" in said and "the default is now 512" in said, said
    assert "note: summarizer.rollingEvery is 3 in" in said and "the default is now 6" in said, said
    assert f"names none of klaw's newer tool groups {', '.join(NEWER)}" in said, said
    assert (home / "engine.yaml").read_text(encoding="utf-8") == OLD_INIT  # noted, never rewritten

    listed = klaw_here(home, "tools")
    assert listed.returncode == 0, listed.stderr
    lines = listed.stdout.splitlines()
    for group in NEWER:  # before: no row at all for any of them
        row = next((line for line in lines if line.startswith(f"{group} [built-in {group}]: not offered: ")), None)
        assert row is not None, listed.stdout
        assert "add it to tools.enabled (every group at once: the line under the rows" in row, row
        assert "enabled: [" not in row, row  # each row's list added only its own group: two copied kept one
    # One list with every group, once, under the rows (check52, decision 480).
    every = ", ".join(ALL_TOOL_GROUPS)
    said = f"To offer every group not offered, set tools.enabled: [{every}] (or name only those you want)."
    assert lines[-1] == said, lines
    assert sum("tools.enabled: [" in line for line in lines) == 1, listed.stdout
    assert "(its tools: docs_list, docs_read, docs_search)" in listed.stdout


def test_a_file_written_now_gets_no_note_and_a_chosen_value_is_left_alone(tmp_path: Path) -> None:
    home = tmp_path / "home"
    assert klaw_here(home, "init").returncode == 0
    text = (home / "engine.yaml").read_text(encoding="utf-8").replace("backend: minilm", "backend: fake", 1)
    text = text.replace("  vectorCacheMb: 512", "  vectorCacheMb: 300", 1)  # a value the person chose
    (home / "engine.yaml").write_text(text, encoding="utf-8")
    checked = klaw_here(home, "config", "check")
    assert checked.returncode == 0 and "note:" not in checked.stderr, checked.stderr
    listed = klaw_here(home, "tools")
    assert not any(f"[built-in {group}]: not offered" in listed.stdout for group in ALL_TOOL_GROUPS), listed.stdout


def test_an_unknown_tool_group_exits_as_the_readme_says(tmp_path: Path) -> None:
    """config check exited 2 for an unknown group while the README's table said 1; then a plugin uninstalled
    since made the file invalid for every command (newcomer21): an unknown group is a group that fails to load,
    exit 1 with its row's words, the file valid for every other command (decision 501)."""
    home = _home(tmp_path, OLD_INIT.replace("subagents]", "subagents, weather]"))
    checked = klaw_here(home, "config", "check")
    assert checked.returncode == 1 and "tool group 'weather' fails to load" in checked.stderr, checked.stderr
    row = next(line for line in README.read_text(encoding="utf-8").splitlines() if "`klaw config check`" in line)
    assert re.search(r"a tool group .tools.enabled. names that no installed package offers .* exits 1", row), row
