"""A third-party tool arrives through the `klaw.tools` entry point group: a package installed on the
path (a real dist-info with entry_points.txt, as pip writes it), enabled by name in `tools.enabled`,
is offered to the model and called in a turn. A name no package offers, like a plugin that fails to load,
is logged naming it and the engine serves turns without it (decision 501)."""

from __future__ import annotations

import logging
import os
import re
import stat
import tomllib
from pathlib import Path

import pytest

from klaw.config_loader import load_config
from tests.engine.harness import CHAT, running_engine
from tests.tools.conftest import install

PLUGIN = '''
async def shout(text: str) -> str:
    """Say something loudly.

    Args:
        text: what to say
    """
    return text.upper() + "!"


TOOLS = [shout]
'''


async def test_an_installed_plugin_is_offered_and_called(tmp_path: Path, site: Path) -> None:
    install(site, "shouting", "klaw_shout_plugin", PLUGIN, "TOOLS")
    async with running_engine(tmp_path, tools={"enabled": ["clock", "shouting"]}) as h:
        h.server.reply_tool_calls([("shout", {"text": "hello"})])
        h.server.reply_text("done")
        assert (await h.turn("shout hello")).text == "done"
        offered = [tool["function"]["name"] for tool in h.server.chat_requests[0].body["tools"]]
        assert offered == ["current_time", "shout"]
        assert h.last_request_messages()[-1] == {
            "role": "tool",
            "tool_call_id": h.last_request_messages()[-1]["tool_call_id"],
            "name": "shout",
            "content": "HELLO!",
        }


async def test_a_name_neither_built_in_nor_installed_is_a_failed_group_and_turns_go_on(
    tmp_path: Path, site: Path
) -> None:
    """Not refused when the file is read (decision 501: an uninstalled plugin's name stopped every command):
    left out, named failed, the closest name there is suggested."""
    install(site, "shouting", "klaw_shout_plugin2", PLUGIN, "TOOLS")
    path = tmp_path / "engine.yaml"
    path.write_text("tools:\n  enabled: [clock, shoutin]\n", encoding="utf-8")
    assert load_config(path, env={}).config.tools.enabled == ("clock", "shoutin")
    async with running_engine(tmp_path, tools={"enabled": ["clock", "shoutin"]}) as h:
        assert (await h.turn("hi")).text == "echo: hi"
        offered = [tool["function"]["name"] for tool in h.server.chat_requests[0].body["tools"]]
        assert offered == ["current_time"]
        rows = {row.name: row for row in (await h.engine.tool_listing.inventory(CHAT)).rows}
    assert rows["shoutin"].state == "failed" and "no installed package offers it" in rows["shoutin"].reason
    assert rows["shoutin"].fix.startswith("if you meant shouting, write that;"), rows["shoutin"].fix


async def test_a_plugin_that_fails_to_load_is_left_out_and_turns_go_on(
    tmp_path: Path, site: Path, caplog: pytest.LogCaptureFixture
) -> None:
    install(site, "broken", "klaw_broken_plugin", "raise ImportError('missing dependency')\n", "TOOLS")
    with caplog.at_level(logging.ERROR, logger="klaw.tools.groups"):
        async with running_engine(tmp_path, tools={"enabled": ["clock", "broken"]}) as h:
            assert (await h.turn("hi")).text == "echo: hi"
            offered = [tool["function"]["name"] for tool in h.server.chat_requests[0].body["tools"]]
            assert offered == ["current_time"]
    assert any("'broken'" in r.getMessage() and "ImportError" in r.getMessage() for r in caplog.records)


REPO = Path(__file__).resolve().parents[2]
# docs/library.md's example of a group built from the engine it joins, as klaw's own groups are
DOC_BLOCKS = re.findall(r"```py\n(.*?)```", (REPO / "docs" / "library.md").read_text(encoding="utf-8"), flags=re.S)
NOTES = next(block for block in DOC_BLOCKS if "ToolSetup" in block)


async def test_a_package_group_gets_the_engine_setup_and_is_chosen_per_model_like_klaws_own(
    tmp_path: Path, site: Path, request: pytest.FixtureRequest
) -> None:
    install(site, "notes", "klaw_notes_plugin", NOTES, "provide")
    models = {"fake/small": {"tools": ["clock"]}}  # the default model; fake/large has tools.enabled
    umask = os.umask(0o022)  # a person's usual one: `open` would make the notes 0644
    request.addfinalizer(lambda: os.umask(umask))
    async with running_engine(tmp_path, tools={"enabled": ["clock", "notes"]}, models=models) as h:
        h.server.reply_tool_calls([("note_write", {"text": "buy milk"})])
        h.server.reply_text("cannot")
        await h.turn("note: buy milk")
        assert [t["function"]["name"] for t in h.server.chat_requests[0].body["tools"]] == ["current_time"]
        assert h.last_request_messages()[-1]["content"].startswith("unknown tool 'note_write'")
        assert not (h.home.workspace / "notes.txt").exists()

        await h.engine.commands.handle(CHAT, "model", "fake/large")
        h.server.reply_tool_calls([("note_write", {"text": "buy milk"})])
        h.server.reply_text("noted")
        assert (await h.turn("note: buy milk")).text == "noted"
        assert [t["function"]["name"] for t in h.server.chat_requests[-1].body["tools"]] == [
            "current_time",
            "note_write",
        ]
        assert h.last_request_messages()[-1]["content"] == "noted"
        assert (h.home.workspace / "notes.txt").read_text(encoding="utf-8") == "buy milk\n"
        # the page's private_open: 0600 under the umask the test set (`open` made it 0644: newcomer21, 502)
        assert stat.S_IMODE((h.home.workspace / "notes.txt").stat().st_mode) == 0o600
        status = await h.engine.commands.handle(CHAT, "status", "")
        assert "Not offered: note_sync: no sync server set; fix: set NOTES_SYNC_URL, then restart klaw" in status
        [row] = [row for row in (await h.engine.tool_listing.inventory(CHAT)).rows if row.name == "note_sync"]
        assert (row.state, row.fix) == ("unavailable", "set NOTES_SYNC_URL, then restart klaw")


async def test_the_docs_whole_plugin_package_works_as_written(tmp_path: Path, site: Path) -> None:
    """newcomer10: docs/library.md showed only the entry-point lines; its whole package (pyproject with
    [project] and the entry point, and the module) is installed here as written and both tools are called."""
    page = (REPO / "docs" / "library.md").read_text(encoding="utf-8")
    pyproject = tomllib.loads(next(b for b in re.findall(r"```toml\n(.*?)```", page, flags=re.S) if "klaw.tools" in b))
    assert {"name", "version"} <= pyproject["project"].keys()
    [(group, target)] = pyproject["project"]["entry-points"]["klaw.tools"].items()
    module, attribute = target.split(":")
    install(site, group, module, next(block for block in DOC_BLOCKS if "TOOLS = [" in block), attribute)
    async with running_engine(tmp_path, tools={"enabled": ["clock", group]}) as h:
        h.server.reply_tool_calls([("weather", {"city": "Oslo"}), ("forecast", {"city": "Oslo", "days": 2})])
        h.server.reply_text("done")
        assert (await h.turn("weather in Oslo?")).text == "done"
        results = [m["content"] for m in h.last_request_messages() if m["role"] == "tool"]
        assert results == ["sunny in Oslo", "2 days of rain in Oslo"]


async def test_a_plugin_that_calls_sys_exit_as_it_loads_is_left_out_and_turns_go_on(tmp_path: Path, site: Path) -> None:
    """adversary21: `sys.exit()` in a plugin's import is SystemExit, not an Exception: it ended the engine's
    start (and `klaw tools`, and a `Klaw(...)` program) instead of leaving the group out."""
    install(site, "quitter", "klaw_quitter_plugin", "import sys\nsys.exit('cannot find its config')\n", "TOOLS")
    async with running_engine(tmp_path, tools={"enabled": ["clock", "quitter"]}) as h:
        assert (await h.turn("hi")).text == "echo: hi"
        offered = [tool["function"]["name"] for tool in h.server.chat_requests[0].body["tools"]]
        assert offered == ["current_time"]
        listing = (await h.engine.submit(CHAT, "/tools")).command_reply
        assert listing is not None and "quitter" in listing, listing
        assert "SystemExit: cannot find its config" in listing, listing
