"""The docs match the code: every `klaw` command and every slash command is documented, and no page
calls a shipped feature "planned". Other changes add commands; a failure says what to add where."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from klaw.cli.app import command_tree
from klaw.config import EngineConfig

ROOT = Path(__file__).resolve().parent.parent
DOCS = sorted(p for p in (ROOT / "docs").rglob("*.md") if "decisions" not in p.parts)
SLASH_PAGE = ROOT / "docs" / "commands" / "slash-commands.md"


def cli_commands() -> list[str]:
    """Every command path of the typer app, e.g. "memory search", "bench scale", "chat"."""
    found: list[str] = []

    def walk(command: Any, prefix: str) -> None:  # typer's own vendored click: duck-typed
        subcommands = getattr(command, "commands", None)
        if subcommands:
            for name, sub in subcommands.items():
                walk(sub, f"{prefix} {name}".strip())
        else:
            found.append(prefix)

    walk(command_tree(), "")
    return sorted(found)


def documented(path: str, text: str) -> bool:
    """`klaw memory search`, or a group's subcommand listed beside it (`klaw bench vectors|scale`, `` `embed` ``)."""
    if f"klaw {path}" in text:
        return True
    group, _, name = path.rpartition(" ")
    if not group or f"klaw {group}" not in text:
        return False
    return any(f in text for f in (f"|{name}", f"{name}|", f"`{name}`", f"`{name} "))


def test_every_cli_command_is_in_the_readme_and_the_docs() -> None:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    docs = "\n".join(p.read_text(encoding="utf-8") for p in DOCS)
    missing = [
        f"`klaw {path}`: add it to {where}"
        for path in cli_commands()
        for where, text in (("README.md's command table", readme), ("a page under docs/", docs))
        if not documented(path, text)
    ]
    assert not missing, "undocumented commands:\n" + "\n".join(missing)


def test_every_list_of_the_benches_names_every_bench() -> None:
    """`klaw bench vectors|scale|…` is where a person learns which benches there are: getting-started.md's
    left out `summaries` and `sandbox` once they were added (the check above finds them elsewhere)."""
    benches = {path.removeprefix("bench ") for path in cli_commands() if path.startswith("bench ")}
    pages = [ROOT / "README.md", *DOCS]
    lists = [
        (page.name, set(found.split("|")))
        for page in pages
        for found in re.findall(r"klaw bench ([a-z-]+(?:\|[a-z-]+)+)", page.read_text(encoding="utf-8"))
    ]
    assert lists, "no `klaw bench a|b|…` list left: drop this test or point it at the new one"
    wrong = [f"{page}: add {sorted(benches - named)}, drop {sorted(named - benches)}" for page, named in lists]
    assert all(named == benches for _, named in lists), "\n".join(wrong)


def test_every_slash_command_is_in_the_readme_and_the_slash_commands_page() -> None:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    page = SLASH_PAGE.read_text(encoding="utf-8")
    missing = [
        f"/{command.name}: add it to {where}"
        for command in EngineConfig().commands
        for where, text in (("README.md's slash-command line", readme), (str(SLASH_PAGE.relative_to(ROOT)), page))
        if not re.search(rf"/{command.name}\b", text)
    ]
    assert not missing, "undocumented slash commands:\n" + "\n".join(missing)


def test_no_page_calls_a_feature_planned() -> None:
    """Shipped features described as future work mislead; a real plan belongs in an issue, not the docs."""
    said = [
        f"{page.relative_to(ROOT)}:{number}: {line.strip()}"
        for page in [ROOT / "README.md", *DOCS]
        for number, line in enumerate(page.read_text(encoding="utf-8").splitlines(), start=1)
        if re.search(r"\b(planned|always empty today|not .*yet implemented)\b", line)
    ]
    assert not said, "pages that call something planned (say what it does today):\n" + "\n".join(said)


def test_every_page_is_in_the_index_and_the_library_is_in_the_readme() -> None:
    """A page nobody links is a page nobody finds: docs/index.md's table links each one, and README.md
    points a Python programmer to the library page."""
    table = [
        line for line in (ROOT / "docs" / "index.md").read_text(encoding="utf-8").splitlines() if line.startswith("| [")
    ]
    index = "\n".join(table)
    unlinked = [
        str(page.relative_to(ROOT / "docs"))
        for page in DOCS
        if page.name != "index.md" and f"({page.relative_to(ROOT / 'docs').as_posix()})" not in index
    ]
    assert not unlinked, "pages docs/index.md does not link: " + ", ".join(unlinked)
    assert "(docs/library.md)" in (ROOT / "README.md").read_text(encoding="utf-8")
