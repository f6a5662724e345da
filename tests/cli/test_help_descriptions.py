"""`klaw … --help` lists each command with its description as one paragraph: typer's rich mode kept the
docstring's line breaks, so a description stopped mid-sentence and went on below ("beside a" / "numpy
floor"), in `klaw bench --help` and every other group with a docstring longer than a line."""

from __future__ import annotations

import inspect
import os
import re
from typing import Any

from typer.testing import CliRunner

from klaw.cli.app import app, command_tree


def groups(command: Any, path: tuple[str, ...] = ()) -> list[tuple[tuple[str, ...], Any]]:
    """Every command group under `command` (typer's click groups), with the words that reach it."""
    if not hasattr(command, "commands"):
        return []
    found = [(path, command)]
    for name, sub in command.commands.items():
        found += groups(sub, (*path, name))
    return found


def described(help_text: str) -> str:
    """A command's description as the list shows it: its first paragraph on one line (Markdown's
    backticks shown as code, not as characters)."""
    first = inspect.cleandoc(help_text).partition("\f")[0].split("\n\n")[0]
    return " ".join(first.split()).replace("`", "")


def test_every_group_lists_its_commands_descriptions_on_one_line() -> None:
    # In this process (the help a person's `klaw … --help` prints, rendered by the same app): a process a group
    # took ~13 s of the suite.
    env = {k: "" for k in os.environ if k.startswith("KLAW")} | {"COLUMNS": "1000"}
    checked = 0
    for path, group in groups(command_tree()):
        result = CliRunner().invoke(app, [*path, "--help"], env=env, terminal_width=1000)
        assert result.exit_code == 0, result.output
        shown = result.stdout
        for name, command in group.commands.items():
            if command.hidden or "\n" not in inspect.cleandoc(command.help or "").split("\n\n")[0]:
                continue
            rows = [line for line in shown.splitlines() if line.strip("│ ").startswith(f"{name} ")]
            assert any(described(command.help or "") in row for row in rows), (path, name, rows)
            checked += 1
    assert checked > 10  # bench's, chat's and others' descriptions span lines in their docstrings


def test_no_help_text_has_markdown_emphasis_that_would_hide_its_characters() -> None:
    """Help is rendered as Markdown (`rich_markup_mode="markdown"`): a `*word*` or `_word_` outside
    backticks would show as emphasis and lose its characters (a glob `*.md`, an env name `_X_`). Such
    text belongs in backticks, where it is shown as written."""
    emphasis = re.compile(r"(?<![\w*])([*_]{1,2})(?=\S)(.+?)(?<=\S)\1(?![\w*])")
    found: list[tuple[str, str]] = []
    for path, group in groups(command_tree()):
        for name, command in [("", group), *group.commands.items()]:
            texts = [command.help or "", *(getattr(p, "help", None) or "" for p in command.params)]
            for text in texts:
                bare = re.sub(r"`[^`]*`", "", text)
                found += [(" ".join((*path, name)), m.group(0)) for m in emphasis.finditer(bare)]
    assert not found, found
