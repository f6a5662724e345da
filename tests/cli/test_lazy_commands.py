"""`klaw` imports only the command it runs (decision 378), and `klaw --help` still lists every command.

Each `klaw` process imported every command module at start (the bench commands, `klaw memory`,
`klaw db migrate`…), a quarter of a second of CPU even for `klaw config path`; the suite starts `klaw`
hundreds of times. The nouns now load on first use (cli/lazy_commands.py), so the help page, a typo's
suggestion and the commands themselves are checked here as a person meets them.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

# Every command `klaw --help` lists, in its order: a command dropped from the root fails here.
EVERY_COMMAND = [
    "chat", "engine", "gateway", "serve", "reindex", "tools", "init",
    "config", "db", "log", "memory", "schedule", "bench", "service", "sandbox", "skills", "mcp",
]  # fmt: skip

# Modules no command but their own needs: imported by `klaw config path`, they cost every `klaw` process.
OTHERS_MODULES = ["klaw.cli.bench_cmd", "klaw.cli.memory_cmd", "klaw.cli.db_cmd", "klaw.cli.engine_cmd", "klaw.bench"]


def klaw(home: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("KLAW")} | {
        "KLAW_HOME": str(home),
        "COLUMNS": "200",
    }
    return subprocess.run(
        [sys.executable, "-m", "klaw", *args], capture_output=True, text=True, env=env, timeout=120, check=False
    )


def test_a_command_imports_no_other_commands_module(tmp_path: Path) -> None:
    """`klaw config path` run for real, then the modules it loaded: none of the other nouns'."""
    code = (
        "import sys; from klaw.cli.app import main; sys.argv = ['klaw', 'config', 'path']\n"
        "try:\n    main()\nexcept SystemExit:\n    pass\n"
        f"print('loaded:', [m for m in {OTHERS_MODULES!r} if m in sys.modules])"
    )
    env = {k: v for k, v in os.environ.items() if not k.startswith("KLAW")} | {"KLAW_HOME": str(tmp_path)}
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=120)
    assert run.returncode == 0, run.stderr
    assert str(tmp_path / "engine.yaml") in run.stdout  # the command did run
    assert "loaded: []" in run.stdout, run.stdout


def test_help_lists_every_command_with_its_description_in_order(tmp_path: Path) -> None:
    shown = klaw(tmp_path, "--help")
    assert shown.returncode == 0, shown.stderr
    rows = [line.strip("│ ") for line in shown.stdout.splitlines()]
    listed = [row.split()[0] for row in rows if row.split() and row.split()[0] in EVERY_COMMAND]
    assert listed == EVERY_COMMAND, listed
    for name, described in [
        ("memory", "Look into what klaw remembers"),
        ("bench", "Benchmarks"),
        ("chat", "Chat with your agent"),
        ("init", "Create KLAW_HOME"),
    ]:
        assert any(row.startswith(f"{name} ") and described in row for row in rows), (name, shown.stdout)


def test_a_mistyped_command_is_told_the_nearest_one(tmp_path: Path) -> None:
    mistyped = klaw(tmp_path, "memry", "list")
    assert mistyped.returncode == 2
    assert "No such command 'memry'. Did you mean 'memory'?" in mistyped.stderr, mistyped.stderr


def test_a_group_loaded_on_demand_runs_its_own_commands(tmp_path: Path) -> None:
    """A group's subcommand, its options and its errors work as they did when every noun was imported."""
    assert klaw(tmp_path, "init").returncode == 0
    page = klaw(tmp_path, "memory", "--help")
    assert page.returncode == 0 and "search" in page.stdout and "forget" in page.stdout, page.stdout
    bad = klaw(tmp_path, "memory", "search", "--limit", "many", "words")
    assert bad.returncode == 2 and "Invalid value for '--limit'" in bad.stderr, bad.stderr
