"""A skill written for another agent's `/skill args` (`City: $ARGUMENTS`) passed `klaw skills check` in
silence, though klaw fills no placeholder: skill_read gives the body as written and `/weather-report Tbilisi`
is refused (decision 514). newcomer23; decision 527 item 3 chose to say so, not to fill it: the check warns
(exit 0, the skill stays usable), naming the way a person asks for a skill with their own words."""

from __future__ import annotations

from pathlib import Path

from tests.cli.klaw_here import klaw_here


def test_skills_check_warns_about_arguments_klaw_never_fills(tmp_path: Path) -> None:
    folder = tmp_path / "workspace" / "skills" / "weather-report"
    folder.mkdir(parents=True)
    (folder / "SKILL.md").write_text(
        "---\nname: weather-report\ndescription: Report the weather for a city\n---\nCity: $ARGUMENTS\n",
        encoding="utf-8",
    )
    checked = klaw_here(tmp_path, "skills", "check")
    assert checked.returncode == 0, checked.stderr  # a warning: still usable
    said = " ".join(checked.stdout.split())
    assert "warning: weather-report/SKILL.md: holds $ARGUMENTS, which klaw never fills" in said, said
    assert "/weather-report takes no arguments" in said and '"use the weather-report skill for Tbilisi"' in said
    assert "1 skill(s) usable, 0 left out" in said
    (folder / "SKILL.md").write_text(
        "---\nname: weather-report\ndescription: Report the weather for a city\n---\nThe city the person names.\n",
        encoding="utf-8",
    )
    assert "ARGUMENTS" not in klaw_here(tmp_path, "skills", "check").stdout
