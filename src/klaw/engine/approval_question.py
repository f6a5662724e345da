"""A held call's question as the person reads it: the tool, its arguments one `name: value` line each, whole
and with nothing hidden (approval_text.py), in a code block, and the `/approve ID or /deny ID` line.

Apart from approval.py's gate (who is asked, the wait, the answers) so that each has room (decision 521).
"""

from __future__ import annotations

import json
from datetime import timedelta
from typing import Any

from klaw.engine.approval_text import duration_words, longest_backtick_run, shown, time_left_words
from klaw.llm.messages import ToolCall


def question(
    request_id: str,
    call: ToolCall,
    timeout_seconds: float,
    *,
    waited: timedelta | None = None,
    asker: str | None = None,
    grants: str | None = None,
) -> str:
    """The question as the person reads it: the tool, its arguments whole and with nothing hidden (in a
    code block; approval_text.py), the id. The gate asks only when they fit `MAX_SHOWN_CHARS`. A call
    without arguments says so in words, not with a bare `{}` in a code block. Shown again after it
    `waited`, it says the time left, in whole seconds rounded down (never more than is left). `asker`
    names who wants the call when it is not the chat's own agent: a subagent it spawned; `grants` what a yes
    grants in plain words, under the arguments (a task running a held tool unasked: decision 525)."""
    if waited is None:
        within = f"within {duration_words(timeout_seconds)}"
    else:
        within = f"in the {time_left_words(timeout_seconds - waited.total_seconds())} left"
    answer = f"/approve {request_id} or /deny {request_id} (no answer {within} means no)"
    who = "The agent" if asker is None else f"The {asker}, which the agent spawned from this chat,"
    if call_arguments(call.arguments) == {}:
        return f"{who} wants to run {shown(call.name)} (no arguments).\n{answer}"
    arguments = shown_arguments(call)
    fence = "`" * max(3, longest_backtick_run(arguments) + 1)
    granted = "" if grants is None else f"{shown(grants)}\n"
    return f"{who} wants to run {shown(call.name)}:\n{fence}\n{arguments}\n{fence}\n{granted}{answer}"


def without_answer_line(asked: str) -> str:
    """A `question` without its last line, the `/approve ID or /deny ID` a person types: what a program's
    callback (the library's `approve`) is given, which answers by returning, not by typing (decision 249)."""
    return asked.rpartition("\n")[0] or asked


def shown_arguments(call: ToolCall) -> str:
    """The call's arguments as the question shows them, every character that runs visible."""
    return shown(_argument_lines(call.arguments))


def _argument_lines(raw: str) -> str:
    """Each argument as a `name: value` line, a string as itself (a command reads as typed), even when
    it is the only one (`city: Oslo`, not a bare `Oslo` whose meaning the person must guess); anything
    else as the JSON the model sent."""
    arguments = call_arguments(raw)
    if not arguments:
        return raw.strip() or "(no arguments)"  # the JSON the model sent; `{}`: `question` says it in words
    return "\n".join(
        f"{name}: {value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)}"
        for name, value in arguments.items()
    )


def call_arguments(raw: str) -> dict[str, Any] | None:
    """The call's arguments as a mapping; None when they are not a JSON object (held anyway, to be safe)."""
    try:
        parsed = json.loads(raw) if raw.strip() else {}
    except (ValueError, RecursionError):
        return None
    return parsed if isinstance(parsed, dict) else None
