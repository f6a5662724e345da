"""A URL httpx parses but no connection can use is refused in words naming what is wrong, before any
lookup (adversary23): a port past 65535 gave the model "OverflowError: Python int too large to convert
to C long", a host name past DNS's limits "UnicodeError: encoding with 'idna' codec failed". Driven
through the library API: the model calls web_fetch and reads each call's result."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from klaw import AgentInfo, ChatMessage, ChatResponse, FunctionModel, Klaw, ManualClock, ToolCall
from tests.test_library import CONFIG

URLS = {
    "http://[::ffff:7f00:1]:" + "9" * 50 + "/": "has port of 50 digits: a port is a number from 1 to 65535",
    "http://example.org:70000/": "has port 70000: a port is a number from 1 to 65535",
    "http://" + "a" * 300 + "/": "has a host name too long (300 characters, its longest part 300): DNS allows 63",
    "http://" + ".".join(["b" * 60] * 5) + "/": "has a host name too long (304 characters, its longest part 60)",
}


async def test_a_port_out_of_range_or_a_host_name_too_long_is_refused_in_words(tmp_path: Path) -> None:
    results: list[str] = []

    def model(messages: Sequence[ChatMessage], info: AgentInfo) -> ChatResponse | str:
        if messages[-1].role == "user":
            calls = tuple(
                ToolCall(id=f"c{i}", name="web_fetch", arguments=f'{{"url": "{url}"}}') for i, url in enumerate(URLS)
            )
            return ChatResponse(content=None, tool_calls=calls)
        results.extend(m.content or "" for m in messages if m.role == "tool")
        return "done"

    config = {**CONFIG, "tools": {"enabled": ["web"]}}
    async with Klaw(tmp_path / "home", config=config, model=FunctionModel(model), clock=ManualClock()) as agent:
        assert await agent.ask("alice", "fetch them") == "done"
    assert len(results) == len(URLS)
    for result, (url, says) in zip(results, URLS.items(), strict=True):
        assert says in result, result
        assert "Error:" not in result.split(url[:100])[0], result  # no Python exception's name
