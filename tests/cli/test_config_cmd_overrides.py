"""`klaw config show` names what chat commands changed; `klaw config check` says when there is no file,
and warns of a valid setting that will not do what a person likely wants.

The overrides are set as a person sets them, by `/rag set`, `/summarizer off` and `/embeddings off`
in a running engine; the engine stops, and `klaw config show` (a real subprocess) reads them from
the database's settings.
"""

from __future__ import annotations

import json
from pathlib import Path

from tests.cli.inited_home import init_home
from tests.cli.klaw_here import klaw_here
from tests.cli.test_cli import klaw
from tests.engine.harness import CHAT, running_engine


async def test_config_show_gives_the_value_a_command_set_and_names_the_command(tmp_path: Path) -> None:
    async with running_engine(tmp_path) as h:
        for command in ("/rag set min_similarity 0.42", "/summarizer off", "/embeddings off"):
            submitted = await h.engine.submit(CHAT, command)
            assert submitted.command_reply is not None
    home = tmp_path / "home"
    result = klaw(home, "config", "show", "--json")
    assert result.returncode == 0, result.stderr
    shown = json.loads(result.stdout)
    assert shown["rag.minSimilarity"] == {"value": 0.42, "source": "command (/rag set)"}
    assert shown["summarizer.enabled"] == {"value": False, "source": "command (/summarizer)"}
    assert shown["embedder.pipelineEnabled"] == {"value": False, "source": "command (/embeddings)"}
    assert shown["rag.maxTokens"]["source"] != "command (/rag set)"  # only what was set
    table = klaw(home, "config", "show")
    assert "command (/rag set)" in table.stdout


def test_config_show_lists_the_slash_commands_by_name_not_as_json(tmp_path: Path) -> None:
    """`commands:` (what /help and Telegram's menu list) is a setting a person may edit, but its value
    was a JSON dump of 14 {name, description} objects filling 11 lines of the table."""
    home = tmp_path / "home"
    init_home(home)
    (home / "engine.yaml").write_text(
        (home / "engine.yaml").read_text(encoding="utf-8")
        + "commands:\n  - {name: new, description: Start afresh}\n  - {name: help, description: What I do}\n",
        encoding="utf-8",
    )
    table = klaw_here(home, "config", "show")
    assert table.returncode == 0, table.stderr
    row = next(line for line in table.stdout.splitlines() if line.startswith("│ commands "))
    assert "/new /help (/help describes each)" in row and "engine.yaml" in row
    assert '"description"' not in table.stdout
    script = json.loads(klaw_here(home, "config", "show", "--json").stdout)  # a script still gets the whole value
    assert script["commands"]["value"][0] == {"name": "new", "description": "Start afresh"}


def test_config_check_without_a_file_says_it_is_missing_and_where_it_looked(tmp_path: Path) -> None:
    home = tmp_path / "mistyped-home"
    result = klaw_here(home, "config", "check")
    assert result.returncode == 1
    assert "valid" not in result.stdout
    said = " ".join(result.stderr.split())
    assert f"no engine.yaml at {home / 'engine.yaml'}" in said
    assert f"KLAW_HOME={home}" in said
    assert "klaw init" in said
    init_home(home)
    assert klaw_here(home, "config", "check").stdout.strip() == f"{home / 'engine.yaml'}: valid"


def test_config_check_refuses_an_unset_postgres_variable_unless_the_service_sets_it(tmp_path: Path) -> None:
    """newcomer14: an unset database.urlEnv variable was a warning with exit 0, though no engine starts
    from that shell; an unset apiKeyEnv was already exit 1. Set only in service.env, it is a warning (the
    service has it)."""
    (tmp_path / "engine.yaml").write_text("database:\n  backend: postgres\n  urlEnv: KLAW_TEST_UNSET_DSN\n", "utf-8")
    result = klaw_here(tmp_path, "config", "check", env={"KLAW_TEST_UNSET_DSN": ""})
    said = " ".join(result.stderr.split())
    assert result.returncode == 1 and "valid" not in result.stdout, said
    assert "the environment variable KLAW_TEST_UNSET_DSN (database.urlEnv) is not set" in said
    assert "export KLAW_TEST_UNSET_DSN=postgresql://" in said
    (tmp_path / "service.env").write_text("KLAW_TEST_UNSET_DSN=postgresql://u@127.0.0.1:1/klaw\n", "utf-8")
    (tmp_path / "service.env").chmod(0o600)
    result = klaw_here(tmp_path, "config", "check", env={"KLAW_TEST_UNSET_DSN": ""})
    said = " ".join(result.stderr.split())
    assert result.returncode == 0, said
    assert f"warning: KLAW_TEST_UNSET_DSN (database.urlEnv) is set only in {tmp_path / 'service.env'}" in said
    (tmp_path / "service.env").unlink()
    # Set, it is tried (tests/cli/test_config_check_postgres.py): here nothing listens on port 1.
    tried = klaw_here(tmp_path, "config", "check", env={"KLAW_TEST_UNSET_DSN": "postgresql://u@127.0.0.1:1/klaw"})
    assert tried.returncode == 1 and "warning" not in tried.stderr
    assert "cannot reach the PostgreSQL server named by KLAW_TEST_UNSET_DSN" in " ".join(tried.stderr.split())


def test_config_check_warns_when_host_exec_would_run_unasked(tmp_path: Path) -> None:
    allowed = "hostExec:\n  allow: ['git status']\n"
    (tmp_path / "engine.yaml").write_text(allowed + "tools:\n  approval: [message_send]\n", "utf-8")
    result = klaw_here(tmp_path, "config", "check")
    assert result.returncode == 0, result.stderr  # valid: a person may choose it
    said = " ".join(result.stderr.split())
    assert "warning: host_exec runs the commands hostExec.allow lists on this machine without asking you" in said
    assert "add host_exec to tools.approval" in said
    (tmp_path / "engine.yaml").write_text(allowed, "utf-8")  # tools.approval's default holds host_exec
    quiet = klaw_here(tmp_path, "config", "check")
    assert quiet.returncode == 0 and "warning" not in quiet.stderr


def test_a_section_given_twice_is_refused_not_half_dropped(tmp_path: Path) -> None:
    """A second `tools:` block appended below `klaw init`'s used to replace the first silently: its
    approval list and every other setting there went back to the defaults while `config check` said
    valid. Now the check names both lines and the fix, and nothing starts on such a file."""
    home = tmp_path / "home"
    init_home(home)
    config = home / "engine.yaml"
    config.write_text(config.read_text("utf-8") + "\ntools:\n  enabled: [clock, files]\n")
    lines = config.read_text("utf-8").splitlines()
    first, second = (i + 1 for i, line in enumerate(lines) if line.startswith("tools:"))
    result = klaw_here(home, "config", "check")
    assert result.returncode == 2  # a configuration error, as for any invalid engine.yaml
    said = " ".join(result.stderr.split())
    assert f"line {second}: 'tools' is already set at line {first}" in said
    assert "Merge the two 'tools' blocks into one" in said
    assert "Traceback" not in result.stderr


def test_every_section_given_twice_is_named_in_one_run(tmp_path: Path) -> None:
    """A newcomer pasted the fake server's `models:` and `routing:` on top of `klaw init`'s: the check
    named `models`, and only after that was fixed, `routing`. Now one run names both."""
    home = tmp_path / "home"
    init_home(home)
    config = home / "engine.yaml"
    pasted = "models:\n  fake/echo:\n    baseUrl: http://127.0.0.1:8000/v1\nrouting:\n  default: fake/echo\n"
    config.write_text(pasted + config.read_text("utf-8"))
    lines = config.read_text("utf-8").splitlines()
    models = [i + 1 for i, line in enumerate(lines) if line.startswith("models:")]
    routing = [i + 1 for i, line in enumerate(lines) if line.startswith("routing:")]
    result = klaw_here(home, "config", "check")
    assert result.returncode == 2
    said = " ".join(result.stderr.split())
    assert f"line {models[1]}: 'models' is already set at line {models[0]}" in said
    assert f"line {routing[1]}: 'routing' is already set at line {routing[0]}" in said
    assert "gives 2 keys twice" in said and "Traceback" not in result.stderr


def test_an_indentation_slip_is_named_in_words_on_the_lines_around_it(tmp_path: Path) -> None:
    """`debounceMs` indented 3 spaces among keys indented 2 said "at line 37, column 3: expected <block
    end>, but found '<block mapping start>'": the line after the mistake, in the parser's jargon."""
    home = tmp_path / "home"
    init_home(home)
    config = home / "engine.yaml"
    lines = config.read_text("utf-8").splitlines()
    slip = next(i for i, line in enumerate(lines) if line.startswith("  debounceMs:"))
    lines[slip] = " " + lines[slip]
    config.write_text("\n".join(lines) + "\n", "utf-8")
    result = klaw_here(home, "config", "check")
    assert result.returncode == 2
    said = " ".join(result.stderr.split())
    assert f"line {slip + 1} or {slip + 2}: the indentation does not match the lines around it" in said
    assert f"(line {slip + 1} is indented 3 spaces, line {slip + 2} 2 spaces)" in said
    assert "block end" not in said and "Traceback" not in result.stderr


def test_config_check_warns_of_a_tools_approval_name_no_tool_has(tmp_path: Path) -> None:
    """`klaw tools` flags a misspelt `tools.approval` name (decision 238); `klaw config check` said the
    file was valid and nothing more, while the tool meant ran unasked (decision 249)."""
    (tmp_path / "engine.yaml").write_text("tools:\n  approval: [host_exec, file_wrte, file_write]\n", "utf-8")
    result = klaw_here(tmp_path, "config", "check")
    assert result.returncode == 0, result.stderr  # valid: only a warning
    said = " ".join(result.stderr.split())
    assert "warning: tools.approval names file_wrte, but no tool has this name" in said
    assert "use a name `klaw tools` lists" in said
    assert "names file_write," not in said and said.count("tools.approval names") == 1
    held = "tools:\n  approval: [host_exec, file_write, code_execute]\n"  # code_execute too: decision 515
    (tmp_path / "engine.yaml").write_text(held, "utf-8")
    quiet = klaw_here(tmp_path, "config", "check")
    assert quiet.returncode == 0 and "warning" not in quiet.stderr
