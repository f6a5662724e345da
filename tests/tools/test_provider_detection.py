"""An entry point naming a provider is read the documented way, whatever its annotation (newcomer24 item 15,
decision 540): `def provide(setup: object)` was taken for a tool and told "write provide = [provide]", which would
have offered the provider to the model as a tool. Plugins are real dist-infos on the path."""

from __future__ import annotations

from pathlib import Path

from klaw import Klaw
from klaw.llm.fake_server import FakeOpenAiServer
from tests.serve_helpers import serve_config

SHAPES = '''
from typing import Any


async def shout(text: str) -> str:
    """Shout it.

    Args:
        text: what to shout
    """
    return text.upper()


def loose(setup: object) -> list[object]:
    return [shout]


def loose_any(anything: Any) -> list[object]:
    return [shout]


def misannotated(config: dict) -> list[object]:
    return [shout]


def whisper(text: str) -> str:
    """Whisper it.

    Args:
        text: what to whisper
    """
    return text.lower()
'''


async def test_a_provider_annotated_loosely_is_a_provider_and_a_misread_one_is_told_what_to_write(
    tmp_path: Path, site: Path
) -> None:
    (site / "klaw_shapes.py").write_text(SHAPES, encoding="utf-8")
    info = site / "klaw_shapes-0.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: klaw-shapes\nVersion: 0.1\n", encoding="utf-8")
    (info / "entry_points.txt").write_text(
        "[klaw.tools]\nloose = klaw_shapes:loose\nloose_any = klaw_shapes:loose_any\n"
        "misannotated = klaw_shapes:misannotated\nwhispering = klaw_shapes:whisper\n",
        encoding="utf-8",
    )
    async with FakeOpenAiServer() as model:
        for group in ("loose", "loose_any"):
            config = serve_config(model.base_url, channels=None, tools={"enabled": ["clock", group]})
            async with Klaw(tmp_path / group, config=config) as agent:
                rows = {row.name: row for row in await agent.tools("alice")}
            assert rows["shout"].state == "offered", rows.get(group)  # before: "the tool loose itself"
            assert rows["shout"].group == group
        config = serve_config(model.base_url, channels=None, tools={"enabled": ["clock", "misannotated", "whispering"]})
        async with Klaw(tmp_path / "home", config=config) as agent:
            rows = {row.name: row for row in await agent.tools("alice")}
    wrong = rows["misannotated"]
    assert wrong.state == "failed" and "shout" not in rows
    assert wrong.reason == (
        "klaw_shapes:misannotated is the function misannotated, which is neither a provider (one parameter, a"
        " klaw.ToolSetup) nor a tool (no docstring), where a list of tools (or a provider taking a ToolSetup) is"
        " expected"
    )
    assert wrong.fix.startswith(
        "if misannotated builds the group's tools, write its parameter as the docs do (def misannotated(setup:"
        " ToolSetup)); if it is a tool, give it a docstring and write misannotated = [misannotated] in klaw-shapes"
    )
    tool = rows["whispering"]  # a plain def reading as a tool: the advice to write a list stands
    assert tool.state == "failed" and tool.reason.startswith("klaw_shapes:whisper is the tool whisper itself")
    assert tool.fix == "write whisper = [whisper] in klaw-shapes, or remove whispering from tools.enabled"
