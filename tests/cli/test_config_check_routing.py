"""`klaw config check` on a routing a person did not write, or wrote through the environment: the
answer says where the model name came from. Before, a `models:` with only `stand-in/echo` and no
`routing:` was told "routing.default names model 'ollama/llama3.2'", a name the person never wrote,
and `KLAW__ROUTING__DEFAULT=nope` was not named although a misspelt variable is."""

from __future__ import annotations

from pathlib import Path

from tests.cli.klaw_here import klaw_here
from tests.cli.test_cli import klaw

ONLY_THE_STAND_IN = "models:\n  stand-in/echo:\n    baseUrl: http://127.0.0.1:8999/v1\n"


def _home(tmp_path: Path, yaml: str) -> Path:
    home = tmp_path / "home"
    home.mkdir(mode=0o700)
    (home / "engine.yaml").write_text(yaml, encoding="utf-8")
    (home / "engine.yaml").chmod(0o600)
    return home


def test_a_missing_routing_section_is_said_to_leave_the_built_in_default(tmp_path: Path) -> None:
    result = klaw_here(_home(tmp_path, ONLY_THE_STAND_IN), "config", "check")
    said = " ".join(result.stderr.split())
    assert result.returncode == 2, said
    assert "routing.default is not set, so it is klaw's built-in default 'ollama/llama3.2'" in said
    assert "Set routing.default to one of the models listed there, e.g. routing: {default: stand-in/echo}" in said
    assert "Value error" not in said and "Traceback" not in said


def test_a_default_the_person_wrote_is_still_said_to_be_theirs(tmp_path: Path) -> None:
    home = _home(tmp_path, ONLY_THE_STAND_IN + "routing:\n  default: stand-in/ech\n")
    said = " ".join(klaw_here(home, "config", "check").stderr.split())
    assert "routing.default names model 'stand-in/ech', which is not under models: (stand-in/echo)" in said
    assert "built-in" not in said and "KLAW__" not in said.split(":", 2)[-1]


def test_a_default_from_the_environment_names_the_variable(tmp_path: Path) -> None:
    home = _home(tmp_path, ONLY_THE_STAND_IN + "routing:\n  default: stand-in/echo\n")
    result = klaw_here(home, "config", "check", env={"KLAW__ROUTING__DEFAULT": "nope"})
    said = " ".join(result.stderr.split())
    assert result.returncode == 2, said
    assert "routing.default names model 'nope', which is not under models: (stand-in/echo)" in said
    assert "(routing.default is set by KLAW__ROUTING__DEFAULT)" in said


def test_config_check_refuses_an_unset_api_key_variable_as_klaw_chat_does(tmp_path: Path) -> None:
    """Before, `klaw config check` said "valid" and `klaw chat` then exited 2 on the unset variable."""
    home = _home(tmp_path, "models:\n  m/x:\n    baseUrl: http://127.0.0.1:8999/v1\n    apiKeyEnv: MY_MODEL_KEY\n")
    (home / "engine.yaml").write_text(
        (home / "engine.yaml").read_text(encoding="utf-8") + "routing:\n  default: m/x\n", encoding="utf-8"
    )
    env = {"MY_MODEL_KEY": ""}
    checked = klaw_here(home, "config", "check", env=env)
    chat = klaw(home, "chat", env=env, stdin="hello")
    sentence = "the environment variable MY_MODEL_KEY, which should hold the API key, is not set"
    assert checked.returncode == 1 and "valid" not in checked.stdout, checked.stdout
    assert sentence in " ".join(checked.stderr.split())
    assert chat.returncode == 2 and sentence in " ".join(chat.stderr.split())
    assert klaw_here(home, "config", "check", env={"MY_MODEL_KEY": "sk-test"}).returncode == 0


def test_a_key_only_the_services_env_file_sets_is_a_warning_not_a_failure(tmp_path: Path) -> None:
    """`klaw service install --copy-env` keeps the key in KLAW_HOME/service.env for the service (decision
    227): config check from a shell without it calls the file valid and says the shell lacks it."""
    home = _home(tmp_path, "models:\n  m/x:\n    baseUrl: http://127.0.0.1:8999/v1\n    apiKeyEnv: MY_MODEL_KEY\n")
    (home / "engine.yaml").write_text(
        (home / "engine.yaml").read_text(encoding="utf-8") + "routing:\n  default: m/x\n", encoding="utf-8"
    )
    (home / "service.env").write_text('MY_MODEL_KEY="sk-test"\n', encoding="utf-8")
    (home / "service.env").chmod(0o600)
    checked = klaw_here(home, "config", "check", env={"MY_MODEL_KEY": ""})
    said = " ".join(checked.stderr.split())
    assert checked.returncode == 0 and "valid" in checked.stdout, said
    assert "warning: MY_MODEL_KEY (a routed model's apiKeyEnv) is set only in" in said
    assert "sk-test" not in said + checked.stdout


def test_an_mcp_group_without_its_server_names_the_field_in_plain_words(tmp_path: Path) -> None:
    """Before: "(top level): Value error, tools.enabled names 'mcp:notes', …" (pydantic's wording), and
    every other check of klaw's own began "Value error, " too."""
    home = _home(
        tmp_path, ONLY_THE_STAND_IN + "routing: {default: stand-in/echo}\ntools: {enabled: [clock, 'mcp:notes']}\n"
    )
    result = klaw_here(home, "config", "check")
    said = " ".join(result.stderr.split())
    assert result.returncode == 2, said
    assert (
        "- tools.enabled names 'mcp:notes', but mcp.servers has no server 'notes' (configured: none): add it under"
        " mcp.servers, or take 'mcp:notes' out of tools.enabled"
    ) in said
    assert "top level" not in said and "Value error" not in said
    from_env = klaw_here(home, "config", "check", env={"KLAW__TOOLS__ENABLED": "['mcp:files']"})
    assert "(tools.enabled is set by KLAW__TOOLS__ENABLED)" in " ".join(from_env.stderr.split())
    (home / "engine.yaml").write_text("mcp: {servers: {notes: {command: notes-mcp, url: 'http://127.0.0.1:9/mcp'}}}\n")
    said = " ".join(klaw_here(home, "config", "check").stderr.split())
    assert "- mcp.servers.notes: give either command (a program klaw starts) or url" in said, said
    assert "Value error" not in said


def test_a_telegram_bot_with_no_allowed_chat_is_warned_about_as_klaw_serve_does(tmp_path: Path) -> None:
    """newcomer7: `allowedChatIds: []` was plainly "valid" while klaw serve warned every chat is refused."""
    home = _home(tmp_path, "channels:\n  telegram:\n    enabled: true\n    allowedChatIds: []\n")
    checked = klaw_here(home, "config", "check", env={"KLAW_TELEGRAM_TOKEN": "123456:abc"})
    said = " ".join(checked.stderr.split())
    assert checked.returncode == 0 and "valid" in checked.stdout, said
    assert "warning: channels.telegram.allowedChatIds is empty; every chat will be refused" in said
    assert "its refusal names the chat id to put in allowedChatIds" in said
    (tmp_path / "2").mkdir()
    allowed = _home(tmp_path / "2", "channels:\n  telegram:\n    enabled: true\n    allowedChatIds: [42]\n")
    quiet = klaw_here(allowed, "config", "check", env={"KLAW_TELEGRAM_TOKEN": "123456:abc"})
    assert "allowedChatIds" not in quiet.stderr
