"""A misspelled MCP server command is engine.yaml's mistake, said once everywhere (newcomer12): `klaw config check`
said "valid", `klaw tools` exited 0 with "not started here", and the engine retried the missing program for as long
as it ran, pointing at a log file that held no word from it."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from typer.testing import CliRunner

from klaw.cli.app import app
from tests.cli.test_reindex_cmd import a_home


def klaw(home: Path, *args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """`klaw ARGS` on `home`, in this process (typer's CliRunner): these tests are about the words, and a
    `klaw` process per check cost ~1-1.5 s of CPU each, mostly imports (tests/cli/test_cli.py's `klaw` runs one)."""
    result = CliRunner().invoke(app, list(args), env={"KLAW_HOME": str(home), "COLUMNS": "200", **(env or {})})
    assert result.exception is None or isinstance(result.exception, SystemExit), result.exception
    return subprocess.CompletedProcess(args, result.exit_code, result.stdout, result.stderr)


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


def test_a_script_whose_interpreter_is_missing_names_the_interpreter(tmp_path: Path) -> None:
    """adversary21: a script whose #! line names an interpreter this machine lacks was "there is no program
    '…/server.py'" (exec's ENOENT), about a file that is there, and retried every few seconds."""
    home = a_home(tmp_path)
    scripts = {}
    for name, first_line in (
        ("absolute", "#!/usr/bin/pyhton3"),
        ("env", "#!/usr/bin/env pyhton3"),
        ("fine", "#!/bin/sh"),
    ):
        script = tmp_path / f"{name}.sh"
        script.write_text(f"{first_line}\nexit 0\n", encoding="utf-8")
        script.chmod(0o755)
        scripts[name] = script
    config = {
        "embedder": {"backend": "fake", "dim": 32},
        "tools": {"enabled": [f"mcp:{name}" for name in scripts]},
        "mcp": {"servers": {name: {"command": str(script)} for name, script in scripts.items()}},
    }
    (home / "engine.yaml").write_text(json.dumps(config), encoding="utf-8")
    checked = klaw(home, "config", "check")
    said = " ".join(checked.stderr.split())
    assert checked.returncode == 1, said
    assert (
        f"'{scripts['absolute']}' asks in its #! line for the interpreter /usr/bin/pyhton3, which this machine lacks"
        " (mcp.servers.absolute.command in engine.yaml)" in said
    ), said
    assert "for the interpreter pyhton3 (on PATH, through /usr/bin/env), which this machine lacks" in said, said
    assert "there is no program" not in said and "mcp.servers.fine" not in said, said


def test_an_unset_key_variable_is_named_and_an_unreachable_url_names_its_address(tmp_path: Path) -> None:
    """newcomer14: a URL server whose authorizationEnv variable was unset passed `klaw config check`, was
    retried for as long as the engine ran (a running process never gains a variable), and `klaw tools` sent
    a person to KLAW_HOME/mcp/<name>.log, which a URL server never has."""
    home = a_home(tmp_path)
    config = {
        "embedder": {"backend": "fake", "dim": 32},
        "tools": {"enabled": ["mcp:kmem", "mcp:headed"]},
        "mcp": {
            "servers": {
                "kmem": {"url": "http://127.0.0.1:1/mcp", "authorizationEnv": "KMEM_TEST_TOKEN"},
                "headed": {"url": "http://127.0.0.1:1/mcp", "headersEnv": {"X-Key": "HEADED_TEST_KEY"}},
            }
        },
    }
    (home / "engine.yaml").write_text(json.dumps(config), encoding="utf-8")
    # Set but empty (decision 436): a header's value is refused as empty, not called "not set".
    unset = {"KMEM_TEST_TOKEN": "", "HEADED_TEST_KEY": ""}

    checked = klaw(home, "config", "check", env=unset)
    said = " ".join(checked.stderr.split())
    assert checked.returncode == 1 and "valid" not in checked.stdout, said
    assert (
        "it cannot start: the environment variable KMEM_TEST_TOKEN (mcp.servers.kmem.authorizationEnv in"
        " engine.yaml names it) is set here but empty, and a header needs a value: set it to the server's token" in said
    ), said
    assert (
        "HEADED_TEST_KEY (mcp.servers.headed.headersEnv.X-Key in engine.yaml names it) is set here but empty,"
        " and a header needs a value: set it to the X-Key header's value" in said
    ), said
    assert "not set here" not in said, said

    listed = klaw(home, "tools", env=unset)
    assert listed.returncode == 1, listed.stdout + listed.stderr
    line = next(line for line in listed.stdout.splitlines() if line.startswith("mcp:kmem"))
    assert "failed: it cannot start: the environment variable KMEM_TEST_TOKEN" in line and ".log" not in line, line

    # Set, nothing is wrong with the configuration: the check leaves the server to the engine.
    checked = klaw(home, "config", "check", env={"KMEM_TEST_TOKEN": "t", "HEADED_TEST_KEY": "k"})
    assert checked.returncode == 0, checked.stderr
    # Set only in service.env: the service's engine has them, so neither command calls it a mistake.
    (home / "service.env").write_text("KMEM_TEST_TOKEN=t\nHEADED_TEST_KEY=k\n", encoding="utf-8")
    (home / "service.env").chmod(0o600)
    checked = klaw(home, "config", "check", env=unset)
    assert checked.returncode == 0, checked.stderr
    listed = klaw(home, "tools", env=unset)
    assert "failed" not in next(line for line in listed.stdout.splitlines() if line.startswith("mcp:kmem"))


def test_a_commands_variable_set_to_an_empty_string_is_passed_as_it_is(tmp_path: Path) -> None:
    """adversary23: `env: [FLAG]` with FLAG="" was called "not set here: export it"; "" is a value a
    program may read (decision 436), so the check finds nothing wrong, and unset it is still named."""
    home = a_home(tmp_path)
    config = {
        "embedder": {"backend": "fake", "dim": 32},
        "tools": {"enabled": ["mcp:local"]},
        "mcp": {"servers": {"local": {"command": sys.executable, "env": ["LOCAL_TEST_FLAG"]}}},
    }
    (home / "engine.yaml").write_text(json.dumps(config), encoding="utf-8")
    checked = klaw(home, "config", "check", env={"LOCAL_TEST_FLAG": ""})
    assert checked.returncode == 0, checked.stderr
