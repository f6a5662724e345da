"""The tool schemas a default engine sends with every model call: a token budget, and what they must still say.

They cost the same tokens on every turn, which a 4k–8k context model feels; the budget makes growth
a decision (raise it on purpose, with the reason in the commit). Measured on the `tools` array of a
real request, with the estimate every budget uses (`approximate_token_count` over its JSON), which is
also what `/context` shows as the tools layer.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from klaw.config import ALL_TOOL_GROUPS
from klaw.engine.context_builder import tools_layer
from klaw.llm.fake_server import Reply, TextReply, ToolCallsReply
from klaw.llm.messages import ToolSpec
from klaw.llm.tokens import approximate_token_count
from tests.engine.harness import CHAT, running_engine
from tests.tools.sandbox_helpers import no_sandbox_reason

# 1,734 before the schemas were tightened; 1,440 after. Raise it on purpose, never to make a test pass.
# 1500, then message_send (~85 with its wrapper), then the skills group (skill_list, skill_read: ~150), then
# web_fetch (74: one argument, and the untrusted-content warning the model must read): 1,751.
# Then code_execute (~107, offered when a sandbox works here).
# Then the docs group (docs_list, docs_read, docs_search: ~215).
# Then the descriptions cut to what a model needs to call each right (decision 186): 2,074 -> 1,902 with a
# sandbox. What is left is mostly the wire format: 21 tools' names, types and wrappers are ~850 tokens
# before a word of description.
TOOL_SCHEMA_BUDGET_TOKENS = 1950

# Every tool of a default engine, in the order offered, with the arguments whose description the model
# needs (a format, unit, limit or default it cannot guess from the name and type).
DESCRIBED_ARGUMENTS: dict[str, set[str]] = {
    "current_time": {"timezone"},
    "file_read": {"path"},
    "file_write": {"path", "content"},
    "file_list": {"path"},
    "fetch_conversation_details": {"include_full_transcript"},
    "memory_save": {"text"},
    "memory_search": set(),
    "memory_core_get": set(),
    "memory_core_update": {"set", "remove"},
    "skill_list": set(),
    "skill_read": {"name", "path"},
    "web_fetch": set(),
    "code_execute": set(),
    "docs_list": set(),
    "docs_read": {"path"},
    "docs_search": {"query"},
    "schedule_add": {"name", "message", "cron", "every", "model", "inject_into"},
    "schedule_list": set(),
    "schedule_remove": set(),
    "subagent_spawn": {"task_name", "message", "model"},
    "message_send": {"target"},
}

# Facts a model cannot call these tools correctly without: (tool, argument or None for the tool, words).
MUST_SAY = [
    ("current_time", "timezone", "IANA"),
    ("file_read", None, "characters"),
    ("file_write", "content", "1 MiB"),
    ("schedule_add", None, "time zone"),
    ("schedule_add", None, '{"silent": true}'),
    ("schedule_add", "name", "1-64"),
    ("schedule_add", "cron", "minute hour day month weekday"),
    ("schedule_add", "every", "'30m'"),
    ("schedule_add", "inject_into", "channel:chat_id"),
    ("subagent_spawn", None, '{"silent": true}'),
    ("subagent_spawn", "task_name", "1-64"),
    ("web_fetch", None, "untrusted"),
]


async def sent_tools(tmp_path: Path, **overrides: Any) -> tuple[list[dict[str, Any]], str]:
    """The `tools` array of a real turn's request, and `/context` after it."""
    async with running_engine(tmp_path, **overrides) as h:
        await h.turn("hello")
        body = h.server.chat_requests[-1].body
        assert isinstance(body, dict)
        context = await h.engine.commands.handle(CHAT, "context", "")
        return body.get("tools", []), context


def _functions(tools: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    return {tool["function"]["name"]: tool["function"] for tool in tools}


async def test_the_default_tools_fit_their_token_budget_and_context_shows_them(tmp_path: Path) -> None:
    tools, context = await sent_tools(tmp_path)
    expected = [name for name in DESCRIBED_ARGUMENTS if name != "code_execute" or no_sandbox_reason() is None]
    assert list(_functions(tools)) == expected  # a new tool is a budget decision too (code_execute: a sandbox here)
    tokens = approximate_token_count(json.dumps(tools))
    assert tokens <= TOOL_SCHEMA_BUDGET_TOKENS, f"tool schemas: {tokens} tokens, budget {TOOL_SCHEMA_BUDGET_TOKENS}"
    assert f"- tools: {tokens} tokens ({len(tools)} item(s))" in context
    for tool in tools:  # and each tool's share, in the order offered
        assert f"\n    {tool['function']['name']}: {approximate_token_count(json.dumps(tool))}\n" in context


async def test_every_tool_and_the_arguments_that_need_one_are_described(tmp_path: Path) -> None:
    functions = _functions((await sent_tools(tmp_path))[0])
    for name, described in DESCRIBED_ARGUMENTS.items():
        function = functions[name]
        assert function["description"].strip(), name
        properties = function["parameters"]["properties"]
        for argument in described:
            assert properties[argument].get("description", "").strip(), f"{name}.{argument}"
    for name, said_of, words in MUST_SAY:  # said_of: an argument, or None for the tool itself
        where = functions[name] if said_of is None else functions[name]["parameters"]["properties"][said_of]
        assert words in where["description"], (name, said_of, words)


async def test_the_schemas_carry_no_generated_filler(tmp_path: Path) -> None:
    tools = (await sent_tools(tmp_path))[0]
    text = json.dumps(tools)
    assert '"title"' not in text and '"default": null' not in text and '{"type": "null"}' not in text
    assert '"additionalProperties": true' not in text


async def test_each_default_tool_comes_from_one_of_klaws_groups(tmp_path: Path) -> None:
    async with running_engine(tmp_path) as h:
        selection = h.engine.tool_selection
        groups = {name: selection.group_of(name) for name in h.engine.tools.names}
    # none left unoffered (web_search joins once a provider is configured, host_exec once hostExec.allow names
    # commands: test_host_exec.py); each offered by the group whose name a person turns it off by
    assert list(groups) == list(DESCRIBED_ARGUMENTS)
    assert set(groups.values()) == set(ALL_TOOL_GROUPS) - {"websearch", "host"}
    assert groups["web_fetch"] == "web" and groups["subagent_spawn"] == "subagents"
    assert groups["schedule_add"] == "scheduler" and groups["message_send"] == "messaging"


def model_that_lists_tasks(body: Mapping[str, Any]) -> Reply:
    """Calls schedule_list, offered or not, then answers with what the tool said."""
    last = body["messages"][-1]
    if last.get("role") == "tool":
        return TextReply(last["content"])
    return ToolCallsReply((("call_list", "schedule_list", "{}"),))


async def test_tools_enabled_offers_only_its_groups_and_the_others_cannot_be_called(tmp_path: Path) -> None:
    async with running_engine(tmp_path, tools={"enabled": ["clock", "files"]}) as h:
        h.server.default_reply = model_that_lists_tasks
        reply = await h.turn("what is scheduled?")
        body = h.server.chat_requests[-1].body
        assert isinstance(body, dict)
        assert list(_functions(body["tools"])) == ["current_time", "file_read", "file_write", "file_list"]
        assert reply.text.startswith("unknown tool 'schedule_list'")


async def test_no_tool_groups_means_no_tools_in_the_request(tmp_path: Path) -> None:
    async with running_engine(tmp_path, tools={"enabled": []}) as h:
        await h.turn("hello")
        body = h.server.chat_requests[-1].body
        assert isinstance(body, dict) and "tools" not in body
        assert "- tools:" not in await h.engine.commands.handle(CHAT, "context", "")


def test_the_tools_layer_follows_the_tools_offered() -> None:
    """The layer is kept per set of tool objects (docs/decisions/195-context-build-cost.md): the same
    tools give the same layer, and another set, or a tool replaced by one with another schema (an MCP
    server's tools re-registered), is counted afresh."""

    def counted(tools: list[ToolSpec]) -> tuple[int, tuple[tuple[str, int], ...]]:
        wire = [t.to_wire() for t in tools]
        return approximate_token_count(json.dumps(wire)) if tools else 0, tuple(
            (t.name, approximate_token_count(json.dumps(w))) for t, w in zip(tools, wire, strict=True)
        )

    first = ToolSpec("lookup", "Find a word.", {"type": "object", "properties": {"word": {"type": "string"}}})
    second = ToolSpec("clock", "The time.")
    replaced = ToolSpec("lookup", "Find a word in the dictionary of the person's language, with its forms.")
    for tools in ([first], [first, second], [first], [replaced, second], [second, replaced], []):
        layer = tools_layer(tools)
        assert (layer.tokens, layer.parts) == counted(tools)
        assert layer.items == len(tools)
