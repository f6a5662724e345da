"""A model's (or the remote embedder's) `baseUrl` must be an http(s) URL with a host: a newcomer's
`htp//127.0.0.1:9/v1` or `ftp://example.com/v1` passed `klaw config check` and failed only at the first
chat, after start-up advice to start a server. Refused by the config model, so every way in refuses it:
engine.yaml (`klaw config check`, every command), a KLAW__ variable, and a library program's `config=`."""

from __future__ import annotations

from pathlib import Path

import pytest

from klaw import ConfigError, FunctionModel, Klaw
from klaw.config_loader import load_config
from tests.cli.test_cli import klaw

RULE = "must be an http:// or https:// URL with a host, e.g. http://localhost:11434/v1"
BAD = [
    "htp//127.0.0.1:9/v1",
    "ftp://example.com/v1",
    "localhost:11434/v1",
    "http:///v1",
    "http://h:99999/v1",
    "http://[::1/v1",
]
GOOD = [
    "http://localhost:11434/v1",
    "https://user:pw@api.example.com/v1",
    "http://[::1]:8080/v1",
    "HTTPS://Example.com",
]


def models(url: str) -> str:
    return f"models:\n  local/m:\n    baseUrl: '{url}'\nrouting:\n  default: local/m\n"


@pytest.mark.parametrize("url", BAD)
def test_a_base_url_that_is_not_http_with_a_host_is_refused_naming_the_field(tmp_path: Path, url: str) -> None:
    (tmp_path / "engine.yaml").write_text(models(url), encoding="utf-8")
    with pytest.raises(ConfigError) as caught:
        load_config(tmp_path / "engine.yaml", env={})
    assert f"  - models.local/m.baseUrl = {url!r}: " in str(caught.value) and RULE in str(caught.value)


@pytest.mark.parametrize("url", GOOD)
def test_http_and_https_urls_are_accepted(tmp_path: Path, url: str) -> None:
    (tmp_path / "engine.yaml").write_text(models(url), encoding="utf-8")
    assert load_config(tmp_path / "engine.yaml", env={}).config.models["local/m"].base_url == url


def test_the_remote_embedders_base_url_and_an_env_override_are_checked_too(tmp_path: Path) -> None:
    text = "embedder:\n  backend: openai\n  baseUrl: ftp://example.com/v1\n  model: e\n  dim: 8\n"
    (tmp_path / "engine.yaml").write_text(text, encoding="utf-8")
    with pytest.raises(ConfigError, match=r"embedder\.baseUrl = 'ftp://example.com/v1'"):
        load_config(tmp_path / "engine.yaml", env={})
    (tmp_path / "engine.yaml").write_text(models("http://localhost:11434/v1"), encoding="utf-8")
    with pytest.raises(ConfigError, match=r"models\.local/m\.baseUrl = 'htp//x/v1' \(from KLAW__MODELS__local/m"):
        load_config(tmp_path / "engine.yaml", env={"KLAW__MODELS__local/m__BASEURL": "htp//x/v1"})


def test_config_check_refuses_it(tmp_path: Path) -> None:
    home = tmp_path / "home"
    home.mkdir()
    (home / "engine.yaml").write_text(models("htp//127.0.0.1:9/v1"), encoding="utf-8")
    result = klaw(home, "config", "check")
    assert result.returncode == 2, result.stdout + result.stderr
    assert "valid" not in result.stdout and "models.local/m.baseUrl = 'htp//127.0.0.1:9/v1'" in result.stderr
    assert RULE in result.stderr and "Traceback" not in result.stderr


async def test_a_library_config_dict_with_it_is_a_config_error(tmp_path: Path) -> None:
    config = {"models": {"local/m": {"baseUrl": "ftp://example.com/v1"}}, "routing": {"default": "local/m"}}
    with pytest.raises(ConfigError, match=r"models\.local/m\.baseUrl = 'ftp://example.com/v1'"):
        async with Klaw(tmp_path / "home", config=config, model=FunctionModel(lambda m, i: "hi")):
            pass
