"""What newcomer21 met at the command line, each through klaw's own entry point (tests/cli/klaw_here.py) on a
real home (decision 502): one `error:` prefix for a mistyped command line too (it was typer's boxed "Error"),
`schedule runs` of a task still to run, `memory forget` with no terminal to ask at, the bench's data file
checked before its database, and two examples copied from the docs that klaw then warned about."""

from __future__ import annotations

import re
from pathlib import Path

from klaw.home import KlawHome
from klaw.home_init import initialise_home
from tests.cli.klaw_here import klaw_here

REPO = Path(__file__).resolve().parents[2]


def _home(tmp_path: Path, text: str = "") -> Path:
    home = KlawHome(tmp_path / "home")
    initialise_home(home)
    if text:
        home.config_file.write_text(text, encoding="utf-8")
    return home.root


def test_a_mistyped_command_line_says_error_like_every_refusal(tmp_path: Path) -> None:
    home = _home(tmp_path, "embedder:\n  backend: fake\n")
    for args, words in (
        (("db", "migrate"), "Missing option '--to'."),
        (("bench", "locomo", "--backend", "sqlte", "--data", str(home / "engine.yaml")), "'sqlte' is not a backend"),
        (("memory", "list", "--limit", "x"), "No such option: --limit"),
        (("schedule", "runs"), "Missing argument 'name'."),
        (("nosuch",), "No such command 'nosuch'."),
    ):
        said = klaw_here(home, *args)
        assert said.returncode == 2 and said.stdout == "", said
        lines = said.stderr.splitlines()
        assert lines[0].startswith("error: ") and words in lines[0], said.stderr  # was "╭─ Error ─…"
        assert "Error" not in said.stderr and "╭" not in said.stderr, said.stderr
        assert lines[-1].startswith("Try '") and lines[-1].endswith(" --help' for help."), said.stderr
    assert klaw_here(home, "bench", "locomo", "--data", "/nonexist.json").stderr.startswith("error: cannot read")
    alone = klaw_here(home)
    assert alone.returncode == 2 and "Usage: " in alone.stdout and alone.stderr == ""  # `klaw` alone: its help


def test_schedule_runs_of_a_task_that_has_not_run_says_when_it_will(tmp_path: Path) -> None:
    home = _home(tmp_path, "scheduler:\n  timezone: UTC\n")
    added = klaw_here(home, "schedule", "add", "ping", "--every", "1h", "--message", "hi")
    assert added.returncode == 0, added.stderr
    when = re.search(r"next run (\S+ \S+)\.", added.stdout)
    assert when is not None, added.stdout
    shown = klaw_here(home, "schedule", "runs", "ping")
    assert shown.returncode == 0, shown.stderr  # was exit 1, "no run of a task named 'ping' is logged"
    assert shown.stdout == f"Task ping has not run yet; its next run is {when[1]} (UTC).\n", shown.stdout
    missing = klaw_here(home, "schedule", "runs", "pong")
    assert missing.returncode == 1 and "no run of a task named 'pong' is logged; the tasks are: ping" in missing.stderr


def test_memory_forget_without_a_terminal_to_ask_says_to_add_yes(tmp_path: Path) -> None:
    home = _home(tmp_path, "embedder:\n  backend: fake\n")
    from tests.cli.test_memory_forget_cmd import fill

    ids = fill(KlawHome(home))
    args = ("memory", "forget", "exchange", str(ids["exchange"]))
    said = klaw_here(home, *args)  # stdin: nothing, not a terminal (a script's `< /dev/null`)
    assert said.returncode == 2, said  # was exit 1, "Forget it? [y/N]: Aborted."
    assert said.stderr.startswith("error: stdin is not a terminal and gave no answer: add --yes"), said.stderr
    assert "Aborted" not in said.stderr + said.stdout
    assert klaw_here(home, *args, stdin="n\n").returncode == 1  # an answer piped in is still read
    assert klaw_here(home, *args, "--yes").returncode == 0


def test_bench_locomo_says_a_missing_data_file_before_the_database_it_cannot_reach(tmp_path: Path) -> None:
    home = _home(tmp_path, "embedder:\n  backend: fake\ndatabase:\n  backend: postgres\n  urlEnv: KLAW_N21_URL\n")
    said = klaw_here(home, "bench", "locomo", "--data", str(tmp_path / "nonexist.json"))
    assert said.returncode == 2, said
    assert said.stderr.startswith(f"error: cannot read {tmp_path / 'nonexist.json'}"), said.stderr  # was the URL
    assert "KLAW_N21_URL" not in said.stderr


def _blocks(page: str, language: str) -> list[str]:
    return re.findall(rf"```{language}\n(.*?)```", (REPO / "docs" / page).read_text(encoding="utf-8"), flags=re.S)


def test_the_skills_page_example_is_a_skill_klaw_does_not_warn_about(tmp_path: Path) -> None:
    home = _home(tmp_path, "embedder:\n  backend: fake\n")
    skill, template = _blocks("skills.md", "markdown")[:2]
    folder = home / "workspace" / "skills" / "weather-report"
    (folder / "templates").mkdir(parents=True)
    (folder / "SKILL.md").write_text(skill, encoding="utf-8")
    (folder / "templates" / "report.md").write_text(template, encoding="utf-8")
    for args in (("skills", "list"), ("config", "check")):
        said = klaw_here(home, *args)
        assert said.returncode == 0 and "does not exist in the skill" not in said.stdout + said.stderr, said
    assert "weather-report" in klaw_here(home, "skills", "list").stdout


def test_getting_starteds_fewer_tools_example_is_a_choice_not_an_old_file(tmp_path: Path) -> None:
    [fewer] = [block for block in _blocks("getting-started.md", "yaml") if "enabled: [clock, files, memory]" in block]
    home = _home(tmp_path, "embedder:\n  backend: fake\n" + fewer)
    said = klaw_here(home, "config", "check")
    assert said.returncode == 0 and "newer tool groups" not in said.stderr, said  # was the older-init note
    old = "embedder:\n  backend: fake\ntools:\n  enabled: [clock, files, memory, scheduler, subagents]\n"
    (home / "engine.yaml").write_text(old, encoding="utf-8")  # what the init of 2026-11-22 wrote: still noted
    noted = " ".join(klaw_here(home, "config", "check").stderr.split())
    assert "names none of klaw's newer tool groups messaging" in noted, noted
