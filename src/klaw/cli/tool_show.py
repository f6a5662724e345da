"""`klaw tools NAME`: one tool, or one tool group, with what the model is told and the arguments it takes.

NAME may be a tool offered (or not) to the chat's model, an enabled group (its tools, each shown), a group
not enabled (klaw's own, or an installed package's: its row and what enabling it offers), or a tool of such
a group: `klaw tools forecast` said "no tool" while `weather`, not enabled, offered it (lefts55, decision 510).
Each tool says its group, its description, its arguments and whether a call waits for the person's /approve.
"""

from __future__ import annotations

import difflib
import json
from collections.abc import Collection, Sequence
from typing import TYPE_CHECKING

import typer

from klaw.cli.context import fail

if TYPE_CHECKING:
    from klaw.engine.tool_listing import ToolInventory
    from klaw.llm.messages import ToolSpec
    from klaw.store.records import ChatRef
    from klaw.tools.inventory import ToolRow


def show_one(inventory: ToolInventory, origin: str, name: str, as_json: bool, held: Collection[str]) -> None:
    """Print NAME's tool or group (`held`: tools.approval, for a tool of a group not enabled); exit 1 when
    nothing has that name."""
    from klaw.terminal_text import one_line
    from klaw.tools.inventory import APPROVAL_SOURCE
    from klaw.tools.plugin_preview import BROKEN

    head = {"chat": str(inventory.chat), "origin": origin}
    row = next((row for row in inventory.rows if row.name == name), None)
    if row is not None and row.source == APPROVAL_SOURCE:  # only tools.approval names it: a group's, not enabled?
        row = None if _of_a_group_not_enabled(inventory.rows, name, held) is not None else row
    members = [row for row in inventory.rows if row.group == name and row.name != name]
    if row is not None:
        broken = row.reason.startswith(BROKEN)  # an installed plugin that cannot import: exit 1 (decision 540)
        if as_json:
            typer.echo(json.dumps({**head, **row.to_json()}, indent=2))
            if broken:
                raise typer.Exit(1)
            return
        lines = _tool_lines(row, held=held)
        if broken:
            typer.echo("\n".join(one_line(line) for line in lines))
            raise typer.Exit(1)
    elif members:  # an enabled group: its tools for this chat
        if as_json:
            typer.echo(json.dumps({**head, "group": name, "rows": [row.to_json() for row in members]}, indent=2))
            return
        lines = [f"{name} is a tool group ({members[0].source}); its tools for {inventory.chat}:"]
        for member in members:
            lines += ["", *_tool_lines(member, held=held)]
    else:
        found = _of_a_group_not_enabled(inventory.rows, name, held)
        if found is None:
            _unknown(inventory, origin, name)
        elif as_json:
            typer.echo(json.dumps({**head, **found[0].to_json()}, indent=2))
            return
        else:
            lines = _tool_lines(*found, held=held)
    typer.echo("\n".join(one_line(line) for line in lines))  # an MCP server's words shown, never obeyed


def _tool_lines(row: ToolRow, later: str = "", *, held: Collection[str] = ()) -> list[str]:
    """A tool's row, its group, what the model is told, its arguments and its approval. `later`: why its
    arguments are not known yet (a group not enabled whose provider builds them). `held`: tools.approval, so a
    tool held only because its author marked it is said to be (decision 540)."""
    from klaw.tools.inventory import APPROVAL_SOURCE, render_line
    from klaw.tools.plugin_preview import BROKEN, INSTALLED_NOT_ENABLED
    from klaw.tools.schema_text import argument_lines

    lines = [render_line(row)]
    if row.group:
        lines.append(f"Group: {row.group} ({row.source})")
    if row.source != APPROVAL_SOURCE and (row.parameters is not None or later):
        if row.needs_approval and row.name not in held:  # held by its author's mark, not your list
            lines.append(
                "Approval: each call waits for your /approve (its author marked it requires_approval;"
                " tools.approvalWaived would let it run unasked)."
            )
        else:
            lines.append(
                "Approval: each call waits for your /approve (tools.approval holds it)."
                if row.needs_approval
                else "Approval: none; a call runs without asking (tools.approval does not hold it)."
            )
    if row.description:
        lines.append(row.description)
    if row.parameters is not None:
        arguments = argument_lines(row.parameters)
        lines.append("Arguments (a JSON object):" if arguments else "It takes no arguments.")
        lines += [f"  {line}" for line in arguments]
    elif row.reason == INSTALLED_NOT_ENABLED:  # a plugin's group: what enabling it offers (decision 501)
        return lines + _installed_group_tools(row.name)
    elif later:
        lines.append(later)
    elif row.reason.startswith(BROKEN):
        lines.append("Its tools cannot be shown: its import fails (above); enabling it would fail the same way.")
    else:
        lines.append("Its arguments cannot be shown: klaw has not loaded it as a tool.")
    return lines


def _of_a_group_not_enabled(rows: Sequence[ToolRow], name: str, held: Collection[str]) -> tuple[ToolRow, str] | None:
    """NAME as a tool of a group no model is offered: klaw's own (its tools' names are known; their arguments
    when the group is a plain list), else an installed package's whose list, imported as `klaw tools GROUP`
    imports it, has it. None when no such group offers it."""
    from klaw.tools.builtin.groups import BUILTIN_GROUPS
    from klaw.tools.groups import GroupProvider
    from klaw.tools.plugin_preview import INSTALLED_NOT_ENABLED, tools_of_installed
    from klaw.tools.schema import function_tool

    off = {row.name: row for row in rows if row.state == "not offered" and row.reason and not row.group}
    for group, provider in BUILTIN_GROUPS.items():
        if group not in off:
            continue
        if isinstance(provider, GroupProvider):
            if name in provider.tools:
                later = f"Its arguments are shown once {group} is in tools.enabled (its tools are built then)."
                return _not_enabled_row(name, off[group], None, held), later
            continue
        for fn in provider if isinstance(provider, Sequence) else ():
            if getattr(fn, "__name__", "") == name:
                return _not_enabled_row(name, off[group], function_tool(fn, name, None).spec, held), ""
    for group, row in off.items():
        if row.reason == INSTALLED_NOT_ENABLED and not isinstance(found := tools_of_installed(group), str):
            spec = next((spec for spec in found if spec.name == name), None)
            if spec is not None:
                return _not_enabled_row(name, row, spec, held), ""
    return None


def _not_enabled_row(name: str, group_row: ToolRow, spec: ToolSpec | None, held: Collection[str]) -> ToolRow:
    from klaw.tools.inventory import ToolRow

    group = group_row.name
    return ToolRow(
        name,
        group_row.source,
        "not offered",
        name in held,
        f"a tool of the group {group}, which tools.enabled does not name",
        f"add {group} to tools.enabled",
        spec.description if spec is not None else "",
        dict(spec.parameters) if spec is not None else None,
        group,
    )


def _unknown(inventory: ToolInventory, origin: str, name: str) -> None:
    """No tool and no group has NAME: said with the closest names, or with the MCP servers whose tools only a
    running engine lists."""
    if origin == "engine.yaml" and (servers := _servers_not_started(inventory)):
        fail(_not_listed_here(name, inventory.chat, servers), code=1)
    names = [row.name for row in inventory.rows] + [row.group for row in inventory.rows if row.group]
    near = difflib.get_close_matches(name, list(dict.fromkeys(names)), n=3)
    hint = f" (did you mean {', '.join(near)}?)" if near else ""
    fail(f"no tool or tool group {name!r} for {inventory.chat}{hint}: `klaw tools` lists them", code=1)


def _servers_not_started(inventory: ToolInventory) -> list[str]:
    """The enabled MCP servers of a listing built without an engine: their tools are unknown here."""
    from klaw.config import MCP_GROUP_PREFIX

    return [
        row.name.removeprefix(MCP_GROUP_PREFIX)
        for row in inventory.rows
        if row.name.startswith(MCP_GROUP_PREFIX) and row.state == "not started"
    ]


def _not_listed_here(name: str, chat: ChatRef, servers: list[str]) -> str:
    """An unknown name with no engine running and MCP servers enabled: it may be one of their tools, which
    only a running engine lists (`server__tool`); "no tool" alone sent a person to a listing without it."""
    owner = next((server for server in servers if name.startswith(f"{server}__")), None)
    plural = "s" if len(servers) > 1 else ""
    whose = f"it may be a tool of MCP server{plural} {', '.join(servers)}"
    if owner is not None:
        whose = f"it would be MCP server {owner}'s"
    return (
        f"no tool {name!r} for {chat} here: {whose}, and MCP servers' tools are listed while the engine runs"
        " (none is running here): start it (klaw serve, or klaw engine) and run `klaw tools` again"
    )


def _installed_group_tools(group: str) -> list[str]:
    """The tools an installed group not enabled would offer, each with its arguments, or why they cannot be shown."""
    from klaw.tools.plugin_preview import tools_of_installed
    from klaw.tools.schema_text import argument_lines

    found = tools_of_installed(group)
    if isinstance(found, str):
        return [f"Its tools cannot be shown: {found}."]
    lines = [f"Its tools once {group} is in tools.enabled:"]
    for spec in found:
        arguments = argument_lines(spec.parameters)
        lines.append(f"{spec.name}: {spec.description.splitlines()[0] if spec.description else ''}")
        lines.append("  Arguments (a JSON object):" if arguments else "  It takes no arguments.")
        lines += [f"    {line}" for line in arguments]
    return lines
