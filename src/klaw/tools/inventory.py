"""What a model is offered, row by row, and what it is not and why: `klaw tools`, `/tools`, `Klaw.tools`.

One row per tool registered (klaw's groups, packages' `klaw.tools` groups, MCP servers' tools, a
program's own), per tool the configuration asks for but cannot offer (no sandbox, no allow-list), per
group that failed to load (a plugin not installed or raising on load), per MCP server not serving, and
per skill (read with `skill_read`). Each row says where it comes from, whether a call waits for the
person's `/approve` (`tools.approval`, decision 107), and, when it is not offered, why and what to do.
Built from the engine's own parts (the registry, the groups' record, the MCP links, the skill scan),
so it says what the model gets, not what engine.yaml hopes for (decision 238).
"""

from __future__ import annotations

import copy
from collections.abc import Collection, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any, Literal, get_args

from klaw.config import ALL_TOOL_GROUPS, MCP_GROUP_PREFIX
from klaw.terminal_text import one_line
from klaw.tools.mcp.servers import ServerState
from klaw.tools.selection import MCP_SEPARATOR, ToolSelection
from klaw.tools.skills.catalogue import SkillScan

ToolState = Literal["offered", "not offered", "not started", "unavailable", "failed"]
TOOL_STATES: tuple[ToolState, ...] = get_args(ToolState)

PROGRAM_SOURCE = "program (Klaw(tools=...))"
SKILL_SOURCE = "skill (workspace/skills, read with skill_read)"
APPROVAL_SOURCE = "tools.approval"  # the source of a row for a tools.approval name no tool has
NOT_A_TOOL = "not a tool: tools.approval holds it, but no tool has this name, and a misspelt name holds nothing"


@dataclass(frozen=True, slots=True)
class ToolRow:
    """One tool (or a group, an MCP server, a skill) as the model of a chat sees it.

    `state`: `offered` (the model gets it this turn), `not offered` (there, but not for this model),
    `not started` (an MCP server listed with no engine running: nothing is wrong, an engine starts it),
    `unavailable` (asked for, but what it needs is missing), `failed` (a group that did not load).
    `needs_approval`: a call waits for the person's `/approve` (`tools.approval`). `reason` and `fix`:
    one line each, empty for an offered tool. `description` and `parameters` (its JSON schema): what the
    model is told of a registered tool, for `klaw tools NAME` and `--json` (decision 464); empty for a row
    that is not a tool (a group, a server, a skill) or one not registered. `group`: the group a tool's row is
    of (`clock`, `weather`, `mcp:files`), so `klaw tools GROUP` shows an enabled group's tools (decision 510);
    empty for a row that is no group's tool, and from an older engine."""

    name: str
    source: str
    state: ToolState
    needs_approval: bool = False
    reason: str = ""
    fix: str = ""
    description: str = field(default="", compare=False)
    parameters: Mapping[str, Any] | None = field(default=None, compare=False)
    group: str = field(default="", compare=False)

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> ToolRow:
        """A row as the engine's socket sent it; ValueError for anything else."""
        texts = {key: data.get(key, "") for key in ("name", "source", "reason", "fix")}
        state, approval = data.get("state"), data.get("needs_approval", False)
        if not all(isinstance(value, str) for value in texts.values()) or state not in TOOL_STATES:
            raise ValueError("a tool row needs name, source, reason and fix as text and a known state")
        if not isinstance(approval, bool):
            raise ValueError("a tool row's needs_approval is true or false")
        description, parameters = data.get("description", ""), data.get("parameters")  # an older engine: none
        group = data.get("group", "")
        return cls(
            group=group if isinstance(group, str) else "",
            state=state,
            needs_approval=approval,
            description=description if isinstance(description, str) else "",
            parameters=parameters if isinstance(parameters, dict) else None,
            **texts,
        )


def tool_rows(
    selection: ToolSelection,
    model_id: str,
    *,
    groups_field: str,
    approval: Collection[str],
    servers: Sequence[ServerState],
    skills: SkillScan | None,
) -> list[ToolRow]:
    """The rows for `model_id`: its groups are `groups_field`'s (`tools.enabled`, or `models.<id>.tools`);
    `servers`: the configured MCP servers' states; `skills`: the workspace's skills when the group is on."""
    groups = selection.model_groups(model_id)
    held = frozenset(approval)
    rows = []
    for spec in selection.registry.specs():
        group = selection.group_of(spec.name)
        source, told = _source(selection, group), copy.deepcopy(dict(spec.parameters))
        if group is None or group in groups:
            row = ToolRow(spec.name, source, "offered", spec.name in held, "", "", spec.description, told, group or "")
        else:
            reason = f"{groups_field} for model {model_id} does not name {group}"
            fix = f"add {group} to {groups_field}, or /model to a model that has it"
            held_now = spec.name in held
            row = ToolRow(spec.name, source, "not offered", held_now, reason, fix, spec.description, told, group)
        rows.append(row)
    for name, why in selection.registry.unavailable.items():
        noted = selection.groups.noted_by(name)
        fix = selection.registry.unavailable_fix(name)
        rows.append(ToolRow(name, _source(selection, noted), "unavailable", name in held, why, fix, group=noted or ""))
    for group, failure in selection.groups.failures.items():
        rows.append(ToolRow(group, failure.source.describe(), "failed", False, failure.reason, failure.fix))
    for note in selection.groups.installed_unused():
        rows.append(ToolRow(note.source.group, note.source.describe(), "not offered", False, note.reason, note.fix))
    rows += _builtin_unused(selection, model_id, groups_field)
    rows += [shown for state in servers if (shown := _server_row(state)) is not None]
    if skills is not None:
        rows += _skill_rows(skills, "skill_read" in selection.names(model_id))
    return rows + _held_unknown(selection, held, servers)


def _builtin_unused(selection: ToolSelection, model_id: str, groups_field: str) -> list[ToolRow]:
    """A row for each of klaw's groups no model is offered, with the list to write: an engine.yaml an older
    `klaw init` wrote names only the groups of its day, and newer ones were off with no word (decision 476)."""
    rows = []
    for group, names in selection.groups.builtin_not_enabled().items():
        tools = f" (its tools: {', '.join(names)})" if names else ""
        reason = f"klaw's group {group}{tools}, which {groups_field} does not name"
        fix = f"add it to {groups_field} (every group at once: the line under the rows; docs/tools.md says what it is)"
        rows.append(ToolRow(group, f"built-in {group}", "not offered", False, reason, fix))
    return rows


def groups_line(selection: ToolSelection, model_id: str, groups_field: str) -> str:
    """The one list that adds every group no model is offered, said once under the rows: a list on each
    row added only its own group, and a person who copied two kept only the second (check52, decision 480);
    empty when every group is offered."""
    missing = list(selection.groups.builtin_not_enabled())
    if not missing:
        return ""
    chosen = [group for group in selection.model_groups(model_id) if not group.startswith(MCP_GROUP_PREFIX)]
    listed = ", ".join(sorted({*chosen, *missing}, key=_group_order))
    return f"To offer every group not offered, set {groups_field}: [{listed}] (or name only those you want)."


def _group_order(group: str) -> tuple[int, str]:
    """klaw's groups in their offered order, then the others by name."""
    return (ALL_TOOL_GROUPS.index(group), "") if group in ALL_TOOL_GROUPS else (len(ALL_TOOL_GROUPS), group)


def _held_unknown(selection: ToolSelection, held: frozenset[str], servers: Sequence[ServerState]) -> list[ToolRow]:
    """A `tools.approval` name no tool has: a misspelt name holds nothing, and the tool it meant runs
    unasked. Left out: `host_exec`, held by default whether its group is on or not (decision 185), and
    a server's `server__tool` while that server has not listed its tools (not started, down)."""
    known = {*selection.registry.names, *selection.registry.unavailable, "host_exec"}
    listing = {state.name for state in servers if state.enabled and state.phase != "ready"}
    rows = []
    for name in sorted(held - known):
        if MCP_SEPARATOR in name and name.split(MCP_SEPARATOR, 1)[0] in listing:
            continue
        if (group := selection.groups.disabled_group_offering(name)) is not None:
            reason = f"a tool of the group {group}, which tools.enabled does not name: tools.approval holds nothing yet"
            fix = f"add {group} to tools.enabled (or take {name} out of tools.approval)"
        elif unlisted := selection.groups.disabled_groups_unlisted():
            reason, fix = _maybe_unlisted(name, unlisted)
        else:
            reason, fix = NOT_A_TOOL, "use a name this list shows (an MCP server's tool is <server>__<tool>)"
        rows.append(ToolRow(name, APPROVAL_SOURCE, "not offered", True, reason, fix))
    return rows


def _maybe_unlisted(name: str, groups: Sequence[str]) -> tuple[str, str]:
    """A held name no tool has while an installed plugin group not enabled offers tools klaw cannot list
    without enabling it (its entry point is a function): the name may be one of its tools, so it is not
    said to be misspelt, and the groups to enable are named (decision 343)."""
    which = f"the group {groups[0]}" if len(groups) == 1 else "one of the groups " + ", ".join(groups)
    return (
        f"no tool offered has this name: it may be a tool of {which}, which tools.enabled does not name (klaw"
        " learns that group's tools only once it is enabled), or it is misspelt: tools.approval holds nothing yet",
        f"add {groups[0] if len(groups) == 1 else 'that group'} to tools.enabled if {name} is its tool (klaw tools"
        " then lists it), else use a name this list shows",
    )


def _source(selection: ToolSelection, group: str | None) -> str:
    if group is None:
        return PROGRAM_SOURCE
    if group.startswith(MCP_GROUP_PREFIX):
        return f"MCP server {group.removeprefix(MCP_GROUP_PREFIX)}"
    source = selection.groups.sources.get(group)
    return source.describe() if source is not None else group


def _server_row(state: ServerState) -> ToolRow | None:
    """A row for a server that is not serving all it lists (its tools have rows of their own)."""
    name, source = f"{MCP_GROUP_PREFIX}{state.name}", f"MCP server {state.name}"
    if not state.enabled:
        return ToolRow(name, source, "not offered", False, "configured, not in tools.enabled", f"add {name} to it")
    if state.phase == "ready":
        if not state.left_out:
            return None
        reason = f"{state.left_out} more tool(s) it lists left out by its tools, maxTools or maxSchemaTokens"
        fix = f"raise mcp.servers.{state.name}.maxTools or maxSchemaTokens, or list the ones wanted in its tools"
        return ToolRow(name, source, "not offered", False, reason, fix)
    reason = state.reason or state.phase
    if state.final:  # engine.yaml's mistake: a failed load, as a plugin's (`klaw tools` and config check exit 1)
        return ToolRow(
            name, source, "failed", False, reason, f"correct mcp.servers.{state.name} in engine.yaml, then restart klaw"
        )
    if state.retry_in is not None:
        reason += f"; klaw tries again in {state.retry_in} s (failure {state.failures})"
    if state.phase == "not started":  # no engine runs: nothing wrong with it (newcomer19, decision 476)
        fix = "run klaw tools while an engine runs (klaw serve, klaw engine) to see its tools"
        return ToolRow(name, source, "not started", False, reason, fix)
    if state.url is not None:  # no log of its own: it runs elsewhere
        fix = f"check that the server at {state.url} runs and answers from this machine"
    elif state.silent:  # nothing in its log to read: only running it shows why (newcomer16)
        fix = (
            f"run its command (mcp.servers.{state.name}.command and args) by hand in a terminal to see what it does;"
            f" raise mcp.servers.{state.name}.startTimeoutSeconds only if it does start there, slowly"
        )
    else:
        fix = f"its own messages are in KLAW_HOME/mcp/{state.name}.log"
    return ToolRow(name, source, "unavailable", False, reason, fix)


def _skill_rows(scan: SkillScan, readable: bool) -> list[ToolRow]:
    rows = [
        ToolRow(skill.name, SKILL_SOURCE, "offered")
        if readable
        else ToolRow(skill.name, SKILL_SOURCE, "not offered", reason="this model is not offered skill_read")
        for skill in scan.skills.values()
    ]
    for problem in scan.errors:
        folder = problem.path.split("/", 1)[0]
        rows.append(ToolRow(folder, SKILL_SOURCE, "failed", False, str(problem), "`klaw skills check` says more"))
    return rows


def render_lines(rows: Sequence[ToolRow]) -> list[str]:
    """Each row on one line, as `/tools` answers and `klaw tools` prints when piped: an MCP server's or a
    plugin's error shown, never obeyed, and kept on its row (decision 296)."""
    return [one_line(render_line(row)) for row in rows]


def render_line(row: ToolRow) -> str:
    line = f"{row.name} [{row.source}]: {row.state}"
    if row.needs_approval and row.source != APPROVAL_SOURCE:  # a name no tool has: nothing waits
        line += " (each call waits for your /approve)"
    if row.reason:
        line += f": {row.reason}"
    if row.fix:
        line += f"; fix: {row.fix}"
    return line
