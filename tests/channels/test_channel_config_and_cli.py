"""The `channels` section of engine.yaml, and `klaw gateway` / `klaw serve` refusing to start half-configured."""

from __future__ import annotations

import asyncio
import os
import pty
import signal
from pathlib import Path

import httpx
import pytest

from klaw.config import EngineConfig
from klaw.config_loader import ConfigError, load_config
from tests.cli.klaw_here import klaw_here
from tests.cli.test_cli import klaw
from tests.engine import short_socket_dir
from tests.serve_helpers import STARTS_WITHIN, running, serve_env, stop


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "engine.yaml"
    path.write_text(text, encoding="utf-8")
    return path


def test_defaults_serve_the_web_page_on_localhost_only() -> None:
    channels = EngineConfig().channels
    assert (channels.web.enabled, channels.web.host, channels.web.port) == (True, "127.0.0.1", 8765)
    assert not channels.telegram.enabled and channels.telegram.allowed_chat_ids == ()
    assert channels.telegram.token_env == "KLAW_TELEGRAM_TOKEN"


def test_telegram_section_is_parsed_and_env_can_set_the_allow_list(tmp_path: Path) -> None:
    text = "channels:\n  telegram:\n    enabled: true\n    tokenEnv: MY_BOT\n    allowedChatIds: [1, -1002]\n"
    loaded = load_config(write(tmp_path, text), env={"KLAW__CHANNELS__TELEGRAM__ALLOWEDCHATIDS": "[7]"})
    telegram = loaded.config.channels.telegram
    assert telegram.enabled and telegram.token_env == "MY_BOT" and telegram.allowed_chat_ids == (7,)
    assert loaded.sources["channels.telegram.allowedChatIds"] == "env KLAW__CHANNELS__TELEGRAM__ALLOWEDCHATIDS"


@pytest.mark.parametrize(
    ("yaml_text", "message"),
    [
        ("channels:\n  telegram:\n    tokenEnv: '123456:ABC-DEF'\n", "not the token itself"),
        ("channels:\n  telegram:\n    apiBaseUrl: api.telegram.org\n", "must start with http"),
        ("channels:\n  web:\n    port: 70000\n", "channels.web.port = 70000"),
        ("channels:\n  telegram:\n    allowedChatIds: [me]\n", "channels.telegram.allowedChatIds.0"),
    ],
)
def test_invalid_channel_settings_say_what_is_wrong(tmp_path: Path, yaml_text: str, message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        load_config(write(tmp_path, yaml_text), env={})


def test_gateway_without_any_channel_says_what_to_enable(tmp_path: Path) -> None:
    write(tmp_path, "channels:\n  web:\n    enabled: false\n")
    result = klaw(tmp_path, "gateway")
    assert result.returncode == 2
    assert "no channel is enabled" in result.stderr


def test_telegram_without_its_token_variable_names_the_variable(tmp_path: Path) -> None:
    telegram = "  telegram:\n    enabled: true\n    tokenEnv: KLAW_TEST_BOT\n"
    write(tmp_path, "channels:\n  web:\n    enabled: false\n" + telegram)
    result = klaw(tmp_path, "serve", env={"KLAW_TEST_BOT": ""})
    assert result.returncode == 2
    assert "KLAW_TEST_BOT" in result.stderr and "@BotFather" in result.stderr


def test_config_check_refuses_an_unset_bot_token_variable_as_serve_does(tmp_path: Path) -> None:
    """`klaw config check` said valid while `klaw serve` refused to start; the token variable is now checked as
    a routed model's apiKeyEnv is: refused with serve's own sentence, a warning when only service.env sets it."""
    write(tmp_path, "channels:\n  telegram:\n    enabled: true\n    tokenEnv: KLAW_TEST_BOT\n")
    checked = klaw_here(tmp_path, "config", "check", env={"KLAW_TEST_BOT": ""})
    served = klaw(tmp_path, "serve", env={"KLAW_TEST_BOT": ""})
    sentence = "channels.telegram is enabled but the environment variable KLAW_TEST_BOT is empty"
    assert checked.returncode == 1 and "valid, but klaw serve will not start from here" in " ".join(
        checked.stderr.split()
    )
    assert sentence in " ".join(checked.stderr.split()) and sentence in " ".join(served.stderr.split())
    (tmp_path / "service.env").write_text("KLAW_TEST_BOT=123:abc\n", encoding="utf-8")
    (tmp_path / "service.env").chmod(0o600)
    for_service = klaw_here(tmp_path, "config", "check", env={"KLAW_TEST_BOT": ""})
    assert for_service.returncode == 0 and "valid" in for_service.stdout
    assert "KLAW_TEST_BOT (channels.telegram.tokenEnv) is set only in" in " ".join(for_service.stderr.split())
    assert "123:abc" not in for_service.stderr + for_service.stdout
    assert klaw_here(tmp_path, "config", "check", env={"KLAW_TEST_BOT": "123:abc"}).returncode == 0


class Output:
    """The stdout of `klaw serve`, a pipe (as under systemd) or a terminal (a pty, as for a person)."""

    def __init__(self, terminal: bool) -> None:
        self.terminal = terminal
        self.reader, self.writer = pty.openpty() if terminal else os.pipe()
        self.pending = b""

    async def readline(self) -> str:
        while b"\n" not in self.pending:
            try:
                chunk = await asyncio.to_thread(os.read, self.reader, 4096)
            except OSError:  # a pty whose other end closed
                chunk = b""
            if not chunk:
                line, self.pending = self.pending, b""
                return line.decode()
            self.pending += chunk
        line, _, self.pending = self.pending.partition(b"\n")
        return line.decode().rstrip("\r") + "\n"

    def close(self) -> None:
        os.close(self.reader)


def serve_home(directory: Path) -> tuple[Path, dict[str, str]]:
    """A home for `klaw serve` (a model that never answers, the fake embedder, the web page on any port)
    and the environment to run it in."""
    home = directory / "home"
    home.mkdir()
    write(
        home,
        "models:\n  fake/x:\n    baseUrl: http://127.0.0.1:9/v1\nrouting:\n  default: fake/x\n"
        "embedder:\n  backend: fake\n  dim: 32\nchannels:\n  web:\n    port: 0\n",
    )
    return home, serve_env(home, COLUMNS="200")


@pytest.mark.parametrize("terminal", [False, True], ids=["stdout a pipe", "stdout a terminal"])
async def test_klaw_serve_runs_engine_and_web_page_and_stops_on_sigterm(terminal: bool) -> None:
    with short_socket_dir() as directory:
        home, env = serve_home(directory)
        output = Output(terminal)
        try:
            async with running(env=env, stdout=output.writer) as process:
                os.close(output.writer)
                lines: list[str] = []
                async with asyncio.timeout(STARTS_WITHIN):
                    while not any(line.startswith("access token:") for line in lines):
                        line = await output.readline()
                        assert line, "klaw serve exited early"
                        lines.append(line)
                url = next(line for line in lines if line.startswith("web page:")).split()[-1]
                token = (home / "web_token").read_text(encoding="utf-8").strip()
                # A person at a terminal is shown the token; a journal or log file only where it is kept.
                assert any(token in line for line in lines) is terminal
                assert any(str(home / "web_token") in line for line in lines if line.startswith("access token:"))
                async with httpx.AsyncClient() as client:
                    assert (await client.get(url + "login")).status_code == 200
                assert (home / "engine.sock").exists()
                assert await stop(process) == 0
                stderr = (await process.stderr.read()).decode() if process.stderr else ""
                assert token not in stderr
                assert "lost the engine" not in stderr  # serve stops its own engine: no news for the person
                while line := await output.readline():
                    assert terminal or token not in line
        finally:
            output.close()


async def test_klaw_serve_piped_into_a_reader_that_ctrl_c_ended_still_stops_cleanly() -> None:
    """`klaw serve 2>&1 | tee log`, then Ctrl-C: the reader dies with the same signal, and the
    "stopping…" line klaw then prints meets a closed pipe. The shutdown must still run: the socket is
    removed and the process exits 0 (it used to die on the print, leaving engine.sock behind)."""
    with short_socket_dir() as directory:
        home, env = serve_home(directory)
        output = Output(terminal=False)
        async with running(env=env, stdout=output.writer, stderr=output.writer) as process:
            os.close(output.writer)
            async with asyncio.timeout(STARTS_WITHIN):
                while not (line := await output.readline()).startswith("access token:"):
                    assert line, "klaw serve exited early"
            output.close()  # the reader is gone, as `tee` after Ctrl-C
            assert await stop(process, signal.SIGINT) == 0
            assert not (home / "engine.sock").exists()
