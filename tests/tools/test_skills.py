"""Skill folders checked on disk (no engine): front matter, names, sizes, paths and symlinks confined to
the skill's folder, the layer's token budget, re-scanning only on change, and `klaw skills list|check`."""

from __future__ import annotations

import json
import logging
import os
from pathlib import Path

import pytest
from typer.testing import CliRunner, Result

from klaw.cli.app import app
from klaw.llm.messages import ToolCall
from klaw.llm.tokens import approximate_token_count
from klaw.store.records import ChatRef
from klaw.tools.registry import ToolRegistry
from klaw.tools.schema import ToolContext
from klaw.tools.skills import catalogue as catalogue_module
from klaw.tools.skills.catalogue import SkillCatalogue, scan_skills
from klaw.tools.skills.tools import register_skill_tools

MAX = 4096


def skill(root: Path, folder: str, text: str | None = None, *, description: str = "Does a thing.") -> Path:
    path = root / folder
    path.mkdir(parents=True, exist_ok=True)
    body = text if text is not None else f"---\nname: {folder}\ndescription: {description}\n---\nBody of {folder}.\n"
    (path / "SKILL.md").write_text(body, encoding="utf-8")
    return path


def reasons(root: Path) -> dict[str, list[str]]:
    found: dict[str, list[str]] = {}
    for problem in scan_skills(root, max_bytes=MAX).problems:
        found.setdefault(problem.path, []).append(f"{problem.severity}: {problem.reason}")
    return found


def test_each_rule_leaves_the_skill_out_naming_its_file(tmp_path: Path) -> None:
    root = tmp_path / "skills"
    skill(root, "good")
    skill(root, "no-front", "# just a body\n")
    skill(root, "no-desc", "---\nname: no-desc\n---\nbody\n")
    skill(root, "Bad_Name", "---\nname: Bad_Name\ndescription: x\n---\n")
    skill(root, "mismatch", "---\nname: other-name\ndescription: x\n---\n")
    skill(root, "too-big", "---\nname: too-big\ndescription: x\n---\n" + "x" * MAX)
    skill(root, "not-a-map", "---\n- a list\n---\n")
    (root / "empty-folder").mkdir()
    (root / "notes.txt").write_text("a file beside the skills is ignored", encoding="utf-8")
    (root / ".hidden").mkdir()

    scan = scan_skills(root, max_bytes=MAX)
    assert list(scan.skills) == ["good"]
    found = reasons(root)
    assert "no description" in found["no-desc/SKILL.md"][0]
    assert "does not start with YAML front matter" in found["no-front/SKILL.md"][0]
    assert "lowercase letters, digits and single hyphens" in found["Bad_Name/SKILL.md"][0]
    assert "is not the folder's name" in found["mismatch/SKILL.md"][0]
    assert f"more than the {MAX} a skill file may hold" in found["too-big/SKILL.md"][0]
    assert "must be a mapping" in found["not-a-map/SKILL.md"][0]
    assert "'SKILL.md' does not exist" in found["empty-folder/SKILL.md"][0]
    assert all(line.startswith("error: ") for lines in found.values() for line in lines)


def test_symlinks_and_links_leading_outside_are_refused(tmp_path: Path) -> None:
    root = tmp_path / "skills"
    secret = tmp_path / "secret.txt"
    secret.write_text("the person's secret", encoding="utf-8")
    outside = skill(tmp_path / "elsewhere", "linked")
    root.mkdir()
    os.symlink(outside, root / "linked")
    leaky = skill(root, "leaky")
    os.symlink(secret, leaky / "notes.md")
    skill(root, "md-link", "---\nname: md-link\ndescription: x\n---\nSee [it](../leaky/SKILL.md).\n")
    skill(root, "abs-link", "---\nname: abs-link\ndescription: x\n---\nSee [it](/etc/passwd).\n")
    ok_links = skill(
        root,
        "ok-links",
        "---\nname: ok-links\ndescription: x\n---\n"
        "[a](ref/a.md) [web](https://example.org) [top](#top) [gone](gone.md)\n",
    )
    (ok_links / "ref").mkdir()
    (ok_links / "ref" / "a.md").write_text("inside", encoding="utf-8")
    inner = skill(root, "inner-link")
    os.symlink(inner / "SKILL.md", inner / "alias.md")  # a symlink that stays inside is fine

    scan = scan_skills(root, max_bytes=MAX)
    assert sorted(scan.skills) == ["inner-link", "ok-links"]
    assert scan.skills["ok-links"].files == ("ref/a.md",)
    assert scan.skills["inner-link"].files == ("alias.md",)
    found = reasons(root)
    assert found["linked"] == ["error: is a symlink leading outside the skills folder"]
    assert found["leaky/notes.md"] == ["error: is a symlink leading outside the skill's folder"]
    assert "leads outside the skill's folder" in found["md-link/SKILL.md"][0]
    assert "is not a path relative to the skill's folder" in found["abs-link/SKILL.md"][0]
    assert found["ok-links/SKILL.md"] == ["warning: a link: 'gone.md' does not exist in the skill"]


async def test_skill_read_refuses_a_symlink_made_after_the_check(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    root = tmp_path / "skills"
    folder = skill(root, "tricky")
    (folder / "ref").mkdir()
    (folder / "ref" / "a.md").write_text("fine", encoding="utf-8")
    secret = tmp_path / "secret.txt"
    secret.write_text("the person's secret", encoding="utf-8")
    catalogue = SkillCatalogue(root, max_bytes=MAX)
    registry = ToolRegistry()
    register_skill_tools(registry, catalogue, max_bytes=MAX)
    context = ToolContext(ChatRef("console", "me"), tmp_path)

    async def read(path: str) -> str:
        call = ToolCall(id="c1", name="skill_read", arguments=json.dumps({"name": "tricky", "path": path}))
        return (await registry.execute(call, context)).content

    assert await read("ref/a.md") == "fine"
    # A path leading out is the model's slip, not a bug: the reason alone, and no traceback in the log.
    with caplog.at_level(logging.DEBUG, logger="klaw.tools.calls"):
        assert await read("../../secret.txt") == "skill 'tricky': '../../secret.txt' leads outside the skill's folder"
    assert not caplog.records
    # Swapped for a symlink in a subfolder: neither the skill's folder nor its SKILL.md changed, so the
    # catalogue does not scan again; the read itself must refuse.
    (folder / "ref" / "a.md").unlink()
    os.symlink(secret, folder / "ref" / "a.md")
    assert "tricky" in catalogue.current().skills
    result = await read("ref/a.md")
    assert "'ref/a.md' leads outside the skill's folder" in result and "secret" not in result
    assert "is not a path relative" in await read("/etc/passwd")
    assert "does not exist" in await read("nothing.md")
    assert (
        "no usable skill named 'nope'"
        in (await registry.execute(ToolCall(id="c2", name="skill_read", arguments='{"name": "nope"}'), context)).content
    )


def test_the_layer_keeps_to_its_budget_and_says_how_many_more(tmp_path: Path) -> None:
    root = tmp_path / "skills"
    for index in range(30):
        skill(root, f"skill-{index:02d}", description=f"Skill number {index} " + "does useful things " * 5)
    layer = SkillCatalogue(root, max_bytes=MAX).layer(200)
    assert layer is not None
    assert approximate_token_count(layer) <= 200
    listed = [line for line in layer.splitlines() if line.startswith("- skill-")]
    assert 0 < len(listed) < 30
    assert layer.splitlines()[-1] == f"- … and {30 - len(listed)} more (skill_list lists them all)"
    assert SkillCatalogue(root, max_bytes=MAX).layer(5) is None  # not even one fits
    assert SkillCatalogue(tmp_path / "missing", max_bytes=MAX).layer(500) is None


def test_an_unchanged_folder_is_not_scanned_again(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    root = tmp_path / "skills"
    skill(root, "one")
    scans: list[Path] = []
    real = catalogue_module.scan_skills

    def counting(path: Path, *, max_bytes: int) -> catalogue_module.SkillScan:
        scans.append(path)
        return real(path, max_bytes=max_bytes)

    monkeypatch.setattr(catalogue_module, "scan_skills", counting)
    catalogue = SkillCatalogue(root, max_bytes=MAX)
    for _ in range(5):
        assert list(catalogue.current().skills) == ["one"]
    assert len(scans) == 1
    skill(root, "two")
    assert list(catalogue.current().skills) == ["one", "two"]
    (root / "one" / "SKILL.md").write_text("---\nname: one\ndescription: longer than before\n---\n", "utf-8")
    assert catalogue.current().skills["one"].description == "longer than before"
    assert len(scans) == 3


def klaw(home: Path, *args: str) -> Result:
    return CliRunner().invoke(app, ["skills", *args], env={"KLAW_HOME": str(home), "COLUMNS": "200"})


def test_the_cli_lists_and_checks(tmp_path: Path) -> None:
    skills = tmp_path / "workspace" / "skills"
    skill(skills, "weather-report", description="Write a weather report.")
    assert klaw(tmp_path, "check").exit_code == 0
    skill(skills, "broken", "---\nname: broken\n---\n")

    listed = klaw(tmp_path, "list")
    assert listed.exit_code == 0, listed.output
    assert "weather-report" in listed.output and "Write a weather report." in listed.output
    assert "skipped: broken/SKILL.md: front matter has no description" in listed.output

    checked = klaw(tmp_path, "check")
    assert checked.exit_code == 1
    assert "skipped: broken/SKILL.md: front matter has no description" in checked.output
    assert "1 skill(s) usable, 1 left out" in checked.output


def test_the_cli_on_a_home_that_does_not_exist_says_so(tmp_path: Path) -> None:
    result = klaw(tmp_path / "no-such-home", "check")
    assert result.exit_code == 2
    assert "no klaw home at" in result.output and "klaw init" in result.output


def test_a_symlink_loop_leaves_out_its_skill_alone(tmp_path: Path) -> None:
    """adversary12: `a -> b -> a` in one skill made Python 3.11's `resolve` raise RuntimeError, which took out
    every skill (the layer, skill_list, skill_read) and ended `klaw skills check` in a traceback."""
    skills = tmp_path / "workspace" / "skills"
    skill(skills, "weather-report", description="Write a weather report.")
    loopy = skill(skills, "loopy")
    os.symlink("b", loopy / "a")
    os.symlink("a", loopy / "b")

    scan = scan_skills(skills, max_bytes=MAX)
    assert list(scan.skills) == ["weather-report"]
    assert reasons(skills) == {
        "loopy/a": ["error: is a symlink in a loop (it leads back to itself)"],
        "loopy/b": ["error: is a symlink in a loop (it leads back to itself)"],
    }
    checked = klaw(tmp_path, "check")
    assert checked.exit_code == 1, checked.output
    assert checked.exception is None or isinstance(checked.exception, SystemExit)
    assert "skipped: loopy/a: is a symlink in a loop" in checked.output
    assert "1 skill(s) usable, 1 left out" in checked.output


def test_a_folder_named_like_an_emoji_code_is_named_as_it_is(tmp_path: Path) -> None:
    """rich reads `:fire:` as an emoji code even with markup off: `klaw config check` named a skill folder
    `:fire:` as "🔥/SKILL.md", a file nobody can find. klaw's consoles print text as it is (emoji off)."""
    from tests.cli.klaw_here import klaw_here

    assert klaw_here(tmp_path, "init", stdin="").returncode == 0
    skill(tmp_path / "workspace" / "skills", ":fire:", "no front matter\n")
    checked = klaw_here(tmp_path, "config", "check")
    assert checked.returncode == 0, checked.stderr
    assert "skipped: :fire:/SKILL.md: does not start with YAML front matter" in checked.stderr, checked.stderr
    assert "\N{FIRE}" not in checked.stderr
    for command in ("list", "check"):
        said = klaw(tmp_path, command).output
        assert ":fire:/SKILL.md" in said and "\N{FIRE}" not in said, said
