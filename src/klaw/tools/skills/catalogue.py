"""The skills of a workspace: scanned, re-read only when their files change, and listed for the context.

`scan_skills` is the library function behind `klaw skills list|check` and the engine alike: every
folder of `workspace/skills/` checked (klaw/tools/skills/skill_files.py), the good ones kept, the
problems listed. `SkillCatalogue` is the engine's view: every turn it compares a stamp of the folder
(the folder's and each skill folder's modification time, each SKILL.md's time, size and inode: one
`stat` per file, no parsing) with the last scan's, and scans again only when it differs, so a skill
added, edited or broken is seen on the next turn without a restart. A broken skill is left out with
one warning naming its file, logged when the scan that found it runs, never a failed turn; with a
`said_file`, once for the home rather than at every start (said_problems.py, decision 489).
"""

from __future__ import annotations

import logging
import os
import threading
from dataclasses import dataclass, field
from pathlib import Path

from klaw.llm.tokens import approximate_token_count
from klaw.log_format import LOG_FILE_ONLY
from klaw.tools.skills.said_problems import not_said
from klaw.tools.skills.skill_files import SKILL_FILE, Problem, Skill, check_skill

log = logging.getLogger(__name__)

LAYER_HEADER = "Skills (instructions for particular tasks; load one with skill_read(name) when a task calls for it):"
MORE_LINE_TOKENS = 12
MAX_LAYER_DESCRIPTION_CHARS = 200  # one line each in the layer; skill_list gives the whole description

Stamp = tuple[tuple[str, int, int, int, int], ...]


@dataclass(frozen=True)
class SkillScan:
    """The usable skills by name (sorted), every problem found (errors and warnings), and the folders an error
    left out (`skipped`: `/Upper` tells a person to run `klaw skills check`, decision 543)."""

    skills: dict[str, Skill] = field(default_factory=dict)
    problems: list[Problem] = field(default_factory=list)
    skipped: tuple[str, ...] = ()

    @property
    def errors(self) -> list[Problem]:
        return [p for p in self.problems if p.severity == "error"]


def scan_skills(skills_dir: Path, *, max_bytes: int) -> SkillScan:
    """Check every folder of `skills_dir` (hidden ones and plain files skipped); none when it is missing."""
    if not skills_dir.is_dir():
        return SkillScan()
    root = skills_dir.resolve()
    skills: dict[str, Skill] = {}
    problems: list[Problem] = []
    skipped: list[str] = []
    for entry in sorted(skills_dir.iterdir(), key=lambda p: p.name):
        if entry.name.startswith(".") or not entry.is_dir():
            continue
        try:
            checked = check_skill(entry, root, max_bytes=max_bytes)
        except (OSError, ValueError, RecursionError, MemoryError) as exc:  # a skill a model wrote can be anything
            problems.append(Problem(entry.name, f"cannot be read ({type(exc).__name__}); fix or remove the folder"))
            skipped.append(entry.name)
            continue
        problems += checked.problems
        if checked.skill is not None:
            skills[checked.skill.name] = checked.skill
        else:
            skipped.append(entry.name)
    return SkillScan(skills, problems, tuple(skipped))


def skills_stamp(skills_dir: Path) -> Stamp:
    """What changes when a skill is added, removed, renamed or its SKILL.md edited (stat calls only)."""
    try:
        entries = sorted(os.scandir(skills_dir), key=lambda e: e.name)
        own = os.stat(skills_dir)
    except OSError:
        return ()
    stamp = [("", own.st_mtime_ns, 0, 0, 0)]
    for entry in entries:
        if entry.name.startswith("."):
            continue
        try:
            folder = os.stat(entry.path)
        except OSError:
            stamp.append((entry.name, -1, 0, 0, 0))
            continue
        try:
            skill_md = os.stat(os.path.join(entry.path, SKILL_FILE))
            stamp.append((entry.name, folder.st_mtime_ns, skill_md.st_mtime_ns, skill_md.st_size, skill_md.st_ino))
        except OSError:
            stamp.append((entry.name, folder.st_mtime_ns, -1, 0, 0))
    return tuple(stamp)


class SkillCatalogue:
    """The engine's skills: `current()` re-scans only when `skills_stamp` changed (thread-safe: the
    context builder and the skill tools call it from worker threads)."""

    def __init__(self, skills_dir: Path, *, max_bytes: int, said_file: Path | None = None) -> None:
        self.skills_dir = skills_dir
        self._max_bytes = max_bytes
        self._said_file = said_file  # the problems the home's log was told of (said_problems.py); None: every scan
        self._lock = threading.Lock()
        # the last scan and the stamp it was made at, replaced as one (`kept_layer` reads it without the lock)
        self._state: tuple[Stamp | None, SkillScan] = (None, SkillScan())

    def current(self) -> SkillScan:
        stamp = skills_stamp(self.skills_dir)
        with self._lock:
            kept_stamp, kept = self._state
            if stamp == kept_stamp:
                return kept
            scan = scan_skills(self.skills_dir, max_bytes=self._max_bytes)
            fresh = scan.problems if self._said_file is None else not_said(self._said_file, scan.problems)
            for problem in fresh:
                if problem not in kept.problems:
                    action = "skipped" if problem.severity == "error" else "loaded anyway"
                    log.warning("skill %s (%s): %s", problem.path, action, problem.reason, extra=LOG_FILE_ONLY)
            self._state = (stamp, scan)
            return scan

    def layer(self, budget_tokens: int) -> str | None:
        """The skills layer: each skill's name and one-line description, as many as fit in
        `budget_tokens` (then how many more skill_list shows); None without skills."""
        return _layer(self.current(), budget_tokens)

    def kept_layer(self, budget_tokens: int) -> tuple[str | None] | None:
        """`layer` (in a 1-tuple) when no skill changed since the last scan: `skills_stamp`'s `stat` calls, no
        read, which the event loop may make itself (decision 481); None when one changed (or none was scanned
        yet): `layer`, on a worker thread, scans them again."""
        stamp = skills_stamp(self.skills_dir)
        kept_stamp, scan = self._state  # never the lock: a scan on a worker thread may hold it
        if stamp != kept_stamp:
            return None
        return (_layer(scan, budget_tokens),)


def _layer(scan: SkillScan, budget_tokens: int) -> str | None:
    """`SkillCatalogue.layer` of `scan`."""
    skills = list(scan.skills.values())
    if not skills:
        return None
    lines = [LAYER_HEADER]
    used = approximate_token_count(LAYER_HEADER)
    for index, skill in enumerate(skills):
        summary = skill.summary
        if len(summary) > MAX_LAYER_DESCRIPTION_CHARS:
            summary = summary[: MAX_LAYER_DESCRIPTION_CHARS - 1].rstrip() + "…"
        line = f"- {skill.name}: {summary}"
        cost = approximate_token_count(line) + 1
        left = len(skills) - index
        reserve = MORE_LINE_TOKENS if left > 1 else 0  # room for the "… more" line if a later one does not fit
        if used + cost + reserve > budget_tokens:
            if len(lines) == 1:
                return None  # not even one fits: skill_list still lists them
            lines.append(f"- … and {left} more (skill_list lists them all)")
            break
        lines.append(line)
        used += cost
    return "\n".join(lines)
