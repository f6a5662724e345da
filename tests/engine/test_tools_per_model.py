"""`models.<id>.tools`: a model offered fewer groups than `tools.enabled` (a small local model), through
whole turns: its requests carry only its groups' schemas, /context counts only those, a call to a tool
of another group is refused as unknown and nothing runs, and switching the chat's model with /model
switches the tools. engine.yaml naming an unknown group there is refused, naming the field."""

from __future__ import annotations

from pathlib import Path

import pytest

from klaw.config_loader import ConfigError, load_config
from tests.engine.harness import CHAT, running_engine

SMALL = {"contextBudget": 4000, "maxRetries": 0, "tools": ["clock", "web"]}


def offered(body: object) -> list[str]:
    assert isinstance(body, dict)
    return [tool["function"]["name"] for tool in body.get("tools", [])]


async def test_a_small_model_is_offered_only_its_groups_and_cannot_call_the_others(tmp_path: Path) -> None:
    async with running_engine(tmp_path, models={"fake/small": SMALL}) as h:
        (h.home.workspace / "secret.txt").write_text("the PIN is 4321", encoding="utf-8")
        h.server.reply_tool_calls([("file_read", {"path": "secret.txt"})])
        h.server.reply_text("done")
        assert (await h.turn("read secret.txt")).text == "done"
        assert offered(h.server.chat_requests[0].body) == ["current_time", "web_fetch"]
        result = h.last_request_messages()[-1]
        assert result["content"] == "unknown tool 'file_read'; available tools: current_time, web_fetch"
        assert "4321" not in str(h.server.chat_requests[-1].body)
        context = await h.engine.commands.handle(CHAT, "context", "")
        assert "- tools: " in context and "(2 item(s))" in context and "file_read" not in context

        await h.engine.commands.handle(CHAT, "model", "fake/large")  # tools.enabled: every default group
        await h.turn("hello again")
        large = offered(h.server.chat_requests[-1].body)
        assert {"current_time", "file_read", "memory_search", "web_fetch", "schedule_add"} <= set(large)


def test_an_unknown_group_for_a_model_is_refused_naming_where(tmp_path: Path) -> None:
    path = tmp_path / "engine.yaml"
    path.write_text(
        "models:\n  local/tiny:\n    baseUrl: http://localhost:11434/v1\n    tools: [clock, webz]\n"
        "routing:\n  default: local/tiny\n",
        encoding="utf-8",
    )
    # A name no group has is not refused when read (decision 501): the engine runs without it, `klaw tools`
    # and `klaw config check` name it failed (tests/tools/test_plugin_uninstalled.py).
    assert load_config(path, env={}).config.models["local/tiny"].tools == ("clock", "webz")
    path.write_text(
        "models:\n  local/tiny:\n    baseUrl: http://localhost:11434/v1\n    tools: [clock, 'mcp:notes']\n"
        "routing:\n  default: local/tiny\n",
        encoding="utf-8",
    )
    with pytest.raises(ConfigError, match=r"models\.local/tiny\.tools names 'mcp:notes', but mcp\.servers has no"):
        load_config(path, env={})
    path.write_text(
        "models:\n  local/tiny:\n    baseUrl: http://localhost:11434/v1\n    tools: []\n"
        "routing:\n  default: local/tiny\n",
        encoding="utf-8",
    )
    config = load_config(path, env={}).config
    assert config.tools_for("local/tiny") == () and config.tools_for("other") == config.tools.enabled
