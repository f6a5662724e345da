"""The tool calls a reply names ("Tools used: current_time ×2, file_list"), bounded in one place for the
reply frame and the `history` query alike: the model chooses the names and how many calls it makes, so
names carried verbatim could outgrow a socket frame (a name of a megabyte, thousands of calls) and the
answer would never arrive, or a chat's history no longer fit its answer.

A call that was not run is marked: "launch_rockets (not offered)" for a tool the model was never offered
(one it invented, or another model's), "file_read ×40 (not run)" for the calls past an answer's limit
(tools.maxCallsPerResponse, decision 284), "shout (denied)" for a held call the person denied (or let
time out, or a task's run had nobody to ask), "shout (not run)" for one held and never asked (the engine
stopping, a call too long to show). The tool loop records why in the result's `not_run`, so every
channel, live and in the history, marks it the same way (decision 312)."""

from __future__ import annotations

import itertools
from collections.abc import Iterable, Mapping, Sequence

MAX_NAME_CHARS = 64
"""A tool klaw offers has at most 64 characters (tools/schema.py, OpenAI's rule): a longer name is one the
model invented, shown cut, ending in '…'."""
MAX_RUNS = 12
"""Runs (one tool called once or several times in a row) named; the calls after them are counted only."""

NOT_OFFERED = "not_offered"
"""A tool result's `not_run`: the call named a tool this run was not offered."""
OVER_LIMIT = "over_limit"
"""A tool result's `not_run`: the call came after the first tools.maxCallsPerResponse of its answer."""
DENIED = "denied"
"""A tool result's `not_run`: a held call that was denied (by the person, by their silence, by a task's rule)."""
NOT_ASKED = "not_asked"
"""A tool result's `not_run`: a held call that could not be put to the person, so it did not run."""
_MARKS = {NOT_OFFERED: " (not offered)", OVER_LIMIT: " (not run)", DENIED: " (denied)", NOT_ASKED: " (not run)"}


def tool_runs(names: Iterable[str], not_run: Mapping[int, str] | None = None) -> tuple[str, ...]:
    """The calls of a turn (each call's tool, in order) as a reply carries them: a tool called several
    times in a row once with its count ("file_read ×2"), each name cut to `MAX_NAME_CHARS`, at most
    `MAX_RUNS` runs, then "… and N more calls". At most about a kilobyte, however the model called.
    `not_run`: why the call at an index was not run (NOT_OFFERED, OVER_LIMIT, DENIED, NOT_ASKED), marked after
    its run."""
    why = not_run or {}
    marked = ((name, _MARKS.get(why.get(index, ""), "")) for index, name in enumerate(names))
    runs = [(call, sum(1 for _ in calls)) for call, calls in itertools.groupby(marked)]
    shown = [_run(name, count) + mark for (name, mark), count in runs[:MAX_RUNS]]
    more = sum(count for _, count in runs[MAX_RUNS:])
    if more:
        shown.append(f"… and {more} more call{'' if more == 1 else 's'}")
    return tuple(shown)


def tools_used(runs: Sequence[str]) -> str:
    """The line a channel shows with a reply whose turn called tools (`runs` from `tool_runs`), in
    `klaw chat` above the answer and on the web page under it."""
    return "Tools used: " + ", ".join(runs)


def tools_before_failing(runs: Sequence[str]) -> str:
    """The line the web page's history shows under a message whose turn called tools and then failed (no
    reply lists them): "Tools used before its turn failed: file_read"."""
    return "Tools used before its turn failed: " + ", ".join(runs)


def _run(name: str, count: int) -> str:
    shown = name if len(name) <= MAX_NAME_CHARS else name[: MAX_NAME_CHARS - 1] + "…"
    return shown if count == 1 else f"{shown} ×{count}"
