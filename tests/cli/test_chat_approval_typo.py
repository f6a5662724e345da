"""A misspelt `tools.approval` name (`[host_exec, file_writ]`): `/status` listed it among the held tools
("Held for approval: file_writ, host_exec") and `/tools` said "(each call waits for your /approve)" of it,
while `klaw chat` started without the warning `klaw config check` gives. Now /status and /tools mark it as
not a tool, and the chat's start shows config check's warning (on stderr: a piped reply stays alone)."""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path
from typing import cast

from klaw.llm.fake_server import FakeOpenAiServer
from tests.cli.chat_terminal import chat_env, init_home
from tests.cli.piped_chat import piped
from tests.tools.conftest import install

Plugin = tuple[str, str, str, str]


async def held_chat(
    tmp_path: Path, settings: dict[str, str], *plugins: Plugin, typed: tuple[str, ...] = ("/status",)
) -> list[tuple[str, str]]:
    """A new home with these `KLAW__TOOLS__…` settings and `plugins` installed (name, module, source, entry
    point); `echo X | klaw chat` for each X `typed`, one after the other (a home has one engine): each one's
    stdout and stderr."""
    home = tmp_path / "home"
    init_home(home)
    site = tmp_path / "site"
    site.mkdir()
    for plugin in plugins:
        install(site, *plugin)
    async with FakeOpenAiServer() as model:
        env = chat_env(home, model.base_url)
        path = os.pathsep.join(filter(None, [str(site), env.get("PYTHONPATH")]))
        env = {**env, "PYTHONPATH": path, **{f"KLAW__TOOLS__{k.upper()}": v for k, v in settings.items()}}
        said = [await piped(env, text) for text in typed]
    return [(out, err) for _, out, err in said]


async def test_a_misspelt_approval_name_is_marked_in_status_and_tools_and_warned_of_at_start(tmp_path: Path) -> None:
    settings = {"approval": "[host_exec, file_writ]"}
    [(status, status_err), (tools, _)] = await held_chat(tmp_path, settings, typed=("/status", "/tools"))
    held = next(line for line in status.splitlines() if line.startswith("Held for approval:"))
    assert held.startswith("Held for approval: file_writ (not a tool: misspelt? it holds nothing), host_exec;"), held
    typo = next(line for line in tools.splitlines() if line.startswith("- file_writ "))
    assert "waits for your /approve" not in typo and "not a tool" in typo, typo
    warned = " ".join(status_err.split())
    assert "warning: tools.approval names file_writ, but no tool has this name" in warned
    assert "host_exec, but" not in warned


SHOUT = '''
async def shout(text: str) -> str:
    """Say something loudly."""
    return text.upper()


TOOLS = [shout]
'''


async def test_a_held_tool_of_a_plugin_not_enabled_is_not_called_misspelt_and_the_plugin_is_not_imported(
    tmp_path: Path,
) -> None:
    """`shout` exists (the installed plugin group `shouting` offers it) but tools.enabled leaves the group
    out: before, the warning called the name misspelt ("no tool has this name"). klaw does not import a
    plugin the person did not enable to word this (adversary27 M3: one whose import hangs froze /status and
    the chat's start 60 s; decision 478): the plugin here exits its process if it is imported."""
    settings = {"enabled": "[clock]", "approval": "[shout]"}
    plugin = ("shouting", "klaw_firsthour_shout", "import os\nos._exit(7)\n" + SHOUT, "TOOLS")
    [(status, err)] = await held_chat(tmp_path, settings, plugin)
    warned = " ".join(err.split())
    assert "warning: tools.approval names shout, no tool offered has this name: it may be a tool of the group" in warned
    assert "add shouting to tools.enabled if shout is its tool" in warned and "no tool has this name" not in warned
    held = " ".join(next(line for line in status.splitlines() if line.startswith("Held for approval:")).split())
    assert "shout (no tool offered has this name: it may be a tool of the group shouting" in held, held


NOTES = '''
async def note_write(text: str) -> str:
    """Write a note."""
    return "noted"


def provide(setup):
    return [note_write]
'''


async def test_a_held_tool_of_a_function_plugin_group_not_enabled_is_not_called_misspelt(tmp_path: Path) -> None:
    """`notes`' entry point is a function (it may need the engine's services), so klaw does not run it to
    learn its tools while the group is not enabled: before, a held `note_write` was called misspelt ("no tool
    has this name"); now the group is named with how to enable it (decision 343)."""
    settings = {"enabled": "[clock]", "approval": "[note_write]"}
    [(status, err)] = await held_chat(tmp_path, settings, ("notes", "klaw_edges2_notes", NOTES, "provide"))
    warned = " ".join(err.split())
    assert (
        "warning: tools.approval names note_write, no tool offered has this name: it may be a tool of the group"
        " notes, which tools.enabled does not name (klaw learns that group's tools only once it is enabled)"
    ) in warned, warned
    assert "add notes to tools.enabled if note_write is its tool" in warned, warned
    assert "no tool has this name" not in warned, warned
    held = " ".join(next(line for line in status.splitlines() if line.startswith("Held for approval:")).split())
    assert "note_write (no tool offered has this name: it may be a tool of the group notes" in held, held
    assert "misspelt?" not in held, held


async def test_a_held_tool_of_a_builtin_group_not_enabled_names_the_group(tmp_path: Path) -> None:
    """`file_write` and `memory_save` are klaw's own (`files`, `memory`), whose providers need the engine to
    run: before, with those groups left out of tools.enabled, both were called misspelt (decision 330)."""
    settings = {"enabled": "[clock]", "approval": "[file_write, memory_save]"}
    [(status, err)] = await held_chat(tmp_path, settings)
    warned = " ".join(err.split())
    assert "warning: tools.approval names file_write, a tool of the group files" in warned, warned
    assert "add files to tools.enabled" in warned and "add memory to tools.enabled" in warned, warned
    assert "no tool has this name" not in warned, warned
    held = next(line for line in status.splitlines() if line.startswith("Held for approval:"))
    assert "file_write (a tool of the group files" in held and "memory_save (a tool of the group memory" in held
    assert "misspelt" not in held, held


async def test_each_builtin_group_names_the_tools_it_registers(tmp_path: Path) -> None:
    """What a built-in group says it offers (for the wording above) is what it registers, or notes
    unavailable, with every group enabled: a tool added to a group and not to its names would be called
    misspelt again while the group is left out."""
    from klaw import Klaw
    from klaw.tools.builtin.groups import BUILTIN_GROUPS
    from klaw.tools.groups import GroupProvider
    from tests.test_library import CONFIG

    async with Klaw(tmp_path / "home", config=CONFIG) as agent:
        rows = await agent.tools("alice")
    found: dict[str, set[str]] = {}
    for row in rows:
        if row.source.startswith("built-in "):
            found.setdefault(row.source.removeprefix("built-in "), set()).add(row.name)
    declared = {
        group: set(provider.tools)
        if isinstance(provider, GroupProvider)
        else {getattr(fn, "__name__", "") for fn in cast("Sequence[object]", provider)}
        for group, provider in BUILTIN_GROUPS.items()
    }
    assert found == declared
