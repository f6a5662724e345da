"""The container's `klaw serve` as Dockerfile and compose.yaml set it up (no Docker daemon here: their
environment, read from the two files, given to the real `klaw serve`). compose.yaml publishes the page on
the host's 127.0.0.1: klaw serve printed `web page: http://0.0.0.0:8765/`, an address no browser opens,
and warned that the page was reachable beyond this machine (newcomer9). Decision 403."""

from __future__ import annotations

import re
import socket
from pathlib import Path
from urllib.parse import urlsplit

import yaml

from klaw.llm.fake_server import FakeOpenAiServer
from tests.engine import short_socket_dir
from tests.serve_helpers import running, serve_config, serve_env, stop, web_page, write_serve_home

REPO = Path(__file__).resolve().parents[2]


def _dockerfile_env() -> dict[str, str]:
    """The web page's settings the Dockerfile's ENV gives (`KLAW__CHANNELS__WEB__…=value`)."""
    text = (REPO / "Dockerfile").read_text(encoding="utf-8")
    return dict(re.findall(r"(KLAW__CHANNELS__WEB__\w+)=(\S+)", text))


def _compose() -> tuple[dict[str, str], str]:
    """compose.yaml's environment for klaw, and the host address its ports line publishes on."""
    service = yaml.safe_load((REPO / "compose.yaml").read_text(encoding="utf-8"))["services"]["klaw"]
    [published] = service["ports"]
    return {k: str(v) for k, v in service["environment"].items()}, published.rsplit(":", 2)[0]


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


async def _serve(home: Path, env: dict[str, str]) -> tuple[str, str, str]:
    """`klaw serve` on `home` with `env`: the web page line's address, everything it printed up to it, and
    what it wrote to stderr once stopped."""
    async with running(env=serve_env(home, **env)) as serve:
        lines: list[str] = []
        url = await web_page(serve, lines)
        assert serve.stdout is not None and serve.stderr is not None
        lines.append((await serve.stdout.readline()).decode())  # the line after it, if any
        assert await stop(serve) == 0
        return url, "".join(lines), (await serve.stderr.read()).decode()


async def test_compose_s_container_shows_the_published_address_and_no_exposure_warning() -> None:
    port = str(_free_port())
    image = _dockerfile_env() | {"KLAW__CHANNELS__WEB__PORT": port}
    assert image["KLAW__CHANNELS__WEB__HOST"] == "0.0.0.0"
    compose, published_on = _compose()
    published = compose["KLAW__CHANNELS__WEB__PUBLISHED_URL"]
    assert urlsplit(published).hostname == published_on == "127.0.0.1"  # the two lines say the same address
    published = published.replace(str(urlsplit(published).port), port)
    with short_socket_dir() as directory:
        async with FakeOpenAiServer() as model:
            home = write_serve_home(directory / "home", serve_config(model.base_url, channels=None))
            url, out, err = await _serve(home, image | {"KLAW__CHANNELS__WEB__PUBLISHED_URL": published})
            assert url == f"http://127.0.0.1:{port}/", out
            assert f"listening on http://0.0.0.0:{port}/ for it: channels.web.publishedUrl" in out, out
            assert "plain HTTP" not in err and "beyond this machine" not in err, err

            # `docker run -p 8765:8765` without compose publishes on every interface: the warning stays
            url, out, err = await _serve(home, image)
            assert url == f"http://0.0.0.0:{port}/", out
            assert "listens on 0.0.0.0, beyond this machine, over plain HTTP" in " ".join(err.split()), err

            # published beyond this machine over http: warned, naming that address
            beyond = f"http://192.0.2.7:{port}/"
            url, out, err = await _serve(home, image | {"KLAW__CHANNELS__WEB__PUBLISHED_URL": beyond})
            assert url == beyond
            assert f"is published at {beyond}, beyond this machine, over plain HTTP" in " ".join(err.split()), err
