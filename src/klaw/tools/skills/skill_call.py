"""A skill called by name: `/weather-report Tbilisi` (decision 529).

The person's text is stored and logged as they typed it, an ordinary message starting an ordinary turn; this
module gives that turn the `skill_call` layer, the skill's SKILL.md body with what followed the name filled in:
`$ARGUMENTS` (or `${ARGUMENTS}`) is all of it, `$1`..`$9` (or `${1}`..`${9}`) its words (shell-like quoting
groups words; unbalanced quotes split on spaces), missing ones empty. A body with none of these placeholders
gets the words appended as "Arguments: …". The layer is rebuilt from the stored text each time the turn's
context is built, so a message answered after a restart is a skill call again.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Mapping, Sequence

from klaw.command_syntax import COMMAND_NAMES, parse_command
from klaw.tools.skills.skill_files import SKILL_FILE, Skill, SkillPathError, read_confined, split_front_matter

_ARGUMENTS = re.compile(r"\$(?:\{ARGUMENTS\}|ARGUMENTS\b)")
_POSITIONAL = re.compile(r"\$(?:\{([1-9])\}|([1-9])(?![0-9]))")
_PLACEHOLDER = re.compile(rf"(?P<all>{_ARGUMENTS.pattern})|{_POSITIONAL.pattern}")


def called_skill(text: str, skills: Mapping[str, Skill]) -> tuple[Skill, str] | None:
    """(the skill, the words after its name) when `text` is `/name words` for a skill a person may call by name;
    None for a message or a command (a command's name wins over a skill's)."""
    command = parse_command(text)
    if command is None or command.name in COMMAND_NAMES:
        return None
    skill = skills.get(command.name)
    if skill is None or not skill.user_invocable:
        return None
    return skill, command.args


def _words(args: str) -> list[str]:
    try:
        return shlex.split(args)
    except ValueError:  # an unbalanced quote ("it's"): the words as typed, split on spaces
        return args.split()


def filled(body: str, args: str) -> str:
    """The body with `$ARGUMENTS` and `$1`..`$9` filled from `args`, or `args` appended when it has neither."""
    if not (_ARGUMENTS.search(body) or _POSITIONAL.search(body)):
        return f"{body.rstrip()}\n\nArguments: {args}" if args else body
    words = _words(args)

    def put(match: re.Match[str]) -> str:
        if match.group("all"):
            return args
        index = int(match.group(2) or match.group(3)) - 1  # ${N} or $N
        return words[index] if index < len(words) else ""

    # one pass over the body alone: a `$5` or `${2}` the person typed is their text, never filled in turn (543)
    return _PLACEHOLDER.sub(put, body)


def call_layer(texts: Sequence[str], skills: Mapping[str, Skill], *, max_bytes: int) -> str | None:
    """The `skill_call` layer for a turn whose person's messages are `texts`: each skill called among them, its
    body filled; None when none calls one. A SKILL.md that cannot be read now is said, so the agent tells the person."""
    parts = []
    for text in texts:
        called = called_skill(text, skills)
        if called is None:
            continue
        skill, args = called
        typed = " ".join(text.split())
        try:
            _, body = split_front_matter(read_confined(skill.folder, SKILL_FILE, max_bytes=max_bytes))
        except SkillPathError as exc:
            parts.append(
                f"The person typed {typed!r} to call the skill {skill.name}, but it cannot be read now: {exc}."
            )
            continue
        files = "\n".join(f"- {f}" for f in skill.files)
        tail = f"\n\nFiles of this skill (read one with skill_read({skill.name!r}, path)):\n{files}" if files else ""
        parts.append(
            f"The person typed {typed!r}: a call of the skill {skill.name}. Follow its instructions below for that"
            f" message (SKILL.md, the words after the name filled in).\n\n# Skill: {skill.name}\n\n"
            f"{filled(body.strip(), args)}{tail}"
        )
    return "\n\n".join(parts) or None
