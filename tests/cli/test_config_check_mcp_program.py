"""A misspelled MCP server command is engine.yaml's mistake, said once everywhere (newcomer12): `klaw config check`
said "valid", `klaw tools` exited 0 with "not started here", and the engine retried the missing program for as long
as it ran, pointing at a log file that held no word from it."""

from __future__ import annotations

import json
import sys
from pathlib import Path

from tests.cli.test_cli import klaw
from tests.cli.test_reindex_cmd import a_home

MISSING = "there is no program '/usr/bin/pyhton' (mcp.servers.broken.command in engine.yaml)"


def test_config_check_and_klaw_tools_name_a_missing_program_with_the_key_to_fix(tmp_path: Path) -> None:
    home = a_home(tmp_path)
    config = {
        "embedder": {"backend": "fake", "dim": 32},
        "tools": {"enabled": ["clock", "mcp:broken", "mcp:found"]},
        "mcp": {"servers": {"broken": {"command": "/usr/bin/pyhton"}, "found": {"command": sys.executable}}},
    }
    (home / "engine.yaml").write_text(json.dumps(config), encoding="utf-8")  # JSON is YAML

    checked = klaw(home, "config", "check")
    said = " ".join(checked.stderr.split())
    assert checked.returncode == 1 and "valid" not in checked.stdout, said
    assert f"it cannot start: {MISSING}" in said and "correct mcp.servers.broken in engine.yaml" in said, said
    assert "found" not in said  # a program that is there is left to the engine

    listed = klaw(home, "tools")
    assert listed.returncode == 1, listed.stdout + listed.stderr
    line = next(line for line in listed.stdout.splitlines() if line.startswith("mcp:broken"))
    assert f"failed: it cannot start: {MISSING}" in line and "log" not in line, line
    assert not (home / "mcp" / "broken.log").exists()  # nothing was started, nothing logged


def test_a_file_that_is_not_executable_or_a_directory_is_named_as_such(tmp_path: Path) -> None:
    """mcpmiss: 'there is no program' about a file that is there sends a person looking for it."""
    home = a_home(tmp_path)
    script = tmp_path / "srv.py"
    script.write_text("print('hi')\n", encoding="utf-8")
    script.chmod(0o644)
    config = {
        "embedder": {"backend": "fake", "dim": 32},
        "tools": {"enabled": ["mcp:script", "mcp:folder"]},
        "mcp": {"servers": {"script": {"command": str(script)}, "folder": {"command": str(tmp_path)}}},
    }
    (home / "engine.yaml").write_text(json.dumps(config), encoding="utf-8")
    checked = klaw(home, "config", "check")
    said = " ".join(checked.stderr.split())
    assert checked.returncode == 1, said
    assert f"'{script}' is not executable (mcp.servers.script.command in engine.yaml): chmod +x it" in said, said
    assert f"'{tmp_path}' is a directory, not a program (mcp.servers.folder.command in engine.yaml)" in said, said
