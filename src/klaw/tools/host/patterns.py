"""Which commands `hostExec.allow` lets `host_exec` run, and the argument vector each one runs as.

A command is split like a shell would split words (quotes respected) but nothing else a shell does
happens: no operators, expansions or redirections. A token that is a shell operator (`;`, `&&`, `|`,
`>`, `(`…) refuses the command with a reason rather than passing it on as a literal argument, which
would only confuse the program and the model. Quoted text stays one literal argument (`grep 'a|b'`).
`$VAR`, `~` and backquotes are passed on as they are: no shell sees them.

A pattern is words, each a shell-style glob matched against one argument (`git log -n *`); a last
word `*` matches any further arguments, none included. A pattern starting with `shell:` is the one
way to a shell: the whole command line, matched against the rest of the pattern as one glob, runs by
`/bin/sh -c` — the person who writes `shell: df -h | *` allows whatever `*` can hold.
"""

from __future__ import annotations

import shlex
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from fnmatch import fnmatchcase

from klaw.errors import KlawError

_OPERATOR_CHARS = frozenset("();<>|&")
SHELL_PREFIX = "shell:"


class CommandRefused(KlawError, ValueError):
    """The command is not one the allow-list permits, or cannot be run without a shell; says why."""


@dataclass(frozen=True, slots=True)
class Pattern:
    text: str
    shell: bool
    words: tuple[str, ...]

    def matches(self, argv: Sequence[str]) -> bool:
        words = self.words
        if words and words[-1] == "*":
            fixed = words[:-1]
            return len(argv) >= len(fixed) and all(map(fnmatchcase, argv[: len(fixed)], fixed))
        return len(argv) == len(words) and all(map(fnmatchcase, argv, words))


def parse(allow: Iterable[str]) -> list[Pattern]:
    patterns = []
    for text in allow:
        if text.startswith(SHELL_PREFIX):
            body = text[len(SHELL_PREFIX) :].strip()
            patterns.append(Pattern(text, True, (body,)))
        else:
            patterns.append(Pattern(text, False, tuple(shlex.split(text))))
    return patterns


def argument_vector(command: str, patterns: Sequence[Pattern]) -> list[str]:
    """What to run for `command`: its words, or `/bin/sh -c command` for a `shell:` pattern.
    Raises CommandRefused naming what is wrong and what is allowed."""
    if "\0" in command:
        raise CommandRefused("the command holds a NUL character")
    line = command.strip()
    if not line:
        raise CommandRefused("the command is empty")
    for pattern in patterns:
        if pattern.shell and fnmatchcase(line, pattern.words[0]):
            return ["/bin/sh", "-c", line]
    try:
        lexer = shlex.shlex(line, posix=True, punctuation_chars=True)
        lexer.whitespace_split = True
        argv = list(lexer)
    except ValueError as exc:  # an unclosed quote
        raise CommandRefused(f"the command cannot be split into arguments ({exc})") from None
    operators = [token for token in argv if token and set(token) <= _OPERATOR_CHARS]
    if operators:
        raise CommandRefused(
            f"host_exec runs one program without a shell, so {operators[0]!r} is not interpreted: run one"
            " command per call, without ;, &&, |, $(…) or redirections (quote an argument that holds them)"
        )
    for pattern in patterns:
        if not pattern.shell and pattern.matches(argv):
            return argv
    allowed = "; ".join(pattern.text for pattern in patterns)
    raise CommandRefused(f"this command is not in hostExec.allow; allowed: {allowed}")
