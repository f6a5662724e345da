"""Secrets put in the wrong place in engine.yaml never reach a screen, a log or a chat.

`apiKeyEnv` names the variable holding a key; the key itself pasted there is refused (as Telegram's
`tokenEnv` is), and the refusal does not repeat it. A password in a `baseUrl`, or a key in its query
string (`…/v1?api-key=…`), is masked in every message naming the endpoint: `klaw config check|show`, the
web page's settings, the reply of a turn that failed, and klaw's log lines (`klaw -v chat`).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from klaw.config_loader import load_config
from klaw.config_view import config_rows
from klaw.engine.clock import ManualClock
from klaw.engine.runtime import Engine
from klaw.home import KlawHome
from klaw.home_init import initialise_home
from klaw.llm.fake_server import FakeOpenAiServer
from klaw.redaction import MASK, mask_url_credentials
from tests.cli.chat_terminal import chat_env, init_home
from tests.cli.klaw_here import klaw_here
from tests.cli.test_cli import klaw
from tests.cli.test_outside_text_shown import klaw as run_klaw
from tests.engine.harness import Harness, engine_config

KEY = "sk-proj-Abc123_def456-ghi789"


@pytest.mark.parametrize(
    ("section", "field"),
    [
        (f"models:\n  openai/gpt-4o:\n    baseUrl: https://api.openai.com/v1\n    apiKeyEnv: {KEY}\n", "apiKeyEnv"),
        (
            "embedder:\n  backend: openai\n  baseUrl: https://api.openai.com/v1\n  model: text-embedding-3-small\n"
            f"  dim: 1536\n  apiKeyEnv: {KEY}\n",
            "embedder.apiKeyEnv",
        ),
        (f"channels:\n  telegram:\n    tokenEnv: '{KEY}'\n", "channels.telegram.tokenEnv"),
        (f"database:\n  backend: postgres\n  urlEnv: 'postgresql://klaw:{KEY}@db/klaw'\n", "database.urlEnv"),
    ],
    ids=["model", "embedder", "telegram", "postgres"],
)
def test_a_key_pasted_where_its_variable_name_goes_is_refused_without_repeating_it(
    tmp_path: Path, section: str, field: str
) -> None:
    (tmp_path / "engine.yaml").write_text(section, encoding="utf-8")
    for command in (("config", "check"), ("config", "show"), ("engine",)):
        result = (klaw if command == ("engine",) else klaw_here)(tmp_path, *command)  # a start stays a process
        said = " ".join(result.stderr.split())
        assert result.returncode == 2
        assert field in said and "must be the name of an environment variable" in said
        assert any(f"not the {secret} itself" in said for secret in ("key", "token", "connection string"))
        assert KEY not in result.stdout + result.stderr
        assert "Traceback" not in result.stderr


def test_a_password_in_a_base_url_is_masked_by_config_show_and_check(tmp_path: Path) -> None:
    model = "models:\n  proxy/llama:\n    baseUrl: https://me:hunter2secret@proxy.example/v1\n"
    pasted_in_the_wrong_field = "    timeoutSeconds: https://me:hunter2secret@proxy.example/v1\n"
    (tmp_path / "engine.yaml").write_text(model + pasted_in_the_wrong_field, encoding="utf-8")
    check = klaw_here(tmp_path, "config", "check")
    assert check.returncode == 2
    assert f"timeoutSeconds = 'https://me:{MASK}@proxy.example/v1'" in " ".join(check.stderr.split())
    (tmp_path / "engine.yaml").write_text(model + "routing:\n  default: proxy/llama\n", encoding="utf-8")
    show = klaw_here(tmp_path, "config", "show", "--json")
    assert show.returncode == 0
    assert "hunter2secret" not in show.stdout + show.stderr + check.stdout + check.stderr
    assert json.loads(show.stdout)["models.proxy/llama.baseUrl"]["value"] == f"https://me:{MASK}@proxy.example/v1"
    assert "hunter2secret" in klaw_here(tmp_path, "config", "show", "--json", "--reveal").stdout


def test_credentials_in_any_url_of_a_text_are_masked() -> None:
    text = "at https://me:pw@a.example/v1 and http://TOKEN123@b.example:8080/x, not mail@example.com"
    assert mask_url_credentials(text) == (
        f"at https://me:{MASK}@a.example/v1 and http://{MASK}@b.example:8080/x, not mail@example.com"
    )


async def test_a_failing_turn_tells_the_chat_without_the_password_in_the_base_url(tmp_path: Path) -> None:
    home = KlawHome(tmp_path / "home")
    initialise_home(home)
    async with FakeOpenAiServer() as server:
        with_password = server.base_url.replace("http://", "http://me:hunter2secret@")
        clock = ManualClock()
        engine = await Engine.start(home, engine_config(with_password), clock=clock, listen=False)
        harness = Harness(engine, server, clock, home)
        engine.delivery.set_fallback(harness.record)
        try:
            server.reply_error(500, message="the upstream is down")
            reply = await harness.turn("hello")
        finally:
            await engine.shutdown(timeout_seconds=5)
    assert reply.kind == "error"
    assert "hunter2secret" not in reply.text
    assert f"me:{MASK}@127.0.0.1" in reply.text


QUERY_KEY = "AzureKey0123456789"


def test_a_key_in_a_base_urls_query_is_masked_by_config_show_check_and_the_settings_page(tmp_path: Path) -> None:
    url = f"https://proxy.example/v1?api-version=2024-06-01&api-key={QUERY_KEY}"
    model = f"models:\n  proxy/llama:\n    baseUrl: '{url}'\n"
    (tmp_path / "engine.yaml").write_text(model + f"    timeoutSeconds: '{url}'\n", encoding="utf-8")
    check = klaw_here(tmp_path, "config", "check")
    assert check.returncode == 2
    masked_url = f"https://proxy.example/v1?api-version={MASK}&api-key={MASK}"
    assert f"timeoutSeconds = '{masked_url}'" in " ".join(check.stderr.split())
    (tmp_path / "engine.yaml").write_text(model + "routing:\n  default: proxy/llama\n", encoding="utf-8")
    show = klaw_here(tmp_path, "config", "show", "--json")
    table = klaw_here(tmp_path, "config", "show")
    assert QUERY_KEY not in show.stdout + show.stderr + check.stdout + check.stderr + table.stdout + table.stderr
    assert json.loads(show.stdout)["models.proxy/llama.baseUrl"]["value"] == masked_url
    assert QUERY_KEY in klaw_here(tmp_path, "config", "show", "--json", "--reveal").stdout
    settings = {row.field: row.value for row in config_rows(load_config(tmp_path / "engine.yaml", env={}))}
    assert settings["models.proxy/llama.baseUrl"] == masked_url  # what GET /api/settings sends the page


async def test_a_query_in_the_base_url_is_kept_on_each_call_and_masked_in_a_failing_turns_reply(
    tmp_path: Path,
) -> None:
    home = KlawHome(tmp_path / "home")
    initialise_home(home)
    async with FakeOpenAiServer() as server:
        clock = ManualClock()
        config = engine_config(f"{server.base_url}?api-key={QUERY_KEY}")
        engine = await Engine.start(home, config, clock=clock, listen=False)
        harness = Harness(engine, server, clock, home)
        engine.delivery.set_fallback(harness.record)
        try:
            server.reply_text("fine")
            assert (await harness.turn("hello")).text == "fine"  # …/v1/chat/completions?api-key=…
            server.reply_error(500, message="the upstream is down")
            reply = await harness.turn("hello again")
        finally:
            await engine.shutdown(timeout_seconds=5)
    assert reply.kind == "error"
    assert QUERY_KEY not in reply.text
    assert f"?api-key={MASK}" in reply.text


async def test_klaw_verbose_logs_no_key_from_the_base_urls_query(tmp_path: Path) -> None:
    """httpx logs each request's URL at INFO (`HTTP Request: POST …?api-key=…`), which `klaw -v` shows."""
    home = tmp_path / "home"
    init_home(home)
    async with FakeOpenAiServer() as server:
        server.reply_text("ok")
        env = chat_env(home, f"{server.base_url}?api-key={QUERY_KEY}")
        code, out, err = await run_klaw(env, "--verbose", "chat", stdin=b"hi\n")
    assert (code, out) == (0, "ok\n"), err
    assert "HTTP Request: POST" in err and f"?api-key={MASK}" in err, err
    log = home / "logs" / "chat.log"  # warnings only, -v or not (decision 489): none here, so maybe no file
    assert QUERY_KEY not in err + (log.read_text(encoding="utf-8") if log.exists() else "")
