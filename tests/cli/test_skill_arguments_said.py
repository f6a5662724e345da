"""`klaw skills check` and a skill's `$ARGUMENTS`: decision 527 warned that klaw never fills it; decision 529 fills it
when a person calls the skill by name (`/weather-report Tbilisi`), so the check is silent about it now. It warns
instead about a skill named like one of klaw's commands, which `/name` can never call (the command wins)."""

from __future__ import annotations

from pathlib import Path

from tests.cli.klaw_here import klaw_here


def _skill(tmp_path: Path, name: str, body: str) -> None:
    folder = tmp_path / "workspace" / "skills" / name
    folder.mkdir(parents=True)
    (folder / "SKILL.md").write_text(f"---\nname: {name}\ndescription: Something to do\n---\n{body}\n", "utf-8")


def test_skills_check_is_fine_with_arguments_and_warns_of_a_skill_a_command_shadows(tmp_path: Path) -> None:
    _skill(tmp_path, "weather-report", "City: $ARGUMENTS")
    checked = klaw_here(tmp_path, "skills", "check")
    assert checked.returncode == 0, checked.stderr
    assert "ARGUMENTS" not in checked.stdout and "warning" not in checked.stdout, checked.stdout
    _skill(tmp_path, "status", "Shadowed.")
    checked = klaw_here(tmp_path, "skills", "check")
    said = " ".join(checked.stdout.split())
    assert checked.returncode == 0, checked.stderr  # a warning: the agent can still use it
    assert "warning: status/SKILL.md: /status is klaw's command, so typing /status runs the command" in said, said
    assert "2 skill(s) usable, 0 left out" in said
