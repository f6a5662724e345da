"""`klaw tools`: the tools a chat's model is offered, where each comes from, which wait for approval,
and what is missing and why (klaw/tools/inventory.py builds the rows; `/tools` gives the same list).

A running engine is asked over its socket (the `tools` query): its registry is the truth, with its MCP
servers as they are now. With none answering, the same registry is built in this process without
holding the home, as an engine started now would build it (engine/tool_listing.py; decision 238).
"""

from __future__ import annotations

import asyncio
import json
from dataclasses import dataclass
from typing import TYPE_CHECKING, Annotated

import typer
from rich.table import Table

from klaw.cli.context import fail, home_from_env, load_or_exit, stdout_console
from klaw.cli.service_env import SERVICE_ENV, names_in

if TYPE_CHECKING:  # loaded by the command, so `klaw --help` loads none of it
    from klaw.config import EngineConfig
    from klaw.engine.tool_listing import ToolInventory
    from klaw.home import KlawHome
    from klaw.store.records import ChatRef
    from klaw.tools.inventory import ToolRow

QUERY_TIMEOUT_SECONDS = 30.0


@dataclass(frozen=True)
class Listed:
    inventory: ToolInventory
    origin: str  # "engine" (asked over the socket) or "engine.yaml" (built here)
    note: str  # where the rows come from, for the heading
    changed: str = ""  # engine.yaml sets other groups than the running engine read: said after the rows
    defaults: str = ""  # nothing chose the groups: klaw's defaults are in force, said after the rows


def tools(
    name: Annotated[
        str | None, typer.Argument(help="One tool's row, what the model is told of it and the arguments it takes.")
    ] = None,
    chat: Annotated[
        str | None,
        typer.Option("--chat", help="The chat as channel:chat_id (default: this user's `klaw chat` console chat)."),
    ] = None,
    as_json: Annotated[
        bool,
        typer.Option("--json", help="Print JSON: chat, model, origin and the rows (each tool's with its parameters)."),
    ] = False,
) -> None:
    """The tools a chat's model is offered (source, approval), and those not offered, failed plugins and
    MCP servers, and skills, each with why and how to fix it; exit 1 when a group or skill failed to load.
    `klaw tools NAME` shows one tool and the arguments it takes (what `!NAME {json}` gives the stand-in)."""
    from klaw.channels.console import console_chat
    from klaw.scheduling.names import parse_chat_target

    home = home_from_env()
    config = load_or_exit(home).config
    try:
        ref = parse_chat_target(chat) if chat is not None else console_chat()
    except ValueError as exc:
        fail(f"--chat: {exc}")
    listed = asyncio.run(_listed(home, config, ref))
    _say_broken(listed.inventory.rows, name)
    if name is not None:
        from klaw.cli.tool_show import show_one

        show_one(listed.inventory, listed.origin, name, as_json, config.tools.approval)
        return
    rows = listed.inventory.rows
    if as_json:
        data = {"chat": str(ref), "origin": listed.origin, **listed.inventory.to_json()}
        for key in ("changed", "defaults"):
            if getattr(listed, key):
                data[key] = getattr(listed, key)
        typer.echo(json.dumps(data, indent=2))
    else:
        _print(listed)
    if not as_json:
        for note in (listed.changed, listed.defaults):
            if note:
                typer.echo(note, err=True)
    if any(row.state == "failed" for row in rows):
        raise typer.Exit(1)


def _say_broken(rows: list[ToolRow], name: str | None) -> None:
    """Each installed group not enabled (only NAME's, when one is named) said broken when its import fails
    (decision 540): imported here, bounded, as `klaw tools NAME` imports one to show its tools."""
    from klaw.tools.plugin_preview import broken_row

    for index, row in enumerate(rows):
        if name is None or row.name == name:
            rows[index] = broken_row(row)


async def _listed(home: KlawHome, config: EngineConfig, chat: ChatRef) -> Listed:
    from klaw.cli.chat_model import chat_model
    from klaw.engine.tool_listing import listing_without_engine
    from klaw.engine_presence import engine_answers, home_holder

    why = "none is running; no MCP server is started or connected to here"
    if await engine_answers(home.socket_path):
        try:
            inventory, groups = await _ask_engine(home, chat)
        except (OSError, EOFError, TimeoutError, ValueError) as exc:
            why = f"the engine on {home.root} did not answer: {_why(exc)}"
        else:
            changed = _changed(config, inventory, groups)
            if inventory.changed:  # any setting, not only the groups (decision 445)
                from klaw.engine.config_drift import RESTART_UNDER_ROWS

                changed = RESTART_UNDER_ROWS
            defaults = "" if changed else _defaults(home, config, inventory.model)
            return Listed(inventory, "engine", f"from the engine running on {home.root}", changed, defaults)
    elif (holder := await home_holder(home)) is not None:
        why = f"{holder.describe()} holds {home.root} without a socket to ask"
    model = (await chat_model(home, config, chat)).model_id
    in_service = frozenset(names_in(home.root / SERVICE_ENV))  # the service's engine has them
    inventory = await asyncio.to_thread(listing_without_engine, home, config, chat, model, in_service)
    note = f"as an engine started now would offer them ({why})"
    return Listed(inventory, "engine.yaml", note, defaults=_defaults(home, config, model))


def _defaults(home: KlawHome, config: EngineConfig, model: str) -> str:
    """What to say when nothing chose `model`'s groups: the rows are klaw's built-in defaults, not the
    person's choice, and where to choose others; empty when engine.yaml (or a KLAW__ variable) chose."""
    from klaw.engine.tool_listing import default_groups

    groups = default_groups(config, model)
    if groups is None:
        return ""
    where = "there is no engine.yaml" if not home.config_file.exists() else "engine.yaml sets no tools.enabled"
    return (
        f"No tool groups are chosen for this home ({where} in {home.root}), so klaw's defaults are in force:"
        f" {', '.join(groups) or '[]'}. To choose others, list them in engine.yaml's tools.enabled"
        " (e.g. tools: {enabled: [clock, files, memory]}; [] offers none), or one model's in"
        f" models.{model}.tools; docs/tools.md says what each group reaches."
    )


def _changed(config: EngineConfig, inventory: ToolInventory, groups: list[str] | None) -> str:
    """What to say when engine.yaml now sets other groups than the running engine uses (the file edited
    after it started: its rows' fixes asked for what the file already said, a newcomer found); empty
    when they agree, or when an older engine does not say."""
    from klaw.engine.tool_listing import groups_field, groups_in_force

    now = groups_in_force(config, inventory.model)
    if groups is None or sorted(groups) == sorted(now):
        return ""
    field = groups_field(config, inventory.model)
    return (
        f"engine.yaml's {field} ({', '.join(now) or '[]'}) is not what the running engine uses"
        f" ({', '.join(groups) or '[]'}): it read the file when it started (or a program gave it its own"
        " config). The rows are the running engine's; restart it to apply the file."
    )


async def _ask_engine(home: KlawHome, chat: ChatRef) -> tuple[ToolInventory, list[str] | None]:
    """One `tools` query on a connection of its own (it never says hello, so no replies come to it): the
    chat's inventory, and the groups the engine's config sets for its model (None from an older engine)."""
    from klaw.engine.frames import QueryFrame
    from klaw.engine.one_query import ask
    from klaw.engine.tool_listing import ToolInventory
    from klaw.tools.inventory import ToolRow

    params = {"channel": chat.channel, "chat_id": chat.chat_id}
    frame = await ask(home.socket_path, QueryFrame(id="tools-1", query="tools", params=params), QUERY_TIMEOUT_SECONDS)
    if frame.error is not None:
        raise ValueError(frame.error)
    data = frame.data if isinstance(frame.data, dict) else {}
    model, rows = data.get("model"), data.get("rows")
    if not isinstance(model, str) or not isinstance(rows, list):
        raise ValueError("its answer holds no tool rows")
    groups = data.get("groups")
    read = [str(name) for name in groups] if isinstance(groups, list) else None
    rows_read = [ToolRow.from_json(row) for row in rows if isinstance(row, dict)]
    line = data.get("groups_line")  # an older engine: none, its rows each hold their own list
    changed = data.get("config_changed") is True
    return ToolInventory(chat, model, rows_read, changed, line if isinstance(line, str) else ""), read


def _why(exc: BaseException) -> str:
    from klaw.engine.one_query import EngineRefused

    return str(exc) if isinstance(exc, ValueError | EngineRefused) else type(exc).__name__


def _print(listed: Listed) -> None:
    from klaw.terminal_text import one_line
    from klaw.tools.inventory import render_lines

    inventory = listed.inventory
    console = stdout_console(highlight=False)
    heading = f"Tools for {inventory.chat} (model {inventory.model}), {listed.note}:"
    if not console.is_terminal:
        # Piped (into grep, a bug report): a heading, then each row whole on one line, never folded at
        # rich's default 80 columns (as `klaw config show` keeps a setting whole).
        under = [inventory.groups_line] if inventory.groups_line else []
        typer.echo("\n".join([heading, *render_lines(inventory.rows), *under]))
        return
    console.print(heading, soft_wrap=True)
    table = Table()
    for column in ("tool", "source", "state", "approval", "why / fix"):
        table.add_column(column, overflow="fold", no_wrap=column in ("tool", "state"))  # a name is never cut
    for row in inventory.rows:
        why = row.reason + (f" (fix: {row.fix})" if row.fix else "")
        cells = (row.name, row.source, row.state, "asks you" if row.needs_approval else "", why)
        table.add_row(*(one_line(cell) for cell in cells))  # an MCP server's error is shown, never obeyed (296)
    console.print(table)
    if inventory.groups_line:
        console.print(inventory.groups_line, soft_wrap=True)
