"""Which skill problems this home's log has been told of already (KLAW_HOME/logs/skills_said, 0600).

Every engine start scans the skills afresh, so a broken skill was logged again at each one: every
`klaw chat` put the same "skipped …" lines into chat.log, and every `klaw serve` said them again
(newcomer20, decision 489). A problem is now logged once, when a klaw process on the home first finds
it; the file holds the problems found by the last scan, so one fixed and broken again is logged again.
`klaw skills check` and `klaw skills list` name every problem every time: that is where skills matter.
An unreadable or malformed file counts as nothing said (the problems are logged again, never lost).
"""

from __future__ import annotations

import contextlib
import json
from pathlib import Path

from klaw.atomic_file import replace_file
from klaw.small_file import read_small
from klaw.tools.skills.skill_files import Problem

MAX_BYTES = 1_000_000


def _key(problem: Problem) -> str:
    return f"{problem.severity} {problem.path}: {problem.reason}"


def not_said(said_file: Path, problems: list[Problem]) -> list[Problem]:
    """The problems the file does not hold yet; the file then holds exactly `problems`."""
    try:
        said = json.loads(read_small(said_file, MAX_BYTES))
    except (OSError, ValueError):
        said = []
    known = {item for item in said if isinstance(item, str)} if isinstance(said, list) else set()
    now = [_key(problem) for problem in problems]
    if set(now) != known:
        with contextlib.suppress(OSError):  # a read-only home: logged again next time, nothing worse
            replace_file(said_file, json.dumps(sorted(now)).encode("utf-8"))
    return [problem for problem, key in zip(problems, now, strict=True) if key not in known]
