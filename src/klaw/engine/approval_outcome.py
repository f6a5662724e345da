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
    NO_APPROVER = "no_approver"  # a program's `Klaw`: no approve= callback, or it raised; nobody answered (538)
    UNRECORDED = "unrecorded"  # approved, but its note could not be taken out (a full disk): not run (453)


def nobody_asked(tool: str, why: str, then: str) -> str:
    """A held call no person was asked about, in the one wording every way of getting there uses (a piped
    `klaw chat`, a program's `Klaw` without an approve= callback or whose callback raised): never "the person
    denied", which the model then repeats to a person who saw no question (newcomer10, newcomer24)."""
    return f"Not run: {tool} needs the person's approval, and nobody was asked: {why}. {then}"


def no_callback(tool: str) -> str:
    """A program's `Klaw` given no approve= callback: no question can reach anyone (decision 538)."""
    return nobody_asked(
        tool,
        "the program running klaw has no approval callback (Klaw's approve=), so no question reaches the person",
        f"Tell the person how to allow it: the program gives Klaw an approve= callback, or {tool} is taken out of"
        " tools.approval in its config.",
    )


def callback_raised(tool: str, fault: str) -> str:
    """A program's approve= callback that failed (`fault`: "raised ValueError", "returned str, not True or
    False"): no answer, so not approved, and no person denied it either (decision 538)."""
    return (
        f"Not run: {tool} was not approved: the approval callback {fault} (a fault in the program running klaw),"
        " so nobody answered the question. Tell the person it could not be approved; do not retry it unless"
        " they ask you to."
    )


def outcome_text(decision: Decision, tool: str, timeout_seconds: float, why: str | None = None) -> str:
    """What the model reads of a held call that did not run (\"\" when approved): why, and what to do. `why`:
    the whole text when the approver said it (NO_APPROVER's `no_callback`, `callback_raised`)."""
    if decision is Decision.APPROVED:
        return ""
    if why is not None:
        return why
    if decision is Decision.DENIED:
        return f"Not run: the person denied {tool}. Do not retry it unless they ask you to."
    if decision is Decision.NO_TERMINAL:
        return nobody_asked(
            tool,
            "the message was piped into `klaw chat`, with no terminal to answer the question",
            "Tell the person how to allow it: send the message in an interactive `klaw chat` (or the web page)"
            f" and approve it there, or take {tool} out of tools.approval in their config.",
        )
    if decision is Decision.TIMED_OUT:
        return f"Not run: the person did not approve {tool} within {duration_words(timeout_seconds)}, so it was denied."
    if decision is Decision.UNRECORDED:  # the person reads it as /approve's answer, the model as the result
        return not_run_unrecorded(tool)
    return f"Not run: {tool} needs approval and the engine is stopping."
