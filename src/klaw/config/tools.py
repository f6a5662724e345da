"""The sections of what the agent can do: `scheduler:` and `tools:` (groups, plugins)."""

from __future__ import annotations

import re
from collections.abc import Collection
from importlib.metadata import entry_points
from typing import Literal, get_args
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from pydantic import Field, field_validator, model_validator

from klaw.config.base import Section
from klaw.config.channels import telegram_id_refused


class SchedulerConfig(Section):
    """Scheduled tasks (`scheduler.db`): the zone cron expressions are read in, and the misfire policy.

    Misfires coalesce: a task whose fire times passed while the engine was down (or busy) runs once,
    if its latest missed time is at most `misfireGraceSeconds` ago, else waits for its next time.
    """

    timezone: str | None = Field(
        default=None, description="IANA zone for cron expressions, e.g. Europe/Berlin; null = the host's zone."
    )
    misfire_grace_seconds: int = Field(default=300, ge=0)
    max_tasks: int = Field(default=50, ge=0, description="Most tasks the agent may create (schedule_add).")
    max_runs_per_day: int = Field(
        default=1440,
        ge=0,
        description="Most runs of all tasks together in any 24 hours: schedule_add refuses a task that would"
        " exceed it, and runs over it (fired or spawned) do not start.",
    )

    @model_validator(mode="after")
    def _known_zone(self) -> SchedulerConfig:
        if self.timezone is not None:
            try:
                ZoneInfo(self.timezone)
            except (ZoneInfoNotFoundError, ValueError):
                raise ValueError(
                    f"unknown time zone {self.timezone!r}: use an IANA name such as Europe/Berlin"
                ) from None
        return self


ToolGroup = Literal[
    "clock",
    "files",
    "memory",
    "scheduler",
    "subagents",
    "messaging",
    "skills",
    "web",
    "websearch",
    "code",
    "host",
    "docs",
]
# `websearch` is on when available: offered once web.search names a provider; so are `code` (a sandbox
# works here, sandbox:) and `host` (an allow-list given, hostExec:).
ALL_TOOL_GROUPS: tuple[ToolGroup, ...] = get_args(ToolGroup)
_CHANNEL = re.compile(r"^[a-z0-9-]{1,32}$")  # as klaw/store/records.py checks channel names
_TOOL_NAME = re.compile(r"^[a-zA-Z0-9_-]{1,64}$")  # as klaw/tools/schema.py checks them
TOOL_PLUGIN_GROUP = "klaw.tools"  # the entry point group through which installed packages offer tools


def installed_tool_plugins() -> frozenset[str]:
    """The names installed packages offer tools under (klaw/tools/groups.py loads them)."""
    return frozenset(point.name for point in entry_points(group=TOOL_PLUGIN_GROUP))


# A name in `tools.enabled` (or `models.<id>.tools`) that is neither a built-in group, nor `mcp:<server>` (checked
# against the mcp section by EngineConfig), nor an installed plugin is not a mistake in the file: it is the name of
# a plugin uninstalled since (or lost with a rebuilt environment), and refusing the whole file for it stopped every
# command, `klaw memory list` too, and would have put a service in a restart loop (newcomer21, decision 501). The
# engine runs without that group, as without a plugin whose import fails, and `klaw config check`, `klaw tools` and
# /status name it failed with the group it may be a slip for (klaw/tools/group_failures.py).
ToolGroupNames = tuple[str, ...]


class SkillsConfig(Section):
    """Skills (`workspace/skills/<name>/SKILL.md`, docs/skills.md): the context layer listing them and
    the size of what skill_read returns."""

    budget_tokens: int = Field(
        default=500, ge=0, description="Tokens the skills layer (each skill's name and description) may take."
    )
    max_file_bytes: int = Field(
        default=65536, ge=1024, description="Largest SKILL.md or skill file read; a larger SKILL.md is skipped."
    )


class ToolsConfig(Section):
    """Which tools the model is offered, by group: every schema is sent with every model call.

    A small-context model can drop the groups it does not need (the scheduler's three tools cost
    ~380 tokens a call); `[]` offers none, for a model without tool calling. The groups' tools are
    listed in `klaw.tools.builtin.groups`.
    """

    enabled: ToolGroupNames = Field(
        default=ALL_TOOL_GROUPS,
        description="Tool groups offered to the model: clock, files, memory, scheduler, subagents, messaging,"
        " skills, web, websearch, code, host, docs, the name of an installed tool plugin (entry point group"
        f" {TOOL_PLUGIN_GROUP}), or mcp:<server> for a server of the mcp section.",
    )

    allow_prompt_edits: bool = Field(
        default=False,
        description="Let file_write and code_execute change SOUL.md, IDENTITY.md, AGENTS.md and the skills of"
        " workspace/skills/, which go into every turn of every chat (off: an instruction injected into one turn"
        " cannot persist there).",
    )
    skills: SkillsConfig = SkillsConfig()
    workspace_quota_mb: int = Field(
        default=2048,
        ge=1,
        description="Most the workspace may hold, in MiB (its files' and folders' blocks on disk): file_write and"
        " code_execute refuse to go past it, and a sandbox run that does is stopped; what it wrote is kept and named"
        " (decision 327).",
    )
    workspace_quota_files: int = Field(
        default=100_000,
        ge=1,
        description="Most files, folders and symlinks the workspace may hold (a hard-linked file once): empty files"
        " take no blocks but use up the disk's inodes. file_write and code_execute refuse to go past it, and a"
        " sandbox run that does is stopped (decision 361).",
    )
    disk_floor_mb: int = Field(
        default=512,
        ge=0,
        description="Free space, in MiB, kept on the workspace's disk for klaw's own files (klaw.db, the"
        " conversation log): a tool write that would leave less is refused, a sandbox run that does is stopped"
        " (decision 327).",
    )
    approval: tuple[str, ...] = Field(
        default=("host_exec",),
        description="Tools the engine holds until the person answers /approve or /deny in the chat (any tool"
        " name: host_exec, an MCP server's server__tool, a plugin's tool); host_exec unless a list leaves it out"
        " (decision 185). A scheduled task's run has nobody to ask: these tools are denied there unless the task"
        " was created allowing them.",
    )
    approval_waived: tuple[str, ...] = Field(
        default=(),
        description="Tools whose author declared they need approval (a plugin's or a program's tool marked"
        " requires_approval) that you let run without asking; tools.approval holds any tool whatever its author"
        " declared (decision 540).",
    )
    max_calls_per_response: int = Field(
        default=32,
        ge=1,
        le=1000,
        description="Most tool calls run from one model answer; each call past them gets a result saying it was"
        " not run and why, and the model goes on (decision 284).",
    )
    approval_timeout_seconds: float = Field(
        default=300.0, gt=0, le=86_400, description="No answer to an approval question within this time: denied."
    )

    message_targets: tuple[str, ...] | None = Field(
        default=None,
        description="Chats message_send may write to, as channel:chat_id; null = the person's own chats (web:main,"
        " the Telegram allow-list, the console).",
    )
    message_sends_per_turn: int = Field(
        default=3,
        ge=1,
        le=1000,
        description="Most messages message_send sends in one turn (a chat's, or a scheduled task's run); each past"
        " it is refused with the cap and when it frees up (decision 389).",
    )
    message_sends_per_chat_per_hour: int = Field(
        default=10,
        ge=1,
        le=100_000,
        description="Most messages message_send sends into any one chat in an hour, from all chats and tasks"
        " together, counted in the store (an engine restart keeps the count); each past it is refused, saying"
        " when the next may go (decisions 389, 418).",
    )

    @field_validator("message_targets")
    @classmethod
    def _chat_targets(cls, targets: tuple[str, ...] | None) -> tuple[str, ...] | None:
        for target in targets or ():
            channel, sep, chat_id = target.partition(":")
            if not sep or not chat_id.strip() or not _CHANNEL.match(channel) or channel == "scheduler":
                raise ValueError(f"{target!r} is not a chat: write channel:chat_id, e.g. telegram:123456789")
            if channel == "telegram" and (refused := telegram_id_refused(chat_id.strip())) is not None:
                raise ValueError(refused)  # the words a typed chat gets (decision 510)
        return targets

    @field_validator("approval", "approval_waived")
    @classmethod
    def _tool_names(cls, names: tuple[str, ...]) -> tuple[str, ...]:
        bad = [name for name in names if not _TOOL_NAME.match(name)]
        if bad:
            raise ValueError(f"{bad[0]!r} is not a tool name: use 1-64 letters, digits, '_' or '-'")
        return tuple(dict.fromkeys(names))


WORKSPACE_WRITERS = ("file_write",)
"""klaw's tools that write the workspace and nothing else; code run by code_execute writes it as well."""


def writes_unheld(held: Collection[str], offered: Collection[str]) -> str | None:
    """A warning when `tools.approval` holds a workspace writer (file_write) while code_execute is offered
    unheld: code it runs writes the same files without asking, so the hold is one a person would believe
    covers every write and does not (adversary30, decision 515). Valid all the same: it may be meant."""
    writers = [name for name in WORKSPACE_WRITERS if name in held]
    if not writers or "code_execute" not in offered or "code_execute" in held:
        return None
    return (
        f"tools.approval holds {' and '.join(writers)}, but code_execute is offered without asking you, and code"
        " it runs can create, change and delete any file in the workspace (all but the prompt files and skills/)"
        " unasked. Add code_execute to tools.approval to be asked before code runs too, or take code out of"
        " tools.enabled"
    )
