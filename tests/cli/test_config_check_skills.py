"""`klaw config check` names a broken skill as `klaw skills check` does: the file is still valid (a skill
left out stops nothing), but it printed the engine's log line `WARNING klaw.tools.skills.catalogue: …`."""

from __future__ import annotations

from pathlib import Path

from tests.cli.inited_home import init_home
from tests.cli.klaw_here import klaw_here


def test_a_broken_skill_is_said_as_skills_check_says_it(tmp_path: Path) -> None:
    home = tmp_path / "home"
    init_home(home)
    skill = home / "workspace" / "skills" / "bad"
    skill.mkdir()
    (skill / "SKILL.md").write_text("---\nname: Bad Name\n---\nbody\n", encoding="utf-8")
    checked = klaw_here(home, "config", "check")
    assert checked.returncode == 0, checked.stderr
    assert checked.stdout == f"{home / 'engine.yaml'}: valid\n"
    said = klaw_here(home, "skills", "check").stdout.splitlines()[:2]
    assert said[0].startswith("skipped: bad/SKILL.md: name must be")
    assert said[1].startswith("skipped: bad/SKILL.md: front matter has no description")
    assert checked.stderr.splitlines() == said, checked.stderr  # the same lines, and no log line


def test_skills_check_names_every_problem_of_a_skill_not_the_first_alone(tmp_path: Path) -> None:
    """Front matter without a description AND a name not its folder's: before, only the first was said,
    and fixing it revealed the next."""
    home = tmp_path / "home"
    init_home(home)
    skill = home / "workspace" / "skills" / "notes"
    skill.mkdir()
    (skill / "SKILL.md").write_text("---\nname: note-taking\n---\nSee [the guide](guide.md).\n", encoding="utf-8")
    checked = klaw_here(home, "skills", "check")
    lines = checked.stdout.splitlines()
    assert any("notes/SKILL.md: front matter has no description" in line for line in lines), checked.stdout
    assert any("name 'note-taking' is not the folder's name 'notes'" in line for line in lines), checked.stdout
    assert any("guide.md" in line for line in lines), checked.stdout  # the broken link too


def test_a_symlinked_skills_folder_is_named_as_what_stops_code_execute(tmp_path: Path) -> None:
    """code_execute refuses to run while skills/ is a symlink (decision 286): the person learns it here,
    not from the agent's failed run."""
    home = tmp_path / "home"
    init_home(home)
    mine = tmp_path / "my-skills"
    (home / "workspace" / "skills").rename(mine)
    (home / "workspace" / "skills").symlink_to(mine)
    checked = klaw_here(home, "config", "check")
    assert checked.returncode == 0, checked.stderr
    assert checked.stderr.startswith(f"warning: code_execute will not run while, in {home / 'workspace'}, skills is")
    assert "tools.allowPromptEdits: true" in checked.stderr
    allowed = klaw_here(home, "config", "check", env={"KLAW__TOOLS__ALLOWPROMPTEDITS": "true"})
    assert "code_execute" not in allowed.stderr, allowed.stderr
