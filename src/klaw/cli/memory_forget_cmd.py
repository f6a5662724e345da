"""`klaw memory forget`: erase an exchange, a segment or a saved memory from the command line.

The same `Forgetting` as `/forget` (database rows, indexes, vectors, summaries, the log's lines, a
tombstone so `klaw reindex` never brings the text back). It refuses while an engine serves the home:
the engine holds klaw.db open, appends to the same log files under its own locks and keeps copies
of vectors and recent contexts in memory, none of which a second process can safely change under
it. `/forget` in the chat does the same work inside the engine.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer
from rich.console import Console

from klaw.cli.context import fail, open_store_or_exit, stored_home_or_exit
from klaw.config import DatabaseConfig
from klaw.home import KlawHome
from klaw.memory.forgetting import ForgetKind  # typer reads the choices from it; the module is light

if TYPE_CHECKING:  # loaded by the commands that use them, so `klaw --help` loads none of it
    from klaw.memory.forgetting import ForgetOutcome, ForgetPlan
    from klaw.store.records import ChatRef


def register_forget(app: typer.Typer) -> None:
    app.command("forget")(forget)


MAX_ID = 2**63 - 1


def _stored_id(value: int) -> int:
    """An id a database can hold (SQLite's integers: a larger one cannot even be looked up). Checked here,
    not as typer's min/max, whose range would fill the help line with 9223372036854775807."""
    if not 1 <= value <= MAX_ID:
        raise typer.BadParameter(f"{value} is not an id: ids are whole numbers from 1 up")
    return value


def forget(
    kind: Annotated[ForgetKind, typer.Argument(help="What to forget: exchange, segment or memory.")],
    target_id: Annotated[
        int,
        typer.Argument(
            metavar="ID",
            callback=_stored_id,
            show_default=False,
            help="Its id, as memory_search and the inspector show.",
        ),
    ],
    chat: Annotated[
        str | None,
        typer.Option("--chat", help="Only if it belongs to this chat (channel:chat_id), e.g. console:me."),
    ] = None,
    yes: Annotated[bool, typer.Option("--yes", "-y", help="Do not ask for confirmation.")] = False,
) -> None:
    """Erase an exchange, segment or saved memory everywhere: database, search indexes, summaries, log."""
    from klaw.memory.forgetting import ForgetError

    home, loaded, path = stored_home_or_exit("there is nothing to forget")
    owner = _chat(chat) if chat is not None else None
    console = Console(markup=False)

    def confirm(plan: ForgetPlan) -> bool:
        console.print(f"This erases {plan.label} of {plan.chat}: {plan.describe()}, for good.", highlight=False)
        return yes or typer.confirm("Forget it?", default=False)

    try:
        outcome = asyncio.run(_forget(home, path, loaded.config.database, kind, target_id, owner, confirm))
    except ForgetError as exc:
        fail(f"cannot forget: {exc}", code=1)
    except _EngineRunning as running:
        fail(
            f"{running}. Or type `/forget {kind.value} {target_id}` in one of its chats instead (it forgets"
            " everywhere, the running engine included).",
            code=1,
        )
    if outcome is None:
        console.print("Nothing was forgotten.", highlight=False)
        raise typer.Exit(1)
    assert outcome.plan is not None
    console.print(
        f"Forgot {outcome.plan.label}: erased from klaw.db, its search indexes and summaries, and from the"
        f" conversation log ({outcome.files_rewritten} log file(s) rewritten). A tombstone in the log keeps"
        " `klaw reindex` from bringing it back.",
        highlight=False,
    )


class _EngineRunning(Exception):
    pass


async def _forget(
    home: KlawHome,
    path: Path,
    database: DatabaseConfig,
    kind: ForgetKind,
    target_id: int,
    chat: ChatRef | None,
    confirm: Callable[[ForgetPlan], bool],
) -> ForgetOutcome | None:
    from klaw.engine_presence import held_message, holding_home
    from klaw.home_lock import HomeHeldError
    from klaw.memory.conversation_log import open_log
    from klaw.memory.forgetting import Forgetting
    from klaw.memory.ingestion import Ingestion
    from klaw.store.records import utc_now

    try:
        async with holding_home(home, "klaw memory forget"):  # no engine starts while the log is rewritten
            store = await open_store_or_exit(path, database)
            try:
                log = open_log(home.conversations, kept_by_store=store.keeps_log)
                forgetting = Forgetting(Ingestion(log, store), utc_now)
                plan = await forgetting.plan(kind, target_id, chat)
                if not confirm(plan):
                    return None
                return await forgetting.forget(plan)
            finally:
                await store.aclose()
    except HomeHeldError as exc:
        raise _EngineRunning(held_message(home, exc.holder)) from None


def _chat(text: str) -> ChatRef:
    from klaw.store.records import ChatRef

    channel, sep, chat_id = text.partition(":")
    try:
        if not sep:
            raise ValueError("write the chat as channel:chat_id, e.g. console:me")
        return ChatRef(channel, chat_id)
    except ValueError as exc:
        fail(f"--chat {text!r}: {exc}")
