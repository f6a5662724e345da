"""The `klaw` command as a person runs it: a real subprocess with KLAW_HOME pointed at a temp dir."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any


def klaw(
    home: Path, *args: str, env: dict[str, str] | None = None, stdin: str | None = None
) -> subprocess.CompletedProcess[str]:
    """`klaw ARGS` on `home`; `stdin` is piped in (`klaw chat` refuses an empty pipe: decision 240)."""
    full_env = {**os.environ, "KLAW_HOME": str(home), "COLUMNS": "200", **(env or {})}
    return subprocess.run(
        [sys.executable, "-m", "klaw", *args], capture_output=True, text=True, env=full_env, timeout=120, input=stdin
    )


def test_help_lists_every_command(tmp_path: Path) -> None:
    result = klaw(tmp_path, "--help")
    assert result.returncode == 0
    for command in ("init", "config", "db", "log", "bench"):
        assert command in result.stdout


def test_init_writes_config_and_workspace_then_keeps_them(tmp_path: Path) -> None:
    home = tmp_path / "home"
    first = klaw(home, "init")
    assert first.returncode == 0, first.stderr
    for name in ("engine.yaml", "workspace/SOUL.md", "workspace/IDENTITY.md", "workspace/AGENTS.md"):
        assert (home / name).is_file()
    assert f"made   {home / 'workspace' / 'skills'}/ (one folder per skill" in first.stdout
    # each folder before the files written into it (it printed "made workspace/" after them)
    said = [line.split()[:2] for line in first.stdout.splitlines() if line.startswith(("wrote", "made"))]
    assert said == [
        ["wrote", str(home / "engine.yaml")],
        ["made", f"{home / 'workspace'}/"],
        *[["wrote", str(home / "workspace" / name)] for name in ("SOUL.md", "IDENTITY.md", "AGENTS.md")],
        ["made", f"{home / 'workspace' / 'skills'}/"],
        ["made", f"{home / 'conversations'}/"],
    ]
    assert oct((home).stat().st_mode & 0o777) == "0o700"
    (home / "workspace" / "SOUL.md").write_text("mine", encoding="utf-8")
    again = klaw(home, "init")
    assert "kept" in again.stdout
    assert (home / "workspace" / "SOUL.md").read_text(encoding="utf-8") == "mine"
    assert klaw(home, "init", "--if-missing").stdout == ""


def test_written_default_config_is_valid_and_equals_the_built_in_defaults(tmp_path: Path) -> None:
    from klaw.config import EngineConfig
    from klaw.config_loader import load_config

    klaw(tmp_path, "init")
    assert load_config(tmp_path / "engine.yaml", env={}).config == EngineConfig()


def test_config_show_reports_values_and_their_sources(tmp_path: Path) -> None:
    (tmp_path / "engine.yaml").write_text("processing:\n  debounceMs: 700\n", encoding="utf-8")
    result = klaw(tmp_path, "config", "show", "--json", env={"KLAW__CONTEXT__SLIDINGWINDOW": "9"})
    assert result.returncode == 0, result.stderr
    shown = json.loads(result.stdout)
    assert shown["processing.debounceMs"] == {"value": 700, "source": "engine.yaml"}
    assert shown["context.slidingWindow"] == {"value": 9, "source": "env KLAW__CONTEXT__SLIDINGWINDOW"}
    assert shown["autoRag.topK"] == {"value": 3, "source": "default"}
    table = klaw(tmp_path, "config", "show")
    assert "processing.debounceMs" in table.stdout


def test_config_show_tells_the_lines_of_engine_yaml_that_change_nothing(tmp_path: Path) -> None:
    """`klaw init` writes every default into engine.yaml, so nearly every row said `engine.yaml`."""
    klaw(tmp_path, "init")
    config = tmp_path / "engine.yaml"
    config.write_text(config.read_text(encoding="utf-8").replace("debounceMs: 1500", "debounceMs: 900"), "utf-8")
    shown = json.loads(klaw(tmp_path, "config", "show", "--json").stdout)
    assert shown["processing.debounceMs"] == {"value": 900, "source": "engine.yaml"}
    assert shown["autoRag.topK"] == {"value": 3, "source": "engine.yaml (= default)"}


def test_invalid_config_stops_with_field_value_and_rule_not_a_traceback(tmp_path: Path) -> None:
    (tmp_path / "engine.yaml").write_text("autoRag:\n  topK: 0\n", encoding="utf-8")
    result = klaw(tmp_path, "config", "show")
    assert result.returncode == 2
    assert "autoRag.topK = 0" in result.stderr
    assert "greater than 0" in result.stderr
    assert "Traceback" not in result.stderr


def test_log_check_reports_malformed_lines_without_content(tmp_path: Path) -> None:
    chat = tmp_path / "conversations" / "console_me"
    chat.mkdir(parents=True)
    (chat / "2026-01-01.jsonl").write_text(
        '{"id":"a","channel":"console","chat_id":"me","role":"user","type":"text","content":"hi",'
        '"created_at":"2026-01-01T10:00:00.000Z"}\n{broken PRIVATE\n{"unfinished PRIVATE\n{"broken": \n',
        encoding="utf-8",
    )
    result = klaw(tmp_path, "log", "check")
    assert result.returncode == 1
    assert "1 records, 3 malformed" in result.stdout
    assert "2026-01-01.jsonl:2" in result.stdout
    # json's own message ends "... at" (its position follows in str()): the reason reads whole
    assert "2026-01-01.jsonl:3: invalid JSON at column 2: Unterminated string starting\n" in result.stdout
    # Where on the line it is, not the line end's position (line 2 of the JSON, column 1).
    assert "2026-01-01.jsonl:4: invalid JSON at column 12: Expecting value\n" in result.stdout
    assert "docs/maintenance.md, 'Malformed log lines'" in result.stdout  # where the repair is explained
    assert "jsonl:2" not in result.stderr  # listed once, not again as the reader's warning
    assert "PRIVATE" not in result.stdout + result.stderr


def test_python_dash_m_and_script_agree(tmp_path: Path) -> None:
    script = Path(sys.executable).with_name("klaw")
    result = subprocess.run(
        [str(script), "config", "path"],
        capture_output=True,
        text=True,
        env={**os.environ, "KLAW_HOME": str(tmp_path)},
        check=True,
    )
    assert result.stdout.strip() == str(tmp_path.resolve() / "engine.yaml")


def help_pages() -> list[tuple[tuple[str, ...], Any, str]]:
    """Every command's path, its click command and its `--help` output (200 columns), root included."""
    from typer.testing import CliRunner

    from klaw.cli.app import app, command_tree

    def paths(command: Any, prefix: tuple[str, ...] = ()) -> list[tuple[tuple[str, ...], Any]]:
        found = [(prefix, command)]
        for name, sub in getattr(command, "commands", {}).items():  # a group's commands
            found += paths(sub, (*prefix, name))
        return found

    pages = []
    for path, command in paths(command_tree()):
        result = CliRunner().invoke(app, [*path, "--help"], env={"COLUMNS": "200"})
        assert result.exit_code == 0, (path, result.output)
        pages.append((path, command, result.output))
    assert {("bench", "turn"), ("memory", "forget"), ("mcp", "serve")} <= {path for path, _, _ in pages}
    return pages


def option_rows(output: str) -> list[str]:
    return [line for line in output.splitlines() if re.match(r"│\s*\*?\s*--", line)]


def shown_type(row: str) -> str:
    """What follows an option row's names (`--force -f`, `--x/--no-x`): its type, or its help text."""
    words = row.strip("│ ").split()
    rest = [word for word in words if not word.startswith(("-", "*"))]
    return rest[0] if rest else ""


def test_no_help_page_shows_python_types_or_huge_ranges() -> None:
    """Every command's --help names what an option takes (N, BACKEND, TOOL), never `<list[int]>`, and
    no id range of nineteen digits. (An argument's type column is typer's own: `packages...
    <list[str]>` cannot be renamed, so only options are checked for it.)"""
    for path, _, output in help_pages():
        assert "9223372036854775807" not in output, (path, output)
        assert not [line for line in option_rows(output) if "list[" in line], (path, output)


def test_no_flag_shows_a_value_type_in_any_help_page(tmp_path: Path) -> None:
    """A flag takes no value: its help row shows no `<bool>` (typer 0.29 printed one for every flag,
    `--help` included), while an option that takes a value keeps its type."""
    for path, command, output in help_pages():
        flags = {"--help"} | {
            name for param in command.params if getattr(param, "is_flag", False) for name in param.opts
        }
        rows = option_rows(output)
        flag_rows = [row for row in rows if row.split()[1].split("/")[0] in flags]
        assert len(flag_rows) >= 1, (path, output)
        assert not [row for row in flag_rows if shown_type(row).startswith("<")], (path, output)
    person = klaw(tmp_path, "init", "--help")  # the real command, as a person types it
    assert "--force" in person.stdout and "<bool>" not in person.stdout and "<str>" in person.stdout


def test_version_is_the_installed_distributions_and_the_checkout_s_commit(tmp_path: Path) -> None:
    """newcomer9: "klaw 0.1.0" for every commit; run from a checkout, the commit is named too."""
    import subprocess
    from importlib.metadata import version

    import klaw as package

    root = Path(package.__file__).resolve().parent.parent.parent
    build = ""
    if (root / ".git").exists():  # a checkout, as in development and CI; an installed wheel says no commit
        git = ["git", "-C", str(root)]
        commit = subprocess.run([*git, "rev-parse", "--short=12", "HEAD"], capture_output=True, text=True, check=True)
        changed = subprocess.run([*git, "status", "--porcelain", "-uno"], capture_output=True, text=True)
        build = f" (git {commit.stdout.strip()}{' + local changes' if changed.stdout.strip() else ''})"
    result = klaw(tmp_path / "no-home", "--version")
    assert (result.returncode, result.stdout) == (0, f"klaw {version('klaw')}{build}\n"), result.stderr
    assert not (tmp_path / "no-home").exists()  # asking for the version makes no home


def test_config_show_piped_keeps_every_field_name_whole(tmp_path: Path) -> None:
    """`klaw config show | …` (the docs ask for it in bug reports) printed at rich's default 80 columns,
    folding names such as `models.ollama/llama3.2.connectTimeoutSeconds` over two lines."""
    home = tmp_path / "home"
    klaw(home, "init")
    fields = json.loads(klaw(home, "config", "show", "--json").stdout)
    shown = klaw(home, "config", "show", env={"COLUMNS": ""}).stdout
    assert [field for field in fields if f" {field} " not in shown] == []


def test_bench_load_refuses_more_chats_than_the_engine_takes_connections(tmp_path: Path) -> None:
    """Each chat of `bench load` is a socket connection and the engine takes 256 (socket_limits.py): 300
    would have had ~44 chats refused midway; it is refused before anything starts."""
    from klaw.cli.bench_cmd import MAX_LOAD_CHATS
    from klaw.engine.socket_limits import MAX_CONNECTIONS

    assert MAX_LOAD_CHATS < MAX_CONNECTIONS
    result = klaw(tmp_path, "bench", "load", "--chats", "300")
    assert result.returncode == 2
    assert "--chats" in result.stderr and str(MAX_LOAD_CHATS) in result.stderr


def test_a_second_init_names_the_model_already_chosen(tmp_path: Path) -> None:
    """newcomer7: a second `klaw init` said "Edit engine.yaml to choose your model." to a person who had."""
    home = tmp_path / "home"
    first = " ".join(klaw(home, "init").stdout.split())
    assert "to choose your model. No model yet? " in first and " -m klaw.llm.fake_server starts a stand-in" in first
    assert "to choose your model" in klaw(home, "init").stdout  # still the example model
    config = home / "engine.yaml"
    text = config.read_text(encoding="utf-8")
    text = text.replace("models:\n", "models:\n  mine/m:\n    baseUrl: http://127.0.0.1:9/v1\n", 1)
    config.write_text(text.replace("  default: ollama/llama3.2", "  default: mine/m", 1), encoding="utf-8")
    again = klaw(home, "init")
    assert again.returncode == 0, again.stderr
    assert "to choose your model" not in again.stdout
    assert f"Its model: mine/m (routing.default in {config})" in " ".join(again.stdout.split())


def test_init_force_keeps_the_edited_engine_yaml_beside_it(tmp_path: Path) -> None:
    home = tmp_path / "home"
    assert klaw(home, "init").returncode == 0
    config = home / "engine.yaml"
    edited = config.read_text(encoding="utf-8").replace("backend: sqlite", "backend: sqlite  # mine, edited")
    config.write_text(edited, encoding="utf-8")
    soul = (home / "workspace" / "SOUL.md").read_text(encoding="utf-8")  # not edited: no copy of it

    forced = klaw(home, "init", "--force")

    assert forced.returncode == 0, forced.stderr
    saved = [path for path in home.iterdir() if path.name.startswith("engine.yaml.bak-")]
    assert len(saved) == 1 and saved[0].read_text(encoding="utf-8") == edited
    assert f"saved  {saved[0]}" in forced.stdout and "mine, edited" not in config.read_text(encoding="utf-8")
    assert saved[0].stat().st_mode & 0o777 == 0o600
    assert (home / "workspace" / "SOUL.md").read_text(encoding="utf-8") == soul
    assert not any(p.name.startswith("SOUL.md.bak") for p in (home / "workspace").iterdir())
