"""`klaw skills list|check`: the workspace's skills as the engine sees them (klaw/tools/skills/catalogue.py)."""

from __future__ import annotations

from typing import TYPE_CHECKING

import typer
from rich.console import Console
from rich.table import Table

from klaw.cli.context import home_from_env, load_or_exit, print_whole, stdout_console
from klaw.terminal_text import one_line, visible

if TYPE_CHECKING:  # loaded by the commands that use them, so `klaw --help` loads none of it
    from klaw.tools.skills.catalogue import SkillScan

app = typer.Typer(
    rich_markup_mode="markdown",
    help="The agent's skills: folders under workspace/skills/ with a SKILL.md.",
    no_args_is_help=True,
)


def _scan() -> tuple[SkillScan, str]:
    from klaw.tools.skills.catalogue import scan_skills

    home = home_from_env()  # a mistyped KLAW_HOME would otherwise just look like a home without skills
    config = load_or_exit(home).config
    return scan_skills(home.skills_dir, max_bytes=config.tools.skills.max_file_bytes), str(home.skills_dir)


def problem_lines(scan: SkillScan) -> list[str]:
    """A line per skill problem: `skipped: …` for a skill left out, `warning: …` for one loaded anyway
    (also how `klaw config check` says them); a name or path from the folder shown, never obeyed (296)."""
    return [
        one_line(f"{'skipped' if problem.severity == 'error' else 'warning'}: {problem}") for problem in scan.problems
    ]


def _print_problems(console: Console, scan: SkillScan) -> None:
    for line in problem_lines(scan):
        console.print(line, soft_wrap=True)


@app.command("list")
def list_skills() -> None:
    """Each usable skill's name, description and files; then the skills left out, and why."""
    scan, folder = _scan()
    console = stdout_console(highlight=False)
    if not scan.skills:
        console.print(f"No usable skills in {folder}.")
    else:
        table = Table("name", "description", "files")
        for skill in scan.skills.values():
            table.add_row(visible(skill.name), visible(skill.summary), str(len(skill.files)))  # shown, not obeyed
        print_whole(console, table)
    _print_problems(console, scan)


@app.command()
def check() -> None:
    """Check every skill (front matter, names, sizes, paths inside the skill's folder); exit 1 if one is left out."""
    scan, folder = _scan()
    console = stdout_console(highlight=False)
    _print_problems(console, scan)
    errors = len({p.path.split("/", 1)[0] for p in scan.errors})
    console.print(f"{len(scan.skills)} skill(s) usable, {errors} left out, in {folder}")
    if scan.errors:
        raise typer.Exit(1)
