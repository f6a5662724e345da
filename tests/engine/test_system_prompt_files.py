"""The system prompt's files read beneath the workspace: a prompt file that code run by `code_execute`
replaced with a symlink leading outside (the web token) is left out of every prompt, with a warning
naming the file, never its content (decision 243)."""

from __future__ import annotations

import os
import re
from collections.abc import Sequence
from pathlib import Path

import pytest

from klaw import AgentInfo, AgentMessage, ChatMessage, FunctionModel, Klaw
from klaw.engine.system_prompt import MAX_PROMPT_FILE_BYTES, SystemPrompt, cap_bytes
from tests.cli.klaw_here import klaw_here
from tests.test_library import CONFIG

SECRET = "the web token of KLAW_HOME"


def test_a_prompt_file_linked_outside_stays_out_of_the_system_prompt(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    workspace, outside = tmp_path / "workspace", tmp_path / "home-outside"
    workspace.mkdir()
    outside.mkdir()
    (outside / "web_token").write_text(SECRET, encoding="utf-8")
    (workspace / "SOUL.md").write_text("# Soul\nkind\n", encoding="utf-8")
    (workspace / "notes").mkdir()
    (workspace / "notes" / "me.md").write_text("# Identity\nNova\n", encoding="utf-8")
    (workspace / "IDENTITY.md").symlink_to("notes/me.md")  # a link inside is read as before
    (workspace / "AGENTS.md").symlink_to(outside / "web_token")  # as code_execute could leave it
    text = SystemPrompt(workspace).text_now()
    assert text == "# Soul\nkind\n\n# Identity\nNova"
    assert SECRET not in caplog.text and "AGENTS.md leads outside the workspace" in caplog.text


async def test_a_huge_prompt_file_is_cut_at_its_share_of_the_budget_and_a_fifo_left_out_all_said(
    tmp_path: Path,
) -> None:
    """A person's log pasted into AGENTS.md went whole into every prompt; a FIFO as SOUL.md was read, waiting
    for a writer (decision 460). Then AGENTS.md gave its first 64 KiB, ~16.6k tokens, twice the default 8,192-token
    budget: the conversation was crowded out and `klaw chat` said only "see chat.log". Now a file gives at most
    1/8 of the model's budget, the chat is told once, and `/status` names it (decision 473). Library API."""
    home = tmp_path / "home"
    seen: list[str] = []
    told: list[str] = []

    def model(messages: Sequence[ChatMessage], info: AgentInfo) -> str:
        seen.append(messages[0].content or "")
        return "ok"

    async def on_message(message: AgentMessage) -> None:
        told.append(message.text)

    async with Klaw(home, config=CONFIG, model=FunctionModel(model), on_message=on_message) as agent:
        workspace = home / "workspace"
        (workspace / "AGENTS.md").write_text(
            "# Rules\nBe brief and kind.\n" + "é log line\n" * 30_000, encoding="utf-8"
        )
        (workspace / "SOUL.md").unlink()
        os.mkfifo(workspace / "SOUL.md")
        assert await agent.ask("alice", "hello") == "ok"
        assert await agent.ask("alice", "again") == "ok"
        status = await agent.ask("alice", "/status")
        context = await agent.ask("alice", "/context")
    budget = int(8192 * 0.9)  # the default model's 8,192 tokens less the 10 % margin
    assert cap_bytes(budget) == 3686 * 4 and cap_bytes(budget, tools_tokens=4000) == 3684  # room, else the 1/8 floor
    prompt = seen[0]  # the cap falls inside an "é": the half of it is not decoded (nor a turn failed on it)
    assert prompt.startswith("# Identity") and "# Rules\nBe brief and kind." in prompt, prompt[:200]
    tokens = int(re.search(r"~([\d,]+) tokens here", prompt).group(1).replace(",", ""))  # type: ignore[union-attr]
    identity = len((home / "workspace" / "IDENTITY.md").read_text(encoding="utf-8").strip().encode())
    tools = int(re.search(r"- tools: (\d+) tokens", context).group(1))  # type: ignore[union-attr]
    cap = cap_bytes(budget, tools, identity)  # what the tools leave of half the budget, after IDENTITY.md
    assert cap == tokens * 4 and 3684 < cap < MAX_PROMPT_FILE_BYTES, (cap, tokens)
    assert len(prompt.encode()) < cap + identity + 2048
    share = (
        "the prompt files may use what the tools leave of half the model's context budget, at least 1/8 of it a file:"
        f" ~{tokens:,} tokens here"
    )
    marker = f"[klaw: the rest of AGENTS.md (360,027 bytes in all) is left out: {share}; file_read reads it: path"
    assert marker in prompt, prompt[-400:]
    cut = (
        f"Prompt file workspace/AGENTS.md is 360,027 bytes: only its first {cap:,} bytes go into each prompt ({share});"
        " shorten it (keep what the agent needs every turn there, the rest in a file of the workspace it can read when"
        " it needs it), or give the model a larger contextBudget in engine.yaml (none holds it whole: 64 KiB at most)"
    )
    fifo = (
        "Prompt file SOUL.md cannot be read (not a regular file but a FIFO (named pipe)); it is left out of the prompt:"
        " put a file there or remove it"
    )
    assert cut in status and fifo in status, status
    assert told == [f"{fifo}.\n\n{cut}."]  # once, not at the second turn
    assert "over" not in context and "Last turn's context:" in context


async def test_a_context_over_its_budget_is_told_to_the_chat_with_the_file_cut(tmp_path: Path) -> None:
    """The fixed layers over the budget (here the tools alone, on a 2,500-token model) were a log warning, "see
    chat.log" on the screen: the chat is told, with the prompt file cut and the ways out (decision 473)."""
    home = tmp_path / "home"
    told: list[str] = []
    small = {**CONFIG, "models": {"ollama/llama3.2": {"baseUrl": "http://127.0.0.1:9/v1", "contextBudget": 2500}}}

    async def on_message(message: AgentMessage) -> None:
        told.append(message.text)

    async with Klaw(home, config=small, model=FunctionModel(lambda m, i: "ok"), on_message=on_message) as agent:
        (home / "workspace" / "AGENTS.md").write_text("rule\n" * 1000, encoding="utf-8")
        assert await agent.ask("alice", "hello") == "ok"
        assert await agent.ask("alice", "a longer message, so the figures differ") == "ok"
    [said] = told  # once, though its figures changed
    assert said.startswith("This chat's context is over its budget on ollama/llama3.2: the fixed layers take "), said
    assert (
        "over the 2250-token budget (system_prompt " in said and "no room is left for the conversation window." in said
    )
    assert " Prompt file workspace/AGENTS.md is 5,000 bytes: only its first 1,124 bytes go into each prompt (" in said
    assert said.endswith(
        "Give the model a larger contextBudget in engine.yaml, or offer fewer tools (tools.enabled); `/context` shows"
        " each layer."
    )


def test_a_prompt_file_cut_names_its_folder_the_budget_that_holds_it_and_file_read(tmp_path: Path) -> None:
    """check51's trial: a normal 10 KB AGENTS.md cut at 1/8 of the default budget while the context used 3,124 of
    7,372 tokens; the notice named no folder nor figure, the model was not told it could read the rest. The
    room the tools leave of half the budget is the cap; the notice's contextBudget holds the file whole; the cut
    says file_read's offset where the rest starts (decision 480)."""
    workspace = tmp_path / "workspace"
    workspace.mkdir()
    text = "# Rules\n" + "rule line here, keep it.\n" * 800  # 20,008 bytes
    (workspace / "AGENTS.md").write_text(text, encoding="utf-8")
    prompt = SystemPrompt(workspace)
    budget, tools = int(8192 * 0.9), 1932  # the default model with every group's tools
    cut_text, [note] = prompt.read(budget, tools)
    assert note.startswith("Prompt file workspace/AGENTS.md is 20,008 bytes: only its first 7,016 bytes go"), note
    needed = int(re.search(r"\(contextBudget: (\d+) holds it whole\)$", note).group(1))  # type: ignore[union-attr]
    assert needed % 100 == 0
    assert prompt.read(int(needed * 0.9), tools) == (text.strip(), ())  # that budget holds it whole
    assert prompt.read(int((needed - 100) * 0.9), tools)[1]  # and is the least that does
    head = cut_text[: cut_text.index("\n\n[klaw: the rest of AGENTS.md")]
    offset = int(re.search(r"path 'AGENTS.md', offset=(\d+)\]$", cut_text).group(1))  # type: ignore[union-attr]
    assert text[:offset].rstrip() == head and text[offset:]  # file_read from there reads the rest


async def test_a_prompt_file_that_is_not_utf8_is_left_out_and_named(tmp_path: Path) -> None:
    """adversary29 (decision 503): one byte that is not UTF-8 in SOUL.md failed every turn ("Sorry, something
    went wrong … (error …)", a UnicodeDecodeError in chat.log). Now the file is left out, the turn is answered,
    and the chat, /status and `klaw config check` name it and say to save it as UTF-8."""
    home = tmp_path / "home"
    told: list[str] = []

    async def on_message(message: AgentMessage) -> None:
        told.append(message.text)

    seen: list[str] = []

    def model(messages: Sequence[ChatMessage], info: AgentInfo) -> str:
        seen.append(messages[0].content or "")
        return "ok"

    async with Klaw(home, config=CONFIG, model=FunctionModel(model), on_message=on_message) as agent:
        soul = home / "workspace" / "SOUL.md"
        soul.write_bytes(soul.read_bytes() + b"caf\xe9 in Latin-1\n")
        assert await agent.ask("alice", "hello") == "ok"
        status = await agent.ask("alice", "/status")
    said = "Prompt file workspace/SOUL.md is not UTF-8 text (byte "
    assert said in status and "it is left out of the prompt; save it as UTF-8" in status, status
    assert any(said in line for line in told), told
    assert "Latin-1" not in seen[0] and "# Identity" in seen[0]
    checked = klaw_here(home, "config", "check")
    assert checked.returncode == 0, checked.stderr
    assert f"warning: {said}" in checked.stderr and "Traceback" not in checked.stderr
