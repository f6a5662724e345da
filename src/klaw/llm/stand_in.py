"""The stand-in model's replies (`python -m klaw.llm.fake_server`): an echo that can also call a tool.

A newcomer without a model tries klaw with the stand-in; an echo alone never calls a tool, so approvals,
scheduled tasks, `web_fetch`, `code_execute` and `message_send` stayed out of reach until a real model
was set up (newcomer13 wrote a stub for them). So a message `!TOOL {json arguments}` makes the stand-in
call that tool with those arguments (`!current_time` without arguments calls it with none), and when
the tool's result comes back it answers with that result; anything else is echoed as before. A tool
the turn does not offer, or arguments that are not a JSON object, are answered in words naming what
is offered, not called.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from klaw.llm.fake_wire import Reply, TextReply, ToolCallsReply, echo_last_user_message

CALL_MARK = "!"
_SHOWN_RESULT_CHARS = 2000


def stand_in_reply(body: Mapping[str, Any]) -> Reply:
    """The reply to a chat request: a tool's result reported, a `!TOOL {json}` message's call, or the echo."""
    messages = [m for m in body.get("messages") or [] if isinstance(m, dict)]
    if messages and messages[-1].get("role") == "tool":
        result = str(messages[-1].get("content") or "")
        shown = result if len(result) <= _SHOWN_RESULT_CHARS else result[:_SHOWN_RESULT_CHARS] + "…"
        return TextReply(f"The tool answered: {shown}")
    users = [m for m in messages if m.get("role") == "user"]
    said = str(users[-1].get("content") or "").strip() if users else ""
    if not said.startswith(CALL_MARK) or len(said) == len(CALL_MARK):
        return echo_last_user_message(body)
    name, _, raw = said[len(CALL_MARK) :].partition(" ")
    offered = sorted(
        str(tool["function"]["name"])
        for tool in body.get("tools") or []
        if isinstance(tool, dict) and isinstance(tool.get("function"), dict) and "name" in tool["function"]
    )
    if name not in offered:
        listed = ", ".join(offered) or "none (tools.enabled is empty)"
        return TextReply(f"echo: no tool named {name!r} is offered in this chat; offered: {listed}")
    try:
        arguments = json.loads(raw) if raw.strip() else {}
    except json.JSONDecodeError as exc:
        return TextReply(f'echo: the arguments of {name} are not JSON ({exc.msg}); write !{name} {{"key": "value"}}')
    if not isinstance(arguments, dict):
        return TextReply(f'echo: the arguments of {name} must be a JSON object, like !{name} {{"key": "value"}}')
    return ToolCallsReply(((f"call_stand_in_{len(messages)}", name, json.dumps(arguments)),))
