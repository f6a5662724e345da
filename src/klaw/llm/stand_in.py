"""The stand-in model's replies (`python -m klaw.llm.fake_server`): an echo that can also call a tool.

A newcomer without a model tries klaw with the stand-in; an echo alone never calls a tool, so approvals,
scheduled tasks, `web_fetch`, `code_execute` and `message_send` stayed out of reach until a real model
was set up (newcomer13 wrote a stub for them). So a message `!TOOL {json arguments}` makes the stand-in
call that tool with those arguments (`!current_time` without arguments calls it with none), and when
the tool's result comes back it answers with that result; anything else is echoed as before. A tool
the turn does not offer, or arguments that are not a JSON object, are answered in words naming what
is offered, not called.

Messages sent close together reach the model as one turn, their texts joined line by line (adversary23:
"hello" then "!current_time" was echoed, not called). So the call is the turn's last line starting with
`!`: its name, then the JSON object begun on that line (it may run over the next lines); the text around
it is the rest of the turn, not arguments. The last thing asked for is done.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Mapping, Sequence
from typing import Any

from klaw.ascii_digits import digits
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
    said = _last_call(str(users[-1].get("content") or "") if users else "")
    if said is None:
        return echo_last_user_message(body)
    first, _, later = said[len(CALL_MARK) :].partition("\n")
    name, _, raw = first.strip().partition(" ")
    offered = sorted(
        str(tool["function"]["name"])
        for tool in body.get("tools") or []
        if isinstance(tool, dict) and isinstance(tool.get("function"), dict) and "name" in tool["function"]
    )
    if name not in offered:
        listed = ", ".join(offered) or "none (tools.enabled is empty)"
        return TextReply(f"echo: no tool named {name!r} is offered in this chat; offered: {listed}")
    try:
        # the JSON value after the name (it may run over the next lines); what follows it is the rest of the turn
        arguments = json.JSONDecoder().raw_decode(f"{raw.strip()}\n{later}")[0] if raw.strip() else {}
    except json.JSONDecodeError as exc:
        return TextReply(f'echo: the arguments of {name} are not JSON ({exc.msg}); write !{name} {{"key": "value"}}')
    except (ValueError, RecursionError):  # a number past 4,300 digits, nesting past the parser's stack
        return TextReply(f"echo: the arguments of {name} cannot be read (a number too long or nesting too deep)")
    if not isinstance(arguments, dict):
        return TextReply(f'echo: the arguments of {name} must be a JSON object, like !{name} {{"key": "value"}}')
    return ToolCallsReply(((f"call_stand_in_{len(messages)}", name, json.dumps(arguments)),))


def _last_call(text: str) -> str | None:
    """The turn's last line starting with `!` and a name, with the lines after it; None: no call asked."""
    lines = text.split("\n")
    marked = [i for i, line in enumerate(lines) if line.strip().startswith(CALL_MARK) and line.strip() != CALL_MARK]
    return "\n".join(lines[marked[-1] :]).strip() if marked else None


STAND_IN_PORT = 8999
KEPT_BY_STAND_IN = 20
"""The stand-in runs for hours: each request holds the tool schemas (~20 KB), so it keeps only the last few."""


def main(argv: Sequence[str] | None = None) -> None:
    """`python -m klaw.llm.fake_server [PORT]`: the stand-in model on 127.0.0.1 until Ctrl-C, saying what to
    put in engine.yaml to use it."""
    import sys

    args = list(sys.argv[1:] if argv is None else argv)
    if len(args) > 1 or (args and not digits(args[0], 5)):
        sys.exit("usage: python -m klaw.llm.fake_server [PORT]   (default 8999)")
    port = int(args[0]) if args else STAND_IN_PORT

    async def serve() -> None:
        from klaw.llm.fake_server import FakeOpenAiServer  # the server imports this module's neighbours, not it

        stand_in = FakeOpenAiServer(listen_port=port, keep_requests=KEPT_BY_STAND_IN, default_reply=stand_in_reply)
        async with stand_in as server:
            print(
                f"A stand-in model that echoes your last message is answering at {server.base_url}\n"
                "A line `!TOOL {json arguments}` (a turn's last such line) makes it call that tool, e.g."
                " `!current_time` or"
                ' `!web_fetch {"url": "https://example.org"}`: to try approvals, tasks and tools without a model.\n'
                "To use it, replace the models: and routing: sections of KLAW_HOME/engine.yaml with these"
                " (a section given twice is refused), then run `klaw chat`:\n\n"
                f"models:\n  stand-in/echo:\n    baseUrl: {server.base_url}\nrouting:\n  default: stand-in/echo\n\n"
                "Ctrl-C stops it.",
                flush=True,
            )
            await asyncio.Event().wait()

    try:
        asyncio.run(serve())
    except KeyboardInterrupt:
        pass
    except OSError as exc:  # the port is taken
        # the syntax, not just "pass another port" (newcomer20): the interpreter klaw runs on, as the preflight says
        import shlex

        again = f"{shlex.quote(sys.executable)} -m klaw.llm.fake_server {port + 1 if port < 65535 else 9000}"
        sys.exit(f"cannot listen on 127.0.0.1:{port}: {exc.strerror or exc}; pass another port: {again}")
