"""Skills through real engine turns: a workspace with three skills (one broken), the FakeOpenAiServer over
HTTP as the model, and what the model received checked on the wire: the skills layer lists the good two,
skill_read returns a body and refuses a path leaving the skill's folder, and an edited SKILL.md is seen on
the next turn without a restart."""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest

from klaw.llm.fake_server import Reply, TextReply, ToolCallsReply, echo_last_user_message
from tests.engine.harness import CHAT, Harness, running_engine

WEATHER = """---
name: weather-report
description: Write a short weather report for a city, in the person's units.
---
# Weather report

Say the temperature first, then the wind. Use [the template](templates/report.md).
"""
GARDEN = """---
name: garden-plan
description: >
  Plan what to sow and when,
  month by month.
license: MIT
---
Ask for the climate zone before planning.
"""
BROKEN = """---
name: broken-skill
description: [this is not
---
Never listed.
"""


def write_skills(skills: Path) -> None:
    (skills / "weather-report" / "templates").mkdir(parents=True)
    (skills / "weather-report" / "SKILL.md").write_text(WEATHER, encoding="utf-8")
    (skills / "weather-report" / "templates" / "report.md").write_text("{city}: {temp}, wind {wind}", "utf-8")
    (skills / "garden-plan").mkdir()
    (skills / "garden-plan" / "SKILL.md").write_text(GARDEN, encoding="utf-8")
    (skills / "broken-skill").mkdir()
    (skills / "broken-skill" / "SKILL.md").write_text(BROKEN, encoding="utf-8")


def skills_layer(h: Harness) -> str | None:
    found = [m["content"] for m in h.last_request_messages() if m["role"] == "system" and "skill_read(" in m["content"]]
    assert len(found) <= 1
    return found[0] if found else None


def tool_results(body: Mapping[str, Any]) -> list[str]:
    return [m["content"] for m in body["messages"] if m.get("role") == "tool"]


def model_that_reads_skills(body: Mapping[str, Any]) -> Reply:
    """Reads the weather skill, then its template, then tries a path out of the skill's folder, then answers."""
    last = body["messages"][-1]
    steps = [
        {"name": "weather-report"},
        {"name": "weather-report", "path": "templates/report.md"},
        {"name": "weather-report", "path": "../garden-plan/SKILL.md"},
        {"name": "weather-report", "path": "../../../engine.yaml"},
    ]
    done = len(tool_results(body)) if last.get("role") == "tool" else 0
    if last.get("role") == "user" and last.get("content") != "weather in Oslo please":
        return echo_last_user_message(body)
    if done < len(steps):
        return ToolCallsReply(((f"call_{done}", "skill_read", json.dumps(steps[done])),))
    return TextReply("read them")


async def test_the_layer_lists_good_skills_and_skill_read_reads_within_the_folder(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, logger="klaw.tools.skills")
    async with running_engine(tmp_path) as h:
        write_skills(h.home.skills_dir)
        await h.turn("hello")
        layer = skills_layer(h)
        assert layer is not None
        assert "- garden-plan: Plan what to sow and when, month by month." in layer
        assert "- weather-report: Write a short weather report for a city, in the person's units." in layer
        assert "broken" not in layer
        offered = [tool["function"]["name"] for tool in h.server.chat_requests[-1].body["tools"]]
        assert {"skill_list", "skill_read"} <= set(offered)
        # the broken skill: one warning naming its file, and the turn went on
        warnings = [r.getMessage() for r in caplog.records if "broken-skill/SKILL.md" in r.getMessage()]
        assert len(warnings) == 1 and "not valid YAML" in warnings[0]
        context = await h.engine.commands.handle(CHAT, "context", "")
        assert "- skills: " in context

        h.server.default_reply = model_that_reads_skills
        reply = await h.turn("weather in Oslo please")
        assert reply.text == "read them"
        body_text, template, sibling, outside = tool_results(h.server.chat_requests[-1].body)
        assert "Say the temperature first, then the wind." in body_text
        assert "description:" not in body_text  # the front matter is the layer's, not repeated
        assert "templates/report.md" in body_text  # the files it may ask for
        assert template == "{city}: {temp}, wind {wind}"
        assert "leads outside the skill's folder" in sibling and "sow" not in sibling
        assert "leads outside the skill's folder" in outside and "models" not in outside


async def test_an_edited_skill_is_seen_on_the_next_turn(tmp_path: Path) -> None:
    async with running_engine(tmp_path) as h:
        skills = h.home.skills_dir
        write_skills(skills)
        await h.turn("hello")
        assert "broken-skill" not in (skills_layer(h) or "")

        (skills / "broken-skill" / "SKILL.md").write_text(
            "---\nname: broken-skill\ndescription: Mended at last, and listed.\n---\nNow it works.\n", "utf-8"
        )
        (skills / "garden-plan" / "SKILL.md").write_text(GARDEN.replace("month by month", "week by week"), "utf-8")
        await h.turn("again")
        layer = skills_layer(h) or ""
        assert "- broken-skill: Mended at last, and listed." in layer
        assert "week by week" in layer and "month by month" not in layer

        h.server.reply_tool_calls([("skill_read", {"name": "broken-skill"})])
        h.server.reply_text("ok")
        await h.turn("read the mended one")
        assert "Now it works." in tool_results(h.server.chat_requests[-1].body)[-1]

        for path in sorted(skills.rglob("*"), reverse=True):
            path.unlink() if path.is_file() else path.rmdir()
        await h.turn("and now?")
        assert skills_layer(h) is None  # no skills, no layer


async def test_the_skills_group_off_means_no_layer_and_no_tools(tmp_path: Path) -> None:
    async with running_engine(tmp_path, tools={"enabled": ["clock"]}) as h:
        write_skills(h.home.skills_dir)
        await h.turn("hello")
        assert skills_layer(h) is None
        assert [t["function"]["name"] for t in h.server.chat_requests[-1].body["tools"]] == ["current_time"]
