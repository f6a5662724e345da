"""The built-in tools, run through the registry as the engine runs them: clock and workspace files."""

from __future__ import annotations

import json
import os
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from klaw.llm.messages import ToolCall
from klaw.tools.builtin.clock_tools import current_time
from klaw.tools.builtin.groups import register_file_tools
from klaw.tools.builtin.workspace_files import MAX_WRITE_BYTES
from klaw.tools.calls import ToolResult
from klaw.tools.registry import ToolRegistry
from klaw.tools.schema import ToolContext


class FixedClock:
    def __init__(self, now: datetime) -> None:
        self._now = now

    def now(self) -> datetime:
        return self._now


@pytest.fixture
def registry() -> ToolRegistry:
    tools = ToolRegistry()
    tools.register(current_time)
    register_file_tools(tools)
    return tools


@pytest.fixture
def outside(tmp_path: Path) -> Path:
    path = tmp_path / "outside"
    path.mkdir()
    (path / "secret.txt").write_text("top secret", encoding="utf-8")
    return path


async def run(registry: ToolRegistry, context: ToolContext, name: str, **arguments: Any) -> ToolResult:
    return await registry.execute(ToolCall(id="c", name=name, arguments=json.dumps(arguments)), context)


async def test_the_builtin_tools_are_registered(registry: ToolRegistry) -> None:
    assert registry.names == ("current_time", "file_read", "file_write", "file_list")
    for spec in registry.specs():
        assert "context" not in spec.parameters["properties"]
        assert spec.description


# --- current_time --------------------------------------------------------------------------------


async def test_current_time_reads_the_injected_clock_in_the_given_zone(
    registry: ToolRegistry, context: ToolContext
) -> None:
    context.extras["clock"] = FixedClock(datetime(2026, 1, 1, 9, 0, tzinfo=UTC))
    result = await run(registry, context, "current_time", timezone="Europe/Berlin")
    assert not result.is_error
    assert json.loads(result.content) == {
        "time": "2026-01-01T10:00:00+01:00",
        "weekday": "Thursday",
        "timezone": "Europe/Berlin",
    }
    context.extras["clock"] = FixedClock(datetime(2026, 7, 1, 23, 30, tzinfo=UTC))
    summer = json.loads((await run(registry, context, "current_time", timezone="Europe/Berlin")).content)
    assert (summer["time"], summer["weekday"]) == ("2026-07-02T01:30:00+02:00", "Thursday")


async def test_current_time_defaults_to_utc(registry: ToolRegistry, context: ToolContext) -> None:
    context.extras["clock"] = FixedClock(datetime(2026, 3, 2, 12, 0, 5, 123456, tzinfo=UTC))
    result = json.loads((await run(registry, context, "current_time")).content)
    assert result == {"time": "2026-03-02T12:00:05+00:00", "weekday": "Monday", "timezone": "UTC"}


async def test_current_time_without_a_clock_uses_the_system_time(registry: ToolRegistry, context: ToolContext) -> None:
    result = json.loads((await run(registry, context, "current_time", timezone="Asia/Tokyo")).content)
    assert datetime.fromisoformat(result["time"]).utcoffset() is not None
    assert result["time"].endswith("+09:00")


@pytest.mark.parametrize("zone", ["Mars/Olympus_Mons", "../etc/passwd", ""])
async def test_an_unknown_zone_is_a_tool_error_with_a_hint(
    registry: ToolRegistry, context: ToolContext, zone: str
) -> None:
    result = await run(registry, context, "current_time", timezone=zone)
    assert result.is_error
    assert result.content.startswith("unknown time zone")
    assert "Europe/Berlin" in result.content


# --- workspace files: round trips ----------------------------------------------------------------


async def test_a_path_needing_more_than_forty_new_folders_is_written(
    registry: ToolRegistry, context: ToolContext, workspace: Path
) -> None:
    """adversary13: each folder made counted as a symlink followed, so the 41st made was refused, with 40
    folders left behind and words that did not fit ("a file is where a folder should be")."""
    path = "/".join(f"d{n}" for n in range(45)) + "/deep.txt"
    written = await run(registry, context, "file_write", path=path, content="down here")
    assert written.content == f"wrote 9 bytes to {path}"
    assert (workspace / path).read_text(encoding="utf-8") == "down here"


async def test_write_read_list_round_trip(registry: ToolRegistry, context: ToolContext, workspace: Path) -> None:
    written = await run(registry, context, "file_write", path="notes/today/todo.md", content="- milk\n- Brötchen\n")
    assert written == ToolResult("c", "file_write", "wrote 19 bytes to notes/today/todo.md", is_error=False)
    assert (workspace / "notes" / "today" / "todo.md").read_text(encoding="utf-8") == "- milk\n- Brötchen\n"

    appended = await run(registry, context, "file_write", path="notes/today/todo.md", content="- eggs\n", append=True)
    assert appended.content == "appended 7 bytes to notes/today/todo.md"
    read = await run(registry, context, "file_read", path="notes/today/todo.md")
    assert read.content == "- milk\n- Brötchen\n- eggs\n"

    await run(registry, context, "file_write", path="notes/today/todo.md", content="replaced")
    assert (await run(registry, context, "file_read", path="./notes/today/todo.md")).content == "replaced"

    await run(registry, context, "file_write", path="a.txt", content="abc")
    listing = await run(registry, context, "file_list")
    assert listing.content == "a.txt (3 bytes)\nnotes/"
    nested = await run(registry, context, "file_list", path="notes/today")
    assert nested.content == "todo.md (8 bytes)"


async def test_read_in_pieces_with_offset_and_limit(registry: ToolRegistry, context: ToolContext) -> None:
    await run(registry, context, "file_write", path="abc.txt", content="abcdefghij")
    first = await run(registry, context, "file_read", path="abc.txt", limit=4)
    assert first.content == "abcd\n[… 'abc.txt' continues: call file_read with offset=4 for more]"
    last = await run(registry, context, "file_read", path="abc.txt", offset=8, limit=4)
    assert last.content == "ij"
    beyond = await run(registry, context, "file_read", path="abc.txt", offset=50)
    assert "past the end" in beyond.content
    assert "10 characters" in beyond.content
    negative = await run(registry, context, "file_read", path="abc.txt", offset=-1)
    assert negative.is_error
    assert "- offset: Input should be greater than or equal to 0" in negative.content


async def test_absolute_paths_inside_the_workspace_are_allowed(
    registry: ToolRegistry, context: ToolContext, workspace: Path
) -> None:
    (workspace / "inside.txt").write_text("ok", encoding="utf-8")
    result = await run(registry, context, "file_read", path=str(workspace / "inside.txt"))
    assert result.content == "ok"


async def test_empty_files_and_folders_say_so(registry: ToolRegistry, context: ToolContext, workspace: Path) -> None:
    (workspace / "empty.txt").touch()
    (workspace / "void").mkdir()
    assert "is empty" in (await run(registry, context, "file_read", path="empty.txt")).content
    assert "is empty" in (await run(registry, context, "file_list", path="void")).content


# --- workspace files: refusals -------------------------------------------------------------------


@pytest.mark.parametrize("tool", ["file_read", "file_write", "file_list"])
@pytest.mark.parametrize("path", ["../outside/secret.txt", "notes/../../outside/secret.txt", "/etc/passwd"])
async def test_paths_outside_the_workspace_are_refused(
    registry: ToolRegistry, context: ToolContext, outside: Path, tool: str, path: str
) -> None:
    arguments: dict[str, Any] = {"path": path}
    if tool == "file_write":
        arguments["content"] = "pwned"
    result = await run(registry, context, tool, **arguments)
    assert result.is_error
    # a `..` out is refused with the arguments (before any approval); an absolute path when the tool runs
    # (not "PermissionError: …": a refusal by design is worded alone, as klaw's other refusals are)
    assert result.content.startswith(repr(path) if path.startswith("/") else "invalid arguments:")
    assert "outside the workspace" in result.content
    assert (outside / "secret.txt").read_text(encoding="utf-8") == "top secret"


async def test_symlinks_pointing_out_of_the_workspace_are_refused(
    registry: ToolRegistry, context: ToolContext, workspace: Path, outside: Path
) -> None:
    (workspace / "escape").symlink_to(outside, target_is_directory=True)
    (workspace / "secret-link.txt").symlink_to(outside / "secret.txt")
    (workspace / "dangling.txt").symlink_to(outside / "new.txt")
    attempts = [
        ("file_read", {"path": "secret-link.txt"}),
        ("file_read", {"path": "escape/secret.txt"}),
        ("file_list", {"path": "escape"}),
        ("file_write", {"path": "escape/new.txt", "content": "x"}),
        ("file_write", {"path": "secret-link.txt", "content": "x"}),
        ("file_write", {"path": "dangling.txt", "content": "x"}),
    ]
    for tool, arguments in attempts:
        result = await run(registry, context, tool, **arguments)
        assert result.is_error, (tool, arguments)
        assert "outside the workspace" in result.content
    assert sorted(os.listdir(outside)) == ["secret.txt"]
    assert (outside / "secret.txt").read_text(encoding="utf-8") == "top secret"
    listing = await run(registry, context, "file_list")
    assert listing.content == "dangling.txt@ (symlink)\nescape@ (symlink)\nsecret-link.txt@ (symlink)"


async def test_symlinks_within_the_workspace_are_followed(
    registry: ToolRegistry, context: ToolContext, workspace: Path
) -> None:
    (workspace / "real.txt").write_text("real", encoding="utf-8")
    (workspace / "alias.txt").symlink_to(workspace / "real.txt")
    assert (await run(registry, context, "file_read", path="alias.txt")).content == "real"


async def test_writes_over_one_mebibyte_are_refused(
    registry: ToolRegistry, context: ToolContext, workspace: Path
) -> None:
    result = await run(registry, context, "file_write", path="big.txt", content="é" * (MAX_WRITE_BYTES // 2 + 1))
    assert result.is_error
    assert "at most 1048576 bytes" in result.content
    assert not (workspace / "big.txt").exists()
    exact = await run(registry, context, "file_write", path="big.txt", content="x" * MAX_WRITE_BYTES)
    assert not exact.is_error


async def test_binary_and_non_utf8_files_are_reported(
    registry: ToolRegistry, context: ToolContext, workspace: Path
) -> None:
    (workspace / "image.png").write_bytes(b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR")
    (workspace / "latin1.txt").write_bytes("Grüße".encode("latin-1"))
    image = await run(registry, context, "file_read", path="image.png")
    assert image.is_error
    assert "binary file" in image.content
    latin = await run(registry, context, "file_read", path="latin1.txt")
    assert latin.is_error
    assert "not UTF-8 text" in latin.content


async def test_wrong_kinds_and_missing_paths_are_clear_errors(
    registry: ToolRegistry, context: ToolContext, workspace: Path
) -> None:
    (workspace / "folder").mkdir()
    (workspace / "file.txt").write_text("x", encoding="utf-8")
    cases = [
        ("file_read", {"path": "folder"}, "'folder' is a folder; use file_list"),
        ("file_read", {"path": "missing.txt"}, "there is no file 'missing.txt'"),
        ("file_write", {"path": "folder", "content": "x"}, "'folder' is a folder"),
        ("file_write", {"path": ".", "content": "x"}, "'.' is a folder"),
        ("file_list", {"path": "file.txt"}, "'file.txt' is a file"),
        ("file_list", {"path": "nowhere"}, "there is no folder 'nowhere'"),
    ]
    for tool, arguments, expected in cases:
        result = await run(registry, context, tool, **arguments)
        assert result.is_error, (tool, arguments)
        assert result.content.startswith(expected), result.content
