"""How an approval question ended (`Decision`) and what the model reads of it as the call's result.

Apart from approval.py's gate so that it has room (decision 521): the gate decides, this says it.
"""

from __future__ import annotations

from enum import StrEnum

from klaw.engine.approval_text import duration_words
from klaw.engine.open_questions import not_run_unrecorded


class Decision(StrEnum):
    APPROVED = "approved"
    DENIED = "denied"
    TIMED_OUT = "timed_out"
    NO_PERSON = "no_person"  # a task's run: nobody to ask, and the task was not created allowing the tool
    UNAVAILABLE = "unavailable"  # the question could not be asked, or the engine is stopping
    TOO_LONG = "too_long"  # the call cannot be shown whole in a question, so it is not asked (decision 295)
    NO_TERMINAL = "no_terminal"  # `echo … | klaw chat`: asked, but no terminal can answer it, so nobody did
    UNRECORDED = "unrecorded"  # approved, but its note could not be taken out (a full disk): not run (453)


def outcome_text(decision: Decision, tool: str, timeout_seconds: float) -> str:
    """What the model reads of a held call that did not run (\"\" when approved): why, and what to do."""
    if decision is Decision.APPROVED:
        return ""
    if decision is Decision.DENIED:
        return f"Not run: the person denied {tool}. Do not retry it unless they ask you to."
    if decision is Decision.NO_TERMINAL:
        return (
            f"Not run: {tool} needs the person's approval, and nobody was asked: the message was piped into"
            f" `klaw chat`, with no terminal to answer the question. Tell the person how to allow it: send the"
            f" message in an interactive `klaw chat` (or the web page) and approve it there, or take {tool} out"
            f" of tools.approval in their config."
        )
    if decision is Decision.TIMED_OUT:
        return f"Not run: the person did not approve {tool} within {duration_words(timeout_seconds)}, so it was denied."
    if decision is Decision.UNRECORDED:  # the person reads it as /approve's answer, the model as the result
        return not_run_unrecorded(tool)
    return f"Not run: {tool} needs approval and the engine is stopping."
