"""`klaw chat`'s check that the model answers, before the first message, follows klaw's proxy rules
(decisions 318, 335) as the model calls do. It used a plain httpx client: `all_proxy=socks://…` (GNOME's
proxy setting) ended in a traceback ("Unknown scheme for proxy URL"), and `HTTP_PROXY` sent the check for a
model on this machine to the proxy, so a running model was called unreachable."""

from __future__ import annotations

from pathlib import Path

import pytest

from klaw.llm.fake_server import FakeOpenAiServer
from tests.cli.chat_terminal import chat_env, closed_port, init_home
from tests.cli.piped_chat import piped

PROXY_VARIABLES = ("http_proxy", "https_proxy", "all_proxy", "no_proxy")


@pytest.mark.parametrize(
    ("variable", "proxy"),
    [("all_proxy", "socks://127.0.0.1:{port}/"), ("HTTP_PROXY", "http://127.0.0.1:{port}")],
)
async def test_a_model_on_this_machine_is_checked_directly_whatever_proxy_is_set(
    tmp_path: Path, variable: str, proxy: str
) -> None:
    home = tmp_path / "home"
    init_home(home)
    async with FakeOpenAiServer() as model:
        env = {k: v for k, v in chat_env(home, model.base_url).items() if k.lower() not in PROXY_VARIABLES}
        env[variable] = proxy.format(port=closed_port())  # nothing listens there
        code, out, err = await piped(env, "hi\n")
        assert "Traceback" not in err
        assert (code, out) == (0, "echo: hi\n"), err
        assert [r.path for r in model.requests][:1] == ["/v1/models"]  # the check, then the message
