"""klaw's own tool groups, the ones `tools.enabled` names besides installed packages', and their providers.

Each group is declared here exactly as a package declares one through the `klaw.tools` entry point
group (klaw/tools/groups.py): a list of functions, or a provider given the `ToolSetup`. What klaw's
groups use beyond the configuration and the home are the engine's services, named by the keys below;
`scheduler`, `subagents` and `messaging` need services that exist only once the turn runner does, so
they are provided later in the start (engine/assembly.py). The keys equal `ALL_TOOL_GROUPS` (a test
checks it), the names config validation accepts without looking for packages.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping

from klaw.home_init import PROTECTED_WORKSPACE
from klaw.scheduling.names import ADD_TOOL
from klaw.scheduling.tools import TaskScheduler, register_scheduler_tools, register_subagent_tools
from klaw.store.send_protocol import SendRepository
from klaw.tools.builtin.clock_tools import current_time
from klaw.tools.builtin.memory_tools import MemoryServices, register_memory_tools
from klaw.tools.builtin.workspace_files import file_list, file_read, file_writer
from klaw.tools.disk_room import DiskRoom
from klaw.tools.docs.index import DocsIndex
from klaw.tools.docs.tools import register_docs_tools
from klaw.tools.groups import GroupProvider, ServiceKey, ToolProvider, ToolSetup
from klaw.tools.host.tool import register_host_exec
from klaw.tools.messaging.send import (
    MessageSender,
    message_targets,
    register_message_tools,
    send_limits,
    target_problem,
)
from klaw.tools.registry import ToolRegistry
from klaw.tools.sandbox.choice import choose_backend
from klaw.tools.sandbox.tool import register_code_execute
from klaw.tools.selection import MCP_SEPARATOR
from klaw.tools.skills.catalogue import SkillCatalogue
from klaw.tools.skills.tools import register_skill_tools
from klaw.tools.web.tools import register_web_fetch, register_web_search

MEMORY = ServiceKey[MemoryServices]("memory")
SKILLS = ServiceKey[SkillCatalogue]("skills")
DOCS = ServiceKey[DocsIndex]("docs")
SCHEDULER = ServiceKey[TaskScheduler]("scheduler")
MESSAGES = ServiceKey[MessageSender]("messages")
SEND_PLACES = ServiceKey[SendRepository]("send_places")  # the store's `sends` (decision 418)


def register_file_tools(
    registry: ToolRegistry, *, allow_prompt_edits: bool = False, room: DiskRoom | None = None
) -> None:
    """`file_read`, `file_write`, `file_list`; `file_write` may change the prompt files and skills/ only
    with `allow_prompt_edits` (`tools.allowPromptEdits`), and writes within `room` (decision 327)."""
    for tool in (file_read, file_writer(() if allow_prompt_edits else PROTECTED_WORKSPACE, room), file_list):
        registry.register(tool)


def _files(setup: ToolSetup) -> None:
    tools = setup.config.tools
    register_file_tools(setup.registry, allow_prompt_edits=tools.allow_prompt_edits, room=DiskRoom.from_config(tools))


def _memory(setup: ToolSetup) -> None:
    register_memory_tools(setup.registry, setup.service(MEMORY))


def _skills(setup: ToolSetup) -> None:
    register_skill_tools(setup.registry, setup.service(SKILLS), max_bytes=setup.config.tools.skills.max_file_bytes)


def _code(setup: ToolSetup) -> None:
    # The prompt files and skills/ go into every turn: code may not change them unless file_write may.
    protected = () if setup.config.tools.allow_prompt_edits else PROTECTED_WORKSPACE
    backend = choose_backend(setup.config.sandbox, setup.home)
    room = DiskRoom.from_config(setup.config.tools)
    register_code_execute(setup.registry, backend, setup.config.sandbox, read_only=protected, room=room)


def _docs(setup: ToolSetup) -> None:
    index = setup.service(DOCS)
    register_docs_tools(setup.registry, index.bundle, index)


def _scheduler(setup: ToolSetup) -> None:
    limits = setup.config.scheduler
    register_scheduler_tools(
        setup.registry,
        setup.service(SCHEDULER),
        max_tasks=limits.max_tasks,
        max_runs_per_day=limits.max_runs_per_day,
        held_tools=_held_here(setup),
        target_problem=functools.partial(target_problem, targets=message_targets(setup.config)),
    )


def _held_here(setup: ToolSetup) -> tuple[str, ...]:
    """The held tools a task may be allowed (schedule_add's `allow_tools`, offered only when there are
    some): those of `tools.approval` registered by now (this group is provided late in the start), and
    MCP servers' (`server__tool`), which join as their servers list them. host_exec, held by default
    (decision 185), so counts only once hostExec.allow offers it."""
    held = setup.registry.held(setup.config.tools.approval, setup.config.tools.approval_waived)
    ordered = dict.fromkeys([*setup.config.tools.approval, *sorted(held)])  # tools.approval's order, then declared
    return tuple(name for name in ordered if name in held and (name in setup.registry.names or MCP_SEPARATOR in name))


def _subagents(setup: ToolSetup) -> None:
    register_subagent_tools(setup.registry, setup.service(SCHEDULER))


def _messaging(setup: ToolSetup) -> None:
    limits = send_limits(setup.config, setup.service(SEND_PLACES))
    register_message_tools(setup.registry, setup.service(MESSAGES), message_targets(setup.config), limits)


BUILTIN_GROUPS: Mapping[str, ToolProvider] = {
    "clock": [current_time],
    "files": GroupProvider(_files, tools=("file_read", "file_write", "file_list")),
    "memory": GroupProvider(
        _memory,
        (MEMORY,),
        ("fetch_conversation_details", "memory_save", "memory_search", "memory_core_get", "memory_core_update"),
    ),
    "scheduler": GroupProvider(_scheduler, (SCHEDULER,), (ADD_TOOL, "schedule_list", "schedule_remove")),
    "subagents": GroupProvider(_subagents, (SCHEDULER,), ("subagent_spawn",)),
    "messaging": GroupProvider(_messaging, (MESSAGES, SEND_PLACES), ("message_send",)),
    "skills": GroupProvider(_skills, (SKILLS,), ("skill_list", "skill_read")),
    "web": GroupProvider(lambda setup: register_web_fetch(setup.registry, setup.config.web), tools=("web_fetch",)),
    "websearch": GroupProvider(
        lambda setup: register_web_search(setup.registry, setup.config.web), tools=("web_search",)
    ),
    "code": GroupProvider(_code, tools=("code_execute",)),
    "host": GroupProvider(
        lambda setup: register_host_exec(setup.registry, setup.config.host_exec), tools=("host_exec",)
    ),
    "docs": GroupProvider(_docs, (DOCS,), ("docs_list", "docs_read", "docs_search")),
}
"""Each of klaw's groups as `tools.enabled` names it → its provider, in the order their tools are offered.
Each provider names the tools it may register (a test checks them), for a held tool of a group not
enabled (decision 330)."""
