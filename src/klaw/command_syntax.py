"""What a slash command looks like in typed text: `/name args`.

One parser for every place that must tell a command from a message: the engine (text submitted in
process, e.g. the console), the gateway (slash text becomes a `command` frame) and the Telegram
channel (`/new@thisbot`). It imports nothing of klaw but `text_preview`, so the gateway, which may not import the
engine, and the engine share it.
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Protocol

from klaw.text_preview import preview


class Described(Protocol):
    """A command as engine.yaml's `commands` lists it for /help."""

    @property
    def name(self) -> str: ...

    @property
    def description(self) -> str: ...


@dataclass(frozen=True)
class ParsedCommand:
    name: str  # lower-case, without the slash
    args: str  # the rest of the line, trimmed ("" when none)


def parse_command(text: str) -> ParsedCommand | None:
    """`/model  gpt-4o` → ParsedCommand("model", "gpt-4o"), `/weather-report\nOslo` → ("weather-report", "Oslo")
    (decision 543: a newline, tab or non-breaking space ends the name as a space does); None for text that is not
    a command: no leading slash, a lone "/", "/ x", or "//" (a way to send text starting with a slash)."""
    stripped = text.strip()
    if not stripped.startswith("/") or len(stripped) < 2 or stripped[1].isspace() or stripped.startswith("//"):
        return None
    name, *rest = stripped[1:].split(maxsplit=1)  # any whitespace ends the name: Shift+Enter, a tab, a pasted NBSP
    return ParsedCommand(name.lower(), rest[0].strip() if rest else "")


# Every command an engine answers (`engine/commands.py`'s handlers, with the memory, approval and tool
# listing parts every engine assembles): `klaw chat` tells a piped typo from a command before it starts an
# engine (decision 431); tests/engine/test_commands.py holds the two to the same set.
ENGINE_COMMANDS = frozenset(
    {
        "new",
        "model",
        "models",
        "memory",
        "status",
        "help",
        "context",
        "forget",
        "summarizer",
        "embeddings",
        "rag",
        "approve",
        "deny",
        "tools",
    }
)


# The names `/name` runs as a command, which a skill of the same name cannot have (decision 529): the engine's
# and `klaw chat`'s own way out. `klaw skills check` warns about a skill named like one.
COMMAND_NAMES = ENGINE_COMMANDS | {"exit", "quit"}


def for_this_bot(text: str, username: str) -> str | None:
    """A Telegram message as klaw takes it: `/new@thisbot x` → `/new x`; `/start` (what Telegram sends
    first) → `/help`; None for `/new@otherbot` (a group's command for another bot: neither a command nor
    a message for klaw); anything else unchanged (`/My-Skill@thisbot A  B` → `/My-Skill A  B`: the name's case
    and the words' spaces kept). `username` is the bot's, lower-case."""
    command = parse_command(text)
    if command is None:
        return text
    name, _, bot = command.name.partition("@")
    if bot and bot != username:
        return None
    if name == "start":
        return f"/help {command.args}".rstrip()
    if not bot:
        return text  # as typed: a skill's call is this message, as the console's is (decision 536)
    typed, *words = text.strip()[1:].split(maxsplit=1)  # the name ends at any whitespace, as parse_command's
    return f"/{typed.partition('@')[0]}" + (f" {words[0]}" if words else "")


def unknown_command(name: str, names: Iterable[str] = (), skipped: Iterable[str] = ()) -> str:
    """The words for `/name` when no command or skill has that name, the engine's and `klaw chat`'s alike, with
    the nearest of `names` (the commands and skills that do exist) when one is close (decision 529), or, when a
    skill folder of `skipped` (those a rule left out) has the name, that `klaw skills check` says why (543)."""
    left_out = skipped_skill(name, skipped)
    if left_out is not None:
        return left_out
    near = difflib.get_close_matches(name.lower().lstrip("/"), sorted(set(names)), n=3, cutoff=0.6)
    meant = f" (did you mean {' or '.join(f'/{n}' for n in near)}?)" if near else ""
    return f"Unknown command /{preview(name)}{meant}. Type /help for the list of commands."


def skipped_skill(name: str, skipped: Iterable[str]) -> str | None:
    """The words for `/name` when the skill folder of that name (any case: `/upper` for `Upper/`) was left out
    because its SKILL.md breaks a rule; None when no skipped folder has the name."""
    key = name.lower().lstrip("/")
    folder = next((f for f in skipped if f.lower() == key), None)
    if folder is None:
        return None
    return (
        f"Unknown command /{preview(key)}: the skill folder {preview(folder)!r} is left out, its SKILL.md breaks a"
        " rule (a skill's name is lower-case letters, digits and hyphens, the folder's own name). Run"
        " 'klaw skills check' to see what to fix. Type /help for the list of commands."
    )


def skill_not_callable(name: str) -> str:
    """The words for `/name` when `name` is a skill whose front matter says `user-invocable: false` (decision 529):
    the agent may use it when a message calls for it; a person may not call it by name."""
    shown = preview(name)
    return (
        f"The {shown} skill is not called by name (its SKILL.md says user-invocable: false): ask in words and the"
        " agent uses it when your message calls for it. Type /help for the commands and the skills you can call."
    )


# What `/help NAME` adds under a command's line (decision 527): the words its line has no room for.
COMMAND_USAGE = {
    "rag": (
        "Keys for /rag set and /rag reset (engine.yaml's rag names): conversationLimit,"
        " exchangeLimitPerConversation, minSimilarity, maxTokens; /rag config shows the values in force."
    ),
}


def help_text(
    commands: Iterable[Described], about: str = "", skills: Iterable[str] = (), skipped: Iterable[str] = ()
) -> str:
    """`/help`'s answer: the commands engine.yaml lists (`commands`), one line each, then the skills a person can
    call by name (decision 529), each with its description when `skills` maps names to them (decision 540: piped,
    `/greet` was listed bare); `/help NAME` (or `/help /NAME`): that command's line and how it is typed (it
    ignored its argument and listed them all), or how a skill is called; a skill folder of `skipped` (left out by
    a rule) named so: that `klaw skills check` says why (decision 543)."""
    listed = list(commands)
    about_skill = dict(skills) if isinstance(skills, Mapping) else {}
    callable_skills = sorted(set(skills) - COMMAND_NAMES)
    name = about.strip().lstrip("/").lower()
    if name:
        for command in listed:
            if command.name == name:
                usage = COMMAND_USAGE.get(name)
                return f"/{command.name} — {command.description}" + (f"\n{usage}" if usage else "")
        if name in callable_skills:
            said = f": {preview(about_skill[name])}" if about_skill.get(name) else ""
            return f"/{name} [words] — calls the {name} skill with the words as its $ARGUMENTS{said}"
        left_out = skipped_skill(name, skipped)
        if left_out is not None:
            return left_out
        return f"No command /{preview(name)}. " + help_text(listed, skills=callable_skills)
    said = "Commands:\n" + "\n".join(f"/{c.name} — {c.description}" for c in listed)
    if callable_skills:
        said += (
            "\nSkills (/name [words] asks the agent to follow the skill, the words as its $ARGUMENTS):\n"
            + "\n".join(
                f"/{skill} — {preview(about_skill[skill])}" if about_skill.get(skill) else f"/{skill}"
                for skill in callable_skills
            )
        )
    return said
