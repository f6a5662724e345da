"""The system prompt, core memory and the skills layer a turn starts from are kept between turns and read again
only when a file changed (decision 481): real engine turns against the fake OpenAI server, what the model
received checked on the wire. Each change a person or the agent makes is seen on the very next turn — a prompt
file edited in place to the same size with its modification time put back, a prompt file replaced, core memory
written by its tool, edited by hand, removed, a skill added — and a turn where nothing changed reads no file."""

from __future__ import annotations

import json
import logging
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest

from klaw.engine.system_prompt import SystemPrompt
from klaw.llm.fake_server import Reply, TextReply, ToolCallsReply, echo_last_user_message
from klaw.memory.core_memory import CoreMemory
from tests.engine.harness import Harness, running_engine


def system_text(h: Harness) -> str:
    return "\n".join(m["content"] for m in h.last_request_messages() if m["role"] == "system")


def model_that_keeps_a_city(body: Mapping[str, Any]) -> Reply:
    last = body["messages"][-1]
    if last.get("role") == "user" and last.get("content") == "I live in Lisbon":
        arguments = {"set": {"city": "Lisbon"}, "remove": []}
        return ToolCallsReply((("call_core", "memory_core_update", json.dumps(arguments)),))
    if last.get("role") == "tool":
        return TextReply("Noted.")
    return echo_last_user_message(body)


@pytest.fixture
def reads(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Which files' reads the turns made (the prompt files, core memory), in order."""
    made: list[str] = []
    prompt_read, memory_read = SystemPrompt.read, CoreMemory.read_now

    def read_prompt(self: SystemPrompt, *args: object, **kwargs: object) -> tuple[str, tuple[str, ...]]:
        made.append("prompt")
        return prompt_read(self, *args, **kwargs)  # type: ignore[arg-type]

    def read_memory(self: CoreMemory) -> dict[str, object]:
        made.append("memory")
        return memory_read(self)

    monkeypatch.setattr(SystemPrompt, "read", read_prompt)
    monkeypatch.setattr(CoreMemory, "read_now", read_memory)
    return made


async def test_unchanged_files_are_not_read_again_and_each_change_is_seen_next_turn(
    tmp_path: Path, reads: list[str]
) -> None:
    async with running_engine(tmp_path) as h:
        reads.clear()  # the start's budget check (decision 500) read the prompt once per chat model: not a turn's
        workspace = h.home.workspace
        agents = workspace / "AGENTS.md"
        agents.write_text("# Rules\nAnswer in haiku.\n", encoding="utf-8")
        await h.turn("hello")
        assert "Answer in haiku." in system_text(h) and "# Soul" in system_text(h)
        assert reads == ["prompt", "memory"]

        reads.clear()
        await h.turn("again")
        await h.turn("and again")
        assert reads == []  # nothing changed: what was read is given again
        assert "Answer in haiku." in system_text(h)

        # Edited in place to the same size, its modification time put back (an edit within one clock tick)
        before = os.stat(agents)
        agents.write_text("# Rules\nAnswer in prose.\n", encoding="utf-8")
        os.utime(agents, ns=(before.st_atime_ns, before.st_mtime_ns))
        assert os.stat(agents).st_size == before.st_size
        await h.turn("now?")
        assert "Answer in prose." in system_text(h) and "haiku" not in system_text(h)

        replacement = workspace / "AGENTS.new"  # an editor's way: a new file renamed over the old
        replacement.write_text("# Rules\nAnswer in French.\n", encoding="utf-8")
        replacement.replace(agents)
        (workspace / "SOUL.md").unlink()
        await h.turn("and now?")
        assert "Answer in French." in system_text(h) and "prose" not in system_text(h)
        assert "# Soul" not in system_text(h)  # a prompt file removed is left out at once

        h.server.default_reply = model_that_keeps_a_city
        await h.turn("I live in Lisbon")
        await h.wait_for_replies(len(h.delivered) + 1)  # the notice of the change, then the reply
        assert json.loads(h.home.core_memory_file.read_text(encoding="utf-8")) == {"city": "Lisbon"}
        await h.turn("where do I live?")
        assert '"city": "Lisbon"' in system_text(h)

        core = h.home.core_memory_file
        text = core.read_text(encoding="utf-8")
        core.write_text(text.replace("Lisbon", "Madrid"), encoding="utf-8")  # by hand, same size
        await h.turn("and now?")
        assert '"city": "Madrid"' in system_text(h) and "Lisbon" not in system_text(h)

        core.unlink()
        await h.turn("forgotten?")
        assert "Core memory" not in system_text(h)

        skill = h.home.skills_dir / "tea"
        skill.mkdir()
        (skill / "SKILL.md").write_text("---\nname: tea\ndescription: Brew green tea right.\n---\nBody.\n", "utf-8")
        await h.turn("any skills?")
        assert "- tea: Brew green tea right." in system_text(h)
        reads.clear()
        await h.turn("still there?")
        assert "- tea: Brew green tea right." in system_text(h) and reads == []


async def test_a_core_memory_file_it_refuses_is_read_and_warned_about_at_every_turn(
    tmp_path: Path, reads: list[str], caplog: pytest.LogCaptureFixture
) -> None:
    """A broken file is not kept: the warning that says so comes at every turn, as before, until it is mended."""
    async with running_engine(tmp_path) as h:
        core = h.home.core_memory_file
        core.write_text("{not json", encoding="utf-8")
        with caplog.at_level(logging.WARNING, logger="klaw.memory.core_memory"):
            await h.turn("hello")
            await h.turn("again")
        warned = [r for r in caplog.records if r.name == "klaw.memory.core_memory"]
        assert len(warned) == 2 and reads.count("memory") == 2
        core.write_text(json.dumps({"name": "Ada"}), encoding="utf-8")
        await h.turn("mended?")
        assert '"name": "Ada"' in system_text(h)
