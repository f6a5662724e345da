"""`klaw memory forget`: erase an exchange, a segment or a saved memory from the command line.

The same `Forgetting` as `/forget` (database rows, indexes, vectors, summaries, the log's lines, a
tombstone so `klaw reindex` never brings the text back). It refuses while an engine serves the home:
the engine holds klaw.db open, appends to the same log files under its own locks and keeps copies
of vectors and recent contexts in memory, none of which a second process can safely change under
it. An engine answering on its socket is asked to forget instead (memory_forget_socket.py), as
`/forget` in the chat would.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from klaw.cli.context import asked, fail, open_store_or_exit, stdout_console, stored_home_or_exit
from klaw.home import KlawHome
from klaw.log_format import held_back
from klaw.memory.forget_targets import ForgetError, ForgetKind, typed_target  # light: typer reads the choices
from klaw.store.errors import StoreNotSetUp

if TYPE_CHECKING:  # loaded by the commands that use them, so `klaw --help` loads none of it
    from klaw.config import DatabaseConfig
    from klaw.memory.forget_notes import NotedForget
    from klaw.memory.forgetting import ForgetOutcome, ForgetPlan, Forgetting
    from klaw.store.protocol import Storage
    from klaw.store.records import ChatRef


def register_forget(app: typer.Typer) -> None:
    app.command("forget")(forget)


def _typed_id(context: typer.Context, value: str | None) -> int | str | None:
    """The id as `/forget` takes it (forget_targets.py): a number for an exchange or segment, a memory's
    id (like 3f9a1c2e) for a memory; a wrong one is a usage error naming what to type."""
    kind = context.params.get("kind")
    if kind is None or value is None:  # the kind itself was refused (typer reports that), or --number names it
        return value
    try:
        return typed_target(ForgetKind(kind), value)
    except ForgetError as exc:
        raise typer.BadParameter(str(exc)) from None


def forget(
    kind: Annotated[ForgetKind, typer.Argument(help="What to forget: exchange, segment or memory.")],
    target_id: Annotated[
        str | None,
        typer.Argument(
            metavar="ID",
            callback=_typed_id,
            show_default=False,
            help="Its id, as klaw memory list and /memory show: a number for an exchange or segment (the id"
            " in 'segment 1 (id 7)'), 8 letters and digits (like 3f9a1c2e) for a memory.",
        ),
    ] = None,
    chat: Annotated[
        str | None,
        typer.Option("--chat", help="Only if it belongs to this chat (channel:chat_id), e.g. console:me."),
    ] = None,
    number: Annotated[
        int | None,
        typer.Option(
            "--number",
            min=1,
            show_default=False,
            help="A segment by its number within --chat instead of its id: the 1 in 'segment 1 (id 7)', as"
            " the web page's Memory tab shows it.",
        ),
    ] = None,
    yes: Annotated[bool, typer.Option("--yes", "-y", help="Do not ask for confirmation.")] = False,
) -> None:
    """Erase an exchange, segment or saved memory everywhere: database, search indexes, summaries, log."""
    home, loaded, path = stored_home_or_exit("there is nothing to forget")
    owner = _chat(chat) if chat is not None else None
    console = stdout_console()
    target, label = _target(path, loaded.config.database, kind, target_id, owner, number)

    def confirm(plan: ForgetPlan) -> bool:
        text = f"This erases {label or plan.label} of {plan.chat} for good: {plan.describe()}."
        console.print(text, highlight=False, markup=False, emoji=False)  # burst:one is no emoji code
        return yes or asked("Forget it?", "add --yes to forget without being asked")

    from klaw.cli.memory_forget_socket import forget_through_engine
    from klaw.memory.forget_words import discard_unfinished_build, erased_from

    if forget_through_engine(home, loaded.config.database, kind, target, owner, confirm, console, label):
        if left := discard_unfinished_build(home, loaded.config.database):
            console.print(left.strip(), highlight=False)
        return

    told: list[str] = []

    def said(words: str) -> None:
        told.append(words)
        console.print(words, highlight=False, markup=False, emoji=False)

    try:
        outcome = asyncio.run(_forget(home, path, loaded.config.database, kind, target, owner, confirm, said))
    except KeyboardInterrupt:  # Ctrl-C; one after the tombstone lets the log's rewrite end first (decision 454)
        if not any(words.startswith("Interrupted") for words in told):  # a second Ctrl-C cut the first's words
            said(f"Interrupted. {_left_words(home, loaded.config.database)}")
        raise typer.Exit(130) from None
    except ForgetError as exc:
        fail(f"cannot forget: {exc}", code=1)
    except StoreNotSetUp as exc:
        fail(str(exc), code=1)
    except _EngineRunning as running:
        if running.elsewhere:  # another home's engine on this SQLite file (decision 536): its chats are not these
            fail(f"{running}; then run klaw memory forget again", code=1)
        fail(
            f"{running}, and it does not answer on its socket. Or type `/forget {kind.value} {target}` in"
            " the chat it belongs to (klaw memory list shows which) instead: it forgets everywhere, the running"
            " engine included.",
            code=1,
        )
    if outcome is None:
        console.print("Nothing was forgotten.", highlight=False)
        raise typer.Exit(1)
    if outcome.plan is None:  # this very forget, interrupted earlier: its log files were rewritten just now
        return
    from klaw.memory.forget_words import runs_left_sentence, tasks_left_sentence

    console.print(
        f"Forgot {label or outcome.plan.label}: {erased_from(loaded.config.database, outcome.files_rewritten)}. A"
        " tombstone in the log keeps `klaw reindex` from bringing it back."
        + outcome.copy
        + discard_unfinished_build(home, loaded.config.database)
        + tasks_left_sentence(_tasks_left(home, outcome.plan))
        + runs_left_sentence(outcome.plan.spawned_runs),
        highlight=False,
    )


def _target(
    path: Path,
    database: DatabaseConfig,
    kind: ForgetKind,
    typed: int | str | None,
    owner: ChatRef | None,
    number: int | None,
) -> tuple[int | str, str | None]:
    """The id to forget and, for a segment, the words naming it (`segment 1 (id 7)`, decision 402): from
    the id typed, or from `--number` within `--chat`; a missing or doubled choice is a usage error."""
    if number is not None and kind is not ForgetKind.SEGMENT:
        fail(f"--number names a segment by its number within --chat; a {kind.value} is named by its id")
    if number is not None and typed is not None:
        fail(
            f"give the segment's id ({typed}) or --number {number}, not both: ids run across all chats,"
            " numbers within one"
        )
    if number is not None and owner is None:
        fail(f"--number {number} counts the segments of one chat: add --chat CHANNEL:CHAT_ID, e.g. --chat web:main")
    if number is None and typed is None:
        how = "or --chat CHANNEL:CHAT_ID --number N (its number within the chat) " if kind is ForgetKind.SEGMENT else ""
        fail(f"name the {kind.value} to forget: its id {how}as `klaw memory list` shows it")
    if kind is not ForgetKind.SEGMENT:
        assert typed is not None
        return typed, None

    async def words() -> tuple[int | str, str | None]:
        from klaw.memory.segment_numbers import id_of_number, number_of, segment_words

        store = await open_store_or_exit(path, database)
        try:
            if number is not None:
                assert owner is not None
                found = await id_of_number(store, owner, number)
                return found, segment_words(number, found)
            assert isinstance(typed, int)
            held = await number_of(store, typed)
            return typed, segment_words(held, typed) if held else None
        finally:
            await store.aclose()

    try:
        return asyncio.run(words())
    except ForgetError as exc:
        fail(f"cannot forget: {exc}", code=1)
    except StoreNotSetUp as exc:  # nothing to forget where klaw never set a database up, left so (450, 467)
        fail(str(exc), code=1)


def _tasks_left(home: KlawHome, plan: ForgetPlan) -> list[str]:
    """The tasks the forgotten records scheduled that scheduler.db still holds (decision 280)."""
    wanted = plan.scheduled_tasks
    if not wanted or not home.scheduler_db.exists():
        return []
    from klaw.scheduling.task_store import ScheduleStore

    scheduled = {task.name for task in ScheduleStore(home.scheduler_db).list()}
    return [name for name in wanted if name in scheduled]


class _EngineRunning(Exception):
    def __init__(self, words: str, elsewhere: bool) -> None:
        super().__init__(words)
        self.elsewhere = elsewhere  # an engine of another home, on the same SQLite file


async def _forget(
    home: KlawHome,
    path: Path,
    database: DatabaseConfig,
    kind: ForgetKind,
    target_id: int | str,
    chat: ChatRef | None,
    confirm: Callable[[ForgetPlan], bool],
    said: Callable[[str], None],
) -> ForgetOutcome | None:
    from klaw.engine_presence import held_message, holding_home, of_another_home
    from klaw.home_lock import HomeHeldError
    from klaw.memory.forgetting import ForgetOutcome

    try:
        # no engine starts while the log is rewritten, nor one of another home on the same SQLite file (536)
        async with holding_home(home, "klaw memory forget", database.backend, database.path):
            store = await open_store_or_exit(path, database)
            try:
                forgetting = _forgetting(home, store, database)
                finished, files = await _finish_pending(forgetting)
                if finished:
                    said(_finished_words(finished, files))
                try:
                    plan = await forgetting.plan(kind, target_id, chat)
                except ForgetError:
                    if any(t == f"{kind.value} {target_id}" and chat in (None, c) for c, t in finished):
                        return ForgetOutcome(None, files)  # the same command again: its interrupted run finished
                    raise
                if not confirm(plan):
                    return None
                try:
                    return await forgetting.forget(plan)
                except asyncio.CancelledError:  # Ctrl-C: `forget` let the log's rewrite end if it had begun
                    said(await _after_ctrl_c(forgetting, plan))
                    raise
                except Exception:  # a full disk, say: how far it got, then the failure's own words (decision 468)
                    with contextlib.suppress(Exception):
                        said(await _after_ctrl_c(forgetting, plan, "Not finished"))
                    raise
            finally:
                await store.aclose()
    except HomeHeldError as exc:
        raise _EngineRunning(held_message(home, exc.holder), of_another_home(home, exc.holder)) from None


def _chat(text: str) -> ChatRef:
    from klaw.store.records import ChatRef

    channel, sep, chat_id = text.partition(":")
    try:
        if not sep:
            raise ValueError("write the chat as channel:chat_id, e.g. console:me")
        return ChatRef(channel, chat_id)
    except ValueError as exc:
        fail(f"--chat {text!r}: {exc}")


def _forgetting(home: KlawHome, store: Storage, database: DatabaseConfig) -> Forgetting:
    from klaw.memory.conversation_log import open_log
    from klaw.memory.forgetting import Forgetting
    from klaw.memory.ingestion import Ingestion
    from klaw.memory.migrated_copy import MigratedCopy
    from klaw.store.records import utc_now

    log = open_log(home.conversations, kept_by_store=store.keeps_log)
    return Forgetting(Ingestion(log, store), utc_now, MigratedCopy(home, database))  # decision 539


async def _finish_pending(forgetting: Forgetting) -> tuple[list[tuple[ChatRef, str]], int]:
    """The forgets an interruption (Ctrl-C twice, a kill) left with the log still holding their text, finished:
    before decision 454 only the next engine start did, and a home copied meanwhile kept the text. Its warning
    is kept quiet while it runs (our words say it, once), and only then: the process's other lines of
    klaw.memory.forgetting (`--verbose`'s "forgot exchange 7 …") stay as they were."""
    from klaw.memory.forget_notes import Left

    noted = await forgetting.notes.read()
    pending = [(n.chat, n.target) for n in noted if n.left in (Left.LOG, Left.NOTE)]  # a done one's note too
    if not pending:
        return pending, 0
    with held_back("klaw.memory.forgetting"):
        return pending, await forgetting.finish_pending()


async def _after_ctrl_c(forgetting: Forgetting, plan: ForgetPlan, stopped: str = "Interrupted") -> str:
    """What a forget stopped part-way (Ctrl-C; a failure such as a full disk: `stopped` "Not finished") left."""
    from klaw.memory.forget_notes import Left, not_stored_words

    noted = await forgetting.notes.read()
    for left in noted:
        if left.left is Left.NOT_STORED and (left.chat, left.target) == (plan.chat, plan.label):
            return not_stored_words(left) if stopped == "Not finished" else f"{stopped}. {not_stored_words(left)}"
    if pending := [(n.chat, n.target) for n in noted if n.left is Left.LOG]:
        return f"{stopped}. {pending_words(pending)}"
    try:
        await forgetting.plan(plan.kind, plan.target_id, plan.chat)
    except ForgetError:  # gone: the tombstone was stored, and the rewrite it began ended
        return f"{stopped}, once {plan.said} was forgotten: it is out of the database, search and the log."
    return f"{stopped}. Nothing was forgotten."


def _finished_words(finished: list[tuple[ChatRef, str]], files: int) -> str:
    named = "; ".join(f"{target} of {chat}" for chat, target in finished)
    return (
        f"Finished what an interrupted forget left: the text of {named} is out of the log now ({files} log file(s)"
        " rewritten)."
    )


def pending_words(pending: list[tuple[ChatRef, str]]) -> str:
    """What an interrupted forget left and the command that finishes it (`klaw log check`, an interrupted forget)."""
    named = "; ".join(f"{target} of {chat}" for chat, target in pending)
    return (
        f"An interrupted forget left the log still holding the text of {named}: gone from the database and search,"
        f" not yet from the log. `klaw memory forget {pending[0][1]} --yes` finishes it (so do any other"
        " `klaw memory forget`, `klaw reindex` and the next engine start)."
    )


def _left_words(home: KlawHome, database: DatabaseConfig) -> str:
    """What a forget interrupted before its own words left: the log's text still to take out, or nothing."""
    from klaw.memory.forget_notes import Left, not_stored_words
    from klaw.store.protocol import StorageError

    try:
        noted = pending_forgets(home, database)
    except StorageError as exc:
        return f"Whether it forgot anything could not be read ({exc}); `klaw log check` says once it can."
    if pending := [(n.chat, n.target) for n in noted if n.left is Left.LOG]:
        return pending_words(pending)
    if unstored := [n for n in noted if n.left is Left.NOT_STORED]:
        return not_stored_words(unstored[0])
    return "Nothing was forgotten."


def pending_forgets(home: KlawHome, database: DatabaseConfig) -> list[NotedForget]:
    """The forgets an interruption left noted, each with how far it got (read only; none begun are left
    out): none where there is no database yet (nothing was forgotten in it). A database that is there but
    cannot be opened raises `StorageError`, whose words say why: the caller says the check was not made,
    never that nothing is left (decision 460)."""
    from klaw.memory.forget_notes import Left
    from klaw.store.backend import open_storage

    path = home.database_file(database.path)

    async def read() -> list[NotedForget]:
        try:
            store = await open_storage(path, database)
        except StoreNotSetUp:  # left as it is: nothing was forgotten in it (decision 467)
            return []
        try:
            return [n for n in await _forgetting(home, store, database).notes.read() if n.left is not Left.NOTHING]
        finally:
            await store.aclose()

    return asyncio.run(read())


def finish_interrupted_forgets(home: KlawHome, database: DatabaseConfig, command: str) -> str | None:
    """`command` (`klaw reindex`) finishes first what an interrupted forget left in the log, holding the home;
    the words saying so, None when nothing was left (or the command's own refusal will say why it cannot)."""
    from klaw.engine_presence import holding_home
    from klaw.home_lock import HomeHeldError
    from klaw.store.backend import open_storage
    from klaw.store.protocol import StorageError

    path = home.database_file(database.path)

    async def finish() -> str | None:
        async with holding_home(home, command, database.backend, database.path):
            try:
                store = await open_storage(path, database)
            except StoreNotSetUp:  # left as it is: nothing to finish (decision 467)
                return None
            try:
                finished, files = await _finish_pending(_forgetting(home, store, database))
            finally:
                await store.aclose()
        return _finished_words(finished, files) if finished else None

    try:
        return asyncio.run(finish())
    except (StorageError, HomeHeldError):
        return None


def noted_words(noted: list[NotedForget]) -> list[str]:
    """What `klaw log check` says of the forgets a stop left noted (decision 468)."""
    from klaw.memory.forget_notes import Left, not_stored_words, note_left_words

    pending = [(n.chat, n.target) for n in noted if n.left is Left.LOG]
    words = [pending_words(pending)] if pending else []
    words += [not_stored_words(n) for n in noted if n.left is Left.NOT_STORED]
    return words + [note_left_words(n) for n in noted if n.left is Left.NOTE]
