"""The workspace file tools and skill_read while other code swaps a folder for a symlink, as code run by
`code_execute` can: a flipper process exchanges a real folder with a symlink leading out (renameat2
RENAME_EXCHANGE, the attack of decision 243) while the tools are called through the registry many
times. Nothing outside the workspace may be read or written, whatever the interleaving; the old
check-then-open code leaked within a few dozen calls."""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from klaw.llm.messages import ToolCall
from klaw.store.records import ChatRef
from klaw.tools.builtin.groups import register_file_tools
from klaw.tools.registry import ToolRegistry
from klaw.tools.schema import ToolContext
from klaw.tools.skills.catalogue import SkillCatalogue
from klaw.tools.skills.tools import register_skill_tools
from tests.tools.flipper import FLIPPER, Flip, flippers

CALLS = int(os.environ.get("RACE_CALLS", "600"))
SECRET = "the web token of KLAW_HOME"
_FLIPPER = FLIPPER  # tests/tools/test_sandbox_prompt_file_race.py imports it from here (tests/tools/flipper.py)

pytestmark = pytest.mark.skipif(sys.platform != "linux", reason="renameat2 is Linux's")


@pytest.fixture
def outside(tmp_path: Path) -> Path:
    path = tmp_path / "home-outside"
    path.mkdir()
    (path / "web_token").write_text(SECRET, encoding="utf-8")
    (path / "only-outside.txt").write_text(SECRET, encoding="utf-8")
    return path


@pytest.fixture
def registry() -> ToolRegistry:
    tools = ToolRegistry()
    register_file_tools(tools)
    return tools


@pytest.fixture
def flip() -> Iterator[Flip]:
    """Start a flipper exchanging two paths as fast as it can; stopped at the end."""
    with flippers() as start:
        yield start


async def run(registry: ToolRegistry, context: ToolContext, tool: str, **arguments: Any) -> str:
    result = await registry.execute(ToolCall(id="c", name=tool, arguments=json.dumps(arguments)), context)
    return result.content


async def test_file_read_and_file_list_never_reach_outside_while_a_folder_is_swapped(
    registry: ToolRegistry, context: ToolContext, workspace: Path, outside: Path, flip: Flip
) -> None:
    (workspace / "real").mkdir()
    (workspace / "real" / "web_token").write_text("decoy", encoding="utf-8")
    (workspace / "evil").symlink_to(outside, target_is_directory=True)
    flip(workspace / "real", workspace / "evil")
    answers: set[str] = set()
    for _ in range(CALLS):
        answers.add(await run(registry, context, "file_read", path="real/web_token"))
        answers.add(await run(registry, context, "file_list", path="real"))
    assert not [answer for answer in answers if SECRET in answer or "only-outside" in answer]
    assert "decoy" in answers  # the flipper did not keep the tools from working


async def test_file_write_never_creates_a_file_outside_while_a_folder_is_swapped(
    registry: ToolRegistry, context: ToolContext, workspace: Path, outside: Path, flip: Flip
) -> None:
    (workspace / "r2").mkdir()
    (workspace / "e2").symlink_to(outside, target_is_directory=True)
    flip(workspace / "r2", workspace / "e2")
    answers = set()
    for number in range(CALLS):
        answers.add(await run(registry, context, "file_write", path=f"r2/sub/PWNED_{number}.txt", content="x"))
        answers.add(await run(registry, context, "file_write", path="r2/web_token", content="overwritten"))
    assert sorted(os.listdir(outside)) == ["only-outside.txt", "web_token"]
    assert (outside / "web_token").read_text(encoding="utf-8") == SECRET
    assert any(answer.startswith("wrote") for answer in answers)


async def test_a_prompt_file_cannot_be_reached_through_a_folder_swapped_for_the_workspace(
    registry: ToolRegistry, context: ToolContext, workspace: Path, flip: Flip
) -> None:
    (workspace / "SOUL.md").write_text("# Soul\nthe person's own words\n", encoding="utf-8")
    (workspace / "p3").mkdir()
    (workspace / "q3").symlink_to(workspace, target_is_directory=True)
    flip(workspace / "p3", workspace / "q3")
    answers = set()
    for _ in range(CALLS):
        answers.add(await run(registry, context, "file_write", path="p3/SOUL.md", content="INJECTED INSTRUCTION\n"))
    assert (workspace / "SOUL.md").read_text(encoding="utf-8") == "# Soul\nthe person's own words\n"
    assert any("is one of the prompt files" in answer for answer in answers)


async def test_skill_read_never_reaches_outside_while_a_folder_of_the_skill_is_swapped(
    workspace: Path, outside: Path, flip: Flip
) -> None:
    folder = workspace / "skills" / "tricky"
    (folder / "ref" / "deep").mkdir(parents=True)  # swapped one level down: the catalogue does not scan again
    (folder / "SKILL.md").write_text("---\nname: tricky\ndescription: races\n---\nSee ref/deep/web_token.\n", "utf-8")
    (folder / "ref" / "deep" / "web_token").write_text("decoy", encoding="utf-8")
    (workspace / "evil").symlink_to(outside, target_is_directory=True)  # not in the skill: it stays usable
    registry = ToolRegistry()
    register_skill_tools(registry, SkillCatalogue(workspace / "skills", max_bytes=65536), max_bytes=65536)
    context = ToolContext(chat=ChatRef("console", "alice"), workspace=workspace)
    assert await run(registry, context, "skill_read", name="tricky", path="ref/deep/web_token") == "decoy"
    flip(folder / "ref" / "deep", workspace / "evil")
    answers = {
        await run(registry, context, "skill_read", name="tricky", path="ref/deep/web_token") for _ in range(3 * CALLS)
    }
    assert not [answer for answer in answers if SECRET in answer]
    assert "decoy" in answers


async def test_a_hard_link_to_a_prompt_file_is_refused_and_symlink_loops_end(
    registry: ToolRegistry, context: ToolContext, workspace: Path
) -> None:
    (workspace / "SOUL.md").write_text("# Soul\n", encoding="utf-8")
    os.link(workspace / "SOUL.md", workspace / "notes.md")
    refused = await run(registry, context, "file_write", path="notes.md", content="INJECTED\n")
    assert "is one of the prompt files" in refused
    assert (workspace / "SOUL.md").read_text(encoding="utf-8") == "# Soul\n"
    (workspace / "a").symlink_to("b")
    (workspace / "b").symlink_to("a")
    assert "too many symlinks" in await run(registry, context, "file_read", path="a/x.txt")
    assert "too many symlinks" in await run(registry, context, "file_read", path="a")
    (workspace / "d").mkdir()
    (workspace / "d" / "up").symlink_to("../d")  # relative links inside the workspace are followed
    assert await run(registry, context, "file_write", path="d/up/up/new.txt", content="fine") == (
        "wrote 4 bytes to d/new.txt"
    )


async def test_a_write_makes_a_missing_workspace_and_reads_of_it_say_there_is_no_file(
    registry: ToolRegistry, tmp_path: Path
) -> None:
    context = ToolContext(chat=ChatRef("console", "alice"), workspace=tmp_path / "not-yet")
    assert "there is no file 'a.md'" in await run(registry, context, "file_read", path="a.md")
    assert await run(registry, context, "file_write", path="notes/a.md", content="hi") == "wrote 2 bytes to notes/a.md"
    assert (tmp_path / "not-yet" / "notes" / "a.md").stat().st_mode & 0o777 == 0o600
    assert (tmp_path / "not-yet" / "notes").stat().st_mode & 0o777 == 0o700


async def test_file_read_and_file_list_name_a_symlink_loop_in_words(
    registry: ToolRegistry, context: ToolContext, workspace: Path
) -> None:
    """Both open their target through one opener: a loop was "OSError: [Errno 40] 'a' goes through
    too many symlinks" from each, an errno no reader needs."""
    (workspace / "a").symlink_to("b")
    (workspace / "b").symlink_to("a")
    for tool, path in (("file_read", "a"), ("file_read", "a/x.txt"), ("file_list", "a")):
        answer = await run(registry, context, tool, path=path)
        assert f"{path!r} goes through too many symlinks: a symlink on the way leads back round (a loop)" in answer
        assert "Errno" not in answer and "OSError" not in answer, answer
    assert "there is no folder 'c'" in await run(registry, context, "file_list", path="c")


async def test_the_skills_folder_cannot_be_reached_through_a_folder_swapped_for_it(
    registry: ToolRegistry, context: ToolContext, workspace: Path, flip: Flip
) -> None:
    """Decision 279: the folders really held are judged, so a swap cannot lead a write into skills/."""
    skill = "---\nname: weather\ndescription: Report the weather.\n---\n"
    (workspace / "skills" / "weather").mkdir(parents=True)
    (workspace / "skills" / "weather" / "SKILL.md").write_text(skill, encoding="utf-8")
    (workspace / "p4").mkdir()
    (workspace / "q4").symlink_to(workspace / "skills", target_is_directory=True)
    flip(workspace / "p4", workspace / "q4")
    answers = set()
    for number in range(CALLS):
        answers.add(await run(registry, context, "file_write", path="p4/weather/SKILL.md", content="INJECTED\n"))
        answers.add(await run(registry, context, "file_write", path=f"p4/new{number}/SKILL.md", content="INJECTED\n"))
    assert os.listdir(workspace / "skills") == ["weather"]
    assert os.listdir(workspace / "skills" / "weather") == ["SKILL.md"]
    assert (workspace / "skills" / "weather" / "SKILL.md").read_text(encoding="utf-8") == skill
    assert any("would change the skills/ folder" in answer for answer in answers)
    assert any(answer.startswith("wrote") for answer in answers)
