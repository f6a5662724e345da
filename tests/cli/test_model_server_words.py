"""What `klaw chat` says about a model server it cannot use, as a newcomer's trial met it: the same
words at start-up and when a turn fails, and a wrong baseUrl refused before the first message."""

from __future__ import annotations

import socket
from pathlib import Path

from klaw.llm.fake_server import FakeOpenAiServer
from tests.cli.chat_terminal import chat_env, init_home
from tests.cli.piped_chat import piped, piped_bytes, refused
from tests.cli.test_cli import klaw


def _closed_port() -> int:
    """A port nothing listens on (bound, then let go)."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def test_a_turn_that_cannot_reach_the_server_says_why_in_the_start_up_checks_words(tmp_path: Path) -> None:
    """Before, the failed turn said "could not reach the server after 1 attempt(s): ConnectError"
    while the start-up check said what that means."""
    home = tmp_path / "home"
    init_home(home)
    env = chat_env(home, f"http://127.0.0.1:{_closed_port()}/v1")
    checked = klaw(home, "chat", env=env, stdin="hello")
    turned = klaw(home, "chat", "--skip-check", env=env, stdin="hello")
    words = "connection refused (nothing listens at that address and port)"
    assert checked.returncode == 2 and words in " ".join(checked.stderr.split()), checked.stderr
    said = " ".join((turned.stdout + turned.stderr).split())
    assert turned.returncode == 1, said
    assert f"could not reach the server after 1 attempt(s): {words}" in said
    assert "ConnectError" not in said and "Traceback" not in said


async def test_a_base_url_without_v1_is_refused_before_the_first_message(tmp_path: Path) -> None:
    """Before, GET {base}/models was a 404, which the check let pass, and the first message failed
    with HTTP 404."""
    home = tmp_path / "home"
    init_home(home)
    async with FakeOpenAiServer() as model:
        bare = model.base_url.removesuffix("/v1")
        line = refused(*await piped(chat_env(home, bare), "hello"))
        assert f"{bare} has no /models (HTTP 404), but {bare}/v1 answers" in line
        assert f"add /v1 to baseUrl (models.FAKE.baseUrl: {bare}/v1)" in line
        assert model.chat_requests == []


async def test_a_base_url_ending_in_chat_completions_is_refused_and_a_turn_says_to_drop_it(tmp_path: Path) -> None:
    home = tmp_path / "home"
    init_home(home)
    async with FakeOpenAiServer() as model:
        env = chat_env(home, f"{model.base_url}/chat/completions")
        line = refused(*await piped(env, "hello"))
        assert f"drop /chat/completions: baseUrl is the part before it ({model.base_url})" in line
        # The same words when the check is skipped and the first message meets the 404.
        code, out, err = await piped_bytes(env, b"hello", "--skip-check")
        said = " ".join((out + err).split())
        assert code == 1, said
        assert "HTTP 404" in said and "drop /chat/completions: baseUrl is the part before it" in said
        assert "most servers need the /v1 suffix" not in said
        assert model.chat_requests == []


async def test_a_server_without_a_models_route_is_still_accepted(tmp_path: Path) -> None:
    """Some proxies have no /models: a 404 there, with no /v1 to add, is no reason to refuse, nor to warn
    when baseUrl already ends in the usual /v1."""
    home = tmp_path / "home"
    init_home(home)
    async with FakeOpenAiServer(serves_models=False) as model:
        model.reply_text("Hello from a proxy.")
        code, out, err = await piped(chat_env(home, model.base_url), "hello")
        assert (code, out) == (0, "Hello from a proxy.\n"), err
        assert "warning" not in err


async def test_a_base_url_whose_path_answers_a_404_page_is_doubted_at_start_and_the_chat_goes_on(
    tmp_path: Path,
) -> None:
    """lows20: `/v2` on a server whose API is at `/v1` passed the check in silence (a 404 page, and no /v1
    under it), and the first message failed with a bare HTTP 404. The start now says which URL answered 404
    and the usual /v1 path, which answers there; it refuses nothing (the turn is sent), since a server
    without a /models route (some proxies) answers so too."""
    home = tmp_path / "home"
    init_home(home)
    async with FakeOpenAiServer() as model:
        root = model.base_url.removesuffix("/v1")
        code, out, err = await piped(chat_env(home, f"{root}/v2"), "hello")
        said = " ".join(err.split())
        assert code == 1 and out == "", said  # the turn's 404, as before: only the start's words are new
        assert f"warning: GET {root}/v2/models answered HTTP 404, not JSON (routing.default = FAKE by" in said
        assert f"most model servers serve their API under /v1, and {root}/v1/models answers" in said
        assert f"set models.FAKE.baseUrl: {root}/v1 (a server without a /models route" in said
        assert said.index("warning: GET") < said.index("rejected the request (HTTP 404)") and "Traceback" not in said
        assert model.chat_requests == []
