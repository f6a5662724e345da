"""The tools a chat's model is offered this turn, with where each comes from and what is missing:
`/tools` in any chat, the socket's `tools` query (`klaw tools` against a running engine), `Klaw.tools`.

With no engine running, `klaw tools` builds the same registry in its own process (`listing_without_engine`):
every enabled group's provider is called once, as an engine's start calls it, but bound to services
that are not started (nothing of it is ever called), no MCP server is started and the home is not held
(docs/decisions/238-tools-listing.md).
"""

from __future__ import annotations

import logging
import os
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from klaw.config import MCP_GROUP_PREFIX, EngineConfig, McpServerConfig
from klaw.engine.config_drift import RESTART_UNDER_ROWS, ConfigFileNote
from klaw.engine.frame_dispatch import QueryError
from klaw.engine.sessions import model_in_force
from klaw.engine.tool_assembly import docs_index, provide_late_groups, skill_catalogue, tool_registry
from klaw.home import KlawHome
from klaw.llm.catalogue import ModelCatalogue
from klaw.log_format import held_back
from klaw.store.protocol import Storage
from klaw.store.records import ChatRef
from klaw.tools.builtin.groups import DOCS, MEMORY, MESSAGES, SCHEDULER, SEND_PLACES, SKILLS
from klaw.tools.groups import ServiceKey
from klaw.tools.inventory import APPROVAL_SOURCE, ToolRow, groups_line, render_lines, tool_rows
from klaw.tools.mcp.servers import ServerState, server_address
from klaw.tools.selection import ToolSelection
from klaw.tools.skills.catalogue import SkillCatalogue

# An enabled server's row when no engine runs: nothing here starts a command or connects to a URL, so
# what it lists is unknown until an engine does (klaw serve, klaw engine, klaw chat).
NOT_STARTED = "no engine runs to start it: an engine starts its command when it runs, and its tools are listed then"
NOT_CONNECTED = "no engine runs to connect to it: an engine connects to its URL when it runs, and lists its tools then"


@dataclass(frozen=True, slots=True)
class ToolInventory:
    """A chat's tools as its model gets them: `model` (the chat's, or routing.default) and the rows."""

    chat: ChatRef
    model: str
    rows: list[ToolRow]
    changed: bool = False  # engine.yaml changed since the engine started: the rows are what it loaded
    groups_line: str = ""  # the list adding every group not offered, said once under the rows (decision 480)

    def to_json(self) -> dict[str, Any]:
        return {"model": self.model, "rows": [row.to_json() for row in self.rows], "groups_line": self.groups_line}

    def text(self) -> str:
        """`/tools`'s answer: a heading, then each row on one line, then the groups' line."""
        heading = f"Tools for {self.chat} (model {self.model}):"
        under = [self.groups_line] if self.groups_line else []
        if self.changed:  # once, under the rows, which keep their own fixes (decision 489)
            under.append(RESTART_UNDER_ROWS)
        return "\n".join([heading, *(f"- {line}" for line in render_lines(self.rows)), *under])


@dataclass(frozen=True, slots=True)
class ToolListing:
    """The engine's view: its registry and groups, its MCP servers' states, its skills."""

    config: EngineConfig
    catalogue: ModelCatalogue
    store: Storage | None  # the chat's /model choice; None: every chat is on routing.default
    selection: ToolSelection
    servers: Callable[[], list[ServerState]]
    skills: SkillCatalogue | None
    # engine.yaml as the engine's configuration was read from it (None: no engine, or a config not from the file)
    config_note: ConfigFileNote | None = None

    async def inventory(self, chat: ChatRef) -> ToolInventory:
        """Read only: a chat never seen gets no session from being asked about. With engine.yaml changed since
        the start, the rows are marked `changed`: each keeps its own fix (written for the file the engine
        loaded), and the restart is said once under them, with a fix the file already holds applying then
        (decision 445 replaced every fix with "restart", hiding those the edit had nothing to do with: 489)."""
        state = await self.store.sessions.get(chat) if self.store is not None else None
        model = model_in_force(self.catalogue, state.model if state else None)
        rows = self.rows(model)
        changed = self.config_note is not None and self.config_note.changed()
        return ToolInventory(chat, model, rows, changed, self.every_group_line(model))

    def rows(self, model: str) -> list[ToolRow]:
        return tool_rows(
            self.selection,
            model,
            groups_field=groups_field(self.config, model),
            approval=self.selection.registry.held(self.config.tools.approval, self.config.tools.approval_waived),
            servers=self.servers(),
            skills=self.skills.current() if self.skills is not None else None,
        )

    def every_group_line(self, model: str) -> str:
        """`groups_line` for `model`: the list adding every group not offered."""
        return groups_line(self.selection, model, groups_field(self.config, model))

    def not_tools(self, model: str) -> list[str]:
        """The `tools.approval` names no tool of `model` has (misspelt, or a group's not enabled: they hold nothing)."""
        return [row.name for row in self.not_tool_rows(model)]

    def not_tool_rows(self, model: str) -> list[ToolRow]:
        """`not_tools`' rows, each saying why (a group not enabled, or no tool at all) and the fix."""
        return [row for row in self.rows(model) if row.source == APPROVAL_SOURCE]

    def handlers(self) -> dict[str, Callable[[ChatRef, str], Awaitable[str]]]:
        """`/tools`, for the command handler."""

        async def tools(chat: ChatRef, _args: str) -> str:
            return (await self.inventory(chat)).text()

        return {"tools": tools}

    async def answer(self, params: Mapping[str, Any]) -> dict[str, Any]:
        """The socket's `tools` query: `{"channel", "chat_id"}` → the chat's inventory as JSON."""
        channel, chat_id = params.get("channel"), params.get("chat_id")
        if not isinstance(channel, str) or not isinstance(chat_id, str):
            raise QueryError("name the chat: channel and chat_id")
        try:
            chat = ChatRef(channel, chat_id)
        except ValueError as exc:
            raise QueryError(str(exc)) from None
        inventory = await self.inventory(chat)
        groups = groups_in_force(self.config, inventory.model)
        return {**inventory.to_json(), "groups": groups, "config_changed": inventory.changed}


def groups_field(config: EngineConfig, model: str) -> str:
    """Where `model`'s groups are set: its own `models.<id>.tools`, else `tools.enabled`."""
    own = config.models.get(model)
    return f"models.{model}.tools" if own is not None and own.tools is not None else "tools.enabled"


def groups_in_force(config: EngineConfig, model: str) -> list[str]:
    """The groups `groups_field` sets for `model`, as `config` says: what `klaw tools` compares between the
    running engine's config and engine.yaml now, so a file changed since the start is said to be."""
    own = config.models.get(model)
    return list(own.tools if own is not None and own.tools is not None else config.tools.enabled)


def default_groups(config: EngineConfig, model: str) -> tuple[str, ...] | None:
    """The groups `model` is offered when nothing chose them (no `models.<id>.tools`, no `tools.enabled`
    in engine.yaml or the environment): klaw's built-in default list, which `klaw tools` says is in force
    so a newcomer does not take it for a choice of their own; None when something chose them."""
    own = config.models.get(model)
    chosen = (own is not None and own.tools is not None) or "enabled" in config.tools.model_fields_set
    return None if chosen else tuple(config.tools.enabled)


class _NotStarted:
    """Stands for an engine service while the tools are only listed: providers bind it, nothing calls it."""

    def __getattr__(self, name: str) -> Any:
        raise RuntimeError("no engine is running: a tool listed by `klaw tools` is never called")


# The loggers that say, for an engine's log, a group left out or a skill skipped: a listing made without an
# engine has each of them as a row, and its command (`klaw tools`, `klaw config check`) says it once, there.
ROW_LOGGERS = ("klaw.tools.groups", "klaw.tools.skills.catalogue")


def listing_without_engine(
    home: KlawHome, config: EngineConfig, chat: ChatRef, model: str, service_sets: frozenset[str] = frozenset()
) -> ToolInventory:
    """What an engine started now would offer `chat` on `model`, built here without holding the home; the
    log lines of `ROW_LOGGERS` are held back (their rows say the same: said twice, a newcomer saw).
    `service_sets`: variables KLAW_HOME/service.env sets, which the service's engine has though this shell
    may not (an MCP server's key there is no start mistake)."""
    with held_back(*ROW_LOGGERS, level=logging.CRITICAL):
        return _listing(home, config, chat, model, service_sets)


def _listing(
    home: KlawHome, config: EngineConfig, chat: ChatRef, model: str, service_sets: frozenset[str]
) -> ToolInventory:
    skills = skill_catalogue(home, config, logged=False)
    selection = selection_without_engine(home, config, skills)
    enabled = set(config.tool_groups)
    servers = [
        _not_started(name, server, home.workspace, service_sets)
        if f"{MCP_GROUP_PREFIX}{name}" in enabled
        else ServerState(name, enabled=False, phase="not enabled")
        for name, server in config.mcp.servers.items()
    ]
    listing = ToolListing(config, ModelCatalogue.from_config(config), None, selection, lambda: servers, skills)
    return ToolInventory(chat, model, listing.rows(model), groups_line=listing.every_group_line(model))


def selection_without_engine(home: KlawHome, config: EngineConfig, skills: SkillCatalogue | None) -> ToolSelection:
    """Every enabled group's tools as an engine's start provides them, bound to services never started (no MCP
    server's tools: they are listed when an engine connects): `klaw tools`, and `klaw config check`'s budget
    check (decision 500)."""
    idle = _NotStarted()
    services: dict[ServiceKey[Any], object] = {MEMORY: idle}
    for key, service in ((SKILLS, skills), (DOCS, docs_index(home, config, None))):
        if service is not None:
            services[key] = service
    selection = tool_registry(home, config, services, ())
    provide_late_groups(home, config, selection, {SCHEDULER: idle, MESSAGES: idle, SEND_PLACES: idle})
    return selection


def _not_started(name: str, server: McpServerConfig, workspace: Path, service_sets: frozenset[str]) -> ServerState:
    """An enabled server as listed without an engine: not started, or failed when its program is not there."""
    from klaw.tools.mcp.transport import start_mistake  # the MCP SDK: only with a server enabled (decision 411)

    url = server_address(server)
    env = {**os.environ, **dict.fromkeys(service_sets, "set in service.env")}
    if (missing := start_mistake(name, server, workspace, env)) is not None:
        reason = f"it cannot start: {missing}"
        return ServerState(name, enabled=True, phase="not started", reason=reason, final=True, url=url)
    reason = NOT_CONNECTED if server.url else NOT_STARTED
    return ServerState(name, enabled=True, phase="not started", reason=reason, url=url)
