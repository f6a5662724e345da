"""An MCP server at a URL is asked through the proxy klaw's rules pick (decisions 318, 335), as model calls
are: one on this machine directly, whatever proxy the environment names. The SDK's client read the
environment itself: `HTTP_PROXY` sent a local server's requests to the proxy, and GNOME's
`all_proxy=socks://…` made it refuse to start."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.cli.chat_terminal import closed_port
from tests.engine.harness import running_engine
from tests.tools.mcp_client.test_mcp_tools_in_turns import http_notes, tool_result


@pytest.mark.parametrize(
    ("variable", "proxy"),
    [("all_proxy", "socks://127.0.0.1:{port}/"), ("HTTP_PROXY", "http://127.0.0.1:{port}")],
)
async def test_a_url_server_on_this_machine_is_asked_directly(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, variable: str, proxy: str
) -> None:
    for name in ("http_proxy", "https_proxy", "all_proxy", "no_proxy"):
        monkeypatch.delenv(name, raising=False)
        monkeypatch.delenv(name.upper(), raising=False)
    async with http_notes() as url:
        monkeypatch.setenv("NOTES_KEY", "k-123")
        monkeypatch.setenv(variable, proxy.format(port=closed_port()))  # nothing listens there
        mcp = {"servers": {"notes": {"url": url, "authorizationEnv": "NOTES_KEY"}}, "startWaitSeconds": 60}
        async with running_engine(tmp_path, tools={"enabled": ["mcp:notes"]}, mcp=mcp) as h:
            h.server.reply_tool_calls([("notes__add", {"a": 20, "b": 22})])
            h.server.reply_text("42")
            assert (await h.turn("add")).text == "42"
            assert tool_result(h) == "42"
